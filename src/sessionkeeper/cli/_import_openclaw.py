"""
``sessionkeeper import-openclaw DB --out DIR [--force] [--json]``.

Reads an OpenClaw 2026.8+ agent database (``agents/<agentId>/agent/openclaw-agent.sqlite``, agent schema
14-23, zstd rows included) and writes its sessions as a legacy sessions directory: ``DIR/sessions.json``
and ``DIR/<sessionId>.jsonl``, the files OpenClaw 2026.9.6's own legacy bridge writes. The database is
opened read-only and never written. ``docs/openclaw_import.md`` says how to go back (``openclaw doctor
--fix`` imports a sessions directory).

``--json`` prints ``{"database", "out", "schemaVersion", "agentId", "sessions", "transcripts", "events",
"compressedRows"}``.

Exit codes: 0 written; 1 a write failed; 2 bad input (unknown schema version, unreadable database or row,
a non-empty DIR without ``--force``, an output file that would be DB itself, a symbolic link or a directory
at an output path, a dangling link as DIR). Nothing is written on exit 2. A DIR that is a link to a
directory is followed.
"""

from __future__ import annotations

from pathlib import Path

import click

from sessionkeeper.cli._json import json_text
from sessionkeeper.cli._main import EXIT_BAD_INPUT, fail
from sessionkeeper.exceptions import OpenClawDatabaseError


__all__ = ("COMMANDS", "import_openclaw_command")


_EPILOG = """\b
Examples:
  sessionkeeper import-openclaw ~/.openclaw/agents/main/agent/openclaw-agent.sqlite --out ./main-sessions
  sessionkeeper import-openclaw openclaw-agent.sqlite --out ./main-sessions --force --json
"""


@click.command("import-openclaw", epilog=_EPILOG)
@click.argument("database", metavar="DB", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Sessions directory to write (must be absent or empty unless --force).",
)
@click.option("--force", is_flag=True, help="Write into a non-empty DIR, replacing files of the same name.")
@click.option("--json", "as_json", is_flag=True, help="Print the stable JSON result.")
def import_openclaw_command(database: Path, out_dir: Path, force: bool, as_json: bool) -> None:
    """Write an OpenClaw agent database (DB) as sessions.json + JSONL files (DB is only read)."""
    from sessionkeeper.openclaw import import_openclaw_database  # noqa: PLC0415 - start-up cost

    try:
        report = import_openclaw_database(database, out_dir, overwrite=force)
    except OpenClawDatabaseError as err:
        fail(str(err), code=EXIT_BAD_INPUT)
    except FileExistsError:
        fail(f"{out_dir} is not an empty directory (--force writes into a directory)", code=EXIT_BAD_INPUT)
    except IsADirectoryError as err:
        fail(f"{err.filename}: a directory is in the way of an output file", code=EXIT_BAD_INPUT)
    if as_json:
        payload = {
            "database": str(report.database),
            "out": str(report.out_dir),
            "schemaVersion": report.schema_version,
            "agentId": report.agent_id,
            "sessions": report.sessions,
            "transcripts": report.transcripts,
            "events": report.events,
            "compressedRows": report.compressed_rows,
        }
        click.echo(json_text(payload))
        return
    click.echo(
        f"imported {report.sessions} sessions ({report.transcripts} transcripts, {report.events} events, "
        f"{report.compressed_rows} zstd) from agent schema {report.schema_version} into {report.out_dir}"
    )


COMMANDS: tuple[click.Command, ...] = (import_openclaw_command,)
