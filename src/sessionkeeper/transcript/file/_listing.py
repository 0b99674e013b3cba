"""
Session listing over a directory of transcripts, reading headers and tails only (pi-format spec §1
"Listing" and §8 item 5; DESIGN "Targets": listing 1,000 transcripts reads headers and tails only).

pi's ``SessionManager.list`` reads and parses every file whole. Here each file costs its header line and
a tail window (32 KiB from the end, read further back only until a user or assistant message is found,
at most 1 MiB); the fields that depend on the whole file are exact when the window covers the file and
otherwise documented per field on :class:`TranscriptInfo`.
"""

from __future__ import annotations

import math
import mmap
import operator
import os
from pathlib import Path
from typing import IO, Any, Final

import anyio
import attrs
import msgspec

from sessionkeeper.records import key_to_json, parse_iso_ms
from sessionkeeper.transcript._index import decode_line, js_trim
from sessionkeeper.transcript._lines import TailRecord, chunk_heads, parse_entry_line
from sessionkeeper.transcript.file._tail_reader import TailReader, read_header


__all__ = ("TranscriptInfo", "alist_transcripts", "list_transcripts", "read_transcript_info")

_TAIL_BYTES: Final = 32 << 10
_MAX_TAIL_BYTES: Final = 1 << 20
_SESSION_INFO: Final = b'"session_info"'
_ABSENT: Final = msgspec.Raw(b"")


@attrs.frozen(kw_only=True)
class TranscriptInfo:
    """
    What a session list shows about one transcript (pi's ``SessionInfo``, spec §8 item 5).

    Attributes:
        path: The transcript file.
        id: The session id (header ``id``).
        cwd: The header ``cwd``, ``""`` when absent.
        created: The header ``timestamp`` as written (ISO-8601).
        modified_ms: Last activity, ms since the epoch: the newest ``timestamp`` of the user and
            assistant messages in the tail window (the entry's ISO timestamp when the message has none),
            read back until one is found; pi's maximum over the file whenever the window covers the
            file, and in practice otherwise (messages are appended in time order); when none is
            above 0, the header timestamp; else the file's mtime.
        name: The latest ``session_info`` name, trimmed, ``None`` when unset or cleared. Exact: when
            the tail has none, the rest of the file is searched backwards for ``"session_info"`` at
            C speed (memory-mapped) and each hit is parsed.
        message_count: Number of ``message`` entries in the file (all branches), or ``None`` when the
            tail window did not cover the whole file (counting would mean reading it all).
        parent_session: The header ``parentSession`` (path of the session this one was forked from).
        size: File size in bytes.
        damage: What other writers broke, as the loader's diagnostics name it (issue 15 item 10):
            ``"missing-parents"`` (an entry's ``parentId`` names no entry: it is a root) and
            ``"stale-leaf"`` (the last line is metadata off the branch of the newest message, so the
            context leaves the newer messages out). Checked over the tail window; a parent the window
            does not hold is looked up in the rest of the file (memory-mapped search), so missing
            parents are exact for the window's entries. ``()`` when nothing was found.
    """

    path: Path
    id: str
    cwd: str
    created: str
    modified_ms: float
    name: str | None
    message_count: int | None
    parent_session: str | None
    size: int
    damage: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """pi's field names: ``path, id, cwd, name, parentSessionPath, created, modified, messageCount``
        (``modified`` in ms since the epoch) plus ``size``; absent values are ``None``."""
        return {
            "path": str(self.path),
            "id": self.id,
            "cwd": self.cwd,
            "name": self.name,
            "parentSessionPath": self.parent_session,
            "created": self.created,
            "modified": self.modified_ms,
            "messageCount": self.message_count,
            "size": self.size,
            "damage": list(self.damage),
        }


class _MessageProbe(msgspec.Struct, gc=False):
    role: Any = None
    timestamp: Any = None
    content: msgspec.Raw = _ABSENT


class _EntryProbe(msgspec.Struct, gc=False):
    timestamp: Any = None
    message: _MessageProbe | None = None


_PROBE: Final = msgspec.json.Decoder(_EntryProbe)


def _activity_ms(line: bytes) -> float | None:
    """pi's ``getLastActivityTime`` contribution of one ``message`` entry line (user/assistant messages
    with content), decoding only ``role``, ``timestamp`` and whether ``content`` is there."""
    try:
        probe = _PROBE.decode(line)
    except (
        msgspec.DecodeError,
        RecursionError,
    ):  # incl. a message that is not an object: not counted (pi's check)
        record = parse_entry_line(line)  # invalid UTF-8 or lone surrogates read as U+FFFD, as pi
        if record is None or record.line is line:
            return None
        return _activity_ms(record.line)
    message = probe.message
    if message is None or message.content is _ABSENT or message.role not in ("user", "assistant"):
        return None
    stamp = message.timestamp
    if isinstance(stamp, int | float) and not isinstance(stamp, bool):
        # an integer beyond any double (pi: Infinity, an invalid date) is not counted
        return float(stamp) if isinstance(stamp, float) or abs(stamp) < 1 << 1023 else None
    if isinstance(probe.timestamp, str):
        value = float(parse_iso_ms(probe.timestamp))
        return None if math.isnan(value) else value
    return None


