"""
Entry records of pi session transcripts, version 3 (pi-format spec §3-5).

Each line of a transcript is the header (:class:`SessionHeader`) or one entry. Entries are frozen
``msgspec.Struct`` records tagged on ``type`` with pi's field order; optional fields default to
``msgspec.UNSET`` and are then absent from the JSON. Entry types this library does not know are kept
as :class:`UnknownEntry` (their JSON object, unchanged), so they still link the tree and survive a
rewrite (spec §5.10).
"""

from __future__ import annotations

import math
from typing import Any, Literal, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

from sessionkeeper.records._jscompat import js_json_stringify
from sessionkeeper.records._messages import (
    AgentMessage,
    ContentBlock,
    SystemMessage,
    Usage,
    UserContent,
    _RawJsonRecord,
)


__all__ = (
    "CURRENT_SESSION_VERSION",
    "BooleanId",
    "BranchSummaryEntry",
    "CompactionEntry",
    "ContextEditEntry",
    "ContextEditReplacement",
    "CustomEntry",
    "CustomMessageEntry",
    "LabelEntry",
    "MessageEntry",
    "ModelChangeEntry",
    "NonStringId",
    "NumberId",
    "SessionHeader",
    "SessionInfoEntry",
    "ThinkingLevel",
    "ThinkingLevelChangeEntry",
    "TranscriptEntry",
    "UnknownEntry",
    "UsageEntry",
    "entry_key",
    "key_to_json",
)

CURRENT_SESSION_VERSION = 3
"""The transcript format version this library writes (pi-format spec §5.11)."""

ThinkingLevel: TypeAlias = Literal["off", "minimal", "low", "medium", "high", "xhigh"]


# --------------------------------------------------------------------------- entry ids as pi keys them


class NonStringId(str):
    """
    A JSON number or boolean found where pi expects an entry id (``id``, ``parentId``, ``targetId``,
    ``firstKeptEntryId``) in a hand-edited or foreign file, as an index key with pi's semantics.

    pi indexes entries in a JavaScript ``Map`` keyed by the raw JSON values, so the number ``1`` and
    the string ``"1"`` are different ids, and its path walk follows a ``parentId`` only when it is
    truthy. A ``NonStringId`` is a ``str`` (its text is the value as JavaScript prints it: ``"1"``,
    ``"2.5"``, ``"true"``) so it flows through every ``str``-typed id in this library, but it never
    equals a plain string (nor an id of the other subclass), and its truth value is JavaScript's
    (``0`` and ``false`` are falsy). :func:`key_to_json` gives the JSON value back. Build them
    with :func:`entry_key`.
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((type(self).__name__, str(self)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self!s})"


class NumberId(NonStringId):
    """A JSON number id (``1``, ``1.0`` and ``1e0`` are one key, as in JavaScript); falsy when ``0``."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return float(self) != 0

    def to_json(self) -> int | float:
        """The number: an ``int`` when integral, else a ``float``."""
        value = float(self)
        return int(value) if value.is_integer() else value


class BooleanId(NonStringId):
    """A JSON boolean id (``"true"`` or ``"false"``); falsy when ``false``."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return str.__eq__(self, "true")

    def to_json(self) -> bool:
        """``True`` or ``False``."""
        return str.__eq__(self, "true")


def entry_key(value: Any) -> str | None:
    """
    The index key pi's ``byId`` map would use for a raw JSON id value (pi-format spec §4).

    A string is its own key; a number becomes a :class:`NumberId` holding the value JavaScript reads
    (``JSON.parse`` gives doubles: ``9007199254740993`` reads as ``9007199254740992``, ``-0`` as ``0``);
    a boolean becomes a :class:`BooleanId`. ``None`` for ``null``, a missing value, objects and arrays
    (such entries are kept in file order but are not part of the tree).

    Example: ``entry_key(1) == entry_key(1.0)``, ``entry_key(1) != "1"``, ``bool(entry_key(0)) is False``.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return BooleanId("true" if value else "false")
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # an integer literal beyond any double: JavaScript reads Infinity
            return None
        if math.isnan(number) or math.isinf(number):
            return None
        return NumberId(js_json_stringify(number))
    return None


def key_to_json(key: str | None) -> str | int | float | bool | None:
    """The JSON value of an index key (the inverse of :func:`entry_key` for the values it accepts)."""
    if isinstance(key, NumberId | BooleanId):
        return key.to_json()
    return key


class _Record(
    msgspec.Struct, frozen=True, kw_only=True, rename="camel", tag_field="type", forbid_unknown_fields=True
):
    """
    Base of all transcript lines: tagged on ``type``.

    Unknown fields are refused when decoding, so such a line is kept as an :class:`UnknownEntry`
    (lossless) instead of losing them.
    """

    @property
    def type(self) -> str:
        """The wire ``type`` (``"session"``, ``"message"``, ``"compaction"``, ...); read-only (issue 11)."""
        return self.__struct_config__.tag  # type: ignore[return-value]


