"""
Single-flight compaction: one summariser call per transcript at a time (issue #11, DESIGN D10).

Several tasks or processes that decide to compact one transcript at once used to summarise it each, and
all but one landing were then ``superseded`` (:mod:`._landing`): the summaries were paid for and thrown
away. A compaction now first takes the transcript's *flight*:

- **in a process** (per event loop): a per-transcript record; a second compaction of the same file (any
  manager) waits for the first and shares its result (``"joined"`` when the first wrote an entry);
- **across processes** (and event loops of one process): a **compaction claim file**
  ``<transcript>.compaction.lock`` next to the write lock, created complete or not at all (a temp file
  linked into place), holding the owner's ``pid``, ``createdAt`` and ``starttime`` in the write lock's
  format. Others poll until it is gone, then pick up the file: the compaction that landed meanwhile is
  theirs too. A claim whose owner died (dead or recycled pid), an orphan of this process, or one older
  than the stale age is removed if unchanged and taken over: a claim only saves summariser calls, the
  landing check still guards the file, so taking over a slow owner's claim never loses data.

- **across workers of a shared storage** (a transcript in a storage, ``TranscriptManager.storage``:
  memory, a database): the storage's **compaction claim** when it offers one
  (:class:`~sessionkeeper.abc.CompactionClaimStorage`: memory in its process, a database across
  processes and machines). It blocks no append. Others poll it until it is free, then pick up the
  transcript as above; a holder that dies loses it with its process or connection, and one that stays
  past the stale age is no longer waited for (the waiter compacts without it). As for files, the claim
  only saves summariser calls: the landing's exact conditional append (:mod:`._landing`) guards the
  transcript whether or not a claim was held.

A compaction nested in its own flight (a provider or hook that compacts the same transcript) runs
without waiting for itself. A manager that holds the transcript's write lock takes a free claim but never
waits for a taken one: the owner would need that lock to land.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import math
import os
import threading
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.lowlevel
import attrs

from sessionkeeper._lockfile import (
    format_lock_payload,
    is_pid_alive,
    parse_lock_payload,
    process_start_time,
    read_lock_snapshot,
    remove_if_unchanged,
)
from sessionkeeper.exceptions import SessionBusyError
from sessionkeeper.transcript import CompactionClaimStorage, TranscriptManager, WriterClaim


__all__ = ("CLAIM_SUFFIX", "Flight", "claim_path_for", "flight")

CLAIM_SUFFIX: Final = ".compaction.lock"
"""Suffix of the compaction claim file: ``<transcript>.compaction.lock``."""
_POLL_S: Final = 0.05
_log = logging.getLogger("sessionkeeper.compaction")
_STALE_FLOOR_S: Final = 60.0
_STALE_CEILING_S: Final = 24 * 3600.0

_FLIGHTS: anyio.lowlevel.RunVar[dict[str, Flight]] = anyio.lowlevel.RunVar("sessionkeeper_compaction_flights")
_OWNED: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(
    "sessionkeeper_compaction_owned", default=frozenset()
)
_CLAIMS_HELD: set[str] = set()  # claim files this process holds (any thread, any event loop)
_CLAIMS_LOCK = threading.Lock()


def claim_path_for(transcript: Path) -> Path:
    """The compaction claim file of a transcript: ``<transcript>.compaction.lock``."""
    return transcript.with_name(transcript.name + CLAIM_SUFFIX)


@attrs.define(eq=False)
class Flight:
    """
    One compaction in flight in this event loop, and what it ended with.

    Attributes:
        done: Set when the owner finished (its result published, or it raised).
        result: The owner's result (a ``CompactionResult``), or ``None`` when it raised or was cancelled.
    """

    done: anyio.Event = attrs.field(factory=anyio.Event)
    result: Any = None

    def publish(self, result: Any) -> None:
        """Record the owner's result for the tasks waiting on this flight."""
        self.result = result


@attrs.frozen(kw_only=True)
class Entered:
    """
    What :func:`flight` gave the caller.

    Attributes:
        role: ``"owner"`` (run the compaction and ``publish`` its result), ``"shared"`` (another task of
            this event loop ran it: ``shared`` is its result), ``"bypass"`` (run without a flight:
            nested in its own flight, or a taken claim while holding the write lock) or ``"landed"``
            (another process's compaction ended: pick up the file, then enter again if nothing landed).
        flight: The flight to publish to (owner only).
        shared: The owner's result (shared only).
    """

    role: str
    flight: Flight | None = None
    shared: Any = None


