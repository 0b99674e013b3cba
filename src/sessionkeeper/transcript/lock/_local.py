"""
In-process primitives that work across event loops and threads (issue 15 item 6).

One :class:`~sessionkeeper.transcript.TranscriptManager` may be used by tasks of several event loops, each
in its own thread (each thread with its own ``anyio.run``). ``anyio.Lock`` and ``anyio.Event`` belong to
one event loop: a release or ``set`` from another thread never wakes the waiter, so such a manager
deadlocked silently after its first append. :class:`ThreadSafeLock` and :class:`ThreadSafeEvent` keep
their state under a ``threading.Lock`` and wake each waiter on its own loop (``call_soon_threadsafe`` on
asyncio, ``TrioToken.run_sync_soon`` on trio), as the write-lock registry's queue does.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from types import TracebackType
from typing import Any

import anyio
import anyio.lowlevel
import attrs


__all__ = ("LockStatistics", "ThreadSafeEvent", "ThreadSafeLock", "wake_event")


def wake_event(event: anyio.Event, *, thread: int, token: anyio.lowlevel.EventLoopToken) -> None:
    """
    Set ``event``, which belongs to the event loop of ``token`` running in ``thread``, from any thread.

    On that thread it is set directly; from another one it is handed to its loop
    (``call_soon_threadsafe`` on asyncio, ``TrioToken.run_sync_soon`` on trio). A loop that is already
    closed is ignored: its waiting task is gone (a waiter that polls also has its timer).
    """
    if threading.get_ident() == thread:
        event.set()
        return
    native: Any = token.native_token
    try:
        if isinstance(native, asyncio.AbstractEventLoop):
            native.call_soon_threadsafe(event.set)
        else:
            native.run_sync_soon(event.set)  # trio.lowlevel.TrioToken
    except RuntimeError:  # the waiter's loop is closed
        pass


class _Wake:
    """One waiting task: its event, and how to set it from any thread."""

    __slots__ = ("event", "granted", "thread", "token")

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.token = anyio.lowlevel.current_token()
        self.event = anyio.Event()
        self.granted = False

    def wake(self) -> None:
        wake_event(self.event, thread=self.thread, token=self.token)


@attrs.frozen
class LockStatistics:
    """``locked``: whether a task holds the lock; ``tasks_waiting``: how many wait for it."""

    locked: bool
    tasks_waiting: int


class ThreadSafeLock:
    """
    A FIFO async lock for tasks of any event loop in any thread (``async with lock: ...``).

    Uncontended, it is taken without a trip through the event loop (like ``anyio.Lock(fast_acquire=True)``).
    A released lock is handed to the first waiter; a waiter cancelled after the hand-over passes it on.
    Not reentrant.
    """

    __slots__ = ("_locked", "_mutex", "_queue")

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._locked = False
        self._queue: deque[_Wake] = deque()

    def locked(self) -> bool:
        """Whether a task holds the lock."""
        return self._locked

    def statistics(self) -> LockStatistics:
        """A snapshot of the lock's state."""
        with self._mutex:
            return LockStatistics(locked=self._locked, tasks_waiting=len(self._queue))

    async def acquire(self) -> None:
        """Wait (FIFO) until the lock is this task's."""
        with self._mutex:
            if not self._locked and not self._queue:
                self._locked = True
                return
            waiter = _Wake()
            self._queue.append(waiter)
        try:
            await waiter.event.wait()
        except BaseException:
            with self._mutex:
                if waiter.granted:
                    self._hand_over()
                else:
                    self._queue.remove(waiter)
            raise

    def release(self) -> None:
        """Give the lock to the next waiter, or free it."""
        with self._mutex:
            if not self._locked:
                raise RuntimeError("release of an unlocked lock")
            self._hand_over()

    def _hand_over(self) -> None:
        if self._queue:
            waiter = self._queue.popleft()
            waiter.granted = True  # the lock stays locked: it now belongs to the waiter
            waiter.wake()
        else:
            self._locked = False

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


class ThreadSafeEvent:
    """A one-shot async event that tasks of any event loop in any thread can wait for and set."""

    __slots__ = ("_is_set", "_mutex", "_waiters")

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._is_set = False
        self._waiters: list[_Wake] = []

    def is_set(self) -> bool:
        """Whether :meth:`set` was called."""
        return self._is_set

    def set(self) -> None:
        """Set the event and wake every waiter, each on its own loop."""
        with self._mutex:
            self._is_set = True
            waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.wake()

    async def wait(self) -> None:
        """Wait until the event is set (at once when it is)."""
        with self._mutex:
            if self._is_set:
                return
            waiter = _Wake()
            self._waiters.append(waiter)
        try:
            await waiter.event.wait()
        finally:
            with self._mutex:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
