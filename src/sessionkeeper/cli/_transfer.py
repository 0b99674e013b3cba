"""
``sessionkeeper export --store DIR|URL --out DIR`` and ``sessionkeeper import DIR --store DIR|URL``
(issue 13): sessions, entries and transcripts, copied between a sessions directory and a store in a
database (or any two stores) by :func:`~sessionkeeper.store.copy_sessions`: transcripts byte for byte,
entries value for value (each in this library's key order); the source is only read.
docs/postgres.md "Moving a sessions directory into a database" has the rules.

``--dry-run`` reads both stores and writes nothing (the target is opened read-only), reporting what a copy
would do now. ``--json`` prints ``{"source", "target", "dryRun", "copied", "unchanged", "replaced",
"failed", "sessions": [{"sessionKey", "sessionId", "outcome", "transcript", "lines", "bytes", "error":
null | {"type", "message"}}], "droppedKeys", "normalizedKeys", "unreferencedTranscripts"}``.

Exit codes: 0 every session is in the target (copied, or there already); 1 a session failed (another
session in the target's way without ``--overwrite``, an unterminated transcript line, a refused
``sessionFile``: each one named, the others copied), or a store cannot be reached; 2 bad input (a corrupt
source store, an unknown ``--key``, a database target without a place for its transcripts, an ``export``
source URL holding none of its sessions' transcripts without ``--transcripts-dir``, usage).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import click

from sessionkeeper.cli._json import json_text
from sessionkeeper.cli._main import EXIT_BAD_INPUT, EXIT_ERROR, fail
from sessionkeeper.cli._output import escape_controls
from sessionkeeper.exceptions import ConfigError, SessionNotFoundError, StoreCorruptError
from sessionkeeper.store import CopyReport, SessionStore, copy_sessions, is_store_url, redact_url
from sessionkeeper.transcript import MemoryTranscriptStorage


__all__ = ("COMMANDS", "export_command", "import_command")

_F = TypeVar("_F", bound=Callable[..., Any])

_EXPORT_EPILOG = """\b
Examples:
  sessionkeeper export --store 'postgresql://db/agents?store=main' --out ./main-sessions
  sessionkeeper export --store redis://127.0.0.1/0 --transcripts-dir /srv/t --out ./backup
  sessionkeeper export --store ~/.openclaw/agents/main/sessions --out /mnt/copy --key agent:main:main

\b
Writes DIR/sessions.json and the transcripts (DIR is created when absent). A session
DIR already holds differently is refused (exit 1) unless --overwrite; one it holds
identically is left alone, so an interrupted export is simply run again.
"""

_IMPORT_EPILOG = """\b
Examples:
  sessionkeeper import ~/.openclaw/agents/main/sessions --store 'postgresql://db/agents?store=main'
  sessionkeeper import ./backup --store redis://127.0.0.1/0 --transcripts-dir /srv/t
  sessionkeeper import ./old-sessions --store ./new-sessions --json

