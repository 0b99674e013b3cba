"""
Bounded tail reads of a transcript: the leaf's context and the last messages without loading the file
(DESIGN "Targets": context rebuild follows the live context, not the file; last 50 messages < 1 ms).

The file is read backwards in chunks from its end. Lines are interpreted with the loader's rules
(pi-format spec §2, :mod:`._load`): blank and unparseable lines are skipped, later ``session`` lines are
ignored, invalid UTF-8 and lone surrogates read as U+FFFD, entries without a string id are not part of
the tree, the leaf is the last entry with an id, and an id seen first from the end is its latest (winning)
occurrence. The ``parentId`` chain is followed from the leaf, reading further back only while the answer
still depends on earlier lines.

Whenever the tail cannot prove the answer, the full loader decides instead (so the result is always that
of :func:`load_transcript`): a legacy v1/v2 file (migrated in memory), a header that is not found in the
first 1 MiB, a file whose entries carry no id, or a walk that would read more than ``max_tail_bytes``
(except for the context when only the thinking level is still unknown: that walk goes on keeping ids
only, see :func:`_walk_lean`).
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Final

import anyio
import msgspec

from sessionkeeper.exceptions import TranscriptFormatError, TranscriptNotFoundError
from sessionkeeper.transcript._codec import (
    decode_json_line,
    entry_from_json,
    header_from_json,
    message_from_json,
)
from sessionkeeper.transcript._context import (
    EMPTY_CONTEXT,
    SessionContext,
    build_context_lazily,
    entry_model,
    entry_thinking_level,
)
from sessionkeeper.transcript._entries import (
    CURRENT_SESSION_VERSION,
    CompactionEntry,
    MessageEntry,
    SessionHeader,
    TranscriptEntry,
    UnknownEntry,
)
from sessionkeeper.transcript._index import TranscriptIndex, decode_line
from sessionkeeper.transcript._load import load_transcript
from sessionkeeper.transcript._messages import AgentMessage


__all__ = (
    "DEFAULT_MAX_TAIL_BYTES",
    "TailHeader",
    "TailReader",
    "TailRecord",
    "aread_last_messages",
    "aread_tail_context",
    "last_messages_of_index",
    "open_transcript_file",
    "parse_entry_line",
    "read_header",
    "read_last_messages",
    "read_tail_context",
)

DEFAULT_MAX_TAIL_BYTES: Final = 8 << 20
"""Default bound on the bytes a tail read reads line by line before handing over (8 MiB; a live
context of a 200k-token window is about 1 MB of JSON)."""

_BOM: Final = b"\xef\xbb\xbf"
_MAX_HEADER_BYTES: Final = 1 << 20
_MAX_CHUNK: Final = 1 << 20


class _Head(msgspec.Struct, gc=False):
    type: Any = None
    id: Any = None
    parentId: Any = None  # noqa: N815 - the on-disk key


_HEAD_DECODER: Final = msgspec.json.Decoder(_Head)


class TailRecord:
    """
    One entry line met by a tail read: its ``type``, id, parent id and JSON bytes (repaired bytes for
    a line with invalid UTF-8 or lone surrogates). The full entry is decoded on first use.
    """

    __slots__ = ("_entry", "entry_id", "kind", "line", "parent_id")

    def __init__(self, kind: str, entry_id: str | None, parent_id: str | None, line: bytes) -> None:
        self.kind = kind
        self.entry_id = entry_id
        self.parent_id = parent_id
        self.line = line
        self._entry: TranscriptEntry | None = None

    @property
    def entry(self) -> TranscriptEntry:
        """The decoded entry (cached)."""
        if self._entry is None:
            self._entry = entry_from_json(decode_line(self.line))
        return self._entry


def _decode_object(line: bytes) -> tuple[Any, bytes] | None:
    """The careful scan's reading of one line: ``(head or dict, bytes)``, ``None`` when skipped."""
    try:
        head = _HEAD_DECODER.decode(line)
        if not line.isascii():  # fields msgspec skips are not UTF-8 checked
            line.decode("utf-8")
    except (UnicodeDecodeError, msgspec.DecodeError, RecursionError):  # RecursionError: ~1000 deep
        if not line.strip():
            return None
        try:
            value = decode_json_line(line)[0]
        except ValueError:
            return None
        if not isinstance(value, dict):
            return None
        return value, msgspec.json.encode(value)
    return head, line


