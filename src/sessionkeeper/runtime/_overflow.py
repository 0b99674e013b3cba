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
from typing import Any, Final, Literal, Self

import attrs

from sessionkeeper._config import Config, setting, structure_settings
from sessionkeeper.exceptions import ConfigError, ContextOverflowError
from sessionkeeper.transcript import AssistantMessage


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
# Exclusions (D5): rate limits, TPM, billing, reasoning-required, "context window too small" (OpenClaw) and
# pi's non-overflow patterns. A message that matches one of these is never an overflow, whatever else it says.
# --------------------------------------------------------------------------------------------------------
_EXCLUSIONS: Final[tuple[re.Pattern[str], ...]] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        # TPM / per-period token budgets (OpenClaw hasRateLimitTpmHint; OpenAI says "tokens per min")
        r"\btpm\b",
        r"tokens per (?:min|minute|hour|day)\b",
        r"requests? per (?:second|minute|hour|day)\b",
        # rate limits (OpenClaw isRateLimitErrorMessage; pi NON_OVERFLOW_PATTERNS)
        r"rate[_ -]?limit",
        r"too many (?:concurrent )?requests",
        # a 429 status (not the number 429 inside a token count such as "429 tokens > 200 maximum")
        r"[\"']?(?:status|code|error)[\"']?\s*[:=]?\s*429\b|\bhttp(?:/[\d.]+)?\s*429\b|^\W*429\b",
        r"throttl",
        r"model_cooldown",
        r"exceeded your current quota",
        r"quota (?:exceeded|limit)",
        r"insufficient[_ ]quota",
        r"resource[_ ]exhausted|resource has been exhausted",
        r"usage limit",
        r"please wait|wait before (?:trying|retrying)|try again later|retry after",
        r"^\s*(?:throttling error|service unavailable):",
        "请求过于频繁|调用频率|频率限制|配额不足|配额已用尽|额度不足|额度已用尽",
        # billing (OpenClaw isBillingErrorMessage)
        r"[\"']?(?:status|code)[\"']?\s*[:=]\s*402\b|\bhttp\s*402\b|^\s*402\b",
        r"payment required",
        r"insufficient (?:credits?|balance|funds)",
        r"credit balance",
        r"plans & billing",
        r"requires? more credits|used all available credits",
        r"spend(?:ing)? limit",
        "余额不足|欠费",
        # reasoning-required and the context-window guard's own refusal (OpenClaw)
        r"reasoning is (?:mandatory|required)|requires reasoning|reasoning.*cannot be disabled",
        r"context window.*(?:too small|minimum is)",
    )
)

