"""
Compaction planning: what to summarise, what to keep, and what the summary must carry.

pi's ``prepareCompaction`` (pi spec §13.2) with the two deliberate deviations of DESIGN D1/D2:

- **D1 (field report B05)**: when pi would keep everything only because a trailing tool block alone
  exceeds the keep budget, the plan steps back to the start of that turn, so earlier history is still
  summarised (``deviation == "B05"``; ``pi_first_kept_entry_id`` says what pi would have kept).
- **D2**: when nothing is left to summarise the plan says so (``nothing_to_summarize``); the
  compactor then neither calls a summariser nor writes an entry.

The plan also records pending tool calls at the leaf (field report B06): the compactor defers
instead of writing a compaction under an assistant message whose results have not arrived.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

import attrs

from sessionkeeper._tokens import TokenCounter, token_memo
from sessionkeeper.compaction._cut import (
    CutPoint,
    classify_cut,
    entry_kind,
    extend_cut_backwards,
    find_cut_point,
    find_turn_start_index,
    is_cut_point,
    message_of,
)
from sessionkeeper.records import (
    AgentMessage,
    AssistantMessage,
    BranchSummaryEntry,
    CompactionEntry,
    CompactionSummaryMessage,
    CustomMessageEntry,
    MessageEntry,
    ToolCall,
    ToolResultMessage,
    TranscriptEntry,
    UnknownEntry,
    UnknownMessage,
    entry_key,
    key_to_json,
    message_to_builtins,
    parse_iso_ms,
)
from sessionkeeper.transcript import (
    estimate_context_tokens,
    message_from_json,
    typed_entry_message,
)


__all__ = (
    "CompactionPreparation",
    "FileOperations",
    "entry_message",
    "pending_tool_call_ids",
    "prepare_compaction",
    "utf16_sorted",
)


def utf16_sorted(items: Iterable[str]) -> list[str]:
    """Sort strings in UTF-16 code-unit order (JavaScript's default ``Array.prototype.sort``)."""
    return sorted(items, key=lambda item: item.encode("utf-16-be", "surrogatepass"))


def entry_message(entry: TranscriptEntry, *, include_compaction: bool = False) -> AgentMessage | None:
    """
    The message an entry contributes to a summariser's input (pi's ``getMessageFromEntry``).

    ``message`` -> its message; ``custom_message`` -> a ``custom`` message; ``branch_summary`` -> a
    ``branchSummary`` message (even when empty, unlike the context rebuild); ``compaction`` -> nothing
    (pi spec §13.2 item 6), or a ``compactionSummary`` message with ``include_compaction`` (branch
    summaries, pi spec §14); other types -> ``None``.
    """
    if isinstance(entry, MessageEntry):
        return entry.message
    if isinstance(entry, UnknownEntry):
        return _unknown_entry_message(entry, include_compaction=include_compaction)
    if isinstance(entry, CustomMessageEntry | BranchSummaryEntry):
        return typed_entry_message(entry)
    if include_compaction and isinstance(entry, CompactionEntry):
        return CompactionSummaryMessage(
            summary=entry.summary, tokens_before=entry.tokens_before, timestamp=parse_iso_ms(entry.timestamp)
        )
    return None


def _unknown_entry_message(entry: UnknownEntry, *, include_compaction: bool) -> AgentMessage | None:
    raw = entry.raw
    kind = entry.type
    if kind == "message":
        return message_of(entry)
    roles = {"custom_message": "custom", "branch_summary": "branchSummary"}
    if include_compaction:
        roles["compaction"] = "compactionSummary"
    role = roles.get(kind)
    if role is None:
        return None
    synthesized: dict[str, Any] = {"role": role}
    for key in ("customType", "content", "display", "details", "summary", "fromId", "tokensBefore"):
        if key in raw:
            synthesized[key] = raw[key]
    synthesized["timestamp"] = parse_iso_ms(str(raw.get("timestamp", "")))
    return message_from_json(synthesized)


@attrs.frozen(kw_only=True)
class FileOperations:
    """
    Files touched by ``read`` / ``write`` / ``edit`` tool calls (pi spec §13.2 item 7).

    Attributes:
        read: Paths passed to ``read``.
        written: Paths passed to ``write``.
        edited: Paths passed to ``edit`` (and a previous compaction's ``modifiedFiles``).
    """

    read: frozenset[str] = frozenset()
    written: frozenset[str] = frozenset()
    edited: frozenset[str] = frozenset()

    @property
    def modified_files(self) -> list[str]:
        """``edited ∪ written``, sorted in UTF-16 order (pi's ``computeFileLists``)."""
        return utf16_sorted(self.edited | self.written)

    @property
    def read_files(self) -> list[str]:
        """Files read but never modified, sorted in UTF-16 order."""
        return utf16_sorted(self.read - self.edited - self.written)

    def details(self) -> dict[str, list[str]]:
        """The compaction entry's ``details``: ``{"readFiles": [...], "modifiedFiles": [...]}``."""
        return {"readFiles": self.read_files, "modifiedFiles": self.modified_files}

    def merged(self, messages: Iterable[AgentMessage], *, nested_calls: bool = False) -> FileOperations:
        """
        A copy with the file operations of the assistant tool calls in ``messages`` added; with
        ``nested_calls`` (pi 1.6) also the calls a tool made, recorded in a tool result's ``nestedCalls``.
        """
        read, written, edited = set(self.read), set(self.written), set(self.edited)
        for message in messages:
            paths = _tool_call_paths(message)
            if nested_calls:
                paths = [*paths, *_nested_call_paths(message)]
            for name, path in paths:
                if name == "read":
                    read.add(path)
                elif name == "write":
                    written.add(path)
                elif name == "edit":
                    edited.add(path)
        return FileOperations(read=frozenset(read), written=frozenset(written), edited=frozenset(edited))

    @classmethod
    def from_details(cls, details: Any) -> FileOperations:
        """Seed from pi-generated ``details``: ``readFiles`` -> read, ``modifiedFiles`` -> edited."""
        if not isinstance(details, dict):
            return cls()
        read = details.get("readFiles")
        modified = details.get("modifiedFiles")
        return cls(
            read=frozenset(p for p in read if isinstance(p, str)) if isinstance(read, list) else frozenset(),
            edited=(
                frozenset(p for p in modified if isinstance(p, str))
                if isinstance(modified, list)
                else frozenset()
            ),
        )


def _tool_call_paths(message: AgentMessage) -> Iterable[tuple[str, str]]:
    if isinstance(message, AssistantMessage):
        for block in message.content:
            if isinstance(block, ToolCall):
                path = block.arguments.get("path")
                if isinstance(path, str) and path:
                    yield block.name, path
    elif isinstance(message, UnknownMessage) and message.role == "assistant":
        content = message.raw.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "toolCall":
                    args = block.get("arguments")
                    path = args.get("path") if isinstance(args, dict) else None
                    name = block.get("name")
                    if isinstance(path, str) and path and isinstance(name, str):
                        yield name, path


def _nested_call_paths(message: AgentMessage) -> Iterable[tuple[str, str]]:
    """pi 1.6 ``nestedCalls.calls`` of a tool result: ``(name, path)`` of calls with a ``path``."""
    if message.role != "toolResult":
        return
    raw = message_to_builtins(message)
    nested = raw.get("nestedCalls") if isinstance(raw, dict) else None
    calls = nested.get("calls") if isinstance(nested, dict) else None
    for call in calls if isinstance(calls, list) else ():
        args = call.get("arguments") if isinstance(call, dict) else None
        path = args.get("path") if isinstance(args, dict) else None
        name = call.get("name") if isinstance(call, dict) else None
        if isinstance(path, str) and path and isinstance(name, str):
            yield name, path


def pending_tool_call_ids(branch: Sequence[TranscriptEntry]) -> tuple[str, ...]:
    """
    Tool calls of the last assistant message on the branch that have no result after it (B06).

    Returns:
        The ids in call order; empty when the last assistant message has no unanswered call, or when
        a user message followed it (the turn was abandoned, pi leaves the call as it is).
    """
    answered: set[str] = set()
    for entry in reversed(branch):
        message = message_of(entry)
        if message is None:
            continue
        if isinstance(message, ToolResultMessage):
            answered.add(message.tool_call_id)
            continue
        if isinstance(message, AssistantMessage):
            if message.stop_reason in ("error", "aborted"):
                return ()
            return tuple(
                block.id
                for block in message.content
                if isinstance(block, ToolCall) and block.id not in answered
            )
        return ()
    return ()


@attrs.frozen(kw_only=True)
class CompactionPreparation:
    """
    A compaction plan (pi's ``CompactionPreparation`` plus what our deviations need).

    Indices are positions in the branch given to :func:`prepare_compaction` (root first).

    Attributes:
        first_kept_entry_id: Id of the first entry kept verbatim. ``None`` for a strict checkpoint:
            nothing is kept, and the compaction entry points at itself (OpenClaw's hardened boundary).
        first_kept_entry_index: Its index; ``len(branch)`` for a strict checkpoint.
        boundary_start: Where summarising starts: the previous compaction's kept boundary, else 0.
        turn_start_index: Start of the split turn, ``-1`` when the turn is not split.
        turn_start_entry_id: Id of that entry, or ``None``.
        is_split_turn: Whether the kept part starts inside a turn (a turn-prefix summary is made).
        messages_to_summarize: History messages to summarise (entries ``[boundary_start, history end)``).
        turn_prefix_messages: The split turn's prefix (``[turn_start_index, first_kept_entry_index)``).
        kept_messages: Number of context messages kept verbatim after the summary.
        kept_tokens: Their chars/4 estimate, in tokens (may exceed the keep budget, B05).
        tokens_before: Context estimate before compaction, in tokens (pi spec §12): the last
            provider usage plus chars/4 of the newer messages (source in :attr:`tokens_before_source`).
        previous_summary: Summary of the previous compaction on the branch, if any.
        file_ops: Files read/written/edited in the summarised span, seeded from the previous
            pi-generated compaction's details.
        keep_recent_tokens: The keep budget used, or ``None`` for a strict checkpoint.
        nothing_to_summarize: ``True`` when there is no message to summarise (DESIGN D2).
        deviation: ``"B05"`` when D1 moved the cut away from pi's, else ``None``.
        pi_first_kept_entry_id: What pi's ``findCutPoint`` chooses (equal to ``first_kept_entry_id``
            unless ``deviation`` is set or the plan is a strict checkpoint).
        pending_tool_call_ids: Tool calls at the leaf still waiting for results (B06).
        tokens_before_source: ``"usage"`` when :attr:`tokens_before` is anchored on a provider usage,
            ``"estimate"`` when it is chars/4 of every message (issue #11: report the source).
        tokens_before_estimate: chars/4 of every context message before compaction, in tokens: the
            number to compare with a compaction's ``tokens_after`` (also chars/4).
    """

    first_kept_entry_id: str | None
    first_kept_entry_index: int
    boundary_start: int
    turn_start_index: int
    turn_start_entry_id: str | None
    is_split_turn: bool
    messages_to_summarize: tuple[AgentMessage, ...]
    turn_prefix_messages: tuple[AgentMessage, ...]
    kept_messages: int
    kept_tokens: int
    tokens_before: int
    previous_summary: str | None
    file_ops: FileOperations
    keep_recent_tokens: int | None
    nothing_to_summarize: bool
    deviation: Literal["B05"] | None = None
    pi_first_kept_entry_id: str | None = None
    pending_tool_call_ids: tuple[str, ...] = ()
    tokens_before_source: Literal["usage", "estimate"] = "estimate"
    tokens_before_estimate: int = 0

    @property
    def strict_checkpoint(self) -> bool:
        """Whether nothing is kept verbatim (manual compaction without a keep budget)."""
        return self.first_kept_entry_id is None

    def to_json(self) -> dict[str, Any]:
        """
        The ``compact --dry-run --json`` fields (DESIGN "CLI JSON" item 6), camelCase; an entry id that
        is a JSON number or boolean in the file is given as that value (as pi's ``cutPoint`` does).
        """
        return {
            "firstKeptEntryId": key_to_json(self.first_kept_entry_id),
            "isSplitTurn": self.is_split_turn,
            "turnStartEntryId": key_to_json(self.turn_start_entry_id),
            "tokensBefore": self.tokens_before,
            "tokensBeforeSource": self.tokens_before_source,
            "tokensBeforeEstimate": self.tokens_before_estimate,
            "messagesToSummarize": len(self.messages_to_summarize),
            "turnPrefixMessages": len(self.turn_prefix_messages),
            "keptMessages": self.kept_messages,
            "keptTokens": self.kept_tokens,
            "keepRecentTokens": self.keep_recent_tokens,
            "nothingToSummarize": self.nothing_to_summarize,
            "deviation": self.deviation,
            "piFirstKeptEntryId": key_to_json(self.pi_first_kept_entry_id),
            "strictCheckpoint": self.strict_checkpoint,
            "pendingToolCallIds": list(self.pending_tool_call_ids),
            "fileOps": {"read": self.file_ops.read_files, "modified": self.file_ops.modified_files},
        }


def _b05_cut(branch: Sequence[TranscriptEntry], pi_cut: CutPoint, start: int) -> CutPoint | None:
    """D1: pi kept everything because the budget ran out after its last cut point; step back."""
    budget_index = pi_cut.budget_index
    if budget_index is None:
        return None
    first_cut = next((i for i in range(start, len(branch)) if is_cut_point(branch[i])), -1)
    if first_cut < 0 or pi_cut.first_kept_entry_index > first_cut:
        return None
    if any(is_cut_point(branch[i]) for i in range(budget_index, len(branch))):
        return None  # pi found a cut point after the budget ran out: not the B05 case
    cut = find_turn_start_index(branch, entry_index=budget_index, start_index=start)
    if cut <= first_cut:
        # The whole span is one turn: keep its last cut point and summarise the turn prefix.
        cut = next((i for i in range(budget_index, start - 1, -1) if is_cut_point(branch[i])), -1)
        if cut <= first_cut:
            return None
    cut = extend_cut_backwards(branch, cut, start_index=start)
    turn_start, split = classify_cut(branch, cut, start_index=start)
    return CutPoint(first_kept_entry_index=cut, turn_start_index=turn_start, is_split_turn=split)


def _messages(branch: Sequence[TranscriptEntry], start: int, stop: int) -> tuple[AgentMessage, ...]:
    out: list[AgentMessage] = []
    for index in range(start, stop):
        message = entry_message(branch[index])
        if message is not None:
            out.append(message)
    return tuple(out)


def _context_messages(
    branch: Sequence[TranscriptEntry], previous_index: int, previous: _Previous | None
) -> list[AgentMessage]:
    """
    The messages of ``build_session_context(branch)`` (pi spec §9 items 4-6) without the settings scan
    over the whole path, which the estimate does not need: the summary, the kept range, what follows.
    """
    out: list[AgentMessage] = []

    def add(start: int, stop: int) -> None:
        for index in range(start, stop):
            entry = branch[index]
            if entry_kind(entry) == "compaction" or (
                isinstance(entry, BranchSummaryEntry) and not entry.summary
            ):
                continue
            message = entry_message(entry)
            if message is not None:
                out.append(message)

    if previous is None:
        add(0, len(branch))
        return out
    out.append(entry_message(branch[previous_index], include_compaction=True))  # type: ignore[arg-type]
    kept_id = previous.first_kept_entry_id
    kept_at = next((i for i in range(previous_index - 1, -1, -1) if branch[i].id == kept_id), previous_index)
    add(kept_at, previous_index)
    add(previous_index + 1, len(branch))
    return out


@attrs.frozen(kw_only=True)
class _Previous:
    """The fields of the previous compaction on the branch that planning reads, typed or not."""

    first_kept_entry_id: str | None
    summary: str | None
    details: Any
    from_hook: Any

    @classmethod
    def of(cls, entry: TranscriptEntry) -> _Previous:
        """
        Read them from a ``compaction`` entry; one kept as :class:`UnknownEntry` (an id or
        ``firstKeptEntryId`` that is a JSON number, an extra field) is read from its JSON the way pi's
        untyped code reads it, its ``firstKeptEntryId`` keyed as pi compares it (``3`` is not ``"3"``).
        """
        if isinstance(entry, CompactionEntry):
            return cls(
                first_kept_entry_id=entry.first_kept_entry_id,
                summary=entry.summary,
                details=entry.details,
                from_hook=entry.from_hook,
            )
        raw = entry.raw if isinstance(entry, UnknownEntry) else {}
        summary = raw.get("summary")
        return cls(
            first_kept_entry_id=entry_key(raw.get("firstKeptEntryId")),
            summary=summary if isinstance(summary, str) else None,
            details=raw.get("details"),
            from_hook=raw.get("fromHook"),
        )


def _kept(branch: Sequence[TranscriptEntry], start: int, counter: TokenCounter) -> tuple[int, int]:
    """Messages the rebuilt context keeps from ``start`` on, and their tokens (``counter``)."""
    count = 0
    tokens = 0
    for index in range(start, len(branch)):
        entry = branch[index]
        if isinstance(entry, BranchSummaryEntry) and not entry.summary:
            continue
        if entry_kind(entry) == "compaction":
            continue
        message = entry_message(entry)
        if message is not None:
            count += 1
            tokens += counter.count_message(message)
    return count, tokens


def prepare_compaction(
    branch: Sequence[TranscriptEntry],
    *,
    keep_recent_tokens: int | None,
    token_counter: TokenCounter | None = None,
) -> CompactionPreparation | None:
    """
    Plan a compaction of ``branch`` (pi's ``prepareCompaction``, pi spec §13.2, with D1/D2).

    A pi 1.6 branch (:func:`~sessionkeeper.compaction._projected.is_pi16_branch`) is planned as pi
    1.6.0 plans it, on the projected context (:mod:`sessionkeeper.compaction._projected`, issue 18).

    1. Nothing to do (``None``) when the branch is empty or already ends with a compaction, or when
       the first kept entry has no id (unmigrated data).
    2. The summarised span starts at the previous compaction's ``firstKeptEntryId`` (else just after
       that compaction, else 0); its summary is the previous summary.
    3. ``tokens_before`` = pi's context estimate of the rebuilt context.
    4. The cut is pi's :func:`find_cut_point` with ``keep_recent_tokens``, moved back to the turn start
       when only a trailing tool block exceeds the budget (D1, field report B05). With
       ``keep_recent_tokens=None`` the plan is a strict checkpoint: everything is summarised and
       nothing kept (OpenClaw's manual ``/compact`` without an explicit keep budget).
    5. File operations come from the previous pi-generated compaction's details plus the ``read`` /
       ``write`` / ``edit`` tool calls in the summarised messages (and the turn prefix).

    Args:
        branch: The current branch, root first (``TranscriptManager.get_branch()``).
        keep_recent_tokens: Budget of the kept tail in tokens, or ``None`` for a strict checkpoint.
        token_counter: Counts a message's tokens for the cut walk, ``kept_tokens`` and
            ``tokens_before_estimate`` (default: pi's chars/4 estimate, pi-exact). ``tokens_before``
            stays pi's context estimate (provider usage where known). A pi 1.6 branch is planned
            with pi 1.6's own estimate whatever the counter.

    Returns:
        The :class:`CompactionPreparation`, or ``None`` when there is nothing to compact.
    """
    if not branch or entry_kind(branch[-1]) == "compaction":
        return None
    from sessionkeeper.compaction._projected import (  # noqa: PLC0415 - _projected imports this module
        is_pi16_branch,
        prepare_projected_compaction,
    )

    if is_pi16_branch(branch):  # pi 1.6: plan on the projected context (issue 18)
        return prepare_projected_compaction(branch, keep_recent_tokens=keep_recent_tokens)
    previous_index = -1
    for index in range(len(branch) - 1, -1, -1):
        if entry_kind(branch[index]) == "compaction":
            previous_index = index
            break
    previous: _Previous | None = None
    start = 0
    if previous_index >= 0:
        previous = _Previous.of(branch[previous_index])
        # Entries on one path are distinct nodes with distinct ids, so searching backwards from the
        # compaction finds pi's ``findIndex`` result without scanning the whole branch.
        kept_id = previous.first_kept_entry_id
        kept_at = next((i for i in range(previous_index - 1, -1, -1) if branch[i].id == kept_id), -1)
        start = kept_at if kept_at >= 0 and kept_id is not None else previous_index + 1

    context = _context_messages(branch, previous_index, previous)
    measured = estimate_context_tokens(context)
    tokens_before = measured.tokens
    counter = token_memo(token_counter)
    before_estimate = sum(counter.count_message(message) for message in context)
    pending = pending_tool_call_ids(branch)

    deviation: Literal["B05"] | None = None
    if keep_recent_tokens is None:
        cut = CutPoint(first_kept_entry_index=len(branch), turn_start_index=-1, is_split_turn=False)
        pi_cut_id: str | None = None
    else:
        pi_cut = find_cut_point(
            branch, keep_recent_tokens=keep_recent_tokens, start_index=start, token_counter=counter
        )
        pi_cut_id = (
            branch[pi_cut.first_kept_entry_index].id if pi_cut.first_kept_entry_index < len(branch) else None
        )
        cut = pi_cut
        stepped = _b05_cut(branch, pi_cut, start)
        if stepped is not None:
            cut = stepped
            deviation = "B05"
        if cut.first_kept_entry_index >= len(branch) or not branch[cut.first_kept_entry_index].id:
            return None

    first_kept = cut.first_kept_entry_index
    first_kept_id = branch[first_kept].id if first_kept < len(branch) else None
    history_end = cut.turn_start_index if cut.is_split_turn else first_kept
    to_summarize = _messages(branch, start, history_end)
    prefix = _messages(branch, cut.turn_start_index, first_kept) if cut.is_split_turn else ()

    file_ops = FileOperations()
    if previous is not None and previous.from_hook is not True:
        file_ops = FileOperations.from_details(previous.details)
    file_ops = file_ops.merged(to_summarize).merged(prefix)
    kept_count, kept_tokens = _kept(branch, first_kept, counter)
    turn_start_id = branch[cut.turn_start_index].id if cut.turn_start_index >= 0 else None

    return CompactionPreparation(
        first_kept_entry_id=first_kept_id,
        first_kept_entry_index=first_kept,
        boundary_start=start,
        turn_start_index=cut.turn_start_index,
        turn_start_entry_id=turn_start_id,
        is_split_turn=cut.is_split_turn,
        messages_to_summarize=to_summarize,
        turn_prefix_messages=prefix,
        kept_messages=kept_count,
        kept_tokens=kept_tokens,
        tokens_before=tokens_before,
        previous_summary=previous.summary if previous is not None else None,
        file_ops=file_ops,
        keep_recent_tokens=keep_recent_tokens,
        nothing_to_summarize=not to_summarize and not prefix,
        deviation=deviation,
        pi_first_kept_entry_id=pi_cut_id,
        pending_tool_call_ids=pending,
        tokens_before_source="usage" if measured.last_usage_index is not None else "estimate",
        tokens_before_estimate=before_estimate,
    )