def parse_entry_line(line: bytes) -> TailRecord | None:
    """
    Read one line (no newline) as the loader does: ``None`` for a blank, unparseable, non-object or
    ``session`` line (skipped or ignored after the header, spec §2), else its :class:`TailRecord`.
    """
    if not line:
        return None
    decoded = _decode_object(line)
    if decoded is None:
        return None
    value, data = decoded
    if isinstance(value, dict):
        kind, entry_id, parent = value.get("type"), value.get("id"), value.get("parentId")
    else:
        kind, entry_id, parent = value.type, value.id, value.parentId
    if kind == "session":
        return None
    return TailRecord(
        kind if isinstance(kind, str) else "",
        entry_id if isinstance(entry_id, str) else None,
        parent if isinstance(parent, str) else None,
        data,
    )


class TailHeader(msgspec.Struct, frozen=True):
    """The session header of a file and the offset just after its line (where entries start)."""

    header: SessionHeader
    raw: dict[str, Any]
    entries_offset: int


def read_header(handle: IO[bytes], size: int, *, max_bytes: int = _MAX_HEADER_BYTES) -> TailHeader | None:
    """
    Find the header as the loader does (the first parseable line, spec §2-3) in the first
    ``max_bytes`` (read 4 KiB first, doubling while needed). ``None`` when it is not a valid session
    header with a string id there, or the header line does not end within ``max_bytes`` (the caller
    decides with the full loader).
    """
    want = min(4096, max_bytes)
    while True:
        handle.seek(0)
        data = handle.read(min(size, want))
        found = _header_in(data, size)
        if found is not _MORE:
            return found  # type: ignore[return-value]
        if want >= max_bytes or len(data) >= size:
            return None
        want = min(want * 2, max_bytes)


_MORE: Final = object()


def _header_in(data: bytes, size: int) -> TailHeader | object | None:
    """The header in a prefix of the file, ``None`` if there is none, ``_MORE`` to read further."""
    pos = 3 if data.startswith(_BOM) else 0
    whole = len(data) >= size
    while pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            if not whole:
                return _MORE
            end = len(data)
        line = data[pos:end]
        pos = end + 1
        if not line:
            continue
        decoded = _decode_object(line)
        if decoded is None:
            continue
        value = decode_line(decoded[1])
        if (
            not isinstance(value, dict)
            or value.get("type") != "session"
            or not isinstance(value.get("id"), str)
        ):
            return None
        try:
            header = header_from_json(value)
        except msgspec.ValidationError:
            return None
        return TailHeader(header=header, raw=value, entries_offset=min(pos, size))
    return None if whole else _MORE


class TailReader:
    """
    Reads the lines of ``[start, end)`` of an open file backwards, in chunks that double from
    ``first_chunk`` up to 1 MiB (or ``first_chunk`` if larger). :meth:`previous_lines` returns the
    next batch in file order.
    """

    def __init__(self, handle: IO[bytes], *, start: int, end: int, first_chunk: int) -> None:
        self._handle = handle
        self._start = start
        self._pos = end
        self._chunk = max(first_chunk, 1)
        self._max_chunk = max(first_chunk, _MAX_CHUNK)
        self._carry = b""
        self.bytes_read = 0
        self.exhausted = end <= start

    @property
    def unread_end(self) -> int:
        """End offset of the part not yet returned (``[start, unread_end)``, ending at a line end)."""
        return self._pos + len(self._carry)

    def previous_lines(self) -> list[bytes]:
        """The next complete lines going backwards, in file order (possibly empty); sets
        :attr:`exhausted` once the start was reached."""
        if self.exhausted:
            return []
        size = min(self._chunk, self._pos - self._start)
        self._pos -= size
        self._chunk = min(self._chunk * 2, self._max_chunk)
        self._handle.seek(self._pos)
        data = self._handle.read(size)
        self.bytes_read += len(data)
        if self._carry:
            data += self._carry
        if self._pos > self._start:
            cut = data.find(b"\n")
            if cut < 0:
                self._carry = data
                return []
            self._carry = data[:cut]
            data = data[cut + 1 :]
        else:
            self._carry = b""
            self.exhausted = True
        return data.split(b"\n")


