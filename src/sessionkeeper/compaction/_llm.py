"""
The built-in LLM summariser, through the host's :class:`~sessionkeeper.ModelClient`.

Two pipelines, selected by the mode (DESIGN D4: they differ only in how the summary is made):

- **default** (pi 0.73.1, pi spec §13.4): one history request (initial or update prompt with the
  previous summary) and, for a split turn, one turn-prefix request, run concurrently and merged.
- **safeguard** (OpenClaw 2026.7.35, spec §5.5-5.6): structured headings, the previous summary
  prepended for re-distillation, chunked summarisation sized to the window with a merge call,
  oversized messages cut out, and the quality audit with retries.

Failures raise (the compactor's chain then falls back, DESIGN D3): a client exception becomes
:class:`~sessionkeeper.exceptions.ModelClientError`; an ``"error"`` reply or an empty text raises
:class:`~sessionkeeper.exceptions.CompactionError`. Cancellation and ``TimeoutError`` propagate
unchanged; an ``"aborted"`` reply raises :class:`~sessionkeeper.exceptions.CompactionCancelled`.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import attrs

from sessionkeeper._clock import SYSTEM_CLOCK, Clock
from sessionkeeper._model_client import ModelClient, ModelRequest
from sessionkeeper.compaction._budget import CompactionBudget, compaction_budget
from sessionkeeper.compaction._chunking import (
    chunk_messages_by_max_tokens,
    history_needs_pruning,
    max_chunk_tokens,
    oversized_plan,
    prune_history_for_context_share,
    split_messages_by_token_share,
)
from sessionkeeper.compaction._extractive import message_text
from sessionkeeper.compaction._memo import message_tokens as estimate_tokens
from sessionkeeper.compaction._prompts import (
    MERGE_SUMMARIES_INSTRUCTIONS,
    SUMMARIZATION_SYSTEM_PROMPT,
    TURN_PREFIX_INSTRUCTIONS,
    build_history_prompt,
    build_turn_prefix_prompt,
    structured_fallback_summary,
    summarization_instructions,
)
from sessionkeeper.compaction._quality import audit_summary, extract_opaque_identifiers
from sessionkeeper.compaction._serialize import serialize_conversation
from sessionkeeper.compaction._settings import CompactionSettings
from sessionkeeper.exceptions import CompactionCancelled, CompactionError, ModelClientError
from sessionkeeper.transcript._messages import AgentMessage, TextContent, UserMessage


__all__ = ("LlmSummarizer", "SafeguardBody")

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


def _text_message(text: str, timestamp: int = 0) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)], timestamp=timestamp)


class LlmSummarizer:
    """
    Summaries made by the host's model (pi spec §13.4; OpenClaw spec §5.5-5.6).

    Args:
        client: The host's :class:`~sessionkeeper.ModelClient`.
        settings: Compaction settings (reserve tokens, model, thinking level, identifier policy,
            quality guard).
        context_window: The summarising model's window in tokens (sizes safeguard chunks).
        clock: Waits between retries of a failed chunk (500 ms, then 1000 ms).
        budget: The window-derived request sizes (DESIGN D9); ``None``: derived from ``settings``
            and ``context_window`` (:func:`~sessionkeeper.compaction.compaction_budget`).
    """

    def __init__(
        self,
        client: ModelClient,
        *,
        settings: CompactionSettings,
        context_window: int,
        clock: Clock = SYSTEM_CLOCK,
        budget: CompactionBudget | None = None,
    ) -> None:
        self._client = client
        self._settings = settings
        self._window = max(1, context_window)
        self._clock = clock
        self._budget = budget or compaction_budget(
            settings, context_window=self._window, keep_recent_tokens=None, warn=False
        )

    async def _complete(self, text: str, *, max_tokens: int, abort: anyio.Event | None, purpose: str) -> str:
        request = ModelRequest(
            system_prompt=SUMMARIZATION_SYSTEM_PROMPT,
            messages=(_text_message(text),),
            max_tokens=max(1, max_tokens),
            model=self._settings.model,
            thinking_level=self._settings.thinking_level,
            abort=abort,
            metadata={"purpose": purpose},
        )
        try:
            response = await self._client.complete(request)
        except TimeoutError:
            raise
        except Exception as err:
            raise ModelClientError(f"summarization request failed: {err}") from err
        if response.stop_reason == "aborted" or (abort is not None and abort.is_set()):
            raise CompactionCancelled("summarization aborted")
        if response.stop_reason == "error":
            raise CompactionError(f"Summarization failed: {response.text or 'Unknown error'}")
        if not response.text.strip():
            raise CompactionError("summarizer returned an empty summary")
        return response.text

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
        ``window - effectiveReserve`` (DESIGN D9).
        """
        text = build_history_prompt(
            serialize_conversation(messages),
            previous_summary=previous_summary,
            custom_instructions=custom_instructions,
        )
        max_tokens = self._budget.summary_max_tokens
        return await self._complete(text, max_tokens=max_tokens, abort=abort, purpose="compaction")

    async def turn_prefix_summary(
        self, messages: Sequence[AgentMessage], *, abort: anyio.Event | None = None
    ) -> str:
        """
        pi's ``generateTurnPrefixSummary``: ``maxTokens = floor(0.5 * reserveTokens)``, at most an
        eighth of ``window - effectiveReserve`` (DESIGN D9).
        """
        text = build_turn_prefix_prompt(serialize_conversation(messages))
        max_tokens = self._budget.turn_prefix_max_tokens
        return await self._complete(
            text, max_tokens=max_tokens, abort=abort, purpose="compaction-turn-prefix"
        )

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
        ``history + "\\n\\n---\\n\\n**Turn Context (split turn):**\\n\\n" + prefix``.
        """
        if not (is_split_turn and turn_prefix_messages):
            return await self.history_summary(
                messages_to_summarize,
                previous_summary=previous_summary,
                custom_instructions=custom_instructions,
                abort=abort,
            )
        results: dict[str, str] = {}

        async def run_history() -> None:
            if messages_to_summarize:
                results["history"] = await self.history_summary(
                    messages_to_summarize,
                    previous_summary=previous_summary,
                    custom_instructions=custom_instructions,
                    abort=abort,
                )
            else:
                results["history"] = "No prior history."

        async def run_prefix() -> None:
            results["prefix"] = await self.turn_prefix_summary(turn_prefix_messages, abort=abort)

        async with anyio.create_task_group() as group:
            group.start_soon(run_history)
            group.start_soon(run_prefix)
        return f"{results['history']}\n\n---\n\n{_SPLIT_TURN_HEADER}{results['prefix']}"

    # ------------------------------------------------------------------ safeguard mode (OpenClaw)

    async def _generate(
        self,
        messages: Sequence[AgentMessage],
        *,
        instructions: str | None,
        previous_summary: str | None,
        abort: anyio.Event | None,
    ) -> str:
        """One summary request with up to 3 attempts (OpenClaw ``summarizeChunks``)."""
        last: Exception | None = None
        for attempt in range(_ATTEMPTS):
            try:
                return await self.history_summary(
                    messages, previous_summary=previous_summary, custom_instructions=instructions, abort=abort
                )
            except CompactionCancelled:
                raise
            except (ModelClientError, CompactionError) as err:
                last = err
                if attempt < _ATTEMPTS - 1:
                    await self._clock.sleep(min(5.0, 0.5 * 2**attempt))
        assert last is not None
        raise last

    async def _summarize_chunks(
        self,
        messages: Sequence[AgentMessage],
        *,
        instructions: str | None,
        previous_summary: str | None,
        abort: anyio.Event | None,
    ) -> str:
        if not messages:
            return previous_summary or "No prior history."
        budget = max_chunk_tokens(messages, context_window=self._window)
        summary = previous_summary
        for chunk in chunk_messages_by_max_tokens(messages, max_tokens=budget):
            summary = await self._generate(
                chunk, instructions=instructions, previous_summary=summary, abort=abort
            )
        return summary or "No prior history."

    async def _summarize_with_fallback(
        self,
        messages: Sequence[AgentMessage],
        *,
        instructions: str | None,
        previous_summary: str | None,
        abort: anyio.Event | None,
    ) -> str:
        try:
            return await self._summarize_chunks(
                messages, instructions=instructions, previous_summary=previous_summary, abort=abort
            )
        except CompactionCancelled:
            raise
        except (ModelClientError, CompactionError):
            plan = oversized_plan(messages, context_window=self._window)
            if not plan.small_messages or len(plan.small_messages) == len(messages):
                raise
        summary = await self._summarize_chunks(
            plan.small_messages, instructions=instructions, previous_summary=previous_summary, abort=abort
        )
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
        otherwise token-share chunks summarised independently and merged by a final call.
        """
        if not messages:
            return previous_summary or "No prior history."
        budget = max_chunk_tokens(messages, context_window=self._window)
        total = sum(estimate_tokens(message) for message in messages)
        chunks = (
            split_messages_by_token_share(messages, parts=parts)
            if parts > 1 and len(messages) >= max(2, min_messages_for_split) and total > budget
            else []
        )
        if len(chunks) <= 1:
            return await self._summarize_with_fallback(
                messages, instructions=instructions, previous_summary=previous_summary, abort=abort
            )
        partials = [
            await self._summarize_with_fallback(
                chunk, instructions=instructions, previous_summary=None, abort=abort
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
        a failing retry keeps the last good summary.
        """
        settings = self._settings
        policy = settings.identifier_policy
        if tokens_before is not None and messages_to_summarize:
            summarizable = sum(estimate_tokens(m) for m in (*messages_to_summarize, *turn_prefix_messages))
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
                _text_message(
                    f"<previous-compaction-summary>\n{_PREVIOUS_REDISTILL}\n\n{previous_summary.strip()}\n"
                    "</previous-compaction-summary>"
                ),
            )
        recent = [*messages_to_summarize, *turn_prefix_messages][-10:]
        identifiers = extract_opaque_identifiers("\n".join(filter(None, (message_text(m) for m in recent))))
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
