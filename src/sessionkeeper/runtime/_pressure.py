"""
The conservative prompt estimate of the pre-prompt and mid-turn prechecks (OpenClaw spec §5.3).

OpenClaw's ``estimateLlmBoundaryTokenPressure``: every message costs 12 tokens plus its content, each
content block 6 more; text is chars/4 with CJK and other non-Latin characters weighted as 4 chars; JSON
(tool-call arguments, unknown blocks) is chars/3; tool-result text is ``max(len/2, cjkAware/4)``; an image
is 2000 tokens; the system prompt and the new prompt are added (12 + chars/4 each), and the total is
multiplied by 1.2. It deliberately over-estimates, so a prompt it accepts fits.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from sessionkeeper.records import js_json_stringify
from sessionkeeper.transcript import (
    BRANCH_SUMMARY_PREFIX,
    BRANCH_SUMMARY_SUFFIX,
    COMPACTION_SUMMARY_PREFIX,
    COMPACTION_SUMMARY_SUFFIX,
    AgentMessage,
    bash_execution_to_text,
    message_to_builtins,
    utf16_len,
)


__all__ = ("estimate_prompt_pressure",)

_CHARS_PER_TOKEN: Final = 4
_TOOL_RESULT_CHARS_PER_TOKEN: Final = 2
_JSON_CHARS_PER_TOKEN: Final = 3
_MESSAGE_OVERHEAD: Final = 12
_BLOCK_OVERHEAD: Final = 6
_IMAGE_TOKENS: Final = 2000
_SAFETY_MARGIN: Final = 1.2
_NON_LATIN = re.compile(
    "[\u2e80-\u9fff\ua000-\ua4ff\uac00-\ud7af\uf900-\ufaff\uff01-\uff60\uffe0-\uffe6\U00020000-\U0002fa1f]"
)
_CJK_EXT_B_START: Final = 0x20000


def _weighted_chars(text: str) -> int:
    """OpenClaw's ``estimateStringChars``: UTF-16 length, each non-Latin character counted as 4."""
    if not text:
        return 0
    if text.isascii() or _NON_LATIN.search(text) is None:
        return utf16_len(text)
    non_latin = _NON_LATIN.findall(text)
    # JS counts CJK Extension B+ characters as one code point here (its surrogate pair is collapsed)
    astral_cjk = sum(1 for ch in non_latin if ord(ch) >= _CJK_EXT_B_START)
    return utf16_len(text) - astral_cjk + len(non_latin) * 3


def _text_tokens(text: str, chars_per_token: int = _CHARS_PER_TOKEN) -> int:
    return math.ceil(_weighted_chars(text) / chars_per_token)


def _json_tokens(value: Any, chars_per_token: int = _JSON_CHARS_PER_TOKEN) -> int:
    return math.ceil(_weighted_chars(js_json_stringify(value)) / chars_per_token)


def _identifier_tokens(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, bool):
        return _text_tokens("true" if value else "false", _JSON_CHARS_PER_TOKEN)
    if isinstance(value, str | int | float):
        return _text_tokens(
            value if isinstance(value, str) else js_json_stringify(value), _JSON_CHARS_PER_TOKEN
        )
    return _json_tokens(value)


def _block_tokens_by(block: Any, text_tokens: Callable[[str], int], json_tokens: Callable[[Any], int]) -> int:
    """One content block's tokens: its text by ``text_tokens``, anything else by ``json_tokens``."""
    if isinstance(block, str):
        return text_tokens(block)
    if not isinstance(block, Mapping):
        return json_tokens(block)
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return _BLOCK_OVERHEAD + text_tokens(block["text"])
    if kind == "thinking" and isinstance(block.get("thinking"), str):
        return _BLOCK_OVERHEAD + text_tokens(block["thinking"])
    if kind == "image":
        return _IMAGE_TOKENS
    return _BLOCK_OVERHEAD + json_tokens(block)


def _content_json_tokens(value: Any) -> int:
    return _json_tokens(value, _CHARS_PER_TOKEN)


def _block_tokens(block: Any) -> int:
    return _block_tokens_by(block, _text_tokens, _content_json_tokens)


