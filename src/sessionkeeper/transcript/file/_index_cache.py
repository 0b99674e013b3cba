"""
A shared, bounded cache of loaded transcript indexes for readers in one process (DESIGN "Targets":
history readers share one index per transcript instead of re-reading the file).

An index is cached under its absolute path together with the file's identity and state
``(device, inode, size, mtime_ns)``. A reader gets the cached index while that state is unchanged. When
the same file only grew (appends: same inode, larger size, and the last bytes before the old end are
unchanged), the cached index is extended with the appended lines only, parsed with the loader's careful
rules (pi-format spec §2); anything else (rewrite, truncation, replacement, a legacy file migrated in
memory, an old end without newline) reloads the file.

Published indexes are snapshots and are never mutated by the cache: an extension copies the id index
and the entry lists (C-speed copies) before adding to them, so concurrent readers keep a consistent
view. Callers must treat them as read-only (never call :meth:`TranscriptIndex.add` on them; writers own
their index through :class:`TranscriptManager`).
"""

from __future__ import annotations

import copy
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Final

import anyio
import attrs

from sessionkeeper.exceptions import TranscriptNotFoundError
from sessionkeeper.records import decode_json_line
from sessionkeeper.transcript._diagnostics import TornTail
from sessionkeeper.transcript._index import TranscriptIndex
from sessionkeeper.transcript._load import _Scan, load_transcript
from sessionkeeper.transcript.file._tail import parse_entry_line


__all__ = ("IndexCacheStats", "TranscriptIndexCache", "shared_index_cache")

_CHECK_BYTES: Final = 4096


@attrs.frozen(kw_only=True)
class IndexCacheStats:
    """
    Counters of a :class:`TranscriptIndexCache` since it was created.

    Attributes:
        hits: Reads served from the cache unchanged.
        extensions: Reads served by extending a cached index with appended lines.
        loads: Full loads (first read, eviction, or a change that was not a pure append).
        evictions: Indexes dropped because the cache was full.
    """

    hits: int = 0
    extensions: int = 0
    loads: int = 0
    evictions: int = 0


@attrs.frozen
class _Slot:
    index: TranscriptIndex
    dev: int
    ino: int
    size: int
    mtime_ns: int
    end_bytes: bytes  # the last bytes before ``size`` (to check that an append left them alone)


def _same(slot: _Slot, st: os.stat_result) -> bool:
    return (slot.dev, slot.ino, slot.size, slot.mtime_ns) == (
        st.st_dev,
        st.st_ino,
        st.st_size,
        st.st_mtime_ns,
    )


def _key(path: Path | str) -> Path:
    return Path(os.path.abspath(path))  # noqa: PTH100 - normalise without resolving links


def _read_at(path: Path, offset: int, length: int) -> bytes:
    with path.open("rb") as handle:
        handle.seek(offset)
        return handle.read(length)


class TranscriptIndexCache:
    """
    A thread-safe LRU cache of :class:`TranscriptIndex` keyed by absolute path and file state.

    Args:
        max_entries: How many transcripts stay cached (least recently used evicted first). Default 32.

    Concurrent :meth:`get` calls for one path load it once (a per-path lock); different paths load in
    parallel. Async callers use :meth:`aget` (runs in a worker thread).
    """

    def __init__(self, *, max_entries: int = 32) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self._slots: OrderedDict[Path, _Slot] = OrderedDict()
        self._lock = threading.Lock()
        self._path_locks: dict[Path, threading.Lock] = {}
        self._hits = self._extensions = self._loads = self._evictions = 0

    @property
    def stats(self) -> IndexCacheStats:
        """The counters so far (:class:`IndexCacheStats`)."""
        with self._lock:
            return IndexCacheStats(
                hits=self._hits, extensions=self._extensions, loads=self._loads, evictions=self._evictions
            )

    def __len__(self) -> int:
        with self._lock:
            return len(self._slots)

    def clear(self) -> None:
        """Drop every cached index."""
        with self._lock:
            self._slots.clear()
            self._path_locks.clear()

    def invalidate(self, path: Path | str) -> None:
        """Drop the cached index of ``path`` (if any)."""
        with self._lock:
            self._slots.pop(_key(path), None)

    async def aget(self, path: Path | str) -> TranscriptIndex:
        """:meth:`get` in a worker thread (asyncio and trio)."""
        return await anyio.to_thread.run_sync(self.get, path)

    def get(self, path: Path | str) -> TranscriptIndex:
        """
        The index of the transcript at ``path`` as the file is now: cached, extended with what was
        appended since, or loaded (:func:`load_transcript`).

        Raises:
            TranscriptNotFoundError: The file does not exist (its cached index is dropped).
            TranscriptFormatError: It is not a transcript.
            OSError: It could not be read.
        """
        key = _key(path)
        with self._lock:
            path_lock = self._path_locks.setdefault(key, threading.Lock())
        with path_lock:
            try:
                st = key.stat()
            except FileNotFoundError as err:
                self.invalidate(key)
                raise TranscriptNotFoundError(f"transcript not found: {key}") from err
            with self._lock:
                slot = self._slots.get(key)
                if slot is not None:
                    self._slots.move_to_end(key)
                    if _same(slot, st):
                        self._hits += 1
                        return slot.index
            if slot is not None:
                extended = self._extend(key, slot, st)
                if extended is not None:
                    self._store(key, extended, extension=True)
                    return extended.index
            index = load_transcript(key)
            index.labels  # noqa: B018 - replay labels and name now: readers never mutate a published index
            after = key.stat()
            if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != (
                after.st_dev,
                after.st_ino,
                after.st_size,
                after.st_mtime_ns,
            ):
                with self._lock:
                    self._loads += 1
                return index  # changed while loading: a valid snapshot, not cached
            end = _read_at(key, max(0, st.st_size - _CHECK_BYTES), min(st.st_size, _CHECK_BYTES))
            self._store(
                key, _Slot(index, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, end), extension=False
            )
            return index

    def _store(self, key: Path, slot: _Slot, *, extension: bool) -> None:
        with self._lock:
            if extension:
                self._extensions += 1
            else:
                self._loads += 1
            self._slots[key] = slot
            self._slots.move_to_end(key)
            while len(self._slots) > self.max_entries:
                evicted, _ = self._slots.popitem(last=False)
                self._path_locks.pop(evicted, None)
                self._evictions += 1

    def _extend(self, key: Path, slot: _Slot, st: os.stat_result) -> _Slot | None:
        old = slot.index
        scan = old._scan
        if (
            (st.st_dev, st.st_ino) != (slot.dev, slot.ino)
            or st.st_size <= slot.size
            or scan is None
            or old.migrated
            or scan.torn is not None
            or scan.missing_newline
        ):
            return None
        check_from = slot.size - len(slot.end_bytes)
        data = _read_at(key, check_from, st.st_size - check_from)
        if len(data) != st.st_size - check_from or not data.startswith(slot.end_bytes):
            return None
        appended = data[len(slot.end_bytes) :]
        index = _copy_index(old)
        _append_lines(index, appended, base_offset=slot.size)
        index.source_stat = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        end = data[-_CHECK_BYTES:]
        return _Slot(index, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, end)


