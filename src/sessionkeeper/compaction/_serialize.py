"""
Conversation serialisation for summarisers (pi's ``serializeConversation``, pi spec §13.4).

The conversation is turned into plain text (``[User]: ...``, ``[Assistant]: ...``) so the summarising
model reads it instead of continuing it. Tool results are cut to 2000 UTF-16 code units.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sessionkeeper.records import (
    AgentMessage,
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
    js_json_stringify,
    utf16_len,
)
from sessionkeeper.transcript import convert_to_llm


__all__ = ("TOOL_RESULT_MAX_CHARS", "serialize_conversation", "truncate_utf16")

TOOL_RESULT_MAX_CHARS = 2000
"""Tool results longer than this (UTF-16 code units) are cut in summariser input (pi #1796)."""


def truncate_utf16(text: str, max_units: int) -> tuple[str, int]:
    """
    Keep the first ``max_units`` UTF-16 code units of ``text``.

    Never splits a surrogate pair (field report B02): when the cut would fall inside one, the whole
    character is left out.

    Returns:
        ``(kept text, number of UTF-16 units cut off)``.
    """
    total = utf16_len(text)
    if total <= max_units:
        return text, 0
    if text.isascii():
        return text[:max_units], total - max_units
    units = 0
    for index, char in enumerate(text):
        width = 2 if ord(char) > 0xFFFF else 1
        if units + width > max_units:
            return text[:index], total - units
        units += width
    return text, 0  # pragma: no cover - total > max_units guarantees an early return


def _texts(content: Any) -> Iterable[str]:
    if isinstance(content, str):
        yield content
        return
    if not isinstance(content, list):
        return
    for block in content:
        if isinstance(block, TextContent):
            yield block.text
        elif isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            yield block["text"]


def _assistant_parts(blocks: Sequence[Any]) -> list[str]:
    texts: list[str] = []
    thinking: list[str] = []
    calls: list[str] = []
    for block in blocks:
        if isinstance(block, TextContent):
            texts.append(block.text)
        elif isinstance(block, ThinkingContent):
            thinking.append(block.thinking)
        elif isinstance(block, ToolCall):
            args = ", ".join(f"{key}={js_json_stringify(value)}" for key, value in block.arguments.items())
            calls.append(f"{block.name}({args})")
        elif isinstance(block, dict):
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                thinking.append(block["thinking"])
            elif kind == "toolCall":
                arguments = block.get("arguments")
                items = arguments.items() if isinstance(arguments, dict) else ()
                args = ", ".join(f"{key}={js_json_stringify(value)}" for key, value in items)
                calls.append(f"{block.get('name')}({args})")
    parts: list[str] = []
    if thinking:
        parts.append("[Assistant thinking]: " + "\n".join(thinking))
    if texts:
        parts.append("[Assistant]: " + "\n".join(texts))
    if calls:
        parts.append("[Assistant tool calls]: " + "; ".join(calls))
    return parts


def _tool_result(text: str) -> str:
    kept, cut = truncate_utf16(text, TOOL_RESULT_MAX_CHARS)
    if cut:
        kept += f"\n\n[... {cut} more characters truncated]"
    return "[Tool result]: " + kept


def serialize_llm_messages(messages: Iterable[AgentMessage]) -> str:
    """Serialise messages already converted by ``convert_to_llm`` (user/assistant/toolResult)."""
    parts: list[str] = []
    for message in messages:
        if isinstance(message, UserMessage):
            text = "".join(_texts(message.content))
            if text:
                parts.append("[User]: " + text)
        elif isinstance(message, AssistantMessage):
            parts.extend(_assistant_parts(message.content))
        elif isinstance(message, ToolResultMessage):
            text = "".join(_texts(message.content))
            if text:
                parts.append(_tool_result(text))
        elif isinstance(message, UnknownMessage):
            role = message.role
            content = message.raw.get("content")
            if role == "user":
                text = "".join(_texts(content))
                if text:
                    parts.append("[User]: " + text)
            elif role == "assistant" and isinstance(content, list):
                parts.extend(_assistant_parts(content))
            elif role == "toolResult":
                text = "".join(_texts(content))
                if text:
                    parts.append(_tool_result(text))
    return "\n\n".join(parts)


def serialize_conversation(messages: Iterable[AgentMessage]) -> str:
    """
    Serialise a conversation for a summariser (pi spec §13.4).

    Messages are first converted with :func:`~sessionkeeper.transcript.convert_to_llm` (bash
    executions, custom messages and summaries become user messages), then rendered, joined by blank
    lines: ``[User]: text`` (text blocks concatenated; skipped when empty); for an assistant, up to
    three parts: ``[Assistant thinking]: ...`` (joined by newlines), ``[Assistant]: ...`` (joined by
    newlines), ``[Assistant tool calls]: name(k=<JSON>, ...); ...``; ``[Tool result]: text`` cut to
    2000 UTF-16 units plus ``\\n\\n[... N more characters truncated]``. Images are never included.

    Args:
        messages: Transcript messages, in order.

    Returns:
        The text (``""`` for no content).
    """
    return serialize_llm_messages(convert_to_llm(list(messages)))
