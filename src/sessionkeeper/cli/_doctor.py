"""
``sessionkeeper doctor PATH [--fix] [--json]``: check transcripts (and sessions directories) and repair
what can be repaired without losing data (DESIGN "CLI", "Reliability and security targets").

Checks form a registry: a :class:`TranscriptCheck` looks at one loaded transcript, a
:class:`DirectoryCheck` at a sessions directory; :func:`default_registry` returns the built-in ones and
other parts (store, config, hygiene) add theirs with :meth:`DoctorRegistry.add`. The transcript checks
build on :func:`sessionkeeper.transcript.load_transcript_bytes` diagnostics: torn tails, invalid and
non-object lines, bad UTF-8, lone surrogates, legacy versions, missing final newline, duplicate ids,
missing parents, ``parentId`` cycles, orphan tool results, repeated headers, entries without id, and
the transcript's write-lock file (in use, or stale).

``--fix`` takes the transcript's write lock, backs the file up (0600, ``<name>.bak.<stamp>``) and
rewrites it atomically: a torn tail is cut, invalid and non-object lines are dropped, bad UTF-8 and lone
surrogates are rewritten as U+FFFD, a v1/v2 file is migrated to v3, a final newline is added. Every
complete line that parses as a JSON object is kept (the backup keeps the rest). Structural findings
(duplicate ids, missing parents, cycles, orphan tool results) are reported, never "fixed" by deleting
data.

A single file recognised as a config (an OpenClaw config or a pi ``settings.json``, by content) gets the
config checks instead (legacy keys, invalid values; ``--fix`` drops the legacy keys after a backup; see
``cli/_doctor_config.py``).

Exit codes: 0 healthy (or everything found was fixed), 1 problems remain, 2 bad input (PATH missing,
or a single file that is neither a transcript nor a config).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import anyio
import attrs
import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sessionkeeper._fs import atomic_write_bytes, backup_file
from sessionkeeper._lockfile import LockInspection
from sessionkeeper.cli._doctor_checks import (
    ConfigCheck,
    ConfigTarget,
    DirectoryCheck,
    DoctorCheck,
    DoctorRegistry,
    Finding,
    TranscriptCheck,
    TranscriptTarget,
    default_registry,
    diagnose_bytes,
    find_problems,
    inspect_lock,
    repair_transcript_bytes,
)
from sessionkeeper.cli._doctor_config import read_config_file, run_config_checks
from sessionkeeper.cli._file_args import TranscriptPath
from sessionkeeper.cli._hints import store_file_hint
from sessionkeeper.cli._json import json_text
from sessionkeeper.cli._main import EXIT_BAD_INPUT, EXIT_ERROR, EXIT_OK, fail
from sessionkeeper.cli._output import console_for_stdout, print_table
from sessionkeeper.exceptions import SessionBusyError, SymlinkRefusedError, TranscriptFormatError
from sessionkeeper.transcript import SessionWriteLock, TranscriptDiagnostics


__all__ = (
    "COMMANDS",
    "ConfigCheck",
    "ConfigTarget",
    "DirectoryCheck",
    "DoctorCheck",
    "DoctorRegistry",
    "DoctorRun",
    "FileReport",
    "Finding",
    "TranscriptCheck",
    "TranscriptTarget",
    "default_registry",
    "diagnose_bytes",
    "doctor_command",
    "inspect_lock",
    "repair_transcript_bytes",
    "run_doctor",
)

_LOCK_TIMEOUT_MS = 5000.0


@attrs.frozen(kw_only=True)
class FileReport:
    """
    The doctor's result for one transcript (or one config file).

    Attributes:
        path: The file.
        kind: ``"transcript"`` or ``"config"``.
        findings: What remains wrong (after ``--fix``, what could not be fixed).
        fixed: What ``--fix`` repaired.
        backup_path: The 0600 backup made before the repair, if any.
        diagnostics: The diagnostics of the (final) file, ``None`` if it is not a transcript.
        busy: ``--fix`` could not take the write lock (nothing was changed).
        changes: For a config, the rewrite's changes (one sentence each).
    """

    path: Path
    kind: Literal["transcript", "config"] = "transcript"
    findings: tuple[Finding, ...] = ()
    fixed: tuple[Finding, ...] = ()
    backup_path: Path | None = None
    diagnostics: TranscriptDiagnostics | None = None
    busy: bool = False
    changes: tuple[str, ...] = ()

    @property
    def healthy(self) -> bool:
        """No problem remains."""
        return not self.busy and not any(f.is_problem for f in self.findings)

    @property
    def status(self) -> str:
        """``healthy``, ``fixed``, ``problems``, ``not-a-transcript`` or ``busy``."""
        if self.busy:
            return "busy"
        if any(f.check == "not-a-transcript" for f in self.findings):
            return "not-a-transcript"
        if not self.healthy:
            return "problems"
        return "fixed" if self.fixed else "healthy"

    def to_json(self) -> dict[str, Any]:
        """Stable ``doctor --json`` form."""
        return {
            "path": str(self.path),
            "kind": self.kind,
            "status": self.status,
            "findings": [f.to_json() for f in self.findings],
            "fixed": [f.to_json() for f in self.fixed],
            "backupPath": str(self.backup_path) if self.backup_path else None,
            "diagnostics": self.diagnostics.to_json() if self.diagnostics else None,
            "changes": list(self.changes),
        }


def _unreadable(path: Path, err: OSError, *, doing: str = "read") -> FileReport:
    """The report of a file that could not be read (permissions, I/O error, removed meanwhile)."""
    reason = err.strerror or str(err) or type(err).__name__
    finding = Finding(check="unreadable", severity="error", message=f"cannot {doing} the file: {reason}")
    return FileReport(path=path, findings=(finding,))


def _check_file(path: Path, registry: DoctorRegistry) -> FileReport:
    try:
        data = path.read_bytes()
    except OSError as err:  # reported for this file; the others are still checked (issue 11)
        return _unreadable(path, err)
    target = diagnose_bytes(path, data, lock=inspect_lock(path))
    return FileReport(
        path=path, findings=tuple(find_problems(target, registry)), diagnostics=target.diagnostics
    )


def _fix_file_locked(path: Path, registry: DoctorRegistry, lock_before: LockInspection | None) -> FileReport:
    target = diagnose_bytes(path, path.read_bytes(), lock=lock_before)
    findings = find_problems(target, registry)
    to_fix = [f for f in findings if f.fixable]
    if target.index is None or not to_fix:
        return FileReport(path=path, findings=tuple(findings), diagnostics=target.diagnostics)
    backup: Path | None = None
    if any(f.check != "lock" for f in to_fix):
        repaired = repair_transcript_bytes(target)
        backup = backup_file(path)
        atomic_write_bytes(path, repaired)
        after = diagnose_bytes(path, repaired)
    else:  # only a stale lock: taking the write lock reclaimed it
        after = attrs.evolve(target, lock=None)
    remaining = find_problems(after, registry)
    left = {f.check for f in remaining}
    return FileReport(
        path=path,
        findings=tuple(remaining),
        fixed=tuple(f for f in to_fix if f.check not in left),
        backup_path=backup,
        diagnostics=after.diagnostics,
    )


async def _fix_file(path: Path, registry: DoctorRegistry, lock_timeout_ms: float) -> FileReport:
    if await anyio.to_thread.run_sync(path.is_symlink):  # never written through (F4): checked, not fixed
        return await _not_fixed_link(path, registry, SymlinkRefusedError(path, what="transcript"))
    lock_before = await anyio.to_thread.run_sync(inspect_lock, path)
    try:
        async with SessionWriteLock.acquire(path, timeout_ms=lock_timeout_ms):
            return await anyio.to_thread.run_sync(_fix_file_locked, path, registry, lock_before)
    except SessionBusyError as err:
        report = await anyio.to_thread.run_sync(_check_file, path, registry)
        busy = Finding(check="busy", severity="error", message=f"not fixed: {err}")
        return attrs.evolve(report, findings=(*report.findings, busy), busy=True)
    except SymlinkRefusedError as err:  # became a link meanwhile
        return await _not_fixed_link(path, registry, err)
    except OSError as err:  # after SessionBusyError (an OSError too): reported, nothing written, go on
        return _unreadable(path, err, doing="read or lock")


async def _not_fixed_link(path: Path, registry: DoctorRegistry, err: SymlinkRefusedError) -> FileReport:
    report = await anyio.to_thread.run_sync(_check_file, path, registry)
    if report.healthy:
        return report
    refused = Finding(check="symlink", severity="error", message=f"not fixed: {err}")
    return attrs.evolve(report, findings=(*report.findings, refused))


def _run_directory_check(check: DirectoryCheck, directory: Path) -> list[Finding]:
    return list(check.check_directory(directory))


def _targets(path: Path) -> tuple[bool, list[Path]]:
    if not path.exists():
        raise FileNotFoundError(f"no such file or directory: {path}")
    if not path.is_dir():
        if not path.is_file():  # a FIFO or device: reading it would never end
            raise TranscriptFormatError("not a regular file (a FIFO, device or socket)", path=path)
        return False, [path]
    found = (p for p in path.glob("*.jsonl") if p.is_file() and not p.name.endswith(".trajectory.jsonl"))
    return True, sorted(found)


@attrs.frozen(kw_only=True)
class DoctorRun:
    """Everything one ``doctor`` invocation found and did."""

    path: Path
    files: tuple[FileReport, ...]
    directory_findings: tuple[Finding, ...] = ()
    fix: bool = False

    @property
    def exit_code(self) -> int:
        """0 when nothing remains to fix, else 1."""
        if any(f.is_problem for f in self.directory_findings):
            return EXIT_ERROR
        return EXIT_OK if all(report.healthy for report in self.files) else EXIT_ERROR

    def to_json(self) -> dict[str, Any]:
        """Stable ``doctor --json`` document (see docs/core.md)."""
        return {
            "path": str(self.path),
            "fix": self.fix,
            "files": [report.to_json() for report in self.files],
            "directoryFindings": [f.to_json() for f in self.directory_findings],
            "summary": {
                "files": len(self.files),
                "healthy": sum(1 for r in self.files if r.status == "healthy"),
                "fixed": sum(1 for r in self.files if r.status == "fixed"),
                "problems": sum(1 for r in self.files if not r.healthy),
            },
            "exitCode": self.exit_code,
        }


async def run_doctor(
    path: Path,
    *,
    fix: bool = False,
    registry: DoctorRegistry | None = None,
    lock_timeout_ms: float = _LOCK_TIMEOUT_MS,
) -> DoctorRun:
    """
    Check a transcript or every ``*.jsonl`` transcript of a directory (``*.trajectory.jsonl`` sidecars
    skipped), and with ``fix`` repair them (see the module docstring). A single file recognised as a config
    (:func:`~sessionkeeper.cli._doctor_config.read_config_file`) gets the registry's config checks instead;
    its one :class:`FileReport` has ``kind="config"``.

    Args:
        path: A transcript file or a sessions directory.
        fix: Repair after a 0600 backup, under each transcript's write lock.
        registry: The checks to run (default: :func:`default_registry`).
        lock_timeout_ms: How long ``fix`` waits for a transcript's write lock (default 5000 ms); a
            transcript whose lock is not acquired is reported ``busy`` and left untouched.

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    registry = registry if registry is not None else default_registry()
    is_dir, files = await anyio.to_thread.run_sync(_targets, path)
    config = None if is_dir else await anyio.to_thread.run_sync(read_config_file, path)
    if config is not None:
        return DoctorRun(path=path, files=(await _config_report(config, registry, fix=fix),), fix=fix)
    reports: list[FileReport] = []
    for file in files:
        if fix:
            reports.append(await _fix_file(file, registry, lock_timeout_ms))
        else:
            reports.append(await anyio.to_thread.run_sync(_check_file, file, registry))
    directory_findings: list[Finding] = []
    if is_dir:
        for check in registry.directory_checks:
            found = await anyio.to_thread.run_sync(_run_directory_check, check, path)
            directory_findings.extend(found)
    return DoctorRun(path=path, files=tuple(reports), directory_findings=tuple(directory_findings), fix=fix)


