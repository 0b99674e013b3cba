"""
The context-window rule: how many tokens the model's context window holds, in one place.

OpenClaw's ``resolveContextWindowInfo`` (spec §5.3, §7), DESIGN D5 (an unknown window is 200000 tokens).
Shared by pruning (``resolve_context_window_tokens``), compaction's budgets and the runtime
(``sessionkeeper.runtime.resolve_context_window``).
"""

from __future__ import annotations

import math
from typing import Literal


__all__ = (
    "DEFAULT_CONTEXT_WINDOW_TOKENS",
    "ContextWindowSource",
    "choose_context_window",
    "positive_tokens",
    "window_or_default",
)

DEFAULT_CONTEXT_WINDOW_TOKENS = 200_000
"""Context window assumed when the model's is unknown, in tokens (DESIGN D5)."""


def window_or_default(context_window: int | None) -> int:
    """``context_window`` when positive, else :data:`DEFAULT_CONTEXT_WINDOW_TOKENS` (tokens; D5)."""
    return context_window if context_window and context_window > 0 else DEFAULT_CONTEXT_WINDOW_TOKENS


def positive_tokens(value: float | None) -> int | None:
    """A token count as OpenClaw reads one: floored; absent, non-finite, boolean or ``<= 0`` -> ``None``."""
    if value is None or isinstance(value, bool) or not math.isfinite(value):
        return None
    number = math.floor(value)
    return number if number > 0 else None


ContextWindowSource = Literal["override", "catalogue", "default", "cap"]
"""Where a context window came from (see :func:`choose_context_window`)."""


def choose_context_window(
    *,
    override: float | None = None,
    model_context_tokens: float | None = None,
    model_context_window: float | None = None,
    cap: float | None = None,
    default: int = DEFAULT_CONTEXT_WINDOW_TOKENS,
) -> tuple[int, ContextWindowSource, int | None]:
    """
    The context-window rule of OpenClaw's ``resolveContextWindowInfo`` (spec §5.3, §7; DESIGN D5), shared
    by pruning (:func:`resolve_context_window_tokens`) and the runtime
    (:func:`sessionkeeper.runtime.resolve_context_window`).

    The first positive value (:func:`positive_tokens`) of: ``override`` (the models config entry),
    the model's ``contextTokens``, the model's ``contextWindow``, ``default`` (200000 when ``default`` is
    not positive either); then ``cap`` (``agents.defaults.contextTokens``) lowers it when smaller. All
    values in tokens.

    Returns:
        ``(tokens, source, uncapped)``: the window, where it came from (``"override"``, ``"catalogue"``,
        ``"default"`` or ``"cap"``), and the window before the cap when the cap lowered it (else
        ``None``).
    """
    explicit = positive_tokens(override)
    catalogue = positive_tokens(model_context_tokens) or positive_tokens(model_context_window)
    tokens: int
    source: ContextWindowSource
    if explicit is not None:
        tokens, source = explicit, "override"
    elif catalogue is not None:
        tokens, source = catalogue, "catalogue"
    else:
        tokens, source = positive_tokens(default) or DEFAULT_CONTEXT_WINDOW_TOKENS, "default"
    limit = positive_tokens(cap)
    if limit is not None and limit < tokens:
        return limit, "cap", tokens
    return tokens, source, None
