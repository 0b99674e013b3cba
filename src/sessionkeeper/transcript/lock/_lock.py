"""
The session write lock: one writer per transcript, across tasks, threads and processes (OpenClaw spec §3).

Usage::

    async with SessionWriteLock.acquire(path) as lock:
        ...  # append to the transcript; lock.ensure_held() before each write

    lock = await SessionWriteLock.acquire(path, settings=settings, clock=clock)
    try:
        ...
    finally:
        await lock.release()

How it works:

- The lock file ``<realpath(dir)>/<name>.lock`` is created with ``O_CREAT | O_EXCL`` (mode 0600) and
  holds OpenClaw's payload (pid, ``createdAt`` ISO, ``maxHoldMs``, ``starttime``; see
  :mod:`sessionkeeper._lockfile`), so sessionkeeper waits for OpenClaw's locks. (OpenClaw 2026.7.35 does not
  wait for ours: it evicts any live owner that is not an OpenClaw process, ``non-openclaw-owner``;
  :meth:`SessionWriteLock.verify_file` detects that before the next write.)
- Inside one process, contenders for the same file queue in FIFO order and are woken as soon as the
  lock is released (from any task, thread or event loop); only the head of the queue touches the file.
  Against other processes the head polls every ``poll_interval_ms`` (50 ms) through the injected
  :class:`~sessionkeeper._clock.Clock` until ``acquire_timeout_ms``, then raises
  :class:`~sessionkeeper.exceptions.SessionBusyError` (owner pid, created time, waited ms).
- A lock left by a dead process, a recycled pid, or an orphan of this process is removed, but only
  if the file is unchanged since it was inspected (:func:`sessionkeeper._lockfile.remove_if_unchanged`). A
  lock whose live owner is merely too old or over its ``maxHoldMs`` is never taken: acquire raises
  :class:`~sessionkeeper.exceptions.StaleLockError` at once (OpenClaw's ``SessionWriteLockStaleError``;
  DESIGN D8).
- A watchdog thread (every ``watchdog_interval_ms``, default 60 s) releases locks this process has
  held longer than ``max_hold_ms``. The holder is not interrupted: its handle turns "lost"
  (:attr:`SessionWriteLock.held` is ``False``, :meth:`SessionWriteLock.ensure_held` raises
  :class:`~sessionkeeper.exceptions.LockNotHeldError` with reason ``"max-hold-exceeded"``), so a
  writer that checks before writing cannot write without the lock; its later :meth:`release` is a
  no-op and never removes a lock someone else took since.
- Locks still held at interpreter exit are removed (``atexit``). No signal handlers are installed (a
  library must not take the host's signals); a lock left by a killed process is reclaimed at once by
  the next contender (``dead-pid``). A forked child starts with an empty registry and never removes
  its parent's locks.
"""

from __future__ import annotations

import functools
import logging
import math
import os
from collections.abc import Callable, Generator
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal, NoReturn, TypeVar

import anyio

from sessionkeeper._clock import SYSTEM_CLOCK, Clock
from sessionkeeper._lockfile import (
    ORPHAN_GRACE_MS,
    SHORT_TIMEOUT_ORPHAN_GRACE_MS,
    LockInspection,
    LockOwner,
    format_lock_payload,
    inspect_lock_file,
    lock_path_for,
    parse_lock_payload,
    remove_if_unchanged,
)
from sessionkeeper._tracing import traced
from sessionkeeper.exceptions import LockError, LockNotHeldError, SessionBusyError, StaleLockError
from sessionkeeper.transcript.lock._registry import (
    Attempt,
    Held,
    PathState,
    Registry,
    Waiter,
    cached_key,
    default_settings,
    ensure_watchdog,
    finish_release,
    normalize,
    registry,
    run_watchdog,
    try_create,
    wait_or_wake,
)
from sessionkeeper.transcript.lock._settings import WriteLockSettings


__all__ = ("LockAcquisition", "SessionWriteLock")

T = TypeVar("T")

_log = logging.getLogger("sessionkeeper.lock")

_EPSILON_S: Final = 1e-6
"""Remaining wait below which the timeout counts as reached (float clocks drift by ulps)."""


def _owner_details(inspection: LockInspection | None) -> tuple[int | None, int | None, str]:
    if inspection is None:
        return None, None, "owner=unknown"
    return inspection.owner.pid, inspection.owner.created_at_ms, inspection.describe()


# --------------------------------------------------------------------------- public API