\b
DIR is only read. A session the target already holds differently is refused (exit 1)
unless --overwrite; one it holds identically is left alone, so an interrupted import
is simply run again. Redis keeps no transcripts: give --transcripts-dir.
"""


def _shown(location: Path | str) -> str:
    return redact_url(str(location)) if is_store_url(location) else str(location)


def _open(location: Path | str, *, transcripts_dir: Path | None, read_only: bool) -> SessionStore:
    if is_store_url(location):
        return SessionStore.open(location, transcripts_dir=transcripts_dir, read_only=read_only)
    return SessionStore.open(location, read_only=read_only)


def _check_transcripts_dir(store: Path | str, transcripts_dir: Path | None) -> None:
    if transcripts_dir is not None and not is_store_url(store):
        raise click.UsageError(
            "--transcripts-dir is for store URLs; a sessions directory holds its transcripts"
        )


async def _check_source_transcripts(src: SessionStore, keys: tuple[str, ...]) -> None:
    """
    Refuse a source URL opened without ``--transcripts-dir`` that holds none of its sessions'
    transcripts: one keeping them in memory only (Redis), or a database whose sessions' transcripts are
    files elsewhere (imported with ``--transcripts-dir``). Exporting it would copy ``sessions.json`` alone.

    Raises:
        ConfigError: Such a source (the CLI exits 2).
    """
    storage = src.transcript_storage()
    if src.sessions_dir is not None:
        return
    hint = "give the directory of its transcripts with --transcripts-dir"
    if isinstance(storage, MemoryTranscriptStorage):
        raise ConfigError(
            f"this store keeps no transcripts (memory only without --transcripts-dir): {hint}", key="store"
        )
    entries = await src.backend.load_all()
    chosen = [entries[key] for key in keys if key in entries] if keys else list(entries.values())
    ids = {entry.session_id for entry in chosen if isinstance(entry.session_id, str)}
    if ids and not ids.intersection(await storage.list_sessions()):
        raise ConfigError(
            f"none of the {len(ids)} sessions has its transcript in this store (were they imported as "
            f"files?): {hint}",
            key="store",
        )


def _run(
    source: Path | str,
    target: Path | str,
    *,
    source_transcripts: Path | None,
    target_transcripts: Path | None,
    keys: tuple[str, ...],
    overwrite: bool,
    dry_run: bool,
) -> CopyReport:
    async def run() -> CopyReport:
        async with (
            _open(source, transcripts_dir=source_transcripts, read_only=True) as src,
            _open(target, transcripts_dir=target_transcripts, read_only=dry_run) as dst,
        ):
            if source_transcripts is None and is_store_url(source):
                await _check_source_transcripts(src, keys)
            return await copy_sessions(src, dst, keys=keys or None, overwrite=overwrite, dry_run=dry_run)

    try:
        return anyio.run(run)
    except StoreCorruptError as err:
        fail(str(err), code=EXIT_BAD_INPUT)
    except SessionNotFoundError as err:
        fail(f"{err} in {_shown(source)}; nothing was copied", code=EXIT_BAD_INPUT)


def _payload(report: CopyReport, source: str, target: str, dry_run: bool) -> dict[str, Any]:
    return {
        "source": source,
        "target": target,
        "dryRun": dry_run,
        **{
            outcome: len(report.with_outcome(outcome))
            for outcome in ("copied", "unchanged", "replaced", "failed")
        },
        "sessions": [
            {
                "sessionKey": session.session_key,
                "sessionId": session.session_id,
                "outcome": session.outcome,
                "transcript": session.transcript,
                "lines": session.lines,
                "bytes": session.size,
                "error": None
                if session.error is None
                else {"type": type(session.error).__name__, "message": str(session.error)},
            }
            for session in report.sessions
        ],
        "droppedKeys": list(report.dropped_keys),
        "normalizedKeys": list(report.normalized_keys),
        "unreferencedTranscripts": list(report.unreferenced_transcripts),
    }


def _finish(report: CopyReport, *, verb: str, source: str, target: str, as_json: bool, dry_run: bool) -> None:
    """Print the report (one summary line, then what needs attention), and exit 1 when a session failed."""
    if as_json:
        click.echo(json_text(_payload(report, source, target, dry_run), indent=2))
    else:
        counts = ", ".join(
            f"{len(report.with_outcome(outcome))} {outcome}"
            for outcome in ("copied", "unchanged", "replaced", "failed")
        )
        prefix = f"dry run, nothing written: would have {verb}" if dry_run else verb
        click.echo(f"{prefix} {len(report.sessions)} sessions from {source} to {target}: {counts}")
        for session in report.failed:
            click.echo(
                f"  failed {escape_controls(session.session_key)}: "
                f"{escape_controls(str(session.error))} ({type(session.error).__name__})"
            )
        if report.dropped_keys:
            click.echo(
                f"  not copied: {len(report.dropped_keys)} sessions.json rows its load drops: "
                + ", ".join(escape_controls(key) for key in report.dropped_keys)
            )
        if report.unreferenced_transcripts:
            click.echo(
                f"  not copied: {len(report.unreferenced_transcripts)} transcripts no entry names: "
                + ", ".join(escape_controls(name) for name in report.unreferenced_transcripts)
            )
    if report.failed:
        if not as_json:
            click.echo(
                f"sessionkeeper: error: {len(report.failed)} sessions "
                + ("would fail" if dry_run else "were not copied (see above; nothing of them was written)"),
                err=True,
            )
        raise SystemExit(EXIT_ERROR)


def _location(ctx: click.Context, param: click.Parameter, value: str) -> Path | str:
    """A store URL (kept as text) or a path (need not exist yet: it is created when written)."""
    return value if is_store_url(value) else Path(value)


_TRANSCRIPTS_DIR = click.Path(path_type=Path, file_okay=False)
_KEY_HELP = "Copy only this session key (repeatable; default: every session)."


def _copy_options(*, target: str) -> Callable[[_F], _F]:
    """
    The options ``export`` and ``import`` share, in this order: ``--key``, ``--overwrite`` (its help names
    ``target``), ``--dry-run``, ``--json``.
    """
    options = (
        click.option("--key", "keys", multiple=True, help=_KEY_HELP),
        click.option(
            "--overwrite", is_flag=True, help=f"Replace a different entry or transcript in {target}."
        ),
        click.option("--dry-run", is_flag=True, help="Report what would be copied; write nothing."),
        click.option("--json", "as_json", is_flag=True, help="Print the JSON report."),
    )

    def apply(command: _F) -> _F:
        for option in reversed(options):  # as stacked decorators: the last listed is applied first
            command = option(command)
        return command

    return apply


@click.command("export", epilog=_EXPORT_EPILOG)
@click.option(
    "--store",
    "store_path",
    required=True,
    metavar="DIR|URL",
    callback=_location,
    help="The store to export: a sessions directory (or its sessions.json / sessions.sqlite), or a "
    "postgresql:// or redis:// store URL (docs/postgres.md). Only read.",
)
@click.option(
    "--transcripts-dir",
    type=_TRANSCRIPTS_DIR,
    default=None,
    help="With a store URL whose transcripts are files: their directory.",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="The sessions directory to write (created when absent).",
)
@_copy_options(target="DIR")
def export_command(
    *,
    store_path: Path | str,
    transcripts_dir: Path | None,
    out_dir: Path,
    keys: tuple[str, ...],
    overwrite: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Copy the sessions of a store (a database, or a sessions directory) into a sessions directory."""
    if not is_store_url(store_path) and not Path(store_path).exists():
        raise click.BadParameter(f"{store_path} does not exist", param_hint="'--store'")
    _check_transcripts_dir(store_path, transcripts_dir)
    report = _run(
        store_path,
        out_dir,
        source_transcripts=transcripts_dir,
        target_transcripts=None,
        keys=keys,
        overwrite=overwrite,
        dry_run=dry_run,
    )
    if not dry_run:
        out_dir.mkdir(parents=True, exist_ok=True)  # --help promises DIR, even for no session
    _finish(
        report,
        verb="exported",
        source=_shown(store_path),
        target=str(out_dir),
        as_json=as_json,
        dry_run=dry_run,
    )


