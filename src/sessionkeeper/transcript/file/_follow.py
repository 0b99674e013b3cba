"""
Following the other writers of one transcript (issue #7: several writers on one session).

A :class:`TranscriptManager` knows how much of its file it has indexed: a :class:`FileMark` (device,
inode, the byte offset ``end`` of the last complete line it indexed, and the few bytes just before
``end``). Before each append, under the write lock, :func:`append_following` looks at the file with
the ``fstat`` the append needs anyway:

- same size as ``end``: nobody else wrote; the lines are appended as they are (no extra syscall);
- larger: the complete lines other writers appended since ``end`` (up to the last ``\\n``; a line
  still being written is not read) are read in one ``pread``, together with the bytes before ``end``
  (they must be unchanged), and returned as :class:`ForeignLines` for the manager to index with the
  loader's careful line rules (:func:`apply_foreign`). When the manager's leaf was the last entry
  it knew (it was at the tip), the pending entries are re-linked under the new last entry
  (:meth:`PendingWrite.rebase`, re-encoded inside the locked write); entry ids that other writers
  took meanwhile are redrawn;
- smaller, another inode, or other bytes before ``end``: :class:`TranscriptChangedError`, nothing
  written (the file was truncated, rewritten or replaced; the caller reopens it).

:func:`read_foreign_lines` does the same pick-up without writing (``TranscriptManager.refresh``).
Everything here is synchronous and touches no manager state: the manager applies the results on its
own thread after the write, so readers never see a half-updated index.
"""

from __future__ import annotations

import os
from collections.abc import Container, Sequence
from pathlib import Path
from typing import Final, NamedTuple

import attrs
import msgspec
from msgspec import UNSET, UnsetType

from sessionkeeper.exceptions import StaleTranscriptError, TranscriptChangedError
from sessionkeeper.records import (
    CURRENT_SESSION_VERSION,
    CompactionEntry,
    TranscriptEntry,
    UnknownEntry,
    encode_entry,
)
from sessionkeeper.transcript._index import TranscriptIndex, new_entry_id
from sessionkeeper.transcript._load import _Scan
from sessionkeeper.transcript.file._index_cache import _append_lines
from sessionkeeper.transcript.file._io import last_line_start, open_transcript_fd, pread_all, write_all
from sessionkeeper.transcript.file._tail import parse_entry_line


__all__ = (
    "FileMark",
    "ForeignLines",
    "PendingWrite",
    "append_following",
    "apply_foreign",
    "mark_after_load",
    "mark_of_file",
    "read_foreign_lines",
    "rebase_entries",
)

CHECK_BYTES: Final = 32
"""Bytes before the known end compared on every pick-up (a rewrite rarely keeps them)."""

_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
_CHUNK: Final = 1 << 20


class FileMark(NamedTuple):
    """
    What a manager has seen of its transcript file (a named tuple: one is made per append).

    Attributes:
        dev: ``st_dev`` of the file.
        ino: ``st_ino`` of the file (another inode = the file was replaced).
        end: Byte offset just after the last complete line indexed (a line boundary).
        tail: The last bytes (up to :data:`CHECK_BYTES`) before ``end``, as written.
        lines: Number of lines before ``end`` (header and blank lines included): the line number
            base for diagnostics of lines read later.
    """

    dev: int
    ino: int
    end: int
    tail: bytes
    lines: int


@attrs.frozen(kw_only=True)
class ForeignLines:
    """
    Complete lines other writers appended after a :class:`FileMark`'s end.

    Attributes:
        offset: Byte offset of ``data`` in the file (the old mark's end).
        data: The lines, each ending with ``\\n`` (raw file bytes).
        first_line: Number of file lines before ``data`` (its first line is ``first_line + 1``).
        last_id: The id of the last entry among them (``None`` when none has an id): the new tip.
        ids: Every entry id among them.
    """

    offset: int
    data: bytes
    first_line: int
    last_id: str | None
    ids: frozenset[str]


def _end_of_lines(fd: int, count: int) -> tuple[int, int]:
    """Offset just after the ``count``-th ``\\n`` (or the last one, with how many were found)."""
    offset = found = 0
    end = 0
    while found < count:
        chunk = os.pread(fd, _CHUNK, offset)
        if not chunk:
            break
        pos = 0
        while found < count:
            nl = chunk.find(b"\n", pos)
            if nl < 0:
                break
            found += 1
            pos = nl + 1
            end = offset + pos
        offset += len(chunk)
    return end, found