class LockAcquisition:
    """
    A pending :meth:`SessionWriteLock.acquire`: await it for a handle, or use it with ``async with``.

    ``async with`` acquires on entry, yields the :class:`SessionWriteLock`, and releases on exit,
    also when the body raises or is cancelled.
    """

    __slots__ = ("_kwargs", "_lock")

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._lock: SessionWriteLock | None = None

    def __await__(self) -> Generator[Any, None, SessionWriteLock]:
        return SessionWriteLock._take(**self._kwargs).__await__()

    async def __aenter__(self) -> SessionWriteLock:
        self._lock = await SessionWriteLock._take(**self._kwargs)
        return self._lock

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._lock is not None:
            await self._lock.release()


class SessionWriteLock:
    """
    A handle on a transcript's write lock (OpenClaw spec §3). Obtain one with :meth:`acquire`.

    Attributes:
        path: The normalised transcript path (``realpath`` of its directory + its name).
        lock_path: ``<path>.lock``.
        settings: The settings it was acquired with.
    """

    def __init__(
        self, *, path: Path, held: Held, settings: WriteLockSettings, clock: Clock, reentrant: bool
    ) -> None:
        self.path = path
        self.lock_path: Path = held.lock_path
        self.settings = settings
        self._clock = clock
        self._reentrant = reentrant
        self._held: Held = held
        self._state: Literal["held", "released", "disposed"] = "held"

    # -- acquiring ---------------------------------------------------------------------------

    @classmethod
    def acquire(
        cls,
        path: Path | str,
        *,
        settings: WriteLockSettings | None = None,
        clock: Clock | None = None,
        timeout_ms: float | None = None,
        reentrant: bool | None = None,
    ) -> LockAcquisition:
        """
        Take the write lock of the transcript at ``path``; await the result or use ``async with``.

        Args:
            path: The transcript file (it need not exist; its directory is created 0700).
            settings: Lock settings; ``None`` resolves them from the environment
                (:meth:`WriteLockSettings.from_config` with no config).
            clock: Time source for timeouts, polling, ``createdAt`` and hold durations.
            timeout_ms: Overrides ``settings.acquire_timeout_ms`` for this call (``math.inf`` allowed).
            reentrant: Overrides ``settings.allow_reentrant``: if this process already holds the
                lock, return a new handle and increment the held count instead of waiting.

        Returns:
            A :class:`LockAcquisition` resolving to a held :class:`SessionWriteLock`.

        Raises:
            SessionBusyError: Not acquired within the timeout (``owner_pid``, ``owner_created_at``
                in ms, ``waited_ms``); message ``session file locked (timeout <ms>ms): pid=<p>
                alive=<bool> ageMs=<n> <lock path>``.
            StaleLockError: The lock is stale only for age and its owner is alive: reported, not taken.
            LockError: The lock file cannot be created (permissions, missing file system).
        """
        return LockAcquisition(
            path=Path(path), settings=settings, clock=clock, timeout_ms=timeout_ms, reentrant=reentrant
        )

    @classmethod
    @traced("lock_wait")
    async def _take(
        cls,
        *,
        path: Path,
        settings: WriteLockSettings | None,
        clock: Clock | None,
        timeout_ms: float | None,
        reentrant: bool | None,
    ) -> SessionWriteLock:
        resolved = settings if settings is not None else default_settings()
        use_clock = clock if clock is not None else SYSTEM_CLOCK
        timeout = resolved.acquire_timeout_ms if timeout_ms is None else timeout_ms
        if not timeout > 0:
            raise LockError(f"timeout_ms must be positive, got {timeout!r}")
        again = resolved.allow_reentrant if reentrant is None else reentrant
        reg = registry()
        cached = cached_key(path, reg.real_dirs)
        key_path = (
            cached if cached is not None else await anyio.to_thread.run_sync(normalize, path, reg.real_dirs)
        )
        held = await _acquire_held(reg, key_path, resolved, use_clock, timeout, again)
        assert isinstance(held, Held)
        return cls(path=key_path, held=held, settings=resolved, clock=use_clock, reentrant=again)

    # -- state -------------------------------------------------------------------------------

    @property
    def held(self) -> bool:
        """Whether this handle still holds the lock (``False`` after release, dispose or the watchdog)."""
        return self._state == "held" and self._held.lost is None

    @property
    def lost_reason(self) -> str | None:
        """``"max-hold-exceeded"`` when the watchdog released the lock under this handle, else ``None``."""
        return self._held.lost

    @property
    def owner(self) -> LockOwner:
        """What this process wrote into the lock file (pid, ``createdAt``, ``maxHoldMs``, ``starttime``)."""
        return self._held.owner

    def ensure_held(self) -> None:
        """
        Check, before a write, that this handle still holds the lock.

        Raises:
            LockNotHeldError: Released (``reason="released"``), disposed (``"disposed"``) or
                released by the watchdog after ``max_hold_ms`` (``"max-hold-exceeded"``).
        """
        if self._state != "held":
            raise LockNotHeldError(
                f"write lock of {self.path} is {self._state}", path=self.path, reason=self._state
            )
        if self._held.lost is not None:
            raise LockNotHeldError(
                f"write lock of {self.path} was released by the watchdog after {self._held.max_hold_ms}ms",
                path=self.path,
                reason=self._held.lost,
            )

    def verify_file(self) -> None:
        """
        Check on disk that the lock file is still the one this handle wrote (synchronous: one ``lstat``).

        Call it from the worker thread that is about to write (``TranscriptManager`` does). A lock file
        removed or replaced behind our back (a manual ``rm``; OpenClaw's ``non-openclaw-owner``
        takeover, which treats any non-OpenClaw live owner as stale) turns the handle lost
        (``lost_reason == "lost"``) instead of letting two writers write at once.

        Raises:
            LockNotHeldError: Not held (see :meth:`ensure_held`), or the file is gone or replaced
                (``reason="lost"``).
        """
        self.ensure_held()
        held = self._held
        snap = held.snapshot
        try:
            st = os.lstat(held.lock_path)
            same = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size) == (
                snap.dev,
                snap.ino,
                snap.mtime_ns,
                len(snap.raw),
            )
        except FileNotFoundError:
            same = False
        if same:
            return
        reg = registry()
        with reg.lock:
            state = reg.states.get(held.key)
            if held.lost is None:
                held.lost = "lost"
                held.releasing = True
        if state is not None:
            finish_release(reg, state, held)
        _log.warning("[session-write-lock] lock file removed or replaced while held: %s", held.lock_path)
        raise LockNotHeldError(
            f"write lock of {self.path} was taken away: {held.lock_path} was removed or replaced",
            path=self.path,
            reason="lost",
        )

    # -- releasing ---------------------------------------------------------------------------

    async def release(self) -> None:
        """
        Release the lock (remove the lock file if it is still the one written). Idempotent.

        With reentrant handles the file is removed when the last handle is released. Safe to call
        after the watchdog released the lock (nothing is removed then). Runs shielded from
        cancellation so a cancelled task never leaks its lock file.
        """
        if self._state != "held":
            return
        self._state = "released"
        with anyio.CancelScope(shield=True):
            await _release_held(registry(), self._held)

    async def dispose(self) -> None:
        """Release the lock and retire the handle: :meth:`reacquire` then raises (field report B22 #5)."""
        await self.release()
        self._state = "disposed"

    async def reacquire(self, *, timeout_ms: float | None = None) -> None:
        """
        Take the lock again after :meth:`release` (or after the watchdog took it away).

        No-op while the lock is held.

        Raises:
            LockNotHeldError: The handle was disposed (``reason="disposed"``); no lock file is created.
            SessionBusyError: As :meth:`acquire`.
        """
        if self._state == "disposed":
            raise LockNotHeldError(
                f"write lock handle of {self.path} was disposed", path=self.path, reason="disposed"
            )
        if self.held:
            return
        timeout = self.settings.acquire_timeout_ms if timeout_ms is None else timeout_ms
        held = await _acquire_held(
            registry(), self.path, self.settings, self._clock, timeout, self._reentrant
        )
        assert isinstance(held, Held)
        if self._disposed():  # disposed while we waited: give it back at once
            with anyio.CancelScope(shield=True):
                await _release_held(registry(), held)
            raise LockNotHeldError(
                f"write lock handle of {self.path} was disposed", path=self.path, reason="disposed"
            )
        self._held = held
        self._state = "held"

    def _disposed(self) -> bool:
        return self._state == "disposed"

    @classmethod
    def run_watchdog(cls) -> int:
        """
        Run one watchdog pass now: release every lock this process has held past its ``max_hold_ms``.

        The background thread calls this every ``watchdog_interval_ms``; hosts that set that to 0 (or
        tests with a fake clock) call it themselves. Hold time is measured on each lock's clock
        (``monotonic()``). Returns the number of locks released.
        """
        return run_watchdog(registry())

    def __repr__(self) -> str:
        return f"SessionWriteLock({str(self.path)!r}, state={self._state!r}, lost={self.lost_reason!r})"


