"""
Lock files: their payload, process liveness, and the staleness rules (OpenClaw spec §3).

Everything here is synchronous. The pure parts (:func:`parse_lock_payload`,
:func:`format_lock_payload`, :func:`inspect_lock_owner`, :func:`reclaim_decision`) take every
outside fact (liveness, start times, clock) as arguments; the thin file helpers
(:func:`read_lock_snapshot`, :func:`remove_if_unchanged`, :func:`inspect_lock_file`) do the I/O;
``sessionkeeper.transcript``'s ``read_lock_owner`` and ``is_locked`` build on them.

Lock file (OpenClaw's format, DESIGN D8): ``<transcript>.lock`` next to the transcript, mode 0600,
pretty-printed JSON with a trailing newline::

    {
      "pid": 4242,
      "createdAt": "2026-05-07T10:11:12.345Z",
      "maxHoldMs": 300000,
      "starttime": 123456
    }

Both ``createdAt`` forms are read: OpenClaw's ISO string and a number of ms since the epoch.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final, Literal

import attrs

from sessionkeeper.records import iso_from_ms


try:  # POSIX only; elsewhere removal falls back to check-then-unlink.
    import fcntl as _fcntl
except ImportError:  # pragma: no cover - Windows
    _fcntl = None  # type: ignore[assignment]


__all__ = (
    "STALE_REASONS",
    "LockInspection",
    "LockOwner",
    "LockSnapshot",
    "format_lock_payload",
    "inspect_lock_owner",
    "is_pid_alive",
    "lock_path_for",
    "parse_lock_payload",
    "process_start_time",
    "read_lock_snapshot",
    "reclaim_decision",
    "remove_if_unchanged",
)

STALE_REASONS: Final = (
    "missing-pid",
    "dead-pid",
    "recycled-pid",
    "invalid-createdAt",
    "too-old",
    "hold-exceeded",
    "orphan-self-pid",
)
"""Every stale reason this module can report, in OpenClaw's order (spec §3)."""

REPORT_ONLY_REASONS: Final = frozenset({"too-old", "hold-exceeded"})
"""Reasons that never allow removal on their own: a live owner is reported, not evicted (D8)."""

_MTIME_FALLBACK_REASONS: Final = frozenset({"missing-pid", "invalid-createdAt"})

ORPHAN_GRACE_MS: Final = 30_000
SHORT_TIMEOUT_ORPHAN_GRACE_MS: Final = 5_000
_MAX_LOCK_BYTES: Final = 64 * 1024


def lock_path_for(transcript: Path | str) -> Path:
    """Return the lock file of a transcript: ``<transcript>.lock`` (OpenClaw spec §3)."""
    path = Path(transcript)
    return path.with_name(path.name + ".lock")


# --------------------------------------------------------------------------- processes


def process_start_time(pid: int) -> int | None:
    """
    Return a process's start time, to tell a recycled pid from the process that wrote a lock.

    On Linux this is field 22 (``starttime``, clock ticks since boot) of ``/proc/<pid>/stat``, the
    value OpenClaw writes. Elsewhere (macOS, Windows, a Linux without ``/proc``) it returns ``None``:
    the lock then carries no ``starttime`` and recycled pids are not detected (OpenClaw does the same).
    """
    if pid <= 0 or not sys.platform.startswith("linux"):
        return None
    try:
        with Path(f"/proc/{pid}/stat").open("rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    end = stat.rfind(b")")
    if end < 0:
        return None
    fields = stat[end + 1 :].split()
    try:
        value = int(fields[19])
    except (IndexError, ValueError):
        return None
    return value if value >= 0 else None


def _is_zombie(pid: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        with Path(f"/proc/{pid}/status").open("rb") as handle:
            for line in handle:
                if line.startswith(b"State:"):
                    return line.split()[1:2] == [b"Z"]
    except OSError:
        return False
    return False


def is_pid_alive(pid: int) -> bool:
    """
    Return whether a process with this pid exists and is not a zombie (OpenClaw ``isPidAlive``).

    ``kill(pid, 0)`` failing with ``ESRCH`` means dead. Unlike OpenClaw, ``EPERM`` (the process
    exists but belongs to another user) counts as alive: a live owner is never evicted (DESIGN D8).
    """
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, OSError):
        return False
    return not _is_zombie(pid)


# --------------------------------------------------------------------------- payload


