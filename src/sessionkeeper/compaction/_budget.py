"""
Reserve arithmetic, the compaction threshold and the window-derived budgets (OpenClaw spec §5.3,
DESIGN D4/D5/D9).

Pure functions over token counts; the runtime imports them to decide when to compact and when to
flush memory, the compactor to size what it keeps and what it asks the summariser for.
"""

from __future__ import annotations

import logging
import math
import threading
from typing import Final

import attrs

from sessionkeeper._window import DEFAULT_CONTEXT_WINDOW_TOKENS, window_or_default
from sessionkeeper.compaction._settings import DEFAULT_RESERVE_TOKENS, CompactionSettings


__all__ = (
    "DEFAULT_CONTEXT_WINDOW",
    "KEEP_RECENT_SHARE",
    "SUMMARY_CHARS_SHARE",
    "SUMMARY_TOKENS_SHARE",
    "CompactionBudget",
    "compaction_budget",
    "compaction_threshold",
    "effective_reserve_tokens",
    "should_compact",
)

_log = logging.getLogger("sessionkeeper.compaction")

KEEP_RECENT_SHARE: Final = 0.4
"""D9: the kept tail takes at most this share of the prompt budget ``window - effectiveReserve``."""
SUMMARY_TOKENS_SHARE: Final = 0.25
"""D9: a history summary request asks for at most this share of the prompt budget (``max_tokens``)."""
SUMMARY_CHARS_SHARE: Final = 0.3
"""D9: the written summary (suffix included) holds at most this share of the prompt budget (x4 chars)."""
_MAX_SUMMARY_CHARS: Final = 16_000  # OpenClaw's MAX_COMPACTION_SUMMARY_CHARS, the cap for large windows

_MIN_PROMPT_CAP = 8000


DEFAULT_CONTEXT_WINDOW: Final = DEFAULT_CONTEXT_WINDOW_TOKENS
"""Context window assumed when the model's is unknown, in tokens (DESIGN D5)."""

_window = window_or_default


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


@attrs.frozen(kw_only=True)
class CompactionBudget:
    """
    The token budgets of one compaction, derived from the window (DESIGN D9).

    With the prompt budget ``P = window - effectiveReserve`` (the compaction threshold), a compaction
    leaves at most ``keep_recent_tokens + ceil(summary_max_chars / 4)`` = ``0.7 P`` in the context,
    so one that runs over the threshold always frees room. For windows of 200000 tokens and the
    defaults nothing changes (the shares exceed the configured values).

    Attributes:
        context_window: The window, in tokens.
        effective_reserve: :func:`effective_reserve_tokens`, in tokens.
        threshold: ``context_window - effective_reserve`` (``P``), in tokens.
        keep_recent_tokens: The keep budget in force: the requested one (configured, explicit, or
            pi's default 20000) lowered to ``floor(0.4 P)`` (at least 1); ``None`` for a strict
            checkpoint (nothing kept).
        requested_keep_recent_tokens: The keep budget before the clamp (``None``: strict checkpoint).
        summary_max_tokens: ``max_tokens`` of a history summary request: pi's
            ``floor(0.8 * reserveTokens)`` lowered to ``floor(0.25 P)`` (at least 1).
        turn_prefix_max_tokens: ``max_tokens`` of a turn-prefix request: pi's
            ``floor(0.5 * reserveTokens)`` lowered to ``floor(0.125 P)`` (at least 1).
        summary_max_chars: Largest summary written (body and suffix), in UTF-16 code units:
            OpenClaw's 16000 lowered to ``4 * floor(0.3 P)`` (at least 400).
        clamped: Names of the settings lowered by D9 (``"keep_recent_tokens"``, ``"reserve_tokens"``
            for the summary ``max_tokens``); empty when none was.
    """

    context_window: int
    effective_reserve: int
    threshold: int
    keep_recent_tokens: int | None
    requested_keep_recent_tokens: int | None
    summary_max_tokens: int
    turn_prefix_max_tokens: int
    summary_max_chars: int
    clamped: tuple[str, ...] = ()


_warned: set[tuple[str, int, int, int]] = set()
_warned_lock = threading.Lock()


