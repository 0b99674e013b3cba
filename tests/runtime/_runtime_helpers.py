"""Builders shared by the SessionRuntime tests (messages with usage, runtimes on a fake clock)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sessionkeeper.compaction import CompactionSettings
from sessionkeeper.runtime import MemoryFlushRequest, ModelInfo, RuntimeSettings, SessionRuntime
from sessionkeeper.store import SessionStore
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
)


ANTHROPIC = ModelInfo(provider="anthropic", model_id="claude-sonnet-4-5", api="anthropic-messages")
OPENAI = ModelInfo(provider="openai", model_id="gpt-5", api="openai-responses")


def reply(
    text: str,
    *,
    input_tokens: int = 0,
    output_tokens: int = 0,
    stop: str = "stop",
    now_ms: int = 0,
    provider: str = "anthropic",
) -> AssistantMessage:
    """An assistant reply; usage ``input + output`` becomes the context estimate after it."""
    return AssistantMessage(
        content=[TextContent(text=text)],
        api="anthropic-messages",
        provider=provider,
        model="claude-sonnet-4-5",
        usage=Usage(input=input_tokens, output=output_tokens),
        stop_reason=stop,
        timestamp=now_ms,
    )


def tool_call(call_id: str, name: str = "read", *, now_ms: int = 0, **args: Any) -> AssistantMessage:
    """An assistant message with one tool call (no usage)."""
    return AssistantMessage(
        content=[ToolCall(id=call_id, name=name, arguments=dict(args))],
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
        stop_reason="toolUse",
        timestamp=now_ms,
    )


def tool_result(call_id: str, text: str, name: str = "read", *, now_ms: int = 0) -> ToolResultMessage:
    """The result of ``call_id``."""
    return ToolResultMessage(
        tool_call_id=call_id, tool_name=name, content=[TextContent(text=text)], timestamp=now_ms
    )


class FlushRecorder:
    """A memory-flush runner that records its requests and answers ``NO_REPLY`` (or raises)."""

    def __init__(self, *, fail: bool = False, reply_text: str = "NO_REPLY") -> None:
        self.requests: list[MemoryFlushRequest] = []
        self.fail = fail
        self.reply_text = reply_text

    async def __call__(self, request: MemoryFlushRequest) -> str:
        self.requests.append(request)
        if self.fail:
            raise RuntimeError("memory tool crashed")
        return self.reply_text


def make_runtime(
    *,
    store: SessionStore | None = None,
    clock: FakeClock | None = None,
    model: ModelInfo = ANTHROPIC,
    compaction: CompactionSettings | None = None,
    settings: RuntimeSettings | None = None,
    tmp_path: Path | None = None,
    **kwargs: Any,
) -> tuple[SessionRuntime, SessionStore, FakeClock]:
    """A runtime on a fake clock, over ``store`` (default: a JSON store in ``tmp_path`` or in memory)."""
    clock = clock or FakeClock()
    if store is None:
        store = (
            SessionStore.open(tmp_path / "sessions", clock=clock, durable=False)
            if tmp_path is not None
            else SessionStore.in_memory(clock=clock)
        )
    if settings is None:
        settings = RuntimeSettings(compaction=compaction or CompactionSettings())
    runtime = SessionRuntime(store, model=model, settings=settings, clock=clock, cwd="/work", **kwargs)
    return runtime, store, clock
