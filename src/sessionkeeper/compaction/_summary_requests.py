"""
Summary requests of the built-in LLM summariser: sizing, sending, and D10's rules for failures.

:class:`SummaryRequests` sends one summary request at a time through the host's
:class:`~sessionkeeper.ModelClient`; :class:`~sessionkeeper.compaction._llm.LlmSummarizer` builds its two
pipelines on it.

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

import contextlib
import math
from collections.abc import Awaitable, Iterator, Sequence
from typing import Literal

import anyio

from sessionkeeper._clock import SYSTEM_CLOCK, Clock
from sessionkeeper._model_client import ModelClient, ModelRequest
from sessionkeeper._overflow import is_context_overflow
from sessionkeeper._tokens import TokenCounter, token_memo
from sessionkeeper._tracing import count
from sessionkeeper.compaction._budget import CompactionBudget, compaction_budget
from sessionkeeper.compaction._chunking import (
    max_chunk_tokens,
    omitted_note,
    split_messages_by_token_share,
)
from sessionkeeper.compaction._cut import message_role
from sessionkeeper.compaction._prompts import (
    SUMMARIZATION_SYSTEM_PROMPT,
    build_history_prompt,
    build_turn_prefix_prompt,
)
from sessionkeeper.compaction._serialize import serialize_conversation
from sessionkeeper.compaction._settings import CompactionSettings
from sessionkeeper.exceptions import CompactionCancelled, CompactionError, ModelClientError
from sessionkeeper.records import AgentMessage, TextContent, UserMessage


__all__ = (
    "CALLS_BASE",
    "CALLS_PER_CHUNK",
    "MAX_OVERFLOW_REFUSALS",
    "REQUEST_MARGIN_TOKENS",
    "RequestKind",
    "SummaryBudgetError",
    "SummaryCutOffError",
    "SummaryOverflowError",
    "SummaryRequests",
    "input_tokens_of",
    "request_tokens",
    "serialized_tokens",
    "text_message",
)

_MAX_SHRINK_DEPTH = 6
"""D10: how many times a request that overflowed is split or cut before its message is left out."""
MAX_OVERFLOW_REFUSALS = 4
"""D10: the request refused as a context overflow this many times in one compaction fails the summary."""
CALLS_PER_CHUNK = 4
"""D10: a compaction sends at most ``CALLS_PER_CHUNK x chunks + CALLS_BASE`` summary requests."""
CALLS_BASE = 8
"""D10: see :data:`CALLS_PER_CHUNK`."""
REQUEST_MARGIN_TOKENS = 64
"""Tokens kept free in a summary request besides its input and ``max_tokens`` (role and tag overhead)."""
_CUT_NOTE = "\n\n[... cut to fit the summarizer's context window]"

RequestKind = Literal["history", "turn_prefix"]


class SummaryOverflowError(CompactionError):
    """A summary request did not fit the summariser's window (sent and refused, or too big to send)."""


class SummaryCutOffError(CompactionError):
    """A summary reply stopped at the output limit (``stop_reason == "length"``)."""


class SummaryBudgetError(CompactionError):
    """D10: the compaction's summariser budget (calls, overflow refusals) is spent; no more requests."""


def text_message(text: str, timestamp: int = 0) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)], timestamp=timestamp)


def request_tokens(text: str) -> int:
    """pi's chars/4 estimate of a request text."""
    return math.ceil(len(text) / 4)


def input_tokens_of(text: str) -> int:
    """Input tokens of a summary request carrying ``text``: system prompt, text and the margin."""
    return request_tokens(SUMMARIZATION_SYSTEM_PROMPT) + request_tokens(text) + REQUEST_MARGIN_TOKENS


