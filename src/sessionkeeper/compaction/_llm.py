"""
The built-in LLM summariser, through the host's :class:`~sessionkeeper.ModelClient`.

Two pipelines, selected by the mode (DESIGN D4: they differ only in how the summary is made):

- **default** (pi 0.73.1, pi spec §13.4): one history request (initial or update prompt with the
  previous summary) and, for a split turn, one turn-prefix request, run concurrently and merged.
- **safeguard** (OpenClaw 2026.7.35, spec §5.5-5.6): structured headings, the previous summary
  prepended for re-distillation, chunked summarisation sized to the window with a merge call,
  oversized messages cut out, and the quality audit with retries.

Request sizes (DESIGN D9/D10, deviations): ``max_tokens`` is bounded by the window
(:func:`~sessionkeeper.compaction.compaction_budget`); chunks are sized on the serialised text that is
actually sent (tool results cut to 2000 chars), with a floor, so a small window no longer gets one
request per message. A request that would not fit the window is not sent; one that failed as a context
overflow (:func:`~sessionkeeper._overflow.is_context_overflow`) is never sent again unchanged: its
messages are split in two (summarised in turn, the second half updating the first half's summary) or
a single message is cut in half, down to 6 levels, after which that message is left out with a note
instead of failing the whole summary. A refused size is remembered: no later request of that size or more
is sent (it is split without a call). The cost is bounded per compaction: the 4th request refused as an
overflow, or a request beyond ``4 x chunks + 8`` calls (``chunks``: what the messages fill at D10's chunk
size), fails the LLM summary, and so does a summary whose every message was left out; the compactor then
falls back to the extractive summary (DESIGN D3). Other failures keep the retry policy (3 attempts, 0.5 s
then 1 s). A reply cut off at the output limit (``stop_reason == "length"``) or one that tried to call a
tool is a failed summary, never written (issue 15 item 9): a cut-off reply is retried once with up to
twice the output cap when the window has room for it; a second cut-off, or no room, fails the summary.

Failures raise (the compactor's chain then falls back, DESIGN D3): a client exception becomes
:class:`~sessionkeeper.exceptions.ModelClientError`; an ``"error"`` reply or an empty text raises
:class:`~sessionkeeper.exceptions.CompactionError`. Cancellation and ``TimeoutError`` propagate
unchanged; an ``"aborted"`` reply raises :class:`~sessionkeeper.exceptions.CompactionCancelled`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import anyio
import attrs

from sessionkeeper._clock import SYSTEM_CLOCK, Clock
from sessionkeeper._model_client import ModelClient, ModelRequest
from sessionkeeper._overflow import is_context_overflow
from sessionkeeper._tokens import TokenCounter, token_memo
from sessionkeeper._tracing import count
from sessionkeeper.compaction._budget import CompactionBudget, compaction_budget
from sessionkeeper.compaction._chunking import (
    chunk_messages_by_max_tokens,
    history_needs_pruning,
    max_chunk_tokens,
    omitted_note,
    oversized_plan,
    prune_history_for_context_share,
    split_messages_by_token_share,
)
from sessionkeeper.compaction._cut import message_role
from sessionkeeper.compaction._extractive import message_text
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
from sessionkeeper.records import AgentMessage, TextContent, UserMessage


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
_MAX_SHRINK_DEPTH = 6
"""D10: how many times a request that overflowed is split or cut before its message is left out."""
MAX_OVERFLOW_REFUSALS = 4
"""D10: the request refused as a context overflow this many times in one compaction fails the summary."""
CALLS_PER_CHUNK = 4
"""D10: a compaction sends at most ``CALLS_PER_CHUNK x chunks + CALLS_BASE`` summary requests."""
CALLS_BASE = 8
"""D10: see :data:`CALLS_PER_CHUNK`."""
_REQUEST_MARGIN_TOKENS = 64
"""Tokens kept free in a summary request besides its input and ``max_tokens`` (role and tag overhead)."""
_CUT_NOTE = "\n\n[... cut to fit the summarizer's context window]"

RequestKind = Literal["history", "turn_prefix"]


class _SummaryOverflowError(CompactionError):
    """A summary request did not fit the summariser's window (sent and refused, or too big to send)."""


