"""
The runtime's pure rules: context budget, overflow detection and recovery, memory flush, compaction triggers.

Everything here is a pure function or an immutable ``attrs`` value: a runtime (``SessionRuntime``, or a
host's own agent loop) feeds in numbers and messages and gets typed decisions back, each with a reason.
Rules: OpenClaw spec §5.2-5.3, §5.7 and §6; pi-format spec §15; DESIGN decisions D4 and D5.
"""

from __future__ import annotations

from sessionkeeper.runtime._budget import DEFAULT_CONTEXT_WINDOW_TOKENS as DEFAULT_CONTEXT_WINDOW_TOKENS
from sessionkeeper.runtime._budget import (
    ContextWindowInfo,
    ContextWindowSettings,
    resolve_context_window,
)
from sessionkeeper.runtime._memory_flush import (
    DEFAULT_MEMORY_FLUSH_PROMPT,
    DEFAULT_MEMORY_FLUSH_SYSTEM_PROMPT,
    MemoryFlushDecision,
    MemoryFlushModel,
    MemoryFlushPlan,
    MemoryFlushPolicy,
    MemoryFlushRecord,
    MemoryFlushSettings,
)
from sessionkeeper.runtime._memory_flush import MEMORY_FLUSH_MAX_FAILURES as MEMORY_FLUSH_MAX_FAILURES
from sessionkeeper.runtime._overflow import OVERFLOW_GIVE_UP_MESSAGE as OVERFLOW_GIVE_UP_MESSAGE
from sessionkeeper.runtime._overflow import (
    OverflowRecoveryDecision,
    OverflowRecoverySettings,
    OverflowRecoveryState,
    SyntheticTokenCount,
    parse_observed_token_count,
    plan_overflow_recovery,
)
from sessionkeeper.runtime._overflow import is_context_overflow as is_context_overflow
from sessionkeeper.runtime._overflow import is_context_overflow_text as is_context_overflow_text
from sessionkeeper.runtime._overflow import synthetic_token_count as synthetic_token_count
from sessionkeeper.runtime._pressure import estimate_prompt_pressure
from sessionkeeper.runtime._runtime_types import (
    CompactionOutcome,
    MemoryFlushOutcome,
    MemoryFlushRequest,
    MemoryFlushRunner,
    ModelCallPlan,
    ModelInfo,
    RecoveryOutcome,
    RuntimeSettings,
    TurnOutcome,
)
from sessionkeeper.runtime._session_runtime import RuntimeSession, SessionRuntime
from sessionkeeper.runtime._tool_truncation import (
    ToolResultTruncation,
)
from sessionkeeper.runtime._tool_truncation import max_tool_result_chars as max_tool_result_chars
from sessionkeeper.runtime._tool_truncation import (
    truncate_oversized_tool_results as truncate_oversized_tool_results,
)
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
    "DEFAULT_MEMORY_FLUSH_PROMPT",
    "DEFAULT_MEMORY_FLUSH_SYSTEM_PROMPT",
    "CompactionDecision",
    "CompactionOutcome",
    "CompactionProgress",
    "ContextWindowInfo",
    "ContextWindowSettings",
    "MemoryFlushDecision",
    "MemoryFlushModel",
    "MemoryFlushOutcome",
    "MemoryFlushPlan",
    "MemoryFlushPolicy",
    "MemoryFlushRecord",
    "MemoryFlushRequest",
    "MemoryFlushRunner",
    "MemoryFlushSettings",
    "MidTurnPrecheckSettings",
    "ModelCallPlan",
    "ModelInfo",
    "OverflowRecoveryDecision",
    "OverflowRecoverySettings",
    "OverflowRecoveryState",
    "PromptBudgetDecision",
    "RecoveryOutcome",
    "RuntimeSession",
    "RuntimeSettings",
    "SessionRuntime",
    "SyntheticTokenCount",
    "ToolResultTruncation",
    "TurnOutcome",
    "compaction_progress",
    "decide_preflight_compaction",
    "decide_threshold_compaction",
    "decide_timeout_compaction",
    "estimate_prompt_pressure",
    "mid_turn_precheck",
    "parse_observed_token_count",
    "plan_overflow_recovery",
    "plan_prompt_budget",
    "resolve_context_window",
)


from sessionkeeper._public import set_public_module


set_public_module(globals())