# --------------------------------------------------------------------------------------------------------
# Positives: OpenClaw's isContextOverflowError (+ provider fallbacks) and pi's OVERFLOW_PATTERNS, including
# the few that only OpenClaw's bundled fork of pi's list (@openclaw/ai, used by its harness) knows: LiteLLM's
# "maximum context length of N tokens", Together's "input (N tokens) is longer than", DS4's "configured
# context size". tests/data/oracle/overflow.json pins the union against the three classifiers.
# --------------------------------------------------------------------------------------------------------
_SUBSTRINGS: Final = (
    # OpenClaw §5.7
    "request_too_large",
    "request exceeds the maximum size",
    "context length exceeded",
    "maximum context length",
    "prompt is too long",
    "prompt too long",
    "exceeds model context window",
    "model token limit",
    "context overflow:",
    "exceed context limit",
    "exceeds the model's maximum context",
    "context_window_exceeded",
    "上下文过长",
    "上下文超出",
    "上下文长度超",
    "超出最大上下文",
    "请压缩上下文",
)
_ALL_OF: Final[tuple[tuple[tuple[str, ...], ...], ...]] = (
    # OpenClaw §5.7 conjunctions: every group must be present, through any one of its phrases
    (("invalid_argument",), ("maximum number of tokens",)),
    (("input exceeds",), ("maximum number of tokens",)),
    (("context window", "context length"), ("ran out of room", "ran out of space")),
    (("request size exceeds",), ("context window", "context length")),
    (("max_tokens",), ("exceed",), ("context",)),
    (("input length",), ("exceed",), ("context",)),
    (("413",), ("too large",)),
)
_PATTERNS: Final[tuple[re.Pattern[str], ...]] = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        # OpenClaw provider fallbacks (provider-error-patterns)
        r"\binput token count exceeds the maximum number of input tokens\b",
        r"\binput is too long for this model\b",
        r"\binput exceeds the maximum number of tokens\b",
        r"\bollama error:\s*context length exceeded\b",
        r"\btotal tokens?.*exceeds? (?:the )?(?:model(?:'s)? )?(?:max|maximum|limit)",
        r"\b(?:request|prompt) \(\d[\d,]*\s*tokens?\) exceeds (?:the )?available context size\b",
        r"\binput (?:is )?too long for (?:the )?model\b",
        r"prompt has [\d,]+ tokens?, but the configured context size is [\d,]+ tokens?",
        # pi §15.2
        r"input is too long for requested model",
        r"exceeds the context window",
        r"exceeds (?:the )?(?:model'?s )?maximum context length of [\d,]+ tokens?",
        r"input token count.*exceeds the maximum",
        r"maximum prompt length is \d+",
        r"reduce the length of the messages",
        r"maximum context length is \d+ tokens",
        r"input \(\d+ tokens\) is longer than the model'?s context length \(\d+ tokens\)",
        r"exceeds the limit of \d+",
        r"exceeds the available context size",
        r"greater than the context length",
        r"context window exceeds limit",
        r"exceeded model token limit",
        r"too large for model with \d+ maximum context length",
        r"model_context_window_exceeded",
        r"prompt too long; exceeded (?:max )?context length",
        r"context[_ ]length[_ ]exceeded",
        r"too many tokens",
        r"token limit exceeded",
        r"^4(?:00|13)\s*(?:status code)?\s*\(no body\)",
    )
)


def _excluded(text: str) -> bool:
    return any(p.search(text) for p in _EXCLUSIONS)


def _positive(text: str) -> bool:
    lower = text.lower()
    if any(s in lower for s in _SUBSTRINGS):
        return True
    if any(all(any(alt in lower for alt in group) for group in groups) for groups in _ALL_OF):
        return True
    return any(p.search(text) for p in _PATTERNS)


def is_context_overflow_text(text: str | None) -> bool:
    """
    Whether one provider error text says the request did not fit the model's context window.

    The text is an overflow when it matches OpenClaw's list (§5.7) or pi's patterns (§15.2) and none of the
    exclusions (D5): rate limits (``rate limit``, ``429``, ``too many requests``, throttling, quotas, "please
    wait", "try again later"), TPM and other per-period token budgets, billing (402, credits, payment),
    reasoning-required errors and the "context window too small" guard. Matching is case-insensitive.

    Returns:
        ``False`` for ``None`` or an empty string.
    """
    if not text:
        return False
    return not _excluded(text) and _positive(text)


# --------------------------------------------------------------------------------------------------------
# Error objects: which texts to look at
# --------------------------------------------------------------------------------------------------------
_DETAIL_KEYS: Final = (
    "message",
    "errorMessage",
    "error_message",
    "param",
    "code",
    "type",
    "error",
    "detail",
    "body",
)
_MAX_TEXTS: Final = 24
_MAX_TEXT_CHARS: Final = 4000


def _texts_from(value: object, out: list[str], seen: set[int], depth: int = 0) -> None:
    if len(out) >= _MAX_TEXTS or value is None or depth > 6:
        return
    if isinstance(value, str):
        text = value.strip()
        if text and text not in out:
            out.append(text[:_MAX_TEXT_CHARS])
        return
    if isinstance(value, bool | int | float):
        return
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, Mapping):
        for key in _DETAIL_KEYS:
            if key in value:
                _texts_from(value[key], out, seen, depth + 1)
        return
    if isinstance(value, BaseException):
        _texts_from(str(value), out, seen, depth + 1)
        for attr in ("message", "body", "code", "type", "detail"):
            _texts_from(getattr(value, attr, None), out, seen, depth + 1)
        response = getattr(value, "response", None)
        response_text = getattr(response, "text", None)
        if isinstance(response_text, str):
            _texts_from(response_text, out, seen, depth + 1)
        status = _status_of(value)
        if status in (400, 413) and not str(value).strip() and not getattr(value, "body", None):
            out.append(f"{status} status code (no body)")  # pi §15.2 (Cerebras): a bare 400/413
        _texts_from(value.__cause__ or value.__context__, out, seen, depth + 1)


