"""
The context budget: which context window applies, and how many tokens the context holds now.

Rules: OpenClaw spec §5.3 (``resolveContextWindowInfo``: configured model entry, model metadata, default,
``agents.defaults.contextTokens`` as a cap; the context-window guard), DESIGN D5 (unknown window: 200000),
pi-format spec §12 and §15.1 (context tokens = last provider usage + estimates of the newer messages;
usage from before the latest compaction is stale).
"""

from __future__ import annotations

import math
from typing import Final, Self

import attrs

from sessionkeeper._config import Config, setting, structure_settings
from sessionkeeper._window import (
    DEFAULT_CONTEXT_WINDOW_TOKENS,
    ContextWindowSource,
    choose_context_window,
    positive_tokens,
)
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.transcript import ContextTokenEstimate, estimate_context_usage


__all__ = (
    "DEFAULT_CONTEXT_WINDOW_TOKENS",
    "ContextTokenEstimate",
    "ContextWindowInfo",
    "ContextWindowSettings",
    "estimate_context_usage",
    "resolve_context_window",
)

_HARD_MIN_TOKENS: Final = 4000
_WARN_BELOW_TOKENS: Final = 8000
_HARD_MIN_RATIO: Final = 0.1
_WARN_BELOW_RATIO: Final = 0.2


def _optional_positive_int(raw: object, key: str) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not (0 <= raw < math.inf):
        raise ConfigError(f"expected a positive number of tokens, got {raw!r}", key=key)
    return positive_tokens(raw)


@attrs.frozen(kw_only=True)
class ContextWindowSettings:
    """
    Host-wide context-window settings (``agents.defaults``, OpenClaw §5.3).

    Attributes:
        context_tokens: ``agents.defaults.contextTokens``: a cap on every model's window, in tokens;
            ``None`` (default) = no cap.
    """

    context_tokens: int | None = setting(default=None, parse=_optional_positive_int)

    @classmethod
    def from_config(cls, config: Config) -> Self:
        """
        Build from the ``agents.defaults`` section.

        Raises:
            ConfigError: ``contextTokens`` is not a non-negative number.
        """
        return structure_settings(cls, config.section("agents.defaults"), prefix="agents.defaults")


@attrs.frozen(kw_only=True)
class ContextWindowInfo:
    """
    The context window that applies to one model call, and why.

    Attributes:
        tokens: The window, in tokens.
        source: ``"override"`` (the host's explicit value, OpenClaw's ``models.providers`` entry),
            ``"catalogue"`` (the model catalogue entry the host passed), ``"default"`` (200000) or
            ``"cap"`` (``agents.defaults.contextTokens`` lowered it).
        reference_tokens: The window before the cap, when ``source == "cap"``; else ``None``.
        warn_below_tokens: ``max(8000, floor(0.2 * reference))`` (OpenClaw's guard).
        hard_min_tokens: ``min(max(4000, floor(0.1 * reference)), max(tokens, 4000))``.
        should_warn: ``tokens < warn_below_tokens``: the window is small for an agent.
        should_block: ``tokens < hard_min_tokens``: too small to run at all.
    """

    tokens: int
    source: ContextWindowSource
    reference_tokens: int | None = None
    warn_below_tokens: int
    hard_min_tokens: int
    should_warn: bool
    should_block: bool


def resolve_context_window(
    *,
    override: int | None = None,
    catalogue_context_tokens: int | None = None,
    catalogue_context_window: int | None = None,
    cap: int | None = None,
    default: int = DEFAULT_CONTEXT_WINDOW_TOKENS,
) -> ContextWindowInfo:
    """
    Resolve the context window in OpenClaw's order (§5.3 ``resolveContextWindowInfo``, D5).

    1. ``override``: the host's explicit window for this model (OpenClaw: ``models.providers[p].models[id]
       .contextTokens ?? .contextWindow``);
    2. the model catalogue entry given by the host: ``catalogue_context_tokens ?? catalogue_context_window``;
    3. ``default`` (200000).

    Non-positive (and non-finite) values count as absent. Then ``cap`` (``agents.defaults.contextTokens``)
    lowers the window when it is smaller. The rule is pruning's
    :func:`~sessionkeeper.pruning.resolve_context_window_tokens` (one implementation,
    ``choose_context_window``); this adds the source and OpenClaw's guard
    (``evaluateContextWindowGuard``).

    Args:
        override: Explicit window, in tokens.
        catalogue_context_tokens: The catalogue's usable context (``contextTokens``), in tokens.
        catalogue_context_window: The catalogue's raw window (``contextWindow``), in tokens.
        cap: Host-wide cap, in tokens (see :class:`ContextWindowSettings`).
        default: Window when nothing is known, in tokens.

    Raises:
        ValueError: ``default`` is not positive.
    """
    if positive_tokens(default) is None:
        raise ValueError(f"default context window must be positive, got {default}")
    tokens, source, reference = choose_context_window(
        override=override,
        model_context_tokens=catalogue_context_tokens,
        model_context_window=catalogue_context_window,
        cap=cap,
        default=default,
    )
    basis = reference or tokens
    warn_below = max(_WARN_BELOW_TOKENS, int(basis * _WARN_BELOW_RATIO))
    hard_min = min(max(_HARD_MIN_TOKENS, int(basis * _HARD_MIN_RATIO)), max(tokens, _HARD_MIN_TOKENS))
    return ContextWindowInfo(
        tokens=tokens,
        source=source,
        reference_tokens=reference,
        warn_below_tokens=warn_below,
        hard_min_tokens=hard_min,
        should_warn=tokens < warn_below,
        should_block=tokens < hard_min,
    )
