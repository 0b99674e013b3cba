"""
The runtime's end-of-turn step, run when :meth:`SessionRuntime.after_turn` completes a turn: what the
reply delivers (OpenClaw §8), the threshold compaction with the flush first (D4, B11, B13, B14), the
cache-TTL marker (OpenClaw §7) and the store entry's usage and token fields.
"""

from __future__ import annotations

from typing import Any

import attrs

from sessionkeeper._silent import is_silent_reply_payload, strip_silent_token
from sessionkeeper.runtime._compaction_step import CompactionStep
from sessionkeeper.runtime._flush_step import MemoryFlushStep
from sessionkeeper.runtime._parts import RuntimeParts
from sessionkeeper.runtime._request_step import RequestStep
from sessionkeeper.runtime._runtime_session import RuntimeSession, patch_session_entry
from sessionkeeper.runtime._runtime_types import CompactionOutcome, MemoryFlushOutcome
from sessionkeeper.runtime._triggers import decide_threshold_compaction
from sessionkeeper.transcript import AssistantMessage, TextContent, TranscriptEntry


__all__ = ("TurnEnd", "TurnEndStep", "reply_delivery")


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

    async def finish(
        self, session: RuntimeSession, *, tokens: int, last_reply: AssistantMessage | None
    ) -> TurnEnd:
        """
        Compact when the context (``tokens``) is over the threshold and the reply was not aborted, mark the
        cache touch after a clean attempt, and write the turn on the store entry.

        Raises:
            OSError: A write failed.
            TimeoutError: The compaction took longer than ``timeoutSeconds``.
        """
        parts = self._parts
        settings = parts.settings
        flush_outcome: MemoryFlushOutcome | None = None
        compaction: CompactionOutcome | None = None
        decision = decide_threshold_compaction(
            context_tokens=tokens,
            context_window=parts.context_window,
            settings=settings.compaction,
            max_output_tokens=parts.model.max_output_tokens,
            reply_aborted=last_reply is not None and last_reply.stop_reason == "aborted",
            ineffective_compactions=session.ineffective_compactions,
            recovery=settings.recovery,
        )
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
        marker = await self._request.mark_cache_touch(
            session, clean_attempt=last_reply is None or last_reply.stop_reason not in ("error", "aborted")
        )
        await self._record(session, tokens)
        return TurnEnd(memory_flush=flush_outcome, compaction=compaction, tokens=tokens, marker=marker)

    async def _record(self, session: RuntimeSession, tokens: int) -> None:
        """The turn's usage sums, the context estimate after it, the window and the model, on the entry."""
        parts = self._parts
        model = parts.model
        fields: dict[str, Any] = dict(session.turn_usage)
        fields.update(totalTokens=tokens, totalTokensFresh=True, contextTokens=parts.context_window)
        if model.provider:
            fields["modelProvider"] = model.provider
        if model.model_id:
            fields["model"] = model.model_id
        await patch_session_entry(parts.store, session, fields)