def _status_of(error: BaseException) -> int | None:
    for attr in ("status_code", "status"):
        value = getattr(error, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    response = getattr(error, "response", None)
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _candidate_texts(error_or_message: object) -> list[str]:
    out: list[str] = []
    if isinstance(error_or_message, AssistantMessage):
        if isinstance(error_or_message.error_message, str):
            _texts_from(error_or_message.error_message, out, set())
        return out
    _texts_from(error_or_message, out, set())
    return out


def _usage_input(message: AssistantMessage | Mapping[str, Any]) -> tuple[int, int] | None:
    """``(input + cacheRead, output)`` of an assistant message's usage (pi §15.2)."""
    if isinstance(message, AssistantMessage):
        usage = message.usage
        return usage.input + usage.cache_read, usage.output
    raw_usage = message.get("usage")
    if not isinstance(raw_usage, Mapping):
        return None
    nums = [raw_usage.get(k, 0) for k in ("input", "cacheRead", "output")]
    if not all(isinstance(n, int | float) and not isinstance(n, bool) for n in nums):
        return None
    return int(nums[0]) + int(nums[1]), int(nums[2])


def _stop_reason(message: AssistantMessage | Mapping[str, Any]) -> object:
    return message.stop_reason if isinstance(message, AssistantMessage) else message.get("stopReason")


def _is_assistant_mapping(value: object) -> bool:
    return isinstance(value, Mapping) and value.get("role") == "assistant"


def is_context_overflow(error_or_message: object, /, *, context_window: int | None = None) -> bool:
    """
    Whether a model failure (or a reply) means the context did not fit the model's window.

    Accepted shapes:

    - a ``str`` (a provider's error text);
    - an exception: its ``str()``, its ``message`` / ``body`` / ``code`` / ``type`` / ``detail`` attributes
      (nested JSON bodies such as ``{"error": {"type": "request_too_large", ...}}`` are searched), an
      ``httpx``-style ``response.text``, and its ``__cause__`` / ``__context__`` chain; a bare HTTP 400/413
      with no body counts as pi's Cerebras ``"413 status code (no body)"``;
    - a mapping (a decoded error body, or an assistant message as JSON with ``role: "assistant"``);
    - an :class:`~sessionkeeper.transcript.AssistantMessage` (pi §15.2): ``stopReason == "error"`` with an
      overflow ``errorMessage``; and, when ``context_window`` is given, the *silent overflow*
      (``stopReason == "stop"`` and ``usage.input + usage.cacheRead > context_window``) and the
      *length-stop overflow* (``stopReason == "length"``, ``usage.output == 0`` and
      ``input + cacheRead >= 0.99 * context_window``).

    Text rules are those of :func:`is_context_overflow_text` (D5). Any exclusion found in *any* of the
    texts of one error (e.g. a ``429`` status line around an otherwise matching body) makes it a non-overflow.

    Args:
        error_or_message: What the model call produced.
        context_window: The model's context window in tokens, for the usage-based checks; ``None`` skips them.

    Returns:
        ``True`` when compact-and-retry is the right recovery.
    """
    if error_or_message is None:
        return False
    message: AssistantMessage | Mapping[str, Any] | None = None
    if isinstance(error_or_message, AssistantMessage) or _is_assistant_mapping(error_or_message):
        message = error_or_message  # type: ignore[assignment]
    texts: list[str]
    if message is not None and not isinstance(message, AssistantMessage):
        raw = message.get("errorMessage")
        texts = [raw] if isinstance(raw, str) and raw.strip() else []
    else:
        texts = _candidate_texts(error_or_message)
    errored = message is None or _stop_reason(message) == "error"
    if errored and texts and not any(_excluded(t) for t in texts) and any(_positive(t) for t in texts):
        return True
    if message is not None and context_window:
        usage = _usage_input(message)
        if usage is not None:
            prompt_tokens, output = usage
            stop = _stop_reason(message)
            if stop == "stop" and prompt_tokens > context_window:
                return True
            if stop == "length" and output == 0 and prompt_tokens >= 0.99 * context_window:
                return True
    return False


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
