"""
The character estimate context pruning uses (OpenClaw spec §7 "Char estimate").

OpenClaw's pruner measures the context in *weighted characters* and compares the total with
``context window tokens x 4``. Text counts its UTF-16 length, except that CJK ideographs, kana,
Hangul, Yi and fullwidth forms count 4 each; an image counts 8000 whatever its size; assistant
thinking text and signatures count; a tool call counts the length of its arguments as JavaScript's
``JSON.stringify`` writes them (``1.0`` as ``1``, ``1e21`` as ``1e+21``); any role
other than ``user``, ``assistant`` and ``toolResult`` counts 256.

Everything here is measured in UTF-16 code units, like JavaScript's ``String.length``, so the numbers
equal OpenClaw's own on the same input (checked against ``tools/openclaw-oracle/prune.mjs``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import attrs
import msgspec

from sessionkeeper._tokens import EstimateTokenCounter, TokenCounter, token_memo
from sessionkeeper.records import (
    AgentMessage,
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
    js_number_to_string,
    utf16_len,
)


__all__ = (
    "IMAGE_CHAR_ESTIMATE",
    "OTHER_ROLE_CHAR_ESTIMATE",
    "CharWeigher",
    "char_weigher",
    "estimate_context_chars",
    "estimate_message_chars",
    "estimate_string_chars",
)

IMAGE_CHAR_ESTIMATE: Final = 8000
"""Weighted chars one image block counts for, whatever its size (OpenClaw ``IMAGE_CHAR_ESTIMATE``)."""

OTHER_ROLE_CHAR_ESTIMATE: Final = 256
"""Weighted chars of a message whose role is not user, assistant or toolResult."""

_MALFORMED_ARGS_CHARS: Final = 128

# OpenClaw's NON_LATIN_RE: CJK radicals..ideographs (incl. kana), Yi, Hangul syllables, CJK
# compatibility ideographs, fullwidth forms, and CJK Extension B+ (astral).
_NON_LATIN = re.compile(
    "[\u2e80-\u9fff\ua000-\ua4ff\uac00-\ud7af\uf900-\ufaff\uff01-\uff60\uffe0-\uffe6\U00020000-\U0002fa1f]"
)
# OpenClaw's CJK_SURROGATE_HIGH_RE counts pairs whose high surrogate is D840-D87E, i.e. the code
# points U+20000-U+2FBFF (a slightly wider range than the ideograph class above: reproduced as is).
_CJK_ASTRAL = re.compile("[\U00020000-\U0002fbff]")


def estimate_string_chars(text: str) -> int:
    """
    Return OpenClaw's CJK-weighted length of ``text`` (``estimateStringChars``, spec §7).

    UTF-16 length, plus 3 for every CJK/kana/Hangul/Yi/fullwidth character (so each counts 4); a
    CJK Extension B+ character counts 4, not 5. Pure ASCII text returns ``len(text)``.
    """
    if not text:
        return 0
    if text.isascii():
        return len(text)
    non_latin = len(_NON_LATIN.findall(text))
    length = utf16_len(text)
    if non_latin == 0:
        return length
    return length - len(_CJK_ASTRAL.findall(text)) + non_latin * 3


_JS_SAFE_INT: Final = 2**53


def _number_len_delta(value: Any) -> int:
    """JS-minus-msgspec length of the numbers in ``value`` (floats, and ints JS reads as doubles)."""
    delta = 0
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            continue
        if kind is dict:
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        elif kind is float:
            delta += len(js_number_to_string(item)) - len(msgspec.json.encode(item))
        elif kind is int and not -_JS_SAFE_INT < item < _JS_SAFE_INT:
            delta += len(js_number_to_string(float(item))) - len(str(item))
    return delta


def _args_json_len(arguments: Any) -> int:
    """``JSON.stringify(arguments ?? {}).length`` as OpenClaw counts a tool call (UTF-16 units)."""
    try:
        encoded = msgspec.json.encode(arguments if arguments is not None else {})
    except (TypeError, ValueError, OverflowError):
        return _MALFORMED_ARGS_CHARS
    length = len(encoded) if encoded.isascii() else utf16_len(encoded.decode("utf-8"))
    # msgspec writes 1.0 and 1e21 where JavaScript writes 1 and 1e+21: count JavaScript's numbers
    return length + _number_len_delta(arguments)


def _malformed_text_len(block: dict[str, Any]) -> int:
    try:
        return estimate_string_chars(msgspec.json.encode(block).decode("utf-8"))
    except (TypeError, ValueError, OverflowError):
        return estimate_string_chars("[malformed text block]")


def _raw_text_and_images(content: Iterable[Any]) -> int:
    chars = 0
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            chars += estimate_string_chars(text) if isinstance(text, str) else _malformed_text_len(block)
        elif kind == "image":
            chars += IMAGE_CHAR_ESTIMATE
    return chars


def _raw_assistant(content: Iterable[Any]) -> int:
    chars = 0
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        text = block.get("text")
        if kind == "text" and isinstance(text, str):
            chars += estimate_string_chars(text)
        if kind in ("thinking", "redacted_thinking"):
            for key in ("thinking", "thinkingSignature"):
                value = block.get(key)
                if isinstance(value, str):
                    chars += estimate_string_chars(value)
            data = block.get("data")
            if kind == "redacted_thinking" and isinstance(data, str):
                chars += estimate_string_chars(data)
        if kind == "toolCall":
            chars += _args_json_len(block.get("arguments"))
    return chars


def _estimate_raw(raw: dict[str, Any]) -> int:
    role = raw.get("role")
    content = raw.get("content")
    if role == "user":
        if isinstance(content, str):
            return estimate_string_chars(content)
        return _raw_text_and_images(content) if isinstance(content, list) else 0
    if role == "assistant":
        return _raw_assistant(content) if isinstance(content, list) else 0
    if role == "toolResult":
        return _raw_text_and_images(content) if isinstance(content, list) else 0
    return OTHER_ROLE_CHAR_ESTIMATE


def _text_and_images(content: Sequence[TextContent | ImageContent]) -> int:
    chars = 0
    for block in content:
        if isinstance(block, TextContent):
            chars += estimate_string_chars(block.text)
        else:
            chars += IMAGE_CHAR_ESTIMATE
    return chars


def estimate_message_chars(message: AgentMessage) -> int:
    """
    Return the weighted char estimate of one message (OpenClaw ``estimateMessageChars``, spec §7).

    * ``user``: its text (string or text blocks) plus 8000 per image;
    * ``assistant``: text blocks, thinking text and signatures, and the JSON length of every tool
      call's arguments;
    * ``toolResult``: text blocks plus 8000 per image;
    * any other role (bash execution, custom, summaries, unknown): 256.

    An :class:`UnknownMessage` is measured from its raw JSON by the same rules (a text block whose
    ``text`` is not a string counts the length of its JSON, as OpenClaw does).
    """
    if isinstance(message, ToolResultMessage):
        return _text_and_images(message.content)
    if isinstance(message, AssistantMessage):
        chars = 0
        for block in message.content:
            if isinstance(block, TextContent):
                chars += estimate_string_chars(block.text)
            elif isinstance(block, ThinkingContent):
                chars += estimate_string_chars(block.thinking)
                if isinstance(block.thinking_signature, str):
                    chars += estimate_string_chars(block.thinking_signature)
            else:
                chars += _args_json_len(block.arguments)
        return chars
    if isinstance(message, UserMessage):
        if isinstance(message.content, str):
            return estimate_string_chars(message.content)
        return _text_and_images(message.content)
    if isinstance(message, UnknownMessage):
        return _estimate_raw(message.raw)
    return OTHER_ROLE_CHAR_ESTIMATE


def estimate_context_chars(messages: Iterable[AgentMessage]) -> int:
    """Return the sum of :func:`estimate_message_chars` over ``messages``."""
    return sum(estimate_message_chars(message) for message in messages)


@attrs.frozen
class CharWeigher:
    """
    How pruning weighs a context, in weighted chars (compared with ``window tokens x 4``).

    Attributes:
        message: Weighted chars of one message.
        text: Weighted chars of a text (the hard-clear placeholder).
    """

    message: Callable[[AgentMessage], int]
    text: Callable[[str], int]

    def context(self, messages: Iterable[AgentMessage]) -> int:
        """The sum of :attr:`message` over ``messages``."""
        weigh = self.message
        return sum(weigh(message) for message in messages)


_OPENCLAW_WEIGHER = CharWeigher(estimate_message_chars, estimate_string_chars)


def char_weigher(token_counter: TokenCounter | None) -> CharWeigher:
    """
    The weigher of ``token_counter``.

    ``None`` or an :class:`~sessionkeeper.EstimateTokenCounter` (the default): OpenClaw's char
    estimate (:func:`estimate_message_chars`, spec §7), so every number equals OpenClaw's. Any other
    counter: 4 x its tokens (char-equivalents, so the pruning ratios are ``tokens / window``), messages
    counted through its memo (:func:`~sessionkeeper._tokens.token_memo`).
    """
    if token_counter is None or type(token_counter) is EstimateTokenCounter:
        return _OPENCLAW_WEIGHER
    memo = token_memo(token_counter)
    return CharWeigher(
        lambda message: 4 * memo.count_message(message), lambda text: 4 * memo.count_text(text)
    )
