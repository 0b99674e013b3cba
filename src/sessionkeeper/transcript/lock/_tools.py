"""
Synchronous and doctor-style inspectors of transcript write locks (DESIGN D6; OpenClaw spec §3).

:func:`read_lock_owner` and :func:`is_locked` are what maintenance asks before touching a transcript;
:func:`clean_stale_lock_files` is OpenClaw's ``cleanStaleLockFiles`` startup/doctor helper.
"""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import attrs

from sessionkeeper._clock import SYSTEM_CLOCK, Clock
from sessionkeeper._lockfile import (
    LockInspection,
    LockOwner,
    inspect_lock_file,
    lock_path_for,
    parse_lock_payload,
    read_lock_snapshot,
    reclaim_decision,
    remove_if_unchanged,
)
from sessionkeeper.transcript.lock._registry import default_settings, held_here
from sessionkeeper.transcript.lock._settings import WriteLockSettings


__all__ = ("StaleLockReport", "clean_stale_lock_files", "is_locked", "read_lock_owner")

_log = logging.getLogger("sessionkeeper.lock")


def read_lock_owner(path: Path | str) -> LockOwner | None:
    """
    Return the owner recorded in a transcript's lock file, or ``None`` when it has none.

    Synchronous (one small read); both ``createdAt`` formats are read (DESIGN D8).
    """
    snapshot = read_lock_snapshot(lock_path_for(path))
    return None if snapshot is None else parse_lock_payload(snapshot.raw)


def is_locked(
    path: Path | str, *, clock: Clock | None = None, settings: WriteLockSettings | None = None
) -> bool:
    """
    Return whether a transcript's write lock is held, by this process or a live other one (DESIGN D6).

    ``True`` when a lock file exists and a contender would not remove it now: this process holds it,
    its owner is alive, or it is a fresh payload-less lock still inside its grace period. A lock of a
    dead process, a recycled pid, or an orphan of this process does not count (the next writer
    reclaims it); a live owner counts even past ``stale_ms`` or its ``maxHoldMs``.
    Synchronous; for maintenance, which must not evict entries whose transcript is being written.

    Args:
        path: The transcript path.
        clock: Time source for the lock's age (default: the system clock).
        settings: For ``stale_ms`` (default: resolved from the environment).
    """
    now_ms = (clock if clock is not None else SYSTEM_CLOCK).now_ms()
    stale_ms = (settings if settings is not None else default_settings()).stale_ms
    here = held_here(path)
    found = inspect_lock_file(path, now_ms=now_ms, stale_ms=stale_ms, held_by_this_process=here)
    if found is None:
        return False
    if here:
        return True
    inspection, snapshot = found
    decision = reclaim_decision(inspection, lock_mtime_ms=snapshot.mtime_ms, now_ms=now_ms, stale_ms=stale_ms)
    return decision != "remove"


@attrs.frozen(kw_only=True)
class StaleLockReport:
    """One lock file seen by :func:`clean_stale_lock_files`: its inspection and what was done."""

    inspection: LockInspection
    removable: bool
    removed: bool


async def clean_stale_lock_files(
    sessions_dir: Path | str,
    *,
    settings: WriteLockSettings | None = None,
    clock: Clock | None = None,
    remove: bool = True,
) -> list[StaleLockReport]:
    """
    Inspect every ``*.jsonl.lock`` of a sessions directory and remove the reclaimable ones.

    OpenClaw's ``cleanStaleLockFiles`` (doctor/startup helper), same rules as a contender: dead or
    recycled owners and orphans of this process are removed if unchanged; a live owner is reported
    (``removable`` is ``False``), never removed. Locks this process holds are skipped.

    Returns:
        One report per lock file, sorted by name. A missing directory gives ``[]``.
    """
    resolved = settings if settings is not None else default_settings()
    use_clock = clock if clock is not None else SYSTEM_CLOCK
    directory = Path(sessions_dir)

    def scan() -> list[StaleLockReport]:
        try:
            names = sorted(e.name for e in directory.iterdir() if e.name.endswith(".jsonl.lock"))
        except FileNotFoundError:
            return []
        reports = []
        for name in names:
            transcript = directory / name[: -len(".lock")]
            here = held_here(transcript)
            now_ms = use_clock.now_ms()
            found = inspect_lock_file(
                transcript, now_ms=now_ms, stale_ms=resolved.stale_ms, held_by_this_process=here
            )
            if found is None:
                continue
            inspection, snapshot = found
            decision = reclaim_decision(
                inspection, lock_mtime_ms=snapshot.mtime_ms, now_ms=now_ms, stale_ms=resolved.stale_ms
            )
            removable = not here and decision == "remove"
            removed = remove and removable and remove_if_unchanged(inspection.lock_path, snapshot)
            if removed:
                _log.warning(
                    "removed stale session lock: %s (%s)",
                    inspection.lock_path,
                    ", ".join(inspection.stale_reasons),
                    extra={
                        "lock_path": str(inspection.lock_path),
                        "stale_reasons": list(inspection.stale_reasons),
                    },
                )
            reports.append(StaleLockReport(inspection=inspection, removable=removable, removed=removed))
        return reports

    return await anyio.to_thread.run_sync(scan)