def _warn_once(name: str, configured: int, effective: int, window: int, *, level: int) -> None:
    """
    Log a D9 clamp once per setting, value, window and level: a configured value's WARNING is kept
    apart from a default's DEBUG record of the same number (``keepRecentTokens`` 20000 is both).
    """
    key = (name, configured, window, level)
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    _log.log(
        level,
        "compaction %s %d does not fit a %d-token window: using %d (D9)",
        name,
        configured,
        window,
        effective,
        extra={"setting": name, "configured": configured, "effective": effective, "context_window": window},
    )


def compaction_budget(
    settings: CompactionSettings,
    *,
    context_window: int | None,
    keep_recent_tokens: int | None,
    max_output_tokens: int | None = None,
    warn: bool = True,
    keep_configured: bool = True,
) -> CompactionBudget:
    """
    Derive the keep budget and the summary sizes from the window (DESIGN D9, a deviation).

    pi and OpenClaw 2026.7.35 size the kept tail (``keepRecentTokens``, default 20000) and the summary
    request (``0.8 * reserveTokens`` = 13107) without looking at the window: in a 16000-token window
    the tail alone is over the threshold, every compaction has nothing to summarise, and the session
    ends in ``ContextOverflowError`` (issue #11). Here, with ``P = window - effectiveReserve``: keep
    at most ``floor(0.4 P)``, ask for at most ``floor(0.25 P)`` output tokens per history summary
    (``floor(0.125 P)`` per turn prefix) and write at most ``4 * floor(0.3 P)`` chars (OpenClaw's
    16000 at most). The reserve itself keeps OpenClaw's caps (:func:`effective_reserve_tokens`).
    A configured value that is lowered is logged once per value and window (WARNING, logger
    ``sessionkeeper.compaction``, ``extra`` with ``setting``/``configured``/``effective``); a lowered
    default (``keepRecentTokens`` 20000, ``reserveTokens`` 16384 not configured) is logged at DEBUG,
    once on its own: a DEBUG record of a default never stands in for the WARNING of the same value
    configured.

    Args:
        settings: The compaction settings.
        context_window: The model's window in tokens (``None``/0: 200000, DESIGN D5).
        keep_recent_tokens: The keep budget asked for (see ``Compactor.keep_budget``); ``None`` is a
            strict checkpoint and stays one.
        max_output_tokens: See :func:`effective_reserve_tokens`.
        warn: Log clamped values (once each); ``False`` for previews.
        keep_configured: Whether ``keep_recent_tokens`` was configured or passed (WARNING when it is
            lowered) rather than pi's default (DEBUG).

    Returns:
        The :class:`CompactionBudget`.
    """
    window = _window(context_window)
    reserve = effective_reserve_tokens(settings, context_window=window, max_output_tokens=max_output_tokens)
    prompt = max(1, window - reserve)
    clamped: list[str] = []
    keep = keep_recent_tokens
    if keep is not None:
        keep_cap = max(1, math.floor(prompt * KEEP_RECENT_SHARE))
        if keep > keep_cap:
            keep = keep_cap
            clamped.append("keep_recent_tokens")
            if warn:
                level = logging.WARNING if keep_configured else logging.DEBUG
                _warn_once("keep_recent_tokens", keep_recent_tokens or 0, keep, window, level=level)
    summary_cap = max(1, math.floor(prompt * SUMMARY_TOKENS_SHARE))
    pi_summary = max(1, math.floor(0.8 * settings.reserve_tokens))
    summary_max = min(pi_summary, summary_cap)
    prefix_max = min(max(1, math.floor(0.5 * settings.reserve_tokens)), max(1, summary_cap // 2))
    if summary_max < pi_summary:
        clamped.append("reserve_tokens")
        if warn:
            level = logging.WARNING if settings.reserve_tokens != DEFAULT_RESERVE_TOKENS else logging.DEBUG
            _warn_once(
                "summary max_tokens (0.8 x reserveTokens)", pi_summary, summary_max, window, level=level
            )
    chars = min(_MAX_SUMMARY_CHARS, max(400, 4 * math.floor(prompt * SUMMARY_CHARS_SHARE)))
    return CompactionBudget(
        context_window=window,
        effective_reserve=reserve,
        threshold=window - reserve,
        keep_recent_tokens=keep,
        requested_keep_recent_tokens=keep_recent_tokens,
        summary_max_tokens=summary_max,
        turn_prefix_max_tokens=prefix_max,
        summary_max_chars=chars,
        clamped=tuple(clamped),
    )
