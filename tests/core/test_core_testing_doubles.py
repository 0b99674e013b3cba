"""The public test doubles in sessionkeeper.testing."""

from __future__ import annotations

import anyio
import pytest

from sessionkeeper import testing
from sessionkeeper._clock import Clock
from sessionkeeper._model_client import ModelClient, ModelRequest, ModelResponse
from sessionkeeper._tokens import TokenCounter
from sessionkeeper.hooks import (
    CompactHookResult,
    CompactionStartEvent,
    HookRegistry,
    SessionBeforeCompactEvent,
    SessionStartEvent,
)
from sessionkeeper.records._messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    Usage,
    UserMessage,
)
from sessionkeeper.testing import (
    FakeClock,
    FakeTokenCounter,
    ScriptedModelClient,
    capture_events,
)


def _request(text: str = "hi", **kwargs: object) -> ModelRequest:
    return ModelRequest(
        system_prompt="sys",
        messages=(UserMessage(content=text, timestamp=0),),
        max_tokens=100,
        **kwargs,  # type: ignore[arg-type]
    )


def test_public_surface() -> None:
    assert set(testing.__all__) >= {"FakeClock", "ScriptedModelClient", "capture_events", "FakeTokenCounter"}
    assert FakeClock.__module__ == "sessionkeeper.testing"
    assert "conformance" not in testing.__all__
    from sessionkeeper.store import InMemoryStoreBackend

    assert testing.InMemoryStoreBackend is InMemoryStoreBackend


# ---------------------------------------------------------------- FakeClock


def test_fake_clock_defaults_and_advance() -> None:
    clock = FakeClock()
    assert isinstance(clock, Clock)
    assert clock.now_ms() == 1_767_225_600_000
    assert clock.monotonic() == 0.0
    clock.advance(1.5)
    assert clock.now_ms() == 1_767_225_601_500
    assert clock.monotonic() == 1.5
    clock.advance(ms=250)
    assert clock.now_ms() == 1_767_225_601_750
    assert clock.monotonic() == 1.75
    with pytest.raises(ValueError, match="advance"):
        clock.advance(-1)
    with pytest.raises(ValueError, match="advance"):
        clock.advance(float("nan"))


def test_fake_clock_wall_time_can_jump_without_moving_monotonic() -> None:
    clock = FakeClock(now_ms=10_000, monotonic=5.0)
    clock.set_now_ms(1_000)
    assert clock.now_ms() == 1_000
    assert clock.monotonic() == 5.0
    assert "now_ms=1000" in repr(clock)


@pytest.mark.anyio
async def test_fake_clock_sleep_advances_instantly() -> None:
    clock = FakeClock(now_ms=0)
    with anyio.fail_after(1):
        await clock.sleep(3600)
        await clock.sleep(-5)
    assert clock.now_ms() == 3_600_000
    assert clock.monotonic() == 3600.0
    assert clock.sleeps == [3600, -5]


@pytest.mark.anyio
async def test_fake_clock_sleep_is_a_checkpoint() -> None:
    clock = FakeClock()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await clock.sleep(0)
        pytest.fail("sleep did not check for cancellation")
    assert scope.cancelled_caught


# ---------------------------------------------------------------- ScriptedModelClient


@pytest.mark.anyio
async def test_scripted_client_replays_in_order_and_records() -> None:
    usage = Usage(input=5, output=2)
    client = ScriptedModelClient(["first", ModelResponse(text="second", usage=usage, stop_reason="length")])
    assert isinstance(client, ModelClient)
    assert client.remaining == 2
    one = await client.complete(_request("a", model="m1"))
    two = await client.complete(_request("b"))
    assert (one.text, one.model, one.stop_reason) == ("first", "m1", "stop")
    assert (two.text, two.usage, two.stop_reason) == ("second", usage, "length")
    assert [r.messages[0].content for r in client.requests] == ["a", "b"]  # type: ignore[union-attr]
    assert client.remaining == 0
    with pytest.raises(AssertionError, match="no scripted response left for request #3"):
        await client.complete(_request())


@pytest.mark.anyio
async def test_scripted_client_raises_scripted_errors() -> None:
    client = ScriptedModelClient([RuntimeError("provider down"), "ok"])
    with pytest.raises(RuntimeError, match="provider down"):
        await client.complete(_request())
    assert (await client.complete(_request())).text == "ok"
    assert len(client.requests) == 2