class SessionHeader(_Record, tag="session", frozen=True, kw_only=True):
    """
    The first line of a transcript (spec §3). Not part of the entry tree.

    Attributes:
        version: Format version; absent means 1. This library writes 3.
        id: Session id (pi 0.73.1 writes a UUIDv7).
        timestamp: ISO-8601 UTC with milliseconds and ``Z``.
        cwd: Working directory the session belongs to.
        parent_session: Path of the transcript this one was forked or cloned from.
    """

    version: int | UnsetType = UNSET
    id: str
    timestamp: str
    cwd: str | UnsetType = UNSET
    parent_session: str | UnsetType = UNSET


class MessageEntry(_Record, tag="message", frozen=True, kw_only=True):
    """
    One conversation message (spec §5.1).

    Attributes:
        id: 8 lowercase hex chars, unique in the file.
        parent_id: Parent entry id; ``None`` for a root.
        timestamp: ISO-8601 UTC with ms, when the entry was appended.
        message: The message (user, assistant, tool result, bash execution, ...).
    """

    id: str
    parent_id: str | None
    timestamp: str
    message: AgentMessage


class ThinkingLevelChangeEntry(_Record, tag="thinking_level_change", frozen=True, kw_only=True):
    """
    The session's thinking level changed (spec §5.2).

    Attributes:
        thinking_level: ``off | minimal | low | medium | high | xhigh`` (not validated on read).
    """

    id: str
    parent_id: str | None
    timestamp: str
    thinking_level: ThinkingLevel | str


class ModelChangeEntry(_Record, tag="model_change", frozen=True, kw_only=True):
    """
    The session's model changed (spec §5.3).

    Attributes:
        provider: Provider id, e.g. ``"anthropic"``.
        model_id: Model id, e.g. ``"claude-sonnet-4-5"``.
    """

    id: str
    parent_id: str | None
    timestamp: str
    provider: str
    model_id: str


class CompactionEntry(_Record, tag="compaction", frozen=True, kw_only=True):
    """
    A persistent summary of everything on the path before ``first_kept_entry_id`` (spec §5.4).

    Attributes:
        summary: The summary text.
        first_kept_entry_id: First entry (on the same path, before this one) kept verbatim.
        tokens_before: Estimated context tokens before the compaction (informational).
        details: pi writes ``{"readFiles": [...], "modifiedFiles": [...]}``; extensions anything.
        usage: Usage of the summariser call(s) (pi 1.6), when known.
        from_hook: ``True`` when a hook/extension supplied the result; absent means ``False``.
        system_message: The complete prompt and tool state at this boundary (pi 1.6): pi 1.6's context
            puts it before the summary. Re-encoded with a system message entry's key order (decision
            PI16-ORDER: pi writes ``timestamp`` last here; the JSON value is the same).

    A *retain-none* compaction (pi 1.6 ``appendCompaction(summary, null, ...)``) has
    ``first_kept_entry_id`` equal to its own ``id``: nothing before it is kept.
    """

    id: str
    parent_id: str | None
    timestamp: str
    summary: str
    first_kept_entry_id: str
    tokens_before: int | float
    details: Any | UnsetType = UNSET
    usage: Usage | UnsetType = UNSET
    from_hook: bool | UnsetType = UNSET
    system_message: SystemMessage | UnsetType = UNSET

    @property
    def retains_none(self) -> bool:
        """``True`` for a retain-none compaction (``first_kept_entry_id`` is this entry's own id)."""
        return self.first_kept_entry_id == self.id


class BranchSummaryEntry(_Record, tag="branch_summary", frozen=True, kw_only=True):
    """
    A summary of a branch the conversation came back from (spec §5.5).

    Attributes:
        from_id: pi 0.73.1: the navigation target (same as ``parent_id``), or ``"root"``. pi 1.6: the
            *abandoned leaf* (the entry the user navigated away from), ``"root"`` only when there was
            none. Both are passed through to the context unchanged; only the meaning differs.
        summary: The summary; an empty one adds nothing to the context.
        details: ``{"readFiles", "modifiedFiles"}`` or extension data.
        usage: Usage of the summariser call (pi 1.6), when known.
        from_hook: ``True`` when an extension supplied the summary.
    """

    id: str
    parent_id: str | None
    timestamp: str
    from_id: str
    summary: str
    details: Any | UnsetType = UNSET
    usage: Usage | UnsetType = UNSET
    from_hook: bool | UnsetType = UNSET


