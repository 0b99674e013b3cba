"""
The runtime's end-of-turn step, run when :meth:`SessionRuntime.after_turn` completes a turn: what the
reply delivers (OpenClaw §8), the threshold compaction with the flush first (D4, B11, B13, B14), the
cache-TTL marker (OpenClaw §7) and the store entry's usage and token fields.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from sessionkeeper._silent import is_silent_reply_payload, strip_silent_token
from sessionkeeper.runtime._budget import estimate_context_usage
from sessionkeeper.runtime._compaction_step import CompactionStep
from sessionkeeper.runtime._flush_step import MemoryFlushStep
from sessionkeeper.runtime._parts import RuntimeParts
from sessionkeeper.runtime._request_step import RequestStep
from sessionkeeper.runtime._runtime_session import RuntimeSession, patch_session_entry
from sessionkeeper.runtime._runtime_types import CompactionOutcome, MemoryFlushOutcome
from sessionkeeper.runtime._triggers import CompactionDecision, decide_threshold_compaction
from sessionkeeper.store import EntryRider
from sessionkeeper.transcript import (
    AgentMessage,
    AssistantMessage,
    CustomEntry,
    TextContent,
    TranscriptEntry,
    message_entry_of,
)


__all__ = ("TurnEnd", "TurnEndStep", "TurnWrite", "reply_delivery")


def reply_delivery(last_reply: AssistantMessage | None) -> tuple[str | None, bool]:
    """
    The text the turn's last reply delivers (``None``: nothing) and whether it is silent: a ``NO_REPLY``
    payload, or text that is nothing but the silent token (OpenClaw §8).
    """
    if last_reply is None:
        return None, False
    text = "".join(block.text for block in last_reply.content if isinstance(block, TextContent))
    if is_silent_reply_payload(text):
        return None, True
    delivered = strip_silent_token(text) or None
    return delivered, delivered is None and bool(text.strip())


@attrs.frozen(kw_only=True)
class TurnEnd:
    """
    What ending a turn did.

    Attributes:
        memory_flush: The flush that ran before the compaction, if any.
        compaction: The threshold compaction that ran (or was refused, B11), if any.
        tokens: The context estimate after the turn (after the compaction, if one ran), in tokens.
        marker: The ``openclaw.cache-ttl`` marker appended, if any.
    """

    memory_flush: MemoryFlushOutcome | None
    compaction: CompactionOutcome | None
    tokens: int
    marker: TranscriptEntry | None


@attrs.frozen(kw_only=True)
class TurnWrite:
    """
    How a completed turn's reply is written (:meth:`TurnEndStep.plan_write`).

    Attributes:
        rider: The end-of-turn store entry write, landed with the reply's write (``transcript._riders``),
            when the turn's end would do nothing else but append the cache-TTL marker; else ``None``.
        expected: The context estimate after the reply the plan was made for, in tokens (the rider's
            ``totalTokens``; when the estimate after the write differs, :meth:`TurnEndStep.finish` runs).
        with_marker: The cache-TTL marker joins the reply's write (its last line).
    """

    rider: EntryRider | None
    expected: int
    with_marker: bool


NO_PLAN = TurnWrite(rider=None, expected=0, with_marker=False)
"""The write of a turn not complete (inside a tool loop): the reply alone, nothing riding on it."""


class TurnEndStep:
    """
    Ends the turns of one runtime's sessions.

    Args:
        parts: The runtime (settings, model, sizes, store).
        flush: Runs the memory flush before a compaction.
        compaction: Runs the threshold compaction.
        request: Appends the cache-TTL marker.
    """

    def __init__(
        self,
        parts: RuntimeParts,
        *,
        flush: MemoryFlushStep,
        compaction: CompactionStep,
        request: RequestStep,
    ) -> None:
        self._parts = parts
        self._flush = flush
        self._compaction = compaction
        self._request = request

    def plan_write(
        self, session: RuntimeSession, messages: Sequence[AgentMessage], last_reply: AssistantMessage | None
    ) -> TurnWrite:
        """
        How to write a completed turn's ``messages`` (``last_reply``: its last assistant message), from
        the context estimate expected after them: when no threshold compaction (nor its refusal) comes,
        the store entry write rides on the reply's write (one transaction on a database holding both;
        ``transcript._riders``), and when the cache-TTL marker is due and no compaction comes, the
        marker joins that write.
        """
        tokens = estimate_context_usage([*session.current_context(), *messages]).tokens
        decision = self._decide(session, tokens, last_reply)
        with_marker = not decision.compact and self._request.cache_touch_due(
            session, clean_attempt=_clean(last_reply)
        )
        if decision.compact or decision.reason == "compaction_ineffective":
            return TurnWrite(rider=None, expected=tokens, with_marker=with_marker)
        fields = self.record_fields(session.usage_with(messages), tokens)
        rider = EntryRider(self._parts.store, session.session_key, fields)
        return TurnWrite(rider=rider, expected=tokens, with_marker=with_marker)

    async def write(
        self, session: RuntimeSession, messages: Sequence[AgentMessage], plan: TurnWrite
    ) -> tuple[list[TranscriptEntry], CustomEntry | None]:
        """
        Append the turn's ``messages`` in one write (one fsync), after them the cache-TTL marker when
        ``plan.with_marker`` (the lines and their order are those of two appends), with ``plan.rider``
        riding on it. Returns the entries written (the marker last) and the marker, if written.

        Raises:
            TypeError: A message is stored as its own entry type; nothing was written.
            OSError: The write failed.
        """
        if not plan.with_marker:
            return list(await session.transcript.append_messages(messages, rider=plan.rider)), None
        # a message stored as its own entry type raises here, before anything is written
        builds: list[Callable[[str, str | None, str], TranscriptEntry]] = [
            message_entry_of(m) for m in messages
        ]
        written = await session.transcript.append_chain(
            [*builds, self._request.cache_touch_marker], rider=plan.rider
        )
        assert written is not None  # the builders always build
        marker = written[-1]
        assert isinstance(marker, CustomEntry)
        return written, marker

    async def finish(
        self,
        session: RuntimeSession,
        *,
        tokens: int,
        last_reply: AssistantMessage | None,
        marker: CustomEntry | None = None,
    ) -> TurnEnd:
        """
        Compact when the context (``tokens``) is over the threshold and the reply was not aborted, mark the
        cache touch after a clean attempt (unless :meth:`write` wrote ``marker`` with the reply), and
        write the turn on the store entry.

        Raises:
            OSError: A write failed.
            TimeoutError: The compaction took longer than ``timeoutSeconds``.
        """
        flush_outcome: MemoryFlushOutcome | None = None
        compaction: CompactionOutcome | None = None
        decision = self._decide(session, tokens, last_reply)
        if decision.compact:
            flush_outcome = await self._flush.maybe_flush(
                session, context_tokens=tokens, pending_compaction=True, trigger="threshold"
            )
            compaction = await self._compaction.auto_compact(
                session, trigger="threshold", tokens_before=tokens
            )
            tokens = compaction.tokens_after
        elif decision.reason == "compaction_ineffective":
            compaction = self._compaction.refused(trigger="threshold", tokens=tokens)
        # on the successor, if a compaction rotated the transcript
        written: TranscriptEntry | None = marker
        if written is None:
            written = await self._request.mark_cache_touch(session, clean_attempt=_clean(last_reply))
        await patch_session_entry(self._parts.store, session, self.record_fields(session.turn_usage, tokens))
        return TurnEnd(memory_flush=flush_outcome, compaction=compaction, tokens=tokens, marker=written)

    def _decide(
        self, session: RuntimeSession, tokens: int, last_reply: AssistantMessage | None
    ) -> CompactionDecision:
        parts = self._parts
        return decide_threshold_compaction(
            context_tokens=tokens,
            context_window=parts.context_window,
            settings=parts.settings.compaction,
            max_output_tokens=parts.model.max_output_tokens,
            reply_aborted=last_reply is not None and last_reply.stop_reason == "aborted",
            ineffective_compactions=session.ineffective_compactions,
            recovery=parts.settings.recovery,
        )

    def record_fields(self, usage: dict[str, int], tokens: int) -> dict[str, Any]:
        """
        What the entry gets at the end of a turn: the turn's ``usage`` sums, the context estimate after it
        (``tokens``), the window and the model.
        """
        parts = self._parts
        model = parts.model
        fields: dict[str, Any] = dict(usage)
        fields.update(totalTokens=tokens, totalTokensFresh=True, contextTokens=parts.context_window)
        if model.provider:
            fields["modelProvider"] = model.provider
        if model.model_id:
            fields["model"] = model.model_id
        return fields


def _clean(last_reply: AssistantMessage | None) -> bool:
    """A clean attempt: no reply, or one that did not end in an error or abort (OpenClaw §7)."""
    return last_reply is None or last_reply.stop_reason not in ("error", "aborted")
