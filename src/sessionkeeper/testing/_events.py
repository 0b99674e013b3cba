"""Capture the events a :class:`~sessionkeeper.HookRegistry` emits."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from sessionkeeper.hooks import HookEvent, HookRegistry


__all__ = ("CapturedEvents", "capture_events")

E = TypeVar("E", bound=HookEvent[Any])


class CapturedEvents(list[HookEvent[Any]]):
    """The events captured by :func:`capture_events`, in emission order (a ``list``)."""

    @property
    def names(self) -> list[str]:
        """The events' pi names (``["compaction_start", "session_before_compact", ...]``)."""
        return [event.name for event in self]

    def of_type(self, event_type: type[E]) -> list[E]:
        """The captured events that are instances of ``event_type``."""
        return [event for event in self if isinstance(event, event_type)]


@contextmanager
def capture_events(
    registry: HookRegistry, event_type: type[HookEvent[Any]] = HookEvent
) -> Iterator[CapturedEvents]:
    """
    Record every event ``registry`` emits inside the ``with`` block.

    Capturing observes (:meth:`HookRegistry.observe`): it sees each event as the emission starts,
    even when a handler later cancels it, and it never changes the handlers' results.

    Args:
        registry: The registry to watch.
        event_type: Capture only events of this class (default: all).

    Yields:
        A :class:`CapturedEvents` list, filled as events are emitted.

    .. versionadded:: 0.1
    """
    captured = CapturedEvents()
    unsubscribe = registry.observe(event_type, captured.append)
    try:
        yield captured
    finally:
        unsubscribe()