def open_transcript_file(path: Path) -> IO[bytes]:
    """Open ``path`` for reading with the loader's errors (:class:`TranscriptNotFoundError`,
    :class:`TranscriptFormatError` for a directory)."""
    try:
        return path.open("rb")
    except FileNotFoundError as err:
        raise TranscriptNotFoundError(f"transcript not found: {path}") from err
    except IsADirectoryError as err:
        raise TranscriptFormatError("is a directory, not a transcript", path=path) from err


_Visit = Callable[[TailRecord], bool]


def _version(raw: dict[str, Any]) -> int:
    version = raw.get("version", 1)
    return version if isinstance(version, int) and not isinstance(version, bool) else 1


def _walk_tail(handle: IO[bytes], *, max_bytes: int, first_chunk: int, visit: _Visit) -> str:
    """
    Follow the leaf's ``parentId`` chain backwards, calling ``visit`` on each path entry from the
    leaf towards the root until it returns ``True``.

    Returns ``"stopped"`` (visit said so), ``"root"`` (the path ended: root, missing parent or a
    cycle), ``"empty"`` (no entries), or ``"full"`` (the full loader must decide).
    """
    size = os.fstat(handle.fileno()).st_size
    found = read_header(handle, size)
    if found is None or _version(found.raw) < CURRENT_SESSION_VERSION:
        return "full"
    reader = TailReader(handle, start=found.entries_offset, end=size, first_chunk=first_chunk)
    latest: dict[str, TailRecord] = {}  # id -> its last occurrence in file order
    on_path: set[int] = set()
    current: TailRecord | None = None
    any_entry = False
    while True:
        lines = reader.previous_lines()
        for line in reversed(lines):
            record = parse_entry_line(line)
            if record is None:
                continue
            any_entry = True
            entry_id = record.entry_id
            if entry_id is None or entry_id in latest:
                continue
            latest[entry_id] = record
            if current is None:
                current = record  # the leaf: the last entry with an id
                on_path.add(id(record))
                if visit(record):
                    return "stopped"
            want = current.parent_id
            while want and want in latest:
                nxt = latest[want]
                if id(nxt) in on_path:
                    return "root"  # a cycle: the walk stops before repeating an entry
                on_path.add(id(nxt))
                current = nxt
                if visit(current):
                    return "stopped"
                want = current.parent_id
            if not want:
                return "root"
        if reader.exhausted:
            if current is None:
                return "full" if any_entry else "empty"
            return "root"  # the parent is not in the file
        if reader.bytes_read > max_bytes:
            go_lean = getattr(visit, "go_lean", None)
            if current is None or go_lean is None or not go_lean():
                return "full"
            return _walk_lean(reader, set(latest), current.parent_id, visit)


class _StrictHead(msgspec.Struct, gc=False):
    type: str
    id: str | None = None
    parentId: str | None = None  # noqa: N815 - the on-disk key


_STRICT_DECODER: Final = msgspec.json.Decoder(_StrictHead)
_TYPE_OF: Final = operator.attrgetter("type")
_ID_OF: Final = operator.attrgetter("id")
_PARENT_OF: Final = operator.attrgetter("parentId")


