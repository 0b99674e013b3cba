"""Overflow detection, observed/synthetic token counts, recovery plan (OpenClaw §5.7, pi §15.2, D5)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionkeeper._config import load_config
from sessionkeeper.exceptions import ConfigError, ContextOverflowError
from sessionkeeper.runtime import (
    OverflowRecoverySettings,
    OverflowRecoveryState,
    is_context_overflow,
    is_context_overflow_text,
    parse_observed_token_count,
    plan_overflow_recovery,
    synthetic_token_count,
)
from sessionkeeper.transcript import AssistantMessage, TextContent, Usage


# (provider family, message) — every family of OpenClaw §5.7 and pi §15.2
POSITIVES: list[tuple[str, str]] = [
    ("anthropic", "prompt is too long: 213462 tokens > 200000 maximum"),
    (
        "anthropic-413",
        '413 {"error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}',
    ),
    (
        "anthropic-max-tokens",
        "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length "
        "or `max_tokens` and try again",
    ),
    (
        "openai",
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
    ),
    (
        "openai-chat",
        "This model's maximum context length is 128000 tokens. However, your messages resulted in "
        "130000 tokens. Please reduce the length of the messages.",
    ),
    ("openai-code", "context_length_exceeded"),
    ("litellm", "Requested token count exceeds the model's maximum context length of 131072 tokens"),
    ("google", "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575)."),
    ("google-invalid-argument", "400 INVALID_ARGUMENT: request has more than the maximum number of tokens"),
    ("bedrock", "ValidationException: Input is too long for requested model."),
    ("bedrock-count", "input token count exceeds the maximum number of input tokens"),
    ("xai", "This model's maximum prompt length is 131072 but the request contains 537812 tokens."),
    ("groq", "Please reduce the length of the messages or completion."),
    (
        "openrouter",
        "This endpoint's maximum context length is 200000 tokens. However, you requested about 250000 tokens "
        "(240000 of text input, 10000 in the output).",
    ),
    ("together", "The input (140000 tokens) is longer than the model's context length (131072 tokens)."),
    ("llama.cpp", "the request exceeds the available context size, try increasing it"),
    ("llama.cpp-count", "request (9000 tokens) exceeds the available context size (8192 tokens)"),
    ("lm-studio", "The number of tokens to keep from the initial prompt is greater than the context length"),
    ("copilot", "prompt token count of 140000 exceeds the limit of 128000"),
    ("minimax", "invalid params, context window exceeds limit (2013)"),
    ("kimi", "Your request exceeded model token limit: 262144 (requested: 300000)"),
    ("cerebras-413", "413 status code (no body)"),
    ("cerebras-400", "400 status code (no body)"),
    (
        "mistral",
        "Prompt contains 140000 tokens and 0 draft tokens, too large for model with 131072 maximum "
        "context length",
    ),
    ("ollama", "prompt too long; exceeded max context length by 1200 tokens"),
    ("ollama-error", "ollama error: context length exceeded, too many tokens"),
    ("ds4", "prompt has 40,000 tokens, but the configured context size is 32,768 tokens"),
    ("zai", "model_context_window_exceeded"),
    ("generic-window", "context_window_exceeded"),
    ("openclaw-precheck", "Context overflow: prompt too large for the model (precheck)."),
    ("request-size", "Request size exceeds model context window"),
    ("out-of-room", "The context window ran out of room for this request"),
    ("exceeds-model-window", "Prompt exceeds model context window"),
    ("model-token-limit", "Request exceeds model token limit"),
    ("exceed-context-limit", "messages exceed context limit"),
    ("models-max-context", "the prompt exceeds the model's maximum context"),
    ("max-tokens-combo", "max_tokens (32000) plus the input would exceed the context window"),
    ("input-length-combo", "input length 120000 exceeds context window 100000"),
    ("http-413", "413 Request Entity Too Large"),
    ("total-tokens", "Total tokens of 300000 exceeds the model's max of 262144"),
    ("too-long-for-model", "Input is too long for the model"),
    ("too-long-for-this-model", "input is too long for this model"),
    ("input-exceeds-max", "input exceeds the maximum number of tokens"),
    ("pi-too-many-tokens", "too many tokens in the request"),
    ("pi-token-limit", "token limit exceeded"),
    ("chinese-1", "错误：上下文过长"),
    ("chinese-2", "请求失败：上下文超出限制"),
    ("chinese-3", "上下文长度超过模型上限"),
    ("chinese-4", "超出最大上下文"),
    ("chinese-5", "请压缩上下文后重试"),
    ("digits-contain-429", "prompt is too long: 204291 tokens > 200000 maximum"),
]

# look-alikes that must NOT match: rate limits, TPM, billing, transient errors (D5, B09)
NEGATIVES: list[tuple[str, str]] = [
    ("b09-n1", "429 Too Many Requests: rate limit of 30000 input tokens per minute exceeded"),
    ("b09-n2", "500 Internal Server Error"),
    ("b09-n3", "overloaded_error: Overloaded"),
    ("bedrock-throttle", "ThrottlingException: Too many tokens, please wait before trying again."),
    ("too-many-tokens-wait", "Too many tokens, please wait"),
    (
        "groq-tpm-413",
        "413 Request too large for model `llama-3.3-70b` in organization `org_1` on tokens per minute (TPM): "
        "Limit 12000, Requested 18000, please reduce your message size and try again.",
    ),
    (
        "openai-tpm",
        "Request too large for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000.",
    ),
    ("google-429", "429 RESOURCE_EXHAUSTED: Resource has been exhausted (e.g. check quota)."),
    (
        "rate-limit-error",
        "rate_limit_error: Number of request tokens has exceeded your per-minute rate limit",
    ),
    (
        "quota",
        "insufficient_quota: You exceeded your current quota, please check your plan and billing details.",
    ),
    (
        "anthropic-billing",
        "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to "
        "upgrade.",
    ),
    (
        "openrouter-402",
        "This request requires more credits, or fewer max_tokens. You requested up to 32000 tokens, but can "
        "only afford 12000.",
    ),
    ("http-402", "402 Payment Required"),
    ("reasoning", "Reasoning is mandatory for this endpoint and cannot be disabled."),
    ("window-too-small", "Model context window too small (2048 tokens). Minimum is 4000."),
    ("pi-throttling-prefix", "Throttling error: prompt is too long"),
    ("pi-unavailable-prefix", "Service unavailable: prompt is too long"),
    ("output-cap", "max_tokens: 64001 > 64000, which is the maximum allowed number of output tokens"),
    ("auth", "401 Unauthorized: invalid x-api-key"),
    ("timeout", "Request timed out."),
    ("connection", "Connection error."),
    ("empty", ""),
    ("chinese-rate", "请求过于频繁，上下文过长"),
]


@pytest.mark.parametrize(("family", "text"), POSITIVES, ids=[f for f, _ in POSITIVES])
def test_overflow_positives(family: str, text: str) -> None:
    assert is_context_overflow(text), family
    assert is_context_overflow_text(text), family


@pytest.mark.parametrize(("family", "text"), NEGATIVES, ids=[f for f, _ in NEGATIVES])
def test_overflow_lookalikes_do_not_match(family: str, text: str) -> None:
    assert not is_context_overflow(text), family


@given(
    positive=st.sampled_from([t for _, t in POSITIVES]),
    exclusion=st.sampled_from(
        [
            "rate limit",
            "429 Too Many Requests",
            "tokens per minute",
            "(TPM)",
            "402 Payment Required",
            "insufficient credits",
            "please wait",
            "quota exceeded",
        ]
    ),
)
def test_any_exclusion_vetoes_any_positive(positive: str, exclusion: str) -> None:
    assert not is_context_overflow(f"{positive} ({exclusion})")


def test_none_is_not_overflow() -> None:
    assert not is_context_overflow(None)
    assert not is_context_overflow_text(None)


def _assistant(**kwargs: Any) -> AssistantMessage:
    base: dict[str, Any] = {"content": [], "api": "anthropic-messages", "provider": "anthropic", "model": "m"}
    base.update(kwargs)
    return AssistantMessage(**base)


class _APIError(Exception):
    def __init__(self, message: str, *, status_code: int, body: object = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body


class _Response:
    def __init__(self, status_code: int, text: str) -> None:
        self.status_code = status_code
        self.text = text


class _HTTPStatusError(Exception):
    def __init__(self, message: str, response: _Response) -> None:
        super().__init__(message)
        self.response = response


def test_error_object_with_nested_json_body() -> None:
    body = {
        "type": "error",
        "error": {"type": "request_too_large", "message": "Request exceeds the maximum size"},
    }
    assert is_context_overflow(_APIError("Error code: 413", status_code=413, body=body))


def test_error_cause_chain_is_searched() -> None:
    def call_model() -> None:
        raise _APIError("prompt is too long: 210000 tokens > 200000 maximum", status_code=400)

    def run() -> None:
        try:
            call_model()
        except _APIError as inner:
            raise RuntimeError("model call failed") from inner

    with pytest.raises(RuntimeError) as info:
        run()
    assert is_context_overflow(info.value)
    assert parse_observed_token_count(info.value) == 210000


def test_httpx_style_response_text() -> None:
    err = _HTTPStatusError(
        "Client error '400 Bad Request'",
        _Response(400, json.dumps({"error": {"message": "context_length_exceeded"}})),
    )
    assert is_context_overflow(err)


def test_bare_413_without_body_is_cerebras_overflow() -> None:
    assert is_context_overflow(_APIError("", status_code=413))
    assert not is_context_overflow(_APIError("", status_code=429))


def test_rate_limit_status_line_vetoes_matching_body() -> None:
    body = {"error": {"message": "prompt is too long", "code": "rate_limit_exceeded"}}
    assert not is_context_overflow(_APIError("429", status_code=429, body=body))


def test_mapping_error_body() -> None:
    assert is_context_overflow({"error": {"message": "This model's maximum context length is 8192 tokens"}})
    assert not is_context_overflow({"error": {"message": "Rate limit reached"}})


def test_assistant_error_message() -> None:
    msg = _assistant(stop_reason="error", error_message="prompt is too long: 201000 tokens > 200000 maximum")
    assert is_context_overflow(msg)
    assert parse_observed_token_count(msg) == 201000


def test_assistant_that_succeeded_is_not_an_error_overflow() -> None:
    msg = _assistant(content=[TextContent(text="prompt is too long")], stop_reason="stop")
    assert not is_context_overflow(msg)


def test_silent_overflow_needs_window_and_strictly_more_input() -> None:
    msg = _assistant(stop_reason="stop", usage=Usage(input=150000, cache_read=60000, output=10))
    assert is_context_overflow(msg, context_window=200000)
    assert not is_context_overflow(msg)  # no window, no usage check
    at_limit = _assistant(stop_reason="stop", usage=Usage(input=150000, cache_read=50000, output=10))
    assert not is_context_overflow(at_limit, context_window=200000)


def test_length_stop_overflow() -> None:
    full = _assistant(stop_reason="length", usage=Usage(input=198000, output=0))
    assert is_context_overflow(full, context_window=200000)  # 198000 >= 0.99 * 200000
    short = _assistant(stop_reason="length", usage=Usage(input=197999, output=0))
    assert not is_context_overflow(short, context_window=200000)
    with_output = _assistant(stop_reason="length", usage=Usage(input=199000, output=5))
    assert not is_context_overflow(with_output, context_window=200000)


def test_assistant_mapping_is_read_like_the_record() -> None:
    raw = {"role": "assistant", "stopReason": "error", "errorMessage": "request_too_large"}
    assert is_context_overflow(raw)
    silent = {"role": "assistant", "stopReason": "stop", "usage": {"input": 300, "cacheRead": 0, "output": 1}}
    assert is_context_overflow(silent, context_window=200)
    assert not is_context_overflow(
        {"role": "assistant", "stopReason": "stop", "errorMessage": "prompt is too long"}
    )


OBSERVED: list[tuple[str, int | None]] = [
    (
        "This model's maximum context length is 100000 tokens. However, you requested 107000 tokens "
        "(75000 in the messages, 32000 in the completion).",
        107000,
    ),
    ("prompt is too long: 101234 tokens > 100000 maximum", 101234),
    ("prompt is too long: 213,462 tokens > 200,000 maximum", 213462),
    ("prompt is too long: 150000, model maximum context length: 131072", 150000),
    ("Your request exceeded model token limit: 262144 (requested: 300000)", 300000),
    ("your messages resulted in 130000 tokens", 130000),
    ("input length and max_tokens exceed context limit (i.e 190000 + 20000 > 200000)", 210000),
    ("input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000", 209573),
    ("you requested about 250000 tokens (240000 of text input)", 250000),
    ("The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).", 1196265),
    ("This model's maximum prompt length is 131072 but the request contains 537812 tokens.", 537812),
    ("The input (140000 tokens) is longer than the model's context length (131072 tokens).", 140000),
    ("prompt token count of 140000 exceeds the limit of 128000", 140000),
    ("Prompt contains 140000 tokens and 0 draft tokens, too large for model", 140000),
    ("prompt has 40,000 tokens, but the configured context size is 32,768 tokens", 40000),
    ("request (9000 tokens) exceeds the available context size (8192 tokens)", 9000),
    ("Your input exceeds the context window of this model. (code=context_length_exceeded)", None),
    ("request_too_large", None),
    ("prompt too long; exceeded max context length by 1200 tokens", None),
    ("429 Too Many Requests: rate limit of 30000 input tokens per minute exceeded", None),
    ("Request too large on tokens per min (TPM): Limit 30000, you requested 45000 tokens", None),
    ("500 Internal Server Error", None),
    ("", None),
]


@pytest.mark.parametrize(("text", "expected"), OBSERVED)
def test_observed_token_count(text: str, expected: int | None) -> None:
    assert parse_observed_token_count(text) == expected


def test_synthetic_count_prefers_observed_then_estimate_then_minimal() -> None:
    assert synthetic_token_count(context_window=100000, observed=107000, estimate=120000).tokens == 107000
    assert synthetic_token_count(context_window=100000, observed=107000).source == "observed"
    assert synthetic_token_count(context_window=100000, estimate=120000).tokens == 120000
    assert synthetic_token_count(context_window=100000, estimate=120000).source == "estimate"
    minimal = synthetic_token_count(context_window=100000)
    assert (minimal.tokens, minimal.source) == (100001, "minimal")


def test_synthetic_count_is_always_over_budget() -> None:
    low = synthetic_token_count(context_window=100000, observed=1200)
    assert (low.tokens, low.source) == (100001, "observed")
    assert synthetic_token_count(context_window=100000, observed=0, estimate=0).source == "minimal"
    with pytest.raises(ValueError, match="context_window"):
        synthetic_token_count(context_window=0)


@given(
    window=st.integers(min_value=1, max_value=10_000_000),
    observed=st.none() | st.integers(min_value=-5, max_value=20_000_000),
    estimate=st.none() | st.integers(min_value=-5, max_value=20_000_000),
)
def test_synthetic_count_property(window: int, observed: int | None, estimate: int | None) -> None:
    count = synthetic_token_count(context_window=window, observed=observed, estimate=estimate)
    assert count.tokens > window
    if observed is not None and observed > window:
        assert count.tokens == observed


# ---- recovery plan ----------------------------------------------------------------------------------
P1 = (
    "This model's maximum context length is 100000 tokens. However, you requested 107000 tokens "
    "(75000 in the messages, 32000 in the completion)."
)


def test_recovery_compacts_once_then_reports_a_second_overflow_on_the_retry() -> None:
    state = OverflowRecoveryState()
    first = plan_overflow_recovery(P1, state=state, context_window=100000)
    assert first.action == "compact"
    assert first.attempt == 1
    assert first.token_count is not None
    assert (first.token_count.tokens, first.token_count.source) == (107000, "observed")
    state = state.after_compaction(succeeded=True)
    second = plan_overflow_recovery(P1, state=state, context_window=100000)
    assert (second.action, second.reason) == ("give_up", "retry_overflowed")
    err = second.error(attempts=state.compactions)
    assert isinstance(err, ContextOverflowError)
    assert (err.attempts, err.context_tokens) == (1, 107000)


def test_recovery_truncates_tool_results_once_before_giving_up() -> None:
    state = OverflowRecoveryState().after_compaction(succeeded=True)
    step = plan_overflow_recovery(P1, state=state, context_window=100000, has_reducible_tool_results=True)
    assert step.action == "truncate_tool_results"
    state = state.after_truncation()
    step = plan_overflow_recovery(P1, state=state, context_window=100000, has_reducible_tool_results=True)
    assert step.action == "give_up"


def test_failed_compaction_falls_back_to_truncation_then_gives_up() -> None:
    state = OverflowRecoveryState().after_compaction(succeeded=False)
    assert state.compactions == 1
    step = plan_overflow_recovery(P1, state=state, context_window=100000, has_reducible_tool_results=True)
    assert (step.action, step.reason) == ("truncate_tool_results", "compaction_failed")
    step = plan_overflow_recovery(P1, state=state.after_truncation(), context_window=100000)
    assert (step.action, step.reason) == ("give_up", "compaction_failed")


def test_at_most_three_overflow_compactions_per_run() -> None:
    state = OverflowRecoveryState()
    for attempt in (1, 2, 3):
        step = plan_overflow_recovery(P1, state=state, context_window=100000)
        assert (step.action, step.attempt) == ("compact", attempt)
        state = state.after_compaction(succeeded=True).after_reply()
    step = plan_overflow_recovery(P1, state=state, context_window=100000)
    assert (step.action, step.reason) == ("give_up", "attempts_exhausted")


def test_attempt_limit_is_configurable() -> None:
    settings = OverflowRecoverySettings.from_config(
        load_config({"agents": {"defaults": {"compaction": {"overflowRecovery": {"maxCompactions": 1}}}}})
    )
    state = OverflowRecoveryState().after_compaction(succeeded=True).after_reply()
    step = plan_overflow_recovery(P1, state=state, context_window=100000, settings=settings)
    assert (step.action, step.reason) == ("give_up", "attempts_exhausted")


def test_recovery_settings_defaults_and_errors() -> None:
    settings = OverflowRecoverySettings.from_config(load_config())
    assert (settings.max_compactions, settings.max_timeout_compactions) == (3, 2)
    assert settings.timeout_usage_ratio == 0.65
    assert settings.max_ineffective_compactions == 1
    bad = load_config({"agents": {"defaults": {"compaction": {"overflowRecovery": {"maxCompactions": -1}}}}})
    with pytest.raises(ConfigError) as info:
        OverflowRecoverySettings.from_config(bad)
    assert info.value.key == "agents.defaults.compaction.overflowRecovery.maxCompactions"


def test_recovery_ignores_non_overflow_errors() -> None:
    step = plan_overflow_recovery(
        "429 Too Many Requests", state=OverflowRecoveryState(), context_window=100000
    )
    assert step.action == "not_overflow"
    assert step.token_count is None


def test_recovery_uses_estimate_when_nothing_is_observed() -> None:
    step = plan_overflow_recovery(
        "request_too_large", state=OverflowRecoveryState(), context_window=100000, estimate_tokens=130000
    )
    assert step.token_count is not None
    assert (step.token_count.tokens, step.token_count.source) == (130000, "estimate")


# ---- robustness and properties ------------------------------------------------------------------------
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@given(value=_json_values)
def test_never_raises_on_arbitrary_input(value: object) -> None:
    assert isinstance(is_context_overflow(value, context_window=1000), bool)
    result = parse_observed_token_count(value)
    assert result is None or result > 0


def test_cyclic_exception_chain_terminates() -> None:
    first = RuntimeError("wrapper")
    second = ValueError("prompt is too long: 300000 tokens > 200000 maximum")
    first.__cause__ = second
    second.__context__ = first
    assert is_context_overflow(first)
    assert parse_observed_token_count(first) == 300000


@given(tokens=st.integers(min_value=1, max_value=10**9), maximum=st.integers(min_value=1, max_value=10**9))
def test_anthropic_count_round_trip(tokens: int, maximum: int) -> None:
    text = f"prompt is too long: {tokens:,} tokens > {maximum:,} maximum"
    assert is_context_overflow(text)
    assert parse_observed_token_count(text) == tokens


@given(
    prompt=st.integers(min_value=1, max_value=10**7),
    output=st.integers(min_value=0, max_value=10**6),
    limit=st.integers(min_value=1, max_value=10**7),
)
def test_anthropic_sum_form(prompt: int, output: int, limit: int) -> None:
    text = f"input length and `max_tokens` exceed context limit: {prompt} + {output} > {limit}"
    assert parse_observed_token_count(text) == prompt + output