class CustomEntry(_Record, tag="custom", frozen=True, kw_only=True):
    """
    Extension state, never part of the model context (spec §5.6).

    The id fields come after the payload in this type, as pi writes them.

    Attributes:
        custom_type: The extension's identifier.
        data: Any JSON.
    """

    custom_type: str
    data: Any | UnsetType = UNSET
    id: str
    parent_id: str | None
    timestamp: str


class CustomMessageEntry(_Record, tag="custom_message", frozen=True, kw_only=True):
    """
    An extension-injected message that IS sent to the model, as a user message (spec §5.7).

    Attributes:
        custom_type: The extension's identifier.
        content: String or text/image blocks.
        display: UI hint: ``False`` = hidden (still sent to the model).
        details: Extension metadata, never sent.
    """

    custom_type: str
    content: str | list[UserContent]
    display: bool
    details: Any | UnsetType = UNSET
    id: str
    parent_id: str | None
    timestamp: str


class LabelEntry(_Record, tag="label", frozen=True, kw_only=True):
    """
    Sets (non-empty ``label``) or clears (absent/empty) the bookmark of ``target_id`` (spec §5.8).

    Labels are session-global: resolved in file order, last write wins.
    """

    id: str
    parent_id: str | None
    timestamp: str
    target_id: str
    label: str | UnsetType = UNSET


class SessionInfoEntry(_Record, tag="session_info", frozen=True, kw_only=True):
    """
    The session's display name (spec §5.9); the latest one in file order wins, empty clears it.
    """

    id: str
    parent_id: str | None
    timestamp: str
    name: str | UnsetType = UNSET


class UsageEntry(_Record, tag="usage", frozen=True, kw_only=True):
    """
    Usage billed outside a reply, e.g. a cache keep-alive (pi 1.6 ``appendUsage``). Adds no message.

    Attributes:
        kind: Free-form category, e.g. ``"cache_warm"``.
        provider: Provider id.
        model: Model id.
        usage: The tokens and cost.
        note: Optional human-readable qualifier.
    """

    id: str
    parent_id: str | None
    timestamp: str
    kind: str
    provider: str
    model: str
    usage: Usage
    note: str | UnsetType = UNSET


class ContextEditReplacement(
    msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True
):
    """
    New content for a context edit's target (pi 1.6 ``{content}``): replaces only the content.

    Attributes:
        content: A string (pi 1.6 turns it into one text block on assistant and tool-result
            messages) or content blocks.
    """

    content: str | list[ContentBlock]


class ContextEditEntry(_Record, tag="context_edit", frozen=True, kw_only=True):
    """
    An append-only change to an earlier entry's contribution to the context (pi 1.6).

    On a branch, the latest edit of a target among the context entries wins. ``replacement=None``
    omits the target from the context; a replacement swaps the ``content`` of a user, assistant,
    tool-result or custom message and leaves every other field as stored.

    Attributes:
        target_id: Id of the edited entry.
        replacement: The new content, or ``None`` to omit the target.
    """

    id: str
    parent_id: str | None
    timestamp: str
    target_id: str
    replacement: ContextEditReplacement | None


class UnknownEntry(_RawJsonRecord):
    """
    An entry whose ``type`` is unknown, or whose fields do not fit its type's record (spec §5.10).

    Kept as the decoded JSON object and written back unchanged. It links the tree like any entry and
    adds nothing to the model context.

    Attributes:
        raw: The JSON object as decoded.
    """

    __slots__ = ()

    @property
    def type(self) -> str:
        """The ``type`` value (``""`` when absent or not a string)."""
        value = self.raw.get("type")
        return value if isinstance(value, str) else ""

    @property
    def id(self) -> str:
        """
        The ``id`` as an index key (:func:`entry_key`: a number or boolean id is a :class:`NonStringId`);
        ``""`` when absent, ``null``, an object or an array.
        """
        key = entry_key(self.raw.get("id"))
        return key if key is not None else ""

    @property
    def parent_id(self) -> str | None:
        """The ``parentId`` as an index key (:func:`entry_key`); ``None`` when absent, ``null`` or neither
        a string, a number nor a boolean."""
        return entry_key(self.raw.get("parentId"))

    @property
    def timestamp(self) -> str:
        """The ``timestamp`` value (``""`` when absent or not a string)."""
        value = self.raw.get("timestamp")
        return value if isinstance(value, str) else ""


TranscriptEntry: TypeAlias = (
    MessageEntry
    | ThinkingLevelChangeEntry
    | ModelChangeEntry
    | CompactionEntry
    | BranchSummaryEntry
    | CustomEntry
    | CustomMessageEntry
    | LabelEntry
    | SessionInfoEntry
    | UsageEntry
    | ContextEditEntry
    | UnknownEntry
)
"""Any non-header line of a transcript."""
