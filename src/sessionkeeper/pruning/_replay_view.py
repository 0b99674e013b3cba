"""
Unknown-shape messages read as the replay records they stand for (OpenClaw spec §9, the
reference pipeline of :func:`~sessionkeeper.pruning.sanitize_replay_history`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from sessionkeeper.records import (
    AgentMessage,
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
)


__all__ = ("has_unknown", "replay_view")


_REPLAY_TYPES: dict[str, type[UserMessage | AssistantMessage | ToolResultMessage]] = {
    "user": UserMessage,
    "assistant": AssistantMessage,
    "toolResult": ToolResultMessage,
}


_BLOCK_FIELDS: dict[str, frozenset[str]] = {
    cls.__struct_config__.tag: frozenset(("type", *cls.__struct_encode_fields__))  # type: ignore[misc]
    for cls in (TextContent, ThinkingContent, ImageContent, ToolCall)
}


def _finalized_responses_call(raw: dict[str, Any], block: dict[str, Any]) -> bool:
    """OpenClaw ``isFinalizedOpenAIResponsesToolCall``: a ``partialJson`` block that may be replayed."""
    call_id, arguments, partial = block.get("id"), block.get("arguments"), block.get("partialJson")
    if raw.get("stopReason") != "toolUse" or not isinstance(call_id, str) or "input" in block:
        return False
    if not isinstance(arguments, dict) or (not arguments and not isinstance(partial, str)):
        return False
    try:
        complete = isinstance(msgspec.json.decode(str(partial)), dict)
    except msgspec.DecodeError:
        complete = False
    if not complete and (str(partial).strip() or arguments):
        return False
    separator = call_id.find("|")
    return 0 < separator < len(call_id) - 1


def _replay_block(raw: dict[str, Any], block: object) -> object:
    """
    One content block as it is replayed: known fields only (a provider is sent nothing else).

    A ``toolCall`` OpenClaw's ``repairToolCallInputs`` drops (no ``arguments`` nor ``input``, no id,
    or an unfinished ``partialJson``) gets a blank id, so :func:`repair_tool_call_inputs` drops it
    (and, in a signed thinking turn, the whole turn) as it drops any call without an id; ``input``
    stands in for missing ``arguments``.
    """
    if not isinstance(block, dict):
        return block
    fields = _BLOCK_FIELDS.get(block.get("type"))  # type: ignore[arg-type]
    if fields is None:
        return block
    out = {k: v for k, v in block.items() if k in fields}
    if block.get("type") != "toolCall":
        return out
    arguments = block.get("arguments")
    if arguments is None and isinstance(block.get("input"), dict):
        arguments = out["arguments"] = block["input"]
    usable = (
        isinstance(arguments, dict)
        and isinstance(block.get("id"), str)
        and (not isinstance(block.get("partialJson"), str) or _finalized_responses_call(raw, block))
    )
    if not usable:
        out["id"] = ""
        out["arguments"] = arguments if isinstance(arguments, dict) else {}
        if not isinstance(out.get("name"), str):
            out["name"] = ""
    return out


def replay_view(messages: Sequence[AgentMessage]) -> Sequence[AgentMessage]:
    """
    Read user/assistant/toolResult messages kept as :class:`UnknownMessage` (extra fields) as records.

    Fields a provider is never sent are dropped, at the message and at the content-block level, so
    the pairing repair sees every tool call and result; a tool call OpenClaw would drop (no
    ``arguments``, no id, unfinished ``partialJson``) is dropped alone by
    :func:`repair_tool_call_inputs` instead of leaving its whole turn unsanitised (issue 11). Shapes
    that still do not fit stay unknown and pass through unchanged.
    """
    out: list[AgentMessage] = []
    touched = False
    for message in messages:
        if isinstance(message, UnknownMessage) and message.role in _REPLAY_TYPES:
            cls = _REPLAY_TYPES[message.role]
            known = {*cls.__struct_encode_fields__, "role"}
            raw = {k: v for k, v in message.raw.items() if k in known}
            content = raw.get("content")
            if isinstance(content, list):
                raw["content"] = [_replay_block(message.raw, block) for block in content]
            try:
                message = msgspec.convert(raw, cls)
                touched = True
            except msgspec.ValidationError:
                pass
        out.append(message)
    return out if touched else messages


def has_unknown(messages: Sequence[AgentMessage]) -> bool:
    for message in messages:  # noqa: SIM110 - no generator on the hot path
        if isinstance(message, UnknownMessage):
            return True
    return False