def _copy_index(old: TranscriptIndex) -> TranscriptIndex:
    new = TranscriptIndex(path=old.path, header=old.header, header_raw=old.header_raw)
    new.lines = list(old.lines)
    new.kinds = list(old.kinds)
    new.ids = list(old.ids)
    new.parents = list(old.parents)
    new.line_numbers = old.line_numbers if isinstance(old.line_numbers, range) else list(old.line_numbers)
    new.by_id = dict(old.by_id)
    new.leaf_id = old.leaf_id
    new._cache = dict(old._cache)
    new._labels = dict(old._labels)
    new._label_timestamps = dict(old._label_timestamps)
    new._session_name = old._session_name
    new._replayed = old._replayed
    scan = copy.copy(old._scan)
    assert scan is not None
    for name in ("invalid", "non_object", "bad_utf8", "lone", "repeated", "without_id", "order"):
        setattr(scan, name, list(getattr(scan, name)))
    new._scan = scan
    return new


def _append_lines(index: TranscriptIndex, data: bytes, *, base_offset: int) -> None:
    """Index the lines of ``data`` (appended at ``base_offset``) as the loader's careful scan does."""
    scan = index._scan
    assert scan is not None
    length = len(data)
    pos = 0
    line_no = scan.line_count
    while pos < length:
        end = data.find(b"\n", pos)
        complete = end >= 0
        if not complete:
            end = length
        line_no += 1
        start, pos = pos, end + 1
        line = data[start:end]
        if not line.strip():
            continue  # blank (whitespace only): skipped silently
        record = parse_entry_line(line)
        if record is None:
            _record_skipped(
                scan, line, line_no, complete=complete, offset=base_offset + start, length=end - start
            )
            continue
        if not complete:
            scan.missing_newline = True
        if line is not record.line:  # repaired: bad UTF-8 or lone surrogates
            _, bad_utf8, lone = decode_json_line(line)
            if bad_utf8:
                scan.bad_utf8.append(line_no)
            if lone:
                scan.lone.append(line_no)
        if record.entry_id is None and scan.version >= 2:
            scan.without_id.append(line_no)
        entry_pos = index._push(record.kind, record.entry_id, record.parent_id, line_no)
        scan.order.append(entry_pos)
        index.lines.append(record.line)
        if index._replayed and record.kind in ("label", "session_info"):
            index._apply_label_or_name(index.entry_at(entry_pos))
    scan.line_count = line_no


def _record_skipped(
    scan: _Scan, line: bytes, line_no: int, *, complete: bool, offset: int, length: int
) -> None:
    """Record why a line was skipped, as the careful scan does (invalid, torn, non-object, header)."""
    try:
        value, bad_utf8, lone = decode_json_line(line)
    except ValueError:
        if complete:
            scan.invalid.append(line_no)
        else:
            scan.torn = TornTail(line=line_no, offset=offset, length=length)
        return
    if not isinstance(value, dict):
        scan.non_object.append(line_no)
        return
    if bad_utf8:
        scan.bad_utf8.append(line_no)
    if lone:
        scan.lone.append(line_no)
    scan.order.append(None)
    scan.repeated.append(line_no)
    if not complete:
        scan.missing_newline = True


_SHARED: TranscriptIndexCache | None = None
_SHARED_LOCK: Final = threading.Lock()


def shared_index_cache() -> TranscriptIndexCache:
    """The process-wide :class:`TranscriptIndexCache` (created on first use, 32 entries)."""
    global _SHARED  # noqa: PLW0603 - one cache per process, created lazily
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = TranscriptIndexCache()
        return _SHARED