async def _config_report(target: ConfigTarget, registry: DoctorRegistry, *, fix: bool) -> FileReport:
    found = await anyio.to_thread.run_sync(lambda: run_config_checks(target, registry, fix=fix))
    return FileReport(
        path=target.path,
        kind="config",
        findings=found.findings,
        fixed=found.fixed,
        backup_path=found.backup_path,
        changes=found.changes,
    )


_STYLE = {"healthy": "green", "fixed": "cyan", "problems": "red", "not-a-transcript": "red", "busy": "yellow"}


def _is_config(run: DoctorRun) -> bool:
    return bool(run.files) and run.files[0].kind == "config"


def _render(run: DoctorRun, console: Console) -> None:
    table = Table(title=f"doctor {escape(str(run.path))}", show_lines=False)
    table.add_column("file")
    table.add_column("status")
    table.add_column("findings")
    for report in run.files:
        notes = [f"{f.severity}: {escape(f.message)}" for f in report.findings]
        notes += [f"fixed: {escape(f.message)}" for f in report.fixed]
        if report.backup_path is not None:
            notes.append(f"backup: {escape(report.backup_path.name)}")
        style = _STYLE.get(report.status, "white")
        # piped: the whole path, and the findings on the file's one line
        table.add_row(
            escape(report.path.name if console.is_terminal else str(report.path)),
            f"[{style}]{report.status}[/{style}]",
            ("\n" if console.is_terminal else "; ").join(notes) or "-",
        )
    print_table(console, table)
    for finding in run.directory_findings:
        console.print(f"{finding.severity}: {finding.check}: {escape(finding.message)}")
    data = run.to_json()["summary"]
    directory_problems = sum(1 for f in run.directory_findings if f.is_problem)
    console.print(
        f"{data['files']} {'config file' if _is_config(run) else 'transcript(s)'}: "
        f"{data['healthy']} healthy, {data['fixed']} fixed, "
        f"{data['problems']} with problems"
        + (f"; {directory_problems} store/directory problems" if directory_problems else "")
    )


