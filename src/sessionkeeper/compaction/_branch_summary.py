"""
Branch summaries: what the user explored on a branch they navigated away from (pi spec §11, §14).

pi 0.73.1 is exact here (DESIGN D1): the entries summarised, the token budget walk, the prompt, the
preamble and the file lists are pi's. Without a model client the summary is extractive (DESIGN D3).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import anyio
import attrs

from sessionkeeper._model_client import ModelClient, ModelRequest
from sessionkeeper._tokens import TokenCounter, token_memo
from sessionkeeper.compaction._cut import entry_kind, message_of, message_role
from sessionkeeper.compaction._extractive import extractive_summary
from sessionkeeper.compaction._prepare import FileOperations, entry_message
from sessionkeeper.compaction._prompts import (
    BRANCH_SUMMARY_PREAMBLE,
    BRANCH_SUMMARY_PROMPT,
    SUMMARIZATION_SYSTEM_PROMPT,
)
from sessionkeeper.compaction._serialize import serialize_conversation
from sessionkeeper.compaction._suffix import format_file_operations
from sessionkeeper.exceptions import CompactionCancelled
from sessionkeeper.transcript import (
    AgentMessage,
    BranchSummaryEntry,
    TextContent,
    TranscriptEntry,
    TranscriptManager,
    UserMessage,
)


__all__ = (
    "DEFAULT_BRANCH_RESERVE_TOKENS",
    "BranchEntries",
    "BranchSummary",
    "branch_token_budget",
    "collect_entries_for_branch_summary",
    "generate_branch_summary",
    "prepare_branch_entries",
)

DEFAULT_BRANCH_RESERVE_TOKENS = 16384
"""pi's ``branchSummary.reserveTokens`` default."""
_DEFAULT_WINDOW = 128_000
_NO_CONTENT = "No content to summarize"


def collect_entries_for_branch_summary(
    transcript: TranscriptManager, *, old_leaf_id: str | None, target_id: str
) -> tuple[list[TranscriptEntry], str | None]:
    """
    Entries from ``old_leaf_id`` back to (excluding) the deepest common ancestor with ``target_id``,
    root first, and that ancestor's id (pi's ``collectEntriesForBranchSummary``, spec §11).

    Compaction entries are included. ``old_leaf_id`` ``None`` gives ``([], None)``.
    """
    if not old_leaf_id:
        return [], None
    old_path = {entry.id for entry in transcript.get_branch(old_leaf_id)}
    common: str | None = None
    for entry in reversed(transcript.get_branch(target_id)):
        if entry.id in old_path:
            common = entry.id
            break
    collected: list[TranscriptEntry] = []
    current: str | None = old_leaf_id
    while current and current != common:
        found = transcript.get_entry(current)
        if found is None:
            break
        collected.append(found)
        current = found.parent_id
    collected.reverse()
    return collected, common


@attrs.frozen(kw_only=True)
class BranchEntries:
    """
    Result of :func:`prepare_branch_entries`.

    Attributes:
        messages: Messages to summarise, oldest first.
        file_ops: Files read/written/edited on the branch (plus earlier pi branch summaries').
        total_tokens: Their chars/4 estimate, in tokens.
    """

    messages: tuple[AgentMessage, ...]
    file_ops: FileOperations
    total_tokens: int


def prepare_branch_entries(
    entries: Sequence[TranscriptEntry], *, token_budget: int = 0, token_counter: TokenCounter | None = None
) -> BranchEntries:
    """
    pi's ``prepareBranchEntries`` (spec §14): newest to oldest until the budget is used.

    File operations come first from every pi-generated (``fromHook`` not true) ``branch_summary``'s
    details, then from the assistant tool calls of the messages walked. Tool results are skipped;
    compactions become ``compactionSummary`` messages. When a message would exceed ``token_budget``
    (``0`` = no limit) the walk stops, except that a compaction or branch summary is still taken when
    the total so far is below 90 % of the budget.

    Args:
        entries: The branch's entries, oldest first.
        token_budget: Budget in tokens; 0 means none.
        token_counter: Counts a message's tokens (default: pi's chars/4 estimate, pi-exact).
    """
    count_message = token_memo(token_counter).count_message
    file_ops = FileOperations()
    for entry in entries:
        if isinstance(entry, BranchSummaryEntry) and entry.from_hook is not True:
            seeded = FileOperations.from_details(entry.details)
            file_ops = FileOperations(
                read=file_ops.read | seeded.read,
                written=file_ops.written,
                edited=file_ops.edited | seeded.edited,
            )
    messages: list[AgentMessage] = []
    total = 0
    for entry in reversed(entries):
        kind = entry_kind(entry)
        if kind == "message":
            message = message_of(entry)
            if message is None or message_role(message) == "toolResult":
                continue
        else:
            message = entry_message(entry, include_compaction=True)
            if message is None:
                continue
        file_ops = file_ops.merged((message,))
        tokens = count_message(message)
        if token_budget > 0 and total + tokens > token_budget:
            if kind in ("compaction", "branch_summary") and total < token_budget * 0.9:
                messages.insert(0, message)
                total += tokens
            break
        messages.insert(0, message)
        total += tokens
    return BranchEntries(messages=tuple(messages), file_ops=file_ops, total_tokens=total)


