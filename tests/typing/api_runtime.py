"""Typing tests of the agent-loop glue: SessionRuntime open / before_model_call / after_turn (never run)."""

from __future__ import annotations

from typing import Literal, assert_type

from sessionkeeper import ModelInfo, SessionEntry, SessionRuntime, SessionStore, TokenCounter, TranscriptEntry
from sessionkeeper.records import AgentMessage, AssistantMessage
from sessionkeeper.runtime import ModelCallPlan, RecoveryOutcome, RuntimeSession, TurnOutcome
from sessionkeeper.testing import FakeClock, FakeTokenCounter, ScriptedModelClient


async def runtime_calls(store: SessionStore, reply: AssistantMessage) -> None:
    runtime = SessionRuntime(
        store,
        model=ModelInfo(provider="anthropic", model_id="claude-sonnet-4-5", context_window=200_000),
        model_client=ScriptedModelClient(["summary"]),
        clock=FakeClock(),
    )
    assert_type(SessionRuntime(store, token_counter=FakeTokenCounter()).token_counter, TokenCounter)
    session = await runtime.open("agent:main:main")
    assert_type(session, RuntimeSession)
    assert_type(session.entry, SessionEntry)
    assert_type(session.session_id, str)

    plan = await runtime.before_model_call(session, prompt="hello")
    assert_type(plan, ModelCallPlan)
    assert_type(plan.messages, tuple[AgentMessage, ...])
    assert_type(plan.context_tokens, int)

    outcome = await runtime.after_turn(session, messages=[reply])
    assert_type(outcome, TurnOutcome)
    assert_type(outcome.entries, tuple[TranscriptEntry, ...])
    assert_type(outcome.delivered_text, str | None)
    assert_type(outcome.silent, bool)

    recovery = await runtime.on_model_error(session, RuntimeError("prompt is too long"))
    assert_type(recovery, RecoveryOutcome)
    assert_type(recovery.action, Literal["compacted", "truncated", "not_overflow"])
