"""Memory flush: threshold, once per cycle, skip rules, forced flush, prompts, records (§6, D4, B13)."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionkeeper._config import load_config
from sessionkeeper.compaction import CompactionSettings, compaction_threshold
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.runtime import (
    DEFAULT_MEMORY_FLUSH_PROMPT,
    DEFAULT_MEMORY_FLUSH_SYSTEM_PROMPT,
    MemoryFlushModel,
    MemoryFlushPolicy,
    MemoryFlushSettings,
    RuntimeSettings,
)


def _ms(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso).timestamp() * 1000)


NOW = _ms("2026-01-05T10:00:00+00:00")


def _policy(**flush: Any) -> MemoryFlushPolicy:
    return MemoryFlushPolicy(settings=MemoryFlushSettings(**flush))


def _decide(policy: MemoryFlushPolicy, **kwargs: Any) -> Any:
    base: dict[str, Any] = {
        "context_tokens": 100,
        "context_window": 200000,
        "compaction_count": 0,
        "memory_flush_compaction_count": None,
    }
    base.update(kwargs)
    return policy.decide(**base)


# ---- settings -----------------------------------------------------------------------------------------
def test_default_settings() -> None:
    settings = MemoryFlushSettings.from_config(load_config())
    assert settings.enabled is True
    assert settings.soft_threshold_tokens == 4000
    assert settings.force_flush_transcript_bytes == 2 * 1024 * 1024
    assert settings.model is None
    assert settings.prompt is None
    assert settings.system_prompt is None


def test_settings_from_config_keys() -> None:
    config = load_config(
        {
            "agents": {
                "defaults": {
                    "userTimezone": "Europe/Paris",
                    "compaction": {
                        "memoryFlush": {
                            "enabled": False,
                            "softThresholdTokens": 6000,
                            "forceFlushTranscriptBytes": "10mb",
                            "model": "ollama/qwen3:8b",
                            "prompt": "Save notes.",
                            "systemPrompt": "Be brief.",
                        }
                    },
                }
            }
        }
    )
    settings = MemoryFlushSettings.from_config(config)
    assert settings.enabled is False
    assert settings.soft_threshold_tokens == 6000
    assert settings.force_flush_transcript_bytes == 10 * 1024 * 1024
    assert settings.model == "ollama/qwen3:8b"
    assert (settings.prompt, settings.system_prompt) == ("Save notes.", "Be brief.")
    assert settings.user_timezone == "Europe/Paris"


@pytest.mark.parametrize(
    ("key", "value"),
    [("softThresholdTokens", -1), ("forceFlushTranscriptBytes", "lots"), ("enabled", "yes"), ("model", 3)],
)
def test_bad_settings_name_the_key(key: str, value: object) -> None:
    config = load_config({"agents": {"defaults": {"compaction": {"memoryFlush": {key: value}}}}})
    with pytest.raises(ConfigError) as info:
        MemoryFlushSettings.from_config(config)
    assert info.value.key == f"agents.defaults.compaction.memoryFlush.{key}"


@pytest.mark.parametrize("zone", ["Mars/Olympus", 42])
def test_an_unknown_user_timezone_is_ignored_with_a_warning_as_the_reset_policy_does(
    zone: object, caplog: pytest.LogCaptureFixture
) -> None:
    """D12, one rule: an unknown ``agents.defaults.userTimezone`` was a ConfigError here only."""
    config = load_config({"agents": {"defaults": {"userTimezone": zone}}})
    with caplog.at_level(logging.WARNING, logger="sessionkeeper"):
        settings = RuntimeSettings.from_config(config)
    assert settings.memory_flush.user_timezone is None  # the host's zone
    assert settings.reset.time_zone is None
    ignored = {r.name: r for r in caplog.records if getattr(r, "key", None) == "agents.defaults.userTimezone"}
    assert set(ignored) == {"sessionkeeper.runtime", "sessionkeeper.store"}
    assert all(r.levelno == logging.WARNING and r.value == repr(zone) for r in ignored.values())  # type: ignore[attr-defined]
    assert MemoryFlushSettings.from_config(config) == MemoryFlushSettings()


def test_policy_from_config_reads_both_blocks() -> None:
    config = load_config(
        {
            "agents": {
                "defaults": {
                    "compaction": {"reserveTokens": 62500, "memoryFlush": {"softThresholdTokens": 1000}}
                }
            }
        }
    )
    policy = MemoryFlushPolicy.from_config(config)
    assert policy.thresholds(context_window=200000) == (136500, 137500)


# ---- threshold (D4) -----------------------------------------------------------------------------------
def test_default_threshold_is_176000_and_below_compaction() -> None:
    assert MemoryFlushPolicy().thresholds(context_window=200000) == (176000, 180000)


def test_unknown_window_uses_200000() -> None:
    assert MemoryFlushPolicy().thresholds(context_window=None) == (176000, 180000)
    assert MemoryFlushPolicy().thresholds(context_window=0) == (176000, 180000)


def test_threshold_uses_effective_reserve_not_the_floor() -> None:
    policy = MemoryFlushPolicy(compaction=CompactionSettings(reserve_tokens=62500))
    assert policy.thresholds(context_window=200000) == (133500, 137500)
    assert policy.effective_reserve(context_window=200000) == 62500


def test_max_output_tokens_raises_both_thresholds_down() -> None:
    policy = MemoryFlushPolicy()
    assert policy.thresholds(context_window=100000, max_output_tokens=32000) == (64000, 68000)


def test_zero_soft_threshold_still_flushes_first() -> None:
    flush, compact = _policy(soft_threshold_tokens=0).thresholds(context_window=200000)
    assert flush == compact - 1


@given(
    window=st.integers(min_value=1, max_value=5_000_000),
    reserve=st.integers(min_value=0, max_value=5_000_000),
    floor=st.integers(min_value=0, max_value=5_000_000),
    soft=st.integers(min_value=0, max_value=5_000_000),
    max_output=st.none() | st.integers(min_value=0, max_value=5_000_000),
)
def test_flush_threshold_always_strictly_below_compaction_threshold(
    window: int, reserve: int, floor: int, soft: int, max_output: int | None
) -> None:
    compaction = CompactionSettings(reserve_tokens=reserve, reserve_tokens_floor=floor)
    policy = MemoryFlushPolicy(
        settings=MemoryFlushSettings(soft_threshold_tokens=soft), compaction=compaction
    )
    flush, compact = policy.thresholds(context_window=window, max_output_tokens=max_output)
    assert flush < compact
    assert compact == compaction_threshold(compaction, context_window=window, max_output_tokens=max_output)
    # and the flush decision fires whenever the compaction threshold is crossed (flush runs first)
    decision = policy.decide(
        context_tokens=compact + 1,
        context_window=window,
        compaction_count=0,
        memory_flush_compaction_count=None,
        max_output_tokens=max_output,
    )
    assert decision.run == (flush > 0)


# ---- truth tables -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("tokens", "expected_run", "reason"),
    [
        (176000, True, "threshold"),  # >= threshold
        (175999, False, "below_threshold"),
        (200001, True, "threshold"),
        (None, False, "no_token_count"),
        (0, False, "no_token_count"),
    ],
)
def test_threshold_truth_table(tokens: int | None, expected_run: bool, reason: str) -> None:
    decision = _decide(MemoryFlushPolicy(), context_tokens=tokens)
    assert (decision.run, decision.reason) == (expected_run, reason)
    assert decision.threshold == 176000
    assert decision.compaction_threshold == 180000


@pytest.mark.parametrize(
    ("compaction_count", "flushed_at", "expected_run"),
    [
        (0, None, True),  # never flushed
        (0, 0, False),  # already flushed in cycle 0
        (None, 0, False),  # a missing compactionCount is 0
        (1, 0, True),  # a compaction happened since: new cycle
        (5, 4, True),
        (5, 5, False),
        (3, 7, True),  # counters out of step (reset): not this cycle
    ],
)
def test_once_per_compaction_cycle(
    compaction_count: int | None, flushed_at: int | None, expected_run: bool
) -> None:
    decision = _decide(
        MemoryFlushPolicy(),
        context_tokens=190000,
        compaction_count=compaction_count,
        memory_flush_compaction_count=flushed_at,
    )
    assert decision.run is expected_run
    if not expected_run:
        assert decision.reason == "already_flushed"


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"has_session": False}, "no_session"),
        ({"in_flush_turn": True}, "flush_in_progress"),
        ({"host_supports_flush": False}, "unsupported_host"),
        ({"is_heartbeat": True}, "heartbeat"),
        ({"workspace_access": "ro"}, "read_only_workspace"),
        ({"workspace_access": "none"}, "read_only_workspace"),
    ],
)
def test_skip_rules(kwargs: dict[str, Any], reason: str) -> None:
    decision = _decide(
        MemoryFlushPolicy(),
        context_tokens=190000,
        active_transcript_bytes=10**9,
        pending_compaction=True,
        **kwargs,
    )
    assert (decision.run, decision.reason) == (False, reason)


def test_disabled_never_flushes() -> None:
    decision = _decide(_policy(enabled=False), context_tokens=190000, pending_compaction=True)
    assert (decision.run, decision.reason) == (False, "disabled")


def test_forced_flush_by_transcript_size() -> None:
    policy = MemoryFlushPolicy()
    two_mib = 2 * 1024 * 1024
    forced = _decide(policy, context_tokens=None, active_transcript_bytes=two_mib)
    assert (forced.run, forced.reason, forced.forced) == (True, "transcript_size", True)
    assert not _decide(policy, context_tokens=None, active_transcript_bytes=two_mib - 1).run
    # once per cycle applies to the forced path too
    again = _decide(
        policy, active_transcript_bytes=two_mib, compaction_count=2, memory_flush_compaction_count=2
    )
    assert again.reason == "already_flushed"
    # 0 disables it
    assert not _decide(_policy(force_flush_transcript_bytes=0), active_transcript_bytes=10**9).run


def test_pending_compaction_flushes_first_even_below_threshold() -> None:
    decision = _decide(MemoryFlushPolicy(), context_tokens=1000, pending_compaction=True)
    assert (decision.run, decision.reason, decision.forced) == (True, "pending_compaction", True)


def test_non_positive_threshold_never_flushes_by_tokens() -> None:
    policy = _policy(soft_threshold_tokens=50000)
    decision = _decide(policy, context_window=16000, context_tokens=15000)
    assert decision.threshold <= 0
    assert decision.run is False


# ---- plan and prompts ---------------------------------------------------------------------------------
def test_default_prompt_carries_every_element_of_the_spec() -> None:
    plan = MemoryFlushPolicy().plan(now_ms=NOW)
    text = plan.prompt
    assert text.startswith("Pre-compaction memory flush.")
    assert "memory/2026-01-05.md" in text
    assert "create the memory/ directory" in text
    assert "append" in text
    assert "never overwrite" in text
    for name in ("MEMORY.md", "DREAMS.md", "SOUL.md", "TOOLS.md", "AGENTS.md"):
        assert name in text
    assert "read-only" in text
    assert "timestamped" in text
    assert "reply with NO_REPLY" in text
    assert "YYYY-MM-DD" not in text
    assert "\nCurrent time: Monday, January 5th, 2026 - 10:00 (UTC)\nReference UTC: 2026-01-05 10:00 UTC" in (
        _policy(user_timezone="UTC").plan(now_ms=NOW).prompt
    )


def test_default_system_prompt_carries_every_element_of_the_spec() -> None:
    system = MemoryFlushPolicy().plan(now_ms=NOW).system_prompt
    assert "close to automatic compaction" in system
    assert "durable memories" in system
    assert "memory/2026-01-05.md" in system
    assert "read-only" in system
    assert "append" in system
    assert "You may reply, but NO_REPLY is usually the right answer." in system
    assert "Current time:" not in system


def test_defaults_need_no_extra_hints() -> None:
    plan = MemoryFlushPolicy().plan(now_ms=NOW)
    stamp = "2026-01-05"
    assert plan.prompt.split("\nCurrent time:")[0] == DEFAULT_MEMORY_FLUSH_PROMPT.replace("YYYY-MM-DD", stamp)
    assert plan.system_prompt == DEFAULT_MEMORY_FLUSH_SYSTEM_PROMPT.replace("YYYY-MM-DD", stamp)


def test_custom_prompt_gets_safety_hints_and_no_reply_hint() -> None:
    plan = _policy(prompt="Write what matters to YYYY-MM-DD notes.", system_prompt="Custom system.").plan(
        now_ms=NOW
    )
    assert plan.prompt.startswith("Write what matters to 2026-01-05 notes.")
    assert "memory/2026-01-05.md" in plan.prompt
    assert "MEMORY.md" in plan.prompt
    assert "only append" in plan.prompt
    assert "start your reply with NO_REPLY" in plan.prompt
    assert plan.system_prompt.startswith("Custom system.")
    assert "start your reply with NO_REPLY" in plan.system_prompt


def test_custom_prompt_mentioning_no_reply_gets_no_extra_hint() -> None:
    plan = _policy(prompt="Save memories; answer NO_REPLY when done.").plan(now_ms=NOW)
    assert "start your reply with NO_REPLY" not in plan.prompt
    assert plan.prompt.count("NO_REPLY") == 1


def test_custom_prompt_with_current_time_is_left_alone() -> None:
    plan = _policy(prompt="Current time: given by host. NO_REPLY").plan(now_ms=NOW)
    assert plan.prompt.count("Current time:") == 1


def test_date_uses_the_user_time_zone() -> None:
    late_utc = _ms("2026-01-05T20:00:00+00:00")  # 05:00 next day in Tokyo
    plan = _policy(user_timezone="Asia/Tokyo").plan(now_ms=late_utc)
    assert plan.relative_path == "memory/2026-01-06.md"
    assert plan.date_stamp == "2026-01-06"
    assert "Current time: Tuesday, January 6th, 2026 - 05:00 (Asia/Tokyo)" in plan.prompt
    assert "Reference UTC: 2026-01-05 20:00 UTC" in plan.prompt
    west = _policy(user_timezone="America/Los_Angeles").plan(now_ms=_ms("2026-01-05T03:00:00+00:00"))
    assert west.relative_path == "memory/2026-01-04.md"


def test_plan_is_a_silent_turn_not_stored_as_user_message() -> None:
    plan = MemoryFlushPolicy().plan(now_ms=NOW, extra_system_prompt="Run prompt.")
    assert plan.silent_expected is True
    assert plan.transcript_prompt == ""
    assert plan.system_prompt.startswith("Run prompt.\n\nPre-compaction memory flush turn.")


@pytest.mark.parametrize(
    ("value", "current", "provider", "model"),
    [
        ("ollama/qwen3:8b", "anthropic", "ollama", "qwen3:8b"),
        ("openrouter/meta/llama-3", None, "openrouter", "meta/llama-3"),
        ("qwen3:8b", "ollama", "ollama", "qwen3:8b"),  # a bare id keeps the session's provider
        ("qwen3:8b", None, None, "qwen3:8b"),
        ("/odd", "anthropic", "anthropic", "/odd"),
    ],
)
def test_model_override_is_exact_with_no_fallback(
    value: str, current: str | None, provider: str | None, model: str
) -> None:
    plan = _policy(model=value).plan(now_ms=NOW, current_provider=current)
    assert plan.model == MemoryFlushModel(provider=provider, model=model)
    assert plan.model is not None
    assert plan.model.fallbacks == ()


def test_no_model_override_by_default() -> None:
    assert MemoryFlushPolicy().plan(now_ms=NOW).model is None


# ---- records ------------------------------------------------------------------------------------------
def test_success_record_clears_failures() -> None:
    record = MemoryFlushPolicy().record_success(compaction_count_at_start=4, now_ms=NOW)
    assert record.to_entry_patch() == {
        "memoryFlushAt": NOW,
        "memoryFlushCompactionCount": 4,
        "memoryFlushFailureCount": 0,
        "memoryFlushLastFailedAt": None,
        "memoryFlushLastFailureError": None,
    }


def test_failures_count_up_and_exhaust_after_three() -> None:
    policy = MemoryFlushPolicy()
    first = policy.record_failure(
        error=RuntimeError("disk full"), previous_failure_count=None, compaction_count=2, now_ms=NOW
    )
    assert first.memory_flush_failure_count == 1
    assert first.exhausted is False
    assert first.notice is None
    assert first.to_entry_patch() == {
        "memoryFlushFailureCount": 1,
        "memoryFlushLastFailedAt": NOW,
        "memoryFlushLastFailureError": "disk full",
    }
    third = policy.record_failure(error="boom", previous_failure_count=2, compaction_count=2, now_ms=NOW + 1)
    assert third.exhausted is True
    assert third.notice is not None
    assert "3 times" in third.notice
    patch = third.to_entry_patch()
    assert patch["memoryFlushCompactionCount"] == 2  # the cycle is marked flushed
    assert patch["memoryFlushAt"] == NOW + 1
    # and the next decision in the same cycle skips
    assert (
        _decide(
            policy,
            context_tokens=190000,
            compaction_count=2,
            memory_flush_compaction_count=patch["memoryFlushCompactionCount"],
        ).reason
        == "already_flushed"
    )


def test_failure_error_is_capped_at_200_chars() -> None:
    record = MemoryFlushPolicy().record_failure(
        error="x" * 500, previous_failure_count=0, compaction_count=0, now_ms=NOW
    )
    assert record.memory_flush_last_failure_error is not None
    assert len(record.memory_flush_last_failure_error) == 200
    assert record.memory_flush_last_failure_error.endswith("…")
    empty = MemoryFlushPolicy().record_failure(
        error=ValueError(), previous_failure_count=0, compaction_count=0, now_ms=NOW
    )
    assert empty.memory_flush_last_failure_error == "ValueError"


def test_record_is_frozen() -> None:
    record = MemoryFlushPolicy().record_success(compaction_count_at_start=0, now_ms=NOW)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        record.memory_flush_at = 1  # type: ignore[misc]


@given(
    count=st.integers(min_value=0, max_value=1000),
    tokens=st.integers(min_value=0, max_value=400_000),
    size=st.integers(min_value=0, max_value=10**8),
    pending=st.booleans(),
)
def test_at_most_one_flush_per_cycle(count: int, tokens: int, size: int, pending: bool) -> None:
    policy = MemoryFlushPolicy()
    record = policy.record_success(compaction_count_at_start=count, now_ms=NOW)
    same_cycle = _decide(
        policy,
        context_tokens=tokens,
        compaction_count=count,
        memory_flush_compaction_count=record.memory_flush_compaction_count,
        active_transcript_bytes=size,
        pending_compaction=pending,
    )
    assert same_cycle.run is False
    next_cycle = _decide(
        policy,
        context_tokens=max(tokens, 176000),
        compaction_count=count + 1,
        memory_flush_compaction_count=record.memory_flush_compaction_count,
    )
    assert next_cycle.run is True
