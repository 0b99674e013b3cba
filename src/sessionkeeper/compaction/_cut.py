"""
Cut points: where a compaction stops summarising and starts keeping entries verbatim.

pi 0.73.1 is exact here (DESIGN D1): :func:`find_cut_point` and :func:`find_turn_start_index` give
pi's ``findCutPoint`` / ``findTurnStartIndex`` results on every input (pi spec §13.3), proved against
pi itself by the golden fixtures in ``tests/compaction``. The B05 deviation lives in
:func:`~sessionkeeper.compaction.prepare_compaction`, not here.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from sessionkeeper._tokens import TokenCounter, token_memo
from sessionkeeper.records import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryEntry,
    BranchSummaryMessage,
    CompactionEntry,
    CompactionSummaryMessage,
    ContextEditEntry,
    CustomEntry,
    CustomMessage,
    CustomMessageEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    ToolResultMessage,
    TranscriptEntry,
    UnknownEntry,
    UnknownMessage,
    UsageEntry,
    UserMessage,
)
from sessionkeeper.transcript import message_from_json


__all__ = (
    "CutPoint",
    "entry_kind",
    "find_cut_point",
    "find_turn_start_index",
    "is_cut_point",
    "message_of",
    "message_role",
)

_ROLE: dict[type, str] = {
    UserMessage: "user",
    AssistantMessage: "assistant",
    ToolResultMessage: "toolResult",
    BashExecutionMessage: "bashExecution",
    CustomMessage: "custom",
    BranchSummaryMessage: "branchSummary",
    CompactionSummaryMessage: "compactionSummary",
}
_KIND: dict[type, str] = {
    MessageEntry: "message",
    ThinkingLevelChangeEntry: "thinking_level_change",
    ModelChangeEntry: "model_change",
    CompactionEntry: "compaction",
    BranchSummaryEntry: "branch_summary",
    CustomEntry: "custom",
    CustomMessageEntry: "custom_message",
    LabelEntry: "label",
    SessionInfoEntry: "session_info",
    UsageEntry: "usage",
    ContextEditEntry: "context_edit",
}
_CUT_ROLES = frozenset({"user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"})
_TURN_START_ROLES = frozenset({"user", "bashExecution"})
_USER_MESSAGE_KINDS = frozenset({"branch_summary", "custom_message"})


def entry_kind(entry: TranscriptEntry) -> str:
    """The entry's ``type`` (``"message"``, ``"compaction"``, ...), also for an :class:`UnknownEntry`."""
    if isinstance(entry, UnknownEntry):
        return entry.type
    return _KIND[type(entry)]


def message_of(entry: TranscriptEntry) -> AgentMessage | None:
    """The message of a ``message`` entry (also one kept as :class:`UnknownEntry`), else ``None``."""
    if isinstance(entry, MessageEntry):
        return entry.message
    if isinstance(entry, UnknownEntry) and entry.type == "message":
        raw = entry.raw.get("message")
        return message_from_json(raw) if isinstance(raw, dict) else None
    return None


def message_role(message: AgentMessage) -> str | None:
    """The ``role`` of a message record (``None`` for an unknown message without one)."""
    if isinstance(message, UnknownMessage):
        return message.role
    return _ROLE.get(type(message))


def _role(entry: TranscriptEntry) -> str | None:
    message = message_of(entry)
    return None if message is None else message_role(message)


def is_cut_point(entry: TranscriptEntry) -> bool:
    """
    Whether ``entry`` may be the first kept entry (pi spec §13.3).

    ``message`` entries with role user, assistant, bashExecution, custom, branchSummary or
    compactionSummary, plus every ``branch_summary`` and ``custom_message`` entry. Never a tool
    result: a result must stay with its call.
    """
    kind = entry_kind(entry)
    if kind in _USER_MESSAGE_KINDS:
        return True
    return kind == "message" and _role(entry) in _CUT_ROLES


@attrs.frozen(kw_only=True)
class CutPoint:
    """
    Result of :func:`find_cut_point` (pi's ``CutPointResult``).

    Attributes:
        first_kept_entry_index: Index (in the entries given) of the first entry kept verbatim.
        turn_start_index: Index of the entry that starts the turn the cut falls in, ``-1`` when the
            cut is at a user message or no turn start exists.
        is_split_turn: Whether the cut falls inside a turn (``turn_start_index != -1`` and the cut
            entry is not a user message).
        budget_index: Index of the message entry at which the backward walk reached the keep budget,
            or ``None`` when the whole range fits (then pi keeps everything from the first cut point).
            Not part of pi's result; :func:`~sessionkeeper.compaction.prepare_compaction` uses it
            for the B05 deviation.
    """

    first_kept_entry_index: int
    turn_start_index: int
    is_split_turn: bool
    budget_index: int | None = None


