"""
Settings, model description and typed results of :class:`~sessionkeeper.runtime.SessionRuntime`.

Every result is an immutable ``attrs`` value with a ``to_json()`` giving camelCase JSON (used by
``sessionkeeper demo --json``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, Self, TypeAlias

import attrs

from sessionkeeper._config import Config
from sessionkeeper.compaction import CompactionResult, CompactionSettings
from sessionkeeper.hooks import HookError
from sessionkeeper.pruning import HygieneResult, PruneResult, PruningSettings
from sessionkeeper.runtime._budget import ContextWindowSettings
from sessionkeeper.runtime._memory_flush import MemoryFlushDecision, MemoryFlushPlan, MemoryFlushSettings
from sessionkeeper.runtime._overflow import OverflowRecoverySettings, SyntheticTokenCount
from sessionkeeper.runtime._triggers import MidTurnPrecheckSettings, PromptBudgetDecision
from sessionkeeper.store import ResetPolicy
from sessionkeeper.transcript import AgentMessage, TranscriptEntry


__all__ = (
    "CompactionOutcome",
    "CompactionTriggerName",
    "MemoryFlushOutcome",
    "MemoryFlushRequest",
    "MemoryFlushRunner",
    "ModelCallPlan",
    "ModelInfo",
    "RecoveryOutcome",
    "RuntimeSettings",
    "TurnOutcome",
)

CompactionTriggerName: TypeAlias = Literal["manual", "threshold", "preflight", "overflow", "timeout"]
"""Why the runtime compacted: ``preflight`` is a threshold compaction run before the turn is sent;
``timeout`` follows a model call that timed out with the prompt over 65 % of the window."""


@attrs.frozen(kw_only=True)
class ModelInfo:
    """
    The model the host is about to call.

    Attributes:
        provider: Provider id (``"anthropic"``); decides cache-TTL pruning and the replay policy.
        model_id: Model id (``"claude-sonnet-4-5"``).
        api: Wire API (``"anthropic-messages"``, ``"openai-responses"``, ...), for transcript hygiene.
        context_window: The catalogue's context window in tokens; ``None`` = 200000 (D5), capped by
            ``agents.defaults.contextTokens``.
        max_output_tokens: The reply budget requested, in tokens, if known (raises the reserve, B09).
    """

    provider: str | None = None
    model_id: str | None = None
    api: str | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None


@attrs.frozen(kw_only=True)
class RuntimeSettings:
    """
    Everything :class:`~sessionkeeper.runtime.SessionRuntime` is configured by (defaults = the references').

    Attributes:
        compaction: ``agents.defaults.compaction``.
        pruning: ``agents.defaults.contextPruning``; off by default both ways (``PruningSettings()``
            and :meth:`from_config` without ``mode``, OpenClaw's default); enable with
            ``PruningSettings(mode="cache-ttl")``.
        memory_flush: ``agents.defaults.compaction.memoryFlush``.
        recovery: ``agents.defaults.compaction.overflowRecovery`` (attempt limits).
        context_window: ``agents.defaults.contextTokens`` (cap of the window).
        mid_turn_precheck: ``agents.defaults.compaction.midTurnPrecheck``.
        reset: ``session.reset*`` (the reset policy :meth:`SessionRuntime.open` applies).
    """

    compaction: CompactionSettings = attrs.field(factory=CompactionSettings)
    pruning: PruningSettings = attrs.field(factory=PruningSettings)
    memory_flush: MemoryFlushSettings = attrs.field(factory=MemoryFlushSettings)
    recovery: OverflowRecoverySettings = attrs.field(factory=OverflowRecoverySettings)
    context_window: ContextWindowSettings = attrs.field(factory=ContextWindowSettings)
    mid_turn_precheck: MidTurnPrecheckSettings = attrs.field(factory=MidTurnPrecheckSettings)
    reset: ResetPolicy = attrs.field(factory=ResetPolicy)

    @classmethod
    def from_config(cls, config: Config, *, anthropic_auth: bool = False) -> Self:
        """
        Read every section from one loaded config (:func:`sessionkeeper._config.load_config`).

        Args:
            config: The loaded configuration.
            anthropic_auth: Passed to :meth:`PruningSettings.from_config` (switches pruning on).

        Raises:
            ConfigError: A value is invalid; the error names the dotted key.
        """
        return cls(
            compaction=CompactionSettings.from_config(config),
            pruning=PruningSettings.from_config(config, anthropic_auth=anthropic_auth),
            memory_flush=MemoryFlushSettings.from_config(config),
            recovery=OverflowRecoverySettings.from_config(config),
            context_window=ContextWindowSettings.from_config(config),
            mid_turn_precheck=MidTurnPrecheckSettings.from_config(config),
            reset=ResetPolicy.from_config(config),
        )


@attrs.frozen(kw_only=True)
class MemoryFlushRequest:
    """
    What a memory-flush runner receives (OpenClaw spec §6; B14).

    Attributes:
        session_key: The session key.
        session_id: The session id.
        plan: Prompts, target file ``memory/YYYY-MM-DD.md`` and model override.
        messages: The full pre-compaction context (the flush always runs before any compaction).
        decision: Why the flush runs.
        trigger: ``"pre_turn"``, ``"threshold"`` (before a threshold compaction after a turn),
            ``"preflight"``, ``"overflow"`` or ``"timeout"`` (before those compactions).
    """

    session_key: str
    session_id: str
    plan: MemoryFlushPlan
    messages: tuple[AgentMessage, ...]
    decision: MemoryFlushDecision
    trigger: Literal["pre_turn", "threshold", "preflight", "overflow", "timeout"]


MemoryFlushRunner: TypeAlias = Callable[[MemoryFlushRequest], Awaitable[str | None]]
"""Runs the silent flush turn and returns its reply text (usually ``NO_REPLY``); raises on failure."""


@attrs.frozen(kw_only=True)
class MemoryFlushOutcome:
    """
    A memory flush the runtime ran.

    Attributes:
        trigger: See :class:`MemoryFlushRequest`.
        reason: The decision's reason (``threshold``, ``transcript_size``, ``pending_compaction``).
        ok: Whether the runner succeeded.
        context_tokens: The projected context that triggered it, in tokens.
        threshold: The flush threshold, in tokens.
        reply_silent: The flush reply was silent (never delivered either way).
        memory_file: The file the default runner appended to, if any.
        error: The failure, if any (at most 200 chars).
        exhausted: 3 failures in a row: the cycle is closed.
        diagnostic: ``"memoryFlushSkipped"`` when the flush failed right before a compaction, which
            still runs (B14).
        hook_errors: Failures of ``memory_flush_start`` / ``memory_flush_end`` handlers, in order:
            notifications report, never raise (:meth:`HookRegistry.notify`), so a raising handler
            cannot hide a flush that already ran and was recorded. Empty when every handler succeeded.
    """

    trigger: str
    reason: str
    ok: bool
    context_tokens: int | None
    threshold: int
    reply_silent: bool = True
    memory_file: str | None = None
    error: str | None = None
    exhausted: bool = False
    diagnostic: str | None = None
    hook_errors: tuple[HookError, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """camelCase JSON."""
        return {
            "trigger": self.trigger,
            "diagnostic": self.diagnostic,
            "reason": self.reason,
            "ok": self.ok,
            "contextTokens": self.context_tokens,
            "threshold": self.threshold,
            "replySilent": self.reply_silent,
            "memoryFile": self.memory_file,
            "error": self.error,
            "exhausted": self.exhausted,
            **({"hookErrors": [error.to_json() for error in self.hook_errors]} if self.hook_errors else {}),
        }


@attrs.frozen(kw_only=True)
class CompactionOutcome:
    """
    A compaction the runtime ran (or refused to run again, B11).

    Attributes:
        trigger: ``manual | threshold | preflight | overflow | timeout``.
        status: The compactor's status (``"compacted"``, ``"nothing_to_summarize"``, ``"ineffective"``,
            ...) or ``"compaction_ineffective"`` when an earlier automatic compaction could not restore
            headroom and the runtime stopped compacting (B11).
        tokens_before: Context tokens before, in tokens.
        tokens_after: Context tokens after (estimate of the rebuilt context), in tokens.
        threshold: The compaction threshold, in tokens.
        effective: ``tokens_after <= threshold``.
        result: The compactor's result (``None`` when it did not run).
        synthetic_tokens: For overflow compactions: the count handed over (observed / estimate / minimal).
        tokens_before_source: How :attr:`tokens_before` was measured: ``"usage"`` (the last provider
            usage plus chars/4 of newer messages), ``"estimate"`` (chars/4 of every message), or for
            overflow compactions the synthetic count's ``"observed"`` / ``"estimate"`` / ``"minimal"``;
            ``None`` when not measured (issue #11: compare like with like).
        tokens_before_estimate: chars/4 of every context message before the compaction, in tokens (the
            incoming prompt of a preflight compaction not included): the number to compare with
            :attr:`tokens_after` when that is an ``"estimate"``; ``None`` when not measured.
        tokens_after_source: How :attr:`tokens_after` was measured (``"usage"`` / ``"estimate"``; right
            after a compaction every usage is stale, so ``"estimate"``); ``None`` when not measured.
    """

    trigger: CompactionTriggerName
    status: str
    tokens_before: int
    tokens_after: int
    threshold: int
    effective: bool
    result: CompactionResult | None = None
    synthetic_tokens: SyntheticTokenCount | None = None
    tokens_before_source: str | None = None
    tokens_before_estimate: int | None = None
    tokens_after_source: str | None = None

    @property
    def compacted(self) -> bool:
        """Whether a compaction entry was written."""
        return self.result is not None and self.result.compacted

    @property
    def context_compacted(self) -> bool:
        """
        Whether the context is now compacted: this run wrote the entry, or another writer's compaction
        landed on the branch while this one was summarising (status ``"superseded"``; nothing written
        here), or this one waited for a concurrent compaction of the transcript and uses it
        (``"joined"``, DESIGN D10). Overflow and timeout recovery retry the model call in all three cases.
        """
        return self.result is not None and (
            self.result.compacted or self.result.status in ("superseded", "joined")
        )

    def to_json(self) -> dict[str, Any]:
        """camelCase JSON."""
        result = self.result
        return {
            "trigger": self.trigger,
            "status": self.status,
            "tokensBefore": self.tokens_before,
            "tokensBeforeSource": self.tokens_before_source,
            "tokensBeforeEstimate": self.tokens_before_estimate,
            "tokensAfter": self.tokens_after,
            "tokensAfterSource": self.tokens_after_source,
            "threshold": self.threshold,
            "effective": self.effective,
            "entryId": result.entry.id if result is not None and result.entry is not None else None,
            "firstKeptEntryId": (
                result.entry.first_kept_entry_id if result is not None and result.entry is not None else None
            ),
            "provider": result.provider if result is not None else None,
            "syntheticTokens": (
                {"tokens": self.synthetic_tokens.tokens, "source": self.synthetic_tokens.source}
                if self.synthetic_tokens is not None
                else None
            ),
        }


@attrs.frozen(kw_only=True)
class ModelCallPlan:
    """
    What :meth:`SessionRuntime.before_model_call` prepared.

    Attributes:
        messages: The messages to send: rebuilt context -> cache-TTL pruning -> oversized tool-result
            truncation (only after overflow recovery asked for it) -> transcript hygiene for the provider.
        prompt_entry: The transcript entry of the user prompt appended by this call, if any.
        context_tokens: The context estimate after any compaction, prompt included, in tokens.
        context_window: The resolved window, in tokens.
        memory_flush: The flush that ran first, if any.
        compaction: The preflight compaction that ran first, if any.
        pruning: What pruning did (``skipped`` says why when it did nothing).
        hygiene: What transcript hygiene repaired.
        truncated_tool_results: Tool call ids whose results were cut (overflow second resort).
        precheck: The mid-turn precheck decision (only for calls inside a tool loop, when
            ``midTurnPrecheck.enabled``): a structured signal; ``precheck.should_compact`` asks the
            loop to recover (e.g. call :meth:`SessionRuntime.compact`) before sending.
    """

    messages: tuple[AgentMessage, ...]
    prompt_entry: TranscriptEntry | None
    context_tokens: int
    context_window: int
    memory_flush: MemoryFlushOutcome | None = None
    compaction: CompactionOutcome | None = None
    pruning: PruneResult | None = None
    hygiene: HygieneResult | None = None
    truncated_tool_results: tuple[str, ...] = ()
    precheck: PromptBudgetDecision | None = None


@attrs.frozen(kw_only=True)
class TurnOutcome:
    """
    What :meth:`SessionRuntime.after_turn` did.

    Attributes:
        entries: The transcript entries appended for the turn's messages.
        delivered_text: The reply text to deliver, or ``None`` when the reply is silent (``NO_REPLY``;
            OpenClaw spec §8) or the turn is not complete.
        silent: The final reply was silent (it is kept in the transcript but never delivered, and
            transcript hygiene drops it from replayed history).
        context_tokens: Context estimate after the turn (and after any compaction), in tokens.
        memory_flush: The flush run before a threshold compaction, if any.
        compaction: The threshold compaction, if any.
        cache_ttl_marker: The ``openclaw.cache-ttl`` marker appended after a clean attempt, if any.
    """

    entries: tuple[TranscriptEntry, ...]
    delivered_text: str | None
    silent: bool
    context_tokens: int
    memory_flush: MemoryFlushOutcome | None = None
    compaction: CompactionOutcome | None = None
    cache_ttl_marker: TranscriptEntry | None = None


@attrs.frozen(kw_only=True)
class RecoveryOutcome:
    """
    What :meth:`SessionRuntime.on_model_error` did about an overflow; the loop then retries the call.

    Attributes:
        action: ``"compacted"`` (an overflow or timeout compaction ran; retry), ``"truncated"``
            (oversized tool results will be cut from now on; retry) or ``"not_overflow"`` (a failure
            that is not a context overflow, given as a message rather than an exception: handle it as
            any error).
        reason: The recovery plan's reason (``"overflow"``, ``"retry_overflowed"``,
            ``"timeout_near_full"``, ...).
        attempt: The 1-based overflow compaction number in this turn (0 when none ran).
        observed_tokens: The prompt size the provider reported, if it did.
        memory_flush: The flush that ran before the compaction, if any (B14).
        compaction: The overflow compaction, if any.
    """

    action: Literal["compacted", "truncated", "not_overflow"]
    reason: str
    attempt: int = 0
    observed_tokens: int | None = None
    memory_flush: MemoryFlushOutcome | None = None
    compaction: CompactionOutcome | None = None
