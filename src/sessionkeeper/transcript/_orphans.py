"""
What a loaded transcript says is wrong beyond its lines: orphan tool results on the leaf's context, and
the read-only check ``sessionkeeper doctor`` reports (:func:`scan_transcript`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import attrs

from sessionkeeper.records import (
    AgentMessage,
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
)
from sessionkeeper.transcript._diagnostics import TranscriptDiagnostics
from sessionkeeper.transcript._load import load_transcript


__all__ = ("find_orphan_tool_results", "scan_transcript")


def find_orphan_tool_results(messages: Iterable[AgentMessage]) -> tuple[str, ...]:
    """
    Return the ``toolCallId`` of every tool result in ``messages`` that has no matching tool call in
    the closest preceding assistant message, or that follows a non-tool-result message after it (the
    pairing invariant of the field reports; providers reject such results).
    """
    orphans: list[str] = []
    open_calls: set[str] = set()
    for message in messages:
        role, call_ids, result_id = _pairing_view(message)
        if role == "assistant":
            open_calls = set(call_ids)
        elif role == "toolResult":
            if result_id is None or result_id not in open_calls:
                orphans.append(result_id or "")
        else:
            open_calls = set()
    return tuple(orphans)


def _pairing_view(message: AgentMessage) -> tuple[str | None, list[str], str | None]:
    if isinstance(message, AssistantMessage):
        return "assistant", [b.id for b in message.content if isinstance(b, ToolCall)], None
    if isinstance(message, ToolResultMessage):
        return "toolResult", [], message.tool_call_id
    if isinstance(message, UnknownMessage):
        raw = message.raw
        role = raw.get("role")
        if role == "assistant":
            content = raw.get("content")
            blocks = content if isinstance(content, list) else []
            ids = [
                b["id"]
                for b in blocks
                if isinstance(b, dict) and b.get("type") == "toolCall" and isinstance(b.get("id"), str)
            ]
            return "assistant", ids, None
        if role == "toolResult":
            call_id = raw.get("toolCallId")
            return "toolResult", [], call_id if isinstance(call_id, str) else None
        return role if isinstance(role, str) else None, [], None
    return "other", [], None


def scan_transcript(path: Path | str) -> TranscriptDiagnostics:
    """
    Load a transcript read-only and return everything found wrong, including orphan tool results on
    the leaf's context (what ``sessionkeeper doctor`` reports). Never writes.

    Raises:
        TranscriptNotFoundError: The file does not exist.
        TranscriptFormatError: It is not a transcript at all.
    """
    index = load_transcript(path)
    orphans = find_orphan_tool_results(index.build_context().messages)
    return attrs.evolve(index.diagnostics, orphan_tool_results=orphans)