@click.command("import", epilog=_IMPORT_EPILOG)
@click.argument("source_dir", metavar="DIR", type=click.Path(path_type=Path, exists=True))
@click.option(
    "--store",
    "store_path",
    required=True,
    metavar="URL|DIR",
    callback=_location,
    help="The store to write: a postgresql:// or redis:// store URL (docs/postgres.md), or a sessions "
    "directory.",
)
@click.option(
    "--transcripts-dir",
    type=_TRANSCRIPTS_DIR,
    default=None,
    help="With a store URL: the directory for the transcripts (needed where the database keeps none).",
)
@_copy_options(target="the store")
def import_command(
    *,
    source_dir: Path,
    store_path: Path | str,
    transcripts_dir: Path | None,
    keys: tuple[str, ...],
    overwrite: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Copy the sessions of a sessions directory (DIR, only read) into a store (a database, a directory)."""
    _check_transcripts_dir(store_path, transcripts_dir)
    report = _run(
        source_dir,
        store_path,
        source_transcripts=None,
        target_transcripts=transcripts_dir,
        keys=keys,
        overwrite=overwrite,
        dry_run=dry_run,
    )
    _finish(
        report,
        verb="imported",
        source=str(source_dir),
        target=_shown(store_path),
        as_json=as_json,
        dry_run=dry_run,
    )


COMMANDS: tuple[click.Command, ...] = (export_command, import_command)
