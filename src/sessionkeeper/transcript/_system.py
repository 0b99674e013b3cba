"""
pi 1.6 system messages and the transcript generation (issue 18).

pi 1.6 keeps the system prompt and the tool loadout in the transcript as ``role: "system"`` message
entries: the first declares named ``sections`` and ``toolsAdded``; later ones patch sections by name
(``None`` removes one) and add or remove tools. :func:`current_system_message` replays them into the one
complete system message (pi-ai's ``getCurrentSystemMessage``), which pi 1.6 stores on every compaction
(``systemMessage``) so the instructions survive it. :func:`detect_pi_generation` tells which pi
generation's conventions a file follows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Literal, TypeAlias

from msgspec import UNSET

from sessionkeeper.records import (
    AgentMessage,
    CompactionEntry,
    SystemMessage,
    TextContent,
    ToolDeclaration,
    TranscriptEntry,
)
from sessionkeeper.transcript._context import is_system_entry


__all__ = ("PiGeneration", "current_system_message", "current_tools", "detect_pi_generation")

PiGeneration: TypeAlias = Literal["0.73", "1.6"]
"""Which pi generation's writing conventions a transcript follows: ``"0.73"`` (pi 0.73.1, OpenClaw
2026.7) or ``"1.6"`` (pi 1.6.0: branch summary ``fromId`` = the abandoned leaf, compactions carry the
current ``systemMessage``)."""

_PI16_KINDS = ("usage", "context_edit")
_HEAD_MESSAGES = 8  # pi 1.6 writes its first system message before the first prompt


def _content_text(content: str | list[TextContent] | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(block.text for block in content)


def current_tools(messages: Iterable[AgentMessage]) -> list[ToolDeclaration]:
    """
    The tools available after ``messages`` (pi-ai ``getCurrentTools``): each system message removes its
    ``tools_removed`` by name, then adds (or replaces) its ``tools_added``; in first-added order.
    """
    tools: dict[str, ToolDeclaration] = {}
    for message in messages:
        if not isinstance(message, SystemMessage):
            continue
        for ref in message.tools_removed or ():
            tools.pop(ref.name, None)
        for tool in message.tools_added or ():
            tools[tool.name] = tool
    return list(tools.values())


def current_system_message(messages: Iterable[AgentMessage]) -> SystemMessage | None:
    """
    Replay the system messages among ``messages`` (a context) into one complete system message, as
    pi-ai 1.6's ``getCurrentSystemMessage``: non-empty contents joined by a blank line, sections
    replaced by name in order (``None`` removes one; a removed and re-added section moves to the end),
    the current tools as ``tools_added``, the first system message's timestamp.

    Returns:
        ``None`` when there is no system message and no tool (pi stores no ``systemMessage`` then).
    """
    listed = list(messages)
    contents: list[str] = []
    sections: dict[str, str | None] = {}
    timestamp: int | float | None = None
    for message in listed:
        if not isinstance(message, SystemMessage):
            continue
        if timestamp is None:
            timestamp = message.timestamp
        text = _content_text(message.content)
        if text:
            contents.append(text)
        for name, value in (message.sections or {}).items():
            if value is None:
                sections.pop(name, None)
            else:
                sections[name] = value  # as a JS Map.set: a replaced section keeps its position
    tools = current_tools(listed)
    if timestamp is None and not tools:
        return None
    return SystemMessage(
        content="\n\n".join(contents),
        sections=dict(sections) if sections else UNSET,
        timestamp=timestamp if timestamp is not None else 0,
        tools_added=tools if tools else UNSET,
    )


def detect_pi_generation(kinds: Sequence[str], entry_at: Callable[[int], TranscriptEntry]) -> PiGeneration:
    """
    ``"1.6"`` when the file holds what only pi 1.6 writes: a ``usage`` or ``context_edit`` entry, a
    system message entry among its first messages, or a compaction with a ``systemMessage``; else
    ``"0.73"`` (also for an empty file).

    Args:
        kinds: The entries' ``type`` strings in file order.
        entry_at: Decodes the entry at a position (only the few inspected entries are decoded).
    """
    if any(kind in kinds for kind in _PI16_KINDS):
        return "1.6"
    seen = 0
    for pos, kind in enumerate(kinds):
        if kind != "message":
            continue
        if is_system_entry(entry_at(pos)):
            return "1.6"
        seen += 1
        if seen >= _HEAD_MESSAGES:
            break
    for pos in range(len(kinds) - 1, -1, -1):
        if kinds[pos] == "compaction":
            entry = entry_at(pos)
            return "1.6" if isinstance(entry, CompactionEntry) and entry.system_message else "0.73"
    return "0.73"
