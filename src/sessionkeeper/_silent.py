"""
Silent replies: the ``NO_REPLY`` token (OpenClaw spec §8; OpenClaw 2026.7.35 ``src/auto-reply/tokens.ts``).

A model answers ``NO_REPLY`` when it has nothing to say (memory flush turns, group chats, heartbeats);
such a reply must never reach the user, not even in pieces while it streams.

The classifiers below are ports of OpenClaw's helpers with JavaScript's regular-expression semantics
kept where they differ from Python's: ``\\s`` is JavaScript's whitespace set (which includes U+FEFF and
not U+001C-U+001F or U+0085), ``trim()`` strips that same set, ``$`` means end of input, ``\\b`` is
ASCII, the case-insensitive token match follows JavaScript's ``i`` flag (``/iu`` where OpenClaw uses it),
and ``\\p{P}`` is Unicode punctuation. A committed fixture produced by OpenClaw's own code
(``tests/data/oracle/silent.json``) pins every one of them.

``_silent_stream.py`` applies them to a stream of text deltas
(:class:`~sessionkeeper.SilentReplyStreamFilter`).
"""

from __future__ import annotations

import json
import re
import unicodedata
from functools import lru_cache
from typing import Final

import attrs


__all__ = (
    "HEARTBEAT_TOKEN",
    "SILENT_REPLY_TOKEN",
    "is_internal_formatting_artifact",
    "is_silent_reply",
    "is_silent_reply_payload",
    "is_silent_reply_prefix",
    "starts_with_silent_token",
    "strip_leading_silent_token",
    "strip_silent_token",
)

SILENT_REPLY_TOKEN: Final = "NO_REPLY"
"""The token a model replies with to stay silent."""

HEARTBEAT_TOKEN: Final = "HEARTBEAT_OK"
"""The heartbeat acknowledgement token (OpenClaw); streaming also holds back its prefixes."""

