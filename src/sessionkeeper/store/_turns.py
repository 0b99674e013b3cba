"""
First-in, first-out turns for a thread-backed store backend (issue 11: concurrent ``update`` calls of the
JSON backend ran in whatever order their worker threads won a ``threading.Lock``).

A call takes a numbered ticket synchronously, at the moment it is made (before its first ``await``),
and its worker thread waits until every earlier ticket is done before it runs. So operations on one
backend instance apply in call order, as with :class:`~sessionkeeper.store.InMemoryStoreBackend`, across
tasks of one event loop and across threads and event loops sharing the instance.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import anyio.to_thread


__all__ = ("FifoTurns",)

T = TypeVar("T")


class FifoTurns:
    """
    A ticket queue: :meth:`run` runs a blocking function in a worker thread, in call order.

    A ticket whose call was cancelled before its thread started is skipped, so a cancelled call never
    blocks the ones after it. The callables must not call back into the same instance (deadlock).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._next = 0
        self._serving = 0
        self._skipped: set[int] = set()

    def _take(self) -> int:
        with self._cond:
            ticket = self._next
            self._next += 1
            return ticket

    def _done(self, ticket: int) -> None:
        with self._cond:
            if ticket != self._serving:
                self._skipped.add(ticket)  # cancelled before its turn: skip it when it comes
                return
            self._serving += 1
            while self._serving in self._skipped:
                self._skipped.discard(self._serving)
                self._serving += 1
            self._cond.notify_all()

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """
        Run ``fn(*args)`` in a worker thread once every earlier call of this instance has finished.

        Returns:
            What ``fn`` returns; its exception propagates (the turn passes on either way).
        """
        ticket = self._take()
        started = False

        def in_turn() -> T:
            nonlocal started
            started = True
            with self._cond:
                while self._serving != ticket:
                    self._cond.wait()
            try:
                return fn(*args)
            finally:
                self._done(ticket)

        try:
            return await anyio.to_thread.run_sync(in_turn)
        finally:
            # a worker thread that started always finishes (the call is not abandoned on cancel) and
            # passes the turn on; a call cancelled before its thread started gives its ticket up here
            if not started:
                self._done(ticket)
