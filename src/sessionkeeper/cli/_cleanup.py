"""
``sessionkeeper sessions cleanup``: store maintenance on a sessions directory, or on a store URL
(``postgresql://``, ``redis://``; its transcripts in ``--transcripts-dir``, else PostgreSQL maintains its
transcript rows and Redis only the entries) (OpenClaw spec §2; DESIGN D6, "CLI JSON" item 6).

Flags combine as in ``openclaw sessions cleanup``: ``--dry-run`` previews without changing anything,
``--enforce`` forces ``mode: enforce`` (otherwise the configured ``session.maintenance.mode`` applies, default
``enforce``), so ``--dry-run --enforce`` previews an enforce run and no flag applies the configured mode. The
``--json`` output has the fields of ``openclaw sessions cleanup --json`` plus ``actions`` (session key ->
``keep`` or the removal reason), ``files``, ``bytesBefore``/``bytesAfter`` and ``warnings``.

On a large store (a sessions directory of at least :data:`LARGE_STORE_FILES` files) a rich progress bar
(transient: it disappears when done) shows the planning, then the file actions, but only when stdout is a
terminal and never with ``--json``, whose output stays pure JSON.
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
from pathlib import Path
from types import TracebackType
from typing import Any, Final, cast

import anyio
import attrs
import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from sessionkeeper._config import load_config
from sessionkeeper.cli._json import json_text
from sessionkeeper.cli._output import console_for_stdout, print_table
from sessionkeeper.cli._sessions import backend_name, plain, sessions_group, store_options
from sessionkeeper.store import (
    BackendName,
    MaintenanceMode,
    MaintenanceReport,
    MaintenanceSettings,
    SessionStore,
    is_store_url,
    redact_url,
    resolve_store_location,
    run_maintenance,
)


__all__ = ("COMMANDS", "LARGE_STORE_FILES", "cleanup_command", "parse_now", "progress_wanted")

LARGE_STORE_FILES: Final = 1000
"""A sessions directory with at least this many files is large enough for a progress bar."""


def progress_wanted(*, as_json: bool, is_terminal: bool, store_files: int) -> bool:
    """
    Whether ``sessions cleanup`` shows its progress bar: stdout is a terminal, no ``--json``, and the
    sessions directory holds at least :data:`LARGE_STORE_FILES` files.
    """
    return is_terminal and not as_json and store_files >= LARGE_STORE_FILES


def _count_files(directory: Path, *, limit: int) -> int:
    """Entries of ``directory``, counting no further than ``limit`` (0 when it cannot be read)."""
    count = 0
    try:
        with os.scandir(directory) as found:
            for _ in found:
                count += 1
                if count >= limit:
                    break
    except OSError:
        return 0
    return count


def _stdout_is_terminal(console: Console) -> bool:
    return console.is_terminal


class _CleanupProgress:
    """A transient rich progress bar fed by :func:`run_maintenance`'s ``progress`` callback."""

    def __init__(self, console: Console) -> None:
        self._bar = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._task = self._bar.add_task("planning maintenance", total=None)

    def __enter__(self) -> _CleanupProgress:
        self._bar.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._bar.stop()

    def __call__(self, done: int, total: int) -> None:
        self._bar.update(self._task, description="archiving and deleting files", completed=done, total=total)


_MAX_NOW_MS: Final = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z, the last instant Python's datetime (and so an archive stamp) can show."""


def parse_now(value: str) -> int:
    """``--now``: epoch milliseconds, or an ISO-8601 time (``2026-09-21T12:00:00Z``; no zone means UTC)."""
    text = value.strip()
    if text.isdigit():
        if int(text) > _MAX_NOW_MS:  # past 9999-12-31: archive stamps and dates cannot be formatted
            raise click.BadParameter(f"{value!r} is after the year 9999", param_hint="--now")
        return int(text)
    try:
        when = _dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is neither epoch ms nor an ISO-8601 time", param_hint="--now"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.UTC)
    return int(when.timestamp() * 1000)


def _agent_id(sessions_dir: Path) -> str:
    parts = sessions_dir.resolve().parts
    if len(parts) >= 3 and parts[-1] == "sessions" and parts[-3] == "agents":
        return parts[-2]
    return "main"


def _print_human(console: Console, report: MaintenanceReport, store_path: str) -> None:
    state = (
        "dry run" if report.dry_run else ("applied" if report.applied else f"{report.mode} mode: not applied")
    )
    console.print(Text("sessions cleanup", style="bold") + plain(f" {store_path} ({report.mode}, {state})"))
    console.print(
        f"entries {report.before_count} -> {report.after_count}; "
        f"files: {len(report.file_actions)} actions; bytes {report.bytes_before} -> {report.bytes_after}"
    )
    changed = {k: v for k, v in report.actions.items() if v != "keep"}
    if changed:
        table = Table("session key", "action")
        for key, reason in changed.items():
            table.add_row(plain(key), reason)
        print_table(console, table)
    if report.file_actions:
        files = Table("file", "action", "reason", "bytes")
        for file_action in report.file_actions:
            label = (
                f"archive -> {file_action.archive_name}" if file_action.archive_name else file_action.action
            )
            files.add_row(plain(file_action.name), plain(label), file_action.reason, str(file_action.size))
        print_table(console, files)
    budget = report.disk_budget
    if budget is not None:
        console.print(
            f"disk budget: {budget.total_bytes_before} -> {budget.total_bytes_after} bytes "
            f"(max {budget.max_bytes}, high water {budget.high_water_bytes})"
        )
    for warning in report.warnings:
        console.print(Text("warning:", style="yellow") + plain(f" {warning}"))


