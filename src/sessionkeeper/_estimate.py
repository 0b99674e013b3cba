"""
Token estimation exactly as pi counts it (pi-format spec §12).

``estimate_tokens`` is ``ceil(chars / 4)`` where ``chars`` is a length in **UTF-16 code units**
(JavaScript's ``string.length``: an astral character such as an emoji counts 2), with pi's per-role
rules and weights (an image block in a tool result or custom message counts 4800 chars, in a user
message 0). ``estimate_context_tokens`` combines the last valid provider usage with estimates of what
follows it.
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard

import attrs
from msgspec import to_builtins as msgspec_builtins

from sessionkeeper.records import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    Usage,
    UserMessage,
    js_json_stringify,
    utf16_len,
)


__all__ = (
    "IMAGE_CHARS",
    "ContextEstimate",
    "calculate_context_tokens",
    "estimate_context_tokens",
    "estimate_tokens",
    "estimate_tokens_pi16",
    "reported_usage",
)

IMAGE_CHARS = 4800
"""Chars counted for one image block in a tool result or custom message (pi: 1200 tokens)."""


def _args_len(arguments: Any) -> int:
    return utf16_len(js_json_stringify(arguments))


def _ceil4(chars: int) -> int:
    return -(-chars // 4)


def _raw_text_len(content: Any, *, images: bool) -> int:
    if isinstance(content, str):
        return utf16_len(content)
    chars = 0
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            text = block.get("text")
            if kind == "text" and isinstance(text, str) and text:
                chars += utf16_len(text)
            if images and kind == "image":
                chars += IMAGE_CHARS
    return chars


def _estimate_raw(raw: dict[str, Any]) -> int:
    """pi's rules over a raw message object (an :class:`UnknownMessage` with a known role)."""
    role = raw.get("role")
    chars = 0
    if role == "user":
        chars = _raw_text_len(raw.get("content"), images=False)
    elif role == "assistant":
        content = raw.get("content")
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                chars += utf16_len(block["text"])
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                chars += utf16_len(block["thinking"])
            elif kind == "toolCall":
                name = block.get("name")
                chars += utf16_len(name) if isinstance(name, str) else 0
                chars += _args_len(block.get("arguments")) if "arguments" in block else 0
    elif role in ("custom", "toolResult"):
        chars = _raw_text_len(raw.get("content"), images=True)
    elif role == "bashExecution":
        for key in ("command", "output"):
            value = raw.get(key)
            chars += utf16_len(value) if isinstance(value, str) else 0
    elif role in ("branchSummary", "compactionSummary"):
        value = raw.get("summary")
        chars = utf16_len(value) if isinstance(value, str) else 0
    else:
        return 0
    return _ceil4(chars)


def estimate_tokens(message: AgentMessage) -> int:
    """
    Estimate the tokens of one message exactly as pi's ``estimateTokens`` does (spec §12).

    ``ceil(chars / 4)`` with ``chars`` in UTF-16 code units:

    - user: string content, or the text of its text blocks (images count 0);
    - assistant: text + thinking text + for each tool call ``len(name) + len(JSON.stringify(args))``;
    - toolResult, custom: string content or text blocks, plus 4800 per image block;
    - bashExecution: ``len(command) + len(output)`` (even when excluded from the context);
    - branchSummary, compactionSummary: ``len(summary)``;
    - any other role: 0.

    Args:
        message: A typed message or an :class:`UnknownMessage` (counted by its ``role``).

    Returns:
        The estimate in tokens (>= 0).
    """
    chars = 0
    if isinstance(message, UserMessage):
        content = message.content
        if isinstance(content, str):
            chars = utf16_len(content)
        else:
            for block in content:
                if isinstance(block, TextContent) and block.text:
                    chars += utf16_len(block.text)
    elif isinstance(message, AssistantMessage):
        for part in message.content:
            if isinstance(part, TextContent):
                chars += utf16_len(part.text)
            elif isinstance(part, ThinkingContent):
                chars += utf16_len(part.thinking)
            elif isinstance(part, ToolCall):
                chars += utf16_len(part.name) + _args_len(part.arguments)
    elif isinstance(message, ToolResultMessage | CustomMessage):
        content = message.content
        if isinstance(content, str):
            chars = utf16_len(content)
        else:
            for block in content:
                if isinstance(block, TextContent):
                    if block.text:
                        chars += utf16_len(block.text)
                elif isinstance(block, ImageContent):
                    chars += IMAGE_CHARS
    elif isinstance(message, BashExecutionMessage):
        chars = utf16_len(message.command) + utf16_len(message.output)
    elif isinstance(message, BranchSummaryMessage | CompactionSummaryMessage):
        chars = utf16_len(message.summary)
    elif isinstance(message, UnknownMessage):
        return _estimate_raw(message.raw)
    return _ceil4(chars)


