"""
How pruning changes one tool result (OpenClaw spec §7): soft trim to a head and a tail with a note,
hard clear to a placeholder, images to a marker (field report B16); and the re-application of recorded
decisions (:func:`apply_prune_ledger`, deviation D11).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import attrs
import msgspec

from sessionkeeper.pruning._settings import SoftTrimSettings
from sessionkeeper.pruning._stable import PruneLedger
from sessionkeeper.pruning._thinking import message_role
from sessionkeeper.records import (
    AgentMessage,
    ImageContent,
    TextContent,
    ToolResultMessage,
    UnknownMessage,
    slice_utf16_safe,
    utf16_len,
)


__all__ = (
    "PRUNED_IMAGE_MARKER",
    "ReappliedPruning",
    "apply_prune_ledger",
    "block_count",
    "has_images",
    "soft_trim",
    "tool_call_id_of",
    "tool_name_of",
    "with_text",
)

PRUNED_IMAGE_MARKER = "[image removed during context pruning]"
"""Text that replaces an image of a pruned tool result (field report B16)."""


def _tool_result_parts(message: AgentMessage) -> tuple[list[str], bool] | None:
    """Text segments of a tool result (images as markers when it has any), and whether it has images."""
    if isinstance(message, ToolResultMessage):
        has_images = any(isinstance(block, ImageContent) for block in message.content)
        parts: list[str] = []
        for block in message.content:
            if isinstance(block, TextContent):
                parts.append(block.text)
            elif has_images:
                parts.append(PRUNED_IMAGE_MARKER)
        return parts, has_images
    if isinstance(message, UnknownMessage):
        content = message.raw.get("content")
        if not isinstance(content, list):
            return None
        has_images = any(isinstance(b, dict) and b.get("type") == "image" for b in content)
        raw_parts: list[str] = []
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                text = block.get("text")
                if isinstance(text, str):
                    raw_parts.append(text)
                else:
                    try:
                        raw_parts.append(msgspec.json.encode(block).decode("utf-8"))
                    except (TypeError, ValueError, OverflowError):
                        raw_parts.append("[malformed text block]")
            elif has_images and block.get("type") == "image":
                raw_parts.append(PRUNED_IMAGE_MARKER)
        return raw_parts, has_images
    return None


def block_count(message: AgentMessage) -> int:
    if isinstance(message, ToolResultMessage):
        return len(message.content)
    content = message.raw.get("content") if isinstance(message, UnknownMessage) else None
    return len(content) if isinstance(content, list) else 0


def has_images(message: AgentMessage) -> bool:
    if isinstance(message, ToolResultMessage):
        return any(isinstance(block, ImageContent) for block in message.content)
    content = message.raw.get("content") if isinstance(message, UnknownMessage) else None
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "image" for b in content
    )


def with_text(message: AgentMessage, text: str) -> AgentMessage:
    if isinstance(message, ToolResultMessage):
        return msgspec.structs.replace(message, content=[TextContent(text=text)])
    assert isinstance(message, UnknownMessage)
    return UnknownMessage({**message.raw, "content": [{"type": "text", "text": text}]})


def tool_call_id_of(message: AgentMessage) -> str:
    if isinstance(message, ToolResultMessage):
        return message.tool_call_id
    value = message.raw.get("toolCallId") if isinstance(message, UnknownMessage) else None
    return value if isinstance(value, str) else ""


def tool_name_of(message: AgentMessage) -> str:
    if isinstance(message, ToolResultMessage):
        return message.tool_name
    value = message.raw.get("toolName") if isinstance(message, UnknownMessage) else None
    return value if isinstance(value, str) else ""


def _head(parts: list[str], max_chars: int) -> str:
    """The first ``max_chars`` UTF-16 units of ``"\\n".join(parts)``, surrogate-safe."""
    if max_chars <= 0 or not parts:
        return ""
    remaining = max_chars
    out: list[str] = []
    for index, part in enumerate(parts):
        if remaining <= 0:
            break
        if index > 0:
            out.append("\n")
            remaining -= 1
            if remaining <= 0:
                break
        length = utf16_len(part)
        if length <= remaining:
            out.append(part)
            remaining -= length
        else:
            out.append(slice_utf16_safe(part, 0, remaining))
            remaining = 0
    return "".join(out)


def _tail(parts: list[str], max_chars: int) -> str:
    """The last ``max_chars`` UTF-16 units of ``"\\n".join(parts)``, surrogate-safe."""
    if max_chars <= 0 or not parts:
        return ""
    remaining = max_chars
    out: list[str] = []
    for index in range(len(parts) - 1, -1, -1):
        if remaining <= 0:
            break
        part = parts[index]
        length = utf16_len(part)
        if length <= remaining:
            out.append(part)
            remaining -= length
        else:
            out.append(slice_utf16_safe(part, -remaining))
            break
        if remaining > 0 and index > 0:
            out.append("\n")
            remaining -= 1
    out.reverse()
    return "".join(out)


def soft_trim(message: AgentMessage, sizes: SoftTrimSettings) -> AgentMessage | None:
    """OpenClaw ``softTrimToolResultMessage``: the trimmed message, or ``None`` when unchanged."""
    found = _tool_result_parts(message)
    if found is None:
        return None
    parts, has_images = found
    raw_len = sum(utf16_len(part) for part in parts) + max(0, len(parts) - 1)
    head_chars = max(0, sizes.head_chars)
    tail_chars = max(0, sizes.tail_chars)
    if raw_len <= sizes.max_chars or head_chars + tail_chars >= raw_len:
        return with_text(message, "\n".join(parts)) if has_images else None
    trimmed = f"{_head(parts, head_chars)}\n...\n{_tail(parts, tail_chars)}"
    note = (
        f"\n\n[Tool result trimmed: kept first {head_chars} chars and last {tail_chars} chars"
        f" of {raw_len} chars.]"
    )
    return with_text(message, trimmed + note)


@attrs.frozen(kw_only=True)
class ReappliedPruning:
    """
    The outcome of :func:`apply_prune_ledger`.

    Attributes:
        messages: The context with every recorded decision applied (the input's objects elsewhere).
        reapplied: Tool call ids re-pruned, in context order.
        indexes: Their message indexes.
    """

    messages: tuple[AgentMessage, ...]
    reapplied: tuple[str, ...] = ()
    indexes: frozenset[int] = frozenset()


def apply_prune_ledger(
    messages: Sequence[AgentMessage], ledger: PruneLedger, *, protected_from: int | None = None
) -> ReappliedPruning:
    """
    Prune again, byte for byte, every tool result an earlier prune decided on (deviation D11).

    A result recorded as soft-trimmed is trimmed again from its transcript content with the sizes
    recorded (so a later settings change does not move its bytes); one recorded as hard-cleared gets
    the recorded placeholder. Results whose recorded trim would not change them are left as they are.
    No gate applies: the point is that the bytes sent for an old result never change back.

    A decision names its result by tool call id. When several results of the context carry that id (a
    model server that reuses ids), it is not applied to those from ``protected_from`` on: the protected
    tail, where no prune decides, holds a newer result that only shares the id (the one the model has
    just read, say).

    Args:
        messages: The rebuilt context, oldest first. Never modified.
        ledger: The session's recorded decisions (:func:`read_prune_ledger`).
        protected_from: Index where the protected tail starts (``keepLastAssistants``); ``None``: no tail.
    """
    if not ledger:
        return ReappliedPruning(messages=tuple(messages))
    out = list(messages)
    ids: list[str] = []
    indexes: set[int] = set()
    decisions = ledger.decisions
    results = [(i, tool_call_id_of(m)) for i, m in enumerate(messages) if message_role(m) == "toolResult"]
    counts = Counter(call_id for _, call_id in results)
    for index, call_id in results:
        decision = decisions.get(call_id)
        if decision is None:
            continue
        if protected_from is not None and index >= protected_from and counts[call_id] > 1:
            continue  # a newer result reusing a decided id
        message = messages[index]
        if decision.kind == "hard":
            updated: AgentMessage | None = with_text(message, decision.placeholder)
        else:
            updated = soft_trim(message, decision.soft_trim)
        if updated is None:
            continue
        out[index] = updated
        ids.append(call_id)
        indexes.add(index)
    if not ids:
        return ReappliedPruning(messages=tuple(messages))
    return ReappliedPruning(messages=tuple(out), reapplied=tuple(ids), indexes=frozenset(indexes))