_EPILOG = """\b
Examples:
  sessionkeeper doctor ~/.openclaw/agents/main/sessions
  sessionkeeper doctor sessions/2f1c7b9e.jsonl --json
  sessionkeeper doctor ~/.openclaw/agents/main/sessions --fix
  sessionkeeper doctor ~/.openclaw/openclaw.json
"""


@click.command("doctor", epilog=_EPILOG)
@click.argument("path", type=TranscriptPath(dir_okay=True))
@click.option("--fix", is_flag=True, help="Back up (0600) and repair what can be repaired without data loss.")
@click.option("--json", "as_json", is_flag=True, help="Print the stable JSON report.")
def doctor_command(path: Path, fix: bool, as_json: bool) -> None:
    """Check a transcript, a sessions directory or a config file; with --fix, repair after a backup.

    Exit codes: 0 healthy or fixed, 1 problems remain, 2 bad input.
    """
    if not path.exists():
        fail(f"no such file or directory: {path}", code=EXIT_BAD_INPUT)
    run = anyio.run(lambda: run_doctor(path, fix=fix))
    if path.is_file() and run.files and run.files[0].status == "not-a-transcript":
        if as_json:
            click.echo(json_text(run.to_json()))
        hint = store_file_hint(path, "doctor")  # a sessions.json given for its directory (issue 11)
        fail(hint or run.files[0].findings[0].message, code=EXIT_BAD_INPUT)
    if as_json:
        click.echo(json_text(run.to_json(), indent=2))
    else:
        _render(run, console_for_stdout(highlight=False))
    click.get_current_context().exit(run.exit_code)


COMMANDS: tuple[click.Command, ...] = (doctor_command,)