@attrs.frozen(kw_only=True)
class LockOwner:
    """
    What a lock file says about its owner (every field ``None`` when absent or invalid).

    Attributes:
        pid: Owner process id (a positive integer).
        created_at_ms: When the lock was taken, ms since the epoch (from an ISO ``createdAt`` or a number).
        created_at: ``createdAt`` as written (ISO string, or the number as text).
        starttime: The owner's process start time (Linux clock ticks since boot).
        max_hold_ms: The owner's own max hold, ms.
    """

    pid: int | None = None
    created_at_ms: int | None = None
    created_at: str | None = None
    starttime: int | None = None
    max_hold_ms: int | None = None


def _valid_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


_EPOCH: Final = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def _parse_created_at(value: object) -> tuple[int | None, str | None]:
    if isinstance(value, str):
        text = value.strip()
        try:
            when = _dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            return None, value
        if when.tzinfo is None:
            when = when.replace(tzinfo=_dt.UTC)
        return (when - _EPOCH) // _dt.timedelta(milliseconds=1), value
    number = _valid_int(value)
    if number is not None:
        return number, str(number)
    return None, None


def parse_lock_payload(raw: bytes | str) -> LockOwner:
    """
    Parse a lock file's content; unreadable content gives an empty :class:`LockOwner`.

    Accepts OpenClaw's format (``createdAt`` an ISO string) and the numeric form (``createdAt`` in
    ms since the epoch). ``pid`` must be a positive integer, ``starttime`` a non-negative one and
    ``maxHoldMs`` a positive one; anything else is treated as absent (OpenClaw ``parseLockPayload``).
    """
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested ~1000 deep
        return LockOwner()
    if not isinstance(data, dict):
        return LockOwner()
    pid = _valid_int(data.get("pid"))
    created_ms, created = _parse_created_at(data.get("createdAt"))
    hold = _valid_int(data.get("maxHoldMs"))
    return LockOwner(
        pid=pid if pid else None,
        created_at_ms=created_ms,
        created_at=created,
        starttime=_valid_int(data.get("starttime")),
        max_hold_ms=hold if hold else None,
    )


iso_ms = iso_from_ms
"""``Date.prototype.toISOString()`` of a time in ms: ``2026-05-07T10:11:12.345Z`` (the records rule)."""


def format_lock_payload(*, pid: int, created_at_ms: int, max_hold_ms: int, starttime: int | None) -> bytes:
    """
    Serialise a lock payload exactly as OpenClaw writes it (``JSON.stringify(p, null, 2) + "\\n"``).

    Key order ``pid``, ``createdAt`` (ISO with ms and ``Z``), ``maxHoldMs``, then ``starttime`` when known.
    """
    text = (
        f'{{\n  "pid": {int(pid)},\n  "createdAt": "{iso_ms(created_at_ms)}",\n'
        f'  "maxHoldMs": {int(max_hold_ms)}'
    )
    if starttime is not None:
        text += f',\n  "starttime": {int(starttime)}'
    return (text + "\n}\n").encode()


# --------------------------------------------------------------------------- inspection


@attrs.frozen(kw_only=True)
class LockInspection:
    """
    The verdict on one lock file (OpenClaw ``inspectLockPayload``).

    Attributes:
        lock_path: The lock file.
        owner: What the file says (empty :class:`LockOwner` if unreadable).
        pid_alive: Whether the owner pid is a live process.
        age_ms: ``now - createdAt`` in ms (>= 0), or ``None`` without a valid ``createdAt``.
        stale_reasons: Reasons from :data:`STALE_REASONS`, empty when the lock is fresh.
    """

    lock_path: Path
    owner: LockOwner
    pid_alive: bool
    age_ms: int | None
    stale_reasons: tuple[str, ...]

    @property
    def stale(self) -> bool:
        """Whether any stale reason applies."""
        return bool(self.stale_reasons)

    @property
    def report_only(self) -> bool:
        """Stale only for age (``too-old``/``hold-exceeded``): reported, never removed (D8)."""
        return self.stale and all(reason in REPORT_ONLY_REASONS for reason in self.stale_reasons)

    def describe(self) -> str:
        """OpenClaw's owner text: ``pid=<p> alive=<bool> ageMs=<n>`` (or ``owner=unknown``)."""
        parts = []
        if self.owner.pid is not None:
            parts += [f"pid={self.owner.pid}", f"alive={'true' if self.pid_alive else 'false'}"]
        else:
            parts.append("owner=unknown")
        if self.age_ms is not None:
            parts.append(f"ageMs={self.age_ms}")
        return " ".join(parts)


