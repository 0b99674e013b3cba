"""
The write lock's process-wide state and its file attempts (see :mod:`._lock` for the rules).

- The registry: which transcripts this process holds or is taking, and the FIFO queue of in-process
  contenders for each; reset in a forked child; locks still held at exit are removed (``atexit``).
- The watchdog thread that releases locks held past their ``max_hold_ms``.
- One attempt on a lock file (created complete or not at all, :func:`create_complete`; else inspect and
  maybe remove-if-unchanged),
  run in a worker thread.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Literal

import anyio
import anyio.lowlevel
import attrs

from sessionkeeper._clock import Clock
from sessionkeeper._fs import DIR_MODE, FILE_MODE, temp_name
from sessionkeeper._lockfile import (
    LockInspection,
    LockOwner,
    LockSnapshot,
    inspect_lock_owner,
    parse_lock_payload,
    process_start_time,
    read_lock_snapshot,
    reclaim_decision,
    remove_if_unchanged,
)
from sessionkeeper.exceptions import LockError
from sessionkeeper.transcript.lock._local import wake_event
from sessionkeeper.transcript.lock._settings import (
    ENV_ACQUIRE_TIMEOUT_MS,
    ENV_MAX_HOLD_MS,
    ENV_STALE_MS,
    WriteLockSettings,
)


__all__ = ("Attempt", "Held", "PathState", "Registry", "registry")

_log = logging.getLogger("sessionkeeper.lock")

ENV_VARIABLES: Final = (ENV_ACQUIRE_TIMEOUT_MS, ENV_STALE_MS, ENV_MAX_HOLD_MS)

_CREATE_FLAGS: Final = (
    os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
)
# O_TMPFILE refused by the file system (or the kernel), and link(2) refused by it
_NO_TMPFILE: Final = frozenset({errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT})
_NO_HARD_LINKS: Final = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK, errno.EXDEV})


# --------------------------------------------------------------------------- process registry


@attrs.define(eq=False)
class Held:
    """One lock file this process holds (shared by reentrant handles)."""

    key: str
    lock_path: Path
    snapshot: LockSnapshot
    owner: LockOwner
    acquired_mono: float
    clock: Clock
    max_hold_ms: int
    count: int = 1
    releasing: bool = False
    lost: str | None = None


class Waiter:
    """A queued in-process contender; :meth:`wake` works from any thread or event loop."""

    __slots__ = ("event", "thread", "token")

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.token = anyio.lowlevel.current_token()
        self.event = anyio.Event()

    def arm(self) -> None:
        self.event = anyio.Event()

    def wake(self) -> None:
        wake_event(self.event, thread=self.thread, token=self.token)


@attrs.define(eq=False)
class PathState:
    held: Held | None = None
    claimed: bool = False
    queue: deque[Waiter] = attrs.field(factory=deque)

    def idle(self) -> bool:
        return self.held is None and not self.claimed and not self.queue

    def wake_head(self) -> None:
        if self.queue and self.held is None and not self.claimed:
            self.queue[0].wake()


class Registry:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.states: dict[str, PathState] = {}
        self.real_dirs: dict[str, str] = {}
        self.watchdog: threading.Thread | None = None
        self.watchdog_kick = threading.Event()
        self.watchdog_interval_s = 60.0
        self.pid = os.getpid()
        self.starttime = process_start_time(self.pid)


_REGISTRY = Registry()


def registry() -> Registry:
    """This process's registry (a forked child gets a fresh one)."""
    return _REGISTRY


def _reset_after_fork() -> None:
    global _REGISTRY  # noqa: PLW0603 - the registry is per process by design
    _REGISTRY = Registry()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _release_all_at_exit() -> None:
    reg = _REGISTRY
    if reg.pid != os.getpid():
        return
    with reg.lock:
        held = [st.held for st in reg.states.values() if st.held is not None]
    for record in held:
        with contextlib.suppress(OSError):  # best effort at exit
            remove_if_unchanged(record.lock_path, record.snapshot)


atexit.register(_release_all_at_exit)


def ensure_watchdog(interval_ms: int) -> None:
    """Start the watchdog thread, or make it tick faster if a shorter interval is asked for."""
    if interval_ms <= 0:
        return
    reg = _REGISTRY
    with reg.lock:
        if reg.watchdog is not None:
            if interval_ms / 1000 < reg.watchdog_interval_s:
                reg.watchdog_interval_s = interval_ms / 1000
                reg.watchdog_kick.set()
            return
        reg.watchdog_interval_s = interval_ms / 1000

        def loop() -> None:
            while True:
                reg.watchdog_kick.wait(reg.watchdog_interval_s)
                reg.watchdog_kick.clear()
                try:
                    run_watchdog(reg)
                except Exception:  # pragma: no cover - the watchdog must never die
                    _log.exception("[session-write-lock] watchdog check failed")

        reg.watchdog = threading.Thread(target=loop, name="sessionkeeper-lock-watchdog", daemon=True)
        reg.watchdog.start()


