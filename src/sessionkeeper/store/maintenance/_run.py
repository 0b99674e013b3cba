"""
``run_maintenance``: plan store maintenance on a sessions directory and carry the plan out.

The plan comes from the pure planner (:func:`sessionkeeper.store.plan_maintenance`); this module only
does the I/O: it lists the directory, finds held transcript locks, commits the entry removals through
the store backend's atomic transaction (no update of a concurrent writer is lost), then archives and
deletes exactly the planned files. A dry run (or warn mode) stops after planning, so it reports exactly
what the enforce run then does (DESIGN D6).
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import anyio.to_thread
import attrs

from sessionkeeper._clock import SYSTEM_CLOCK, Clock
from sessionkeeper._fs import backup_file
from sessionkeeper._tracing import traced
from sessionkeeper.exceptions import ConfigError, StoreCorruptError
from sessionkeeper.store._backend import StoreBackend
from sessionkeeper.store._entry import SessionEntry, session_entry_to_dict
from sessionkeeper.store._json import JsonFileStoreBackend
from sessionkeeper.store._postgres import PostgresStoreBackend
from sessionkeeper.store.maintenance._artifacts import (
    PROMPT_BLOB_DIR,
    is_prompt_blob_temp_name,
    prompt_blob_hash,
)
from sessionkeeper.store.maintenance._plan import (
    FileAction,
    MaintenancePlan,
    MaintenanceReport,
    StoreFile,
    plan_maintenance,
)
from sessionkeeper.store.maintenance._postgres import postgres_entry_maintenance
from sessionkeeper.store.maintenance._settings import MaintenanceMode, MaintenanceSettings
from sessionkeeper.store.maintenance._storage import claimed_transcripts, storage_archive_passes
from sessionkeeper.transcript import (
    ArchivingTranscriptStorage,
    MemoryTranscriptStorage,
    TranscriptStorage,
    is_locked,
)


__all__ = (
    "held_transcript_locks",
    "list_prompt_blobs",
    "list_store_files",
    "run_maintenance",
    "transcripts_with_messages",
)

_STORE_NAME = "sessions.json"
_log = logging.getLogger("sessionkeeper.maintenance")


def list_store_files(sessions_dir: Path) -> list[StoreFile]:
    """
    The regular files directly in ``sessions_dir`` (symlinks and subdirectories excluded), with sizes
    in bytes and mtimes in ms since epoch. A missing directory lists as empty.
    """
    out: list[StoreFile] = []
    try:
        scanner = os.scandir(sessions_dir)
    except FileNotFoundError:
        return out
    with scanner:
        for item in scanner:
            try:
                if not item.is_file(follow_symlinks=False):
                    continue
                st = item.stat(follow_symlinks=False)
            except OSError:
                continue
            out.append(StoreFile(name=item.name, size=st.st_size, mtime_ms=st.st_mtime_ns / 1_000_000))
    return out


def list_prompt_blobs(sessions_dir: Path) -> list[StoreFile]:
    """
    Skills prompt blobs and their temp files (``skills-prompts/sha256/<2 hex>/<64 hex>.txt[...tmp]``) with
    their paths relative to ``sessions_dir`` as names (``readSessionPromptBlobFiles``).
    """
    root = sessions_dir / PROMPT_BLOB_DIR
    out: list[StoreFile] = []
    try:
        prefixes = sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return out
    for prefix in prefixes:
        if len(prefix.name) != 2:
            continue
        for item in list_store_files(prefix):
            name = f"{PROMPT_BLOB_DIR}/{prefix.name}/{item.name}"
            if prompt_blob_hash(name) is not None or is_prompt_blob_temp_name(name):
                out.append(StoreFile(name=name, size=item.size, mtime_ms=item.mtime_ms))
    return out


def _lock_held(lock_path: Path) -> bool:
    """Whether the transcript of ``lock_path`` (``<transcript>.lock``) is write-locked by a live owner."""
    return is_locked(lock_path.with_name(lock_path.name.removesuffix(".lock")))


def held_transcript_locks(sessions_dir: Path, files: Iterable[StoreFile]) -> frozenset[str]:
    """
    Names of the transcripts in ``sessions_dir`` whose ``<transcript>.lock`` is held by a live process
    (OpenClaw's lock file, spec §3: ``{"pid": …, "createdAt": …}``). Maintenance keeps their entries and
    never moves the files (DESIGN D6, field report B19).
    """
    held: set[str] = set()
    for file in files:
        if file.name.endswith(".jsonl.lock") and _lock_held(sessions_dir / file.name):
            held.add(file.name[: -len(".lock")])
    return frozenset(held)


@attrs.frozen
class _Target:
    backend: StoreBackend
    sessions_dir: Path | None  # None: a store without transcript files (a database store, no directory)
    store_file: Path | None  # the JSON store file, whose size the disk budget replaces by the projection
    owned: bool
    archives: TranscriptStorage | None = None  # a store's archiving storage (memory; _storage.py)

    @property
    def store_name(self) -> str:
        return self.store_file.name if self.store_file is not None else _STORE_NAME

    @property
    def dropped_keys(self) -> tuple[str, ...]:
        return tuple(self.backend.dropped_keys)


_EMPTY_TRANSCRIPT_MAX_BYTES = 4096
_MESSAGE_ROLES = frozenset({"user", "assistant", "tool", "toolResult", "system"})


def _is_message_record(record: object) -> bool:
    if not isinstance(record, dict):
        return False
    if record.get("type") == "message":
        return True
    if "type" in record:
        return False
    inner = record.get("message")
    if isinstance(inner, dict) and inner.get("role") in _MESSAGE_ROLES:
        return True
    return record.get("role") in _MESSAGE_ROLES


def _has_messages(path: Path, size: int) -> bool:
    """OpenClaw's ``transcriptExistsWithMessages``: over 4 KiB or unparsable counts as having messages."""
    if size > _EMPTY_TRANSCRIPT_MAX_BYTES:
        return True
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True
    lines = [line for line in text.splitlines() if line.strip()]
    for line in lines:
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            return True
        if _is_message_record(record):
            return True
    return False


def transcripts_with_messages(sessions_dir: Path, files: Iterable[StoreFile]) -> frozenset[str]:
    """
    Names of the transcripts in ``sessions_dir`` that hold at least one message record (``--fix-missing``).

    Only ``*.jsonl`` files of at most 4 KiB are read; larger ones count as having messages.
    """
    return frozenset(
        f.name for f in files if f.name.endswith(".jsonl") and _has_messages(sessions_dir / f.name, f.size)
    )


def _resolve_target(store: Any, *, read_only: bool = False) -> _Target:
    if isinstance(store, str | os.PathLike):
        # a dry run or warn-mode run on a path opens the file read-only: not even a corrupt-file backup
        json_backend = JsonFileStoreBackend(Path(store), durable=True, read_only=read_only)
        path = json_backend.path
        return _Target(backend=json_backend, sessions_dir=path.parent, store_file=path, owned=True)
    if isinstance(store, StoreBackend):
        # any backend through the protocol: a JSON store file brings its directory; else entries only
        store_file = store.store_file
        sessions_dir = store_file.parent if store_file is not None else None
        return _Target(backend=store, sessions_dir=sessions_dir, store_file=store_file, owned=False)
    backend: object = getattr(store, "backend", None)
    sessions_dir_of: object = getattr(store, "sessions_dir", None)
    if (sessions_dir_of is None or isinstance(sessions_dir_of, Path)) and isinstance(backend, StoreBackend):
        store_file = backend.store_file
        if sessions_dir_of is None and store_file is not None:
            sessions_dir_of = store_file.parent
        archives: TranscriptStorage | None = None
        storage_of = getattr(store, "transcript_storage", None)
        if sessions_dir_of is None and not isinstance(backend, PostgresStoreBackend) and callable(storage_of):
            storage = storage_of()
            if isinstance(storage, TranscriptStorage) and isinstance(storage, ArchivingTranscriptStorage):
                archives = storage
        return _Target(
            backend=backend,
            sessions_dir=sessions_dir_of,
            store_file=store_file,
            owned=False,
            archives=archives,
        )
    raise TypeError(
        "run_maintenance needs a sessions directory, a sessions.json path, a store backend or a "
        f"SessionStore (got {type(store).__name__})"
    )


def _check_not_empty(path: Path, *, read_only: bool = False) -> None:
    """
    An empty ``sessions.json`` is not an empty store: maintenance would orphan every transcript (B21).
    A whitespace-only file is backed up first, except by a read-only run (dry run, warn mode), which
    writes nothing (issue 15 item 5).
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    if data.strip():
        return
    backup = backup_file(path) if data and not read_only else None
    raise StoreCorruptError(
        "the store file is empty; maintenance refuses to treat it as an empty store "
        "(every transcript would look unreferenced); the file was left unchanged",
        path=path,
        backup_path=backup,
    )


def _entries_as_dicts(entries: dict[str, SessionEntry]) -> dict[str, dict[str, Any]]:
    return {key: session_entry_to_dict(entry) for key, entry in entries.items()}


def _plan(
    target: _Target,
    entries: dict[str, SessionEntry],
    *,
    settings: MaintenanceSettings,
    now_ms: int,
    active_keys: Iterable[str],
    on_save: bool,
    fix_missing: bool = False,
) -> MaintenancePlan:
    files: list[StoreFile] = []
    locked: frozenset[str] = frozenset()
    with_messages: frozenset[str] | None = None
    if target.sessions_dir is not None:
        own_lock = f"{target.store_name}.lock"  # the backend's cross-process lock file, not an artifact
        files = [f for f in list_store_files(target.sessions_dir) if f.name != own_lock]
        files.extend(list_prompt_blobs(target.sessions_dir))
        locked = held_transcript_locks(target.sessions_dir, files)
        with_messages = transcripts_with_messages(target.sessions_dir, files) if fix_missing else None
    raw: dict[str, Any] = dict.fromkeys(target.dropped_keys)
    raw.update(_entries_as_dicts(entries))
    if isinstance(target.archives, MemoryTranscriptStorage):
        # a held writer claim counts as a held lock file: its entries are kept (D6, B19)
        locked = claimed_transcripts(raw, target.archives.held_claims())
    return plan_maintenance(
        raw,
        files=files,
        settings=settings,
        now_ms=now_ms,
        sessions_dir=target.sessions_dir if target.sessions_dir is not None else ".",
        active_keys=active_keys,
        locked_files=locked,
        on_save=on_save,
        store_name=target.store_name,
        message_transcripts=with_messages,
    )


def _execute_files(
    sessions_dir: Path,
    actions: tuple[FileAction, ...],
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[FileAction], list[str]]:
    done: list[FileAction] = []
    warnings: list[str] = []
    for number, action in enumerate(actions):
        if progress is not None:
            progress(number, len(actions))
        source = sessions_dir / action.name
        lock = sessions_dir / f"{action.name}.lock"
        if action.name.endswith(".jsonl") and _lock_held(lock):
            warnings.append(f"skipped {action.name}: its transcript lock was taken meanwhile")
            continue
        try:
            if action.action == "archive":
                assert action.archive_name is not None
                target = sessions_dir / action.archive_name
                if target.exists():
                    warnings.append(f"skipped archiving {action.name}: {action.archive_name} exists")
                    continue
                source.rename(target)
            else:
                source.unlink()
        except FileNotFoundError:
            warnings.append(f"skipped {action.name}: it disappeared meanwhile")
            continue
        except OSError as err:
            warnings.append(f"could not {action.action} {action.name}: {err.strerror or err}")
            continue
        done.append(action)
    if progress is not None:
        progress(len(actions), len(actions))
    return done, warnings


@traced("maintenance")
async def run_maintenance(
    store: Path | str | JsonFileStoreBackend | Any,
    *,
    settings: MaintenanceSettings | None = None,
    mode: MaintenanceMode | None = None,
    dry_run: bool = False,
    now_ms: int | None = None,
    active_keys: Iterable[str] = (),
    on_save: bool = False,
    fix_missing: bool = False,
    clock: Clock = SYSTEM_CLOCK,
    progress: Callable[[int, int], None] | None = None,
) -> MaintenanceReport:
    """
    Run store maintenance on a sessions directory (OpenClaw spec §2, DESIGN D6).

    Order (OpenClaw's applied order): model-run probes older than 24 h, entries older than
    ``pruneAfter``, the ``maxEntries`` cap, ``*.deleted.<stamp>`` archives of the removed entries'
    transcripts (trajectory sidecars deleted), archive retention, the disk budget, and, for a cleanup
    (``on_save=False``), unreferenced artifacts older than ``pruneAfter`` and store temp files older than
    5 minutes. The store is committed first (atomically, under the backend's lock), then the files are
    archived or deleted, so a crash leaves at worst unreferenced files for the next run.

    Args:
        store: A sessions directory, its ``sessions.json``, a :class:`SessionStore` (any backend: JSON,
            SQLite, memory, PostgreSQL, Redis; its ``sessions_dir`` holds the transcripts), or a
            :class:`~sessionkeeper.store.StoreBackend`. Without a directory (a store URL opened without
            ``transcripts_dir``, a bare backend) no file is listed, archived or deleted: on PostgreSQL
            every pass runs as set-based SQL on the entries and the store's transcript rows
            (docs/postgres.md "Maintenance"); on other backends only the entry passes run, through the
            backend's ``load_all`` / ``transaction``.
        settings: Maintenance settings; default :class:`MaintenanceSettings` (OpenClaw's defaults).
        mode: Overrides ``settings.mode``: ``"enforce"`` applies, ``"warn"`` only reports.
        dry_run: Plan and report; change nothing.
        now_ms: Time to evaluate the rules at (ms since epoch); default ``clock.now_ms()``.
        active_keys: Session keys that must survive (running sessions; D6). ``agent:<id>:main`` and
            entries whose transcript lock is held are always kept.
        on_save: Run the automatic maintenance of a store write (the count rules wait for the
            high-water mark, no unreferenced-artifact pass) instead of ``sessions cleanup``.
        fix_missing: First remove entries whose transcript is missing or holds no message record
            (``sessions cleanup --fix-missing``; preserved keys are kept).
        clock: The clock for ``now_ms``.
        progress: Called as ``progress(done, total)`` while the planned file actions are carried out
            (``total`` = their number; ``(0, total)`` first, ``(total, total)`` last; never for a dry run
            or warn mode). It runs in a worker thread: keep it quick and thread-safe (a rich ``Progress``
            is).

    Returns:
        The report: every removal and file action with its reason, bytes before/after, the disk budget
        and unreferenced-artifact summaries, warnings. ``applied`` tells whether anything was carried out.

    Raises:
        StoreCorruptError: ``sessions.json`` is empty or not a JSON object (a 0600 backup is written,
            except by a dry run or a warn-mode run on a path, which write nothing; nothing is changed).
        SessionBusyError: The store lock was not acquired in time.
        TypeError: ``store`` is not a supported store.
        ConfigError: ``fix_missing`` on a store without a transcripts directory.
    """
    settings = settings or MaintenanceSettings()
    effective_mode: MaintenanceMode = mode or settings.mode
    now = clock.now_ms() if now_ms is None else int(now_ms)
    keys = tuple(active_keys)
    read_only = dry_run or effective_mode == "warn"
    target = _resolve_target(store, read_only=read_only)
    if fix_missing and target.sessions_dir is None:
        raise ConfigError(
            "needs the transcripts directory (every entry's transcript would look missing)", key="fix_missing"
        )
    backend = target.backend
    try:
        if target.store_file is not None:
            await anyio.to_thread.run_sync(
                functools.partial(_check_not_empty, target.store_file, read_only=read_only)
            )
        if isinstance(backend, PostgresStoreBackend) and target.sessions_dir is None:
            # no files: the entries and the store's transcript rows as set-based SQL
            report = await postgres_entry_maintenance(
                backend, settings=settings, now_ms=now, active_keys=keys, on_save=on_save, apply=not read_only
            )
            return _finish(
                report,
                mode=effective_mode,
                dry_run=dry_run,
                applied=not read_only,
                warnings=[*report.warnings],
            )
        if dry_run or effective_mode == "warn":
            entries = await backend.load_all()
            plan = await anyio.to_thread.run_sync(
                lambda: _plan(
                    target,
                    entries,
                    settings=settings,
                    now_ms=now,
                    active_keys=keys,
                    on_save=on_save,
                    fix_missing=fix_missing,
                )
            )
            report = await _storage_archives(
                target, plan, plan.report, settings=settings, now_ms=now, apply=False
            )
            return _finish(
                report,
                mode=effective_mode,
                dry_run=dry_run,
                applied=False,
                warnings=[*plan.report.warnings],
            )

        def transact(working: dict[str, SessionEntry]) -> MaintenancePlan:
            plan = _plan(
                target,
                working,
                settings=settings,
                now_ms=now,
                active_keys=keys,
                on_save=on_save,
                fix_missing=fix_missing,
            )
            store_file = target.store_file
            if plan.store_changed and target.dropped_keys and store_file is not None and store_file.exists():
                backup_file(store_file, now_ms=now)  # a repair (dropping unsafe rows): back up first
            for removal in plan.report.removals:
                working.pop(removal.key, None)
            return plan

        # rows the loader dropped are in the report: the store must not keep them (D6, OpenClaw)
        plan = await backend.transaction(transact, purge_dropped=True)
        done: list[FileAction] = []
        warnings: list[str] = []
        if target.sessions_dir is not None:  # no directory: no files were listed, so none are planned
            execute = (
                _execute_files if progress is None else functools.partial(_execute_files, progress=progress)
            )
            done, warnings = await anyio.to_thread.run_sync(
                execute, target.sessions_dir, plan.report.file_actions
            )
        report = plan.report
        if len(done) != len(report.file_actions):
            skipped = {a.name for a in report.file_actions} - {a.name for a in done}
            freed = sum(a.size for a in report.file_actions if a.name in skipped and a.action == "delete")
            report = _replace(report, file_actions=tuple(done), bytes_after=report.bytes_after + freed)
        report = await _storage_archives(target, plan, report, settings=settings, now_ms=now, apply=True)
        return _finish(
            report, mode=effective_mode, dry_run=False, applied=True, warnings=[*report.warnings, *warnings]
        )
    finally:
        if target.owned:
            await backend.aclose()


async def _storage_archives(
    target: _Target,
    plan: MaintenancePlan,
    report: MaintenanceReport,
    *,
    settings: MaintenanceSettings,
    now_ms: int,
    apply: bool,
) -> MaintenanceReport:
    """``report`` with the archive passes of a store's archiving storage (``_storage``) added."""
    if target.archives is None:
        return report
    remaining = {v.get("sessionId") for v in plan.entries_after.values()}
    actions = await storage_archive_passes(
        target.archives,
        removals=plan.report.removals,
        remaining_ids={sid for sid in remaining if isinstance(sid, str)},
        settings=settings,
        now_ms=now_ms,
        apply=apply,
    )
    if not actions:
        return report
    return _replace(report, file_actions=(*report.file_actions, *actions))


def _replace(report: MaintenanceReport, **changes: Any) -> MaintenanceReport:
    return attrs.evolve(report, **changes)


def _finish(
    report: MaintenanceReport, *, mode: str, dry_run: bool, applied: bool, warnings: list[str]
) -> MaintenanceReport:
    report = _replace(
        report, mode=mode, dry_run=dry_run, applied=applied, warnings=tuple(dict.fromkeys(warnings))
    )
    if not dry_run and (report.removals or report.file_actions or report.warnings):
        # one INFO record per run that changed (enforce) or would change (warn mode) something;
        # a dry run is the caller's question and logs nothing (docs/logging.md)
        _log.info(
            "session maintenance (%s) %s %d entries and %d files%s",
            mode,
            "removed" if applied else "would remove",
            len(report.removals),
            len(report.file_actions),
            f"; {len(report.warnings)} warnings" if report.warnings else "",
            extra={
                "mode": mode,
                "applied": applied,
                "removed_keys": list(report.removed_keys),
                "file_actions": len(report.file_actions),
                "bytes_before": report.bytes_before,
                "bytes_after": report.bytes_after,
                "warnings": list(report.warnings),
            },
        )
    return report
