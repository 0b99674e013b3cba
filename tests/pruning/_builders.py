"""Small message builders shared by the pruning tests (not a test module)."""

from __future__ import annotations

from typing import Any

from sessionkeeper.records._messages import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)


def user(text: str | list[Any] = "hi", ts: int = 1) -> UserMessage:
    return UserMessage(content=text, timestamp=ts)


def assistant(
    *blocks: Any, stop: str = "stop", ts: int = 2, model: str = "claude-sonnet-4-5"
) -> AssistantMessage:
    content = [TextContent(text=b) if isinstance(b, str) else b for b in blocks]
    return AssistantMessage(
        content=content,
        api="anthropic-messages",
        provider="anthropic",
        model=model,
        stop_reason=stop,
        timestamp=ts,
    )


def call(call_id: str, name: str = "read", **args: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=args)


def thinking(text: str, signature: str | None = None) -> ThinkingContent:
    if signature is None:
        return ThinkingContent(thinking=text)
    return ThinkingContent(thinking=text, thinking_signature=signature)


def result(
    call_id: str, *blocks: Any, name: str = "read", ts: int = 3, is_error: bool = False
) -> ToolResultMessage:
    content = [TextContent(text=b) if isinstance(b, str) else b for b in blocks]
    return ToolResultMessage(
        tool_call_id=call_id, tool_name=name, content=content, is_error=is_error, timestamp=ts
    )


def image(size: int = 100) -> ImageContent:
    return ImageContent(data="A" * size, mime_type="image/png")


def bash(output: str) -> BashExecutionMessage:
    return BashExecutionMessage(command="ls", output=output, exit_code=0)


def turn(call_id: str, text: str, *, name: str = "read") -> list[AgentMessage]:
    """assistant tool call + its result + assistant text."""
    return [assistant(call(call_id, name), stop="toolUse"), result(call_id, text, name=name), assistant("ok")]