def _name_of(record: TailRecord) -> str | None:
    raw = decode_line(record.line)
    name = raw.get("name") if isinstance(raw, dict) else None
    return (js_trim(name) if isinstance(name, str) else "") or None


class _Kind(msgspec.Struct, gc=False):
    type: Any = None


_KIND: Final = msgspec.json.Decoder(_Kind)
_TYPE_OF: Final = operator.attrgetter("type")


@attrs.frozen
class _Batch:
    activity: float | None = None
    name_found: bool = False
    name: str | None = None


def _records(lines: list[bytes]) -> tuple[list[Any], list[bytes]]:
    """Each line's ``type`` (C-speed for well-formed lines; the loader's careful rules otherwise)
    and the bytes to decode it from."""
    try:
        return list(map(_TYPE_OF, map(_KIND.decode, lines))), lines
    except (msgspec.DecodeError, RecursionError):
        pass
    kinds: list[Any] = []
    kept: list[bytes] = []
    for line in lines:
        record = parse_entry_line(line)
        if record is not None:
            kinds.append(record.kind)
            kept.append(record.line)
    return kinds, kept


def _scan_batch(lines: list[bytes]) -> _Batch:
    """Newest activity (the maximum over the batch's user/assistant messages, as pi) and latest name
    in a batch of lines (file order)."""
    if lines and not lines[-1]:
        lines.pop()  # the empty piece after the final newline
    activity: float | None = None
    for line in lines:  # pi's maximum, not the last: a reply may carry timestamp 0 (our default)
        kind, data = _kind_of(line)
        if kind == "message" and (stamp := _activity_ms(data)) is not None:
            activity = stamp if activity is None else max(activity, stamp)
    for line in reversed(lines):
        if _SESSION_INFO in line:
            record = parse_entry_line(line)
            if record is not None and record.kind == "session_info":
                return _Batch(activity=activity, name_found=True, name=_name_of(record))
    return _Batch(activity=activity)


def _kind_of(line: bytes) -> tuple[Any, bytes]:
    try:
        return _KIND.decode(line).type, line
    except (msgspec.DecodeError, RecursionError):
        record = parse_entry_line(line)
        return (None, line) if record is None else (record.kind, record.line)


_MMAP_FROM: Final = 1 << 20


def _search_name(handle: IO[bytes], start: int, end: int) -> tuple[bool, str | None]:
    """The latest ``session_info`` in ``[start, end)`` (a line-aligned region): ``(found, name)``.
    Regions over 1 MiB are memory-mapped rather than read."""
    if end <= start:
        return False, None
    if end - start <= _MMAP_FROM:
        handle.seek(start)
        return _search_in(handle.read(end - start), 0, end - start)
    with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
        return _search_in(view, start, end)


def _search_in(view: bytes | mmap.mmap, start: int, end: int) -> tuple[bool, str | None]:
    stop = end
    while (hit := view.rfind(_SESSION_INFO, start, stop)) >= 0:
        line_start = view.rfind(b"\n", start, hit) + 1 or start
        line_end = view.find(b"\n", hit, end)
        record = parse_entry_line(view[line_start : line_end if line_end >= 0 else end])
        if record is not None and record.kind == "session_info":
            return True, _name_of(record)
        stop = line_start
    return False, None


def read_transcript_info(path: Path | str) -> TranscriptInfo | None:
    """
    The :class:`TranscriptInfo` of one file, reading its header and tail only; ``None`` when it is
    not a transcript (the first parseable line is not a session header with a string id, as the
    loader requires; pi lists id-less headers too) or cannot be read.
    """
    file = Path(path)
    try:
        with file.open("rb") as handle:
            return _info(file, handle)
    except OSError:
        return None


