"""A deterministic clock for tests (implements :class:`sessionkeeper._clock.Clock`)."""

from __future__ import annotations

import math

import anyio.lowlevel


__all__ = ("FakeClock",)

DEFAULT_NOW_MS = 1_767_225_600_000
"""2026-01-01T00:00:00Z, the default start of a :class:`FakeClock`."""


class FakeClock:
    """
    A settable clock: wall time and monotonic time move only when told to, and :meth:`sleep` returns
    at once after advancing both.

    Implements the :class:`~sessionkeeper._clock.Clock` protocol, so it can be passed wherever
    sessionkeeper takes ``clock=``.

    The default start, 2026-01-01T00:00:00Z, is 4 hours before the default daily session reset (04:00
    local time; on a UTC host): a test that advances past it between two ``SessionRuntime.open`` calls
    gets a new session (``stale-daily``). Start at ``1_767_240_000_000`` (04:00 UTC) or use a UTC or
    idle-only :class:`~sessionkeeper.store.ResetPolicy` for long tests (``docs/testing.md``).

    Args:
        now_ms: Initial wall-clock time in ms since the epoch (default 2026-01-01T00:00:00Z).
        monotonic: Initial monotonic time in seconds (default 0.0).

    Attributes:
        sleeps: The durations (seconds) passed to :meth:`sleep`, in order.

    .. versionadded:: 0.1
    """

    __slots__ = ("_monotonic", "_now_ms", "sleeps")

    def __init__(self, *, now_ms: int = DEFAULT_NOW_MS, monotonic: float = 0.0) -> None:
        self._now_ms = int(now_ms)
        self._monotonic = float(monotonic)
        self.sleeps: list[float] = []

    def now_ms(self) -> int:
        """Return the fake wall-clock time in ms since the epoch."""
        return self._now_ms

    def monotonic(self) -> float:
        """Return the fake monotonic time in seconds."""
        return self._monotonic

    def advance(self, seconds: float = 0.0, *, ms: int = 0) -> None:
        """
        Move both clocks forward by ``seconds`` plus ``ms`` milliseconds.

        Raises:
            ValueError: The total is negative or not finite (time never goes back here; use
                :meth:`set_now_ms` to make the wall clock jump).
        """
        total = float(seconds) + ms / 1000
        if not math.isfinite(total) or total < 0:
            raise ValueError(f"cannot advance a clock by {total!r} s")
        self._monotonic += total
        self._now_ms += round(total * 1000)

    def set_now_ms(self, now_ms: int) -> None:
        """Set the wall clock (it may jump backwards, like a real one); the monotonic clock is unchanged."""
        self._now_ms = int(now_ms)

    async def sleep(self, seconds: float) -> None:
        """Record the sleep, advance both clocks by ``max(seconds, 0)`` and yield to other tasks once."""
        self.sleeps.append(seconds)
        self.advance(max(float(seconds), 0.0))
        await anyio.lowlevel.checkpoint()

    def __repr__(self) -> str:
        return f"FakeClock(now_ms={self._now_ms}, monotonic={self._monotonic})"
