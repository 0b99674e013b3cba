"""
Context pruning and transcript hygiene: transient, per-request views of the rebuilt context.

* :class:`Pruner` / :func:`prune_context_messages`: OpenClaw's cache-TTL pruning of old tool results
  (soft trim, hard clear; OpenClaw spec §7), with :class:`PruningSettings` from
  ``agents.defaults.contextPruning`` and the ``openclaw.cache-ttl`` TTL clock; decisions are recorded
  and re-applied (:class:`PruneLedger`, deviation D11) so pruning stays stable across requests.
* Transcript hygiene for replay (OpenClaw spec §9): :func:`sanitize_replay_history` driven by a
  :class:`ReplayPolicy` per provider family (:func:`resolve_replay_policy`), its steps as separate
  functions, and :func:`check_tool_pairing` for ``doctor``.

Nothing here rewrites a transcript (a host appends the prune record, a ``custom`` entry).
"""

from __future__ import annotations

from sessionkeeper.pruning._cache_ttl import (
    CACHE_TTL_CUSTOM_TYPE as CACHE_TTL_CUSTOM_TYPE,
)
from sessionkeeper.pruning._cache_ttl import (
    build_cache_ttl_entry as build_cache_ttl_entry,
)
from sessionkeeper.pruning._cache_ttl import (
    cache_ttl_marker_data as cache_ttl_marker_data,
)
from sessionkeeper.pruning._cache_ttl import (
    is_cache_ttl_eligible_provider as is_cache_ttl_eligible_provider,
)
from sessionkeeper.pruning._cache_ttl import (
    is_cache_ttl_expired as is_cache_ttl_expired,
)
from sessionkeeper.pruning._cache_ttl import (
    read_last_cache_touch as read_last_cache_touch,
)
from sessionkeeper.pruning._estimate import (
    estimate_context_chars as estimate_context_chars,
)
from sessionkeeper.pruning._estimate import (
    estimate_message_chars as estimate_message_chars,
)
from sessionkeeper.pruning._estimate import (
    estimate_string_chars as estimate_string_chars,
)
from sessionkeeper.pruning._hygiene import HygieneFinding as HygieneFinding
from sessionkeeper.pruning._hygiene import HygieneResult as HygieneResult
from sessionkeeper.pruning._hygiene import check_tool_pairing as check_tool_pairing
from sessionkeeper.pruning._hygiene import sanitize_replay_history as sanitize_replay_history
from sessionkeeper.pruning._pruner import Pruner as Pruner
from sessionkeeper.pruning._pruner import PruneResult as PruneResult
from sessionkeeper.pruning._pruner import PruneSkipReason as PruneSkipReason
from sessionkeeper.pruning._pruner import (
    prune_context_messages as prune_context_messages,
)
from sessionkeeper.pruning._pruner import (
    resolve_context_window_tokens as resolve_context_window_tokens,
)
from sessionkeeper.pruning._replay_policy import ReplayPolicy as ReplayPolicy
from sessionkeeper.pruning._replay_policy import fallback_replay_policy as fallback_replay_policy
from sessionkeeper.pruning._replay_policy import (
    resolve_replay_policy as resolve_replay_policy,
)
from sessionkeeper.pruning._settings import (
    HardClearSettings as HardClearSettings,
)
from sessionkeeper.pruning._settings import PruningSettings as PruningSettings
from sessionkeeper.pruning._settings import SoftTrimSettings as SoftTrimSettings
from sessionkeeper.pruning._settings import (
    ToolMatchSettings as ToolMatchSettings,
)
from sessionkeeper.pruning._stable import PRUNE_RECORD_CUSTOM_TYPE as PRUNE_RECORD_CUSTOM_TYPE
from sessionkeeper.pruning._stable import PruneDecision as PruneDecision
from sessionkeeper.pruning._stable import PruneLedger as PruneLedger
from sessionkeeper.pruning._stable import prune_record_data as prune_record_data
from sessionkeeper.pruning._stable import read_prune_ledger as read_prune_ledger
from sessionkeeper.pruning._thinking import (
    drop_reasoning_from_history as drop_reasoning_from_history,
)
from sessionkeeper.pruning._thinking import (
    drop_thinking_blocks as drop_thinking_blocks,
)
from sessionkeeper.pruning._tool_ids import sanitize_tool_call_id as sanitize_tool_call_id
from sessionkeeper.pruning._tool_ids import sanitize_tool_call_ids as sanitize_tool_call_ids
from sessionkeeper.pruning._tool_repair import (
    SYNTHETIC_MISSING_TOOL_RESULT_TEXT as SYNTHETIC_MISSING_TOOL_RESULT_TEXT,
)
from sessionkeeper.pruning._tool_repair import PairingRepair as PairingRepair
from sessionkeeper.pruning._tool_repair import make_missing_tool_result as make_missing_tool_result
from sessionkeeper.pruning._tool_repair import repair_tool_call_inputs as repair_tool_call_inputs
from sessionkeeper.pruning._tool_repair import (
    repair_tool_use_result_pairing as repair_tool_use_result_pairing,
)
from sessionkeeper.pruning._trim import (
    PRUNED_IMAGE_MARKER as PRUNED_IMAGE_MARKER,
)
from sessionkeeper.pruning._trim import ReappliedPruning as ReappliedPruning
from sessionkeeper.pruning._trim import apply_prune_ledger as apply_prune_ledger
from sessionkeeper.pruning._turns import (
    annotate_inter_session_messages as annotate_inter_session_messages,
)
from sessionkeeper.pruning._turns import ensure_usage_totals as ensure_usage_totals
from sessionkeeper.pruning._turns import normalize_replay_content as normalize_replay_content
from sessionkeeper.pruning._turns import sanitize_content_blocks as sanitize_content_blocks
from sessionkeeper.pruning._turns import (
    sanitize_google_turn_ordering as sanitize_google_turn_ordering,
)
from sessionkeeper.pruning._turns import (
    strip_invalid_thinking_signatures as strip_invalid_thinking_signatures,
)
from sessionkeeper.pruning._turns import (
    strip_stale_thinking_signatures as strip_stale_thinking_signatures,
)
from sessionkeeper.pruning._turns import strip_stale_usage as strip_stale_usage
from sessionkeeper.pruning._turns import validate_anthropic_turns as validate_anthropic_turns
from sessionkeeper.pruning._turns import validate_gemini_turns as validate_gemini_turns


