"""
Context reconstruction: the messages, thinking level and model of one leaf (pi-format spec §9).

:func:`build_session_context` is pi 0.73.1's ``buildSessionContext`` (DESIGN decision 1: exact, nothing
added or dropped), with one safety difference: a ``parentId`` cycle ends the path walk at the first
entry that would repeat (pi would loop forever). Entries of a known type with an unexpected shape
(:class:`UnknownEntry`) are interpreted from their JSON the way pi's untyped code reads them; ids,
parent ids and ``firstKeptEntryId`` that are JSON numbers or booleans compare as pi's ``===`` and ``Map``
do (:func:`entry_key`: ``1`` is not ``"1"``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
from msgspec import UNSET, UnsetType

from sessionkeeper.records import (
    AgentMessage,
    AssistantMessage,
    BranchSummaryEntry,
    BranchSummaryMessage,
    CompactionEntry,
    CompactionSummaryMessage,
    CustomMessage,
    CustomMessageEntry,
    MessageEntry,
    ModelChangeEntry,
    ThinkingLevelChangeEntry,
    TranscriptEntry,
    UnknownEntry,
    UnknownMessage,
    entry_key,
    js_date_ms,
    message_from_json,
    message_to_builtins,
    parse_iso_ms,
)


__all__ = (
    "ModelRef",
    "SessionContext",
    "build_context_from_path",
    "build_context_lazily",
    "build_session_context",
    "entry_kind",
    "entry_model",
    "entry_thinking_level",
    "walk_path",
)


@attrs.frozen(kw_only=True)
class ModelRef:
    """
    The model a context was last produced with (pi's ``{provider, modelId}``).

    Attributes:
        provider: Provider id, e.g. ``"anthropic"``.
        model_id: Model id, e.g. ``"claude-sonnet-4-5"``.
    """

    provider: str
    model_id: str

    def to_json(self) -> dict[str, str]:
        """Return ``{"provider": ..., "modelId": ...}``."""
        return {"provider": self.provider, "modelId": self.model_id}


@attrs.frozen(kw_only=True)
class SessionContext:
    """
    What the model sees for one leaf: pi's ``SessionContext`` (spec §9), nothing added or dropped.

    Attributes:
        messages: The rebuilt messages, root first (compaction summary first when there is one).
        thinking_level: The last ``thinking_level_change`` on the path, ``"off"`` without one.
        model: The last ``model_change`` or assistant message's model on the path, or ``None``.
    """

    messages: tuple[AgentMessage, ...] = ()
    thinking_level: str = "off"
    model: ModelRef | None = None

    def to_json(self) -> dict[str, Any]:
        """
        Return pi's exact JSON shape as plain values:
        ``{"messages": [...], "thinkingLevel": str, "model": {"provider", "modelId"} | None}``.
        """
        return {
            "messages": [message_to_builtins(m) for m in self.messages],
            "thinkingLevel": self.thinking_level,
            "model": self.model.to_json() if self.model is not None else None,
        }


EMPTY_CONTEXT = SessionContext()


def walk_path(leaf: TranscriptEntry, by_id: Mapping[str, TranscriptEntry]) -> list[TranscriptEntry]:
    """
    Return the path from a root to ``leaf`` (root first) by following ``parentId`` links.

    The walk stops at a ``None``/empty/missing parent, or a falsy one as JavaScript sees it (the number
    ``0``, ``false``: see :class:`NonStringId`), as pi's ``current.parentId ? ... : undefined`` does
    (spec §9 item 2). Cycle guard (deviation from
    pi, which loops forever): when the next parent is an entry already on the path, the walk stops and
    the current entry is treated as the root.
    """
    path = [leaf]
    seen = {id(leaf)}
    current = leaf
    while True:
        parent_id = current.parent_id
        if not parent_id:
            break
        parent = by_id.get(parent_id)
        if parent is None or id(parent) in seen:
            break
        seen.add(id(parent))
        path.append(parent)
        current = parent
    path.reverse()
    return path


def entry_kind(entry: TranscriptEntry) -> str:
    """The entry's ``type`` string (``""`` for an unknown entry without a string type)."""
    if isinstance(entry, UnknownEntry):
        return entry.type
    return type(entry).__struct_config__.tag  # type: ignore[return-value]


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _raw_model(raw: Any) -> ModelRef | None:
    if not isinstance(raw, dict):
        return None
    provider, model = _str(raw.get("provider")), _str(raw.get("model"))
    if provider is None or model is None:
        return None
    return ModelRef(provider=provider, model_id=model)


def _compaction_message(entry: TranscriptEntry) -> AgentMessage:
    if isinstance(entry, CompactionEntry):
        return CompactionSummaryMessage(
            summary=entry.summary,
            tokens_before=entry.tokens_before,
            timestamp=parse_iso_ms(entry.timestamp),
        )
    raw = entry.raw if isinstance(entry, UnknownEntry) else {}
    synthesized: dict[str, Any] = {"role": "compactionSummary"}
    for key in ("summary", "tokensBefore"):
        if key in raw:
            synthesized[key] = raw[key]
    synthesized["timestamp"] = js_date_ms(raw.get("timestamp", ""))
    return message_from_json(synthesized)


def _entry_message(entry: TranscriptEntry) -> AgentMessage | None:
    """pi's ``appendMessage`` mapping (spec §9 item 4); ``None`` = the entry adds nothing."""
    if isinstance(entry, MessageEntry):
        return entry.message
    if isinstance(entry, CustomMessageEntry):
        return CustomMessage(
            custom_type=entry.custom_type,
            content=entry.content,
            display=entry.display,
            details=entry.details,
            timestamp=parse_iso_ms(entry.timestamp),
        )
    if isinstance(entry, BranchSummaryEntry):
        if not entry.summary:
            return None
        return BranchSummaryMessage(
            summary=entry.summary, from_id=entry.from_id, timestamp=parse_iso_ms(entry.timestamp)
        )
    if not isinstance(entry, UnknownEntry):
        return None
    raw = entry.raw
    kind = entry.type
    if kind == "message":
        message = raw.get("message")
        return message_from_json(message) if isinstance(message, dict) else None
    if kind == "custom_message":
        synthesized: dict[str, Any] = {"role": "custom"}
        for key in ("customType", "content", "display", "details"):
            if key in raw:
                synthesized[key] = raw[key]
        synthesized["timestamp"] = js_date_ms(raw.get("timestamp", ""))
        return message_from_json(synthesized)
    if kind == "branch_summary" and raw.get("summary"):
        synthesized = {"role": "branchSummary", "summary": raw["summary"]}
        if "fromId" in raw:
            synthesized["fromId"] = raw["fromId"]
        synthesized["timestamp"] = js_date_ms(raw.get("timestamp", ""))
        return message_from_json(synthesized)
    return None


_MESSAGE_KINDS = frozenset({"message", "custom_message", "branch_summary"})


def entry_thinking_level(entry: TranscriptEntry) -> str | None:
    """The thinking level a path entry sets (spec §9 item 3), or ``None``."""
    if isinstance(entry, ThinkingLevelChangeEntry):
        return entry.thinking_level
    if isinstance(entry, UnknownEntry):
        return _str(entry.raw.get("thinkingLevel"))
    return None


def entry_model(entry: TranscriptEntry) -> ModelRef | None:
    """The model a path entry sets (``model_change`` or an assistant message, spec §9 item 3), or ``None``."""
    if isinstance(entry, MessageEntry):
        message = entry.message
        if isinstance(message, AssistantMessage):
            return ModelRef(provider=message.provider, model_id=message.model)
        if isinstance(message, UnknownMessage) and message.raw.get("role") == "assistant":
            return _raw_model(message.raw)
        return None
    if isinstance(entry, ModelChangeEntry):
        return ModelRef(provider=entry.provider, model_id=entry.model_id)
    if isinstance(entry, UnknownEntry):
        raw = entry.raw
        if entry.type == "model_change":
            provider, model_id = _str(raw.get("provider")), _str(raw.get("modelId"))
            if provider is not None and model_id is not None:
                return ModelRef(provider=provider, model_id=model_id)
        elif entry.type == "message":
            inner = raw.get("message")
            if isinstance(inner, dict) and inner.get("role") == "assistant":
                return _raw_model(inner)
    return None


def _last_index(values: list[str], value: str, stop: int) -> int:
    """Index of the last ``value`` in ``values[:stop]`` (C-speed), or -1."""
    try:
        return stop - 1 - values[stop - 1 :: -1].index(value) if stop > 0 else -1
    except ValueError:
        return -1


def build_context_lazily(
    *,
    kinds: list[str],
    ids: list[str | None],
    entry_at: Callable[[int], TranscriptEntry],
) -> SessionContext:
    """
    :func:`build_context_from_path` over a path given as its ``type`` and ``id`` lists (root = index 0)
    plus an accessor decoding one path entry: only the entries the result depends on are decoded.

    The thinking level and model are the *last* usable values on the path, so they are searched from
    the end; only entries that can produce a message are decoded in the emitted ranges. The result
    equals pi's forward scan of the whole path (spec §9 items 3-7).
    """
    count = len(kinds)
    thinking_level = "off"
    at = count
    while (at := _last_index(kinds, "thinking_level_change", at)) >= 0:
        value = entry_thinking_level(entry_at(at))
        if value is not None:
            thinking_level = value
            break
    model: ModelRef | None = None
    for i in range(count - 1, -1, -1):
        if kinds[i] in ("model_change", "message"):
            found_model = entry_model(entry_at(i))
            if found_model is not None:
                model = found_model
                break
    compaction_at = _last_index(kinds, "compaction", count)

    messages: list[AgentMessage] = []

    def emit(start: int, stop: int) -> None:
        for i in range(start, stop):
            if kinds[i] in _MESSAGE_KINDS:
                item = _entry_message(entry_at(i))
                if item is not None:
                    messages.append(item)

    if compaction_at < 0:
        emit(0, count)
        return SessionContext(messages=tuple(messages), thinking_level=thinking_level, model=model)

    compaction = entry_at(compaction_at)
    messages.append(_compaction_message(compaction))
    compaction_id = ids[compaction_at]
    # pi: the first path entry of type compaction with that id (ids are unique on a path built through
    # the id index, so this is normally ``compaction_at`` itself)
    first_index = ids.index(compaction_id)
    while kinds[first_index] != "compaction" or ids[first_index] != compaction_id:
        first_index = ids.index(compaction_id, first_index + 1)
    if isinstance(compaction, CompactionEntry):
        first_kept: Any = compaction.first_kept_entry_id
    else:
        raw_kept = compaction.raw.get("firstKeptEntryId") if isinstance(compaction, UnknownEntry) else None
        first_kept = entry_key(raw_kept)  # compared as pi's ===: the number 3 is not the string "3"
    if first_kept is not None:
        try:
            kept_from = ids.index(first_kept, 0, first_index)
        except ValueError:
            kept_from = first_index
        emit(kept_from, first_index)
    emit(first_index + 1, count)
    return SessionContext(messages=tuple(messages), thinking_level=thinking_level, model=model)


def build_context_from_path(path: Sequence[TranscriptEntry]) -> SessionContext:
    """
    Rebuild the context from a path (root first, leaf last): spec §9 items 3-7.

    Thinking level and model are scanned over the whole path (last wins); the last compaction on the
    path emits its summary first, then the kept entries from its ``first_kept_entry_id`` (if that id
    is on the path before it; otherwise none), then every entry after it.
    """
    return build_context_lazily(
        kinds=[entry_kind(entry) for entry in path],
        ids=[entry.id for entry in path],
        entry_at=path.__getitem__,
    )


def build_session_context(
    entries: Sequence[TranscriptEntry],
    *,
    leaf_id: str | UnsetType | None = UNSET,
    by_id: Mapping[str, TranscriptEntry] | None = None,
) -> SessionContext:
    """
    Rebuild the model context for a leaf exactly as pi's ``buildSessionContext`` (spec §9).

    Args:
        entries: All entries in file order (the header excluded).
        leaf_id: ``None`` -> the empty context (navigated to before the first entry). A known id ->
            that entry. ``UNSET`` (default), ``""`` or an id that is not present -> the last entry of
            ``entries``.
        by_id: Id index (later duplicates win); built from ``entries`` when ``None``.

    Returns:
        The :class:`SessionContext`; empty (``"off"``, no model) when there are no entries.
    """
    if leaf_id is None:
        return EMPTY_CONTEXT
    if by_id is None:
        by_id = {entry.id: entry for entry in entries}
    leaf = by_id.get(leaf_id) if isinstance(leaf_id, str) and leaf_id else None
    if leaf is None:
        if not entries:
            return EMPTY_CONTEXT
        leaf = entries[-1]
    return build_context_from_path(walk_path(leaf, by_id))