def find_turn_start_index(
    entries: Sequence[TranscriptEntry], *, entry_index: int, start_index: int = 0
) -> int:
    """
    Index of the entry that starts the turn containing ``entries[entry_index]`` (pi spec §13.3).

    Walks from ``entry_index`` down to ``start_index`` (both inclusive) and returns the first
    ``branch_summary`` / ``custom_message`` entry or ``user`` / ``bashExecution`` message found.

    Args:
        entries: The branch, root first.
        entry_index: Where to start looking (inclusive).
        start_index: Lowest index to look at (inclusive); default 0.

    Returns:
        The index, or ``-1`` when there is none.
    """
    for index in range(entry_index, start_index - 1, -1):
        entry = entries[index]
        if entry_kind(entry) in _USER_MESSAGE_KINDS or _role(entry) in _TURN_START_ROLES:
            return index
    return -1


def classify_cut(entries: Sequence[TranscriptEntry], cut: int, *, start_index: int) -> tuple[int, bool]:
    """``(turn_start_index, is_split_turn)`` for a cut at ``cut`` (pi's last step of findCutPoint)."""
    if _role(entries[cut]) == "user":
        return -1, False
    turn_start = find_turn_start_index(entries, entry_index=cut, start_index=start_index)
    return turn_start, turn_start != -1


def extend_cut_backwards(entries: Sequence[TranscriptEntry], cut: int, *, start_index: int) -> int:
    """Move ``cut`` back over directly preceding entries that are neither messages nor compactions."""
    while cut > start_index and entry_kind(entries[cut - 1]) not in ("message", "compaction"):
        cut -= 1
    return cut


def find_cut_point(
    entries: Sequence[TranscriptEntry],
    *,
    keep_recent_tokens: int,
    start_index: int = 0,
    end_index: int | None = None,
    token_counter: TokenCounter | None = None,
) -> CutPoint:
    """
    Find where to cut so that about ``keep_recent_tokens`` of recent messages are kept (pi-exact).

    pi spec §13.3 (``findCutPoint``): walk message entries from ``end_index - 1`` down to
    ``start_index``, summing the chars/4 estimate of each message (other entry types count 0). At the
    first entry where the sum reaches ``keep_recent_tokens``, cut at the first valid cut point
    (:func:`is_cut_point`) at or after it; when there is none, or the budget is never reached, cut at
    the first valid cut point of the range. Then move the cut back over directly preceding entries
    that are neither messages nor compactions (settings changes, labels, custom entries travel with
    the kept part). Finally classify the split turn. With no valid cut point at all the result is
    ``(start_index, -1, False)``.

    Args:
        entries: The branch, root first (``TranscriptManager.get_branch()``).
        keep_recent_tokens: Token budget of the kept tail (chars/4 estimate).
        start_index: First index that may be cut (pi: the previous compaction's kept boundary).
        end_index: One past the last index considered; ``None`` = ``len(entries)``.
        token_counter: Counts a message's tokens (default: pi's chars/4 estimate, which makes the
            walk pi-exact); counted through its memo (:func:`~sessionkeeper._tokens.token_memo`).

    Returns:
        The :class:`CutPoint`.
    """
    end = len(entries) if end_index is None else end_index
    first_cut = next((i for i in range(start_index, end) if is_cut_point(entries[i])), -1)
    if first_cut < 0:
        return CutPoint(first_kept_entry_index=start_index, turn_start_index=-1, is_split_turn=False)

    count_message = token_memo(token_counter).count_message
    cut = first_cut
    budget_index: int | None = None
    accumulated = 0
    for index in range(end - 1, start_index - 1, -1):
        message = message_of(entries[index])
        if message is None:
            continue
        accumulated += count_message(message)
        if accumulated >= keep_recent_tokens:
            budget_index = index
            cut = next((c for c in range(max(index, first_cut), end) if is_cut_point(entries[c])), first_cut)
            break

    cut = extend_cut_backwards(entries, cut, start_index=start_index)
    turn_start, split = classify_cut(entries, cut, start_index=start_index)
    return CutPoint(
        first_kept_entry_index=cut,
        turn_start_index=turn_start,
        is_split_turn=split,
        budget_index=budget_index,
    )
