"""
The runtime's request step: from a session's context to the messages a model call sends (cache-TTL
pruning with its records and markers, oversized tool-result truncation, transcript hygiene, the mid-turn
precheck). Rules: OpenClaw §7 (pruning, the TTL marker), §9 (hygiene), §5.7; deviation D11.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import attrs

from sessionkeeper.pruning import (
    CACHE_TTL_CUSTOM_TYPE,
    PRUNE_RECORD_CUSTOM_TYPE,
    HygieneResult,
    PruneResult,
    cache_ttl_marker_data,
    prune_record_data,
    read_last_cache_touch,
    resolve_replay_policy,
    sanitize_replay_history,
)
from sessionkeeper.runtime._parts import RuntimeParts
from sessionkeeper.runtime._pressure import estimate_prompt_pressure
from sessionkeeper.runtime._runtime_session import RuntimeSession
from sessionkeeper.runtime._tool_truncation import truncate_oversized_tool_results
from sessionkeeper.runtime._triggers import PromptBudgetDecision, mid_turn_precheck
from sessionkeeper.transcript import AgentMessage, CustomEntry, TranscriptEntry, TranscriptManager


__all__ = ("PreparedRequest", "RequestStep")

_log = logging.getLogger("sessionkeeper.runtime")


@attrs.frozen(kw_only=True)
class PreparedRequest:
    """
    The messages of one model call and what was done to them.

    Attributes:
        pruning: What pruning did.
        truncated: Tool call ids whose results were cut (overflow second resort).
        hygiene: What transcript hygiene repaired; ``hygiene.messages`` are the messages to send.
        precheck: The mid-turn precheck decision, when it ran.
    """

    pruning: PruneResult
    truncated: tuple[str, ...]
    hygiene: HygieneResult
    precheck: PromptBudgetDecision | None


class RequestStep:
    """Prepares the requests of one runtime's sessions (``parts``: model, settings, pruner, clock, window)."""

    def __init__(self, parts: RuntimeParts) -> None:
        self._parts = parts

    async def prepare(
        self,
        session: RuntimeSession,
        context: Sequence[AgentMessage],
        *,
        in_tool_loop: bool,
        system_prompt: str | None,
    ) -> PreparedRequest:
        """
        Prune ``context`` (recording new prune decisions, D11), cut oversized tool results when recovery
        asked for it, sanitise for the provider, and run the mid-turn precheck inside a tool loop.

        Raises:
            OSError: The prune record could not be written.
        """
        parts = self._parts
        pruner = parts.pruner
        window = parts.context_window
        now = parts.clock.now_ms()
        model = parts.model
        ledger = session.prune_ledger() if pruner.settings.mode == "cache-ttl" else None
        touch = self._last_cache_touch(session.transcript)
        if ledger is not None:
            recorded = ledger.touch_for(model.provider, model.model_id)
            if recorded is not None and (touch is None or recorded > touch):
                touch = recorded  # a prune rebuilt the cache (OpenClaw keeps that in memory only)
        pruning = pruner.prune(
            context,
            context_window_tokens=window,
            last_cache_touch_at=touch,
            provider=model.provider,
            model_id=model.model_id,
            api=model.api,
            now_ms=now,
            ledger=ledger,
        )
        if pruning.soft_trimmed or pruning.hard_cleared:
            await self._record_prune(session, pruning.soft_trimmed, pruning.hard_cleared, now_ms=now)
        messages = pruning.messages
        truncated: tuple[str, ...] = ()
        if session.truncate_tool_results:
            cut = truncate_oversized_tool_results(messages, context_window_tokens=window)
            messages, truncated = cut.messages, cut.truncated
        policy = resolve_replay_policy(api=model.api, provider=model.provider, model_id=model.model_id)
        hygiene = sanitize_replay_history(
            messages, policy=policy, timestamp_ms=now, api=model.api, provider=model.provider
        )
        precheck = None
        settings = parts.settings
        if in_tool_loop and settings.mid_turn_precheck.enabled:
            precheck = mid_turn_precheck(
                precheck=settings.mid_turn_precheck,
                estimated_prompt_tokens=estimate_prompt_pressure(
                    hygiene.messages, system_prompt=system_prompt
                ),
                context_window=window,
                settings=settings.compaction,
            )
        return PreparedRequest(pruning=pruning, truncated=truncated, hygiene=hygiene, precheck=precheck)

    async def mark_cache_touch(
        self, session: RuntimeSession, *, clean_attempt: bool
    ) -> TranscriptEntry | None:
        """
        Append an ``openclaw.cache-ttl`` marker after a clean attempt (no compaction in the turn, no
        error or aborted reply) on a cache-TTL-eligible provider (OpenClaw §7); ``None`` when none is due.
        """
        if not self.cache_touch_due(session, clean_attempt=clean_attempt):
            return None
        marker = await session.transcript.append_with(self.cache_touch_marker)
        assert marker is not None  # the builder always builds
        session.note_custom_entry(marker)
        return marker

    def cache_touch_marker(self, entry_id: str, parent_id: str | None, timestamp: str) -> CustomEntry:
        """
        The ``openclaw.cache-ttl`` marker entry :meth:`mark_cache_touch` appends, stamped with the runtime
        clock's time now (an :data:`~sessionkeeper.transcript.EntryBuilder`).
        """
        parts = self._parts
        model = parts.model
        return CustomEntry(
            custom_type=CACHE_TTL_CUSTOM_TYPE,
            data=cache_ttl_marker_data(
                timestamp_ms=parts.clock.now_ms(), provider=model.provider, model_id=model.model_id
            ),
            id=entry_id,
            parent_id=parent_id,
            timestamp=timestamp,
        )

    def cache_touch_due(self, session: RuntimeSession, *, clean_attempt: bool) -> bool:
        """Whether :meth:`mark_cache_touch` would append a marker now."""
        model = self._parts.model
        return (
            not session.compacted_this_turn
            and clean_attempt
            and self._parts.pruner.is_cache_ttl_eligible(model.provider, model.model_id, model.api)
        )

    def _last_cache_touch(self, transcript: TranscriptManager) -> int | None:
        """The newest ``openclaw.cache-ttl`` marker of this provider and model (decodes markers only)."""
        model = self._parts.model
        index = transcript.index
        kinds = index.kinds
        for pos in range(len(kinds) - 1, -1, -1):
            if kinds[pos] != "custom":
                continue
            touch = read_last_cache_touch(
                (index.entry_at(pos),), provider=model.provider, model_id=model.model_id
            )
            if touch is not None:
                return touch
        return None

    async def _record_prune(
        self,
        session: RuntimeSession,
        soft_trimmed: Sequence[str],
        hard_cleared: Sequence[str],
        *,
        now_ms: int,
    ) -> None:
        """
        Append the prune record of this request's new decisions (D11): a ``custom`` entry, which pi and
        OpenClaw keep out of the model context, so later requests and restarts send the same bytes.
        """
        parts = self._parts
        settings = parts.pruner.settings
        record = await session.transcript.append_custom(
            PRUNE_RECORD_CUSTOM_TYPE,
            data=prune_record_data(
                timestamp_ms=now_ms,
                provider=parts.model.provider,
                model_id=parts.model.model_id,
                soft_trimmed=soft_trimmed,
                hard_cleared=hard_cleared,
                soft_trim=settings.soft_trim,
                placeholder=settings.hard_clear.placeholder,
            ),
        )
        session.note_custom_entry(record)
        _log.debug(
            "recorded a prune: %d soft-trimmed, %d hard-cleared",
            len(soft_trimmed),
            len(hard_cleared),
            extra={"session_key": session.session_key, "entry_id": record.id},
        )
