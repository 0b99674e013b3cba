"""
The runtime's recovery step after a failed model call: overflow recovery (OpenClaw §5.7, pi §15.2, D5,
B09, B11, B14) and the timeout compaction (OpenClaw §5.7).
"""

from __future__ import annotations

from sessionkeeper.runtime._compaction_step import CompactionStep
from sessionkeeper.runtime._flush_step import MemoryFlushStep
from sessionkeeper.runtime._overflow import OverflowRecoveryDecision, plan_overflow_recovery
from sessionkeeper.runtime._parts import RuntimeParts
from sessionkeeper.runtime._runtime_session import RuntimeSession
from sessionkeeper.runtime._runtime_types import CompactionOutcome, MemoryFlushOutcome, RecoveryOutcome
from sessionkeeper.runtime._tool_truncation import has_oversized_tool_results
from sessionkeeper.runtime._triggers import decide_timeout_compaction


__all__ = ("RecoveryStep", "is_timeout")


def is_timeout(error: object) -> bool:
    """A model call that timed out: a ``TimeoutError`` (anyio's ``fail_after`` too) or a timeout message."""
    if isinstance(error, TimeoutError):
        return True
    text = error if isinstance(error, str) else getattr(error, "error_message", None)
    return isinstance(text, str) and ("timed out" in text.lower() or "timeout" in text.lower())


class RecoveryStep:
    """
    Recovers one runtime's sessions from failed model calls.

    Args:
        parts: The runtime (settings, sizes).
        flush: Runs the memory flush before a compaction.
        compaction: Runs the overflow and timeout compactions.
    """

    def __init__(self, parts: RuntimeParts, *, flush: MemoryFlushStep, compaction: CompactionStep) -> None:
        self._parts = parts
        self._flush = flush
        self._compaction = compaction

    async def recover(self, session: RuntimeSession, error: object) -> RecoveryOutcome:
        """
        :meth:`SessionRuntime.on_model_error` once the session follows its store entry.

        Raises:
            ContextOverflowError: Recovery is exhausted.
            BaseException: ``error`` itself, when it is an exception that is not an overflow.
        """
        window = self._parts.context_window
        context = session.transcript.build_session_context().messages
        oversized = has_oversized_tool_results(context, context_window_tokens=window)
        decision = self._plan(session, error, oversized=oversized)
        if decision.action == "not_overflow":
            if is_timeout(error):
                timeout = await self._timeout_compaction(session)
                if timeout is not None:
                    return timeout
            if isinstance(error, BaseException):
                raise error
            return RecoveryOutcome(action="not_overflow", reason=decision.reason)
        flush_outcome: MemoryFlushOutcome | None = None
        compaction: CompactionOutcome | None = None
        if decision.action == "compact":
            count = decision.token_count
            assert count is not None
            flush_outcome = await self._flush.maybe_flush(
                session, context_tokens=count.tokens, pending_compaction=True, trigger="overflow"
            )
            compaction = await self._compaction.auto_compact(
                session, trigger="overflow", tokens_before=count.tokens, synthetic=count
            )
            session.note_overflow_compaction(succeeded=compaction.context_compacted)
            if compaction.context_compacted:
                return RecoveryOutcome(
                    action="compacted",
                    reason=decision.reason,
                    attempt=decision.attempt,
                    observed_tokens=decision.observed_tokens,
                    memory_flush=flush_outcome,
                    compaction=compaction,
                )
            decision = self._plan(session, error, oversized=oversized)
        if decision.action == "truncate_tool_results":
            session.start_truncating_tool_results()
            return RecoveryOutcome(
                action="truncated",
                reason=decision.reason,
                observed_tokens=decision.observed_tokens,
                memory_flush=flush_outcome,
                compaction=compaction,
            )
        raise decision.error(attempts=session.recovery.compactions)

    def _plan(self, session: RuntimeSession, error: object, *, oversized: bool) -> OverflowRecoveryDecision:
        return plan_overflow_recovery(
            error,
            state=session.recovery,
            context_window=self._parts.context_window,
            settings=self._parts.settings.recovery,
            estimate_tokens=session.last_prompt_tokens,
            has_reducible_tool_results=oversized and not session.truncate_tool_results,
        )

    async def _timeout_compaction(self, session: RuntimeSession) -> RecoveryOutcome | None:
        """OpenClaw §5.7: a timed-out call whose prompt used > 65 % of the window compacts (2 per turn)."""
        settings = self._parts.settings
        decision = decide_timeout_compaction(
            prompt_tokens=session.last_prompt_tokens or 0,
            context_window=self._parts.context_window,
            settings=settings.compaction,
            timeout_compactions=session.timeout_compactions,
            recovery=settings.recovery,
        )
        if not decision.compact:
            return None
        attempt = session.count_timeout_compaction()
        tokens = decision.context_tokens
        flush_outcome = await self._flush.maybe_flush(
            session, context_tokens=tokens, pending_compaction=True, trigger="timeout"
        )
        compaction = await self._compaction.auto_compact(session, trigger="timeout", tokens_before=tokens)
        if not compaction.context_compacted:
            return None
        return RecoveryOutcome(
            action="compacted",
            reason=decision.reason,
            attempt=attempt,
            memory_flush=flush_outcome,
            compaction=compaction,
        )
