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

Exit codes: 0 healthy (or everything found was fixed), 1 problems remain, 2 bad input (PATH missing,
or a single file that is not a transcript).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

import anyio
import attrs
import click
import msgspec
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sessionkeeper._clock import SYSTEM_CLOCK
from sessionkeeper._fs import atomic_write_bytes, backup_file
from sessionkeeper.cli._main import EXIT_BAD_INPUT, EXIT_ERROR, EXIT_OK, fail
from sessionkeeper.exceptions import SessionBusyError, TranscriptFormatError
from sessionkeeper.transcript import (
    SessionWriteLock,
    TranscriptDiagnostics,
    TranscriptIndex,
    WriteLockSettings,
    find_orphan_tool_results,
    load_transcript_bytes,
)
from sessionkeeper.transcript._codec import decode_json_line
from sessionkeeper.transcript._lock_inspect import LockInspection, inspect_lock_file


__all__ = (
    "COMMANDS",
    "DirectoryCheck",
    "DoctorCheck",
    "DoctorRegistry",
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

Severity = Literal["error", "warning", "info"]
"""``error``/``warning`` are problems (exit 1 while they remain); ``info`` is reported only."""

_BOM = b"\xef\xbb\xbf"
_LOCK_TIMEOUT_MS = 5000.0


@attrs.frozen(kw_only=True)
class Finding:
    """
    One thing a check found.

    Attributes:
        check: The check's id (``"torn-tail"``).
        severity: ``"error" | "warning" | "info"``.
        message: One human-readable line.
        lines: 1-based file lines concerned, if any.
        ids: Entry ids or tool call ids concerned, if any.
        fixable: Whether ``--fix`` repairs it.
    """

    check: str
    severity: Severity
    message: str
    lines: tuple[int, ...] = ()
    ids: tuple[str, ...] = ()
    fixable: bool = False

    @property
    def is_problem(self) -> bool:
        """Errors and warnings are problems; infos are not."""
        return self.severity != "info"

    def to_json(self) -> dict[str, Any]:
        """Stable ``doctor --json`` form."""
        return {
            "check": self.check,
            "severity": self.severity,
            "message": self.message,
            "lines": list(self.lines),
            "ids": list(self.ids),
            "fixable": self.fixable,
        }


@attrs.frozen(kw_only=True)
class TranscriptTarget:
    """
    A transcript as the checks see it.

    Attributes:
        path: The file.
        data: Its bytes, as read once.
        index: The loaded index (``None`` when it is not a transcript).
        diagnostics: The load diagnostics with orphan tool results filled in (``None`` likewise).
        error: Why it is not a transcript, when ``index`` is ``None``.
        lock: The transcript's lock file as found (``<name>.lock``), ``None`` when there is none.
    """

    path: Path
    data: bytes
    index: TranscriptIndex | None = attrs.field(default=None, eq=False)
    diagnostics: TranscriptDiagnostics | None = None
    error: str | None = None
    lock: LockInspection | None = None


@runtime_checkable
class TranscriptCheck(Protocol):
    """**Protocol:** a check of one transcript."""

    @property
    def id(self) -> str:
        """A short kebab-case name (``"torn-tail"``), unique in a registry."""
        ...

    @property
    def description(self) -> str:
        """One line saying what the check looks for."""
        ...

    def check(self, target: TranscriptTarget) -> Iterable[Finding]:
        """Return what is wrong with ``target`` (nothing when healthy)."""
        ...


@runtime_checkable
class DirectoryCheck(Protocol):
    """**Protocol:** a check of a sessions directory as a whole (store file, artifacts, locks)."""

    @property
    def id(self) -> str:
        """A short kebab-case name, unique in a registry."""
        ...

    @property
    def description(self) -> str:
        """One line saying what the check looks for."""
        ...

    def check_directory(self, directory: Path) -> Iterable[Finding]:
        """Return what is wrong with ``directory`` (nothing when healthy)."""
        ...


DoctorCheck: TypeAlias = TranscriptCheck | DirectoryCheck
"""Either kind of check, as :meth:`DoctorRegistry.add` takes it."""


@attrs.frozen(kw_only=True)
class _DiagnosticCheck:
    """A built-in check reading one field of :class:`TranscriptDiagnostics`."""

    id: str
    description: str
    severity: Severity
    fixable: bool
    read: Callable[[TranscriptDiagnostics], tuple[tuple[int, ...], tuple[str, ...]] | None]

    def check(self, target: TranscriptTarget) -> Iterable[Finding]:
        diag = target.diagnostics
        if diag is None:
            return ()
        found = self.read(diag)
        if found is None:
            return ()
        lines, ids = found
        where = (
            f" (lines {', '.join(map(str, lines[:10]))}{', ...' if len(lines) > 10 else ''})" if lines else ""
        )
        names = f": {', '.join(ids[:5])}{', ...' if len(ids) > 5 else ''}" if ids else ""
        return (
            Finding(
                check=self.id,
                severity=self.severity,
                message=f"{self.description}{where}{names}",
                lines=lines,
                ids=ids,
                fixable=self.fixable,
            ),
        )


@attrs.frozen
class _LockCheck:
    """The transcript's write lock file (OpenClaw spec §3, DESIGN D8)."""

    id: str = "lock"
    description: str = "write lock file left next to the transcript"

    def check(self, target: TranscriptTarget) -> Iterable[Finding]:
        lock = target.lock
        if lock is None:
            return ()
        owner = lock.describe()
        if not lock.stale:
            return (Finding(check=self.id, severity="info", message=f"in use: locked by {owner}"),)
        reasons = ", ".join(lock.stale_reasons)
        if lock.report_only:  # a live owner is never evicted, not even past its max hold (D8)
            message = f"lock held too long by a live process ({reasons}; {owner}); not removed"
            return (Finding(check=self.id, severity="warning", message=message),)
        message = f"stale lock ({reasons}; {owner}); reclaimed by the next writer"
        return (Finding(check=self.id, severity="warning", message=message, fixable=True),)


def _shorten(items: list[str], limit: int) -> str:
    return ", ".join(items[:limit]) + (", ..." if len(items) > limit else "")


def _duplicates(diag: TranscriptDiagnostics) -> tuple[tuple[int, ...], tuple[str, ...]] | None:
    if not diag.duplicate_ids:
        return None
    lines = tuple(n for _, found in diag.duplicate_ids for n in found)
    return lines, tuple(entry_id for entry_id, _ in diag.duplicate_ids)


def _lines(values: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[str, ...]] | None:
    return (values, ()) if values else None


def _ids(values: tuple[str, ...]) -> tuple[tuple[int, ...], tuple[str, ...]] | None:
    return ((), values) if values else None


def _builtin_checks() -> list[TranscriptCheck]:
    def check(
        check_id: str,
        description: str,
        severity: Severity,
        read: Callable[[TranscriptDiagnostics], tuple[tuple[int, ...], tuple[str, ...]] | None],
        *,
        fixable: bool = False,
    ) -> TranscriptCheck:
        return _DiagnosticCheck(
            id=check_id, description=description, severity=severity, fixable=fixable, read=read
        )

    return [
        check("torn-tail", "torn last line (interrupted append)", "error",
              lambda d: ((d.torn_tail.line,), ()) if d.torn_tail else None, fixable=True),
        check("invalid-lines", "lines that are not valid JSON", "error",
              lambda d: _lines(d.invalid_lines), fixable=True),
        check("non-object-lines", "lines that are JSON but not objects", "error",
              lambda d: _lines(d.non_object_lines), fixable=True),
        check("bad-utf8", "lines with invalid UTF-8 (read as U+FFFD)", "warning",
              lambda d: _lines(d.bad_utf8_lines), fixable=True),
        check("lone-surrogates", "lines with lone UTF-16 surrogates (read as U+FFFD)", "warning",
              lambda d: _lines(d.lone_surrogate_lines), fixable=True),
        check("legacy-version", "legacy format version (migrated to v3 in memory)", "warning",
              lambda d: ((), (f"v{d.version}",)) if d.legacy_version else None, fixable=True),
        check("missing-final-newline", "last line has no final newline", "warning",
              lambda d: ((d.line_count,), ()) if d.missing_final_newline else None, fixable=True),
        check("duplicate-ids", "entry ids used more than once (the later entry wins)", "error",
              _duplicates),
        check("missing-parents", "entries whose parentId names no entry (treated as roots)", "warning",
              lambda d: _ids(d.missing_parents)),
        check("cycles", "entries on a parentId cycle", "error", lambda d: _ids(d.cycles)),
        check("orphan-tool-results", "tool results with no matching tool call in the context", "warning",
              lambda d: _ids(d.orphan_tool_results)),
        check("entries-without-id", "entries without an id (not part of the tree)", "warning",
              lambda d: _lines(d.entries_without_id)),
        check("repeated-headers", "repeated session header lines (ignored)", "info",
              lambda d: _lines(d.repeated_header_lines)),
    ]  # fmt: skip


@attrs.define
class DoctorRegistry:
    """
    The checks ``doctor`` runs, in order. Build one with :func:`default_registry` and extend it.

    Attributes:
        transcript_checks: Run on every transcript.
        directory_checks: Run once per sessions directory (``doctor DIR``).
    """

    transcript_checks: list[TranscriptCheck] = attrs.field(factory=list)
    directory_checks: list[DirectoryCheck] = attrs.field(factory=list)

    def add(self, check: DoctorCheck) -> None:
        """
        Register a check (a :class:`TranscriptCheck` or a :class:`DirectoryCheck`).

        Raises:
            ValueError: A check with the same id is already registered.
            TypeError: ``check`` implements neither protocol.
        """
        if not isinstance(check, DirectoryCheck | TranscriptCheck):
            raise TypeError(f"{check!r} is neither a TranscriptCheck nor a DirectoryCheck")
        taken = {c.id for c in self.transcript_checks} | {c.id for c in self.directory_checks}
        if check.id in taken:
            raise ValueError(f"a doctor check with id {check.id!r} is already registered")
        if isinstance(check, DirectoryCheck):
            self.directory_checks.append(check)
        else:
            self.transcript_checks.append(check)


def default_registry() -> DoctorRegistry:
    """A new registry holding the built-in transcript checks (see the module docstring)."""
    return DoctorRegistry(transcript_checks=[*_builtin_checks(), _LockCheck()])


def inspect_lock(path: Path, *, held_by_this_process: bool = False) -> LockInspection | None:
    """The lock file of the transcript at ``path`` as the write lock would judge it now, if any."""
    stale_ms = WriteLockSettings.from_config().stale_ms
    found = inspect_lock_file(
        path, now_ms=SYSTEM_CLOCK.now_ms(), stale_ms=stale_ms, held_by_this_process=held_by_this_process
    )
    return None if found is None else found[0]


def diagnose_bytes(path: Path, data: bytes, *, lock: LockInspection | None = None) -> TranscriptTarget:
    """Load ``data`` (the bytes of ``path``) read-only into a :class:`TranscriptTarget`."""
    try:
        index = load_transcript_bytes(data, path=path)
    except TranscriptFormatError as err:
        return TranscriptTarget(path=path, data=data, error=str(err), lock=lock)
    orphans = find_orphan_tool_results(index.build_context().messages)
    diagnostics = attrs.evolve(index.diagnostics, orphan_tool_results=orphans)
    return TranscriptTarget(path=path, data=data, index=index, diagnostics=diagnostics, lock=lock)


def _findings(target: TranscriptTarget, registry: DoctorRegistry) -> list[Finding]:
    if target.index is None:
        return [
            Finding(check="not-a-transcript", severity="error", message=target.error or "not a transcript")
        ]
    return [finding for check in registry.transcript_checks for finding in check.check(target)]


def _reencode(raw_line: bytes) -> bytes:
    """The line decoded as the loader reads it (invalid UTF-8 and lone surrogates as U+FFFD), re-encoded."""
    value, _, _ = decode_json_line(raw_line)
    return msgspec.json.encode(value)


def repair_transcript_bytes(target: TranscriptTarget) -> bytes:
    """
    The repaired content of a transcript (``--fix``), keeping every complete JSON-object line.

    - v1/v2: the migrated header and entries (as the transcript writer rewrites them, DESIGN D7).
    - Otherwise the file's lines in order, minus the torn tail, invalid, non-object and blank lines;
      lines with bad UTF-8 or lone surrogates re-encoded with U+FFFD; a leading BOM dropped; every line
      ``\\n``-terminated.

    Raises:
        ValueError: ``target`` is not a transcript.
    """
    index, diag = target.index, target.diagnostics
    if index is None or diag is None:
        raise ValueError(f"{target.path} is not a transcript; nothing to repair")
    if diag.legacy_version:
        lines = [msgspec.json.encode(index.header_raw), *index.lines]
        return b"".join(line + b"\n" for line in lines)
    data = target.data.removeprefix(_BOM)
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    drop = set(diag.invalid_lines) | set(diag.non_object_lines)
    if diag.torn_tail is not None:
        drop.add(diag.torn_tail.line)
    recode = set(diag.bad_utf8_lines) | set(diag.lone_surrogate_lines)
    out: list[bytes] = []
    for number, raw in enumerate(parts, start=1):
        if number in drop or not raw.strip():
            continue
        if number in recode:
            raw = _reencode(raw)
        out.append(raw + b"\n")
    return b"".join(out)


@attrs.frozen(kw_only=True)
class FileReport:
    """
    The doctor's result for one transcript.

    Attributes:
        path: The file.
        findings: What remains wrong (after ``--fix``, what could not be fixed).
        fixed: What ``--fix`` repaired.
        backup_path: The 0600 backup made before the repair, if any.
        diagnostics: The diagnostics of the (final) file, ``None`` if it is not a transcript.
        busy: ``--fix`` could not take the write lock (nothing was changed).
    """

    path: Path
    findings: tuple[Finding, ...] = ()
    fixed: tuple[Finding, ...] = ()
    backup_path: Path | None = None
    diagnostics: TranscriptDiagnostics | None = None
    busy: bool = False

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
            "status": self.status,
            "findings": [f.to_json() for f in self.findings],
            "fixed": [f.to_json() for f in self.fixed],
            "backupPath": str(self.backup_path) if self.backup_path else None,
            "diagnostics": self.diagnostics.to_json() if self.diagnostics else None,
        }