def _info(file: Path, handle: IO[bytes]) -> TranscriptInfo | None:
    st = os.fstat(handle.fileno())
    found = read_header(handle, st.st_size)
    if found is None:
        return None
    raw = found.raw
    reader = TailReader(handle, start=found.entries_offset, end=st.st_size, first_chunk=_TAIL_BYTES)
    name: str | None = None
    name_found = False
    activity: float | None = None
    batches: list[list[bytes]] = []
    while True:
        lines = reader.previous_lines()
        batches.append(lines)
        batch = _scan_batch(lines)
        if activity is None:
            activity = batch.activity
        if not name_found and batch.name_found:
            name_found, name = True, batch.name
        if reader.exhausted or activity is not None or reader.bytes_read >= _MAX_TAIL_BYTES:
            break
    messages: int | None = None
    if reader.exhausted:  # the whole file was read: count its message entries
        messages = sum(_records([line for line in lines if line])[0].count("message") for lines in batches)
    if not name_found and not reader.exhausted:
        name_found, name = _search_name(handle, found.entries_offset, reader.unread_end)
    if activity is not None and activity > 0:
        modified = activity
    else:
        created_ms = float(parse_iso_ms(found.header.timestamp))
        modified = created_ms if not math.isnan(created_ms) else st.st_mtime_ns / 1e6
    window = [line for lines in reversed(batches) for line in lines if line]
    damage = _damage(window, handle, found.entries_offset, None if reader.exhausted else reader.unread_end)
    cwd = raw.get("cwd")
    parent = raw.get("parentSession")
    return TranscriptInfo(
        path=file,
        id=found.header.id,
        cwd=cwd if isinstance(cwd, str) else "",
        created=found.header.timestamp,
        modified_ms=modified,
        name=name,
        message_count=messages,
        parent_session=parent if isinstance(parent, str) else None,
        size=st.st_size,
        damage=damage,
    )


_CONTEXT_KINDS: Final = frozenset({"message", "custom_message", "branch_summary", "compaction"})


def _damage(window: list[bytes], handle: IO[bytes], start: int, unread_end: int | None) -> tuple[str, ...]:
    """The loader's ``missing_parents`` and ``stale_leaf`` findings over the tail window (``window``: its
    lines in file order); ``unread_end``: end of the part before the window, ``None`` when the window is
    the whole file."""
    kinds, ids, parents, _ = chunk_heads(window)
    by_id = {entry_id: pos for pos, entry_id in enumerate(ids) if entry_id is not None}
    found: list[str] = []
    unresolved = {p for p in parents if p and p not in by_id}
    if unresolved and (
        unread_end is None or any(not _id_before(handle, start, unread_end, p) for p in unresolved)
    ):
        found.append("missing-parents")
    leaf = next((pos for pos in range(len(ids) - 1, -1, -1) if ids[pos] is not None), -1)
    if leaf >= 0 and kinds[leaf] not in _CONTEXT_KINDS:
        newest = next(
            (p for p in range(leaf - 1, -1, -1) if ids[p] is not None and kinds[p] in _CONTEXT_KINDS), -1
        )
        if newest >= 0 and by_id.get(ids[newest] or "") == newest:
            pos, seen = leaf, {leaf}
            while (
                True
            ):  # parents precede children: leaving the window or passing `newest` means off its branch
                parent = parents[pos]
                at = by_id.get(parent) if parent else None
                if at is None or at < newest or at in seen:
                    found.append("stale-leaf")
                    break
                if at == newest:
                    break
                seen.add(at)
                pos = at
    return tuple(found)


def _id_before(handle: IO[bytes], start: int, end: int, entry_id: str) -> bool:
    """Whether an entry with ``entry_id`` is in ``[start, end)`` (line-aligned), searching backwards for its
    JSON string and parsing each line that holds it."""
    needle = msgspec.json.encode(key_to_json(entry_id))
    if end - start <= _MMAP_FROM:
        handle.seek(start)
        return _id_in(handle.read(end - start), 0, end - start, needle, entry_id)
    with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
        return _id_in(view, start, end, needle, entry_id)


def _id_in(view: bytes | mmap.mmap, start: int, end: int, needle: bytes, entry_id: str) -> bool:
    stop = end
    while (hit := view.rfind(needle, start, stop)) >= 0:
        line_start = view.rfind(b"\n", start, hit) + 1 or start
        line_end = view.find(b"\n", hit, end)
        record = parse_entry_line(view[line_start : line_end if line_end >= 0 else end])
        if record is not None and record.entry_id == entry_id:
            return True
        stop = line_start
    return False


def list_transcripts(directory: Path | str) -> list[TranscriptInfo]:
    """
    Every transcript (``*.jsonl``, not recursive) in ``directory``, newest activity first (pi's
    ``SessionManager.list`` order: ``modified`` descending; ties by file name).

    Reads each file's header and tail only (see :class:`TranscriptInfo` for what that means per field).
    Files that are not transcripts or cannot be read are left out; a missing directory gives ``[]``
    (as pi). Synchronous; async callers use :func:`alist_transcripts`.
    """
    folder = Path(directory)
    try:
        names = sorted(entry.name for entry in os.scandir(folder) if entry.name.endswith(".jsonl"))
    except (FileNotFoundError, NotADirectoryError):
        return []
    infos = [info for name in names if (info := read_transcript_info(folder / name)) is not None]
    infos.sort(key=lambda info: -info.modified_ms)
    return infos


async def alist_transcripts(directory: Path | str) -> list[TranscriptInfo]:
    """:func:`list_transcripts` in a worker thread (asyncio and trio)."""
    return await anyio.to_thread.run_sync(list_transcripts, directory)
