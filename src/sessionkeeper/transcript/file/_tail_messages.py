"""
The last messages of a transcript's current branch with a bounded tail read (DESIGN "Targets": last
50 messages < 1 ms); the full loader decides whenever the tail cannot prove the answer (:mod:`._tail`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Final

import anyio
import anyio.lowlevel

from sessionkeeper.records import (
    CURRENT_SESSION_VERSION,
    AgentMessage,
    MessageEntry,
    TranscriptEntry,
    UnknownEntry,
    message_from_json,
    typed_entry_from_line,
)
from sessionkeeper.transcript._index import TranscriptIndex
from sessionkeeper.transcript._lines import TailRecord
from sessionkeeper.transcript._load import _header_version, load_transcript
from sessionkeeper.transcript.file._tail import _walk_tail
from sessionkeeper.transcript.file._tail_reader import (
    DEFAULT_MAX_TAIL_BYTES,
    MAX_CHUNK,
    TailReader,
    open_transcript_file,
    read_header,
)


__all__ = ("aread_last_messages", "first_read_for", "last_messages_of_index", "read_last_messages")


def _message_of(entry: TranscriptEntry) -> AgentMessage | None:
    if isinstance(entry, MessageEntry):
        return entry.message
    if isinstance(entry, UnknownEntry):
        inner = entry.raw.get("message")
        return message_from_json(inner) if isinstance(inner, dict) else None
    return None


_MESSAGE_BYTES_GUESS: Final = 2048
"""Bytes per path message assumed before any was read (the pi samples average 0.8-1.3 KB per message
on the path, tool results included): the first read of ``n`` messages is sized to hold them."""
_READ_SLACK: Final = 4096
_MIN_FIRST_READ: Final = 16 << 10


def first_read_for(n: int) -> int:
    """The first backward read for the last ``n`` messages, in bytes (16 KiB to 1 MiB)."""
    return min(max(n * _MESSAGE_BYTES_GUESS + _READ_SLACK, _MIN_FIRST_READ), MAX_CHUNK)


class _MessageWalk:
    def __init__(self, n: int) -> None:
        self.n = n
        self.messages: list[AgentMessage] = []
        self._found_before = 0

    def next_chunk(self, bytes_read: int) -> int | None:
        """The next read sized to the messages still missing, at the rate seen so far (+50 %)."""
        found = len(self.messages)
        if found == self._found_before:
            return None  # no message in the last read (a long line, another branch): doubling
        self._found_before = found
        return (self.n - found) * bytes_read * 3 // (found * 2) + _READ_SLACK

    def __call__(self, record: TailRecord) -> bool:
        if record.kind == "message":
            message = _message_of(record.entry)
            if message is not None:
                self.messages.append(message)
        return len(self.messages) >= self.n


def last_messages_of_index(index: TranscriptIndex, n: int) -> tuple[AgentMessage, ...]:
    """The last ``n`` messages of a loaded index's leaf path (see :func:`read_last_messages`)."""
    if n <= 0:
        return ()
    found: list[AgentMessage] = []
    for pos in reversed(index.path_positions(index.leaf_id)):
        if index.kinds[pos] == "message":
            message = _message_of(index.entry_at(pos))
            if message is not None:
                found.append(message)
                if len(found) >= n:
                    break
    return tuple(reversed(found))


def read_last_messages(
    path: Path | str,
    n: int = 50,
    *,
    max_tail_bytes: int = DEFAULT_MAX_TAIL_BYTES,
    chunk_bytes: int | None = None,
) -> tuple[AgentMessage, ...]:
    """
    The last ``n`` messages of the transcript's current branch, oldest first, with a bounded tail read.

    "Messages" are the ``message`` entries (any role: user, assistant, toolResult, bashExecution,
    custom...) on the path from the leaf (the last entry with an id) towards the root, as recorded:
    compactions are not applied (this is the history, not the model context; use
    :func:`read_tail_context` for that) and abandoned branches are not included. Reads backwards in
    chunks sized to what is needed: the first holds ``n`` messages of 2 KiB (16 KiB to 1 MiB), each
    further one the messages still missing at the size per message read so far; only the lines on the
    path up to the ``n``-th message are decoded. Always the same answer as the full loader (it decides
    for legacy files or past ``max_tail_bytes``).

    Args:
        path: The transcript file.
        n: How many messages at most (``n <= 0`` gives ``()``).
        max_tail_bytes: Bytes read backwards before handing over to the full loader.
        chunk_bytes: Size of the first backward read, in bytes (``None``: sized for ``n`` messages).

    Raises:
        TranscriptNotFoundError: The file does not exist.
        TranscriptFormatError: It is not a transcript.
        OSError: It could not be read.
    """
    if n <= 0:
        return ()
    file = Path(path)
    with open_transcript_file(file) as handle:
        found = _last_messages_walk(handle, n, max_tail_bytes=max_tail_bytes, chunk_bytes=chunk_bytes)
    if found is None:
        return last_messages_of_index(load_transcript(file), n)
    return found[0]