def _mark(fd: int, st: os.stat_result, end: int, lines: int) -> FileMark:
    width = min(end, CHECK_BYTES)
    return FileMark(
        dev=st.st_dev, ino=st.st_ino, end=end, tail=pread_all(fd, width, end - width), lines=lines
    )


def mark_of_file(path: Path, *, lines: int) -> FileMark:
    """
    The mark of a file this manager has just written whole (created, or rewritten by a migration):
    ``end`` = its size (the start of its last line if that line has no ``\\n``).

    Args:
        path: The transcript.
        lines: Its number of lines (header included).

    Raises:
        TranscriptNotFoundError: The file does not exist.
    """
    fd = open_transcript_fd(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        end = st.st_size
        if end and pread_all(fd, 1, end - 1) != b"\n":
            end = last_line_start(fd, end)
        return _mark(fd, st, end, lines)
    finally:
        os.close(fd)


def mark_after_load(path: Path, index: TranscriptIndex) -> FileMark | None:
    """
    The mark of a file just loaded into ``index`` (:func:`load_transcript`): the end of the last
    complete line the loader read.

    When the file is unchanged since the loader's ``fstat`` (:attr:`TranscriptIndex.source_stat`),
    that is its size, minus a last line without ``\\n`` (torn, or still being written). When it grew
    while loading, the loader read more than that size: the end is found by counting the loader's
    complete lines (one pass over the file, only in that case). A last line indexed without its
    ``\\n`` is read again once complete and then recognised (:func:`apply_foreign`).

    Returns:
        The mark; ``None`` for an index without a source file, or migrated in memory (its first write
        replaces the file, see ``TranscriptManager``), or when the file vanished since.
    """
    source = index.source_stat
    scan = index._scan
    if source is None or scan is None or index.migrated:
        return None
    dev, ino, size, mtime_ns = source
    try:
        fd = os.open(path, os.O_RDONLY | _CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        incomplete = scan.torn is not None or scan.missing_newline
        complete = scan.line_count - (1 if incomplete else 0)
        if (st.st_dev, st.st_ino) != (dev, ino):
            return FileMark(
                dev=dev, ino=ino, end=size, tail=b"", lines=complete
            )  # replaced: next write fails
        if (st.st_size, st.st_mtime_ns) == (size, mtime_ns):
            end = last_line_start(fd, size) if incomplete else size
        else:
            end, found = _end_of_lines(fd, complete)
            complete = found
        return _mark(fd, st, end, complete)
    finally:
        os.close(fd)


def _check_identity(path: Path, mark: FileMark, st: os.stat_result) -> None:
    if (st.st_dev, st.st_ino) != (mark.dev, mark.ino):
        raise TranscriptChangedError(
            "the file was replaced since this manager read it (another inode: rewritten, migrated or "
            "rotated by another writer); nothing was written (reopen it)",
            path=path,
        )
    if st.st_size < mark.end:
        raise TranscriptChangedError(
            f"the file shrank since this manager read it ({st.st_size} < {mark.end} bytes: truncated "
            "or rewritten by another writer); nothing was written (reopen it)",
            path=path,
        )


def _pick_up(fd: int, path: Path, mark: FileMark, size: int) -> tuple[ForeignLines | None, FileMark]:
    """The complete lines between ``mark.end`` and ``size`` (see the module docstring)."""
    width = len(mark.tail)
    start = mark.end - width
    data = pread_all(fd, size - start, start)
    if data[:width] != mark.tail:
        raise TranscriptChangedError(
            "the bytes before the end this manager read changed (the file was rewritten by another "
            "writer); nothing was written (reopen it)",
            path=path,
        )
    last_newline = data.rfind(b"\n")
    if last_newline < width:
        return None, mark  # only a line still being written (or torn): read once complete
    body = data[width : last_newline + 1]
    ids: set[str] = set()
    last_id: str | None = None
    lines = body.split(b"\n")
    lines.pop()
    for line in lines:
        record = parse_entry_line(line)
        if record is not None and record.entry_id is not None:
            ids.add(record.entry_id)
            last_id = record.entry_id
    foreign = ForeignLines(
        offset=mark.end, data=body, first_line=mark.lines, last_id=last_id, ids=frozenset(ids)
    )
    new_mark = FileMark(
        dev=mark.dev,
        ino=mark.ino,
        end=mark.end + len(body),
        tail=data[: last_newline + 1][-CHECK_BYTES:],
        lines=mark.lines + len(lines),
    )
    return foreign, new_mark


def read_foreign_lines(path: Path, mark: FileMark) -> tuple[ForeignLines | None, FileMark]:
    """
    The complete lines other writers appended after ``mark`` (no lock taken, nothing written).

    Returns:
        ``(lines or None, the new mark)``; ``None`` when nothing complete was appended.

    Raises:
        TranscriptNotFoundError: The file does not exist any more.
        TranscriptChangedError: It shrank, was replaced, or its bytes before ``mark.end`` changed.
    """
    fd = open_transcript_fd(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        _check_identity(path, mark, st)
        if st.st_size == mark.end:
            return None, mark
        return _pick_up(fd, path, mark, st.st_size)
    finally:
        os.close(fd)


def _relinked(
    entry: TranscriptEntry, *, entry_id: str, parent_id: str | None, old_id: str
) -> TranscriptEntry:
    if isinstance(entry, UnknownEntry):
        raw = dict(entry.raw)
        raw["id"], raw["parentId"] = entry_id, parent_id
        return UnknownEntry(raw)
    changed = msgspec.structs.replace(entry, id=entry_id, parent_id=parent_id)
    if isinstance(changed, CompactionEntry) and changed.first_kept_entry_id == old_id:
        changed = msgspec.structs.replace(changed, first_kept_entry_id=entry_id)  # a strict checkpoint
    return changed


def rebase_entries(
    entries: Sequence[TranscriptEntry],
    lines: Sequence[bytes],
    *,
    parent: str | UnsetType | None,
    taken: Container[str],
    known: Container[str] = (),
) -> tuple[list[TranscriptEntry], list[bytes]]:
    """
    Re-link a chain of pending entries (each a child of the one before) after other writers appended.

    Args:
        entries: The pending entries, in write order.
        lines: Their encoded lines.
        parent: New parent of the first entry (``UNSET``: keep it).
        taken: Ids the other writers used; a pending entry with one of them gets a fresh id (and the
            entry after it, a strict checkpoint's ``firstKeptEntryId``, follow).
        known: Ids already in the index (never drawn again).

    Returns:
        ``(entries, lines)``: unchanged entries keep their line byte for byte; changed ones are
        re-encoded.
    """
    out_entries: list[TranscriptEntry] = []
    out_lines: list[bytes] = []
    renamed: dict[str, str] = {}
    own = {entry.id for entry in entries}
    for position, (entry, line) in enumerate(zip(entries, lines, strict=True)):
        entry_id = entry.id
        if entry_id in taken:
            avoid = own | set(renamed.values())
            drawn = new_entry_id(avoid)
            while drawn in taken or drawn in known:
                drawn = new_entry_id(avoid)
            renamed[entry_id] = drawn
            entry_id = drawn
        parent_id = entry.parent_id
        if position == 0 and not isinstance(parent, UnsetType):
            parent_id = parent
        elif parent_id is not None and parent_id in renamed:
            parent_id = renamed[parent_id]
        if entry_id == entry.id and parent_id == entry.parent_id:
            out_entries.append(entry)
            out_lines.append(line)
            continue
        changed = _relinked(entry, entry_id=entry_id, parent_id=parent_id, old_id=entry.id)
        out_entries.append(changed)
        out_lines.append(encode_entry(changed))
    return out_entries, out_lines


class PendingWrite:
    """
    One append in flight: its entries and lines, re-linked under the lock when other writers
    appended first, and what the write found.

    Attributes:
        entries: The entries to write (re-linked by :meth:`rebase`).
        lines: Their lines (no newline).
        follow: The manager was at the tip: the first entry moves under the new last entry.
        known: Ids already indexed (fresh ids avoid them).
        exact: Write only right after what the writer saw: other writers' lines refuse the write
            (:class:`~sessionkeeper.exceptions.StaleTranscriptError`, nothing written) instead of
            re-linking it (a compaction landing on a storage, ``compaction._landing``).
        foreign: The other writers' lines picked up before writing, or ``None``.
        mark: The mark after the write (``None`` until written).
    """

    __slots__ = ("entries", "exact", "follow", "foreign", "known", "lines", "mark")

    def __init__(
        self,
        entries: Sequence[TranscriptEntry],
        lines: Sequence[bytes],
        *,
        follow: bool,
        known: Container[str] = (),
        exact: bool = False,
    ) -> None:
        self.entries: list[TranscriptEntry] = list(entries)
        self.lines: list[bytes] = list(lines)
        self.follow: bool = follow
        self.known: Container[str] = known
        self.exact: bool = exact
        self.foreign: ForeignLines | None = None
        self.mark: FileMark | None = None

    def __len__(self) -> int:
        """How many lines the write appends."""
        return len(self.lines)

    def rebase(self, foreign: ForeignLines) -> None:
        """Re-link the entries after ``foreign`` (new parent when following; colliding ids redrawn)."""
        parent: str | UnsetType | None = UNSET
        if self.follow and foreign.last_id is not None:
            parent = foreign.last_id
        self.entries, self.lines = rebase_entries(
            self.entries, self.lines, parent=parent, taken=foreign.ids, known=self.known
        )


def append_following(path: Path, pending: PendingWrite, *, mark: FileMark | None, fsync: bool) -> bool:
    """
    Append ``pending``'s lines in one write after picking up other writers' lines (module docstring).

    The fast path of an append, to be called under the transcript's write lock: ``open``, ``fstat``,
    a 1-byte ``pread`` of the last byte, one ``write`` (``O_APPEND``), optional ``fsync``, ``close``;
    when the file grew past ``mark.end``, one more ``pread`` reads the new lines. A file whose last
    byte is not ``\\n`` (a torn or unterminated last line) is left untouched: the caller repairs its
    tail, then calls again.

    Args:
        path: The transcript.
        pending: The write; on success its ``foreign`` and ``mark`` are set (and its entries
            re-linked when others wrote).
        mark: What the manager has seen of the file; ``None`` = take the file as it is now.
        fsync: fsync the file after writing.

    Returns:
        ``True`` when written; ``False`` when the tail needs a repair (nothing written).

    Raises:
        TranscriptNotFoundError: The file vanished (archived or removed).
        TranscriptChangedError: It shrank, was replaced, or its bytes before ``mark.end`` changed.
        OSError: The write failed.
    """
    fd = open_transcript_fd(path, os.O_RDWR | os.O_APPEND)
    try:
        st = os.fstat(fd)
        size = st.st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            if mark is not None:
                _check_identity(path, mark, st)
            return False
        if mark is None:
            mark = _mark(fd, st, size, 0)  # line numbers of later foreign lines: diagnostics only
        if st.st_ino != mark.ino or st.st_dev != mark.dev or size < mark.end:
            _check_identity(path, mark, st)  # raises
        foreign = None
        if size != mark.end:
            foreign, mark = _pick_up(fd, path, mark, size)
            if foreign is not None:
                if pending.exact:
                    raise StaleTranscriptError(
                        "other writers appended since this write was built; nothing was written", path=path
                    )
                pending.rebase(foreign)
        payload = b"\n".join(pending.lines) + b"\n"
        written = os.write(fd, payload)
        if written != len(payload):
            write_all(fd, payload[written:])
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    pending.foreign = foreign
    tail = payload[-CHECK_BYTES:] if len(payload) >= CHECK_BYTES else (mark.tail + payload)[-CHECK_BYTES:]
    pending.mark = FileMark(mark.dev, mark.ino, size + len(payload), tail, mark.lines + len(pending.lines))
    return True


def apply_foreign(index: TranscriptIndex, foreign: ForeignLines) -> int:
    """
    Index other writers' lines with the loader's careful line rules (invalid lines skipped and
    recorded, repeated headers ignored, labels and names replayed; pi-format spec §2).

    A first line identical to the index's last line is that line read again (it had no ``\\n`` when
    it was loaded) and is not added twice. Call it from the thread that owns ``index``.

    Returns:
        How many entries were added.
    """
    data, offset = foreign.data, foreign.offset
    first_line = foreign.first_line
    if index.lines:
        newline = data.find(b"\n")
        if data[:newline] == index.lines[-1]:
            data, offset, first_line = data[newline + 1 :], offset + newline + 1, first_line + 1
    if not data:
        return 0
    scan = index._scan
    if scan is None:  # a transcript this process created: nothing was loaded
        scan = _Scan()
        scan.version = CURRENT_SESSION_VERSION
        scan.header_line = 1
        scan.order = [None, *range(len(index))]
        scan.appended_from = len(index)
        index._scan = scan
    before = len(index)
    scan.line_count = first_line
    _append_lines(index, data, base_offset=offset)
    return len(index) - before
