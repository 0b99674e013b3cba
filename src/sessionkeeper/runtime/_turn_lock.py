"""
The transcript write lock a :class:`~sessionkeeper.runtime.RuntimeSession` holds for its turn in
progress (OpenClaw holds it for the whole agent run, spec §3; docs/locking.md).
"""

from __future__ import annotations

from sessionkeeper.transcript import SessionWriteLock, TranscriptManager


__all__ = ("TurnLock",)


class TurnLock:
    """
    The write lock held for one session's turn in progress, with the transcript it guards.

    One per session; :meth:`hold` takes or keeps it, :meth:`release` gives it back.
    """

    __slots__ = ("_hold",)

    def __init__(self) -> None:
        self._hold: tuple[TranscriptManager, SessionWriteLock] | None = None

    @property
    def held(self) -> bool:
        """Whether the lock is held for a turn in progress right now (the watchdog may have released it)."""
        hold = self._hold
        return hold is not None and hold[1].held

    async def hold(self, transcript: TranscriptManager, *, start: bool) -> None:
        """
        Hold ``transcript``'s write lock until the turn ends, so each append of the turn pays only its
        write and fsync. ``start``: a new turn begins (a prompt); otherwise only a hold already made for
        the turn is kept up.

        Not taken for an in-memory transcript, with ``locking`` off, or while the host holds the lock
        itself (``hold_write_lock``: the turn's writes use that one). A hold the watchdog released after
        ``maxHoldMs``, or one on a transcript the session left (rotation), is given back and taken again.

        Raises:
            SessionBusyError: The lock was not acquired in time.
        """
        hold = self._hold
        if hold is not None:
            if hold[0] is transcript and hold[1].held:
                return
            await self.release()
        elif not start:
            return
        if transcript.path is None or not transcript.locking or transcript.held_write_lock is not None:
            return
        self._hold = (transcript, await transcript.acquire_write_lock_hold())

    async def release(self) -> None:
        """Give the lock back (no-op when none is held; idempotent; runs shielded from cancellation)."""
        hold = self._hold
        if hold is None:
            return
        self._hold = None
        await hold[0].release_write_lock_hold(hold[1])