def run_watchdog(reg: Registry) -> int:
    expired: list[tuple[PathState, Held, float]] = []
    with reg.lock:
        for state in reg.states.values():
            held = state.held
            if held is None or held.releasing:
                continue
            held_for_ms = round((held.clock.monotonic() - held.acquired_mono) * 1000, 3)
            if held_for_ms > held.max_hold_ms:
                held.releasing = True
                held.lost = "max-hold-exceeded"
                expired.append((state, held, held_for_ms))
    for state, held, held_for_ms in expired:
        _log.warning(
            "[session-write-lock] releasing lock held for %dms (max=%dms): %s",
            round(held_for_ms),
            held.max_hold_ms,
            held.lock_path,
            extra={"lock_path": str(held.lock_path), "held_ms": held_for_ms, "max_hold_ms": held.max_hold_ms},
        )
        try:
            remove_if_unchanged(held.lock_path, held.snapshot)
        finally:
            finish_release(reg, state, held)
    return len(expired)


def finish_release(reg: Registry, state: PathState, held: Held) -> None:
    with reg.lock:
        if state.held is held:
            state.held = None
        state.wake_head()
        if state.idle() and reg.states.get(held.key) is state:
            del reg.states[held.key]


_DEFAULTS: dict[tuple[str | None, ...], WriteLockSettings] = {}


def default_settings() -> WriteLockSettings:
    """:meth:`WriteLockSettings.from_config` with no config, cached per value of the three env vars."""
    key = tuple(os.environ.get(name) for name in ENV_VARIABLES)
    found = _DEFAULTS.get(key)
    if found is None:
        found = _DEFAULTS[key] = WriteLockSettings.from_config()
    return found


# --------------------------------------------------------------------------- file attempts


@attrs.frozen(kw_only=True)
class Attempt:
    outcome: Literal["acquired", "done", "removed", "changed", "wait", "report"]
    snapshot: LockSnapshot | None = None
    inspection: LockInspection | None = None
    result: Any = None


def normalize(transcript: Path, real_dirs: dict[str, str]) -> Path:
    """
    ``<realpath(dir)>/<name>`` (OpenClaw), creating the directory 0700 if needed.

    Raises:
        LockError: The directory cannot be created or resolved (the ``OSError`` is the cause).
    """
    absolute = Path(transcript).absolute()
    parent = str(absolute.parent)
    real = real_dirs.get(parent)
    if real is None:
        try:
            absolute.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            real = os.path.realpath(parent, strict=True)
        except OSError as err:
            raise LockError(f"cannot use {parent} for a lock file: {err.strerror or err}") from err
        real_dirs[parent] = real
    return Path(real) / absolute.name


def cached_key(transcript: Path, real_dirs: dict[str, str]) -> Path | None:
    """The normalised path when its directory was resolved before (no I/O), else ``None``."""
    absolute = transcript if transcript.is_absolute() else Path.cwd() / transcript
    real = real_dirs.get(str(absolute.parent))
    return None if real is None else Path(real) / absolute.name


def try_create(
    lock_path: Path,
    raw: bytes,
    *,
    now_ms: int,
    stale_ms: float,
    orphan_grace_ms: int,
    then: Callable[[], Any] | None = None,
) -> Attempt:
    """One attempt on the lock file; with ``then``, run it under the new lock and remove the lock after."""
    try:
        st = create_complete(lock_path, raw)
    except FileExistsError:
        return contend(lock_path, now_ms=now_ms, stale_ms=stale_ms, orphan_grace_ms=orphan_grace_ms)
    except OSError as err:
        raise LockError(f"cannot create lock file {lock_path}: {err.strerror or err}") from err
    snapshot = LockSnapshot(dev=st.st_dev, ino=st.st_ino, mtime_ns=st.st_mtime_ns, raw=raw)
    if then is None:
        return Attempt(outcome="acquired", snapshot=snapshot)
    try:
        result = then()
    finally:
        remove_if_unchanged(lock_path, snapshot)
    return Attempt(outcome="done", snapshot=snapshot, result=result)


def _write_all(fd: int, raw: bytes) -> None:
    view = memoryview(raw)
    while view:
        view = view[os.write(fd, view) :]