def estimate_tokens_pi16(message: AgentMessage) -> int:
    """
    Estimate the tokens of one message as pi 1.6.0's ``estimateTokens`` (issue 18): as
    :func:`estimate_tokens`, except that user images count 4800 chars like tool-result images, and a
    system message counts its content, its non-empty sections and ``JSON.stringify(toolsAdded)``.
    pi 1.6.0 compaction cut points are measured with it.
    """
    if isinstance(message, SystemMessage):
        content = message.content
        if content is None:
            chars = 0
        elif isinstance(content, str):
            chars = utf16_len(content)
        else:
            chars = sum(utf16_len(block.text) for block in content if block.text)
        for section in (message.sections or {}).values():
            if section:
                chars += utf16_len(section)
        if message.tools_added:
            chars += utf16_len(js_json_stringify([msgspec_builtins(t) for t in message.tools_added]))
        return _ceil4(chars)
    if isinstance(message, UserMessage):
        if isinstance(message.content, str):
            return _ceil4(utf16_len(message.content))
        chars = 0
        for block in message.content:
            if isinstance(block, TextContent) and block.text:
                chars += utf16_len(block.text)
            elif isinstance(block, ImageContent):
                chars += IMAGE_CHARS
        return _ceil4(chars)
    if isinstance(message, UnknownMessage):
        raw: dict[str, Any] = message.raw
        role = raw.get("role")
        if role == "user":
            return _ceil4(_raw_text_len(raw.get("content"), images=True))
        if role == "system":
            chars = _raw_text_len(raw.get("content"), images=True)
            sections = raw.get("sections")
            for section in sections.values() if isinstance(sections, dict) else ():
                if isinstance(section, str) and section:
                    chars += utf16_len(section)
            if raw.get("toolsAdded"):
                chars += utf16_len(js_json_stringify(raw["toolsAdded"]))
            return _ceil4(chars)
    return estimate_tokens(message)


def calculate_context_tokens(usage: Usage | dict[str, Any]) -> int:
    """
    Context size implied by one reply's usage (pi's ``calculateContextTokens``, spec §12).

    Returns ``total_tokens`` when present and non-zero, else ``input + output + cache_read +
    cache_write``. Raw usage objects (from an :class:`UnknownMessage`) are accepted too; missing
    numbers count 0.
    """
    if isinstance(usage, Usage):
        total = usage.total_tokens
        if isinstance(total, int | float) and total:
            return int(total)
        return usage.input + usage.output + usage.cache_read + usage.cache_write
    total_raw = usage.get("totalTokens")
    if _finite_number(total_raw) and total_raw:
        return int(total_raw)
    parts = (usage.get(key) for key in ("input", "output", "cacheRead", "cacheWrite"))
    return int(sum(p for p in parts if _finite_number(p)))


def _finite_number(value: Any) -> TypeGuard[int | float]:
    """A JSON number that is finite: ``Infinity`` (a number literal beyond the double range, as read by
    ``JSON.parse``) and ``NaN`` count as absent, as in the runtime's context-window rule."""
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and math.isfinite(value)
    )


@attrs.frozen(kw_only=True)
class ContextEstimate:
    """
    pi's context-token estimate for a message list (spec §12, ``estimateContextTokens``).

    Attributes:
        tokens: ``usage_tokens + trailing_tokens``, in tokens.
        usage_tokens: Context size from the last valid assistant usage (0 when there is none).
        trailing_tokens: Sum of :func:`estimate_tokens` over the messages after that assistant (over
            all messages when there is none).
        last_usage_index: Index of that assistant message, or ``None``.
    """

    tokens: int
    usage_tokens: int
    trailing_tokens: int
    last_usage_index: int | None

    def to_json(self) -> dict[str, Any]:
        """Return pi's camelCase shape: ``{"tokens", "usageTokens", "trailingTokens", "lastUsageIndex"}``."""
        return {
            "tokens": self.tokens,
            "usageTokens": self.usage_tokens,
            "trailingTokens": self.trailing_tokens,
            "lastUsageIndex": self.last_usage_index,
        }


def reported_usage(message: AgentMessage) -> Usage | dict[str, Any] | None:
    """
    The usage an assistant reply reported (a typed reply's, or the raw ``usage`` object of an assistant
    message of unknown shape); ``None`` for other messages, replies with ``stopReason`` ``error`` or
    ``aborted``, and a missing or empty raw usage (pi spec §12).
    """
    if isinstance(message, AssistantMessage):
        if message.stop_reason in ("aborted", "error"):
            return None
        return message.usage
    if isinstance(message, UnknownMessage) and message.raw.get("role") == "assistant":
        raw = message.raw
        usage = raw.get("usage")
        if raw.get("stopReason") in ("aborted", "error") or not isinstance(usage, dict) or not usage:
            return None
        return usage
    return None


def estimate_context_tokens(
    messages: list[AgentMessage] | tuple[AgentMessage, ...], *, pi16: bool = False
) -> ContextEstimate:
    """
    Estimate the context size of ``messages`` as pi does before compaction decisions (spec §12).

    Finds the last assistant message with usage whose ``stop_reason`` is neither ``error`` nor
    ``aborted``; the result is its :func:`calculate_context_tokens` plus :func:`estimate_tokens` of
    every later message. Without one, the sum of :func:`estimate_tokens` over all messages.

    ``pi16=True``: pi 1.6.0's ``estimateContextTokens``: messages are counted with
    :func:`estimate_tokens_pi16`, and a usage whose context size is 0 is skipped.
    """
    estimate = estimate_tokens_pi16 if pi16 else estimate_tokens
    for index in range(len(messages) - 1, -1, -1):
        usage = reported_usage(messages[index])
        if usage is not None:
            usage_tokens = calculate_context_tokens(usage)
            if pi16 and usage_tokens <= 0:
                continue
            trailing = sum(estimate(m) for m in messages[index + 1 :])
            return ContextEstimate(
                tokens=usage_tokens + trailing,
                usage_tokens=usage_tokens,
                trailing_tokens=trailing,
                last_usage_index=index,
            )
    total = sum(estimate(m) for m in messages)
    return ContextEstimate(tokens=total, usage_tokens=0, trailing_tokens=total, last_usage_index=None)
