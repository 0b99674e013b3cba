"""
Context-overflow detection, the observed token count, the synthetic count and the recovery plan.

Rules: OpenClaw spec §5.7 (``isContextOverflowError``, observed-count regexes, synthetic count, the overflow
loop), pi-format spec §15.2 (``isContextOverflow``: error patterns, silent overflow, length-stop overflow, one
compact-and-retry per turn), DESIGN decision D5 (OpenClaw's list plus pi's patterns, minus OpenClaw's
exclusions: rate limits, TPM, billing; at most 3 overflow compactions per run, configurable), field reports
B09 and B11.

Everything here is pure: strings, error objects and message records in, immutable decisions out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, Literal, Self

import attrs

from sessionkeeper._config import Config, setting, structure_settings
from sessionkeeper._overflow import (
    _candidate_texts,
    _excluded,
    _is_assistant_mapping,
    is_context_overflow,
    is_context_overflow_text,
)
from sessionkeeper.exceptions import ConfigError, ContextOverflowError


__all__ = (
    "OVERFLOW_GIVE_UP_MESSAGE",
    "OverflowRecoveryDecision",
    "OverflowRecoverySettings",
    "OverflowRecoveryState",
    "SyntheticTokenCount",
    "is_context_overflow",
    "is_context_overflow_text",
    "parse_observed_token_count",
    "plan_overflow_recovery",
    "synthetic_token_count",
)

# --------------------------------------------------------------------------------------------------------
# Observed token count (§5.7), widened to the provider phrasings pi documents.
# --------------------------------------------------------------------------------------------------------
_N = r"(\d[\d,]*)"
_SUM_PATTERNS: Final[tuple[re.Pattern[str], ...]] = (
    # Anthropic: "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000"
    # OpenClaw's form: "input length and max_tokens exceed context limit (i.e 188240 + 21333 > 200000)"
    re.compile(
        r"input length(?:\s+and\s+`?max_tokens`?)?\s+exceeds?\s+context(?:\s+limit|\s+window)?\s*"
        rf"(?::|\(i\.?e\.?,?)\s*{_N}\s*\+\s*{_N}\s*>\s*[\d,]+",
        re.IGNORECASE,
    ),
)
_COUNT_PATTERNS: Final[tuple[re.Pattern[str], ...]] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        rf"prompt is too long:\s*{_N}\s+tokens\s*>\s*[\d,]+\s+maximum",  # Anthropic
        rf"prompt is too long:\s*{_N}\s*,\s*model maximum context length\s*:\s*[\d,]+",
        rf"requested\s+(?:about\s+)?{_N}\s+tokens",  # OpenAI, OpenRouter
        rf"token limit\s*:\s*[\d,]+\s*\(requested\s*:\s*{_N}\)",  # Kimi
        rf"resulted in\s+{_N}\s+tokens",  # OpenAI
        rf"input token count\s*\(?\s*{_N}\s*\)?\s*exceeds",  # Google
        rf"request contains\s+{_N}\s+tokens",  # xAI
        rf"input\s*\(\s*{_N}\s+tokens\s*\)\s*is longer than",  # Together
        rf"prompt token count of\s+{_N}\s+exceeds",  # GitHub Copilot
        rf"prompt contains\s+{_N}\s+tokens",  # Mistral
        rf"prompt has\s+{_N}\s+tokens?, but the configured context size",  # DS4
        # llama.cpp
        rf"(?:request|prompt)\s*\(\s*{_N}\s+tokens?\s*\)\s*exceeds (?:the )?available context size",
    )
)


def _to_int(raw: str) -> int | None:
    digits = raw.replace(",", "")
    return int(digits) if digits.isdigit() else None


def parse_observed_token_count(error_or_message: object, /) -> int | None:
    """
    The prompt size a provider reported in its overflow error, in tokens (OpenClaw §5.7; field report B09's
    ``parse_attempted_tokens``).

    Recognised: ``prompt is too long: N tokens > M maximum`` and ``prompt is too long: N, model maximum
    context length: M`` (Anthropic), ``requested [about] N tokens`` (OpenAI, OpenRouter), ``token limit: M
    (requested: N)`` (Kimi), ``resulted in N tokens``, ``input length and max_tokens exceed context limit``
    with ``(i.e N + K > M)`` or ``: N + K > M`` (the sum ``N + K``), and the counts named by the Google,
    xAI, Together, GitHub Copilot, Mistral, DS4 and llama.cpp messages pi lists. Thousands separators are
    accepted. A message that matches an exclusion (rate limit, TPM, billing) yields ``None``.

    Args:
        error_or_message: A string, exception, mapping or assistant message (as for
            :func:`is_context_overflow`).

    Returns:
        The positive token count, or ``None`` when no count is stated.
    """
    texts = _candidate_texts(error_or_message)
    if isinstance(error_or_message, Mapping) and _is_assistant_mapping(error_or_message):
        raw = error_or_message.get("errorMessage")
        texts = [raw] if isinstance(raw, str) else []
    if any(_excluded(t) for t in texts):
        return None
    for text in texts:
        for pattern in _SUM_PATTERNS:
            match = pattern.search(text)
            if match:
                left, right = _to_int(match.group(1)), _to_int(match.group(2))
                if left and right is not None:
                    return left + right
    for text in texts:
        for pattern in _COUNT_PATTERNS:
            match = pattern.search(text)
            if match:
                value = _to_int(match.group(1))
                if value:
                    return value
    return None


@attrs.frozen(kw_only=True)
class SyntheticTokenCount:
    """
    The context size handed to an overflow compaction as ``currentTokenCount`` (OpenClaw §5.7).

    Attributes:
        tokens: The count, in tokens; always at least ``context_window + 1``.
        source: ``"observed"`` (parsed from the provider error), ``"estimate"`` (the caller's preflight
            estimate) or ``"minimal"`` (``context_window + 1``, the minimal over-budget value).
    """

    tokens: int
    source: Literal["observed", "estimate", "minimal"]


def synthetic_token_count(
    *, context_window: int, observed: int | None = None, estimate: int | None = None
) -> SyntheticTokenCount:
    """
    ``observed ?? estimate ?? context_window + 1`` (OpenClaw §5.7).

    Refinement: the provider refused the request, so the true size is over the window; an observed or
    estimated value that is not (an under-estimate, or a count that is only the excess) is raised to
    ``context_window + 1`` while keeping its ``source``.

    Args:
        context_window: The model's context window, in tokens (> 0).
        observed: The count from :func:`parse_observed_token_count`, if any.
        estimate: The caller's own estimate of the prompt, in tokens, if any.

    Raises:
        ValueError: ``context_window`` is not positive.
    """
    if context_window <= 0:
        raise ValueError(f"context_window must be positive, got {context_window}")
    minimal = context_window + 1
    if observed is not None and observed > 0:
        return SyntheticTokenCount(tokens=max(observed, minimal), source="observed")
    if estimate is not None and estimate > 0:
        return SyntheticTokenCount(tokens=max(estimate, minimal), source="estimate")
    return SyntheticTokenCount(tokens=minimal, source="minimal")


# --------------------------------------------------------------------------------------------------------
# Recovery plan (attempt limits)
# --------------------------------------------------------------------------------------------------------
def _positive_int(value: object, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"expected a non-negative integer, got {value!r}", key=key)
    return value


def _ratio_open(value: object, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise ConfigError(f"expected a ratio in (0, 1], got {value!r}", key=key)
    return float(value)


@attrs.frozen(kw_only=True)
class OverflowRecoverySettings:
    """
    Attempt limits of overflow and timeout recovery (OpenClaw §5.7, D5).

    Read from ``agents.defaults.compaction.overflowRecovery`` (sessionkeeper's own keys; OpenClaw hard-codes
    these values).

    Attributes:
        max_compactions: Overflow compactions allowed per run (``maxCompactions``, default 3, OpenClaw).
        max_timeout_compactions: Timeout compactions allowed per run (``maxTimeoutCompactions``, default 2).
        timeout_usage_ratio: A timed-out call triggers a compaction only when its prompt used more than this
            share of the window (``timeoutUsageRatio``, default 0.65).
        max_ineffective_compactions: Consecutive automatic compactions that leave the context over its
            threshold before the runtime stops compacting for the turn (``maxIneffectiveCompactions``,
            default 1; field report B11).
    """

    max_compactions: int = setting(default=3, key="maxCompactions", parse=_positive_int)
    max_timeout_compactions: int = setting(default=2, key="maxTimeoutCompactions", parse=_positive_int)
    timeout_usage_ratio: float = setting(default=0.65, key="timeoutUsageRatio", parse=_ratio_open)
    max_ineffective_compactions: int = setting(
        default=1, key="maxIneffectiveCompactions", parse=_positive_int
    )

    @classmethod
    def from_config(cls, config: Config) -> Self:
        """
        Build from ``agents.defaults.compaction.overflowRecovery``.

        Raises:
            ConfigError: A value is invalid; the error names the dotted key.
        """
        prefix = "agents.defaults.compaction.overflowRecovery"
        return structure_settings(cls, config.section(prefix), prefix=prefix)


@attrs.frozen(kw_only=True)
class OverflowRecoveryState:
    """
    What happened so far in one run (one agent turn), for :func:`plan_overflow_recovery`.

    Immutable: each ``after_*`` method returns the next state.

    Attributes:
        compactions: Overflow compactions done in this run.
        compacted_since_reply: A compaction happened since the last successful model reply (or since the
            user message): a new overflow now means the compaction did not make room (pi §15.2, B09).
        truncation_tried: Oversized tool results were already truncated in this run.
        last_compaction_failed: The most recent overflow compaction failed (nothing was written).
    """

    compactions: int = 0
    compacted_since_reply: bool = False
    truncation_tried: bool = False
    last_compaction_failed: bool = False

    def after_compaction(self, *, succeeded: bool) -> OverflowRecoveryState:
        """The state after an overflow compaction (counted even when it failed)."""
        return attrs.evolve(
            self,
            compactions=self.compactions + 1,
            compacted_since_reply=self.compacted_since_reply or succeeded,
            last_compaction_failed=not succeeded,
        )

    def after_truncation(self) -> OverflowRecoveryState:
        """The state after oversized tool results were truncated."""
        return attrs.evolve(self, truncation_tried=True)

    def after_reply(self) -> OverflowRecoveryState:
        """The state after a successful model reply: a later overflow may compact again."""
        return attrs.evolve(self, compacted_since_reply=False, last_compaction_failed=False)


OVERFLOW_GIVE_UP_MESSAGE: Final = (
    "The conversation no longer fits in the model's context window, even after compaction. Start a fresh "
    "session (/new or /reset) or switch to a model with a larger context window."
)
"""User-facing text when overflow recovery is exhausted (OpenClaw §5.7 says the same; the session is kept)."""

OverflowAction = Literal["not_overflow", "compact", "truncate_tool_results", "give_up"]


@attrs.frozen(kw_only=True)
class OverflowRecoveryDecision:
    """
    What to do about one failed model call.

    Attributes:
        action: ``"not_overflow"`` (handle it as another error), ``"compact"`` (compact with ``token_count``,
            ``force=True``, target ``"budget"``, then retry), ``"truncate_tool_results"`` (truncate oversized
            tool results, then retry) or ``"give_up"`` (raise :meth:`error`; the session id is not rotated).
        reason: Why: ``"not_overflow"``, ``"overflow"``, ``"retry_overflowed"`` (the retry after a
            compaction overflowed again), ``"compaction_failed"``, ``"attempts_exhausted"``.
        token_count: The synthetic count for the compaction, or ``None``.
        attempt: The 1-based number of the compaction this decision starts (``0`` when none).
        observed_tokens: The count parsed from the provider error, if any.
    """

    action: OverflowAction
    reason: str
    token_count: SyntheticTokenCount | None = None
    attempt: int = 0
    observed_tokens: int | None = None

    def error(self, *, attempts: int) -> ContextOverflowError:
        """
        The error to raise for a ``"give_up"`` decision.

        Args:
            attempts: Overflow compactions tried in the run.
        """
        tokens = self.token_count.tokens if self.token_count else self.observed_tokens
        return ContextOverflowError(
            f"{OVERFLOW_GIVE_UP_MESSAGE} ({self.reason})", attempts=attempts, context_tokens=tokens
        )


def plan_overflow_recovery(
    error_or_message: object,
    /,
    *,
    state: OverflowRecoveryState,
    context_window: int,
    settings: OverflowRecoverySettings | None = None,
    estimate_tokens: int | None = None,
    has_reducible_tool_results: bool = False,
) -> OverflowRecoveryDecision:
    """
    Decide the recovery step after a failed model call (OpenClaw §5.7 overflow loop, pi §15.2, D5, B09).

    Order:

    1. Not an overflow (:func:`is_context_overflow`) → ``"not_overflow"``.
    2. A compaction already happened since the last successful reply and the retry overflowed again, or the
       last compaction failed: truncate oversized tool results once if there are any, else ``"give_up"``
       (B09: one compact + retry, then report; never loop).
    3. ``state.compactions >= settings.max_compactions`` (3 per run) → truncate once if possible, else
       ``"give_up"`` with ``"attempts_exhausted"``.
    4. Otherwise ``"compact"`` with :func:`synthetic_token_count` of the observed count, ``estimate_tokens``
       or ``context_window + 1``.

    Args:
        error_or_message: The failure (string, exception, mapping or assistant message).
        state: The run's recovery state.
        context_window: The model's context window, in tokens.
        settings: Attempt limits; defaults to :class:`OverflowRecoverySettings` ().
        estimate_tokens: The caller's estimate of the prompt that failed, in tokens, if known.
        has_reducible_tool_results: Whether oversized tool results could be truncated.

    Raises:
        ValueError: ``context_window`` is not positive.
    """
    limits = settings or OverflowRecoverySettings()
    if not is_context_overflow(error_or_message, context_window=context_window):
        return OverflowRecoveryDecision(action="not_overflow", reason="not_overflow")
    observed = parse_observed_token_count(error_or_message)
    count = synthetic_token_count(context_window=context_window, observed=observed, estimate=estimate_tokens)
    blocked: str | None = None
    if state.last_compaction_failed:
        blocked = "compaction_failed"
    elif state.compacted_since_reply:
        blocked = "retry_overflowed"
    elif state.compactions >= limits.max_compactions:
        blocked = "attempts_exhausted"
    if blocked is None:
        return OverflowRecoveryDecision(
            action="compact",
            reason="overflow",
            token_count=count,
            attempt=state.compactions + 1,
            observed_tokens=observed,
        )
    if has_reducible_tool_results and not state.truncation_tried:
        return OverflowRecoveryDecision(
            action="truncate_tool_results", reason=blocked, token_count=count, observed_tokens=observed
        )
    return OverflowRecoveryDecision(
        action="give_up", reason=blocked, token_count=count, observed_tokens=observed
    )
