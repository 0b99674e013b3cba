"""
Compaction planning on pi 1.6 branches: pi 1.6.0's ``prepareCompaction`` over the projected context.

pi 1.6.0 plans a compaction on ``buildSessionProjection(branch).entries`` (context edits applied,
system message entries inside a kept range already dropped), not on the raw branch:

- nothing is planned when the branch ends with a compaction;
- the previous compaction is the projected entry that is a compaction and contributes messages (the
  newest, at index 0); history starts after it (its kept tail counts as history again);
- cut points are projected entries (not compactions) with a user, assistant, bashExecution, custom,
  branchSummary or compactionSummary message after edits; walking back from the end, the sum of
  :func:`~sessionkeeper._estimate.estimate_tokens_pi16` reaching the keep budget picks the first cut
  point at or after that entry, else the *last* cut point; a budget never reached picks the first;
- the recovery-omission rule moves the cut one entry on when everything after it is invisible or
  omitted by edits (with an omitted assistant attempt and no edit replacing an entry outside that
  suffix); then the cut moves back over entries that contribute nothing (not past a compaction);
- a split turn when the cut does not start a turn and a turn start lies between the boundary and it;
- "nothing to summarize" when no history and no turn prefix precede the cut;
- system messages are never summarised (``getMessagesFromProjectedEntryForCompaction``);
- ``tokensBefore`` is ``estimateProjectedContextTokens``: the last valid assistant usage plus chars/4
  of later messages, unless a ``context_edit`` or ``compaction`` on the branch comes after that
  assistant; then chars/4 of everything with the current system message counted once.

Equal to pi 1.6.0 (the pi16 oracle's ``--cut-point``) on every file checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from sessionkeeper._estimate import ContextEstimate, estimate_context_tokens, estimate_tokens_pi16
from sessionkeeper.compaction._cut import entry_kind
from sessionkeeper.compaction._prepare import (
    CompactionPreparation,
    FileOperations,
    pending_tool_call_ids,
    utf16_sorted,
)
from sessionkeeper.records import (
    AgentMessage,
    CompactionEntry,
    ContextEditEntry,
    MessageEntry,
    SystemMessage,
    TranscriptEntry,
    UnknownEntry,
    UsageEntry,
    entry_key,
    key_to_json,
)
from sessionkeeper.transcript import ProjectedEntry, current_system_message, project_path


__all__ = (
    "ProjectedCompactionPlan",
    "estimate_projected_context_tokens",
    "is_pi16_branch",
    "plan_projected_compaction",
    "prepare_projected_compaction",
)

_CUT_ROLES = frozenset({"user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"})
_TURN_START_ROLES = frozenset({"user", "bashExecution", "custom", "branchSummary", "compactionSummary"})


def _role(message: AgentMessage) -> str | None:
    return message.role


def _is_compaction(entry: ProjectedEntry) -> bool:
    return entry_kind(entry.entry) == "compaction"


def _tokens(entry: ProjectedEntry) -> int:
    return sum(estimate_tokens_pi16(m) for m in entry.messages)


def _turn_start(entry: ProjectedEntry) -> bool:
    return not _is_compaction(entry) and any(_role(m) in _TURN_START_ROLES for m in entry.messages)


def _edit_target(entry: TranscriptEntry) -> tuple[str | None, bool]:
    """``(targetId key, replaces)`` of a ``context_edit``: ``replaces`` is ``replacement !== null``."""
    if isinstance(entry, ContextEditEntry):
        return entry.target_id, entry.replacement is not None
    raw = entry.raw if isinstance(entry, UnknownEntry) else {}
    return entry_key(raw.get("targetId")), raw.get("replacement") is not None


def _is_assistant_entry(entry: TranscriptEntry) -> bool:
    if isinstance(entry, MessageEntry):
        return _role(entry.message) == "assistant"
    if isinstance(entry, UnknownEntry) and entry.type == "message":
        inner = entry.raw.get("message")
        return isinstance(inner, dict) and inner.get("role") == "assistant"
    return False


@attrs.frozen(kw_only=True)
class _Cut:
    first_kept: int
    turn_start: int
    split: bool
    budget_index: int | None
    recovery_advance: bool


def _find_cut(entries: Sequence[ProjectedEntry], start: int, end: int, keep: int) -> _Cut:
    """pi 1.6.0 ``findProjectedCutPoint`` (with the oracle's diagnostics)."""
    cut_points = [
        i
        for i in range(start, end)
        if not _is_compaction(entries[i]) and any(_role(m) in _CUT_ROLES for m in entries[i].messages)
    ]
    if not cut_points:
        return _Cut(first_kept=start, turn_start=-1, split=False, budget_index=None, recovery_advance=False)
    accumulated = 0
    budget_index: int | None = None
    cut = cut_points[0]
    for i in range(end - 1, start - 1, -1):
        tokens = _tokens(entries[i])
        if tokens == 0:
            continue
        accumulated += tokens
        if accumulated >= keep:
            budget_index = i
            cut = next((c for c in cut_points if c >= i), cut_points[-1])
            break
    suffix = entries[cut + 1 : end]

    def visible(entry: ProjectedEntry) -> bool:
        return entry_kind(entry.entry) != "context_edit" and entry.intrinsic

    def omitted(entry: ProjectedEntry) -> bool:
        return visible(entry) and not entry.messages

    omitted_ids = {e.entry.id for e in suffix if omitted(e)}
    external_replacement = False
    for e in suffix:
        if entry_kind(e.entry) == "context_edit":
            target, replaces = _edit_target(e.entry)
            if replaces and target not in omitted_ids:
                external_replacement = True
    recovery = (
        budget_index is not None
        and not external_replacement
        and any(_is_assistant_entry(e.entry) and omitted(e) for e in suffix)
        and all(not _is_compaction(e) and (not visible(e) or omitted(e)) for e in suffix)
    )
    if recovery:
        cut += 1
    while cut > start:
        previous = entries[cut - 1]
        if _is_compaction(previous) or previous.messages:
            break
        cut -= 1
    starts_turn = cut < len(entries) and _turn_start(entries[cut])
    turn_start = -1
    if not starts_turn:
        turn_start = next(
            (i for i in range(min(cut, len(entries) - 1), start - 1, -1) if _turn_start(entries[i])), -1
        )
    return _Cut(
        first_kept=cut,
        turn_start=turn_start,
        split=not starts_turn and turn_start != -1,
        budget_index=budget_index,
        recovery_advance=recovery,
    )


def estimate_projected_context_tokens(
    projection: Sequence[ProjectedEntry], branch: Sequence[TranscriptEntry]
) -> ContextEstimate:
    """
    pi 1.6.0's ``estimateProjectedContextTokens``: the figure its threshold check and a compaction's
    ``tokensBefore`` use (see the module docstring). ``projection`` is :func:`project_path` of
    ``branch``.
    """
    messages = [m for e in projection for m in e.messages]
    estimate = estimate_context_tokens(messages, pi16=True)
    if estimate.last_usage_index is not None:
        at = 0
        usage_id: str | None = None
        for e in projection:
            following = at + len(e.messages)
            if estimate.last_usage_index < following:
                usage_id = e.entry.id
                break
            at = following
        usage_index = next((i for i, b in enumerate(branch) if b.id == usage_id), -1) if usage_id else -1
        invalidating = next(
            (
                i
                for i in range(len(branch) - 1, -1, -1)
                if entry_kind(branch[i]) in ("context_edit", "compaction")
            ),
            -1,
        )
        if usage_index > invalidating:
            return estimate
    system = current_system_message(messages)
    tokens = estimate_tokens_pi16(system) if system is not None else 0
    tokens += sum(
        estimate_tokens_pi16(m) for m in messages if not isinstance(m, SystemMessage) and _role(m) != "system"
    )
    return ContextEstimate(tokens=tokens, usage_tokens=0, trailing_tokens=tokens, last_usage_index=None)


def _summarised(entries: Iterable[ProjectedEntry]) -> list[AgentMessage]:
    """``getMessagesFromProjectedEntryForCompaction``: no compaction, no system message."""
    return [m for e in entries if not _is_compaction(e) for m in e.messages if _role(m) != "system"]


@attrs.frozen(kw_only=True)
class ProjectedCompactionPlan:
    """
    What pi 1.6.0's ``prepareCompaction`` decides for a branch (indices into :attr:`projected`).

    Attributes:
        keep_recent_tokens: The keep budget, in tokens.
        skipped: Why nothing is compacted (``"last entry on branch is a compaction"``,
            ``"nothing to summarize"``, ``"no entry to keep"``), or ``None``.
        projected: The projected entries the indices refer to (:func:`project_path` of the branch).
        previous_compaction_id: Id of the compaction the context starts with, or ``None``.
        boundary_start: First projected index of the history (after the previous compaction).
        first_kept_entry_index: First projected entry kept verbatim.
        turn_start_index: Start of the split turn, ``-1`` when not split.
        is_split_turn: Whether the kept part starts inside a turn.
        budget_index: Projected entry where the walk reached the budget, ``None`` when it never did.
        recovery_advance: Whether the recovery-omission rule moved the cut one entry on.
        tokens_before: :func:`estimate_projected_context_tokens`.
        messages_to_summarize: History messages (no system message, edits applied).
        turn_prefix_messages: The split turn's prefix.
        previous_summary: The previous compaction's summary, or ``None``.
        file_ops: Files read, written and edited in the summarised span (seeded from a pi-generated
            previous compaction's details).
    """

    keep_recent_tokens: int
    skipped: str | None
    projected: tuple[ProjectedEntry, ...]
    previous_compaction_id: str | None
    boundary_start: int
    first_kept_entry_index: int
    turn_start_index: int
    is_split_turn: bool
    budget_index: int | None
    recovery_advance: bool
    tokens_before: int
    messages_to_summarize: tuple[AgentMessage, ...]
    turn_prefix_messages: tuple[AgentMessage, ...]
    previous_summary: str | None
    file_ops: FileOperations

    @property
    def compactable(self) -> bool:
        """Whether pi 1.6.0 would compact (``skipped`` is ``None``)."""
        return self.skipped is None

    @property
    def first_kept_entry_id(self) -> str | None:
        """Id of the first kept entry, or ``None`` past the end."""
        if 0 <= self.first_kept_entry_index < len(self.projected):
            return self.projected[self.first_kept_entry_index].entry.id
        return None

    def to_json(self) -> dict[str, Any]:
        """The pi16 oracle's ``cutPoint`` object (``context.mjs --cut-point N``), without branch ids."""
        ids = [e.entry.id for e in self.projected]
        out: dict[str, Any] = {"keepRecentTokens": self.keep_recent_tokens, "compactable": self.compactable}
        if self.skipped is not None:
            out["skipped"] = self.skipped
        compactable = self.compactable
        out.update(
            {
                "previousCompactionId": key_to_json(self.previous_compaction_id),
                "boundaryStart": self.boundary_start,
                "boundaryEnd": len(self.projected),
                "firstKeptEntryIndex": self.first_kept_entry_index,
                "firstKeptEntryId": key_to_json(self.first_kept_entry_id),
                "turnStartIndex": self.turn_start_index,
                "turnStartEntryId": key_to_json(ids[self.turn_start_index])
                if self.turn_start_index >= 0
                else None,
                "isSplitTurn": self.is_split_turn,
                "budgetReachedAtIndex": self.budget_index,
                "recoveryOmissionAdvance": self.recovery_advance,
                "tokensBefore": self.tokens_before,
                "messagesToSummarize": len(self.messages_to_summarize) if compactable else 0,
                "turnPrefixMessages": len(self.turn_prefix_messages) if compactable else 0,
                "previousSummary": self.previous_summary is not None
                if compactable
                else self.previous_compaction_id is not None,
                "readFiles": utf16_sorted(self.file_ops.read) if compactable else [],
                "modifiedFiles": self.file_ops.modified_files if compactable else [],
                "projectedEntryIds": [key_to_json(i) for i in ids],
            }
        )
        return out


def _compaction_summary(entry: TranscriptEntry) -> str | None:
    if isinstance(entry, CompactionEntry):
        return entry.summary
    summary = entry.raw.get("summary") if isinstance(entry, UnknownEntry) else None
    return summary if isinstance(summary, str) else None


def _seed_files(entry: TranscriptEntry) -> FileOperations:
    """``extractFileOperations``: a pi-generated previous compaction's ``details`` seed the file lists."""
    if isinstance(entry, CompactionEntry):
        from_hook: Any = entry.from_hook
        details: Any = entry.details
    else:
        raw = entry.raw if isinstance(entry, UnknownEntry) else {}
        from_hook, details = raw.get("fromHook"), raw.get("details")
    if bool(from_hook) or isinstance(from_hook, list | dict):  # JavaScript truthiness
        return FileOperations()
    return FileOperations.from_details(details)


def plan_projected_compaction(
    branch: Sequence[TranscriptEntry], *, keep_recent_tokens: int
) -> ProjectedCompactionPlan | None:
    """
    pi 1.6.0's ``prepareCompaction(branch, {keepRecentTokens})`` (see the module docstring).

    Returns:
        The plan (``skipped`` says when pi would not compact), or ``None`` when the branch ends with a
        compaction (pi does not even project it).
    """
    if branch and entry_kind(branch[-1]) == "compaction":
        return None
    projected = tuple(project_path(branch))
    previous_index = next((i for i, e in enumerate(projected) if _is_compaction(e) and e.messages), -1)
    previous_summary = _compaction_summary(projected[previous_index].entry) if previous_index >= 0 else None
    start = previous_index + 1 if previous_index >= 0 else 0
    end = len(projected)
    tokens_before = estimate_projected_context_tokens(projected, branch).tokens
    cut = _find_cut(projected, start, end, keep_recent_tokens)
    skipped: str | None = None
    to_summarize: list[AgentMessage] = []
    prefix: list[AgentMessage] = []
    file_ops = FileOperations()
    if cut.first_kept >= len(projected) or not projected[cut.first_kept].entry.id:
        skipped = "no entry to keep"
    else:
        history_end = cut.turn_start if cut.split else cut.first_kept
        to_summarize = _summarised(projected[start:history_end])
        prefix = _summarised(projected[cut.turn_start : cut.first_kept]) if cut.split else []
        if not to_summarize and not prefix:
            skipped = "nothing to summarize"
        else:
            if previous_index >= 0:
                file_ops = _seed_files(projected[previous_index].entry)
            file_ops = file_ops.merged(to_summarize, nested_calls=True).merged(prefix, nested_calls=True)
    return ProjectedCompactionPlan(
        keep_recent_tokens=keep_recent_tokens,
        skipped=skipped,
        projected=projected,
        previous_compaction_id=projected[previous_index].entry.id if previous_index >= 0 else None,
        boundary_start=start,
        first_kept_entry_index=cut.first_kept,
        turn_start_index=cut.turn_start,
        is_split_turn=cut.split,
        budget_index=cut.budget_index,
        recovery_advance=cut.recovery_advance,
        tokens_before=tokens_before,
        messages_to_summarize=tuple(to_summarize),
        turn_prefix_messages=tuple(prefix),
        previous_summary=previous_summary,
        file_ops=file_ops,
    )


def is_pi16_branch(branch: Sequence[TranscriptEntry]) -> bool:
    """
    Whether a branch holds what only pi 1.6 writes (a system message entry, a ``usage`` or
    ``context_edit`` entry, a compaction with a ``systemMessage``): compaction then plans as pi 1.6.0
    (:func:`prepare_projected_compaction`); other branches keep pi 0.73.1's planner.
    """
    for entry in branch:
        if isinstance(entry, UsageEntry | ContextEditEntry):
            return True
        if isinstance(entry, MessageEntry) and _role(entry.message) == "system":
            return True
        if isinstance(entry, CompactionEntry) and entry.system_message:
            return True
        if isinstance(entry, UnknownEntry) and entry.type in ("usage", "context_edit"):
            return True
    return False


def prepare_projected_compaction(
    branch: Sequence[TranscriptEntry], *, keep_recent_tokens: int | None
) -> CompactionPreparation | None:
    """
    A :class:`~sessionkeeper.compaction.CompactionPreparation` for a pi 1.6 branch, planned as pi 1.6.0
    plans it (:func:`plan_projected_compaction`): system messages are never summarised, context edits
    are applied to what is summarised, the cut is pi 1.6.0's. Indices are positions in ``branch``.

    ``keep_recent_tokens=None`` is a strict checkpoint (everything after the previous compaction is
    summarised, nothing kept). pi 1.6.0's "nothing to summarize" gives a plan with
    ``nothing_to_summarize`` (DESIGN D2, which pi 1.6 now shares); ``None`` when the branch ends with a
    compaction or there is no entry to keep.
    """
    plan = plan_projected_compaction(branch, keep_recent_tokens=keep_recent_tokens or 0)
    if plan is None or plan.skipped == "no entry to keep":
        return None
    position = {entry.id: i for i, entry in enumerate(branch)}
    projected = plan.projected

    def branch_index(projected_index: int) -> int:
        if projected_index >= len(projected):
            return len(branch)
        return position.get(projected[projected_index].entry.id, len(branch))

    messages_to_summarize = plan.messages_to_summarize
    prefix = plan.turn_prefix_messages
    first_kept_index = branch_index(plan.first_kept_entry_index)
    first_kept_id = plan.first_kept_entry_id
    turn_start = plan.turn_start_index
    split = plan.is_split_turn
    file_ops = plan.file_ops
    kept = [m for e in projected[plan.first_kept_entry_index :] if not _is_compaction(e) for m in e.messages]
    if keep_recent_tokens is None:  # strict checkpoint: summarise the whole history
        messages_to_summarize = tuple(_summarised(projected[plan.boundary_start :]))
        prefix = ()
        first_kept_index, first_kept_id, turn_start, split, kept = len(branch), None, -1, False, []
        file_ops = file_ops.merged(messages_to_summarize, nested_calls=True)
    messages = [m for e in projected for m in e.messages]
    measured = estimate_projected_context_tokens(projected, branch)
    system = current_system_message(messages)
    every = (estimate_tokens_pi16(system) if system is not None else 0) + sum(
        estimate_tokens_pi16(m) for m in messages if _role(m) != "system"
    )
    return CompactionPreparation(
        first_kept_entry_id=first_kept_id,
        first_kept_entry_index=first_kept_index,
        boundary_start=branch_index(plan.boundary_start),
        turn_start_index=branch_index(turn_start) if turn_start >= 0 else -1,
        turn_start_entry_id=projected[turn_start].entry.id if turn_start >= 0 else None,
        is_split_turn=split,
        messages_to_summarize=tuple(messages_to_summarize),
        turn_prefix_messages=tuple(prefix),
        kept_messages=len(kept),
        kept_tokens=sum(estimate_tokens_pi16(m) for m in kept),
        tokens_before=measured.tokens,
        previous_summary=plan.previous_summary,
        file_ops=file_ops,
        keep_recent_tokens=keep_recent_tokens,
        nothing_to_summarize=not messages_to_summarize and not prefix,
        pi_first_kept_entry_id=plan.first_kept_entry_id,
        pending_tool_call_ids=pending_tool_call_ids(branch),
        tokens_before_source="usage" if measured.last_usage_index is not None else "estimate",
        tokens_before_estimate=every,
    )
