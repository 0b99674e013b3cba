"""Typing tests of the pydantic-ai glue: SessionHistory, HistoryProcessor, converters (never run)."""

from __future__ import annotations

from typing import Any, assert_type

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage

from sessionkeeper import ModelInfo, SessionRuntime
from sessionkeeper.adapters.pydantic_ai import (
    HistoryProcessor,
    HistoryReport,
    SessionHistory,
    from_pydantic_ai_messages,
    model_info_for,
    to_pydantic_ai_messages,
)
from sessionkeeper.records import AgentMessage
from sessionkeeper.runtime import TurnOutcome


async def pydantic_ai_calls(runtime: SessionRuntime, ctx: RunContext[Any]) -> None:
    history = SessionHistory(runtime, "agent:main:main")
    loaded = await history.load()
    assert_type(loaded, list[ModelMessage])
    assert_type(await history(ctx, loaded), list[ModelMessage])
    assert_type(await history.save(loaded), TurnOutcome)
    assert_type(history.last_report, HistoryReport | None)

    processor = HistoryProcessor(model=ModelInfo(provider="anthropic", model_id="claude-sonnet-4-5"))
    assert_type(await processor(ctx, loaded), list[ModelMessage])

    messages = from_pydantic_ai_messages(loaded)
    assert_type(messages, list[AgentMessage])
    assert_type(to_pydantic_ai_messages(messages), list[ModelMessage])
    assert_type(model_info_for(ctx.model), ModelInfo)