def inspect_lock_owner(
    owner: LockOwner,
    *,
    lock_path: Path,
    now_ms: int,
    stale_ms: float,
    held_by_this_process: bool,
    self_pid: int | None = None,
    pid_alive: Callable[[int], bool] = is_pid_alive,
    start_time: Callable[[int], int | None] = process_start_time,
) -> LockInspection:
    """
    Judge a lock's owner (OpenClaw spec §3 "Stale detection"; pure given its callables).

    Reasons, in order: ``missing-pid`` | ``dead-pid`` | ``recycled-pid`` (alive, but its start time
    differs from the recorded ``starttime``); ``invalid-createdAt`` | ``too-old`` (age > ``stale_ms``);
    ``hold-exceeded`` (age > the owner's ``maxHoldMs``, only when this process does not hold the
    lock); ``orphan-self-pid`` (the pid is ours, this process holds nothing for the file, and the
    start time matches or is absent).

    Args:
        owner: The parsed payload.
        lock_path: The lock file (carried into the result).
        now_ms: The current time, ms since the epoch.
        stale_ms: :attr:`WriteLockSettings.stale_ms`.
        held_by_this_process: Whether this process holds (or is taking) the lock on this file.
        self_pid: This process's pid (default :func:`os.getpid`).
        pid_alive: Liveness test (default :func:`is_pid_alive`).
        start_time: Start-time probe (default :func:`process_start_time`).
    """
    me = os.getpid() if self_pid is None else self_pid
    pid = owner.pid
    alive = pid is not None and pid_alive(pid)
    age = None if owner.created_at_ms is None else max(0, now_ms - owner.created_at_ms)
    reasons: list[str] = []
    if pid is None:
        reasons.append("missing-pid")
    elif not alive:
        reasons.append("dead-pid")
    elif owner.starttime is not None:
        current = start_time(pid)
        if current is not None and current != owner.starttime:
            reasons.append("recycled-pid")
    if age is None:
        reasons.append("invalid-createdAt")
    elif age > stale_ms:
        reasons.append("too-old")
    if (
        not held_by_this_process
        and owner.max_hold_ms is not None
        and age is not None
        and age > owner.max_hold_ms
    ):
        reasons.append("hold-exceeded")
    if pid == me and not held_by_this_process:
        mine = start_time(me) if owner.starttime is not None else None
        if owner.starttime is None or (mine is not None and mine == owner.starttime):
            reasons.append("orphan-self-pid")
    return LockInspection(
        lock_path=lock_path, owner=owner, pid_alive=alive, age_ms=age, stale_reasons=tuple(reasons)
    )


Decision = Literal["wait", "remove", "report"]


def reclaim_decision(
    inspection: LockInspection,
    *,
    lock_mtime_ms: float | None,
    now_ms: int,
    stale_ms: float,
    orphan_grace_ms: int = ORPHAN_GRACE_MS,
) -> Decision:
    """
    What a contender does with a lock it could not take (OpenClaw spec §3 "Reclaim policy").

    - fresh lock: ``"wait"``;
    - stale only for age (``too-old``/``hold-exceeded``): ``"report"``; a live owner is never evicted (D8);
    - only ``missing-pid``/``invalid-createdAt`` (e.g. a file still being written): ``"remove"`` once
      the file's mtime is older than ``min(stale_ms, orphan_grace_ms)``, else ``"wait"``; but a live
      pid with an unreadable ``createdAt`` is never removed (``"wait"``; D8 deviation: OpenClaw removes
      it after the grace);
    - any other stale reason: ``"remove"`` (the caller removes only if the file is unchanged).

    Args:
        inspection: From :func:`inspect_lock_owner`.
        lock_mtime_ms: The lock file's mtime in ms (``None`` if it could not be read: removal allowed).
        now_ms: Current time, ms since the epoch.
        stale_ms: :attr:`WriteLockSettings.stale_ms`.
        orphan_grace_ms: 30000, or 5000 when the acquire timeout is under 30 s.
    """
    if not inspection.stale:
        return "wait"
    if inspection.report_only:
        return "report"
    if all(reason in _MTIME_FALLBACK_REASONS for reason in inspection.stale_reasons):
        if inspection.pid_alive:
            return "wait"
        if lock_mtime_ms is None:
            return "remove"
        return "remove" if max(0.0, now_ms - lock_mtime_ms) > min(stale_ms, orphan_grace_ms) else "wait"
    return "remove"


