"""
OpenAI Responses replay fixes (OpenClaw spec §9 step 7, ``embedded-agent-helpers/openai.ts``).

* :func:`downgrade_openai_reasoning`: a replayable reasoning item (``thinkingSignature`` holding
  ``{"id": "rs_...", "type": "reasoning"}``) with nothing after it in its turn is dropped, and all of
  them are dropped after a model switch.
* :func:`normalize_openai_responses_ids`: ``call_id|fc_id`` tool-call ids that do not fit the API's
  ``call_*`` / ``fc_*`` shapes (at most 64 chars) are rewritten, calls and results alike.
* :func:`downgrade_function_call_reasoning_pairs`: a ``call_id|fc_id`` call that no reasoning item
  precedes in its turn loses its ``fc_`` item id (the API rejects an ``fc_`` item without its reasoning).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from sessionkeeper.records import (
    AgentMessage,
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
)


__all__ = (
    "downgrade_function_call_reasoning_pairs",
    "downgrade_openai_reasoning",
    "normalize_openai_responses_ids",
)

_MAX_ID: Final = 64
_CALL_ID = re.compile(r"^call_[A-Za-z0-9_-]{1,59}$")
_ITEM_ID = re.compile(r"^fc_[A-Za-z0-9_-]{1,61}$")
_TAIL_BAD = re.compile(r"[^A-Za-z0-9_-]")


def _reasoning_item(signature: object) -> bool:
    """OpenClaw ``parseOpenAIReasoningSignature``: a ``{"id": "rs_...", "type": "reasoning..."}`` object."""
    if not isinstance(signature, str):
        return False
    text = signature.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return False
    try:
        candidate = json.loads(text)
    except ValueError:
        return False
    if not isinstance(candidate, dict):
        return False
    raw_id, raw_kind = candidate.get("id"), candidate.get("type")
    item_id = raw_id if isinstance(raw_id, str) else ""
    kind = raw_kind if isinstance(raw_kind, str) else ""
    return item_id.startswith("rs_") and (kind == "reasoning" or kind.startswith("reasoning."))


def _phase(signature: str) -> str | None:
    if not signature.startswith("{"):
        return None
    try:
        parsed = json.loads(signature)
    except ValueError:
        return None
    if (
        isinstance(parsed, dict)
        and parsed.get("v") == 1
        and parsed.get("phase") in ("commentary", "final_answer")
    ):
        return str(parsed["phase"])
    return None


def downgrade_openai_reasoning(
    messages: Sequence[AgentMessage], *, drop_replayable: bool = False
) -> Sequence[AgentMessage]:
    """
    Drop reasoning items the Responses API would reject (OpenClaw ``downgradeOpenAIReasoningBlocks``).

    A thinking block carrying a replayable reasoning item is dropped when no non-thinking block
    follows it in its turn, or always with ``drop_replayable`` (after a model switch; then text
    signatures keep only their ``phase``). A turn left empty is dropped.
    """
    out: list[AgentMessage] = []
    any_changed = False
    for message in messages:
        if not isinstance(message, AssistantMessage):
            out.append(message)
            continue
        content: list[Any] = []
        changed = dropped = False
        blocks = message.content
        for index, block in enumerate(blocks):
            if not isinstance(block, ThinkingContent) or not _reasoning_item(block.thinking_signature):
                content.append(block)
                continue
            if drop_replayable:
                changed = dropped = True
                continue
            if any(not isinstance(b, ThinkingContent) for b in blocks[index + 1 :]):
                content.append(block)
                continue
            changed = True
        if not changed:
            out.append(message)
            continue
        any_changed = True
        if not content:
            continue
        if dropped:
            content = [_without_text_signature(b) for b in content]
        out.append(msgspec.structs.replace(message, content=content))
    return out if any_changed else messages


def _without_text_signature(block: Any) -> Any:
    if not isinstance(block, TextContent) or block.text_signature is msgspec.UNSET:
        return block
    phase = _phase(block.text_signature)
    signature = json.dumps({"v": 1, "phase": phase}, separators=(",", ":")) if phase else msgspec.UNSET
    return msgspec.structs.replace(block, text_signature=signature)


def _split(tool_call_id: str) -> tuple[str, str | None]:
    separator = tool_call_id.find("|")
    if separator <= 0 or separator >= len(tool_call_id) - 1:
        return tool_call_id, None
    return tool_call_id[:separator], tool_call_id[separator + 1 :]


def _normalize_part(value: str, prefix: str, pattern: re.Pattern[str]) -> str:
    trimmed = value.strip()
    if pattern.match(trimmed):
        return trimmed
    raw_tail = trimmed[len(prefix) :] if trimmed.startswith(prefix) else trimmed
    digest = hashlib.sha256((trimmed or prefix).encode("utf-8")).hexdigest()[:10]
    max_tail = _MAX_ID - len(prefix)
    suffix = f"_{digest}"
    clean = _TAIL_BAD.sub("_", raw_tail).strip("_")
    tail = f"{clean[: max(1, max_tail - len(suffix))] or 'id'}{suffix}"[:max_tail]
    return f"{prefix}{tail}"


def _needs_normalizing(tool_call_id: str) -> bool:
    call_id, item_id = _split(tool_call_id)
    if not _CALL_ID.match(call_id):
        return True
    return item_id is not None and not _ITEM_ID.match(item_id)


@functools.lru_cache(maxsize=1 << 16)
def _resolved(tool_call_id: str) -> str:
    """The Responses-shaped id (cached: pure, and the same ids come back on every model call)."""
    return _normalized(tool_call_id) if _needs_normalizing(tool_call_id) else tool_call_id


def _normalized(tool_call_id: str) -> str:
    call_id, item_id = _split(tool_call_id)
    call = _normalize_part(call_id, "call_", _CALL_ID)
    return call if item_id is None else f"{call}|{_normalize_part(item_id, 'fc_', _ITEM_ID)}"


def normalize_openai_responses_ids(messages: Sequence[AgentMessage]) -> Sequence[AgentMessage]:
    """
    Rewrite tool-call ids to the Responses API's shapes (OpenClaw ``normalizeOpenAIResponsesToolCallIds``).

    ``call_<1-59 of [A-Za-z0-9_-]>`` and ``fc_<1-61>`` ids (joined by ``|``) are kept; any other id
    becomes ``call_<sanitised tail>_<sha256 prefix>`` (and ``fc_...`` for the item part), at most 64
    chars, the same for a call and its results.
    """
    resolve = _resolved

    out: list[AgentMessage] = []
    changed = False
    for message in messages:
        if isinstance(message, AssistantMessage):
            if all(not isinstance(b, ToolCall) or resolve(b.id) == b.id for b in message.content):
                out.append(message)
                continue
            content = [
                msgspec.structs.replace(b, id=resolve(b.id))
                if isinstance(b, ToolCall) and resolve(b.id) != b.id
                else b
                for b in message.content
            ]
            message = msgspec.structs.replace(message, content=content)
            changed = True
        elif isinstance(message, ToolResultMessage):
            new_id = resolve(message.tool_call_id)
            if new_id != message.tool_call_id:
                message = msgspec.structs.replace(message, tool_call_id=new_id)
                changed = True
        out.append(message)
    return out if changed else messages


def downgrade_function_call_reasoning_pairs(messages: Sequence[AgentMessage]) -> Sequence[AgentMessage]:
    """
    Drop the ``fc_`` item id of calls no reasoning item precedes (OpenClaw's pair downgrade).

    In an assistant turn, a ``call_id|fc_id`` tool call before any replayable reasoning item becomes
    ``call_id``; the results directly following the turn are renamed to match.
    """
    out: list[AgentMessage] = []
    changed = False
    pending: dict[str, str] | None = None
    for message in messages:
        if isinstance(message, AssistantMessage):
            local: dict[str, str] = {}
            seen_reasoning = False
            content: list[Any] = []
            for block in message.content:
                if isinstance(block, ThinkingContent) and _reasoning_item(block.thinking_signature):
                    seen_reasoning = True
                elif isinstance(block, ToolCall) and not seen_reasoning:
                    call_id, item_id = _split(block.id)
                    if item_id is not None and item_id.startswith("fc_"):
                        local[block.id] = call_id
                        block = msgspec.structs.replace(block, id=call_id)
                content.append(block)
            pending = local or None
            if local:
                changed = True
                message = msgspec.structs.replace(message, content=content)
            out.append(message)
            continue
        if isinstance(message, ToolResultMessage) and pending:
            new_id = pending.get(message.tool_call_id)
            if new_id and new_id != message.tool_call_id:
                message = msgspec.structs.replace(message, tool_call_id=new_id)
                changed = True
            out.append(message)
            continue
        pending = None
        out.append(message)
    return out if changed else messages