def serialized_tokens(message: AgentMessage) -> int:
    """Tokens of ``message`` as a summary request carries it (serialised, tool results cut, D10)."""
    return request_tokens(serialize_conversation((message,))) + 1


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
    return text_message(text[: len(text) // 2] + _CUT_NOTE, timestamp=getattr(message, "timestamp", 0) or 0)


def _omitted_note(message: AgentMessage, counter: TokenCounter) -> str:
    """The note for ``message`` (the original, not a cut of it) left out of the summary."""
    return omitted_note(message_role(message) or "message", counter.count_message(message))


class SummaryRequests:
    """
    One compaction's summary requests and their D10 budget (base of ``LlmSummarizer``, which
    documents the arguments).

    Attributes:
        calls: Summary requests sent to the client so far (requests too big to send are not sent).
        overflow_refusals: Requests of the current compaction the model refused as too long.
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
        total = sum(serialized_tokens(message) for message in messages)
        chunks = max(1, math.ceil(total / chunk)) + extra_chunks
        self._max_calls = self.calls + CALLS_PER_CHUNK * chunks + CALLS_BASE
        self.overflow_refusals = 0
        self._omitted = set()

    @contextlib.contextmanager
    def _one_compaction(self, messages: Sequence[AgentMessage], *, extra_chunks: int = 0) -> Iterator[None]:
        """
        The requests made inside form one compaction: a fresh D10 budget for ``messages`` first, and
        on a normal exit a failure when every one of them was left out as too large.
        """
        self._begin(messages, extra_chunks=extra_chunks)
        yield
        self._check_covered(messages)

    def _check_covered(self, messages: Sequence[AgentMessage]) -> None:
        """A summary whose every message was left out is a failure (D10), never written as ``llm``."""
        if messages and all(id(message) in self._omitted for message in messages):
            raise CompactionError(
                f"every one of the {len(messages)} messages was left out of the summary as too large"
            )

    async def _complete(self, text: str, *, max_tokens: int, abort: anyio.Event | None, purpose: str) -> str:
        """
        One request. Raises ``SummaryOverflowError`` (too big to send, or refused as an overflow),
        ``SummaryCutOffError`` (``"length"``), :class:`CompactionError` (``"error"``, ``"toolUse"``,
        empty) or :class:`ModelClientError` (the client raised).
        """
        input_tokens = input_tokens_of(text)
        size = input_tokens + max_tokens
        if size > self._window:
            raise SummaryOverflowError(
                f"summary request of ~{input_tokens} + {max_tokens} tokens "
                f"exceeds the {self._window}-token window"
            )
        if self._refused_at is not None and size >= self._refused_at:
            raise SummaryOverflowError(
                f"summary request of ~{size} tokens not sent: "
                f"one of ~{self._refused_at} was refused as too long"
            )
        if self._max_calls is not None and self.calls >= self._max_calls:
            raise SummaryBudgetError(
                f"summarizer budget of {self._max_calls} requests for this compaction spent (D10)"
            )
        request = ModelRequest(
            system_prompt=SUMMARIZATION_SYSTEM_PROMPT,
            messages=(text_message(text),),
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
            raise SummaryCutOffError(f"summary cut off at the output limit of {max_tokens} tokens")
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
            return SummaryBudgetError(
                f"{message} ({self.overflow_refusals} requests refused as too long in this compaction, D10)"
            )
        return SummaryOverflowError(message)

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
        room = self._window - input_tokens_of(text)
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
        last: SummaryOverflowError
        grown = False
        failures = 0
        while True:
            try:
                return await self._complete(text, max_tokens=max_tokens, abort=abort, purpose=purpose)
            except CompactionCancelled:
                raise
            except SummaryOverflowError as err:
                last = err
                break  # never resent unchanged (D10)
            except SummaryCutOffError:
                larger = None if grown else self._larger_cap(text, max_tokens)
                if larger is None:
                    raise  # retried once at most (D10): the chain falls back
                max_tokens, grown = larger, True
            except SummaryBudgetError:
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

        def again(
            part: Sequence[AgentMessage], previous: str | None, whole: AgentMessage | None = None
        ) -> Awaitable[str]:
            return self._request(
                kind,
                part,
                previous_summary=previous,
                instructions=instructions,
                abort=abort,
                attempts=attempts,
                depth=depth + 1,
                original=whole,
            )

        if len(messages) > 1:
            first, second = _halves(messages, self._counter)
            if kind == "turn_prefix":
                head = await again(first, None)
                tail = await again(second, None)
                return f"{head}\n\n{tail}"
            return await again(second, await again(first, previous_summary))
        cut = _cut_in_half(messages[0])
        if cut is None:
            raise last  # a short message that does not fit: the request itself is the problem
        return await again([cut], previous_summary, original or messages[0])

    def _chunk_budget(self, messages: Sequence[AgentMessage], *, instructions: str | None) -> int:
        """
        Serialised tokens one chunk may carry (D10): what one request holds beside the prompt, a
        chained previous summary and the reply (:func:`max_chunk_tokens` with ``room``).
        """
        prompt = build_history_prompt("", previous_summary="-", custom_instructions=instructions)
        fixed = input_tokens_of(prompt)
        room = self._window - fixed - 2 * self._budget.summary_max_tokens
        return max_chunk_tokens(
            messages, context_window=self._window, room=room, token_counter=serialized_tokens
        )