def create_complete(lock_path: Path, raw: bytes) -> os.stat_result:
    """
    Create ``lock_path`` holding ``raw``, complete or not at all (issue 15, operational).

    The payload is written to an unnamed file (``O_TMPFILE``, Linux) or else to a temp file
    ``<lock>.<pid>.<uuid>.tmp`` (0600, ``O_EXCL|O_NOFOLLOW``), then hard-linked into place with
    ``link(2)``, which fails when any file or symlink, dangling or not, is there: ``O_EXCL`` semantics.
    A process killed before the link leaves no lock file (an empty, owner-less lock can only come from
    another program), and never an unnamed file; a killed named-temp fallback may leave its ``.tmp``.
    Where the file system has no hard links, the payload is written into an ``O_EXCL`` file directly.

    Returns:
        The ``fstat`` of the new lock file (identity and mtime of what was linked).

    Raises:
        FileExistsError: A lock file (or any directory entry) already exists at ``lock_path``.
        OSError: The directory cannot be written.
    """
    made = _create_unnamed(lock_path, raw)
    if made is not None:
        return made
    tmp = temp_name(lock_path)
    fd = os.open(tmp, _CREATE_FLAGS, FILE_MODE)
    try:
        _write_all(fd, raw)
        st = os.fstat(fd)
        try:
            os.link(tmp, lock_path, follow_symlinks=False)
        except OSError as err:
            if err.errno not in _NO_HARD_LINKS:
                raise
            return _create_in_place(lock_path, raw)
        return st
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()


def _create_unnamed(lock_path: Path, raw: bytes) -> os.stat_result | None:
    """The ``O_TMPFILE`` + ``linkat(/proc/self/fd/N, AT_SYMLINK_FOLLOW)`` way; ``None`` where unsupported."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag:
        return None
    directory = lock_path.parent
    try:
        fd = os.open(directory, flag | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    except OSError as err:
        if err.errno in _NO_TMPFILE:
            return None
        raise
    try:
        _write_all(fd, raw)
        st = os.fstat(fd)
        dir_fd = os.open(directory, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            os.link(f"/proc/self/fd/{fd}", lock_path, src_dir_fd=dir_fd, follow_symlinks=True)
        except OSError as err:
            no_proc = err.errno == errno.ENOENT and not Path("/proc/self/fd").is_dir()
            if err.errno in _NO_HARD_LINKS or no_proc:
                return None
            raise
        finally:
            os.close(dir_fd)
        return st
    finally:
        os.close(fd)


def _create_in_place(lock_path: Path, raw: bytes) -> os.stat_result:
    """The fallback without hard links: ``O_CREAT|O_EXCL|O_NOFOLLOW``, then the payload."""
    fd = os.open(lock_path, _CREATE_FLAGS, FILE_MODE)
    try:
        try:
            _write_all(fd, raw)
            return os.fstat(fd)
        except OSError:  # pragma: no cover - disk full on a fresh tiny file
            mine = os.fstat(fd)
            remove_if_unchanged(
                lock_path, LockSnapshot(dev=mine.st_dev, ino=mine.st_ino, mtime_ns=mine.st_mtime_ns, raw=b"")
            )
            raise
    finally:
        os.close(fd)


def contend(lock_path: Path, *, now_ms: int, stale_ms: float, orphan_grace_ms: int) -> Attempt:
    snapshot = read_lock_snapshot(lock_path)
    if snapshot is None:
        return Attempt(outcome="changed")
    inspection = inspect_lock_owner(
        parse_lock_payload(snapshot.raw),
        lock_path=lock_path,
        now_ms=now_ms,
        stale_ms=stale_ms,
        held_by_this_process=False,
    )
    decision = reclaim_decision(
        inspection,
        lock_mtime_ms=snapshot.mtime_ms,
        now_ms=now_ms,
        stale_ms=stale_ms,
        orphan_grace_ms=orphan_grace_ms,
    )
    if decision == "remove":
        if remove_if_unchanged(lock_path, snapshot):
            _log.warning(
                "removed stale session lock: %s (%s)",
                lock_path,
                ", ".join(inspection.stale_reasons),
                extra={"lock_path": str(lock_path), "stale_reasons": list(inspection.stale_reasons)},
            )
            return Attempt(outcome="removed", inspection=inspection)
        return Attempt(outcome="changed", inspection=inspection)
    return Attempt(outcome=decision, inspection=inspection)


async def wait_or_wake(event: anyio.Event, seconds: float, clock: Clock) -> None:
    """Wait until ``event`` is set or ``seconds`` have passed on ``clock``."""
    async with anyio.create_task_group() as tg:

        async def timer() -> None:
            await clock.sleep(seconds)
            tg.cancel_scope.cancel()

        tg.start_soon(timer)
        await event.wait()
        tg.cancel_scope.cancel()


def held_here(path: Path | str) -> bool:
    reg = _REGISTRY
    absolute = Path(path).absolute()
    real = reg.real_dirs.get(str(absolute.parent))
    key = (
        str(Path(real) / absolute.name)
        if real
        else str(Path(os.path.realpath(absolute.parent)) / absolute.name)
    )
    with reg.lock:
        state = reg.states.get(key)
        return state is not None and (state.held is not None or state.claimed)