def _with_symlink_warnings(report: MaintenanceReport, files_dir: Path) -> MaintenanceReport:
    """
    ``report`` with a warning for each transcript of a removed entry that is a symbolic link: maintenance
    never archives or deletes through a link (deviation F4), so the link stays; say so, as ``doctor`` does,
    instead of a silent "files: 0 actions".
    """
    ids = {r.session_id for r in report.removals if isinstance(r.session_id, str) and r.session_id}
    if not ids:
        return report
    try:
        links = sorted(
            item.name for item in os.scandir(files_dir) if item.name.endswith(".jsonl") and item.is_symlink()
        )
    except OSError:
        return report
    state = "left" if report.applied else "would be left"
    added = tuple(
        f"{name} is a symbolic link: {state} in place (its entry is removed; a link is never archived or"
        " deleted, deviation F4); remove it by hand"
        for name in links
        if name.removesuffix(".jsonl") in ids or name.split("-topic-")[0] in ids
    )
    return attrs.evolve(report, warnings=(*report.warnings, *added)) if added else report


_EPILOG = """\b
Examples:
  sessionkeeper sessions cleanup --store ~/.openclaw/agents/main/sessions --dry-run
  sessionkeeper sessions cleanup --store ./sessions --enforce --active-key agent:main:main
  sessionkeeper sessions cleanup --store 'postgresql://db/agents' --transcripts-dir ./transcripts --json

\b
--dry-run changes nothing and reports what the enforce run would remove.
"""


@sessions_group.command("cleanup", epilog=_EPILOG)
@functools.partial(store_options, urls=True)
@click.option(
    "--transcripts-dir",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    default=None,
    help=(
        "With a store URL: the directory of its transcripts (without it PostgreSQL maintains its "
        "transcript rows, Redis only the entries)."
    ),
)
@click.option("--dry-run", is_flag=True, help="Preview: report what would be removed, change nothing.")
@click.option("--enforce", is_flag=True, help="Apply in enforce mode even when the configured mode is warn.")
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    default=None,
    help="Config file (openclaw.json layout); session.maintenance is read from it.",
)
@click.option(
    "--now", "now", default=None, help="Evaluate at this time: epoch ms or ISO-8601 (default: now)."
)
@click.option(
    "--active-key", "active_keys", multiple=True, help="Session key that must survive (repeatable)."
)
@click.option(
    "--fix-missing", is_flag=True, help="Also remove entries whose transcript is missing or holds no message."
)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report (docs/maintenance.md).")
def cleanup_command(
    *,
    store_path: Path | str,
    backend: str | None,
    transcripts_dir: Path | None,
    dry_run: bool,
    enforce: bool,
    config_path: Path | None,
    now: str | None,
    active_keys: tuple[str, ...],
    fix_missing: bool,
    as_json: bool,
) -> None:
    """Prune stale entries, cap the store, archive and retire transcripts, enforce the disk budget."""
    settings = MaintenanceSettings.from_config(load_config(config_path))
    now_ms = parse_now(now) if now is not None else None
    mode: MaintenanceMode | None = "enforce" if enforce else None

    console = console_for_stdout()
    url = is_store_url(store_path)
    if url and backend is not None:
        raise click.UsageError("--backend is for sessions directories; a store URL names its backend")
    if not url and transcripts_dir is not None:
        raise click.UsageError(
            "--transcripts-dir is for store URLs; a sessions directory holds its transcripts"
        )
    if url and fix_missing and transcripts_dir is None:
        raise click.UsageError("--fix-missing on a store URL needs --transcripts-dir")
    if url:
        files_dir = transcripts_dir
    else:
        store_file, _ = resolve_store_location(Path(store_path), cast("BackendName | None", backend))
        files_dir = store_file.parent
    show_progress = progress_wanted(
        as_json=as_json,
        is_terminal=_stdout_is_terminal(console),
        store_files=_count_files(files_dir, limit=LARGE_STORE_FILES) if files_dir is not None else 0,
    )
    bar = _CleanupProgress(console) if show_progress else None

    async def run() -> tuple[MaintenanceReport, Path | None, str]:
        # a preview (dry run, warn mode) opens the store read-only: it creates and writes nothing
        read_only = dry_run or (mode or settings.mode) == "warn"
        opened = (
            SessionStore.open(store_path, read_only=read_only, transcripts_dir=transcripts_dir)
            if url
            else SessionStore.open(store_path, backend=backend, read_only=read_only)  # type: ignore[arg-type]
        )
        async with opened as store:
            report = await run_maintenance(
                store,
                settings=settings,
                mode=mode,
                dry_run=dry_run,
                now_ms=now_ms,
                active_keys=active_keys,
                fix_missing=fix_missing,
                progress=bar,
            )
            return report, store.sessions_dir, backend_name(store)

    if bar is not None:
        with bar:
            report, sessions_dir, name = anyio.run(run)
    else:
        report, sessions_dir, name = anyio.run(run)
    if files_dir is not None:
        report = _with_symlink_warnings(report, files_dir)
    shown = redact_url(str(store_path)) if url else str(store_path)
    if as_json:
        payload: dict[str, Any] = {
            "agentId": _agent_id(sessions_dir) if sessions_dir is not None else None,
            "storePath": shown,
            "backend": name,
        }
        payload.update(report.to_json())
        click.echo(json_text(payload, indent=2))
        return
    _print_human(console, report, shown)


COMMANDS: tuple[click.Command, ...] = ()
"""``cleanup`` is attached to the ``sessions`` group; it registers no top-level command."""
