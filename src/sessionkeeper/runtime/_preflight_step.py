"""
The runtime's preflight step, run when a prompt starts a turn (D4, B11, B13, B14): the memory flush and
the preflight compaction when due, then the prompt appended to the transcript.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from sessionkeeper.runtime._active_bytes import active_transcript_bytes
from sessionkeeper.runtime._budget import estimate_context_usage
from sessionkeeper.runtime._compaction_step import CompactionStep
from sessionkeeper.runtime._flush_step import MemoryFlushStep
from sessionkeeper.runtime._parts import RuntimeParts
from sessionkeeper.runtime._runtime_session import RuntimeSession
from sessionkeeper.runtime._runtime_types import CompactionOutcome, MemoryFlushOutcome
from sessionkeeper.runtime._stamp import stamped
from sessionkeeper.runtime._triggers import decide_preflight_compaction
from sessionkeeper.transcript import AgentMessage, TextContent, TranscriptEntry, UserMessage


__all__ = ("PreflightStep", "TurnStart")


@attrs.frozen(kw_only=True)
class TurnStart:
    """
    What starting a turn did.

    Attributes:
        memory_flush: The flush that ran first, if any.
        compaction: The preflight compaction that ran (or was refused, B11), if any.
        prompt_entry: The prompt's transcript entry.
        context: The context messages with the prompt.
        tokens: Their estimate, in tokens.
    """

    memory_flush: MemoryFlushOutcome | None
    compaction: CompactionOutcome | None
    prompt_entry: TranscriptEntry
    context: Sequence[AgentMessage]
    tokens: int


class PreflightStep:
    """
    Starts the turns of one runtime's sessions.

    Args:
        parts: The runtime (settings, model, sizes, clock, token counter).
        flush: Runs the memory flush.
        compaction: Runs the preflight compaction.
    """

    def __init__(self, parts: RuntimeParts, *, flush: MemoryFlushStep, compaction: CompactionStep) -> None:
        self._parts = parts
        self._flush = flush
        self._compaction = compaction

    async def start_turn(
        self, session: RuntimeSession, prompt: str | UserMessage, *, is_heartbeat: bool
    ) -> TurnStart:
        """
        Reset the per-turn state; flush and compact first when due (the projected context is history +
        prompt); append the prompt (a string becomes a :class:`UserMessage`, a timestamp 0 is dated now).

        Raises:
            OSError: A write failed.
            TimeoutError: The compaction took longer than ``timeoutSeconds``.
        """
        parts = self._parts
        message = (
            stamped(prompt, parts.clock.now_ms())  # dated now when left at 0, as after_turn does
            if isinstance(prompt, UserMessage)
            else UserMessage(content=[TextContent(text=prompt)], timestamp=parts.clock.now_ms())
        )
        session.begin_turn()
        prompt_tokens = parts.token_counter.count_message(message)
        leaf_before = session.transcript.leaf_id
        history = session.current_context()
        history_tokens = estimate_context_usage(history).tokens
        projected = history_tokens + prompt_tokens
        if projected <= parts.compaction_threshold:
            session.note_context_fits()
        preflight = decide_preflight_compaction(
            context_tokens=projected,
            context_window=parts.context_window,
            settings=parts.settings.compaction,
            active_transcript_bytes=active_transcript_bytes(session.transcript),
            max_output_tokens=parts.model.max_output_tokens,
            is_heartbeat=is_heartbeat,
            ineffective_compactions=session.ineffective_compactions,
            recovery=parts.settings.recovery,
        )
        flush_outcome = await self._flush.maybe_flush(
            session,
            context_tokens=projected,
            pending_compaction=preflight.compact,
            trigger="preflight" if preflight.compact else "pre_turn",
            is_heartbeat=is_heartbeat,
        )
        compaction: CompactionOutcome | None = None
        if preflight.compact:
            compaction = await self._compaction.auto_compact(
                session, trigger="preflight", tokens_before=projected
            )
        elif preflight.reason == "compaction_ineffective":
            compaction = self._compaction.refused(trigger="preflight", tokens=projected)
        # a compaction with truncateAfterCompaction moved the session to its successor transcript
        transcript = session.transcript
        prompt_entry = await transcript.append_message(message)
        context: Sequence[AgentMessage]
        if transcript.leaf_id == prompt_entry.id and prompt_entry.parent_id == leaf_before:
            # nothing else was written since the estimate: extend the context instead of rebuilding it
            context = (*history, prompt_entry.message)
            tokens = projected
        else:
            context = transcript.build_session_context().messages
            tokens = estimate_context_usage(context).tokens
        return TurnStart(
            memory_flush=flush_outcome,
            compaction=compaction,
            prompt_entry=prompt_entry,
            context=context,
            tokens=tokens,
        )
