"""
Entry records of pi session transcripts, version 3 (pi-format spec §3-5).

Each line of a transcript is the header (:class:`SessionHeader`) or one entry. Entries are frozen
``msgspec.Struct`` records tagged on ``type`` with pi's field order; optional fields default to
``msgspec.UNSET`` and are then absent from the JSON. Entry types this library does not know are kept
as :class:`UnknownEntry` (their JSON object, unchanged), so they still link the tree and survive a
rewrite (spec §5.10).
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

from sessionkeeper.transcript._messages import AgentMessage, UserContent


__all__ = (
    "CURRENT_SESSION_VERSION",
    "BranchSummaryEntry",
    "CompactionEntry",
    "CustomEntry",
    "CustomMessageEntry",
    "LabelEntry",
    "MessageEntry",
    "ModelChangeEntry",
    "SessionHeader",
    "SessionInfoEntry",
    "ThinkingLevel",
    "ThinkingLevelChangeEntry",
    "TranscriptEntry",
    "UnknownEntry",
)

CURRENT_SESSION_VERSION = 3
"""The transcript format version this library writes (pi-format spec §5.11)."""

ThinkingLevel: TypeAlias = Literal["off", "minimal", "low", "medium", "high", "xhigh"]


class _Record(
    msgspec.Struct, frozen=True, kw_only=True, rename="camel", tag_field="type", forbid_unknown_fields=True
):
    """
    Base of all transcript lines: tagged on ``type``.

    Unknown fields are refused when decoding, so such a line is kept as an :class:`UnknownEntry`
    (lossless) instead of losing them.
    """


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
        from_hook: ``True`` when a hook/extension supplied the result; absent means ``False``.
    """

    id: str
    parent_id: str | None
    timestamp: str
    summary: str
    first_kept_entry_id: str
    tokens_before: int | float
    details: Any | UnsetType = UNSET
    from_hook: bool | UnsetType = UNSET


class BranchSummaryEntry(_Record, tag="branch_summary", frozen=True, kw_only=True):
    """
    A summary of a branch the conversation came back from (spec §5.5).

    Attributes:
        from_id: The navigation target (same as ``parent_id``), or ``"root"``.
        summary: The summary; an empty one adds nothing to the context.
        details: ``{"readFiles", "modifiedFiles"}`` or extension data.
        from_hook: ``True`` when an extension supplied the summary.
    """

    id: str
    parent_id: str | None
    timestamp: str
    from_id: str
    summary: str
    details: Any | UnsetType = UNSET
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


class UnknownEntry:
    """
    An entry whose ``type`` is unknown, or whose fields do not fit its type's record (spec §5.10).

    Kept as the decoded JSON object and written back unchanged. It links the tree like any entry and
    adds nothing to the model context.

    Attributes:
        raw: The JSON object as decoded.
    """

    __slots__ = ("raw",)

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw

    @property
    def type(self) -> str:
        """The ``type`` value (``""`` when absent or not a string)."""
        value = self.raw.get("type")
        return value if isinstance(value, str) else ""

    @property
    def id(self) -> str:
        """The ``id`` value (``""`` when absent or not a string)."""
        value = self.raw.get("id")
        return value if isinstance(value, str) else ""

    @property
    def parent_id(self) -> str | None:
        """The ``parentId`` value, ``None`` when absent or not a string."""
        value = self.raw.get("parentId")
        return value if isinstance(value, str) else None

    @property
    def timestamp(self) -> str:
        """The ``timestamp`` value (``""`` when absent or not a string)."""
        value = self.raw.get("timestamp")
        return value if isinstance(value, str) else ""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnknownEntry) and other.raw == self.raw

    def __hash__(self) -> int:  # pragma: no cover - raw dicts are unhashable by design
        raise TypeError("UnknownEntry is unhashable")

    def __repr__(self) -> str:
        return f"UnknownEntry({self.raw!r})"


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
    | UnknownEntry
)
"""Any non-header line of a transcript."""