__all__ = (
    "PRUNE_RECORD_CUSTOM_TYPE",
    "HardClearSettings",
    "HygieneFinding",
    "HygieneResult",
    "PairingRepair",
    "PruneDecision",
    "PruneLedger",
    "PruneResult",
    "PruneSkipReason",
    "Pruner",
    "PruningSettings",
    "ReappliedPruning",
    "ReplayPolicy",
    "SoftTrimSettings",
    "ToolMatchSettings",
    "annotate_inter_session_messages",
    "build_cache_ttl_entry",
    "check_tool_pairing",
    "drop_reasoning_from_history",
    "drop_thinking_blocks",
    "estimate_message_chars",
    "fallback_replay_policy",
    "normalize_replay_content",
    "prune_context_messages",
    "prune_record_data",
    "read_last_cache_touch",
    "read_prune_ledger",
    "repair_tool_call_inputs",
    "repair_tool_use_result_pairing",
    "resolve_context_window_tokens",
    "resolve_replay_policy",
    "sanitize_content_blocks",
    "sanitize_google_turn_ordering",
    "sanitize_replay_history",
    "sanitize_tool_call_ids",
    "strip_invalid_thinking_signatures",
    "strip_stale_thinking_signatures",
    "validate_anthropic_turns",
    "validate_gemini_turns",
)


from sessionkeeper._public import set_public_module


set_public_module(globals())
