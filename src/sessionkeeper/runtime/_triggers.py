"""
When to compact: after a turn, before a turn, in the middle of a tool loop, and after a timeout.

Rules: OpenClaw spec §5.2-5.3 (threshold, ``maxActiveTranscriptBytes`` preflight, pre-prompt and mid-turn
precheck routes) and §5.7 (timeout compaction), pi-format spec §15.1/§15.3 (when the check runs, stale
usage), DESIGN D4 (threshold compaction at ``contextTokens > contextWindow - effectiveReserve`` in both modes;
the memory flush runs first) and field report B11 (stop compacting when a compaction cannot restore
headroom; a summary that frees nothing is not committed).

Each function is pure and returns a typed decision with its reason; the runtime acts on it.
"""

from __future__ import annotations

import math
from typing import Literal, Self

import attrs

from sessionkeeper._config import Config, parse_bool, setting, structure_settings
from sessionkeeper._window import window_or_default
from sessionkeeper.compaction import CompactionSettings, compaction_threshold, effective_reserve_tokens
from sessionkeeper.runtime._overflow import OverflowRecoverySettings


__all__ = (
    "CompactionDecision",
    "CompactionProgress",
    "MidTurnPrecheckSettings",
    "PromptBudgetDecision",
    "compaction_progress",
    "decide_preflight_compaction",
    "decide_threshold_compaction",
    "decide_timeout_compaction",
    "mid_turn_precheck",
    "plan_prompt_budget",
)


_window = window_or_default


CompactionTrigger = Literal["threshold", "preflight", "timeout"]
CompactionReason = Literal[
    "over_threshold",
    "transcript_bytes",
    "timeout_near_full",
    "below_threshold",
    "disabled",
    "aborted_reply",
    "heartbeat",
    "compaction_ineffective",
    "attempts_exhausted",
    "below_timeout_ratio",
]


@attrs.frozen(kw_only=True)
class CompactionDecision:
    """
    Whether to compact now.

    Attributes:
        compact: Run a compaction (after asking :class:`~sessionkeeper.runtime.MemoryFlushPolicy` with
            ``pending_compaction=True``: the flush always runs first, D4/B14).
        trigger: ``"threshold"`` (after a turn), ``"preflight"`` (before a turn) or ``"timeout"``.
        reason: ``"over_threshold"``, ``"transcript_bytes"`` or ``"timeout_near_full"`` when ``compact``;
            otherwise ``"below_threshold"``, ``"disabled"``, ``"aborted_reply"``, ``"heartbeat"``,
            ``"compaction_ineffective"`` (B11: an automatic compaction already failed to restore headroom
            in this turn; report, do not loop), ``"attempts_exhausted"`` or ``"below_timeout_ratio"``.
        context_tokens: The count used, in tokens.
        threshold: The compaction threshold, in tokens (``contextWindow - effectiveReserve``).
        context_window: The window used, in tokens.
        effective_reserve: The effective reserve, in tokens.
        force: Pass ``force=True`` to the compactor (preflight and timeout compactions, OpenClaw §5.3/§5.7).
    """

    compact: bool
    trigger: CompactionTrigger
    reason: CompactionReason
    context_tokens: int
    threshold: int
    context_window: int
    effective_reserve: int
    force: bool = False


@attrs.frozen(kw_only=True)
class CompactionProgress:
    """
    What one compaction achieved (field report B11).

    Attributes:
        tokens_before: Context tokens before, in tokens.
        tokens_after: Context tokens after (summary + kept tail + fixed prompt), in tokens.
        freed_tokens: ``tokens_before - tokens_after``.
        threshold: The compaction threshold, in tokens.
        commit: ``freed_tokens > 0``: a summary that frees nothing is not written.
        effective: ``tokens_after <= threshold``: the compaction restored headroom.
    """

    tokens_before: int
    tokens_after: int
    freed_tokens: int
    threshold: int
    commit: bool
    effective: bool


def compaction_progress(*, tokens_before: int, tokens_after: int, threshold: int) -> CompactionProgress:
    """
    Judge a compaction by its numbers (B11): commit it only if it frees tokens; it is *effective* only if
    the context is back at or under the threshold.

    Args:
        tokens_before: Context tokens before, in tokens.
        tokens_after: Context tokens the rebuilt context would hold, in tokens.
        threshold: The compaction threshold, in tokens.
    """
    freed = tokens_before - tokens_after
    return CompactionProgress(
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        freed_tokens=freed,
        threshold=threshold,
        commit=freed > 0,
        effective=tokens_after <= threshold,
    )


