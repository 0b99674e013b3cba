"""Compaction triggers: threshold, preflight, budget routes, mid-turn precheck, timeout (§5.3, §5.7, D4)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionkeeper._config import load_config
from sessionkeeper.compaction import CompactionSettings, should_compact
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.runtime import (
    MidTurnPrecheckSettings,
    OverflowRecoverySettings,
    compaction_progress,
    decide_preflight_compaction,
    decide_threshold_compaction,
    decide_timeout_compaction,
    mid_turn_precheck,
    plan_prompt_budget,
)


DEFAULTS = CompactionSettings()


# ---- threshold maintenance after a turn ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("tokens", "compact", "reason"),
    [(180000, False, "below_threshold"), (180001, True, "over_threshold"), (250000, True, "over_threshold")],
)
def test_threshold_is_strictly_greater(tokens: int, compact: bool, reason: str) -> None:
    decision = decide_threshold_compaction(context_tokens=tokens, context_window=200000, settings=DEFAULTS)
    assert (decision.compact, decision.reason) == (compact, reason)
    assert (decision.threshold, decision.effective_reserve, decision.trigger) == (180000, 20000, "threshold")
    assert decision.force is False


def test_threshold_disabled_and_aborted() -> None:
    off = decide_threshold_compaction(
        context_tokens=199999, context_window=200000, settings=CompactionSettings(enabled=False)
    )
    assert (off.compact, off.reason) == (False, "disabled")
    aborted = decide_threshold_compaction(
        context_tokens=199999, context_window=200000, settings=DEFAULTS, reply_aborted=True
    )
    assert (aborted.compact, aborted.reason) == (False, "aborted_reply")


def test_threshold_unknown_window_is_200000() -> None:
    decision = decide_threshold_compaction(context_tokens=180001, context_window=None, settings=DEFAULTS)
    assert (decision.compact, decision.context_window) == (True, 200000)


@given(
    tokens=st.integers(min_value=0, max_value=3_000_000),
    window=st.integers(min_value=1, max_value=2_000_000),
    reserve=st.integers(min_value=0, max_value=2_000_000),
    floor=st.integers(min_value=0, max_value=2_000_000),
)
def test_threshold_decision_agrees_with_should_compact(
    tokens: int, window: int, reserve: int, floor: int
) -> None:
    settings = CompactionSettings(reserve_tokens=reserve, reserve_tokens_floor=floor)
    decision = decide_threshold_compaction(context_tokens=tokens, context_window=window, settings=settings)
    assert decision.compact == should_compact(tokens, context_window=window, settings=settings)


# ---- B11 progress guard --------------------------------------------------------------------------------
def test_progress_commit_and_effectiveness() -> None:
    progress = compaction_progress(tokens_before=45000, tokens_after=17000, threshold=16000)
    assert (progress.freed_tokens, progress.commit, progress.effective) == (28000, True, False)
    nothing = compaction_progress(tokens_before=17000, tokens_after=17000, threshold=16000)
    assert nothing.commit is False
    worse = compaction_progress(tokens_before=17000, tokens_after=17500, threshold=16000)
    assert worse.commit is False
    fits = compaction_progress(tokens_before=45000, tokens_after=16000, threshold=16000)
    assert fits.effective is True


def test_ineffective_compactions_stop_the_loop_and_are_configurable() -> None:
    settings = CompactionSettings(reserve_tokens=4000, reserve_tokens_floor=0)
    stop = decide_threshold_compaction(
        context_tokens=17000, context_window=20000, settings=settings, ineffective_compactions=1
    )
    assert (stop.compact, stop.reason, stop.context_tokens, stop.threshold) == (
        False,
        "compaction_ineffective",
        17000,
        16000,
    )
    two = OverflowRecoverySettings(max_ineffective_compactions=2)
    again = decide_threshold_compaction(
        context_tokens=17000, context_window=20000, settings=settings, ineffective_compactions=1, recovery=two
    )
    assert again.compact is True


# ---- preflight ------------------------------------------------------------------------------------------
def test_preflight_by_tokens_ignores_enabled_flag_and_forces() -> None:
    decision = decide_preflight_compaction(
        context_tokens=180001, context_window=200000, settings=CompactionSettings(enabled=False)
    )
    assert (decision.compact, decision.reason, decision.force, decision.trigger) == (
        True,
        "over_threshold",
        True,
        "preflight",
    )


def test_preflight_by_transcript_bytes_needs_truncate_after_compaction() -> None:
    limit = 20 * 1024 * 1024
    honoured = CompactionSettings(truncate_after_compaction=True, max_active_transcript_bytes=limit)
    hit = decide_preflight_compaction(
        context_tokens=1000, context_window=200000, settings=honoured, active_transcript_bytes=limit
    )
    assert (hit.compact, hit.reason) == (True, "transcript_bytes")
    under = decide_preflight_compaction(
        context_tokens=1000, context_window=200000, settings=honoured, active_transcript_bytes=limit - 1
    )
    assert under.compact is False
    ignored = CompactionSettings(truncate_after_compaction=False, max_active_transcript_bytes=limit)
    off = decide_preflight_compaction(
        context_tokens=1000, context_window=200000, settings=ignored, active_transcript_bytes=limit * 2
    )
    assert (off.compact, off.reason) == (False, "below_threshold")


def test_preflight_config_string_sizes() -> None:
    config = load_config(
        {
            "agents": {
                "defaults": {
                    "compaction": {"truncateAfterCompaction": True, "maxActiveTranscriptBytes": "20mb"}
                }
            }
        }
    )
    settings = CompactionSettings.from_config(config)
    hit = decide_preflight_compaction(
        context_tokens=10, context_window=None, settings=settings, active_transcript_bytes=20 * 1024 * 1024
    )
    assert hit.compact is True


def test_preflight_skips_heartbeats_and_stops_after_ineffective() -> None:
    beat = decide_preflight_compaction(
        context_tokens=199000, context_window=200000, settings=DEFAULTS, is_heartbeat=True
    )
    assert (beat.compact, beat.reason) == (False, "heartbeat")
    stuck = decide_preflight_compaction(
        context_tokens=199000, context_window=200000, settings=DEFAULTS, ineffective_compactions=1
    )
    assert (stuck.compact, stuck.reason) == (False, "compaction_ineffective")


# ---- prompt budget routes ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("estimate", "reducible", "route"),
    [
        (180000, 0, "fits"),  # budget = 200000 - 20000
        (180001, 0, "compact_only"),
        (181000, 6048, "truncate_tool_results_only"),  # overflow 1000: needs max(6048, 6000)
        (181000, 6047, "compact_then_truncate"),
        (190000, 60000, "truncate_tool_results_only"),  # overflow 10000: needs max(42048, 60000)
        (190000, 59999, "compact_then_truncate"),
    ],
)
def test_prompt_budget_routes(estimate: int, reducible: int, route: str) -> None:
    decision = plan_prompt_budget(
        estimated_prompt_tokens=estimate,
        context_window=200000,
        settings=DEFAULTS,
        tool_result_reducible_chars=reducible,
    )
    assert decision.route == route
    assert decision.budget == 180000
    assert decision.overflow_tokens == max(0, estimate - 180000)
    assert decision.should_compact == (route in ("compact_only", "compact_then_truncate"))


def test_prompt_budget_small_window_cap() -> None:
    decision = plan_prompt_budget(estimated_prompt_tokens=9000, context_window=16000, settings=DEFAULTS)
    assert (decision.effective_reserve, decision.budget, decision.overflow_tokens) == (8000, 8000, 1000)
    status = decision.to_json()
    assert status["schemaVersion"] == 1
    assert status["source"] == "pre-prompt-estimate"
    assert status["route"] == "compact_only"
    assert status["overflowTokens"] == 1000
    assert (status["contextTokenBudget"], status["promptBudgetBeforeReserve"]) == (16000, 8000)
    assert status["remainingPromptBudgetTokens"] == 0


def test_mid_turn_precheck_is_off_by_default_and_a_signal_when_on() -> None:
    assert MidTurnPrecheckSettings.from_config(load_config()).enabled is False
    off = mid_turn_precheck(
        precheck=MidTurnPrecheckSettings(),
        estimated_prompt_tokens=250000,
        context_window=200000,
        settings=DEFAULTS,
    )
    assert off is None
    on = MidTurnPrecheckSettings.from_config(
        load_config({"agents": {"defaults": {"compaction": {"midTurnPrecheck": {"enabled": True}}}}})
    )
    fits = mid_turn_precheck(
        precheck=on, estimated_prompt_tokens=1000, context_window=200000, settings=DEFAULTS
    )
    assert fits is None
    signal = mid_turn_precheck(
        precheck=on, estimated_prompt_tokens=210000, context_window=200000, settings=DEFAULTS
    )
    assert signal is not None
    assert (signal.phase, signal.route, signal.stop_submission) == ("mid_turn", "compact_only", True)
    assert signal.to_json()["source"] == "mid-turn-precheck"


def test_mid_turn_settings_error_names_key() -> None:
    config = load_config({"agents": {"defaults": {"compaction": {"midTurnPrecheck": {"enabled": "on"}}}}})
    with pytest.raises(ConfigError) as info:
        MidTurnPrecheckSettings.from_config(config)
    assert info.value.key == "agents.defaults.compaction.midTurnPrecheck.enabled"


# ---- timeout compaction -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("prompt", "done", "compact", "reason"),
    [
        (130000, 0, False, "below_timeout_ratio"),  # exactly 65 %: not more than
        (130001, 0, True, "timeout_near_full"),
        (190000, 1, True, "timeout_near_full"),
        (190000, 2, False, "attempts_exhausted"),
    ],
)
def test_timeout_compaction(prompt: int, done: int, compact: bool, reason: str) -> None:
    decision = decide_timeout_compaction(
        prompt_tokens=prompt, context_window=200000, settings=DEFAULTS, timeout_compactions=done
    )
    assert (decision.compact, decision.reason, decision.trigger, decision.force) == (
        compact,
        reason,
        "timeout",
        True,
    )
