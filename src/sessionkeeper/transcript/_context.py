"""
Context reconstruction: the messages, thinking level and model of one leaf (pi-format spec §9).

:func:`build_session_context` is pi's ``buildSessionContext`` (DESIGN decision 1: exact, nothing added
or dropped), equal to pi 1.6.0's on the files pi 1.6 writes and to pi 0.73.1's on the files 0.73.1
writes (the two agree there; docs/pi16.md). pi 1.6.0 builds it as a projection: the context entries
(the path; or the newest compaction, its kept range minus ``role: "system"`` message entries, and what
follows it), the ``context_edit`` entries among them applied (the latest edit of a target wins: omit
or replace the content), a compaction contributing ``[systemMessage?, compactionSummary]``, and
``null`` message content projected as ``[]`` (``""`` for system messages).

One safety difference: a ``parentId`` cycle ends the path walk at the first entry that would repeat
(pi would loop forever). Entries of a known type with an unexpected shape (:class:`UnknownEntry`) are
interpreted from their JSON the way pi's untyped code reads them; ids, parent ids, ``targetId`` and
``firstKeptEntryId`` that are JSON numbers or booleans compare as pi's ``===`` and ``Map`` do
(:func:`entry_key`: ``1`` is not ``"1"``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs
import msgspec
from msgspec import UNSET, UnsetType

from sessionkeeper.records import (
    AgentMessage,
    AssistantMessage,
    BranchSummaryEntry,
    BranchSummaryMessage,
    CompactionEntry,
    CompactionSummaryMessage,
    ContextEditEntry,
    CustomMessage,
    CustomMessageEntry,
    MessageEntry,
    ModelChangeEntry,
    SystemMessage,
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
    "ProjectedEntry",
    "SessionContext",
    "build_context_from_path",
    "build_context_lazily",
    "build_session_context",
    "entry_kind",
    "entry_model",
    "entry_thinking_level",
    "project_path",
    "typed_entry_message",
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


def _compaction_messages(entry: TranscriptEntry) -> list[AgentMessage]:
    """pi 1.6: ``[systemMessage?, compactionSummary]`` (pi 0.73.1 files carry no ``systemMessage``)."""
    if isinstance(entry, CompactionEntry):
        summary = CompactionSummaryMessage(
            summary=entry.summary,
            tokens_before=entry.tokens_before,
            timestamp=parse_iso_ms(entry.timestamp),
        )
        if isinstance(entry.system_message, SystemMessage):
            return [entry.system_message, summary]
        return [summary]
    raw = entry.raw if isinstance(entry, UnknownEntry) else {}
    synthesized: dict[str, Any] = {"role": "compactionSummary"}
    for key in ("summary", "tokensBefore"):
        if key in raw:
            synthesized[key] = raw[key]
    synthesized["timestamp"] = js_date_ms(raw.get("timestamp", ""))
    system = raw.get("systemMessage")
    if isinstance(system, dict):
        return [message_from_json(system), message_from_json(synthesized)]
    return [message_from_json(synthesized)]


_EMPTY_CONTENT_ROLES = frozenset({"user", "assistant", "toolResult"})


def _with_content(message: AgentMessage) -> AgentMessage:
    """pi 1.6 (decision PI16-NULL): a message stored with ``null`` / missing content is projected with
    ``""`` (system) or ``[]`` (user, assistant, tool result); typed records always have content."""
    if isinstance(message, SystemMessage):
        return message if message.content is not None else msgspec.structs.replace(message, content="")
    if isinstance(message, UnknownMessage) and message.raw.get("content") is None:
        role = message.raw.get("role")
        if role == "system":
            return message_from_json({**message.raw, "content": ""})
        if role in _EMPTY_CONTENT_ROLES:
            return message_from_json({**message.raw, "content": []})
    return message


def typed_entry_message(
    entry: CustomMessageEntry | BranchSummaryEntry,
) -> CustomMessage | BranchSummaryMessage:
    """
    The message a typed ``custom_message`` or ``branch_summary`` entry stands for (pi's
    ``createCustomMessage`` / ``createBranchSummaryMessage``): its fields, the ISO ``timestamp`` as ms since
    the epoch. The context rebuild skips an empty branch summary; the summariser's input keeps it
    (``compaction`` ``entry_message``), so the callers decide.
    """
    if isinstance(entry, CustomMessageEntry):
        return CustomMessage(
            custom_type=entry.custom_type,
            content=entry.content,
            display=entry.display,
            details=entry.details,
            timestamp=parse_iso_ms(entry.timestamp),
        )
    return BranchSummaryMessage(
        summary=entry.summary, from_id=entry.from_id, timestamp=parse_iso_ms(entry.timestamp)
    )


def _entry_message(entry: TranscriptEntry) -> AgentMessage | None:
    """pi's ``sessionEntryToContextMessages`` for a non-compaction entry (spec §9 item 4); ``None`` = the
    entry adds nothing."""
    if isinstance(entry, MessageEntry):
        return _with_content(entry.message)
    if isinstance(entry, CustomMessageEntry):
        return typed_entry_message(entry)
    if isinstance(entry, BranchSummaryEntry):
        return typed_entry_message(entry) if entry.summary else None
    if not isinstance(entry, UnknownEntry):
        return None
    raw = entry.raw
    kind = entry.type
    if kind == "message":
        message = raw.get("message")
        return _with_content(message_from_json(message)) if isinstance(message, dict) else None
    if kind == "custom_message":
        synthesized: dict[str, Any] = {"role": "custom"}
        for key in ("customType", "content", "display", "details"):
            if key in raw:
                synthesized[key] = raw[key]
        if synthesized.get("content") is None:  # pi 1.6: ``entry.content ?? []`` (PI16-NULL)
            synthesized["content"] = []
        synthesized["timestamp"] = js_date_ms(raw.get("timestamp", ""))
        return message_from_json(synthesized)
    if kind == "branch_summary" and raw.get("summary"):
        synthesized = {"role": "branchSummary", "summary": raw["summary"]}
        if "fromId" in raw:
            synthesized["fromId"] = raw["fromId"]
        synthesized["timestamp"] = js_date_ms(raw.get("timestamp", ""))
        return message_from_json(synthesized)
    return None


def is_system_entry(entry: TranscriptEntry) -> bool:
    """A ``message`` entry with ``role: "system"`` (pi 1.6 drops them inside a compaction's kept range)."""
    if isinstance(entry, MessageEntry):
        message = entry.message
        return isinstance(message, SystemMessage) or (
            isinstance(message, UnknownMessage) and message.raw.get("role") == "system"
        )
    if isinstance(entry, UnknownEntry) and entry.type == "message":
        inner = entry.raw.get("message")
        return isinstance(inner, dict) and inner.get("role") == "system"
    return False


EDITABLE_ROLES: Final = frozenset({"user", "assistant", "toolResult", "custom"})
"""Roles whose ``content`` a pi 1.6 context edit replaces (``custom`` = a ``custom_message`` entry)."""
TEXT_BLOCK_ROLES: Final = frozenset({"assistant", "toolResult"})
"""Roles where a string replacement becomes one text block (pi 1.6)."""
_OMIT: Final = object()


def _edit_of(entry: TranscriptEntry) -> tuple[str | None, Any]:
    """``(targetId key, replacement)`` of a ``context_edit`` entry: the replacement is ``None`` (omit),
    its ``content`` value, or ``_OMIT`` when the replacement has no ``content`` (pi writes ``undefined``)."""
    if isinstance(entry, ContextEditEntry):
        if entry.replacement is None:
            return entry.target_id, None
        return entry.target_id, [_block_json(b) for b in entry.replacement.content] if isinstance(
            entry.replacement.content, list
        ) else entry.replacement.content
    raw = entry.raw if isinstance(entry, UnknownEntry) else {}
    target = entry_key(raw.get("targetId"))
    replacement = raw.get("replacement")
    if replacement is None:
        return target, None
    if isinstance(replacement, dict) and "content" in replacement:
        return target, replacement["content"]
    return target, _OMIT


def _block_json(block: Any) -> Any:
    return msgspec.to_builtins(block)


def _apply_edit(messages: list[AgentMessage], replacement: Any) -> list[AgentMessage]:
    """pi 1.6 ``projectContextEntry``: ``None`` omits the entry; otherwise the content of user,
    assistant, tool-result and custom messages is replaced (a string becomes one text block on
    assistant and tool-result messages); other messages are kept as they are."""
    if replacement is None:
        return []
    edited: list[AgentMessage] = []
    for message in messages:
        raw = message_to_builtins(message)
        role = raw.get("role") if isinstance(raw, dict) else None
        if role not in EDITABLE_ROLES:
            edited.append(message)
            continue
        updated = dict(raw)
        if replacement is _OMIT:
            updated.pop("content", None)  # ``{...message, content: undefined}``: JSON drops it
        elif role in TEXT_BLOCK_ROLES and isinstance(replacement, str):
            updated["content"] = [{"type": "text", "text": replacement}]
        else:
            updated["content"] = replacement
        edited.append(message_from_json(updated))
    return edited


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
    messages = [m for _, produced in _project(kinds, ids, entry_at) for m in produced]
    return SessionContext(messages=tuple(messages), thinking_level=thinking_level, model=model)


def _project(
    kinds: list[str], ids: list[str | None], entry_at: Callable[[int], TranscriptEntry]
) -> list[tuple[int, list[AgentMessage]]]:
    """pi 1.6 ``buildSessionProjection`` entries as ``(path index, messages)`` pairs, in context order."""
    compaction_at = _last_index(kinds, "compaction", len(kinds))
    selected = _context_indices(kinds, ids, entry_at, compaction_at)

    edits: dict[str | None, Any] = {}
    for i in selected:
        if kinds[i] == "context_edit":
            target, replacement = _edit_of(entry_at(i))
            edits[target] = replacement  # pi 1.6: the latest edit of a target wins

    projected: list[tuple[int, list[AgentMessage]]] = []
    for position, i in enumerate(selected):
        kind = kinds[i]
        if kind == "compaction":
            # only the newest compaction (first context entry) contributes; an older one in the kept range
            # renders nothing (pi 0.73.1 and 1.6)
            produced = _compaction_messages(entry_at(i)) if position == 0 else []
        elif kind in _MESSAGE_KINDS:
            item = _entry_message(entry_at(i))
            produced = [item] if item is not None else []
        else:
            produced = []
        if produced and edits and ids[i] in edits:
            produced = _apply_edit(produced, edits[ids[i]])
        projected.append((i, produced))
    return projected


@attrs.frozen(kw_only=True)
class ProjectedEntry:
    """
    One context entry of pi 1.6.0's session projection and the messages it contributes.

    Attributes:
        entry: The source entry (a compaction first, when the path has one).
        messages: Its messages after context edits; empty for state entries (``usage``, labels,
            ``context_edit`` ...), an entry an edit omits, or an older compaction in the kept range.
        intrinsic: Whether the entry contributes messages *before* edits (pi's
            ``sessionEntryToContextMessages(entry).length > 0``; ``False`` for ``context_edit``).
    """

    entry: TranscriptEntry
    messages: tuple[AgentMessage, ...]
    intrinsic: bool


def project_path(path: Sequence[TranscriptEntry]) -> list[ProjectedEntry]:
    """
    pi 1.6.0's ``buildSessionProjection(path).entries``: the context entries of the path (root first,
    leaf last) with the messages each contributes, in context order. Its messages, flattened, are
    :func:`build_context_from_path`'s. Compaction planning on pi 1.6 files works on this list.
    """
    kinds = [entry_kind(entry) for entry in path]
    ids: list[str | None] = [entry.id for entry in path]
    out: list[ProjectedEntry] = []
    for i, produced in _project(kinds, ids, path.__getitem__):
        entry = path[i]
        kind = kinds[i]
        if kind == "compaction":
            intrinsic = True
        elif kind in _MESSAGE_KINDS:
            intrinsic = _entry_message(entry) is not None
        else:
            intrinsic = False
        out.append(ProjectedEntry(entry=entry, messages=tuple(produced), intrinsic=intrinsic))
    return out


def _context_indices(
    kinds: list[str],
    ids: list[str | None],
    entry_at: Callable[[int], TranscriptEntry],
    compaction_at: int,
) -> list[int]:
    """
    pi 1.6 ``buildContextEntries`` as path indices: the whole path without a compaction; else the newest
    compaction, the path entries from its ``firstKeptEntryId`` up to it minus ``role: "system"`` message
    entries, then everything after it. A retain-none compaction (``firstKeptEntryId`` = its own id)
    keeps nothing before it. pi 0.73.1 selects the same entries (it has no system message entries).
    """
    count = len(kinds)
    if compaction_at < 0:
        return list(range(count))
    compaction = entry_at(compaction_at)
    compaction_id = ids[compaction_at]
    # pi: the first path entry of type compaction with that id (ids are unique on a path built through
    # the id index, so this is normally ``compaction_at`` itself)
    first_index = ids.index(compaction_id)
    while kinds[first_index] != "compaction" or ids[first_index] != compaction_id:
        first_index = ids.index(compaction_id, first_index + 1)
    selected = [compaction_at]
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
        for i in range(kept_from, first_index):
            if kinds[i] == "message" and is_system_entry(entry_at(i)):
                continue
            selected.append(i)
    selected.extend(range(first_index + 1, count))
    return selected


def build_context_from_path(path: Sequence[TranscriptEntry]) -> SessionContext:
    """
    Rebuild the context from a path (root first, leaf last): spec §9 items 3-7, pi 1.6.0's projection.

    Thinking level and model are scanned over the whole path (last wins); the last compaction on the
    path emits its system message (pi 1.6) and summary first, then the kept entries from its
    ``first_kept_entry_id`` (if that id is on the path before it; otherwise none) except system
    message entries, then every entry after it; context edits among those entries are applied.
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
    Rebuild the model context for a leaf exactly as pi's ``buildSessionContext`` (spec §9; pi 1.6.0's
    ``buildSessionProjection`` messages, equal to pi 0.73.1's on the files 0.73.1 writes).

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