def _base(
    *,
    trigger: CompactionTrigger,
    tokens: int,
    settings: CompactionSettings,
    window: int,
    max_output: int | None,
) -> CompactionDecision:
    reserve = effective_reserve_tokens(settings, context_window=window, max_output_tokens=max_output)
    return CompactionDecision(
        compact=False,
        trigger=trigger,
        reason="below_threshold",
        context_tokens=tokens,
        threshold=compaction_threshold(settings, context_window=window, max_output_tokens=max_output),
        context_window=window,
        effective_reserve=reserve,
    )


def decide_threshold_compaction(
    *,
    context_tokens: int,
    context_window: int | None,
    settings: CompactionSettings,
    max_output_tokens: int | None = None,
    reply_aborted: bool = False,
    ineffective_compactions: int = 0,
    recovery: OverflowRecoverySettings | None = None,
) -> CompactionDecision:
    """
    Threshold maintenance after a successful turn (D4; pi §15.3; B11).

    Compacts when ``settings.enabled`` and ``context_tokens > contextWindow - effectiveReserve`` (strict),
    unless the reply was aborted (pi §15.1) or ``ineffective_compactions`` automatic compactions in a row
    already left the context over the threshold in this turn (``recovery.max_ineffective_compactions``,
    default 1): then ``reason="compaction_ineffective"`` and the runtime reports the numbers instead of
    looping. Pass ``context_tokens`` from :func:`~sessionkeeper.transcript.estimate_context_usage` (never
    usage from before the latest compaction).

    Args:
        context_tokens: Context size now, in tokens.
        context_window: The model's window in tokens (``None`` = 200000, D5).
        settings: The compaction settings.
        max_output_tokens: The reply budget the host requests, if known (raises the reserve, B09).
        reply_aborted: The turn's last reply was aborted.
        ineffective_compactions: Consecutive automatic compactions in this turn that were not effective
            (:attr:`CompactionProgress.effective` false).
        recovery: The limits; defaults to :class:`~sessionkeeper.runtime.OverflowRecoverySettings` ().
    """
    window = _window(context_window)
    decision = _base(
        trigger="threshold",
        tokens=context_tokens,
        settings=settings,
        window=window,
        max_output=max_output_tokens,
    )
    limits = recovery or OverflowRecoverySettings()
    if not settings.enabled:
        return attrs.evolve(decision, reason="disabled")
    if reply_aborted:
        return attrs.evolve(decision, reason="aborted_reply")
    if context_tokens <= decision.threshold:
        return decision
    if ineffective_compactions >= limits.max_ineffective_compactions:
        return attrs.evolve(decision, reason="compaction_ineffective")
    return attrs.evolve(decision, compact=True, reason="over_threshold")


def decide_preflight_compaction(
    *,
    context_tokens: int,
    context_window: int | None,
    settings: CompactionSettings,
    active_transcript_bytes: int | None = None,
    max_output_tokens: int | None = None,
    is_heartbeat: bool = False,
    ineffective_compactions: int = 0,
    recovery: OverflowRecoverySettings | None = None,
) -> CompactionDecision:
    """
    Compaction before a turn is sent (OpenClaw §5.3 "reply-level preflight", D4).

    Runs after the memory flush decision. Compacts (``force=True``, target ``"budget"``) when the projected
    context (history + the incoming prompt) is over the D4 threshold, or when the active transcript is at
    least ``maxActiveTranscriptBytes`` — honoured only with ``truncateAfterCompaction: true``
    (``settings.active_transcript_byte_limit``). ``enabled: false`` does not stop it (§5.2). Heartbeat
    turns never compact here. After an ineffective compaction in the same turn, it stops (B11).

    Args:
        context_tokens: Projected context in tokens, including the incoming prompt.
        context_window: The model's window in tokens (``None`` = 200000).
        settings: The compaction settings.
        active_transcript_bytes: Bytes of the live window, if known: the latest compaction, its kept range
            and everything after it on the path (``SessionRuntime.active_transcript_bytes``, issue #15).
        max_output_tokens: The reply budget the host requests, if known.
        is_heartbeat: The turn is a heartbeat.
        ineffective_compactions: See :func:`decide_threshold_compaction`.
        recovery: The limits; defaults to :class:`~sessionkeeper.runtime.OverflowRecoverySettings` ().
    """
    window = _window(context_window)
    decision = _base(
        trigger="preflight",
        tokens=context_tokens,
        settings=settings,
        window=window,
        max_output=max_output_tokens,
    )
    decision = attrs.evolve(decision, force=True)
    limits = recovery or OverflowRecoverySettings()
    if is_heartbeat:
        return attrs.evolve(decision, reason="heartbeat")
    limit = settings.active_transcript_byte_limit
    reason: CompactionReason | None = None
    if context_tokens > decision.threshold:
        reason = "over_threshold"
    elif limit and active_transcript_bytes is not None and active_transcript_bytes >= limit:
        reason = "transcript_bytes"
    if reason is None:
        return decision
    if ineffective_compactions >= limits.max_ineffective_compactions:
        return attrs.evolve(decision, reason="compaction_ineffective")
    return attrs.evolve(decision, compact=True, reason=reason)


