"""
``sessionkeeper demo [--json] [--workdir DIR]``: the main job, end to end, on the bundled sample sessions.

The bundled pi transcripts (``sessionkeeper/_samples/*.jsonl``, read with :mod:`importlib.resources`)
are copied into a work directory (a temporary one unless ``--workdir`` is given) and run through the
library, one :class:`DemoStep` after another: open, context rebuild and token estimates, tree stats,
doctor checks and a torn-tail repair, a durable append, a compaction plan with an extractive summary,
cache-TTL pruning and a silent-reply stream. The bundled files themselves are never modified.

Steps are a list (:data:`DEMO_STEPS`); a later feature adds its step there. A step that raises is
reported as failed, the others still run, and the command exits 1.

The report is deterministic (issue 11): two runs print the same text and the same JSON. Paths in a temporary
work directory are shown under ``<workdir>``, the entries of the v1 sample (which has no ids on disk: ids
are drawn at random when it is migrated in memory, as pi does) by position (``#N``), the appended entry and
the repair backup without their random id and time stamp, and the runtime replay numbers its session ids.
Each step explains every number a newcomer cannot read in its ``notes`` (one line per column).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sessionkeeper._fs import ensure_dir
from sessionkeeper.cli._demo_steps import DEMO_STEPS, DemoContext, DemoStep, StepResult
from sessionkeeper.cli._json import json_text
from sessionkeeper.cli._main import EXIT_BAD_INPUT, EXIT_ERROR, EXIT_OK, fail
from sessionkeeper.cli._output import console_for_stdout, print_table


__all__ = ("COMMANDS", "DEMO_STEPS", "DemoContext", "DemoStep", "StepResult", "demo_command", "run_demo")


async def run_demo(
    workdir: Path,
    *,
    steps: list[DemoStep] | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    hide_workdir: bool = False,
) -> dict[str, Any]:
    """
    Run the demo steps in ``workdir`` (the transcripts go to ``workdir/sessions``).

    Args:
        workdir: The work directory (created 0700 if missing).
        steps: The steps (default :data:`DEMO_STEPS`); the first must copy the samples.
        on_step: Called with each step's JSON record as soon as it is done.
        hide_workdir: Show paths under ``<workdir>`` (for a temporary directory; see :class:`DemoContext`).

    Returns:
        ``{"workdir", "steps": [{"name", "title", "status": "ok"|"failed", "summary", "rows", "data",
        "notes", "error"}], "ok"}``.
    """
    ensure_dir(workdir)
    ctx = DemoContext(workdir=workdir, sessions=workdir / "sessions", hide_workdir=hide_workdir)
    records: list[dict[str, Any]] = []
    for step in steps if steps is not None else DEMO_STEPS:
        record: dict[str, Any] = {"name": step.name, "title": step.title}
        try:
            result = await step.run(ctx)
        except Exception as err:  # a failed step is reported; the others still run
            record |= {
                "status": "failed",
                "summary": "",
                "rows": [],
                "data": {},
                "notes": [],
                "error": f"{type(err).__name__}: {err}",
            }
        else:
            record |= {
                "status": "ok",
                "summary": result.summary,
                "rows": list(result.rows),
                "data": result.data,
                "notes": list(result.notes),
            }
            record["error"] = None
        records.append(record)
        if on_step is not None:
            on_step(record)
    return {"workdir": str(workdir), "steps": records, "ok": all(r["status"] == "ok" for r in records)}


def _print_step(console: Console, index: int, record: dict[str, Any]) -> None:
    style = "green" if record["status"] == "ok" else "red"
    console.rule(f"[{style}]{index}. {escape(record['title'])}[/{style}]")
    if record["status"] != "ok":
        console.print(f"[red]failed:[/red] {escape(record['error'])}")
        return
    rows = record["rows"]
    if rows:
        table = Table(show_header=True, header_style="bold")
        for key in rows[0]:
            table.add_column(key)
        for row in rows:
            table.add_row(*(escape("-" if v is None else str(v)) for v in row.values()))
        print_table(console, table)
    for note in record.get("notes", ()):
        console.print(f"[dim]  {escape(note)}[/dim]")
    console.print(escape(record["summary"]))


_EPILOG = """\b
Examples:
  sessionkeeper demo
  sessionkeeper demo --workdir ./demo-run
  sessionkeeper demo --json
"""


@click.command("demo", epilog=_EPILOG)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of the report.")
@click.option(
    "--workdir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Keep the work files here: a new or empty directory (default: a temporary one, removed afterwards).",
)
def demo_command(as_json: bool, workdir: Path | None) -> None:
    """Run the library on the bundled sample sessions and show what it does."""
    if workdir is not None and workdir.exists() and not workdir.is_dir():
        fail(f"--workdir {workdir} is not a directory", code=EXIT_BAD_INPUT)
    if workdir is not None and workdir.is_dir():
        # The demo writes sessions/, repair/ and runtime/ there: never over someone's files.
        try:
            used = any(workdir.iterdir())
        except OSError as err:
            fail(f"--workdir {workdir}: {err.strerror or err}", code=EXIT_BAD_INPUT)
        if used:
            fail(f"--workdir {workdir} is not empty; give a new or empty directory", code=EXIT_BAD_INPUT)
    console = console_for_stdout(highlight=False)
    counter = iter(range(1, 1000))
    kept = workdir is not None
    where = (
        f"workdir: {workdir}, kept after the demo"
        if kept
        else "workdir: a temporary directory (shown as <workdir>), removed when the demo ends "
        "(--workdir DIR keeps the files)"
    )

    def show(record: dict[str, Any]) -> None:
        _print_step(console, next(counter), record)

    if not as_json:
        console.print(escape(where))
    with tempfile.TemporaryDirectory(prefix="sessionkeeper-demo-") as scratch:
        target = workdir if workdir is not None else Path(scratch)
        report = anyio.run(
            lambda: run_demo(target, on_step=None if as_json else show, hide_workdir=workdir is None)
        )
        if workdir is None:
            report["workdir"] = None
            shutil.rmtree(Path(scratch) / "sessions", ignore_errors=True)
    report["workdirKept"] = kept
    if as_json:
        click.echo(json_text(report, indent=2, default=str))
    else:
        failed = [r["name"] for r in report["steps"] if r["status"] != "ok"]
        console.rule()
        console.print(
            f"{len(report['steps']) - len(failed)} of {len(report['steps'])} steps ok"
            + (f"; failed: {', '.join(failed)}" if failed else "")
        )
        if workdir is not None:
            console.print(f"work files kept in {escape(str(workdir))}")
        else:
            console.print("work files removed (they were in a temporary directory); --workdir DIR keeps them")
    click.get_current_context().exit(EXIT_OK if report["ok"] else EXIT_ERROR)


COMMANDS: tuple[click.Command, ...] = (demo_command,)
