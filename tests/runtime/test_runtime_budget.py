"""Context-window resolution and the best context-token estimate (OpenClaw §5.3, pi §12/§15.1, D5)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests._helpers import user

from sessionkeeper._config import load_config
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.runtime import (
    DEFAULT_CONTEXT_WINDOW_TOKENS,
    ContextWindowSettings,
    resolve_context_window,
)
from sessionkeeper.transcript import (
    AgentMessage,
    AssistantMessage,
    CompactionSummaryMessage,
    TextContent,
    UnknownMessage,
    Usage,
    estimate_context_tokens,
    estimate_context_usage,
    estimate_tokens,
    message_from_json,
)


# ---- context window ------------------------------------------------------------------------------------
def test_default_window_is_200000() -> None:
    info = resolve_context_window()
    assert (info.tokens, info.source) == (200000, "default")
    assert DEFAULT_CONTEXT_WINDOW_TOKENS == 200000


@pytest.mark.parametrize(
    ("kwargs", "tokens", "source"),
    [
        ({"override": 64000, "catalogue_context_tokens": 128000}, 64000, "override"),
        ({"catalogue_context_tokens": 128000, "catalogue_context_window": 200000}, 128000, "catalogue"),
        ({"catalogue_context_window": 200000}, 200000, "catalogue"),
        ({"override": 0, "catalogue_context_window": 32000}, 32000, "catalogue"),  # 0 counts as absent
        ({"override": -5}, 200000, "default"),
        ({"default": 100000}, 100000, "default"),
    ],
)
def test_resolution_order(kwargs: dict[str, Any], tokens: int, source: str) -> None:
    info = resolve_context_window(**kwargs)
    assert (info.tokens, info.source) == (tokens, source)


def test_cap_lowers_but_never_raises() -> None:
    capped = resolve_context_window(catalogue_context_window=1_000_000, cap=50000)
    assert (capped.tokens, capped.source, capped.reference_tokens) == (50000, "cap", 1_000_000)
    uncapped = resolve_context_window(override=32000, cap=50000)
    assert (uncapped.tokens, uncapped.source, uncapped.reference_tokens) == (32000, "override", None)


def test_guard_thresholds() -> None:
    small = resolve_context_window(override=6000)
    assert (small.should_warn, small.should_block) == (True, False)
    tiny = resolve_context_window(override=3000)
    assert (tiny.should_warn, tiny.should_block) == (True, True)
    normal = resolve_context_window(override=200000)
    assert (normal.warn_below_tokens, normal.hard_min_tokens) == (40000, 20000)
    assert (normal.should_warn, normal.should_block) == (False, False)
    # ratios are taken from the uncapped window
    capped = resolve_context_window(catalogue_context_window=1_000_000, cap=50000)
    assert (capped.warn_below_tokens, capped.hard_min_tokens) == (200000, 50000)
    assert (capped.should_warn, capped.should_block) == (True, False)


def test_bad_default_is_refused() -> None:
    with pytest.raises(ValueError, match="default"):
        resolve_context_window(default=0)


@given(
    override=st.none() | st.integers(min_value=-10, max_value=10_000_000),
    catalogue=st.none() | st.integers(min_value=-10, max_value=10_000_000),
    cap=st.none() | st.integers(min_value=-10, max_value=10_000_000),
)
def test_window_is_positive_and_never_above_the_cap(
    override: int | None, catalogue: int | None, cap: int | None
) -> None:
    info = resolve_context_window(override=override, catalogue_context_tokens=catalogue, cap=cap)
    assert info.tokens > 0
    if cap is not None and cap > 0:
        assert info.tokens <= cap


def test_context_window_settings_from_config() -> None:
    assert ContextWindowSettings.from_config(load_config()).context_tokens is None
    config = load_config({"agents": {"defaults": {"contextTokens": 120000}}})
    assert ContextWindowSettings.from_config(config).context_tokens == 120000
    with pytest.raises(ConfigError) as info:
        ContextWindowSettings.from_config(load_config({"agents": {"defaults": {"contextTokens": "big"}}}))
    assert info.value.key == "agents.defaults.contextTokens"


# ---- best token estimate -------------------------------------------------------------------------------


def _reply(
    text: str, ts: int, *, total: int = 0, stop: str = "stop", input: int = 0, output: int = 0
) -> AssistantMessage:
    usage = (
        Usage(input=input, output=output, total_tokens=total) if total else Usage(input=input, output=output)
    )
    return AssistantMessage(
        content=[TextContent(text=text)],
        api="anthropic-messages",
        provider="anthropic",
        model="m",
        usage=usage,
        stop_reason=stop,
        timestamp=ts,
    )


def test_usage_plus_estimates_of_newer_messages() -> None:
    messages: list[AgentMessage] = [
        user("a" * 40, ts=1, blocks=True),
        _reply("b" * 40, 2, total=5000),
        user("c" * 400, ts=3, blocks=True),
    ]
    estimate = estimate_context_usage(messages)
    assert (estimate.tokens, estimate.usage_tokens, estimate.trailing_tokens) == (5100, 5000, 100)
    assert (estimate.last_usage_index, estimate.source) == (1, "usage")


def test_error_aborted_and_zero_usage_replies_are_skipped() -> None:
    messages: list[AgentMessage] = [
        user("a" * 40, ts=1, blocks=True),
        _reply("ok", 2, input=900, output=100),
        _reply("x" * 8, 3, total=99999, stop="error"),
        _reply("y" * 8, 4, total=88888, stop="aborted"),
        _reply("z" * 8, 5),  # all-zero usage
    ]
    estimate = estimate_context_usage(messages)
    assert estimate.last_usage_index == 1
    assert estimate.usage_tokens == 1000
    assert estimate.trailing_tokens == 6


def test_stale_usage_from_before_a_compaction_is_never_used() -> None:
    summary = CompactionSummaryMessage(summary="s" * 400, tokens_before=150000, timestamp=100)
    kept = _reply("kept " * 10, 50, total=150000)  # kept tail from before the compaction
    messages: list[AgentMessage] = [
        summary,
        user("q" * 40, ts=40, blocks=True),
        kept,
        user("new" * 10, ts=101, blocks=True),
    ]
    estimate = estimate_context_usage(messages)
    assert estimate.source == "estimate"
    assert estimate.stale_usage_skipped == 1
    assert estimate.tokens == sum(estimate_tokens(m) for m in messages)
    assert estimate.tokens < 1000
    # pi's own estimate would have anchored on the stale 150000
    assert estimate_context_tokens(messages).tokens > 150000


def test_usage_newer_than_the_compaction_anchors() -> None:
    summary = CompactionSummaryMessage(summary="s" * 400, tokens_before=150000, timestamp=100)
    messages: list[AgentMessage] = [
        summary,
        user("q" * 40, ts=101, blocks=True),
        _reply("r", 102, total=30000),
    ]
    estimate = estimate_context_usage(messages)
    assert (estimate.source, estimate.tokens) == ("usage", 30000)


def test_compacted_at_from_the_caller() -> None:
    messages: list[AgentMessage] = [user("q" * 40, ts=1, blocks=True), _reply("r", 2, total=30000)]
    assert estimate_context_usage(messages, compacted_at_ms=2).source == "estimate"
    assert estimate_context_usage(messages, compacted_at_ms=1).source == "usage"


def test_unknown_assistant_shapes_count_too() -> None:
    raw = UnknownMessage(
        {"role": "assistant", "stopReason": "stop", "usage": {"totalTokens": 777}, "timestamp": 5}
    )
    estimate = estimate_context_usage([user("hi", ts=1, blocks=True), raw])
    assert (estimate.tokens, estimate.last_usage_index) == (777, 1)


def test_empty_context() -> None:
    estimate = estimate_context_usage([])
    assert (estimate.tokens, estimate.source, estimate.last_usage_index) == (0, "estimate", None)


@pytest.mark.parametrize("name", ["basic", "full", "branchy", "large-2000"])
def test_golden_context_tokens_match_pi(pi_samples: Path, name: str) -> None:
    meta = json.loads((pi_samples / f"{name}.meta.json").read_text(encoding="utf-8"))
    messages = [message_from_json(raw) for raw in meta["messages"]]
    expected = meta["meta"]["contextTokens"]
    estimate = estimate_context_usage(messages)
    assert estimate.stale_usage_skipped == 0
    assert estimate.tokens == expected["tokens"]
    assert estimate.usage_tokens == expected["usageTokens"]
    assert estimate.trailing_tokens == expected["trailingTokens"]
    assert estimate.last_usage_index == expected["lastUsageIndex"]