def decide_timeout_compaction(
    *,
    prompt_tokens: int,
    context_window: int | None,
    settings: CompactionSettings,
    timeout_compactions: int,
    recovery: OverflowRecoverySettings | None = None,
) -> CompactionDecision:
    """
    Compaction after the model timed out (OpenClaw §5.7): compact and retry when the timed-out prompt used
    more than ``timeout_usage_ratio`` (65 %) of the window, at most ``max_timeout_compactions`` (2) times
    per run.

    Args:
        prompt_tokens: Tokens of the prompt that timed out.
        context_window: The model's window in tokens (``None`` = 200000).
        settings: The compaction settings (for the reported threshold and reserve).
        timeout_compactions: Timeout compactions already done in this run.
        recovery: The limits; defaults to :class:`~sessionkeeper.runtime.OverflowRecoverySettings` ().
    """
    window = _window(context_window)
    limits = recovery or OverflowRecoverySettings()
    decision = attrs.evolve(
        _base(trigger="timeout", tokens=prompt_tokens, settings=settings, window=window, max_output=None),
        force=True,
        reason="below_timeout_ratio",
    )
    if prompt_tokens <= limits.timeout_usage_ratio * window:
        return decision
    if timeout_compactions >= limits.max_timeout_compactions:
        return attrs.evolve(decision, reason="attempts_exhausted")
    return attrs.evolve(decision, compact=True, reason="timeout_near_full")


PromptBudgetRoute = Literal["fits", "compact_only", "truncate_tool_results_only", "compact_then_truncate"]


@attrs.frozen(kw_only=True)
class PromptBudgetDecision:
    """
    The pre-prompt (or mid-turn) budget check (OpenClaw §5.3 ``contextBudgetStatus``).

    Attributes:
        route: ``"fits"``; ``"compact_only"`` (no reducible tool-result text);
            ``"truncate_tool_results_only"`` (truncating tool results frees enough);
            ``"compact_then_truncate"``.
        phase: ``"pre_prompt"`` or ``"mid_turn"`` (after a tool result, before the next model call).
        estimated_prompt_tokens: The estimate checked, in tokens.
        context_window: The window, in tokens.
        effective_reserve: ``min(reserve, max(0, window - minPrompt))``, in tokens.
        budget: ``window - effective_reserve``, in tokens.
        overflow_tokens: ``max(0, estimated - budget)``.
        remaining_tokens: ``max(0, budget - estimated)``.
        tool_result_reducible_chars: Chars of tool-result text that truncation could remove.
    """

    route: PromptBudgetRoute
    phase: Literal["pre_prompt", "mid_turn"]
    estimated_prompt_tokens: int
    context_window: int
    effective_reserve: int
    budget: int
    overflow_tokens: int
    remaining_tokens: int
    tool_result_reducible_chars: int

    @property
    def should_compact(self) -> bool:
        """``True`` for the routes that compact."""
        return self.route in ("compact_only", "compact_then_truncate")

    @property
    def stop_submission(self) -> bool:
        """``True`` when the prompt must not be sent as it is (any route but ``"fits"``)."""
        return self.route != "fits"

    def to_json(self) -> dict[str, object]:
        """OpenClaw's ``contextBudgetStatus`` fields that apply (camelCase, ``schemaVersion`` 1)."""
        return {
            "schemaVersion": 1,
            "source": "pre-prompt-estimate" if self.phase == "pre_prompt" else "mid-turn-precheck",
            "route": self.route,
            "shouldCompact": self.should_compact,
            "estimatedPromptTokens": self.estimated_prompt_tokens,
            "contextTokenBudget": self.context_window,
            "effectiveReserveTokens": self.effective_reserve,
            "promptBudgetBeforeReserve": self.budget,
            "remainingPromptBudgetTokens": self.remaining_tokens,
            "overflowTokens": self.overflow_tokens,
            "toolResultReducibleChars": self.tool_result_reducible_chars,
        }


