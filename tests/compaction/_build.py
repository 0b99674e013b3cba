"""Build small transcripts from the field reports' shorthand (tests only)."""

from __future__ import annotations

from typing import Any

from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import (
    AssistantMessage,
    CompactionEntry,
    MessageEntry,
    TextContent,
    ToolCall,
    ToolResultMessage,
    TranscriptEntry,
    UserMessage,
)
from sessionkeeper.transcript._manager import TranscriptManager


T0 = "2026-01-05T10:00:00.000Z"


def user(text: str) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)], timestamp=0)


def assistant(
    text: str = "", *calls: tuple[str, str, dict[str, Any]], stop: str | None = None
) -> AssistantMessage:
    content: list[Any] = [TextContent(text=text)] if text else []
    content += [ToolCall(id=cid, name=name, arguments=args) for cid, name, args in calls]
    return AssistantMessage(
        content=content,
        api="anthropic-messages",
        provider="anthropic",
        model="claude",
        stop_reason=stop or ("toolUse" if calls else "stop"),
    )


def result(call_id: str, text: str, *, tool: str = "read", is_error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call_id, tool_name=tool, content=[TextContent(text=text)], is_error=is_error
    )


def chain(*items: tuple[str, Any]) -> list[TranscriptEntry]:
    """``chain(("e1", user("hi")), ("e2", assistant("yo")))`` -> linked message entries."""
    out: list[TranscriptEntry] = []
    parent: str | None = None
    for entry_id, message in items:
        if isinstance(message, CompactionEntry):
            out.append(message)
        else:
            out.append(MessageEntry(id=entry_id, parent_id=parent, timestamp=T0, message=message))
        parent = entry_id
    return out


async def manager(*messages: Any) -> tuple[TranscriptManager, list[str]]:
    """An in-memory transcript with ``messages`` appended; returns it and the entry ids in order."""
    transcript = TranscriptManager.in_memory(cwd="/home/dev/project", clock=FakeClock())
    ids = []
    for message in messages:
        entry = await transcript.append_message(message)
        ids.append(entry.id)
    return transcript, ids