def _chunk_heads(lines: list[bytes]) -> tuple[list[str], list[str | None], list[str | None], list[bytes]]:
    """Types, ids, parent ids and bytes of the entry lines of a batch (C-speed for well-formed lines,
    the loader's careful rules otherwise)."""
    lines = [line for line in lines if line]
    try:
        heads = list(map(_STRICT_DECODER.decode, lines))
        kinds: list[str] = list(map(_TYPE_OF, heads))
        if "session" not in kinds:
            return kinds, list(map(_ID_OF, heads)), list(map(_PARENT_OF, heads)), lines
    except (msgspec.DecodeError, RecursionError):
        pass
    records = [r for r in map(parse_entry_line, lines) if r is not None]
    return (
        [r.kind for r in records],
        [r.entry_id for r in records],
        [r.parent_id for r in records],
        [r.line for r in records],
    )


def _walk_lean(reader: TailReader, later_ids: set[str | None], want: str | None, visit: _Visit) -> str:
    """
    Continue a walk whose visitor only still needs ``thinking_level_change`` entries (only those are
    passed to it): batches are decoded at C speed and only the ids seen are kept (no line bytes), so
    memory follows the number of entries rather than the bytes. A parent that occurs again later in
    the file (a forward reference or a duplicated id) sends the file to the full loader.
    """
    while want:
        if want in later_ids:
            return "full"
        if reader.exhausted:
            return "root"  # the parent is not in the file
        kinds, ids, parents, data = _chunk_heads(reader.previous_lines())
        where = dict(zip(ids, range(len(ids)), strict=True))  # the last occurrence in the batch wins
        visited: set[int] = set()
        while want in where:
            if want in later_ids:
                return "full"
            at = where[want]
            if at in visited:
                return "root"  # a cycle: the walk stops before repeating an entry
            visited.add(at)
            if kinds[at] == "thinking_level_change" and visit(
                TailRecord("thinking_level_change", want, parents[at], data[at])
            ):
                return "stopped"
            want = parents[at]
            if not want:
                return "root"
        later_ids.update(ids)
    return "root"


def _first_kept_of(entry: TranscriptEntry) -> Any:
    if isinstance(entry, CompactionEntry):
        return entry.first_kept_entry_id
    if isinstance(entry, UnknownEntry):
        return entry.raw.get("firstKeptEntryId")
    return None


class _ContextWalk:
    """The stop rule of ``TranscriptIndex._context_path``: the last compaction on the path, its first
    kept entry, the last usable thinking level and the last usable model are known."""

    def __init__(self) -> None:
        self.path: list[TailRecord] = []
        self.compaction_seen = False
        self.kept_seen = False
        self.thinking_seen = False
        self.model_seen = False
        self.first_kept: Any = None
        self.lean = False

    def go_lean(self) -> bool:
        """Past the byte budget: continue without keeping lines when only the thinking level is
        still unknown (the entries still to be met cannot add messages, a compaction or a model)."""
        self.lean = self.compaction_seen and self.kept_seen and self.model_seen
        return self.lean

    def __call__(self, record: TailRecord) -> bool:
        kind = record.kind
        if self.lean and kind != "thinking_level_change":
            return False
        self.path.append(record)
        if not self.compaction_seen and kind == "compaction":
            self.compaction_seen = True
            self.first_kept = _first_kept_of(record.entry)
            self.kept_seen = not isinstance(self.first_kept, str)
        elif self.compaction_seen and not self.kept_seen and record.entry_id == self.first_kept:
            self.kept_seen = True
        if not self.thinking_seen and kind == "thinking_level_change":
            self.thinking_seen = entry_thinking_level(record.entry) is not None
        if not self.model_seen and kind in ("model_change", "message"):
            self.model_seen = entry_model(record.entry) is not None
        return self.compaction_seen and self.kept_seen and self.thinking_seen and self.model_seen


