"""ScriptedModelClient as the agent's main model: tool calls, usage, errors, overflow (issue 11)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from sessionkeeper import ModelRequest
from sessionkeeper.compaction import CompactionSettings
from sessionkeeper.runtime import ModelInfo, RuntimeSettings, SessionRuntime, is_context_overflow
from sessionkeeper.store import SessionStore
from sessionkeeper.testing import (
    FakeClock,
    ScriptedModelClient,
    ScriptedProviderError,
    ScriptedTurn,
    context_overflow_error,
)
from sessionkeeper.transcript import (
    AssistantMessage,
    CompactionEntry,
    MessageEntry,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)


pytestmark = pytest.mark.anyio


async def test_next_turn_scripts_tool_calls_usage_and_recorded_errors() -> None:
    usage = Usage(input=1200, output=80, total_tokens=1280)
    client = ScriptedModelClient(
        [
            ScriptedTurn(text="Let me look.", tool_calls=[("read", {"path": "a.py"})], usage=usage),
            ScriptedTurn(error_message="overloaded_error: Overloaded"),
            "Done.",
        ],
        provider="openai",
        model="gpt-5",
        api="openai-responses",
    )
    first = await client.next_turn([UserMessage(content="fix a.py", timestamp=0)])
    assert isinstance(first, AssistantMessage)
    assert first.stop_reason == "toolUse"
    assert first.usage == usage
    assert (first.provider, first.model, first.api) == ("openai", "gpt-5", "openai-responses")
    assert first.content == [
        TextContent(text="Let me look."),
        ToolCall(id="call_1", name="read", arguments={"path": "a.py"}),
    ]
    second = await client.next_turn()
    assert second.stop_reason == "error"
    assert second.error_message == "overloaded_error: Overloaded"
    third = await client.next_turn()
    assert third.stop_reason == "stop" and third.content == [TextContent(text="Done.")]
    assert [r.metadata["purpose"] for r in client.requests] == ["agent"] * 3
    assert client.requests[0].messages == (UserMessage(content="fix a.py", timestamp=0),)
    assert client.remaining == 0


async def test_scripted_errors_are_raised_and_overflow_errors_are_recognised() -> None:
    overflow = context_overflow_error(tokens=250_000, window=200_000)
    client = ScriptedModelClient([overflow, ScriptedProviderError("rate limited", status=429)])
    assert is_context_overflow(overflow)
    assert not is_context_overflow(ScriptedProviderError("rate limited", status=429))
    with pytest.raises(ScriptedProviderError, match="prompt is too long"):
        await client.next_turn()
    with pytest.raises(ScriptedProviderError) as info:
        await client.next_turn()
    assert info.value.status == 429


async def test_complete_answers_a_scripted_turn_with_its_usage_and_stop_reason() -> None:
    usage = Usage(input=10, output=5)
    client = ScriptedModelClient([ScriptedTurn(text="summary", usage=usage, stop_reason="length")])
    request = ModelRequest(system_prompt="s", messages=[], max_tokens=10, model="m")
    response = await client.complete(request)
    assert (response.text, response.usage, response.stop_reason, response.model) == (
        "summary",
        usage,
        "length",
        "m",
    )


async def test_a_handler_can_answer_the_main_model_from_the_request() -> None:
    def handler(request: ModelRequest) -> ScriptedTurn:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            return ScriptedTurn(text="read it")
        return ScriptedTurn(tool_calls=[ToolCall(id="t1", name="read", arguments={})])

    client = ScriptedModelClient(handler=handler)
    first = await client.next_turn([UserMessage(content="go", timestamp=0)])
    assert first.stop_reason == "toolUse"
    result = ToolResultMessage(
        tool_call_id="t1", tool_name="read", content=[TextContent(text="x")], timestamp=0
    )
    second = await client.next_turn([UserMessage(content="go", timestamp=0), first, result])
    assert second.content == [TextContent(text="read it")]


async def test_an_aborted_main_model_request_gives_an_aborted_reply() -> None:
    client = ScriptedModelClient(["never"])
    abort = anyio.Event()
    abort.set()
    request = ModelRequest(system_prompt="", messages=[], max_tokens=5, abort=abort)
    assert (await client.complete(request)).stop_reason == "aborted"
    assert client.remaining == 1


async def test_an_agent_loop_on_the_scripted_main_model_recovers_from_an_overflow(tmp_path: Path) -> None:
    """The docs/runtime.md loop, with the main model faked: a tool call, an overflow, then the answer."""
    clock = FakeClock()
    store = SessionStore.open(tmp_path / "sessions", clock=clock, durable=False)
    runtime = SessionRuntime(
        store,
        model=ModelInfo(provider="anthropic", model_id="claude-sonnet-4-5", api="anthropic-messages"),
        settings=RuntimeSettings(compaction=CompactionSettings(keep_recent_tokens=50)),
        clock=clock,
        cwd="/work",
        model_client=ScriptedModelClient(handler=lambda request: "## Goal\nAnswer the questions."),
    )
    session = await runtime.open("agent:main:main", body="hello")
    for i in range(6):  # some history to compact
        plan = await runtime.before_model_call(session, prompt=f"question {i} " + "x" * 400)
        await runtime.after_turn(
            session,
            messages=[
                ScriptedTurn(text=f"answer {i}", usage=Usage(input=110 * (i + 1), output=3)).to_message(
                    **_ids()
                )
            ],
        )
    model = ScriptedModelClient(
        [
            ScriptedTurn(tool_calls=[("read", {"path": "a.py"})], usage=Usage(input=900, output=20)),
            context_overflow_error(),
            ScriptedTurn(text="All done.", usage=Usage(input=300, output=10)),
        ]
    )
    plan = await runtime.before_model_call(session, prompt="read a.py")
    outcomes = []
    while True:
        try:
            reply = await model.next_turn(plan.messages)
        except ScriptedProviderError as err:
            outcomes.append((await runtime.on_model_error(session, err)).action)
            plan = await runtime.before_model_call(session)
            continue
        calls = [b for b in reply.content if isinstance(b, ToolCall)]
        if calls:
            results = [
                ToolResultMessage(
                    tool_call_id=c.id, tool_name=c.name, content=[TextContent(text="print(1)")], timestamp=0
                )
                for c in calls
            ]
            await runtime.after_turn(session, messages=[reply, *results], turn_complete=False)
            plan = await runtime.before_model_call(session)
            continue
        outcome = await runtime.after_turn(session, messages=[reply])
        break
    assert outcomes == ["compacted"]
    assert outcome.delivered_text == "All done."
    assert model.remaining == 0
    entries = session.transcript.entries()
    assert any(isinstance(e, CompactionEntry) for e in entries)
    replies = [
        e.message for e in entries if isinstance(e, MessageEntry) and isinstance(e.message, AssistantMessage)
    ]
    assert replies[-1].usage == Usage(input=300, output=10)
    assert any(isinstance(b, ToolCall) and b.name == "read" for r in replies for b in r.content)


def _ids() -> dict[str, str]:
    return {"provider": "anthropic", "model": "claude-sonnet-4-5", "api": "anthropic-messages"}


async def test_the_default_fake_clock_is_four_hours_before_the_daily_reset_as_documented(monkeypatch) -> None:
    """docs/testing.md: FakeClock() starts 4 h before the default 04:00 reset (UTC host)."""
    monkeypatch.setenv("TZ", "UTC")
    clock = FakeClock()
    runtime = SessionRuntime(SessionStore.in_memory(clock=clock), model=ModelInfo(), clock=clock)
    first = await runtime.open("agent:main:main", body="hi")
    clock.advance(4 * 3600 - 1)
    assert (await runtime.open("agent:main:main", body="hi")).session_id == first.session_id
    clock.advance(1)
    rolled = await runtime.open("agent:main:main", body="hi")
    assert rolled.resolution is not None and rolled.resolution.reason == "stale-daily"
    # the documented start after the boundary keeps one session for 24 hours
    late = FakeClock(now_ms=1_767_240_000_000)
    runtime = SessionRuntime(SessionStore.in_memory(clock=late), model=ModelInfo(), clock=late)
    first = await runtime.open("agent:main:main", body="hi")
    late.advance(24 * 3600 - 1)
    assert (await runtime.open("agent:main:main", body="hi")).session_id == first.session_id