def _check_file(path: Path, registry: DoctorRegistry) -> FileReport:
    target = diagnose_bytes(path, path.read_bytes(), lock=inspect_lock(path))
    return FileReport(path=path, findings=tuple(_findings(target, registry)), diagnostics=target.diagnostics)


def _fix_file_locked(path: Path, registry: DoctorRegistry, lock_before: LockInspection | None) -> FileReport:
    target = diagnose_bytes(path, path.read_bytes(), lock=lock_before)
    findings = _findings(target, registry)
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
    remaining = _findings(after, registry)
    left = {f.check for f in remaining}
    return FileReport(
        path=path,
        findings=tuple(remaining),
        fixed=tuple(f for f in to_fix if f.check not in left),
        backup_path=backup,
        diagnostics=after.diagnostics,
    )


async def _fix_file(path: Path, registry: DoctorRegistry, lock_timeout_ms: float) -> FileReport:
    lock_before = await anyio.to_thread.run_sync(inspect_lock, path)
    try:
        async with SessionWriteLock.acquire(path, timeout_ms=lock_timeout_ms):
            return await anyio.to_thread.run_sync(_fix_file_locked, path, registry, lock_before)
    except SessionBusyError as err:
        report = await anyio.to_thread.run_sync(_check_file, path, registry)
        busy = Finding(check="busy", severity="error", message=f"not fixed: {err}")
        return attrs.evolve(report, findings=(*report.findings, busy), busy=True)