# --------------------------------------------------------------------------- files


@attrs.frozen(kw_only=True)
class LockSnapshot:
    """A lock file as observed: identity (device, inode), mtime, and exact bytes."""

    dev: int
    ino: int
    mtime_ns: int
    raw: bytes

    @property
    def mtime_ms(self) -> float:
        """The mtime in ms since the epoch."""
        return self.mtime_ns / 1e6


def _open_flags() -> int:
    return os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _read_fd(fd: int) -> bytes:
    chunks = []
    total = 0
    while total <= _MAX_LOCK_BYTES:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def read_lock_snapshot(lock_path: Path) -> LockSnapshot | None:
    """
    Read a lock file (identity, mtime, bytes) without following a symlink.

    Returns:
        The snapshot, or ``None`` when no lock file exists. A symlink or unreadable file gives a
        snapshot with empty content (it then inspects as ``missing-pid``).
    """
    try:
        fd = os.open(lock_path, _open_flags())
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno not in (errno.ELOOP, errno.EACCES, errno.EISDIR):
            raise
        try:
            st = os.lstat(lock_path)
        except FileNotFoundError:
            return None
        return LockSnapshot(dev=st.st_dev, ino=st.st_ino, mtime_ns=st.st_mtime_ns, raw=b"")
    try:
        st = os.fstat(fd)
        raw = _read_fd(fd)
    finally:
        os.close(fd)
    return LockSnapshot(dev=st.st_dev, ino=st.st_ino, mtime_ns=st.st_mtime_ns, raw=raw)


def remove_if_unchanged(lock_path: Path, observed: LockSnapshot) -> bool:
    """
    Delete a lock file only if it is still exactly the one observed ("remove-if-unchanged").

    Same device and inode, same mtime and byte-identical content, checked while holding an
    ``flock`` on the file so two reclaimers of one stale file cannot race; the path is re-checked
    under that lock right before the unlink. A lock rewritten or replaced since ``observed`` is
    left alone.

    Returns:
        ``True`` if the file was removed, ``False`` if it had changed or was already gone.
    """
    try:
        fd = os.open(lock_path, _open_flags())
    except OSError:
        return _remove_unreadable(lock_path, observed)
    try:
        if _fcntl is not None:
            with contextlib.suppress(OSError):
                _fcntl.flock(fd, _fcntl.LOCK_EX)
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino, st.st_mtime_ns) != (observed.dev, observed.ino, observed.mtime_ns):
            return False
        if _read_fd(fd) != observed.raw:
            return False
        try:
            now = os.lstat(lock_path)
        except FileNotFoundError:
            return False
        if (now.st_dev, now.st_ino) != (observed.dev, observed.ino):
            return False
        return _unlink_present(lock_path)
    finally:
        os.close(fd)


def _remove_unreadable(lock_path: Path, observed: LockSnapshot) -> bool:
    """Remove a lock we cannot open (a symlink, say) if its identity and mtime are unchanged."""
    try:
        st = os.lstat(lock_path)
    except FileNotFoundError:
        return False
    if (st.st_dev, st.st_ino, st.st_mtime_ns) != (
        observed.dev,
        observed.ino,
        observed.mtime_ns,
    ) or observed.raw:
        return False
    return _unlink_present(lock_path)


def _unlink_present(lock_path: Path) -> bool:
    """Remove ``lock_path``; ``False`` when it is already gone (another process removed it first)."""
    try:
        lock_path.unlink()
    except FileNotFoundError:
        return False
    return True


def inspect_lock_file(
    transcript: Path | str,
    *,
    now_ms: int,
    stale_ms: float,
    held_by_this_process: bool = False,
) -> tuple[LockInspection, LockSnapshot] | None:
    """Inspect a transcript's lock file; ``None`` when there is none."""
    lock_path = lock_path_for(transcript)
    snapshot = read_lock_snapshot(lock_path)
    if snapshot is None:
        return None
    inspection = inspect_lock_owner(
        parse_lock_payload(snapshot.raw),
        lock_path=lock_path,
        now_ms=now_ms,
        stale_ms=stale_ms,
        held_by_this_process=held_by_this_process,
    )
    return inspection, snapshot
