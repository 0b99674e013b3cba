"""
The checks of ``sessionkeeper doctor`` and the repair of a transcript's bytes (see ``cli/_doctor.py``).

A :class:`TranscriptCheck` looks at one loaded transcript (:class:`TranscriptTarget`), a
:class:`DirectoryCheck` at a sessions directory, a :class:`ConfigCheck` at a config file
(:class:`ConfigTarget`, checks in ``cli/_doctor_config.py``); :class:`DoctorRegistry` holds them and
:func:`default_registry` returns the built-in ones. :func:`repair_transcript_bytes` computes the repaired
content ``--fix`` writes: every complete line that parses as a JSON object is kept.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

import anyio
import attrs
import msgspec

from sessionkeeper._clock import SYSTEM_CLOCK
from sessionkeeper._lockfile import LockInspection, inspect_lock_file
from sessionkeeper.exceptions import SessionKeeperError, TranscriptFormatError
from sessionkeeper.records import decode_json_line
from sessionkeeper.store import (
    SQLITE_FILE_NAME,
    STORE_FILE_NAME,
    SessionStore,
    is_store_file_name,
    refused_session_files,
)
from sessionkeeper.transcript import (
    TranscriptDiagnostics,
    TranscriptIndex,
    WriteLockSettings,
    find_orphan_tool_results,
    load_transcript_bytes,
)


__all__ = (
    "ConfigCheck",
    "ConfigTarget",
    "DirectoryCheck",
    "DoctorCheck",
    "DoctorRegistry",
    "Finding",
    "Severity",
    "TranscriptCheck",
    "TranscriptTarget",
    "default_registry",
    "diagnose_bytes",
    "find_problems",
    "inspect_lock",
    "repair_transcript_bytes",
)

Severity = Literal["error", "warning", "info"]
"""``error``/``warning`` are problems (exit 1 while they remain); ``info`` is reported only."""

_BOM = b"\xef\xbb\xbf"


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


@attrs.frozen(kw_only=True)
class ConfigTarget:
    """
    A config file as the config checks see it (``doctor CONFIG.json``).

    Attributes:
        path: The file.
        tree: Its JSON object as written (key order kept).
        kind: ``"openclaw"`` (``openclaw.json`` layout) or ``"pi"`` (pi ``settings.json``).
    """

    path: Path
    tree: dict[str, Any] = attrs.field(eq=False)
    kind: Literal["openclaw", "pi"]


@runtime_checkable
class ConfigCheck(Protocol):
    """**Protocol:** a check of a config file (OpenClaw config or pi settings)."""

    @property
    def id(self) -> str:
        """A short kebab-case name, unique in a registry."""
        ...

    @property
    def description(self) -> str:
        """One line saying what the check looks for."""
        ...

    def check_config(self, target: ConfigTarget) -> Iterable[Finding]:
        """Return what is wrong with ``target`` (nothing when healthy)."""
        ...


DoctorCheck: TypeAlias = TranscriptCheck | DirectoryCheck | ConfigCheck
"""Any kind of check, as :meth:`DoctorRegistry.add` takes it."""


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


@attrs.frozen
class _SymlinkCheck:
    """Symbolic links at names sessionkeeper writes (issue 15 item 7, deviation F4): reported, not touched."""

    id: str = "symlink"
    description: str = "symbolic links where sessionkeeper writes (read through, refused on write)"

    def check_directory(self, directory: Path) -> Iterable[Finding]:
        try:
            paths = sorted(directory.iterdir())
        except OSError:
            return ()
        found: list[Finding] = []
        for path in paths:
            name = path.name
            if not (is_store_file_name(name) or name.endswith((".jsonl", ".lock"))) or not path.is_symlink():
                continue
            try:
                target = str(path.readlink())
            except OSError:
                target = "?"
            dangling = "" if path.exists() else " (dangling)"
            message = (
                f"{name} is a symbolic link to {target}{dangling}: read through it, but every write to it "
                "is refused (SymlinkRefusedError); replace it by the file itself"
            )
            found.append(Finding(check=self.id, severity="warning", message=message, ids=(name,)))
        return tuple(found)


@attrs.frozen
class _SessionFileCheck:
    """
    Entries of the directory's store whose ``sessionFile`` the store refuses (issue 15 items 1, 4; F1).

    The store is read through the backend whose file exists (``sessions.json`` or ``sessions.sqlite``,
    read-only, as ``sessions list`` reads it); an unreadable store is left to the ``store`` check.
    """

    id: str = "session-file"
    description: str = "sessionFile values the store refuses (never read, written, archived or deleted)"

    def check_directory(self, directory: Path) -> Iterable[Finding]:
        if not (directory / STORE_FILE_NAME).exists() and not (directory / SQLITE_FILE_NAME).exists():
            return ()
        try:
            with _dropped_entries_reported_as_findings():
                entries = anyio.run(self._entries, directory)
        except (SessionKeeperError, OSError):
            return ()  # the store check reports a store that cannot be read
        return tuple(
            Finding(
                check=self.id,
                severity="error",
                message=f"entry {key!r}: sessionFile {value!r} refused: {reason}",
                ids=(key,),
            )
            for key, value, reason in refused_session_files(directory, entries)
        )

    @staticmethod
    async def _entries(directory: Path) -> dict[str, dict[str, Any]]:
        async with SessionStore.open(directory, read_only=True) as store:
            loaded = await store.backend.load_all()
        return {
            key: {"sessionId": entry.session_id, "sessionFile": entry.session_file}
            for key, entry in loaded.items()
        }


@attrs.frozen
class _StoreCheck:
    """
    The sessions directory's store (``sessions.json`` / ``sessions.sqlite``), read as ``sessions list`` reads
    it (issue 11): an error when it cannot be read (the message ``sessions list`` fails with), a warning
    for entries the load-time shape check drops, and a warning for active entries whose transcript is
    missing (``sessions cleanup --fix-missing`` removes them). Refused ``sessionFile`` values are left to
    the ``session-file`` check. Read-only: nothing is created or written.
    """

    id: str = "store"
    description: str = "the session store: readable, every entry valid, every transcript present"

    def check_directory(self, directory: Path) -> Iterable[Finding]:
        if not (directory / STORE_FILE_NAME).exists() and not (directory / SQLITE_FILE_NAME).exists():
            return ()
        try:
            with _dropped_entries_reported_as_findings():
                return anyio.run(self._check, directory)
        except SessionKeeperError as err:
            return (Finding(check=self.id, severity="error", message=f"the store cannot be read: {err}"),)
        except OSError as err:
            reason = err.strerror or str(err)
            return (Finding(check=self.id, severity="error", message=f"the store cannot be read: {reason}"),)

    async def _check(self, directory: Path) -> tuple[Finding, ...]:
        async with SessionStore.open(directory, read_only=True) as store:
            rows = await store.list(archived=None)
            dropped = tuple(getattr(getattr(store.backend, "last_load", None), "dropped_keys", ()))
            location = getattr(store.backend, "path", directory)
            missing: list[str] = []
            for key, entry in rows:
                if entry.is_archived:
                    continue
                try:
                    path = store.transcript_file(entry)
                except SessionKeeperError:  # a refused sessionFile: the session-file check reports it
                    continue
                if path is not None and not path.exists():
                    missing.append(key)
        found: list[Finding] = []
        if dropped:
            found.append(
                Finding(
                    check=self.id,
                    severity="warning",
                    message=f"{location}: {len(dropped)} entries fail the load-time shape check and are "
                    f"ignored (as OpenClaw does): {_shorten(list(dropped), 5)}",
                    ids=dropped,
                )
            )
        if missing:
            found.append(
                Finding(
                    check=self.id,
                    severity="warning",
                    message=f"{len(missing)} of {len(rows)} entries have no transcript file: "
                    f"{_shorten(missing, 5)} (`sessionkeeper sessions cleanup --store {directory} "
                    "--fix-missing` removes them)",
                    ids=tuple(missing),
                )
            )
        return tuple(found)


def _is_not_dropped_warning(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("session store %s: dropped")


@contextlib.contextmanager
def _dropped_entries_reported_as_findings() -> Iterator[None]:
    """
    While doctor reads a store itself: the JSON store's "dropped N entries" log warning is not emitted,
    since the ``store`` check reports those entries as a finding (two checks read the store: the warning
    used to reach stderr twice beside the finding).
    """
    logger = logging.getLogger("sessionkeeper.store")
    logger.addFilter(_is_not_dropped_warning)
    try:
        yield
    finally:
        logger.removeFilter(_is_not_dropped_warning)


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
        check("non-string-timestamps", "summary or custom message entries whose timestamp is not a string",
              "warning", lambda d: _lines(d.non_string_timestamps)),
        check("unreachable-first-kept", "compactions whose firstKeptEntryId is off their path (keep nothing)",
              "warning", lambda d: _ids(d.unreachable_first_kept)),
        check("stale-leaf", "last entry is metadata off the newest branch (newer messages left out)",
              "warning", lambda d: ((), d.stale_leaf) if d.stale_leaf else None),
    ]  # fmt: skip


@attrs.define
class DoctorRegistry:
    """
    The checks ``doctor`` runs, in order. Build one with :func:`default_registry` and extend it.

    Attributes:
        transcript_checks: Run on every transcript.
        directory_checks: Run once per sessions directory (``doctor DIR``).
        config_checks: Run on a config file (``doctor CONFIG.json``).
    """

    transcript_checks: list[TranscriptCheck] = attrs.field(factory=list)
    directory_checks: list[DirectoryCheck] = attrs.field(factory=list)
    config_checks: list[ConfigCheck] = attrs.field(factory=list)

    def add(self, check: DoctorCheck) -> None:
        """
        Register a check (a :class:`TranscriptCheck`, :class:`DirectoryCheck` or :class:`ConfigCheck`).

        Raises:
            ValueError: A check with the same id is already registered.
            TypeError: ``check`` implements none of the protocols.
        """
        if not isinstance(check, DirectoryCheck | TranscriptCheck | ConfigCheck):
            raise TypeError(f"{check!r} is not a TranscriptCheck, DirectoryCheck or ConfigCheck")
        taken = {c.id for c in self.transcript_checks} | {c.id for c in self.directory_checks}
        taken |= {c.id for c in self.config_checks}
        if check.id in taken:
            raise ValueError(f"a doctor check with id {check.id!r} is already registered")
        if isinstance(check, ConfigCheck):
            self.config_checks.append(check)
        elif isinstance(check, DirectoryCheck):
            self.directory_checks.append(check)
        else:
            self.transcript_checks.append(check)


def default_registry() -> DoctorRegistry:
    """A new registry holding the built-in transcript and config checks (see the module docstring)."""
    from sessionkeeper.cli._doctor_config import builtin_config_checks  # noqa: PLC0415 - it imports this module

    return DoctorRegistry(
        transcript_checks=[*_builtin_checks(), _LockCheck()],
        directory_checks=[_StoreCheck(), _SessionFileCheck(), _SymlinkCheck()],
        config_checks=builtin_config_checks(),
    )


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


def find_problems(target: TranscriptTarget, registry: DoctorRegistry) -> list[Finding]:
    """Run every transcript check of ``registry`` on ``target`` (``not-a-transcript`` when it is not one)."""
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