def _key(transcript: TranscriptManager) -> str:
    path = transcript.path
    if path is not None:
        return os.path.realpath(path)
    storage = transcript.storage
    if storage is not None:  # every manager of this storage object's transcript shares the flight
        return f"storage:{id(storage)}:{transcript.session_id}"
    return f"memory:{id(transcript)}"


def _flights() -> dict[str, Flight]:
    try:
        return _FLIGHTS.get()
    except LookupError:
        flights: dict[str, Flight] = {}
        _FLIGHTS.set(flights)
        return flights


@functools.cache
def _starttime_of(pid: int) -> int | None:
    return process_start_time(pid)


def _own_starttime() -> int | None:
    return _starttime_of(os.getpid())  # keyed by pid: a forked child has its own


def _forget_claims_after_fork() -> None:
    global _CLAIMS_LOCK  # noqa: PLW0603 - another thread may have held it at the fork
    _CLAIMS_LOCK = threading.Lock()
    _CLAIMS_HELD.clear()  # the parent's claims are the parent's


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_claims_after_fork)


def _try_claim(claim: Path, *, stale_after_s: float) -> bool:
    """
    Create the claim file complete or not at all (temp file, then ``link``); reclaim a dead, orphaned or
    stale claim first. Returns whether this process now holds it. Runs in a worker thread.
    """
    for _ in range(3):
        temp = claim.with_name(f"{claim.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
        raw = format_lock_payload(
            pid=os.getpid(),
            created_at_ms=int(time.time() * 1000),
            max_hold_ms=int(stale_after_s * 1000),
            starttime=_own_starttime(),
        )
        flags = (
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        )
        fd = os.open(temp, flags, 0o600)
        try:
            os.write(fd, raw)
        finally:
            os.close(fd)
        try:
            os.link(temp, claim)
        except FileExistsError:
            pass
        else:
            with _CLAIMS_LOCK:
                _CLAIMS_HELD.add(str(claim))
            return True
        finally:
            temp.unlink(missing_ok=True)
        if not _reclaim_if_dead(claim, stale_after_s=stale_after_s):
            return False
    return False


def _reclaim_if_dead(claim: Path, *, stale_after_s: float) -> bool:
    """Remove the claim if its owner is gone (or it is stale); ``True`` when it is gone now."""
    snapshot = read_lock_snapshot(claim)
    if snapshot is None:
        return True
    owner = parse_lock_payload(snapshot.raw)
    age_s = time.time() - (owner.created_at_ms or snapshot.mtime_ms) / 1000
    pid = owner.pid
    if pid == os.getpid():
        with _CLAIMS_LOCK:
            dead = str(claim) not in _CLAIMS_HELD  # an orphan of this process
    elif pid is None:
        dead = time.time() - snapshot.mtime_ms / 1000 > 5.0  # unreadable: give its writer a moment
    else:
        alive = is_pid_alive(pid)
        recycled = (
            alive
            and owner.starttime is not None
            and (now := process_start_time(pid)) is not None
            and now != owner.starttime
        )
        dead = not alive or recycled
    if not dead and age_s <= stale_after_s:
        return False
    return remove_if_unchanged(claim, snapshot) or read_lock_snapshot(claim) is None


def _release_claim(claim: Path) -> None:
    with _CLAIMS_LOCK:
        _CLAIMS_HELD.discard(str(claim))
    snapshot = read_lock_snapshot(claim)
    if snapshot is not None and parse_lock_payload(snapshot.raw).pid == os.getpid():
        remove_if_unchanged(claim, snapshot)


async def _wait(event: anyio.Event, abort: anyio.Event | None) -> None:
    if abort is None:
        await event.wait()
        return
    while not event.is_set() and not abort.is_set():
        with anyio.move_on_after(_POLL_S):
            await event.wait()


def _claims_of(storage: object) -> CompactionClaimStorage | None:
    """The storage when it offers compaction claims (``CompactionClaimStorage``), else ``None``."""
    return storage if isinstance(storage, CompactionClaimStorage) else None


async def _storage_claim(
    storage: CompactionClaimStorage, session_id: str, *, stale_after_s: float, abort: anyio.Event | None
) -> tuple[WriterClaim | None, bool]:
    """
    Take the storage's compaction claim, polling while another writer holds it.

    Returns:
        ``(claim, waited)``: the claim taken at once (``waited`` ``False``); or ``(None, True)`` once
        another writer's claim was given up (its compaction ended: pick up the transcript), or the
        wait was aborted; or ``(None, False)`` after waiting ``stale_after_s`` (compact without it).
    """
    try:
        claim = await storage.claim_compaction(session_id)
    except SessionBusyError as err:  # e.g. no database connection in time: the landing still guards
        _log.warning("no compaction claim for %s (%s); compacting without it", session_id, err)
        return None, False
    if claim is not None:
        return claim, False
    _log.debug(
        "waiting for the compaction claim of %s held by another writer",
        session_id,
        extra={"session_id": session_id},
    )
    deadline = time.monotonic() + stale_after_s
    while abort is None or not abort.is_set():
        await anyio.sleep(_POLL_S)
        try:
            polled = await storage.claim_compaction(session_id)
        except SessionBusyError:
            polled = None  # no connection for the poll: still held, as far as this worker knows
        if polled is not None:
            with anyio.CancelScope(shield=True):
                await polled.release()  # free again: its owner's compaction ended
            return None, True
        if time.monotonic() > deadline:
            _log.warning(
                "the compaction claim of %s stayed held for %.0f s; compacting without it",
                session_id,
                stale_after_s,
                extra={"session_id": session_id},
            )
            return None, False
    return None, True


@contextlib.asynccontextmanager
async def flight(
    transcript: TranscriptManager, *, stale_after_s: float, abort: anyio.Event | None = None
) -> AsyncIterator[Entered]:
    """
    Enter the transcript's compaction flight (module docstring) for the block.

    Yields an :class:`Entered`. An ``"owner"`` holds the in-process flight and (for a file) the claim
    file until the block ends; it must ``publish`` its result before leaving. ``"shared"`` and
    ``"landed"`` wait first (for the owner here, or for another process's claim to go).

    Args:
        transcript: The transcript to compact.
        stale_after_s: Age in seconds after which a live owner's claim is taken over (clamped to 60 s
            .. 24 h; NaN means 24 h).
        abort: Set to stop waiting; the caller then sees ``"landed"`` and checks its own abort.
    """
    key = _key(transcript)
    if key in _OWNED.get():
        yield Entered(role="bypass")
        return
    flights = _flights()
    current = flights.get(key)
    holds_lock = transcript.held_write_lock is not None
    if current is not None:
        if holds_lock:
            yield Entered(role="bypass")
            return
        await _wait(current.done, abort)
        if current.result is not None:
            yield Entered(role="shared", shared=current.result)
        else:
            yield Entered(role="landed")  # the owner raised or was cancelled: enter again
        return
    mine = Flight()
    flights[key] = mine
    token = _OWNED.set(_OWNED.get() | {key})
    claim = claim_path_for(Path(key)) if transcript.path is not None else None
    shared = _claims_of(transcript.storage)
    storage_claim: WriterClaim | None = None
    held = False
    try:
        # an infinite or NaN timeoutSeconds still lets a hung owner's claim go after a day
        stale = _STALE_CEILING_S if math.isnan(stale_after_s) else stale_after_s
        stale = min(max(stale, _STALE_FLOOR_S), _STALE_CEILING_S)
        if shared is not None:
            storage_claim, waited = await _storage_claim(
                shared, transcript.session_id, stale_after_s=stale, abort=abort
            )
            if waited:  # another worker's compaction ended (or the wait was aborted): as for a file
                yield Entered(role="landed")
                return
        if claim is not None:
            held = await anyio.to_thread.run_sync(functools.partial(_try_claim, claim, stale_after_s=stale))
            if not held:
                if holds_lock:  # the owner would need our lock to land: never wait for it
                    yield Entered(role="bypass")
                    return
                _log.debug(
                    "waiting for the compaction claim %s of another process",
                    claim,
                    extra={"transcript": key, "claim": str(claim)},
                )
                while abort is None or not abort.is_set():
                    await anyio.sleep(_POLL_S)
                    gone = await anyio.to_thread.run_sync(
                        functools.partial(_reclaim_if_dead, claim, stale_after_s=stale)
                    )
                    if gone:
                        break
                # another process's compaction ended (or its owner died): the caller picks up the file
                # and enters again; the waiters of this event loop do the same after this task
                yield Entered(role="landed")
                return
        yield Entered(role="owner", flight=mine)
    finally:
        _OWNED.reset(token)
        if flights.get(key) is mine:
            del flights[key]
        mine.done.set()
        if held and claim is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(_release_claim, claim)
        if storage_claim is not None:
            with anyio.CancelScope(shield=True):
                await storage_claim.release()
