"""
Thinking-block removal for replay (OpenClaw spec §9 step 5; ``embedded-agent-runner/thinking.ts``).

Shared by the pruner (its char estimate leaves out thinking the replay policy drops, spec §7) and by
the hygiene pipeline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import msgspec

from sessionkeeper.records import (
    AgentMessage,
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
)


__all__ = (
    "OMITTED_ASSISTANT_REASONING_TEXT",
    "drop_reasoning_from_history",
    "drop_thinking_blocks",
    "message_role",
    "preserve_current_tool_turn",
)

OMITTED_ASSISTANT_REASONING_TEXT: Final = "[assistant reasoning omitted]"
"""Text that replaces an assistant turn left empty once its thinking is dropped."""

_THINKING_TYPES: Final = frozenset(("thinking", "redacted_thinking"))


_ROLE_BY_TYPE: dict[type, str | None] = {}


def message_role(message: AgentMessage) -> str | None:
    """The ``role`` of a message record (``None`` for an unknown message without a string role)."""
    cls = type(message)
    if cls in _ROLE_BY_TYPE:  # a record type's role is its tag: looked up once per type
        return _ROLE_BY_TYPE[cls]
    if isinstance(message, UnknownMessage):
        return message.role
    tag = message.__struct_config__.tag
    role = tag if isinstance(tag, str) else None
    _ROLE_BY_TYPE[cls] = role
    return role


def _is_assistant_with_content(message: AgentMessage) -> bool:
    if isinstance(message, AssistantMessage):
        return True
    return (
        isinstance(message, UnknownMessage)
        and message.role == "assistant"
        and isinstance(message.raw.get("content"), list)
    )


def _without_thinking(message: AgentMessage) -> AgentMessage:
    """The message minus its thinking blocks (the same object when it has none)."""
    if isinstance(message, AssistantMessage):
        kept: list[TextContent | ThinkingContent | ToolCall] = [
            block for block in message.content if not isinstance(block, ThinkingContent)
        ]
        if len(kept) == len(message.content):
            return message
        return msgspec.structs.replace(
            message, content=kept or [TextContent(text=OMITTED_ASSISTANT_REASONING_TEXT)]
        )
    if isinstance(message, UnknownMessage):
        blocks: list[Any] = message.raw.get("content") or []
        raw_kept = [b for b in blocks if not (isinstance(b, dict) and b.get("type") in _THINKING_TYPES)]
        if len(raw_kept) == len(blocks):
            return message
        return UnknownMessage(
            {
                **message.raw,
                "content": raw_kept or [{"type": "text", "text": OMITTED_ASSISTANT_REASONING_TEXT}],
            }
        )
    return message


def drop_thinking_blocks(messages: Sequence[AgentMessage]) -> Sequence[AgentMessage]:
    """
    Remove thinking blocks from every assistant turn except the latest one (``dropThinkingBlocks``).

    A turn left empty gets one text block ``[assistant reasoning omitted]`` so the turn structure
    survives adapters that drop blank blocks (OpenClaw spec §9 step 5).

    Returns:
        A new list, or ``messages`` itself when nothing was removed.
    """
    latest = -1
    for index in range(len(messages) - 1, -1, -1):
        if _is_assistant_with_content(messages[index]):
            latest = index
            break
    return _strip_thinking_except(messages, lambda index: index == latest)


def _has_tool_call(message: AgentMessage) -> bool:
    if isinstance(message, AssistantMessage):
        return any(isinstance(block, ToolCall) for block in message.content)
    if isinstance(message, UnknownMessage):
        content = message.raw.get("content")
        return isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in ("toolCall", "tool_use", "function_call")
            for b in content
        )
    return False


def preserve_current_tool_turn(messages: Sequence[AgentMessage], index: int, latest_user: int) -> bool:
    """OpenClaw ``shouldPreserveCurrentToolTurnReasoning``: the in-flight tool turn keeps its reasoning."""
    message = messages[index]
    if index < latest_user or not _is_assistant_with_content(message) or not _has_tool_call(message):
        return False
    for prior in range(index - 1, -1, -1):
        role = message_role(messages[prior])
        if role == "user":
            break
        if role == "assistant":
            return False
    for at in range(index + 1, len(messages)):
        later = messages[at]
        if isinstance(later, ToolResultMessage) or message_role(later) == "toolResult":
            return True
        if isinstance(later, UserMessage) or message_role(later) == "user":
            return False
    return False


def drop_reasoning_from_history(messages: Sequence[AgentMessage]) -> Sequence[AgentMessage]:
    """
    Remove reasoning from past assistant turns for chat-completions replay (``dropReasoningFromHistory``).

    Unlike :func:`drop_thinking_blocks`, the kept turn is the tool-calling assistant turn still in
    flight after the latest user message (its results follow it and no other assistant intervenes).

    Returns:
        A new list, or ``messages`` itself when nothing was removed.
    """
    latest_user = -1
    for index in range(len(messages) - 1, -1, -1):
        if message_role(messages[index]) == "user":
            latest_user = index
            break
    return _strip_thinking_except(
        messages, lambda index: preserve_current_tool_turn(messages, index, latest_user)
    )


def _strip_thinking_except(
    messages: Sequence[AgentMessage], keep: Callable[[int], bool]
) -> Sequence[AgentMessage]:
    """Thinking removed from every assistant turn with content but those at an index ``keep`` accepts."""
    out: list[AgentMessage] = []
    touched = False
    for index, message in enumerate(messages):
        if not _is_assistant_with_content(message) or keep(index):
            out.append(message)
            continue
        stripped = _without_thinking(message)
        touched = touched or stripped is not message
        out.append(stripped)
    return out if touched else messages