# JavaScript's \s (WhiteSpace + LineTerminator), as a character class body and as a str.strip set.
_JS_SPACE_CHARS: Final = (
    "\t\n\v\f\r \u00a0\u1680"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_W: Final = "[" + re.escape(_JS_SPACE_CHARS) + "]"


def _js_trim(text: str) -> str:
    return text.strip(_JS_SPACE_CHARS)


def _js_trim_start(text: str) -> str:
    return text.lstrip(_JS_SPACE_CHARS)


def _js_canon(ch: str) -> str:
    """JavaScript's non-unicode ``i`` canonicalisation of one character (ECMA-262 Canonicalize)."""
    upper = ch.upper()
    if len(upper) != 1 or (ord(ch) >= 128 and ord(upper) < 128):
        return ch
    return upper


def _ci(token: str) -> str:
    """The token as a pattern matching it under JavaScript's ``i`` flag (no ``u``)."""
    parts = []
    for ch in token:
        canon = _js_canon(ch)
        variants = {
            v for v in (ch, canon, ch.lower(), canon.lower()) if len(v) == 1 and _js_canon(v) == canon
        }
        parts.append(
            re.escape(ch)
            if len(variants) == 1
            else "[" + "".join(re.escape(v) for v in sorted(variants)) + "]"
        )
    return "".join(parts)


def _fold_u(ch: str) -> str:
    """Unicode simple case folding of one character (JavaScript's ``iu`` flags)."""
    folded = ch.casefold()
    return folded if len(folded) == 1 else ch


@attrs.frozen
class _TokenPatterns:
    exact: re.Pattern[str]
    trailing: re.Pattern[str]
    leading: re.Pattern[str]
    final: re.Pattern[str]
    folded: str


@lru_cache(maxsize=16)
def _patterns(token: str) -> _TokenPatterns:
    t = _ci(token)
    return _TokenPatterns(
        exact=re.compile(rf"^{_W}*{t}(?:{_W}+{t})*{_W}*\Z"),
        trailing=re.compile(rf"(?:^|{_W}+|\*+){t}(?:{_W}+{t})*{_W}*\Z"),
        leading=re.compile(rf"^{_W}*{t}((?:{_W}*{t})*)({_W}*)"),
        final=re.compile(rf"(?:^|[{re.escape(_JS_SPACE_CHARS)}*.]){t}{_W}*\Z"),
        folded="".join(_fold_u(c) for c in token),
    )


def _is_punct(ch: str) -> bool:
    return unicodedata.category(ch)[0] == "P"


def _strip_edge_punctuation(text: str) -> str:
    start, end = 0, len(text)
    while start < end and _is_punct(text[start]):
        start += 1
    while end > start and _is_punct(text[end - 1]):
        end -= 1
    return text[start:end]


_HARMONY_MARKER = re.compile(rf"^{_W}*(?:set-thought{_W}+)?<[A-Za-z0-9_]*\|[^>]*>{_W}*\Z")
_BOX_RULE = re.compile(rf"^{_W}*─{{3,}}{_W}*\Z")


def is_internal_formatting_artifact(text: str | None) -> bool:
    """
    Whether ``text`` is only an internal formatting artifact: a harmony channel marker (``<|channel|>``)
    or a rule of at least three ``─`` (OpenClaw ``isInternalFormattingArtifact``; such replies count as
    silent, spec §8).
    """
    if not text:
        return False
    return bool(_HARMONY_MARKER.match(text) or _BOX_RULE.match(text))


def is_silent_reply(text: str | None, *, token: str = SILENT_REPLY_TOKEN) -> bool:
    """
    Whether ``text`` is a token-only silent reply (OpenClaw ``isSilentReplyText``, spec §8).

    The whole text must be the token, repeats allowed, separated by whitespace, case-insensitive:
    ``^\\s*NO_REPLY(\\s+NO_REPLY)*\\s*$``; the test is repeated after trimming and stripping leading
    and trailing Unicode punctuation (so ``"**NO_REPLY**"`` and ``"NO_REPLY."`` are silent).

    Args:
        text: The reply text; ``None`` or empty is not silent.
        token: The silent token (default ``"NO_REPLY"``).
    """
    if not text:
        return False
    exact = _patterns(token).exact
    return bool(exact.match(text) or exact.match(_strip_edge_punctuation(_js_trim(text))))


def _is_json_string_silent(text: str, token: str) -> bool:
    trimmed = _js_trim(text)
    if not (trimmed.startswith('"') and trimmed.endswith('"') and token in trimmed):
        return False
    try:
        parsed = json.loads(trimmed)
    except ValueError:
        return False
    return isinstance(parsed, str) and _js_trim(parsed) == token


def _is_envelope_silent(text: str, token: str) -> bool:
    trimmed = _js_trim(text)
    if not (trimmed.startswith("{") and trimmed.endswith("}") and token in trimmed):
        return False
    try:
        parsed = json.loads(trimmed)
    except ValueError:
        return False
    if not isinstance(parsed, dict) or list(parsed) != ["action"]:
        return False
    action = parsed["action"]
    return isinstance(action, str) and _js_trim(action) == token


_A = re.ASCII | re.IGNORECASE
_REASONING_TAG = r"(?:(?:antml:|mm:)?(?:think(?:ing)?|thought)|antthinking)"
_TAGGED_REASONING = re.compile(
    rf"^{_W}*<{_W}*{_REASONING_TAG}\b[^<>]*>[\s\S]*?<{_W}*/{_W}*{_REASONING_TAG}{_W}*>{_W}*", _A
)
_OPEN_REASONING = re.compile(rf"^{_W}*<{_W}*{_REASONING_TAG}\b[^<>]*>", _A)
_PLAIN_REASONING = re.compile(rf"^{_W}*(?:think(?:ing)?|thought|analysis|reasoning){_W}*:?{_W}*\r?\n", _A)
_PLACE = rf"(?:{_W}+(?:here|for{_W}+now|on{_W}+this|in{_W}+this{_W}+(?:chat|thread|channel|conversation)))?"
_SILENT_INTENT = re.compile(
    rf"^{_W}*(?:i|i'll|i{_W}+will|i'm|i{_W}+am|we|we'll|we{_W}+will|the{_W}+assistant|assistant|the{_W}+bot|bot"
    rf"|openclaw){_W}+(?:(?:will{_W}+)?(?:stay|remain|keep|be){_W}+(?:quiet|silent){_PLACE}"
    rf"|(?:do{_W}+not|don't|dont|will{_W}+not|won't|would{_W}+not|should{_W}+not){_W}+(?:reply|respond){_PLACE}"
    rf"|(?:have|has){_W}+nothing{_W}+(?:to|for){_W}+(?:say|add|reply|respond))(?:[.!?]+)?{_W}*\Z",
    _A,
)
_ANSWER_CUE = re.compile(
    rf"\b(?:answer|here(?:'s|{_W}+is)|tell{_W}+them|you{_W}+(?:should|can|could|need|must)|please|try|use|send"
    rf"|service{_W}+is|resolved|retry|yes|no,|sure)\b",
    _A,
)
_BARE_REASONING = re.compile(
    rf"^{_W}*(?:(?:internal|private){_W}+)?(?:reasoning|thinking|thoughts?|analysis)(?:{_W}+notes?)?{_W}*\Z",
    _A,
)
_LINE_SPLIT = re.compile(r"\r?\n")


def _strip_leading_reasoning_blocks(text: str) -> str:
    current = text
    while True:
        following = _TAGGED_REASONING.sub("", current, count=1)
        if following == current:
            return current
        current = following


def _strip_final_silent_token(text: str, token: str) -> str | None:
    stripped = _js_trim(_patterns(token).final.sub("", text, count=1))
    return None if stripped == _js_trim(text) else stripped


def _has_silent_intent_final_token(text: str, token: str) -> bool:
    without = _strip_final_silent_token(text, token)
    if without is None:
        return False
    return not without or bool(_SILENT_INTENT.match(without))


def _has_plain_reasoning_final_token(text: str, token: str) -> bool:
    without = _strip_final_silent_token(text, token)
    if without is None:
        return False
    if not without or _SILENT_INTENT.match(without):
        return True
    lines = [line for line in (_js_trim(part) for part in _LINE_SPLIT.split(without)) if line]
    final_line = lines[-1] if lines else ""
    previous = "\n".join(lines[:-1])
    if final_line and _SILENT_INTENT.match(final_line) and previous and not _ANSWER_CUE.search(previous):
        return True
    return bool(_BARE_REASONING.match(without))


def _is_reasoning_prefixed_silent(text: str, token: str) -> bool:
    trimmed = _js_trim(text)
    if not trimmed:
        return False
    without_blocks = _strip_leading_reasoning_blocks(trimmed)
    if without_blocks != trimmed:
        return is_silent_reply(without_blocks, token=token) or _has_silent_intent_final_token(
            without_blocks, token
        )
    if _OPEN_REASONING.match(trimmed):
        rest = _OPEN_REASONING.sub("", trimmed, count=1)
        return is_silent_reply(rest, token=token) or _has_plain_reasoning_final_token(rest, token)
    if not _PLAIN_REASONING.match(trimmed):
        return False
    rest = _PLAIN_REASONING.sub("", trimmed, count=1)
    return is_silent_reply(rest, token=token) or _has_plain_reasoning_final_token(rest, token)


def is_silent_reply_payload(text: str | None, *, token: str = SILENT_REPLY_TOKEN) -> bool:
    """
    Whether a final reply payload is silent (OpenClaw ``isSilentReplyPayloadText``, spec §8).

    True for :func:`is_silent_reply` texts, the JSON string ``"NO_REPLY"``, the JSON object
    ``{"action": "NO_REPLY"}`` (that one key only), and reasoning-prefixed replies: leading
    ``<think>…</think>`` (``thinking``, ``thought``, ``antthinking``) blocks, an unclosed reasoning tag
    or a ``thinking:``/``analysis:`` first line, followed by the token alone or by "silent intent" text
    (``"I'll stay quiet."``) ending in the token.
    """
    if not text:
        return False
    return (
        is_silent_reply(text, token=token)
        or _is_json_string_silent(text, token)
        or _is_envelope_silent(text, token)
        or _is_reasoning_prefixed_silent(text, token)
    )


def strip_silent_token(text: str, *, token: str = SILENT_REPLY_TOKEN) -> str:
    """
    Remove a trailing silent token from mixed text and trim (OpenClaw ``stripSilentToken``).

    The token must follow whitespace, a run of ``*`` or the start: ``"Done. NO_REPLY"`` -> ``"Done."``.
    An empty result means the whole reply is silent.
    """
    return _js_trim(_patterns(token).trailing.sub("", text, count=1))


def strip_leading_silent_token(text: str, *, token: str = SILENT_REPLY_TOKEN) -> str:
    """
    Remove leading silent tokens (and the whitespace after them) and trim (OpenClaw
    ``stripLeadingSilentToken``): ``"NO_REPLYThe user…"`` -> ``"The user…"``.
    """
    return _js_trim(_patterns(token).leading.sub("", text, count=1))


def _attached_leading_token(text: str, token: str) -> bool:
    """``^\\s*(?:TOKEN\\s+)*TOKEN(?=[\\p{L}\\p{N}])`` with the ``iu`` flags, scanned by hand."""
    folded = _patterns(token).folded
    size = len(folded)
    pos = len(text) - len(_js_trim_start(text))
    while True:
        candidate = text[pos : pos + size]
        if len(candidate) != size or "".join(_fold_u(c) for c in candidate) != folded:
            return False
        end = pos + size
        if end < len(text) and unicodedata.category(text[end])[0] in "LN":
            return True
        following = end + len(text[end:]) - len(_js_trim_start(text[end:]))
        if following == end:
            return False
        pos = following


def starts_with_silent_token(text: str | None, *, token: str = SILENT_REPLY_TOKEN) -> bool:
    """
    Whether ``text`` starts with silent tokens that precede visible content (OpenClaw
    ``startsWithSilentToken``): the last token glued to a letter or digit (``"NO_REPLYThe"``), or
    followed by whitespace containing a line break and then more text (``"NO_REPLY\\nHello"``).
    """
    if not text:
        return False
    if _attached_leading_token(text, token):
        return True
    leading = _patterns(token).leading.match(text)
    if leading is None or not re.search(r"[\r\n]", leading.group(2) or ""):
        return False
    return len(_js_trim_start(text[leading.end() :])) > 0


def is_silent_reply_prefix(text: str | None, *, token: str = SILENT_REPLY_TOKEN) -> bool:
    """
    Whether a partial streamed text is a prefix of the token that OpenClaw holds back
    (``isSilentReplyPrefixText``, spec §8).

    After trimming leading whitespace the text must be all uppercase, at least 2 characters, a prefix
    of the token, and contain ``_`` or equal the token, or (for ``NO_REPLY``) be exactly ``"NO"``. So
    ``"NO"``, ``"NO_"``, ``"NO_RE"`` are held; ``"N"``, ``"No"``, ``"NOTE"`` are not.
    """
    if not text:
        return False
    trimmed = _js_trim_start(text)
    if not trimmed or trimmed != trimmed.upper():
        return False
    normalized = trimmed.upper()
    if len(normalized.encode("utf-16-le", "surrogatepass")) < 4:
        return False
    token_upper = token.upper()
    if not token_upper.startswith(normalized):
        return False
    if "_" in normalized or normalized == token_upper:
        return True
    if re.search(r"[^A-Z_]", token_upper):
        return bool(re.search(r"[^A-Z_]", normalized))
    return token_upper == "NO_REPLY" and normalized == "NO"