def plan_prompt_budget(
    *,
    estimated_prompt_tokens: int,
    context_window: int | None,
    settings: CompactionSettings,
    tool_result_reducible_chars: int = 0,
    phase: Literal["pre_prompt", "mid_turn"] = "pre_prompt",
) -> PromptBudgetDecision:
    """
    Route a prompt estimate (OpenClaw §5.3 pre-prompt precheck).

    ``budget = window - effectiveReserve`` and ``overflow = max(0, estimate - budget)``. Overflow 0:
    ``"fits"``. Otherwise ``"compact_only"`` when there is no reducible tool-result text,
    ``"truncate_tool_results_only"`` when ``reducible >= max(overflow*4 + 2048, ceil(overflow*4*1.5))``,
    else ``"compact_then_truncate"``. A compacting route enters overflow recovery (synthetic error
    "Context overflow: prompt too large for the model (precheck).").

    Args:
        estimated_prompt_tokens: The conservative prompt estimate (system prompt and new prompt included,
            ×1.2), in tokens.
        context_window: The model's window in tokens (``None`` = 200000).
        settings: The compaction settings (reserve and floor).
        tool_result_reducible_chars: Tool-result chars truncation could remove.
        phase: ``"pre_prompt"`` or ``"mid_turn"``.
    """
    window = _window(context_window)
    reserve = effective_reserve_tokens(settings, context_window=window)
    budget = window - reserve
    overflow = max(0, estimated_prompt_tokens - budget)
    reducible = max(0, tool_result_reducible_chars)
    route: PromptBudgetRoute
    if overflow == 0:
        route = "fits"
    elif reducible == 0:
        route = "compact_only"
    elif reducible >= max(overflow * 4 + 2048, math.ceil(overflow * 4 * 1.5)):
        route = "truncate_tool_results_only"
    else:
        route = "compact_then_truncate"
    return PromptBudgetDecision(
        route=route,
        phase=phase,
        estimated_prompt_tokens=estimated_prompt_tokens,
        context_window=window,
        effective_reserve=reserve,
        budget=budget,
        overflow_tokens=overflow,
        remaining_tokens=max(0, budget - estimated_prompt_tokens),
        tool_result_reducible_chars=reducible,
    )


@attrs.frozen(kw_only=True)
class MidTurnPrecheckSettings:
    """
    ``agents.defaults.compaction.midTurnPrecheck`` (OpenClaw §5.2-5.3).

    Attributes:
        enabled: ``enabled`` (default ``False``): check the budget after each tool result.
    """

    enabled: bool = setting(default=False, parse=parse_bool)

    @classmethod
    def from_config(cls, config: Config) -> Self:
        """
        Build from ``agents.defaults.compaction.midTurnPrecheck``.

        Raises:
            ConfigError: ``enabled`` is not a boolean.
        """
        prefix = "agents.defaults.compaction.midTurnPrecheck"
        return structure_settings(cls, config.section(prefix), prefix=prefix)


def mid_turn_precheck(
    *,
    precheck: MidTurnPrecheckSettings,
    estimated_prompt_tokens: int,
    context_window: int | None,
    settings: CompactionSettings,
    tool_result_reducible_chars: int = 0,
) -> PromptBudgetDecision | None:
    """
    The optional mid-turn precheck (OpenClaw §5.3): after a tool result, before the next model call.

    Returns ``None`` when disabled or when the prompt still fits; otherwise the structured signal (a
    :class:`PromptBudgetDecision` with ``phase="mid_turn"``): the runtime stops submitting, recovers by
    truncating or compacting, then continues from the current transcript. It is a signal, not an error.

    Args:
        precheck: Whether the check is enabled.
        estimated_prompt_tokens: The conservative estimate, in tokens.
        context_window: The model's window in tokens (``None`` = 200000).
        settings: The compaction settings.
        tool_result_reducible_chars: Tool-result chars truncation could remove.
    """
    if not precheck.enabled:
        return None
    decision = plan_prompt_budget(
        estimated_prompt_tokens=estimated_prompt_tokens,
        context_window=context_window,
        settings=settings,
        tool_result_reducible_chars=tool_result_reducible_chars,
        phase="mid_turn",
    )
    return decision if decision.stop_submission else None
