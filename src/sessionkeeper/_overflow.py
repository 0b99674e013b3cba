"""
Context-overflow detection for every model call the library makes (OpenClaw spec §5.7
``isContextOverflowError``, pi-format spec §15.2 ``isContextOverflow``, DESIGN D5).

Pure: strings, error objects and message records in, booleans out. It sits below the layers that call
a model (the compaction summariser, DESIGN D10, and the runtime's overflow recovery), which both import
it; :mod:`sessionkeeper.runtime` re-exports :func:`is_context_overflow` and
:func:`is_context_overflow_text`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from sessionkeeper.records import AssistantMessage


__all__ = ("is_context_overflow", "is_context_overflow_text")

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
