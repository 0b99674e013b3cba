"""
Turn order and turn validation of the replay pipeline (OpenClaw spec §9 steps 11 and 12).

* :func:`sanitize_google_turn_ordering`: a leading assistant turn gets a ``(session bootstrap)`` user
  turn before it.
* :func:`validate_gemini_turns` / :func:`validate_anthropic_turns`: merge consecutive turns, strip
  dangling tool calls.

Pure functions over message sequences; :class:`UnknownMessage` records pass through unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec

from sessionkeeper.pruning._thinking import (
    message_role,
)
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
    "GOOGLE_BOOTSTRAP_TEXT",
    "TOOL_CALLS_OMITTED_TEXT",
    "sanitize_google_turn_ordering",
    "validate_anthropic_turns",
    "validate_gemini_turns",
)

GOOGLE_BOOTSTRAP_TEXT: Final = "(session bootstrap)"
"""User turn prepended when a Google replay would start with an assistant turn."""

TOOL_CALLS_OMITTED_TEXT: Final = "[tool calls omitted]"
"""Replaces a thinking turn whose tool calls cannot all be answered (Anthropic validation)."""


def sanitize_google_turn_ordering(
    messages: Sequence[AgentMessage], *, timestamp_ms: int
) -> Sequence[AgentMessage]:
    """
    Prepend a ``(session bootstrap)`` user turn when the first message is an assistant turn.

    Google's APIs require the conversation to start with a user turn (OpenClaw
    ``sanitizeGoogleAssistantFirstOrdering``, spec §9 step 11).
    """
    if not messages or message_role(messages[0]) != "assistant":
        return messages
    return [UserMessage(content=GOOGLE_BOOTSTRAP_TEXT, timestamp=timestamp_ms), *messages]


def _merge_assistants(previous: AssistantMessage, current: AssistantMessage) -> AssistantMessage:
    """Contents concatenated; the later usage, stop reason and error win (OpenClaw's merge)."""
    changes: dict[str, Any] = {"content": [*previous.content, *current.content], "usage": current.usage}
    if current.stop_reason:
        changes["stop_reason"] = current.stop_reason
    if isinstance(current.error_message, str) and current.error_message:
        changes["error_message"] = current.error_message
    return msgspec.structs.replace(previous, **changes)


def _merge_users(previous: UserMessage, current: UserMessage) -> UserMessage:
    """String content becomes a text block; the later timestamp wins (``mergeConsecutiveUserTurns``)."""

    def blocks(content: Any) -> list[Any]:
        return [TextContent(text=content)] if isinstance(content, str) else list(content)

    return msgspec.structs.replace(current, content=[*blocks(previous.content), *blocks(current.content)])


def _has_consecutive(messages: Sequence[AgentMessage], role: str) -> bool:
    """Whether two ``role`` turns follow each other (messages without a role in between ignored)."""
    last_role: str | None = None
    for message in messages:
        current = message_role(message)
        if current is None:
            continue
        if current == last_role == role:
            return True
        last_role = current
    return False


def _merge_consecutive(messages: Sequence[AgentMessage], role: str) -> Sequence[AgentMessage]:
    if not _has_consecutive(messages, role):
        return messages
    out: list[AgentMessage] = []
    last_role: str | None = None
    touched = False
    for message in messages:
        current = message_role(message)
        if current is None:
            out.append(message)
            continue
        if current == last_role == role and out:
            previous = out[-1]
            if isinstance(previous, AssistantMessage) and isinstance(message, AssistantMessage):
                out[-1] = _merge_assistants(previous, message)
                touched = True
                continue
            if isinstance(previous, UserMessage) and isinstance(message, UserMessage):
                out[-1] = _merge_users(previous, message)
                touched = True
                continue
        out.append(message)
        last_role = current
    return out if touched else messages


def validate_gemini_turns(messages: Sequence[AgentMessage]) -> Sequence[AgentMessage]:
    """Merge consecutive assistant turns (OpenClaw ``validateGeminiTurns``, spec §9 step 12)."""
    return _merge_consecutive(messages, "assistant")


def _strip_dangling_tool_calls(messages: Sequence[AgentMessage]) -> Sequence[AgentMessage]:
    out: list[AgentMessage] = []
    touched = False
    total = len(messages)
    for index, message in enumerate(messages):
        if not isinstance(message, AssistantMessage):
            out.append(message)
            continue
        has_call = has_thinking = False
        for b in message.content:
            if isinstance(b, ToolCall):
                has_call = has_call or bool(b.id)
            elif isinstance(b, ThinkingContent):
                has_thinking = True
        if not has_call:
            out.append(message)
            continue
        if not has_thinking:  # only the answered ids matter: a set, and no copy when all are answered
            ids: set[str] = set()
            for at in range(index + 1, total):
                later = messages[at]
                if isinstance(later, AssistantMessage) or (
                    isinstance(later, UnknownMessage) and later.role == "assistant"
                ):
                    break
                if isinstance(later, ToolResultMessage):
                    rid = later.tool_call_id.strip()
                    if rid:
                        ids.add(rid)
            for b in message.content:
                if isinstance(b, ToolCall) and b.id.strip() not in ids:
                    break
            else:
                out.append(message)  # every call is answered
                continue
            kept = [b for b in message.content if not isinstance(b, ToolCall) or b.id.strip() in ids]
            fallback_text: list[Any] = (
                []
                if message.stop_reason in ("error", "aborted")
                else [TextContent(text=TOOL_CALLS_OMITTED_TEXT)]
            )
            out.append(msgspec.structs.replace(message, content=kept or fallback_text))
            touched = True
            continue
        answered: dict[str, set[str]] = {}
        for at in range(index + 1, len(messages)):  # no slice copy: this runs once per tool-calling turn
            later = messages[at]
            if message_role(later) == "assistant":
                break
            if isinstance(later, ToolResultMessage) and later.tool_call_id.strip():
                answered.setdefault(later.tool_call_id.strip(), set()).add(later.tool_name.strip())
        aborted = message.stop_reason in ("error", "aborted")
        fallback: list[Any] = [] if aborted else [TextContent(text=TOOL_CALLS_OMITTED_TEXT)]
        if any(isinstance(b, ThinkingContent) for b in message.content):
            complete = all(
                not isinstance(b, ToolCall)
                or (
                    b.id.strip() in answered
                    and b.name.strip() != ""
                    and (not answered[b.id.strip()] - {""} or b.name.strip() in answered[b.id.strip()])
                )
                for b in message.content
            )
            if not complete:
                message = msgspec.structs.replace(message, content=fallback)
                touched = True
            out.append(message)
            continue
        kept = [b for b in message.content if not isinstance(b, ToolCall) or b.id.strip() in answered]
        if len(kept) != len(message.content):
            message = msgspec.structs.replace(message, content=kept or fallback)
            touched = True
        out.append(message)
    return out if touched else messages


def validate_anthropic_turns(messages: Sequence[AgentMessage]) -> Sequence[AgentMessage]:
    """
    Anthropic turn validation (OpenClaw ``validateAnthropicTurns``, spec §9 step 12).

    Merge consecutive assistant turns; strip tool calls that have no result before the next
    assistant turn (a turn with thinking keeps all its calls only if every one is answered, else
    its content becomes ``[tool calls omitted]``, or nothing if it was aborted); then merge
    consecutive user turns.
    """
    merged = _merge_consecutive(messages, "assistant")
    return _merge_consecutive(_strip_dangling_tool_calls(merged), "user")
