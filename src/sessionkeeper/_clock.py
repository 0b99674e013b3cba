"""
The clock seam (DESIGN "core"): every rule that depends on time asks a :class:`Clock`.

Production code uses :data:`SYSTEM_CLOCK`; tests use :class:`sessionkeeper.testing.FakeClock`.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

import anyio


__all__ = ("SYSTEM_CLOCK", "Clock", "SystemClock")


@runtime_checkable
class Clock(Protocol):
    """
    **Protocol:** a source of wall-clock and monotonic time, and a way to wait.

    Wall-clock times are integers in milliseconds since the Unix epoch (the unit of every timestamp
    in ``sessions.json`` and of message timestamps in transcripts).
    """

    def now_ms(self) -> int:
        """Return the wall-clock time in ms since the epoch."""
        ...

    def monotonic(self) -> float:
        """Return a monotonic time in seconds (for timeouts and durations)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` seconds (a fake clock advances instead)."""
        ...


class SystemClock:
    """The real clock: :func:`time.time_ns`, :func:`time.monotonic` and :func:`anyio.sleep`."""

    __slots__ = ()

    def now_ms(self) -> int:
        """Return the wall-clock time in ms since the epoch."""
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        """Return :func:`time.monotonic` in seconds."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """Sleep with :func:`anyio.sleep`."""
        await anyio.sleep(seconds)

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK: Clock = SystemClock()
"""The shared real clock (stateless, safe to share)."""
