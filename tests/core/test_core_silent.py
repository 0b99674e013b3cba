"""Silent replies (OpenClaw spec §8): the classifiers against OpenClaw's own output, and the stream filter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionkeeper._silent import (
    HEARTBEAT_TOKEN,
    SILENT_REPLY_TOKEN,
    is_internal_formatting_artifact,
    is_silent_reply,
    is_silent_reply_payload,
    is_silent_reply_prefix,
    starts_with_silent_token,
    strip_leading_silent_token,
    strip_silent_token,
)
from sessionkeeper._silent_stream import SilentReplyStreamFilter, streaming_decision


FIXTURE = Path(__file__).resolve().parent.parent / "data" / "oracle" / "silent.json"
ORACLE = json.loads(FIXTURE.read_text(encoding="utf-8"))


def _ours(text: str) -> dict[str, Any]:
    decision = streaming_decision(text)
    chunk: dict[str, Any] = (
        {"skip": True, "why": decision.why} if decision.skip else {"skip": False, "text": decision.text}
    )
    return {
        "silent": is_silent_reply(text),
        "silentPayload": is_silent_reply_payload(text),
        "prefixHeld": is_silent_reply_prefix(text),
        "heartbeatPrefixHeld": is_silent_reply_prefix(text, token=HEARTBEAT_TOKEN),
        "startsWithToken": starts_with_silent_token(text),
        "strippedLeading": strip_leading_silent_token(text),
        "strippedTrailing": strip_silent_token(text),
        "formattingArtifact": is_internal_formatting_artifact(text),
        "streamingChunk": chunk,
    }


def test_fixture_comes_from_the_pinned_openclaw() -> None:
    assert ORACLE["openclaw"] == "2026.7.35"
    assert ORACLE["token"] == SILENT_REPLY_TOKEN
    assert len(ORACLE["results"]) > 150


@pytest.mark.parametrize("case", ORACLE["results"], ids=lambda c: repr(c["text"])[:40])
def test_matches_openclaw(case: dict[str, Any]) -> None:
    expected = {key: value for key, value in case.items() if key != "text"}
    assert _ours(case["text"]) == expected


@pytest.mark.parametrize(
    ("text", "silent"),
    [
        ("NO_REPLY", True),
        ("  no_reply\n", True),
        ("NO_REPLY NO_REPLY", True),
        ("**NO_REPLY**", True),
        ("NO_REPLY.", True),
        ("`NO_REPLY`", False),  # backticks are symbols, not punctuation
        ("NO_REPLYNO_REPLY", False),
        ("NO_REPLY Hello", False),
        ("", False),
        (None, False),
    ],
)
def test_is_silent_reply_rules(text: str | None, silent: bool) -> None:
    assert is_silent_reply(text) is silent


def test_js_whitespace_semantics() -> None:
    # JavaScript's \s includes U+FEFF but not U+0085 or U+001C, unlike Python's.
    assert is_silent_reply("\ufeffNO_REPLY")
    assert not is_silent_reply("\x85NO_REPLY")
    assert not is_silent_reply("\x1cNO_REPLY")


def test_prefix_rules() -> None:
    assert is_silent_reply_prefix("NO")
    assert is_silent_reply_prefix("  NO_RE")
    assert not is_silent_reply_prefix("N")
    assert not is_silent_reply_prefix("No")
    assert not is_silent_reply_prefix("NOTE")
    assert is_silent_reply_prefix("HEARTBEAT_", token=HEARTBEAT_TOKEN)
    assert not is_silent_reply_prefix("HE", token=HEARTBEAT_TOKEN)
    assert is_silent_reply_prefix("NO_", token="NO_REPLY")
    assert not is_silent_reply_prefix(None)


def test_custom_token() -> None:
    assert is_silent_reply("SKIP skip", token="SKIP")
    assert not is_silent_reply("NO_REPLY", token="SKIP")
    assert strip_silent_token("done SKIP", token="SKIP") == "done"


def _stream(chunks: list[str], *, aborted: bool = False) -> tuple[list[str], SilentReplyStreamFilter]:
    filt = SilentReplyStreamFilter()
    out = [filt.feed(chunk) for chunk in chunks]
    out.append(filt.finish(aborted=aborted))
    return out, filt


@pytest.mark.parametrize(
    "chunks",
    [
        ["NO", "_REPLY"],
        ["N", "O_RE", "PLY", "\n"],
        ["no_reply"],
        ["no", "_re", "ply"],
        ["  NO_REPLY  "],
        ["**", "NO_REPLY", "**"],
        ["NO_REPLY ", "NO", "_REPLY"],
        ["NO_REPLY", "."],
    ],
)
def test_b15_silent_streams_emit_nothing(chunks: list[str]) -> None:
    out, filt = _stream(chunks)
    assert "".join(out) == ""
    assert filt.silent
    assert filt.text == ""


def test_b15_no_problem_is_held_then_released_whole() -> None:
    out, filt = _stream(["No", " problem, done."])
    assert "".join(out) == "No problem, done."
    assert not filt.silent


def test_b15_normal_text_is_delivered_as_is() -> None:
    out, filt = _stream(["NOTE: build passed"])
    assert out[0] == "NOTE: build passed"
    assert filt.text == "NOTE: build passed"


def test_b15_token_then_space_and_text_is_delivered_like_openclaw() -> None:
    # OpenClaw 2026.7.35 (PR #50365) delivers "NO_REPLY Hello": the token is only stripped when glued.
    out, _ = _stream(["NO_REPLY", " Hello"])
    assert "".join(out) == "NO_REPLY Hello"
    assert streaming_decision("NO_REPLY Hello").text == "NO_REPLY Hello"


@pytest.mark.parametrize("buffer", ["NO_", "NO", "N", "NO_REPLY NO_RE"])
def test_b15_aborted_streams_with_a_held_prefix_are_suppressed(buffer: str) -> None:
    out, filt = _stream([buffer], aborted=True)
    assert "".join(out) == ""
    assert filt.silent


def test_a_real_no_answer_is_released_at_a_normal_end() -> None:
    out, filt = _stream(["NO"])
    assert out == ["", "NO"]
    assert not filt.silent


def test_glued_leading_token_is_stripped() -> None:
    out, _ = _stream(["NO_REPLY", "The user", " says hi"])
    assert out == ["", "The user", " says hi", ""]
    out, _ = _stream(["NO_REPLY\n", "\nHello"])
    assert "".join(out) == "Hello"


def test_trailing_token_is_held_and_dropped() -> None:
    out, filt = _stream(["Done.", " NO_", "REPLY"])
    assert out == ["Done.", "", "", ""]
    assert filt.text == "Done."
    out, filt = _stream(["Done.", " NO_", "RTH"])
    assert "".join(out) == "Done. NO_RTH"
    out, filt = _stream(["a", "*", "b"])
    assert out == ["a", "", "*b", ""]


def test_feed_after_finish_raises_and_finish_is_idempotent() -> None:
    filt = SilentReplyStreamFilter()
    assert filt.feed("") == ""
    assert filt.finish() == ""
    assert filt.finish() == ""
    assert filt.silent
    assert filt.finished
    with pytest.raises(RuntimeError):
        filt.feed("x")
    with pytest.raises(ValueError, match="token"):
        SilentReplyStreamFilter(token="")


def test_held_property() -> None:
    filt = SilentReplyStreamFilter()
    filt.feed("NO_")
    assert filt.held == "NO_"
    filt.feed("X")
    assert filt.held == ""
    assert filt.text == "NO_X"


def _all_splits(text: str) -> list[list[str]]:
    """Every way to cut ``text`` into non-empty chunks (2**(n-1) ways)."""
    splits: list[list[str]] = []
    for mask in range(1 << (len(text) - 1)):
        chunks, start = [], 0
        for i in range(1, len(text)):
            if mask & (1 << (i - 1)):
                chunks.append(text[start:i])
                start = i
        chunks.append(text[start:])
        splits.append(chunks)
    return splits


@pytest.mark.parametrize("text", ["NO_REPLY", " NO_REPLY\n", "**NO_REPLY**", "no_reply."])
def test_every_split_of_the_token_stays_silent(text: str) -> None:
    for chunks in _all_splits(text):
        out, filt = _stream(chunks)
        assert "".join(out) == "", chunks
        assert filt.silent


@pytest.mark.parametrize(
    ("text", "delivered"),
    [
        ("NO_REPLYHi", "Hi"),
        ("Hi NO_REPLY", "Hi"),
        ("No way", "No way"),
        ("NO_REPLY Hi", "NO_REPLY Hi"),
    ],
)
def test_every_split_delivers_the_same_text(text: str, delivered: str) -> None:
    for chunks in _all_splits(text):
        out, filt = _stream(chunks)
        assert "".join(out) == delivered, chunks
        assert filt.text == delivered


_ALPHABET = st.sampled_from(
    ["N", "O", "_", "R", "E", "P", "L", "Y", "n", "o", " ", "\n", "*", ".", "a", "Hi"]
)


@given(st.lists(_ALPHABET, max_size=14), st.data())
def test_chunking_never_changes_the_delivered_text(pieces: list[str], data: st.DataObject) -> None:
    text = "".join(pieces)
    whole, whole_filter = _stream([text] if text else [])
    cuts = sorted(data.draw(st.sets(st.integers(min_value=1, max_value=max(len(text) - 1, 1)))))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True) if text[a:b]]
    split, split_filter = _stream(chunks)
    assert "".join(split) == "".join(whole) == whole_filter.text == split_filter.text
    if is_silent_reply(text):
        assert split_filter.silent
    # Nothing is invented: the delivered text is a slice of the input.
    assert whole_filter.text in text


@given(st.text(max_size=30))
def test_silent_texts_never_leak_and_others_are_substrings(text: str) -> None:
    out, filt = _stream([text[:5], text[5:]])
    if is_silent_reply(text):
        assert "".join(out) == ""
    assert filt.text in text


@pytest.mark.anyio
async def test_filter_silent_stream_wraps_async_iterables() -> None:
    from collections.abc import AsyncIterator

    from sessionkeeper._silent_stream import filter_silent_stream

    async def source(chunks: list[str]) -> AsyncIterator[str]:
        for chunk in chunks:
            yield chunk

    assert [s async for s in filter_silent_stream(source(["NO", "_RE", "PLY"]))] == []
    assert [s async for s in filter_silent_stream(source(["No", " problem", "."]))] == ["No problem", "."]
    assert [s async for s in filter_silent_stream(source(["Done.", " NO_", "REPLY"]))] == ["Done."]
    assert [s async for s in filter_silent_stream(source(["SKIP"]), token="SKIP")] == []

    async def failing() -> AsyncIterator[str]:
        yield "NO"
        raise ConnectionError("stream cut")

    shown: list[str] = []
    with pytest.raises(ConnectionError):
        async for piece in filter_silent_stream(failing()):
            shown.append(piece)  # noqa: PERF401 - keep what was shown before the error
    assert shown == []  # the held "NO" is dropped
