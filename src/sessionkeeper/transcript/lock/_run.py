"""
The write lock around one blocking piece of work (:func:`run_locked`, :func:`run_locked_now`): lock
file created, work run, lock file removed in one worker-thread call, or inline on the event-loop thread
when the lock is free. Same lock file, payload, waiting and reclaim as :class:`._lock.SessionWriteLock`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Final, TypeVar

import anyio

from sessionkeeper._clock import SYSTEM_CLOCK, Clock
from sessionkeeper._lockfile import (
    ORPHAN_GRACE_MS,
    SHORT_TIMEOUT_ORPHAN_GRACE_MS,
    format_lock_payload,
    lock_path_for,
)
from sessionkeeper._tracing import traced
from sessionkeeper.transcript.lock._lock import _acquire_held
from sessionkeeper.transcript.lock._registry import (
    Attempt,
    PathState,
    Registry,
    cached_key,
    default_settings,
    ensure_watchdog,
    normalize,
    registry,
    try_create,
)
from sessionkeeper.transcript.lock._settings import WriteLockSettings


__all__ = ("run_locked", "run_locked_now")

T = TypeVar("T")


@traced("lock_wait")
async def run_locked(
    path: Path | str,
    work: Callable[[], T],
    *,
    settings: WriteLockSettings | None = None,
    clock: Clock | None = None,
    timeout_ms: float | None = None,
) -> T:
    """
    Run blocking ``work`` in a worker thread while holding the transcript's write lock.

    The lock file is created, ``work`` runs and the lock file is removed in one worker-thread call,
    so one locked write costs one thread hop (``TranscriptManager`` uses this for each append made
    outside :meth:`TranscriptManager.hold_write_lock`). Waiting, reclaim and errors are those of
    :meth:`SessionWriteLock.acquire`; the lock is removed even when ``work`` raises.

    Returns:
        What ``work`` returned.

    Raises:
        SessionBusyError, StaleLockError, LockError: As :meth:`SessionWriteLock.acquire`; and
            whatever ``work`` raises.
    """
    resolved = settings if settings is not None else default_settings()
    use_clock = clock if clock is not None else SYSTEM_CLOCK
    timeout = resolved.acquire_timeout_ms if timeout_ms is None else timeout_ms
    reg = registry()
    file = Path(path)
    cached = cached_key(file, reg.real_dirs)
    key_path = (
        cached if cached is not None else await anyio.to_thread.run_sync(normalize, file, reg.real_dirs)
    )
    outcome = await _acquire_held(reg, key_path, resolved, use_clock, timeout, False, work)
    assert isinstance(outcome, Attempt)
    return outcome.result  # type: ignore[no-any-return]


def run_locked_now(
    path: Path | str,
    work: Callable[[], T],
    *,
    settings: WriteLockSettings | None = None,
    clock: Clock | None = None,
) -> Attempt | None:
    """
    Synchronous try-once of :func:`run_locked`, for a caller on the event-loop thread: when the lock
    is free, create the lock file, run ``work`` and remove the lock file, all in this thread.

    Never waits and never inspects or reclaims an existing lock: it returns ``None`` at once (nothing
    done, ``work`` not run) when this process holds, claims or queues for the lock, when the
    transcript's directory has not been resolved yet (the first :func:`run_locked` does that), or
    when a lock file exists; the caller then uses :func:`run_locked`, whose waiting and reclaim stay
    async and off the loop. Only if another process creates the lock file between the existence
    check and the create does this run the same single inspection :func:`run_locked` would (and
    return ``None``). Same lock file, payload and removal (remove-if-unchanged) as :func:`run_locked`.

    Returns:
        The finished attempt (``.result`` is what ``work`` returned), or ``None``.

    Raises:
        LockError: The lock file cannot be created (permissions, missing file system).
        Exception: Whatever ``work`` raises (the lock file is removed first).
    """
    resolved = settings if settings is not None else default_settings()
    reg = registry()
    found = _fast_key(path, reg)
    if found is None:
        return None
    key_path, lock_path = found
    if os.path.lexists(lock_path):
        return None
    use_clock = clock if clock is not None else SYSTEM_CLOCK
    key = str(key_path)
    ensure_watchdog(resolved.watchdog_interval_ms)
    with reg.lock:
        state = reg.states.get(key)
        if state is None:
            state = reg.states[key] = PathState()
        elif not state.idle():
            return None
        state.claimed = True
    try:
        now_ms = use_clock.now_ms()
        raw = format_lock_payload(
            pid=reg.pid, created_at_ms=now_ms, max_hold_ms=resolved.max_hold_ms, starttime=reg.starttime
        )
        short = resolved.acquire_timeout_ms < ORPHAN_GRACE_MS
        grace = SHORT_TIMEOUT_ORPHAN_GRACE_MS if short else ORPHAN_GRACE_MS
        attempt = try_create(
            lock_path, raw, now_ms=now_ms, stale_ms=resolved.stale_ms, orphan_grace_ms=grace, then=work
        )
    finally:
        with reg.lock:
            state.claimed = False
            state.wake_head()
            if state.idle() and reg.states.get(key) is state:
                del reg.states[key]
    return attempt if attempt.outcome == "done" else None


_FAST_KEYS: dict[str, tuple[Registry, Path, Path]] = {}
"""Absolute transcript path -> (registry, normalised path, lock path), for :func:`run_locked_now`."""

_FAST_KEYS_MAX: Final = 4096


def _fast_key(path: Path | str, reg: Registry) -> tuple[Path, Path] | None:
    """
    The normalised path and lock path of ``path`` without I/O, or ``None`` when its directory was
    never resolved. Memoised for absolute paths (a relative one depends on the working directory);
    a resolved directory stays resolved for the life of the registry (a forked child gets a new one).
    """
    text = os.fspath(path)
    found = _FAST_KEYS.get(text)
    if found is not None and found[0] is reg:
        return found[1], found[2]
    file = Path(text)
    key_path = cached_key(file, reg.real_dirs)
    if key_path is None:
        return None
    lock_path = lock_path_for(key_path)
    if file.is_absolute():
        if len(_FAST_KEYS) >= _FAST_KEYS_MAX:
            _FAST_KEYS.clear()
        _FAST_KEYS[text] = (reg, key_path, lock_path)
    return key_path, lock_path