@pytest.mark.anyio
async def test_scripted_client_sync_and_async_handlers() -> None:
    sync_client = ScriptedModelClient(handler=lambda req: f"echo {req.max_tokens}")
    assert (await sync_client.complete(_request())).text == "echo 100"

    async def handler(request: ModelRequest) -> ModelResponse:
        await anyio.lowlevel.checkpoint()
        if request.metadata.get("fail"):
            raise ValueError("asked to fail")
        return ModelResponse(text=request.system_prompt.upper())

    async_client = ScriptedModelClient(handler=handler)
    assert (await async_client.complete(_request())).text == "SYS"
    with pytest.raises(ValueError, match="asked to fail"):
        await async_client.complete(_request(metadata={"fail": "1"}))
    assert async_client.remaining == 0


@pytest.mark.anyio
async def test_scripted_client_abort_and_delay() -> None:
    clock = FakeClock()
    client = ScriptedModelClient(["unused"], delay=30, clock=clock)
    abort = anyio.Event()
    abort.set()
    reply = await client.complete(_request(abort=abort))
    assert reply.stop_reason == "aborted"
    assert reply.text == ""
    assert client.remaining == 1
    assert clock.sleeps == [30]
    slow = ScriptedModelClient(["late"], delay=10)
    with anyio.move_on_after(0.01) as scope:
        await slow.complete(_request())
    assert scope.cancelled_caught
    assert slow.remaining == 1


def test_scripted_client_arguments() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        ScriptedModelClient()
    with pytest.raises(ValueError, match="exactly one"):
        ScriptedModelClient(["x"], handler=lambda r: "y")
    assert "remaining=1" in repr(ScriptedModelClient(["x"]))


@pytest.mark.anyio
async def test_scripted_client_rejects_bad_script_items() -> None:
    client = ScriptedModelClient([42])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="scripted reply"):
        await client.complete(_request())


# ---------------------------------------------------------------- capture_events


@pytest.mark.anyio
async def test_capture_events_records_in_order_and_stops_after_the_block() -> None:
    registry = HookRegistry()
    registry.on(SessionBeforeCompactEvent, lambda e: CompactHookResult(cancel=True))
    with capture_events(registry) as events:
        await registry.emit(CompactionStartEvent(reason="manual"))
        result = await registry.emit_last(SessionBeforeCompactEvent(preparation=None, branch_entries=()))
        await registry.emit(SessionStartEvent(reason="new"))
    await registry.emit(SessionStartEvent(reason="resume"))
    assert result == CompactHookResult(cancel=True)  # capturing never changes results
    assert events.names == ["compaction_start", "session_before_compact", "session_start"]
    assert [e.reason for e in events.of_type(SessionStartEvent)] == ["new"]


@pytest.mark.anyio
async def test_capture_events_filter_by_type() -> None:
    registry = HookRegistry()
    with capture_events(registry, SessionStartEvent) as events:
        await registry.emit(CompactionStartEvent(reason="overflow"))
        await registry.emit(SessionStartEvent(reason="fork"))
    assert events.names == ["session_start"]


# ---------------------------------------------------------------- FakeTokenCounter


def test_fake_token_counter_is_predictable() -> None:
    counter = FakeTokenCounter()
    assert isinstance(counter, TokenCounter)
    assert counter.count_text("abcdef") == 6
    assert FakeTokenCounter(chars_per_token=4).count_text("abcde") == 2
    assistant = AssistantMessage(
        content=[TextContent(text="ok"), ToolCall(id="1", name="ls", arguments={"a": 1})],
        api="x",
        provider="p",
        model="m",
    )
    assert counter.count_message(assistant) == 2 + 2 + len('{"a":1}')
    image = ToolResultMessage(
        tool_call_id="1",
        tool_name="shot",
        content=[TextContent(text="abc"), ImageContent(data="A", mime_type="image/png")],
    )
    assert FakeTokenCounter(image_tokens=100, per_message=5).count_message(image) == 3 + 100 + 5
    assert FakeTokenCounter(per_message=7).count_message(UnknownMessage({"role": "x"})) == 7
    assert counter.count_entry("e1", UserMessage(content="hey", timestamp=0)) == 3
    assert counter.entry_ids == ["e1"]
    assert counter.calls == 2
    with pytest.raises(ValueError, match="chars_per_token"):
        FakeTokenCounter(chars_per_token=0)
