"""
The runtime's pure rules: context budget, overflow detection and recovery, memory flush, compaction triggers.

Everything here is a pure function or an immutable ``attrs`` value: a runtime (``SessionRuntime``, or a
host's own agent loop) feeds in numbers and messages and gets typed decisions back, each with a reason.
Rules: OpenClaw spec §5.2-5.3, §5.7 and §6; pi-format spec §15; DESIGN decisions D4 and D5.
"""

from __future__ import annotations

from sessionkeeper.runtime._budget import (
    DEFAULT_CONTEXT_WINDOW_TOKENS,
    ContextTokenEstimate,
    ContextWindowInfo,
    ContextWindowSettings,
    estimate_context_usage,
    resolve_context_window,
)
from sessionkeeper.runtime._memory_flush import (
    DEFAULT_MEMORY_FLUSH_PROMPT,
    DEFAULT_MEMORY_FLUSH_SYSTEM_PROMPT,
    MEMORY_FLUSH_MAX_FAILURES,
    MemoryFlushDecision,
    MemoryFlushModel,
    MemoryFlushPlan,
    MemoryFlushPolicy,
    MemoryFlushRecord,
    MemoryFlushSettings,
)
from sessionkeeper.runtime._overflow import (
    OVERFLOW_GIVE_UP_MESSAGE,
    OverflowRecoveryDecision,
    OverflowRecoverySettings,
    OverflowRecoveryState,
    SyntheticTokenCount,
    is_context_overflow,
    is_context_overflow_text,
    parse_observed_token_count,
    plan_overflow_recovery,
    synthetic_token_count,
)
from sessionkeeper.runtime._pressure import estimate_prompt_pressure
from sessionkeeper.runtime._triggers import (
    CompactionDecision,
    CompactionProgress,
    MidTurnPrecheckSettings,
    PromptBudgetDecision,
    compaction_progress,
    decide_preflight_compaction,
    decide_threshold_compaction,
    decide_timeout_compaction,
    mid_turn_precheck,
    plan_prompt_budget,
)


__all__ = (
    "DEFAULT_CONTEXT_WINDOW_TOKENS",
    "DEFAULT_MEMORY_FLUSH_PROMPT",
    "DEFAULT_MEMORY_FLUSH_SYSTEM_PROMPT",
    "MEMORY_FLUSH_MAX_FAILURES",
    "OVERFLOW_GIVE_UP_MESSAGE",
    "CompactionDecision",
    "CompactionProgress",
    "ContextTokenEstimate",
    "ContextWindowInfo",
    "ContextWindowSettings",
    "MemoryFlushDecision",
    "MemoryFlushModel",
    "MemoryFlushPlan",
    "MemoryFlushPolicy",
    "MemoryFlushRecord",
    "MemoryFlushSettings",
    "MidTurnPrecheckSettings",
    "OverflowRecoveryDecision",
    "OverflowRecoverySettings",
    "OverflowRecoveryState",
    "PromptBudgetDecision",
    "SyntheticTokenCount",
    "compaction_progress",
    "decide_preflight_compaction",
    "decide_threshold_compaction",
    "decide_timeout_compaction",
    "estimate_context_usage",
    "estimate_prompt_pressure",
    "is_context_overflow",
    "is_context_overflow_text",
    "mid_turn_precheck",
    "parse_observed_token_count",
    "plan_overflow_recovery",
    "plan_prompt_budget",
    "resolve_context_window",
    "synthetic_token_count",
)
