"""
The built-in LLM summariser, through the host's :class:`~sessionkeeper.ModelClient`.

Two pipelines, selected by the mode (DESIGN D4: they differ only in how the summary is made):

- **default** (pi 0.73.1, pi spec §13.4): one history request (initial or update prompt with the
  previous summary) and, for a split turn, one turn-prefix request, run concurrently and merged.
- **safeguard** (OpenClaw 2026.7.35, spec §5.5-5.6): structured headings, the previous summary
  prepended for re-distillation, chunked summarisation sized to the window with a merge call,
  oversized messages cut out, and the quality audit with retries.

Request sizes, failures and the D10 budget are those of :mod:`._summary_requests`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence

import anyio
import attrs

from sessionkeeper.compaction._chunking import (
    chunk_messages_by_max_tokens,
    history_needs_pruning,
    oversized_plan,
    prune_history_for_context_share,
    split_messages_by_token_share,
)
from sessionkeeper.compaction._extractive import message_text
from sessionkeeper.compaction._prompts import (
    MERGE_SUMMARIES_INSTRUCTIONS,
    TURN_PREFIX_INSTRUCTIONS,
    structured_fallback_summary,
    summarization_instructions,
)
from sessionkeeper.compaction._quality import audit_summary, extract_opaque_identifiers
from sessionkeeper.compaction._summary_requests import (
    CALLS_BASE,
    CALLS_PER_CHUNK,
    MAX_OVERFLOW_REFUSALS,
    SummaryBudgetError,
    SummaryCutOffError,
    SummaryRequests,
    serialized_tokens,
    text_message,
)
from sessionkeeper.exceptions import CompactionCancelled, CompactionError, ModelClientError
from sessionkeeper.records import AgentMessage, UserMessage


__all__ = ("CALLS_BASE", "CALLS_PER_CHUNK", "MAX_OVERFLOW_REFUSALS", "LlmSummarizer", "SafeguardBody")

_SPLIT_TURN_HEADER = "**Turn Context (split turn):**\n\n"
_PREVIOUS_REDISTILL = (
    "Previous compaction summary to re-distill with the current conversation. Prune stale, duplicate, or "
    "superseded details instead of preserving it verbatim."
)
_FEEDBACK_STRICT = "Fix all issues and include every required section with exact identifiers preserved."
_FEEDBACK_OTHER = (
    "Fix all issues and include every required section while following the configured identifier policy."
)
_ATTEMPTS = 3


@attrs.frozen(kw_only=True)
class SafeguardBody:
    """
    What the safeguard LLM pipeline produced.

    Attributes:
        history: The history summary (structured headings).
        split_turn: The split turn's prefix summary (without header), or ``""``.
        attempts: Model passes made by the quality guard (1 when the first summary passed).
        audit_reasons: Reasons of the last failed audit (empty when it passed or was off).
    """

    history: str
    split_turn: str = ""
    attempts: int = 1
    audit_reasons: tuple[str, ...] = ()


def _summarized_span(
    messages_to_summarize: Sequence[AgentMessage],
    turn_prefix_messages: Sequence[AgentMessage],
    is_split_turn: bool,
) -> tuple[bool, list[AgentMessage]]:
    """Whether a split turn's prefix is summarised too, and every message the summary covers."""
    split = bool(is_split_turn and turn_prefix_messages)
    return split, [*messages_to_summarize, *(turn_prefix_messages if split else ())]