def _content_tokens(content: Any) -> int:
    if isinstance(content, str):
        return _text_tokens(content)
    if isinstance(content, list):
        return sum(_block_tokens(b) for b in content)
    if content is not None:
        return _content_json_tokens(content)
    return 0


def _tool_text_tokens(text: str) -> int:
    return max(math.ceil(utf16_len(text) / _TOOL_RESULT_CHARS_PER_TOKEN), _text_tokens(text))


def _tool_json_tokens(value: Any) -> int:
    return _tool_text_tokens(js_json_stringify(value))


def _tool_block_tokens(block: Any) -> int:
    return _block_tokens_by(block, _tool_text_tokens, _tool_json_tokens)


def _tool_call_tokens(block: Mapping[str, Any]) -> int:
    args = block.get("arguments", block.get("input", block.get("args")))
    return (
        _BLOCK_OVERHEAD + _identifier_tokens(block.get("name")) + _json_tokens({} if args is None else args)
    )


def _message_tokens(raw: Mapping[str, Any]) -> int:
    role = raw.get("role")
    tokens = _MESSAGE_OVERHEAD
    if role in ("toolResult", "tool") or raw.get("type") == "toolResult":
        content = raw.get("content")
        if isinstance(content, str):
            tokens += _tool_text_tokens(content)
        elif isinstance(content, list):
            tokens += sum(_tool_block_tokens(b) for b in content)
        elif content is not None:
            tokens += _tool_json_tokens(content)
        return tokens + _identifier_tokens(raw.get("toolName", raw.get("tool_name")))
    if role == "bashExecution":
        if raw.get("excludeFromContext") is True:
            return 0
        text = bash_execution_to_text(
            command=str(raw.get("command", "")),
            output=str(raw.get("output", "")),
            exit_code=raw.get("exitCode"),
            cancelled=bool(raw.get("cancelled")),
            truncated=bool(raw.get("truncated")),
            full_output_path=raw.get("fullOutputPath"),
        )
        return tokens + _text_tokens(text)
    if role in ("branchSummary", "compactionSummary"):
        summary = raw.get("summary")
        text = summary if isinstance(summary, str) else ""
        if role == "branchSummary":
            return tokens + _text_tokens(BRANCH_SUMMARY_PREFIX + text + BRANCH_SUMMARY_SUFFIX)
        return tokens + _text_tokens(COMPACTION_SUMMARY_PREFIX + text + COMPACTION_SUMMARY_SUFFIX)
    if role == "assistant":
        content = raw.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, Mapping) and block.get("type") in ("toolCall", "tool_use"):
                    tokens += _tool_call_tokens(block)
                else:
                    tokens += _block_tokens(block)
        else:
            tokens += _content_tokens(content)
        return tokens
    return tokens + _content_tokens(raw.get("content"))


def estimate_prompt_pressure(
    messages: Sequence[AgentMessage | Mapping[str, Any]],
    /,
    *,
    system_prompt: str | None = None,
    prompt: str = "",
) -> int:
    """
    OpenClaw's conservative estimate of a prompt at the model boundary, in tokens (spec §5.3).

    Feed the result to :func:`~sessionkeeper.runtime.plan_prompt_budget` (pre-prompt) or
    :func:`~sessionkeeper.runtime.mid_turn_precheck` (after a tool result).

    Args:
        messages: The context messages (typed records or their camelCase JSON objects).
        system_prompt: The system prompt, if any (counted when not blank).
        prompt: The new prompt text (empty for a mid-turn check).

    Returns:
        ``ceil((history + system + prompt) * 1.2)``, where ``system = 12 + chars/4`` (0 when blank) and
        ``prompt = 12 + chars/4``.
    """
    history = 0
    for message in messages:
        raw = message if isinstance(message, Mapping) else message_to_builtins(message)
        history += _message_tokens(raw) if isinstance(raw, Mapping) else _MESSAGE_OVERHEAD
    system = _MESSAGE_OVERHEAD + _text_tokens(system_prompt) if system_prompt and system_prompt.strip() else 0
    new_prompt = _MESSAGE_OVERHEAD + _text_tokens(prompt)
    return max(0, math.ceil((history + system + new_prompt) * _SAFETY_MARGIN))