@attrs.frozen(kw_only=True)
class BranchSummary:
    """
    A branch summary ready to write (``TranscriptManager.branch_with_summary``).

    Attributes:
        summary: The text (preamble, summary, file lists), or ``"No content to summarize"``.
        read_files: Files read but not modified.
        modified_files: Files written or edited.
        provider: ``"llm"``, ``"extractive"`` or ``"none"`` (nothing to summarise).
    """

    summary: str
    read_files: tuple[str, ...] = ()
    modified_files: tuple[str, ...] = ()
    provider: str = "none"

    def details(self) -> dict[str, list[str]]:
        """The entry's ``details``: ``{"readFiles": [...], "modifiedFiles": [...]}``."""
        return {"readFiles": list(self.read_files), "modifiedFiles": list(self.modified_files)}


async def generate_branch_summary(
    entries: Sequence[TranscriptEntry],
    *,
    model_client: ModelClient | None = None,
    context_window: int | None = None,
    reserve_tokens: int = DEFAULT_BRANCH_RESERVE_TOKENS,
    custom_instructions: str | None = None,
    replace_instructions: bool = False,
    model: str | None = None,
    abort: anyio.Event | None = None,
    token_counter: TokenCounter | None = None,
) -> BranchSummary:
    """
    Summarise an abandoned branch (pi's ``generateBranchSummary``, spec §14).

    Budget ``(context_window or 128000) - reserve_tokens``; no messages -> ``No content to
    summarize`` without a model call. The request: pi's system prompt and one user message
    ``<conversation>...</conversation>\\n\\n`` + the branch prompt (or custom instructions appended as
    ``Additional focus``, or alone with ``replace_instructions``), ``max_tokens = 2048``. The summary
    is the preamble + the model's text + the file lists. Without a client, or when the client fails
    or answers empty, the body is extractive (DESIGN D3). ``token_counter`` sizes the messages walked
    against the budget (default: pi's chars/4 estimate).

    Raises:
        CompactionCancelled: The reply was aborted (pi cancels the navigation).
    """
    budget = (context_window or _DEFAULT_WINDOW) - reserve_tokens
    prepared = prepare_branch_entries(entries, token_budget=budget, token_counter=token_counter)
    if not prepared.messages:
        return BranchSummary(summary=_NO_CONTENT)
    read_files = tuple(prepared.file_ops.read_files)
    modified_files = tuple(prepared.file_ops.modified_files)
    files = format_file_operations(read_files, modified_files)
    if model_client is not None:
        if replace_instructions and custom_instructions:
            instructions = custom_instructions
        elif custom_instructions:
            instructions = f"{BRANCH_SUMMARY_PROMPT}\n\nAdditional focus: {custom_instructions}"
        else:
            instructions = BRANCH_SUMMARY_PROMPT
        text = (
            f"<conversation>\n{serialize_conversation(prepared.messages)}\n</conversation>\n\n{instructions}"
        )
        request = ModelRequest(
            system_prompt=SUMMARIZATION_SYSTEM_PROMPT,
            messages=(UserMessage(content=[TextContent(text=text)], timestamp=0),),
            max_tokens=2048,
            model=model,
            abort=abort,
            metadata={"purpose": "branch-summary"},
        )
        try:
            response = await model_client.complete(request)
        except TimeoutError:
            raise
        except Exception:
            response = None
        if response is not None:
            if response.stop_reason == "aborted":
                raise CompactionCancelled("branch summary aborted")
            if response.stop_reason != "error" and response.text.strip():
                summary = BRANCH_SUMMARY_PREAMBLE + response.text + files
                return BranchSummary(
                    summary=summary, read_files=read_files, modified_files=modified_files, provider="llm"
                )
    body = extractive_summary(prepared.messages, read_files=read_files, modified_files=modified_files)
    return BranchSummary(
        summary=BRANCH_SUMMARY_PREAMBLE + body + files,
        read_files=read_files,
        modified_files=modified_files,
        provider="extractive",
    )


def branch_token_budget(
    context_window: int | None, reserve_tokens: int = DEFAULT_BRANCH_RESERVE_TOKENS
) -> int:
    """``(context_window or 128000) - reserve_tokens`` (pi spec §14)."""
    return math.floor((context_window or _DEFAULT_WINDOW) - reserve_tokens)
