"""Typing tests of the hook registry: event generics carry the handler result type (checked, never run)."""

from __future__ import annotations

from collections.abc import Callable
from typing import assert_type

from sessionkeeper import HookRegistry
from sessionkeeper.hooks import (
    CompactHookResult,
    CompactionHookOverride,
    ForkHookResult,
    SessionBeforeCompactEvent,
    SessionBeforeForkEvent,
    SessionCompactEvent,
)


def on_compact(event: SessionCompactEvent) -> None:
    assert_type(event, SessionCompactEvent)


async def hooks(
    registry: HookRegistry, before: SessionBeforeCompactEvent, fork: SessionBeforeForkEvent
) -> None:
    unsubscribe = registry.on(SessionCompactEvent, on_compact)
    assert_type(unsubscribe, Callable[[], None])
    assert_type(await registry.emit(fork), list[ForkHookResult])
    assert_type(await registry.emit_last(fork), ForkHookResult | None)
    assert_type(await registry.emit_last(before), CompactHookResult | CompactionHookOverride | None)