def _last_messages_walk(
    handle: IO[bytes], n: int, *, max_tail_bytes: int, chunk_bytes: int | None
) -> tuple[tuple[AgentMessage, ...], TailReader | None] | None:
    """The tail walk of :func:`read_last_messages` and its reader; ``None``: the full loader decides."""
    first = first_read_for(n) if chunk_bytes is None else chunk_bytes
    linear = _linear_tail_messages(handle, n, max_tail_bytes=max_tail_bytes, first_chunk=first)
    if linear is not None:
        return linear
    walk = _MessageWalk(n)
    readers: list[TailReader] = []
    outcome = _walk_tail(
        handle, max_bytes=max_tail_bytes, first_chunk=first, visit=walk, reader_out=readers, typed=True
    )
    if outcome == "full":
        return None
    return tuple(reversed(walk.messages)), readers[0] if readers else None


def _linear_tail_messages(
    handle: IO[bytes], n: int, *, max_tail_bytes: int, first_chunk: int
) -> tuple[tuple[AgentMessage, ...], TailReader] | None:
    """
    The last ``n`` messages (and the reader) when the tail is the common case: every line met going
    backwards is a typed record (blank lines aside) and the parent of the one after it, from the leaf up
    to the ``n``-th message or the root. One decode per line and no per-line objects beyond the records.
    ``None`` as soon as anything else is met (a line of another branch, a repeated id, an unknown or
    odd line, a legacy file...): the general walk (:func:`._tail._walk_tail`) then decides from the
    start, so the answer is always the one it gives.
    """
    size = os.fstat(handle.fileno()).st_size
    found = read_header(handle, size)
    if found is None or _header_version(found.raw) < CURRENT_SESSION_VERSION:
        return None
    reader = TailReader(handle, start=found.entries_offset, end=size, first_chunk=first_chunk)
    sizing = _MessageWalk(n)
    messages = sizing.messages
    seen: set[str] = set()
    want: str | None = None
    leaf = True
    decode = typed_entry_from_line
    while True:
        for line in reader.previous_lines_reversed():
            if not line:
                continue
            entry = decode(line)
            if entry is None:
                return None
            entry_id = entry.id
            if leaf:
                if not entry_id:
                    return None
                leaf = False
            elif entry_id != want or entry_id in seen:
                return None
            seen.add(entry_id)
            if type(entry) is MessageEntry:
                messages.append(entry.message)
                if len(messages) >= n:
                    return tuple(reversed(messages)), reader
            want = entry.parent_id
            if not want:
                return tuple(reversed(messages)), reader  # the root
        if reader.exhausted or reader.bytes_read > max_tail_bytes:
            return None
        wanted = sizing.next_chunk(reader.bytes_read)
        if wanted is not None:
            reader.size_next(wanted)


_INLINE_TAIL_BYTES: Final = 256 << 10
"""Bytes a tail walk of :func:`aread_last_messages` may read on the event loop's thread (256 KiB: the
last 50 messages of the pi samples are 40-110 KB; a walk this size costs about what the trip to a
worker thread costs, and blocks the loop about as long as one durable append)."""


async def aread_last_messages(
    path: Path | str, n: int = 50, *, max_tail_bytes: int = DEFAULT_MAX_TAIL_BYTES
) -> tuple[AgentMessage, ...]:
    """
    :func:`read_last_messages` for asyncio and trio; same result and errors.

    A tail walk that finds the messages within 256 KiB runs on the event loop's thread (a trip to a
    worker thread costs more than the walk); a longer walk, and the full loader, run in a worker thread.
    The walk's reads block the loop: on a slow network file system, run :func:`read_last_messages` in
    a worker thread instead (a gate timing the walks, like the append writes', sent them to a thread
    on every CPU stall of a loaded machine, where the trip costs about 2.5 ms).
    """
    await anyio.lowlevel.checkpoint_if_cancelled()
    if n <= 0:
        return ()
    file = Path(path)
    budget = min(max_tail_bytes, _INLINE_TAIL_BYTES)
    if first_read_for(n) <= budget:
        with open_transcript_file(file) as handle:
            found = _last_messages_walk(handle, n, max_tail_bytes=budget, chunk_bytes=None)
        if found is not None:
            return found[0]
    return await anyio.to_thread.run_sync(lambda: read_last_messages(file, n, max_tail_bytes=max_tail_bytes))