class LlmSummarizer(SummaryRequests):
    """
    Summaries made by the host's model (pi spec §13.4; OpenClaw spec §5.5-5.6; DESIGN D9/D10).

    Args:
        client: The host's :class:`~sessionkeeper.ModelClient`.
        settings: Compaction settings (reserve tokens, model, thinking level, identifier policy,
            quality guard).
        context_window: The summarising model's window in tokens (sizes requests and chunks).
        clock: Waits between retries of a failed request (500 ms, then 1000 ms).
        budget: The window-derived request sizes (DESIGN D9); ``None``: derived from ``settings``
            and ``context_window`` (:func:`~sessionkeeper.compaction.compaction_budget`).
        token_counter: Counts a message's tokens for the history share, oversized messages and
            token-share splits (default: pi's chars/4 estimate). Request and chunk sizes are the
            serialised text's chars/4 (D10) whatever the counter.

    Attributes:
        calls: Summary requests sent to the client so far (requests too big to send are not sent).
        overflow_refusals: Requests of the current compaction the model refused as too long.

    Cost (DESIGN D10): each compaction (a call of :meth:`default_summary`, :meth:`safeguard_summary`,
    :meth:`history_summary` or :meth:`turn_prefix_summary`) sends at most
    ``CALLS_PER_CHUNK x chunks + CALLS_BASE`` = ``4 x chunks + 8`` requests, where ``chunks`` is
    ``ceil(serialised tokens / chunk size)`` of its messages (plus one for a split turn's prefix); the
    :data:`MAX_OVERFLOW_REFUSALS`-th (4th) request refused as a context overflow ends it too. Either
    raises :class:`~sessionkeeper.exceptions.CompactionError`, so the compactor falls back (D3).
    """

    # ------------------------------------------------------------------ default mode (pi)

    async def history_summary(
        self,
        messages: Sequence[AgentMessage],
        *,
        previous_summary: str | None,
        custom_instructions: str | None,
        abort: anyio.Event | None = None,
    ) -> str:
        """
        pi's ``generateSummary``: ``maxTokens = floor(0.8 * reserveTokens)``, at most a quarter of
        ``window - effectiveReserve`` (DESIGN D9); one request when it fits, else D10's split, within
        D10's budget (see the class).
        """
        with self._one_compaction(messages):
            return await self._history(messages, previous_summary, custom_instructions, abort)

    async def turn_prefix_summary(
        self, messages: Sequence[AgentMessage], *, abort: anyio.Event | None = None
    ) -> str:
        """
        pi's ``generateTurnPrefixSummary``: ``maxTokens = floor(0.5 * reserveTokens)``, at most an
        eighth of ``window - effectiveReserve`` (DESIGN D9); one request when it fits, else D10's split,
        within D10's budget (see the class).
        """
        with self._one_compaction(messages):
            return await self._turn_prefix(messages, abort)

    async def default_summary(
        self,
        *,
        messages_to_summarize: Sequence[AgentMessage],
        turn_prefix_messages: Sequence[AgentMessage],
        is_split_turn: bool,
        previous_summary: str | None,
        custom_instructions: str | None,
        abort: anyio.Event | None = None,
    ) -> str:
        """
        pi's ``compact`` summary (without the file lists): history, plus the split-turn prefix.

        For a split turn with a non-empty prefix both requests run concurrently; an empty history
        becomes ``No prior history.`` without a request. Merged as
        ``history + "\\n\\n---\\n\\n**Turn Context (split turn):**\\n\\n" + prefix``. Both share one
        D10 budget (see the class).
        """
        split, everything = _summarized_span(messages_to_summarize, turn_prefix_messages, is_split_turn)
        if not split:
            with self._one_compaction(everything):
                return await self._history(
                    messages_to_summarize, previous_summary, custom_instructions, abort
                )
        results: dict[str, str] = {}

        async def run_history() -> None:
            if messages_to_summarize:
                results["history"] = await self._history(
                    messages_to_summarize, previous_summary, custom_instructions, abort
                )
            else:
                results["history"] = "No prior history."

        async def run_prefix() -> None:
            results["prefix"] = await self._turn_prefix(turn_prefix_messages, abort)

        async def run_both() -> str:
            async with anyio.create_task_group() as group:
                group.start_soon(run_history)
                group.start_soon(run_prefix)
            return f"{results['history']}\n\n---\n\n{_SPLIT_TURN_HEADER}{results['prefix']}"

        with self._one_compaction(everything, extra_chunks=1):
            return await run_both()

    def _history(
        self,
        messages: Sequence[AgentMessage],
        previous_summary: str | None,
        instructions: str | None,
        abort: anyio.Event | None,
    ) -> Awaitable[str]:
        """pi's history request (one attempt, as pi)."""
        return self._request(
            "history", messages, previous_summary=previous_summary, instructions=instructions, abort=abort
        )

    def _turn_prefix(self, messages: Sequence[AgentMessage], abort: anyio.Event | None) -> Awaitable[str]:
        """pi's turn-prefix request (one attempt, as pi)."""
        return self._request("turn_prefix", messages, previous_summary=None, instructions=None, abort=abort)

    # ------------------------------------------------------------------ safeguard mode (OpenClaw)

    async def _generate(
        self,
        messages: Sequence[AgentMessage],
        *,
        instructions: str | None,
        previous_summary: str | None,
        abort: anyio.Event | None,
        final: bool,
    ) -> str:
        """
        One chunk's summary with up to 3 attempts (OpenClaw ``summarizeChunks``) and D10's splits.
        A non-final result is kept for the quality guard's retry, which only redoes the final step.
        """
        key = (tuple(map(id, messages)), previous_summary)
        if not final and key in self._partials:
            return self._partials[key]
        summary = await self._request(
            "history",
            messages,
            previous_summary=previous_summary,
            instructions=instructions,
            abort=abort,
            attempts=_ATTEMPTS,
        )
        if not final:
            self._partials[key] = summary
        return summary

    async def _summarize_with_fallback(
        self,
        messages: Sequence[AgentMessage],
        *,
        instructions: str | None,
        previous_summary: str | None,
        abort: anyio.Event | None,
        final: bool = True,
    ) -> str:
        """
        OpenClaw's ``summarizeWithFallback``: the messages in chunks chained through their summaries;
        when that fails, again without the oversized messages, each left out with a note.
        """

        async def chunked(part: Sequence[AgentMessage]) -> str:
            if not part:
                return previous_summary or "No prior history."
            budget = self._chunk_budget(part, instructions=instructions)
            chunks = chunk_messages_by_max_tokens(part, max_tokens=budget, token_counter=serialized_tokens)
            summary = previous_summary
            for index, chunk in enumerate(chunks):
                summary = await self._generate(
                    chunk,
                    instructions=instructions,
                    previous_summary=summary,
                    abort=abort,
                    final=final and index == len(chunks) - 1,
                )
            return summary or "No prior history."

        try:
            return await chunked(messages)
        except (CompactionCancelled, SummaryBudgetError, SummaryCutOffError):
            raise
        except (ModelClientError, CompactionError):
            plan = oversized_plan(messages, context_window=self._window, token_counter=self._counter)
            if not plan.small_messages or len(plan.small_messages) == len(messages):
                raise
        small = {id(message) for message in plan.small_messages}
        self._omitted.update(id(message) for message in messages if id(message) not in small)
        summary = await chunked(plan.small_messages)
        return summary + "\n\n" + "\n".join(plan.oversized_notes)

    async def summarize_in_stages(
        self,
        messages: Sequence[AgentMessage],
        *,
        instructions: str | None,
        previous_summary: str | None = None,
        parts: int = 2,
        min_messages_for_split: int = 4,
        abort: anyio.Event | None = None,
    ) -> str:
        """
        OpenClaw's ``summarizeInStages`` (spec §5.5): one pass when the messages fit a chunk,
        otherwise token-share chunks summarised independently and merged by a final call. Sizes are
        those of the serialised text sent (D10).
        """
        if not messages:
            return previous_summary or "No prior history."
        budget = self._chunk_budget(messages, instructions=instructions)
        total = sum(serialized_tokens(message) for message in messages)
        chunks = (
            split_messages_by_token_share(messages, parts=parts, token_counter=self._counter)
            if parts > 1 and len(messages) >= max(2, min_messages_for_split) and total > budget
            else []
        )
        if len(chunks) <= 1:
            return await self._summarize_with_fallback(
                messages, instructions=instructions, previous_summary=previous_summary, abort=abort
            )
        partials = [
            await self._summarize_with_fallback(
                chunk, instructions=instructions, previous_summary=None, abort=abort, final=False
            )
            for chunk in chunks
        ]
        count = len(partials)
        notes: list[AgentMessage] = []
        for index, partial in enumerate(partials):
            if index == 0:
                label = "[Chunk 1 — oldest messages]"
            elif index == count - 1:
                label = f"[Chunk {count} — most recent messages]"
            else:
                label = f"[Chunk {index + 1}/{count}]"
            notes.append(UserMessage(content=f"{label}\n{partial}", timestamp=index))
        merge = (
            f"{MERGE_SUMMARIES_INSTRUCTIONS}\n\n{instructions}"
            if instructions
            else MERGE_SUMMARIES_INSTRUCTIONS
        )
        return await self._summarize_with_fallback(
            notes, instructions=merge, previous_summary=None, abort=abort
        )

    async def safeguard_summary(
        self,
        *,
        messages_to_summarize: Sequence[AgentMessage],
        turn_prefix_messages: Sequence[AgentMessage],
        is_split_turn: bool,
        previous_summary: str | None,
        structured_instructions: str,
        tokens_before: int | None = None,
        abort: anyio.Event | None = None,
    ) -> SafeguardBody:
        """
        Safeguard's LLM path with the quality guard (OpenClaw spec §5.6 steps 4 and 6).

        History budget (OpenClaw §5.5): when the kept content (``tokens_before`` minus what is
        summarised) exceeds ``window * maxHistoryShare * 1.2``, the oldest history chunks are dropped
        until it fits ``window * maxHistoryShare``; the dropped part is summarised first and used as
        the previous summary.

        The previous summary is prepended as a ``<previous-compaction-summary>`` message to
        re-distil. When the audit fails (and retries remain) the request is repeated with feedback;
        a failing retry keeps the last good summary. A retry redoes only the final request (the last
        chunk or the merge): the summaries of earlier chunks are reused (DESIGN D10). The whole run
        stays within D10's budget (see the class); a summary whose every message was left out as too
        large raises :class:`~sessionkeeper.exceptions.CompactionError`.
        """
        has_prefix, everything = _summarized_span(messages_to_summarize, turn_prefix_messages, is_split_turn)
        with self._one_compaction(everything, extra_chunks=1 if has_prefix else 0):
            settings = self._settings
            policy = settings.identifier_policy
            if tokens_before is not None and messages_to_summarize:
                count = self._counter.count_message
                summarizable = sum(count(m) for m in (*messages_to_summarize, *turn_prefix_messages))
                if history_needs_pruning(
                    tokens_before=tokens_before,
                    summarizable_tokens=summarizable,
                    context_window=self._window,
                    max_history_share=settings.max_history_share,
                ):
                    pruned = prune_history_for_context_share(
                        messages_to_summarize,
                        context_window=self._window,
                        max_history_share=settings.max_history_share,
                        token_counter=self._counter,
                    )
                    if pruned.dropped:
                        messages_to_summarize = pruned.kept
                        previous_summary = await self.summarize_in_stages(
                            pruned.dropped,
                            instructions=summarization_instructions(
                                structured_instructions,
                                policy=policy,
                                identifier_text=settings.identifier_instructions,
                            ),
                            previous_summary=previous_summary,
                            abort=abort,
                        )
            history_messages: list[AgentMessage] = list(messages_to_summarize)
            if previous_summary and previous_summary.strip():
                history_messages.insert(
                    0,
                    text_message(
                        f"<previous-compaction-summary>\n{_PREVIOUS_REDISTILL}\n\n{previous_summary.strip()}\n"
                        "</previous-compaction-summary>"
                    ),
                )
            recent = [*messages_to_summarize, *turn_prefix_messages][-10:]
            identifiers = extract_opaque_identifiers(
                "\n".join(filter(None, (message_text(m) for m in recent)))
            )
            latest_ask = next(
                (
                    message_text(m)
                    for m in reversed([*messages_to_summarize, *turn_prefix_messages])
                    if isinstance(m, UserMessage) and message_text(m)
                ),
                None,
            )
            guard = settings.quality_guard_enabled
            total = settings.quality_guard.max_retries + 1 if guard else 1
            current_structured = structured_instructions
            best: SafeguardBody | None = None
            for attempt in range(total):
                current = summarization_instructions(
                    current_structured, policy=policy, identifier_text=settings.identifier_instructions
                )
                try:
                    if messages_to_summarize:
                        history = await self.summarize_in_stages(
                            history_messages, instructions=current, abort=abort
                        )
                    else:
                        history = structured_fallback_summary(previous_summary)
                    split = ""
                    if is_split_turn and turn_prefix_messages:
                        prefix_instructions = "\n\n".join(
                            (TURN_PREFIX_INSTRUCTIONS, "Additional requirements:", current or "")
                        ).rstrip()
                        split = await self.summarize_in_stages(
                            turn_prefix_messages, instructions=prefix_instructions, abort=abort
                        )
                except CompactionCancelled:
                    raise
                except (ModelClientError, CompactionError):
                    if best is not None:
                        return best
                    raise
                body = SafeguardBody(history=history, split_turn=split, attempts=attempt + 1)
                best = body
                can_regenerate = bool(messages_to_summarize) or bool(is_split_turn and turn_prefix_messages)
                if not guard or not can_regenerate:
                    return body
                audit_text = history if not split else f"{history}\n\n---\n\n{_SPLIT_TURN_HEADER}{split}"
                audit = audit_summary(
                    audit_text, identifiers=identifiers, latest_ask=latest_ask, identifier_policy=policy
                )
                if audit.ok:
                    return body
                best = attrs.evolve(body, audit_reasons=audit.reasons)
                feedback = _FEEDBACK_STRICT if policy == "strict" else _FEEDBACK_OTHER
                current_structured = (
                    f"{structured_instructions}\n\n{feedback}\n\n"
                    "Quality check feedback: previous summary failed quality checks "
                    f"({', '.join(audit.reasons)})."
                )
            assert best is not None
            return best
