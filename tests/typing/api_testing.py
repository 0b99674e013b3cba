"""Typing tests of the shipped test doubles (``sessionkeeper.testing``): checked, never run."""

from __future__ import annotations

from typing import assert_type

from sessionkeeper import HookRegistry, ModelRequest, ModelResponse
from sessionkeeper.abc import Clock, ModelClient, TokenCounter
from sessionkeeper.hooks import SessionCompactEvent
from sessionkeeper.testing import (
    CapturedEvents,
    FakeClock,
    FakeTokenCounter,
    ScriptedModelClient,
    ScriptedProviderError,
    ScriptedTurn,
    capture_events,
    context_overflow_error,
)


def as_clock(clock: Clock) -> Clock:
    return clock


def as_counter(counter: TokenCounter) -> TokenCounter:
    return counter


def as_model_client(client: ModelClient) -> ModelClient:
    return client


async def doubles(request: ModelRequest) -> None:
    clock = FakeClock(now_ms=1_767_225_600_000)
    assert_type(as_clock(clock), Clock)
    assert_type(clock.now_ms(), int)
    counter = FakeTokenCounter(chars_per_token=4)
    assert_type(as_counter(counter), TokenCounter)
    assert_type(counter.count_text("hello"), int)
    assert_type(counter.calls, int)
    client = ScriptedModelClient(["first", ScriptedTurn(text="second"), context_overflow_error()])
    assert_type(as_model_client(client), ModelClient)
    assert_type(await client.complete(request), ModelResponse)
    assert_type(context_overflow_error(), ScriptedProviderError)


def events(registry: HookRegistry) -> None:
    with capture_events(registry) as captured:
        assert_type(captured, CapturedEvents)
        assert_type(captured.of_type(SessionCompactEvent), list[SessionCompactEvent])