class _SummaryCutOffError(CompactionError):
    """A summary reply stopped at the output limit (``stop_reason == "length"``)."""


class _SummaryBudgetError(CompactionError):
    """D10: the compaction's summariser budget (calls, overflow refusals) is spent; no more requests."""


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


def _tokens(text: str) -> int:
    """pi's chars/4 estimate of a request text."""
    return math.ceil(len(text) / 4)


def _serialized_tokens(message: AgentMessage) -> int:
    """Tokens of ``message`` as a summary request carries it (serialised, tool results cut, D10)."""
    return _tokens(serialize_conversation((message,))) + 1


def _halves(messages: Sequence[AgentMessage], counter: TokenCounter) -> list[list[AgentMessage]]:
    """Two parts of about equal token share, tool calls kept with their results when possible."""
    parts = split_messages_by_token_share(messages, parts=2, token_counter=counter)
    if len(parts) >= 2:
        return parts
    middle = len(messages) // 2
    return [list(messages[:middle]), list(messages[middle:])]


def _cut_in_half(message: AgentMessage) -> AgentMessage | None:
    """``message`` as a user text of half its serialised length, or ``None`` when too short to cut."""
    text = serialize_conversation((message,))
    if len(text) < 200:
        return None
    return _text_message(text[: len(text) // 2] + _CUT_NOTE, timestamp=getattr(message, "timestamp", 0) or 0)


def _omitted_note(message: AgentMessage, counter: TokenCounter) -> str:
    """The note for ``message`` (the original, not a cut of it) left out of the summary."""
    return omitted_note(message_role(message) or "message", counter.count_message(message))


class LlmSummarizer:
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

    def __init__(
        self,
        client: ModelClient,
        *,
        settings: CompactionSettings,
        context_window: int,
        clock: Clock = SYSTEM_CLOCK,
        budget: CompactionBudget | None = None,
        token_counter: TokenCounter | None = None,
    ) -> None:
        self._client = client
        self._counter = token_memo(token_counter)
        self._settings = settings
        self._window = max(1, context_window)
        self._clock = clock
        self._budget = budget or compaction_budget(
            settings, context_window=self._window, keep_recent_tokens=None, warn=False
        )
        self._partials: dict[tuple[object, ...], str] = {}
        self.calls = 0
        self.overflow_refusals = 0
        self._max_calls: int | None = None
        self._refused_at: int | None = None
        self._omitted: set[int] = set()

    def _begin(self, messages: Sequence[AgentMessage], *, extra_chunks: int = 0) -> None:
        """Start one compaction's budget (D10): calls, overflow refusals and left-out messages."""
        chunk = max(1, self._chunk_budget(messages, instructions=None))
        total = sum(_serialized_tokens(message) for message in messages)
        chunks = max(1, math.ceil(total / chunk)) + extra_chunks
        self._max_calls = self.calls + CALLS_PER_CHUNK * chunks + CALLS_BASE
        self.overflow_refusals = 0
        self._omitted = set()

    def _check_covered(self, messages: Sequence[AgentMessage]) -> None:
        """A summary whose every message was left out is a failure (D10), never written as ``llm``."""
        if messages and all(id(message) in self._omitted for message in messages):
            raise CompactionError(
                f"every one of the {len(messages)} messages was left out of the summary as too large"
            )

    async def _complete(self, text: str, *, max_tokens: int, abort: anyio.Event | None, purpose: str) -> str:
        """
        One request. Raises ``_SummaryOverflowError`` (too big to send, or refused as an overflow),
        ``_SummaryCutOffError`` (``"length"``), :class:`CompactionError` (``"error"``, ``"toolUse"``,
        empty) or :class:`ModelClientError` (the client raised).
        """
        input_tokens = _tokens(SUMMARIZATION_SYSTEM_PROMPT) + _tokens(text) + _REQUEST_MARGIN_TOKENS
        size = input_tokens + max_tokens
        if size > self._window:
            raise _SummaryOverflowError(
                f"summary request of ~{input_tokens} + {max_tokens} tokens "
                f"exceeds the {self._window}-token window"
            )
        if self._refused_at is not None and size >= self._refused_at:
            raise _SummaryOverflowError(
                f"summary request of ~{size} tokens not sent: "
                f"one of ~{self._refused_at} was refused as too long"
            )
        if self._max_calls is not None and self.calls >= self._max_calls:
            raise _SummaryBudgetError(
                f"summarizer budget of {self._max_calls} requests for this compaction spent (D10)"
            )
        request = ModelRequest(
            system_prompt=SUMMARIZATION_SYSTEM_PROMPT,
            messages=(_text_message(text),),
            max_tokens=max(1, max_tokens),
            model=self._settings.model,
            thinking_level=self._settings.thinking_level,
            abort=abort,
            metadata={"purpose": purpose},
        )
        self.calls += 1
        count("summarizer_calls")
        try:
            response = await self._client.complete(request)
        except TimeoutError:
            raise
        except Exception as err:
            if is_context_overflow(err, context_window=self._window):
                raise self._refused(size, f"summarization request overflowed: {err}") from err
            raise ModelClientError(f"summarization request failed: {err}") from err
        if response.stop_reason == "aborted" or (abort is not None and abort.is_set()):
            raise CompactionCancelled("summarization aborted")
        if response.stop_reason == "error":
            if is_context_overflow(response.text or ""):
                raise self._refused(size, f"summarization request overflowed: {response.text}")
            raise CompactionError(f"Summarization failed: {response.text or 'Unknown error'}")
        if response.stop_reason == "length":
            if response.usage is not None and response.usage.output == 0:
                raise self._refused(size, "summarization request overflowed (no output, stop_reason length)")
            raise _SummaryCutOffError(f"summary cut off at the output limit of {max_tokens} tokens")
        if response.stop_reason == "toolUse":
            raise CompactionError("summarizer tried to call a tool instead of answering with a summary")
        if not response.text.strip():
            raise CompactionError("summarizer returned an empty summary")
        return response.text

    def _refused(self, size: int, message: str) -> CompactionError:
        """Record a request of ``size`` tokens refused as an overflow; the error to raise (D10)."""
        self._refused_at = size if self._refused_at is None else min(self._refused_at, size)
        self.overflow_refusals += 1
        if self.overflow_refusals >= MAX_OVERFLOW_REFUSALS:
            return _SummaryBudgetError(
                f"{message} ({self.overflow_refusals} requests refused as too long in this compaction, D10)"
            )
        return _SummaryOverflowError(message)

    def _request_text(
        self,
        kind: RequestKind,
        messages: Sequence[AgentMessage],
        *,
        previous_summary: str | None,
        instructions: str | None,
    ) -> str:
        conversation = serialize_conversation(messages)
        if kind == "turn_prefix":
            return build_turn_prefix_prompt(conversation)
        return build_history_prompt(
            conversation, previous_summary=previous_summary, custom_instructions=instructions
        )

    def _larger_cap(self, text: str, max_tokens: int) -> int | None:
        """Up to twice ``max_tokens`` when the window has room for it beside ``text``, else ``None``."""
        room = self._window - _tokens(SUMMARIZATION_SYSTEM_PROMPT) - _tokens(text) - _REQUEST_MARGIN_TOKENS
        larger = min(2 * max_tokens, room)
        return larger if larger > max_tokens else None

    async def _request(
        self,
        kind: RequestKind,
        messages: Sequence[AgentMessage],
        *,
        previous_summary: str | None,
        instructions: str | None,
        abort: anyio.Event | None,
        attempts: int = 1,
        depth: int = 0,
        original: AgentMessage | None = None,
    ) -> str:
        """
        One summary of ``messages`` with D10's rules: ``attempts`` tries for ordinary failures (1 in
        default mode, as pi; 3 in safeguard mode, as OpenClaw), one retry with a larger output cap for
        a cut-off reply (when the window has room; else it fails), and for an overflow a split (or a
        cut of a lone message) instead of a resend; a lone message that cannot be made to fit is left
        out with a note sized on ``original`` (the message before it was cut).
        """
        budget = self._budget
        max_tokens = budget.summary_max_tokens if kind == "history" else budget.turn_prefix_max_tokens
        purpose = "compaction" if kind == "history" else "compaction-turn-prefix"
        text = self._request_text(
            kind, messages, previous_summary=previous_summary, instructions=instructions
        )
        last: _SummaryOverflowError
        grown = False
        failures = 0
        while True:
            try:
                return await self._complete(text, max_tokens=max_tokens, abort=abort, purpose=purpose)
            except CompactionCancelled:
                raise
            except _SummaryOverflowError as err:
                last = err
                break  # never resent unchanged (D10)
            except _SummaryCutOffError:
                larger = None if grown else self._larger_cap(text, max_tokens)
                if larger is None:
                    raise  # retried once at most (D10): the chain falls back
                max_tokens, grown = larger, True
            except _SummaryBudgetError:
                raise
            except (ModelClientError, CompactionError):
                failures += 1
                if failures >= attempts:
                    raise
                await self._clock.sleep(min(5.0, 0.5 * 2 ** (failures - 1)))
        if depth >= _MAX_SHRINK_DEPTH:
            if len(messages) == 1:
                whole = original or messages[0]
                self._omitted.add(id(whole))
                note = _omitted_note(whole, self._counter)
                return f"{previous_summary}\n\n{note}" if previous_summary else note
            raise last
        if len(messages) > 1:
            first, second = _halves(messages, self._counter)
            if kind == "turn_prefix":
                head = await self._request(
                    kind,
                    first,
                    previous_summary=None,
                    instructions=instructions,
                    abort=abort,
                    attempts=attempts,
                    depth=depth + 1,
                )
                tail = await self._request(
                    kind,
                    second,
                    previous_summary=None,
                    instructions=instructions,
                    abort=abort,
                    attempts=attempts,
                    depth=depth + 1,
                )
                return f"{head}\n\n{tail}"
            summary = await self._request(
                kind,
                first,
                previous_summary=previous_summary,
                instructions=instructions,
                abort=abort,
                attempts=attempts,
                depth=depth + 1,
            )
            return await self._request(
                kind,
                second,
                previous_summary=summary,
                instructions=instructions,
                abort=abort,
                attempts=attempts,
                depth=depth + 1,
            )
        cut = _cut_in_half(messages[0])
        if cut is None:
            raise last  # a short message that does not fit: the request itself is the problem
        return await self._request(
            kind,
            [cut],
            previous_summary=previous_summary,
            instructions=instructions,
            abort=abort,
            attempts=attempts,
            depth=depth + 1,
            original=original or messages[0],
        )

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
        self._begin(messages)
        summary = await self._request(
            "history",
            messages,
            previous_summary=previous_summary,
            instructions=custom_instructions,
            abort=abort,
        )
        self._check_covered(messages)
        return summary

    async def turn_prefix_summary(
        self, messages: Sequence[AgentMessage], *, abort: anyio.Event | None = None
    ) -> str:
        """
        pi's ``generateTurnPrefixSummary``: ``maxTokens = floor(0.5 * reserveTokens)``, at most an
        eighth of ``window - effectiveReserve`` (DESIGN D9); one request when it fits, else D10's split,
        within D10's budget (see the class).
        """
        self._begin(messages)
        summary = await self._request(
            "turn_prefix", messages, previous_summary=None, instructions=None, abort=abort
        )
        self._check_covered(messages)
        return summary

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
        split = bool(is_split_turn and turn_prefix_messages)
        everything = [*messages_to_summarize, *(turn_prefix_messages if split else ())]
        self._begin(everything, extra_chunks=1 if split else 0)
        if not split:
            summary = await self._request(
                "history",
                messages_to_summarize,
                previous_summary=previous_summary,
                instructions=custom_instructions,
                abort=abort,
            )
            self._check_covered(everything)
            return summary
        results: dict[str, str] = {}

        async def run_history() -> None:
            if messages_to_summarize:
                results["history"] = await self._request(
                    "history",
                    messages_to_summarize,
                    previous_summary=previous_summary,
                    instructions=custom_instructions,
                    abort=abort,
                )
            else:
                results["history"] = "No prior history."

        async def run_prefix() -> None:
            results["prefix"] = await self._request(
                "turn_prefix", turn_prefix_messages, previous_summary=None, instructions=None, abort=abort
            )

        async with anyio.create_task_group() as group:
            group.start_soon(run_history)
            group.start_soon(run_prefix)
        self._check_covered(everything)
        return f"{results['history']}\n\n---\n\n{_SPLIT_TURN_HEADER}{results['prefix']}"

    # ------------------------------------------------------------------ safeguard mode (OpenClaw)

    def _chunk_budget(self, messages: Sequence[AgentMessage], *, instructions: str | None) -> int:
        """
        Serialised tokens one chunk may carry (D10): what one request holds beside the prompt, a
        chained previous summary and the reply (:func:`max_chunk_tokens` with ``room``).
        """
        prompt = build_history_prompt("", previous_summary="-", custom_instructions=instructions)
        fixed = _tokens(SUMMARIZATION_SYSTEM_PROMPT) + _tokens(prompt) + _REQUEST_MARGIN_TOKENS
        room = self._window - fixed - 2 * self._budget.summary_max_tokens
        return max_chunk_tokens(
            messages, context_window=self._window, room=room, token_counter=_serialized_tokens
        )

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

    async def _summarize_chunks(
        self,
        messages: Sequence[AgentMessage],
        *,
        instructions: str | None,
        previous_summary: str | None,
        abort: anyio.Event | None,
        final: bool = True,
    ) -> str:
        if not messages:
            return previous_summary or "No prior history."
        budget = self._chunk_budget(messages, instructions=instructions)
        chunks = chunk_messages_by_max_tokens(messages, max_tokens=budget, token_counter=_serialized_tokens)
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

    async def _summarize_with_fallback(
        self,
        messages: Sequence[AgentMessage],
        *,
        instructions: str | None,
        previous_summary: str | None,
        abort: anyio.Event | None,
        final: bool = True,
    ) -> str:
        try:
            return await self._summarize_chunks(
                messages,
                instructions=instructions,
                previous_summary=previous_summary,
                abort=abort,
                final=final,
            )
        except (CompactionCancelled, _SummaryBudgetError, _SummaryCutOffError):
            raise
        except (ModelClientError, CompactionError):
            plan = oversized_plan(messages, context_window=self._window, token_counter=self._counter)
            if not plan.small_messages or len(plan.small_messages) == len(messages):
                raise
        small = {id(message) for message in plan.small_messages}
        self._omitted.update(id(message) for message in messages if id(message) not in small)
        summary = await self._summarize_chunks(
            plan.small_messages,
            instructions=instructions,
            previous_summary=previous_summary,
            abort=abort,
            final=final,
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
        otherwise token-share chunks summarised independently and merged by a final call. Sizes are
        those of the serialised text sent (D10).
        """
        if not messages:
            return previous_summary or "No prior history."
        budget = self._chunk_budget(messages, instructions=instructions)
        total = sum(_serialized_tokens(message) for message in messages)
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
        split_turn = bool(is_split_turn and turn_prefix_messages)
        everything = [*messages_to_summarize, *(turn_prefix_messages if split_turn else ())]
        self._begin(everything, extra_chunks=1 if split_turn else 0)
        body = await self._safeguard(
            messages_to_summarize=messages_to_summarize,
            turn_prefix_messages=turn_prefix_messages,
            is_split_turn=is_split_turn,
            previous_summary=previous_summary,
            structured_instructions=structured_instructions,
            tokens_before=tokens_before,
            abort=abort,
        )
        self._check_covered(everything)
        return body

    async def _safeguard(
        self,
        *,
        messages_to_summarize: Sequence[AgentMessage],
        turn_prefix_messages: Sequence[AgentMessage],
        is_split_turn: bool,
        previous_summary: str | None,
        structured_instructions: str,
        tokens_before: int | None,
        abort: anyio.Event | None,
    ) -> SafeguardBody:
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