def read_tail_context(
    path: Path | str, *, max_tail_bytes: int = DEFAULT_MAX_TAIL_BYTES, chunk_bytes: int = 1 << 20
) -> SessionContext:
    """
    The context of the transcript's leaf (its last entry with an id), reading the file backwards only
    as far as the context depends on it.

    Equal to ``load_transcript(path).build_context()`` (= :func:`build_session_context` on the loaded
    entries, pi-format spec §9) for every file. The walk stops once it has met the last compaction on
    the leaf's path, that compaction's ``firstKeptEntryId``, the last ``thinking_level_change`` and the
    last model (``model_change`` or assistant message); so with a recent compaction and the settings
    recorded after it, the cost follows the live context, not the file size. When the path must be
    followed further than ``max_tail_bytes`` (default 8 MiB) and only the thinking level is still
    unknown (its only change is at the start of a huge file), the walk goes on at C speed keeping ids,
    not lines; in any other such case, and for a legacy v1/v2 file, the full loader decides.

    Args:
        path: The transcript file.
        max_tail_bytes: Bytes read backwards before handing over to the full loader.
        chunk_bytes: Size of the first backward read (later reads double, up to 1 MiB or this).

    Raises:
        TranscriptNotFoundError: The file does not exist.
        TranscriptFormatError: It is not a transcript (raised by the full loader, naming the line).
        OSError: It could not be read.
    """
    file = Path(path)
    walk = _ContextWalk()
    with open_transcript_file(file) as handle:
        outcome = _walk_tail(handle, max_bytes=max_tail_bytes, first_chunk=chunk_bytes, visit=walk)
    if outcome == "full":
        return load_transcript(file).build_context()
    if outcome == "empty":
        return EMPTY_CONTEXT
    records = walk.path[::-1]
    return build_context_lazily(
        kinds=[r.kind for r in records],
        ids=[r.entry_id for r in records],
        entry_at=lambda i: records[i].entry,
    )


def _message_of(entry: TranscriptEntry) -> AgentMessage | None:
    if isinstance(entry, MessageEntry):
        return entry.message
    if isinstance(entry, UnknownEntry):
        inner = entry.raw.get("message")
        return message_from_json(inner) if isinstance(inner, dict) else None
    return None


class _MessageWalk:
    def __init__(self, n: int) -> None:
        self.n = n
        self.messages: list[AgentMessage] = []

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
    chunk_bytes: int = 64 << 10,
) -> tuple[AgentMessage, ...]:
    """
    The last ``n`` messages of the transcript's current branch, oldest first, with a bounded tail read.

    "Messages" are the ``message`` entries (any role: user, assistant, toolResult, bashExecution,
    custom...) on the path from the leaf (the last entry with an id) towards the root, as recorded:
    compactions are not applied (this is the history, not the model context; use
    :func:`read_tail_context` for that) and abandoned branches are not included. Reads 64 KiB from the
    end first and doubles while more is needed; the same answer as the full loader always (it decides
    for legacy files or past ``max_tail_bytes``).

    Args:
        path: The transcript file.
        n: How many messages at most (``n <= 0`` gives ``()``).
        max_tail_bytes: Bytes read backwards before handing over to the full loader.
        chunk_bytes: Size of the first backward read (later reads double, up to 1 MiB or this).

    Raises:
        TranscriptNotFoundError: The file does not exist.
        TranscriptFormatError: It is not a transcript.
        OSError: It could not be read.
    """
    if n <= 0:
        return ()
    file = Path(path)
    walk = _MessageWalk(n)
    with open_transcript_file(file) as handle:
        outcome = _walk_tail(handle, max_bytes=max_tail_bytes, first_chunk=chunk_bytes, visit=walk)
    if outcome == "full":
        return last_messages_of_index(load_transcript(file), n)
    return tuple(reversed(walk.messages))


async def aread_tail_context(
    path: Path | str, *, max_tail_bytes: int = DEFAULT_MAX_TAIL_BYTES
) -> SessionContext:
    """:func:`read_tail_context` in a worker thread (asyncio and trio); same result and errors."""
    return await anyio.to_thread.run_sync(lambda: read_tail_context(path, max_tail_bytes=max_tail_bytes))


async def aread_last_messages(
    path: Path | str, n: int = 50, *, max_tail_bytes: int = DEFAULT_MAX_TAIL_BYTES
) -> tuple[AgentMessage, ...]:
    """:func:`read_last_messages` in a worker thread (asyncio and trio); same result and errors."""
    return await anyio.to_thread.run_sync(lambda: read_last_messages(path, n, max_tail_bytes=max_tail_bytes))
