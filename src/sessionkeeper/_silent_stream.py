"""
Silent replies while they stream: hold back text that may still become ``NO_REPLY`` (OpenClaw spec §8).

:class:`SilentReplyStreamFilter` applies the classifiers of ``_silent.py`` to a stream of text deltas, so
a silent reply never reaches the user, not even in pieces; :func:`streaming_decision` is OpenClaw's
streaming normaliser's silent-token step on the text streamed so far.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator
from typing import Final, Literal

import attrs

from sessionkeeper._silent import (
    _JS_SPACE_CHARS,
    _W,
    HEARTBEAT_TOKEN,
    SILENT_REPLY_TOKEN,
    _is_punct,
    _js_canon,
    _js_trim,
    _js_trim_start,
    _patterns,
    is_silent_reply,
    is_silent_reply_prefix,
    starts_with_silent_token,
    strip_leading_silent_token,
)


__all__ = ("SilentReplyStreamFilter", "StreamingDecision", "filter_silent_stream", "streaming_decision")


@attrs.frozen(kw_only=True)
class StreamingDecision:
    """
    What OpenClaw's streaming normaliser does with the text streamed so far (its silent-token steps).

    Attributes:
        skip: Whether nothing is emitted for now.
        why: ``"silent"``, ``"prefix-held"`` or ``"empty"`` when skipped, else ``None``.
        text: The text to emit (leading glued token stripped) when not skipped.
    """

    skip: bool
    why: Literal["silent", "prefix-held", "empty"] | None = None
    text: str | None = None


def streaming_decision(text: str) -> StreamingDecision:
    """
    OpenClaw's per-partial streaming decision for the accumulated ``text`` (the silent-token steps of
    ``normalizeStreamingText`` in ``agent-runner``, spec §8): skip silent text and held prefixes of
    ``NO_REPLY`` and ``HEARTBEAT_OK``; strip a leading glued ``NO_REPLY``.
    """
    if is_silent_reply(text):
        return StreamingDecision(skip=True, why="silent")
    if is_silent_reply_prefix(text) or is_silent_reply_prefix(text, token=HEARTBEAT_TOKEN):
        return StreamingDecision(skip=True, why="prefix-held")
    out = text
    if out and starts_with_silent_token(out):
        out = strip_leading_silent_token(out)
    if not out:
        return StreamingDecision(skip=True, why="empty")
    return StreamingDecision(skip=False, text=out)


def _same(a: str, b: str) -> bool:
    """Equal under JavaScript's ``i`` flag (per character canonicalisation)."""
    if len(a) != len(b):
        return False
    if a == b:
        return True
    if a.isascii() and b.isascii():
        return a.upper() == b.upper()
    return all(_js_canon(x) == _js_canon(y) for x, y in zip(a, b, strict=True))


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _JS_SPACE_CHARS:
        pos += 1
    return pos


def _skip_punct(text: str, pos: int) -> int:
    while pos < len(text) and _is_punct(text[pos]):
        pos += 1
    return pos


def _token_run_prefix(text: str, pos: int, token: str, *, punct_tail: bool) -> bool:
    r"""
    Whether ``text[pos:]`` is a prefix of ``TOKEN (\s+ TOKEN)* \s*`` (followed, with ``punct_tail``,
    by ``\p{P}* \s*``): a text that more input could still complete.
    """
    size = len(token)
    while True:
        rest = text[pos:]
        if len(rest) < size:
            return _same(rest, token[: len(rest)])
        if not _same(rest[:size], token):
            return False
        pos += size
        after_space = _skip_space(text, pos)
        if after_space == len(text):
            return True
        if after_space > pos and _same(text[after_space], token[0]):
            pos = after_space
            continue
        if not punct_tail:
            return False
        return _skip_space(text, _skip_punct(text, after_space)) == len(text)


def _could_become_silent(text: str, token: str) -> bool:
    """Whether ``text`` is a prefix of some text :func:`is_silent_reply` accepts."""
    pos = _skip_space(text, _skip_punct(text, _skip_space(text, 0)))
    return pos == len(text) or _token_run_prefix(text, pos, token, punct_tail=True)


def _could_be_trailing_token(text: str, pos: int, token: str) -> bool:
    """Whether ``text[pos:]`` is a prefix of a trailing token run that :func:`strip_silent_token` removes."""
    if pos >= len(text):
        return False
    if text[pos] in _JS_SPACE_CHARS:
        pos = _skip_space(text, pos)
    elif text[pos] == "*":
        while pos < len(text) and text[pos] == "*":
            pos += 1
    else:
        return False
    return pos == len(text) or _token_run_prefix(text, pos, token, punct_tail=False)


_SPACE_OR_STAR_RUN: Final = re.compile(rf"{_W}+|\*+")


