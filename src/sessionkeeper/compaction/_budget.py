"""
Reserve arithmetic and the compaction threshold (OpenClaw spec §5.3, DESIGN D4/D5).

Pure functions over token counts; the runtime imports them to decide when to compact and when to
flush memory.
"""

from __future__ import annotations

from sessionkeeper.compaction._settings import CompactionSettings


__all__ = (
    "DEFAULT_CONTEXT_WINDOW",
    "compaction_threshold",
    "effective_reserve_tokens",
    "should_compact",
)

DEFAULT_CONTEXT_WINDOW = 200_000
"""Context window assumed when the model's is unknown (DESIGN D5)."""

_MIN_PROMPT_CAP = 8000


def _window(context_window: int | None) -> int:
    return context_window if context_window and context_window > 0 else DEFAULT_CONTEXT_WINDOW


def effective_reserve_tokens(
    settings: CompactionSettings,
    *,
    context_window: int | None,
    max_output_tokens: int | None = None,
) -> int:
    """
    The reserve actually kept free: OpenClaw's floor and caps applied to ``reserve_tokens``.

    OpenClaw spec §5.3 (``applyAgentCompactionSettingsFromConfig``): with a window ``C``,
    ``minPrompt = min(8000, max(1, floor(C / 2)))`` and ``maxReserve = max(0, C - minPrompt)``; the
    floor (``reserve_tokens_floor``, 0 = none) is lowered to at most ``maxReserve``; the reserve is
    ``max(reserve_tokens, floor)`` capped at ``maxReserve``. Example: ``C = 16000`` gives 8000;
    ``C = 200000`` with the defaults gives 20000.

    Args:
        settings: The compaction settings.
        context_window: The model's window in tokens; ``None``/0 = unknown, 200000 is assumed
            (DESIGN D5).
        max_output_tokens: The reply budget the host will request, when known. It raises the
            reserve to at least that value (field report B09: the provider rejects input plus the
            requested output), still under the cap. ``None`` (default) gives OpenClaw's value.

    Returns:
        The effective reserve in tokens (``0 <= reserve <= C - minPrompt``).
    """
    window = _window(context_window)
    min_prompt = min(_MIN_PROMPT_CAP, max(1, window // 2))
    max_reserve = max(0, window - min_prompt)
    floor = min(settings.reserve_tokens_floor, max_reserve)
    reserve = max(settings.reserve_tokens, floor)
    if max_output_tokens is not None and max_output_tokens > 0:
        reserve = max(reserve, max_output_tokens)
    return min(reserve, max_reserve)


def compaction_threshold(
    settings: CompactionSettings,
    *,
    context_window: int | None,
    max_output_tokens: int | None = None,
) -> int:
    """
    Context size above which threshold compaction runs: ``contextWindow - effectiveReserve``.

    Args:
        settings: The compaction settings.
        context_window: The model's window in tokens (``None``/0: 200000, DESIGN D5).
        max_output_tokens: See :func:`effective_reserve_tokens`.

    Returns:
        The threshold in tokens (compaction when the context is strictly above it).
    """
    window = _window(context_window)
    reserve = effective_reserve_tokens(settings, context_window=window, max_output_tokens=max_output_tokens)
    return window - reserve


def should_compact(
    context_tokens: int,
    *,
    context_window: int | None,
    settings: CompactionSettings,
    max_output_tokens: int | None = None,
) -> bool:
    """
    Whether threshold compaction should run now (DESIGN D4, both modes).

    ``settings.enabled and context_tokens > context_window - effective_reserve`` (strict
    greater-than, as pi's ``shouldCompact``, pi spec §12), with the effective reserve of
    :func:`effective_reserve_tokens`. ``enabled: false`` stops this check only; overflow recovery
    and manual compaction do not call it (OpenClaw spec §5.2).

    Args:
        context_tokens: Current context size in tokens (pi's context estimate: last usage plus
            estimates of the messages after it).
        context_window: The model's window in tokens (``None``/0: 200000, DESIGN D5).
        settings: The compaction settings.
        max_output_tokens: See :func:`effective_reserve_tokens`.

    Returns:
        ``True`` when a compaction is due.
    """
    if not settings.enabled:
        return False
    threshold = compaction_threshold(
        settings, context_window=context_window, max_output_tokens=max_output_tokens
    )
    return context_tokens > threshold