async def _acquire_held(  # noqa: PLR0917 - private, called from three places
    reg: Registry,
    key_path: Path,
    settings: WriteLockSettings,
    clock: Clock,
    timeout_ms: float,
    reentrant: bool,
    then: Callable[[], Any] | None = None,
) -> Held | Attempt:
    """The acquire loop: in-process FIFO gate, then the lock file (see the module docstring)."""
    key = str(key_path)
    lock_path = lock_path_for(key_path)
    ensure_watchdog(settings.watchdog_interval_ms)
    start = clock.monotonic()
    poll_s = settings.poll_interval_ms / 1000
    grace = SHORT_TIMEOUT_ORPHAN_GRACE_MS if timeout_ms < ORPHAN_GRACE_MS else ORPHAN_GRACE_MS
    waiter: Waiter | None = None
    claimed = False
    state: PathState | None = None
    last: LockInspection | None = None

    def remaining_s() -> float:
        if timeout_ms == math.inf:
            return math.inf
        return timeout_ms / 1000 - (clock.monotonic() - start)

    try:
        while True:  # in-process gate
            with reg.lock:
                state = reg.states.setdefault(key, PathState())
                current = state.held
                if current is not None and reentrant and not current.releasing and current.lost is None:
                    current.count += 1
                    return current
                if current is None and not state.claimed and (not state.queue or state.queue[0] is waiter):
                    state.claimed = claimed = True
                    if waiter is not None:
                        state.queue.popleft()
                        waiter = None
                else:
                    if waiter is None:
                        waiter = Waiter()
                        state.queue.append(waiter)
                    else:
                        waiter.arm()
                    event = waiter.event
            if claimed:
                break
            left = remaining_s()
            if left <= _EPSILON_S:
                found = await anyio.to_thread.run_sync(_inspect_for_error, key_path, clock.now_ms(), settings)
                _raise_busy(lock_path, found, timeout_ms, clock.monotonic() - start)
            # every branch that reaches here set `event` (claimed breaks out above)
            await wait_or_wake(event, min(poll_s, left), clock)  # pyright: ignore[reportPossiblyUnboundVariable]

        while True:  # the lock file
            now_ms = clock.now_ms()
            raw = format_lock_payload(
                pid=reg.pid, created_at_ms=now_ms, max_hold_ms=settings.max_hold_ms, starttime=reg.starttime
            )
            attempt = await anyio.to_thread.run_sync(
                functools.partial(
                    try_create,
                    lock_path,
                    raw,
                    now_ms=now_ms,
                    stale_ms=settings.stale_ms,
                    orphan_grace_ms=grace,
                    then=then,
                )
            )
            if attempt.outcome == "done":
                return attempt
            if attempt.outcome == "acquired" and attempt.snapshot is not None:
                held = Held(
                    key=key,
                    lock_path=lock_path,
                    snapshot=attempt.snapshot,
                    owner=parse_lock_payload(raw),
                    acquired_mono=clock.monotonic(),
                    clock=clock,
                    max_hold_ms=settings.max_hold_ms,
                )
                with reg.lock:
                    state.held = held
                    state.claimed = claimed = False
                return held
            last = attempt.inspection or last
            if attempt.outcome == "report" and attempt.inspection is not None:
                insp = attempt.inspection
                reasons = ", ".join(insp.stale_reasons)
                raise StaleLockError(
                    f"session file lock stale ({reasons}): {insp.describe()} {lock_path}",
                    path=lock_path,
                    waited_ms=round((clock.monotonic() - start) * 1000, 3),
                    stale_reasons=insp.stale_reasons,
                    owner_pid=insp.owner.pid,
                    owner_created_at=insp.owner.created_at_ms,
                )
            left = remaining_s()
            if left <= _EPSILON_S:
                _raise_busy(lock_path, last, timeout_ms, clock.monotonic() - start)
            if attempt.outcome == "wait":
                await clock.sleep(min(poll_s, left))
    finally:
        with reg.lock:
            if state is not None:
                if waiter is not None and waiter in state.queue:
                    state.queue.remove(waiter)
                if claimed:
                    state.claimed = False
                state.wake_head()
                if state.idle() and reg.states.get(key) is state:
                    del reg.states[key]


def _inspect_for_error(key_path: Path, now_ms: int, settings: WriteLockSettings) -> LockInspection | None:
    found = inspect_lock_file(key_path, now_ms=now_ms, stale_ms=settings.stale_ms, held_by_this_process=True)
    return None if found is None else found[0]


def _raise_busy(
    lock_path: Path, inspection: LockInspection | None, timeout_ms: float, waited_s: float
) -> NoReturn:
    pid, created, owner = _owner_details(inspection)
    shown = "Infinity" if timeout_ms == math.inf else f"{timeout_ms:g}"
    raise SessionBusyError(
        f"session file locked (timeout {shown}ms): {owner} {lock_path}",
        path=lock_path,
        waited_ms=round(waited_s * 1000, 3),
        owner_pid=pid,
        owner_created_at=created,
    )


async def _release_held(reg: Registry, held: Held) -> None:
    with reg.lock:
        state = reg.states.get(held.key)
        if state is None or state.held is not held or held.lost is not None or held.releasing:
            return
        held.count -= 1
        if held.count > 0:
            return
        held.releasing = True
    try:
        await anyio.to_thread.run_sync(remove_if_unchanged, held.lock_path, held.snapshot)
    finally:
        finish_release(reg, state, held)
