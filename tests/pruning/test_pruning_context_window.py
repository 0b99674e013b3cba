"""
One context-window rule (break-it #4): pruning's ``resolve_context_window_tokens`` and the runtime's
``resolve_context_window`` both come from ``choose_context_window`` (OpenClaw ``resolveContextWindowInfo``,
spec §5.3 and §7; DESIGN D5: unknown window 200000).
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionkeeper._config import load_config
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.pruning import resolve_context_window_tokens
from sessionkeeper.pruning._pruner import choose_context_window, positive_tokens
from sessionkeeper.runtime import ContextWindowSettings, resolve_context_window


_value = st.none() | st.integers(-5, 400_000) | st.floats(allow_nan=True, allow_infinity=True)


@given(override=_value, tokens=_value, window=_value, cap=_value)
def test_pruning_and_runtime_resolve_the_same_window(
    override: float | None, tokens: float | None, window: float | None, cap: float | None
) -> None:
    pruning = resolve_context_window_tokens(
        configured=override, model_context_tokens=tokens, model_context_window=window, context_tokens_cap=cap
    )
    runtime = resolve_context_window(
        override=override, catalogue_context_tokens=tokens, catalogue_context_window=window, cap=cap
    )
    assert pruning == runtime.tokens
    assert pruning > 0


def test_order_sources_and_cap() -> None:
    assert choose_context_window() == (200_000, "default", None)
    assert choose_context_window(model_context_window=1000) == (1000, "catalogue", None)
    assert choose_context_window(model_context_tokens=500, model_context_window=1000) == (
        500,
        "catalogue",
        None,
    )
    assert choose_context_window(override=42, model_context_window=1000) == (42, "override", None)
    assert choose_context_window(model_context_window=1000, cap=800) == (800, "cap", 1000)
    assert choose_context_window(model_context_window=1000, cap=2000) == (1000, "catalogue", None)
    assert choose_context_window(override=0, model_context_tokens=-1, model_context_window=math.nan) == (
        200_000,
        "default",
        None,
    )
    assert choose_context_window(default=0) == (200_000, "default", None)  # pruning never fails
    with pytest.raises(ValueError, match="positive"):
        resolve_context_window(default=0)  # the runtime's explicit default must be positive


def test_non_finite_values_are_absent() -> None:
    assert positive_tokens(math.inf) is None
    assert positive_tokens(math.nan) is None
    assert positive_tokens(True) is None
    assert positive_tokens(1999.9) == 1999
    # the runtime used int(value // 1): NaN and Infinity raised instead of counting as absent
    info = resolve_context_window(override=math.inf, catalogue_context_window=math.nan, cap=math.inf)
    assert (info.tokens, info.source) == (200_000, "default")


@pytest.mark.parametrize("raw", [math.inf, -1, "lots", True])
def test_context_tokens_setting_refuses_non_numbers_and_infinity(raw: object) -> None:
    # a JSON5 config can spell Infinity: a ConfigError naming the key, not an OverflowError
    with pytest.raises(ConfigError) as info:
        ContextWindowSettings.from_config(load_config({"agents": {"defaults": {"contextTokens": raw}}}))
    assert info.value.key == "agents.defaults.contextTokens"