def _run_directory_check(check: DirectoryCheck, directory: Path) -> list[Finding]:
    return list(check.check_directory(directory))


def _targets(path: Path) -> tuple[bool, list[Path]]:
    if not path.exists():
        raise FileNotFoundError(f"no such file or directory: {path}")
    if not path.is_dir():
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
    skipped), and with ``fix`` repair them (see the module docstring).

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


_STYLE = {"healthy": "green", "fixed": "cyan", "problems": "red", "not-a-transcript": "red", "busy": "yellow"}


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
        table.add_row(
            escape(report.path.name), f"[{style}]{report.status}[/{style}]", "\n".join(notes) or "-"
        )
    console.print(table)
    for finding in run.directory_findings:
        console.print(f"{finding.severity}: {finding.check}: {escape(finding.message)}")
    data = run.to_json()["summary"]
    console.print(
        f"{data['files']} transcript(s): {data['healthy']} healthy, {data['fixed']} fixed, "
        f"{data['problems']} with problems"
    )


@click.command("doctor")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--fix", is_flag=True, help="Back up (0600) and repair what can be repaired without data loss.")
@click.option("--json", "as_json", is_flag=True, help="Print the stable JSON report.")
def doctor_command(path: Path, fix: bool, as_json: bool) -> None:
    """Check a transcript or a sessions directory; with --fix, repair after a backup.

    Exit codes: 0 healthy or fixed, 1 problems remain, 2 bad input.
    """
    if not path.exists():
        fail(f"no such file or directory: {path}", code=EXIT_BAD_INPUT)
    run = anyio.run(lambda: run_doctor(path, fix=fix))
    if path.is_file() and run.files and run.files[0].status == "not-a-transcript":
        if as_json:
            click.echo(json.dumps(run.to_json(), ensure_ascii=False))
        fail(run.files[0].findings[0].message, code=EXIT_BAD_INPUT)
    if as_json:
        click.echo(json.dumps(run.to_json(), ensure_ascii=False, indent=2))
    else:
        _render(run, Console(highlight=False))
    click.get_current_context().exit(run.exit_code)


COMMANDS: tuple[click.Command, ...] = (doctor_command,)