class SilentReplyStreamFilter:
    """
    Suppress a silent reply while it streams: feed text deltas, get back what may be shown now.

    The rules are OpenClaw's (spec §8), applied to the accumulated text after every delta:

    - Nothing is emitted while the text so far is silent (:func:`is_silent_reply`), a prefix OpenClaw
      holds back (:func:`is_silent_reply_prefix`, also for ``HEARTBEAT_OK``), or could still become a
      silent reply. The last condition is this filter's own, stricter than OpenClaw's two-character
      prefix rule, so that no split of the token leaks: ``"N"`` then ``"O_REPLY"``, ``"**"`` then
      ``"NO_REPLY**"`` and ``"NO_REPLY NO"`` then ``"_REPLY"`` all stay silent (field report B15).
      Held text is released, unchanged, as soon as it is clearly a normal reply (``"No"`` then
      ``" problem"`` emits ``"No problem"``).
    - When the reply starts with the token glued to content (``"NO_REPLYThe…"``) or on its own line
      before content, the leading token is removed (OpenClaw ``stripLeadingSilentToken``); leading
      whitespace of the reply is dropped. A token followed by a space and text (``"NO_REPLY Hello"``)
      is a normal reply and is delivered as is, as OpenClaw 2026.7.35 does.
    - After the reply is released, a tail that could be a trailing token (``"Done. NO_"``) is held;
      :meth:`finish` drops it when it is one (OpenClaw ``stripSilentToken``), else releases it.

    JSON envelopes and reasoning-prefixed replies (:func:`is_silent_reply_payload`) are recognised only
    on the final text by OpenClaw; they stream like normal text here too. ``HEARTBEAT_OK`` prefixes are
    held back as OpenClaw's streaming does, but acknowledging heartbeats is not this filter's job: a
    reply that is exactly ``HEARTBEAT_OK`` is released by :meth:`finish`.

    The concatenation of everything :meth:`feed` and :meth:`finish` return is :attr:`text`, and it is
    the same whatever the chunking. Not thread-safe; one filter per reply.

    Args:
        token: The silent token (default ``"NO_REPLY"``).

    .. versionadded:: 0.1
    """

    __slots__ = ("_buffer", "_emitted", "_finished", "_pending", "_released", "_token")

    def __init__(self, *, token: str = SILENT_REPLY_TOKEN) -> None:
        if not token:
            raise ValueError("token must be a non-empty string")
        self._token = token
        self._buffer = ""
        self._pending = ""
        self._emitted: list[str] = []
        self._released = False
        self._finished = False

    @property
    def text(self) -> str:
        """Everything emitted so far (after :meth:`finish`: the delivered reply)."""
        return "".join(self._emitted)

    @property
    def held(self) -> str:
        """Text received but not emitted yet."""
        return self._pending if self._released else self._buffer

    @property
    def finished(self) -> bool:
        """Whether :meth:`finish` was called."""
        return self._finished

    @property
    def silent(self) -> bool:
        """After :meth:`finish`: whether the reply was suppressed (nothing emitted). False before."""
        return self._finished and not self._emitted

    def _hold(self, text: str) -> bool:
        token = self._token
        return (
            is_silent_reply(text, token=token)
            or is_silent_reply_prefix(text, token=token)
            or (token == SILENT_REPLY_TOKEN and is_silent_reply_prefix(text, token=HEARTBEAT_TOKEN))
            or _could_become_silent(text, token)
        )

    def _strip_leading(self, text: str) -> str:
        if starts_with_silent_token(text, token=self._token):
            match = _patterns(self._token).leading.match(text)
            if match is not None:
                text = text[match.end() :]
        return _js_trim_start(text)

    def _emit(self, text: str) -> str:
        """Emit ``text`` except a tail that could still be a trailing token."""
        self._pending = ""
        for run in _SPACE_OR_STAR_RUN.finditer(text):  # a trailing token starts at such a run
            if _could_be_trailing_token(text, run.start(), self._token):
                self._pending = text[run.start() :]
                text = text[: run.start()]
                break
        if text:
            self._emitted.append(text)
        return text

    def feed(self, chunk: str) -> str:
        """
        Add a streamed text delta.

        Args:
            chunk: The next piece of the reply text (may be empty).

        Returns:
            The text to show now (``""`` while held back).

        Raises:
            RuntimeError: :meth:`finish` was already called.
        """
        if self._finished:
            raise RuntimeError("SilentReplyStreamFilter.feed() after finish()")
        if not chunk:
            return ""
        if self._released:
            return self._emit(self._pending + chunk)
        self._buffer += chunk
        if self._hold(self._buffer):
            return ""
        self._released = True
        return self._emit(self._strip_leading(self._buffer))

    def finish(self, *, aborted: bool = False) -> str:
        """
        End the stream and return the last text to show.

        A held reply is suppressed when it is silent or blank; on an abort, anything still held is
        dropped (so an aborted ``"NO_"`` or ``"NO"`` never shows, as in OpenClaw #23761; a genuine
        one-word ``"NO"`` cut by an abort is lost). Otherwise held text is released, minus a trailing
        token (:func:`strip_silent_token`). Calling it again returns ``""``.

        Args:
            aborted: Whether the stream was aborted or failed before its natural end.

        Returns:
            The remaining text to show (``""`` if none).
        """
        if self._finished:
            return ""
        self._finished = True
        if aborted:
            self._pending = ""
            return ""
        if not self._released:
            if is_silent_reply(self._buffer, token=self._token):
                return ""
            self._released = True
            rest = self._strip_leading(self._buffer)
        else:
            rest = self._pending
        self._pending = ""
        match = _patterns(self._token).trailing.search(rest)
        if match is not None:
            rest = rest[: match.start()]
        if not self._emitted and not _js_trim(rest):
            rest = ""
        if rest:
            self._emitted.append(rest)
        return rest


async def filter_silent_stream(
    chunks: AsyncIterable[str], *, token: str = SILENT_REPLY_TOKEN
) -> AsyncIterator[str]:
    """
    Wrap an async stream of text deltas in a :class:`SilentReplyStreamFilter`.

    Yields only non-empty text, then what :meth:`SilentReplyStreamFilter.finish` releases. If the
    source raises (or the consumer stops early), text still held back is dropped, as
    ``finish(aborted=True)`` does, and the error propagates.

    Args:
        chunks: The model's text deltas.
        token: The silent token (default ``"NO_REPLY"``).
    """
    stream = SilentReplyStreamFilter(token=token)
    async for chunk in chunks:
        shown = stream.feed(chunk)
        if shown:
            yield shown
    rest = stream.finish()
    if rest:
        yield rest
