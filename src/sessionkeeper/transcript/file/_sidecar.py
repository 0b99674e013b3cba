"""
A persisted ancestry index of a transcript ("sidecar"), so that the thinking level of a leaf whose only
``thinking_level_change`` is near the start of a huge file is found without walking the path (issue #7,
scale; pi-format spec §9 item 3: the thinking level is the last usable ``thinking_level_change`` on the
leaf's path).

What it holds, for the entries with an id of a prefix ``[0, covered)`` of the file (``covered`` ends at
a newline), in file order: the byte offset of each entry's line, and the position of the nearest
ancestor-or-self ``thinking_level_change`` with a usable level (``-1``: none); plus a sorted table of
``crc32(id) << 32 | position`` to find an entry by id, and the same for the parent ids that are not in
the prefix. Every id match found through a crc is verified by reading that line, so the answer never
depends on a hash. The thinking level on a path is then one lookup and one line read.

It is built (and extended) by :mod:`._sidecar_build`, only for "simple" prefixes (what pi writes): ids
are unique and every parent precedes its child. A prefix with a duplicated id or a forward reference is
recorded as unsupported and readers walk the file instead. Growth is append-only: a longer file is
checked (the ids appended must not repeat a prefix id nor name a parent that a prefix entry is
missing) and extended from ``covered``.

Where it lives: ``$SESSIONKEEPER_CACHE_DIR``, else ``$XDG_CACHE_HOME/sessionkeeper``, else
``~/.cache/sessionkeeper``; subdirectory ``tail-index/`` (0700), one file per transcript (0600) named by
a hash of its real path; never next to the transcript (pi and OpenClaw list and clean the sessions
directory). Written atomically (:func:`atomic_write_bytes`); the indexes of transcripts that no
longer exist are deleted when a process saves its first index (:func:`prune_index_dir`). It is
validated against the file on every use: the real path, the header's session id, device and inode,
and a BLAKE2b hash of the 4 KiB before ``covered`` (a rewritten, replaced or truncated file is
rejected). A corrupt, foreign or unwritable index is ignored (a debug log): the reader falls back to
the walk. The header and its variable part are checksummed (BLAKE2b), the arrays too (CRC-32, checked
once per index file and process: about 7 ms for the 24 MB index of a 1 GiB transcript); every value
used is range-checked and the lines it points to are verified.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import mmap
import operator
import os
import struct
import threading
import time
import zlib
from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final, cast

import msgspec

from sessionkeeper._fs import atomic_write_bytes
from sessionkeeper.records import entry_key, key_to_json
from sessionkeeper.transcript._context import entry_thinking_level
from sessionkeeper.transcript._lines import TailRecord, parse_entry_line


__all__ = (
    "AncestryIndex",
    "CorruptIndexError",
    "candidates",
    "end_hash_before",
    "id_crc",
    "index_cache_dir",
    "index_path",
    "line_at",
    "load_index",
    "prune_index_dir",
    "save_index",
)

_log = logging.getLogger("sessionkeeper.transcript")

_MAGIC: Final = b"SKTAILIX"
_FORMAT: Final = 1
_ENDIAN_MARK: Final = 0x01020304  # written natively: an index from another byte order is rejected
_HEAD: Final = struct.Struct("=8sIIII6Q16s16s")  # 104 bytes, so the arrays after it stay 8-aligned
# magic, endian mark, format, flags, CRC-32 of the arrays, dev, ino, covered, n, m, var_len,
# end hash, head hash
_UNSUPPORTED: Final = 1
_CHECK_BYTES: Final = 4096
_READ_CHUNK: Final = 1 << 20
_TLC: Final = "thinking_level_change"
_ENCODE: Final = operator.methodcaller("encode", "utf-8", "surrogatepass")
_POS_MASK: Final = 0xFFFFFFFF


class _Var(msgspec.Struct, frozen=True):
    path: str
    sessionId: str  # noqa: N815 - JSON key
    lastId: str | int | float | bool | None  # noqa: N815 - JSON key (a number or boolean id as in the file)


def index_cache_dir() -> Path:
    """
    The directory of ancestry indexes: ``$SESSIONKEEPER_CACHE_DIR/tail-index``, else
    ``$XDG_CACHE_HOME/sessionkeeper/tail-index``, else ``~/.cache/sessionkeeper/tail-index``.
    """
    base = os.environ.get("SESSIONKEEPER_CACHE_DIR")
    if base:
        return Path(base) / "tail-index"
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = Path(xdg) if xdg else Path.home() / ".cache"
    return root / "sessionkeeper" / "tail-index"


def index_path(transcript: Path | str, *, cache_dir: Path | None = None) -> tuple[Path, str]:
    """The index file of a transcript and the transcript's real path (the key it is stored under)."""
    real = os.path.realpath(transcript)
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:40]
    return (cache_dir if cache_dir is not None else index_cache_dir()) / f"{digest}.idx", real


def end_hash_before(fd: int, covered: int) -> bytes:
    """BLAKE2b-128 of the (at most) 4 KiB of the open file ``fd`` before offset ``covered``."""
    start = max(0, covered - _CHECK_BYTES)
    data = os.pread(fd, covered - start, start)
    return hashlib.blake2b(data, digest_size=16).digest()


def line_at(fd: int, offset: int, limit: int) -> bytes:
    """The line starting at ``offset`` (without its newline), read up to ``limit``."""
    parts: list[bytes] = []
    step = 4096
    while offset < limit:
        data = os.pread(fd, min(step, limit - offset), offset)
        if not data:
            break
        cut = data.find(b"\n")
        if cut >= 0:
            parts.append(data[:cut])
            break
        parts.append(data)
        offset += len(data)
        step = min(step * 4, _READ_CHUNK)
    return b"".join(parts)


def id_crc(entry_id: str) -> int:
    """CRC-32 of an entry id's UTF-8 bytes (the key of the id tables; matches are always verified)."""
    return zlib.crc32(_ENCODE(entry_id))


def candidates(table: Sequence[int], crc: int) -> list[int]:
    """Positions stored in a sorted ``crc << 32 | position`` table under ``crc``."""
    at = bisect.bisect_left(table, crc << 32)
    found = []
    while at < len(table) and table[at] >> 32 == crc:
        found.append(table[at] & _POS_MASK)
        at += 1
    return found


class CorruptIndexError(Exception):
    """A value of the index is out of range or points to a line that does not match."""


class AncestryIndex:
    """
    The ancestry index of the prefix ``[0, covered)`` of one transcript (module docstring): built in
    memory by :func:`build_index` or mapped from its file by :func:`load_index` (then :meth:`close`
    it, or use it as a context manager).

    Attributes:
        real_path: The transcript's real path.
        session_id: The header's session id.
        dev, ino: The transcript's device and inode.
        covered: Bytes of the file covered (ends just after a newline, or at the entries' start).
        end_hash: BLAKE2b-128 of the (at most) 4 KiB before ``covered``.
        last_id: The id of the last entry covered (``None`` when there is none).
        unsupported: The prefix is not simple (a duplicated id or a forward reference): no arrays.
        offsets: Byte offset of each entry line (entries with an id, file order).
        thinking: Position of the nearest ancestor-or-self usable ``thinking_level_change``, or -1.
        keys: Sorted ``crc32(id) << 32 | position``.
        unresolved: Sorted ``crc32(parentId) << 32 | position`` of the entries whose parent is not
            in the prefix.
    """

    def __init__(
        self,
        *,
        real_path: str,
        session_id: str,
        dev: int,
        ino: int,
        covered: int,
        end_hash: bytes,
        last_id: str | None,
        unsupported: bool = False,
        offsets: Sequence[int] = (),
        thinking: Sequence[int] = (),
        keys: Sequence[int] = (),
        unresolved: Sequence[int] = (),
        mapping: mmap.mmap | None = None,
    ) -> None:
        self.real_path = real_path
        self.session_id = session_id
        self.dev = dev
        self.ino = ino
        self.covered = covered
        self.end_hash = end_hash
        self.last_id = last_id
        self.unsupported = unsupported
        self.offsets = offsets
        self.thinking = thinking
        self.keys = keys
        self.unresolved = unresolved
        self._mapping = mapping

    def __enter__(self) -> AncestryIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the mapped file (no-op for an index built in memory)."""
        mapping, self._mapping = self._mapping, None
        if mapping is not None:
            for name in ("offsets", "thinking", "keys", "unresolved"):
                view = getattr(self, name)
                if isinstance(view, memoryview):
                    view.release()
                setattr(self, name, ())
            mapping.close()

    def record_at(self, fd: int, pos: int) -> TailRecord:
        """The entry line at ``pos`` read as the loader reads it (:class:`CorruptIndexError` if none)."""
        if not 0 <= pos < len(self.offsets):
            raise CorruptIndexError
        offset = self.offsets[pos]
        if offset >= self.covered:
            raise CorruptIndexError
        record = parse_entry_line(line_at(fd, offset, self.covered))
        if record is None or record.entry_id is None:
            raise CorruptIndexError
        return record

    def find(self, fd: int, entry_id: str) -> int | None:
        """The position of the entry with this id in the prefix (verified), ``None`` if absent."""
        for pos in candidates(self.keys, id_crc(entry_id)):
            if self.record_at(fd, pos).entry_id == entry_id:
                return pos
        return None

    def accepts(self, fd: int, later_ids: Iterable[str]) -> bool:
        """
        Whether the index still describes the file given the ids of the entries after ``covered``:
        none may repeat a prefix id (it would become the one a parent id resolves to, spec §9 item 2)
        or be a parent id that a prefix entry did not find.
        """
        for entry_id in later_ids:
            if self.find(fd, entry_id) is not None:
                return False
            for child in candidates(self.unresolved, id_crc(entry_id)):
                if self.record_at(fd, child).parent_id == entry_id:
                    return False
        return True

    def thinking_record(self, fd: int, pos: int) -> TailRecord | None:
        """The nearest usable ``thinking_level_change`` on the path ending at ``pos`` (or ``None``)."""
        at = self.thinking[pos]
        if at < 0:
            if at != -1:
                raise CorruptIndexError
            return None
        if at > pos:
            raise CorruptIndexError
        record = self.record_at(fd, at)
        if record.kind != _TLC or entry_thinking_level(record.entry) is None:
            raise CorruptIndexError
        return record


def _pad8(size: int) -> int:
    return (size + 7) & ~7


def save_index(index: AncestryIndex, target: Path) -> bool:
    """
    Write ``index`` to ``target`` atomically (0600, directory 0700). Returns ``False`` (and logs at
    debug level) when it cannot be written; never raises for an I/O error.
    """
    last_id = key_to_json(index.last_id)  # a NumberId / BooleanId as its JSON value
    var = msgspec.json.encode(_Var(path=index.real_path, sessionId=index.session_id, lastId=last_id))
    padded = var + b"\0" * (_pad8(len(var)) - len(var))
    arrays: list[memoryview] = []
    data_crc = 0
    for values, code in (
        (index.offsets, "Q"),
        (index.keys, "Q"),
        (index.unresolved, "Q"),
        (index.thinking, "i"),
    ):
        packed = values if isinstance(values, array) else array(code, values)
        if len(packed):
            arrays.append(memoryview(packed).cast("B"))
            data_crc = zlib.crc32(arrays[-1], data_crc)
    fields = (
        _MAGIC,
        _ENDIAN_MARK,
        _FORMAT,
        _UNSUPPORTED if index.unsupported else 0,
        data_crc,
        index.dev,
        index.ino,
        index.covered,
        len(index.offsets),
        len(index.unresolved),
        len(var),
        index.end_hash,
    )
    head_hash = hashlib.blake2b(_HEAD.pack(*fields, b"\0" * 16) + var, digest_size=16).digest()
    pieces: list[Any] = [_HEAD.pack(*fields, head_hash), padded, *arrays]
    try:
        atomic_write_bytes(target, cast("list[bytes]", pieces))
    except OSError as err:
        _log.debug("ancestry index not written to %s: %s", target, err)
        return False
    if target.parent not in _PRUNED:
        _PRUNED.add(target.parent)
        prune_index_dir(target.parent)
    return True


def _indexed_path(item: Path) -> bool | None:
    """Whether the transcript an index file names still exists (``None``: not an index we can read)."""
    with item.open("rb") as handle:
        head = handle.read(_HEAD.size)
        if len(head) != _HEAD.size or head[:8] != _MAGIC:
            return None
        var_len = _HEAD.unpack(head)[10]
        if not 0 < var_len < 1 << 16:
            return None
        var = msgspec.json.decode(handle.read(var_len), type=_Var)
    return Path(var.path).exists()


_PRUNED: set[Path] = set()  # index directories pruned by this process (once each)
_STALE_TEMP_S: Final = 3600


def prune_index_dir(folder: Path) -> int:
    """
    Delete the indexes in ``folder`` whose transcript no longer exists, and temp files older than an
    hour (left by a crash). Called once per directory and process, after the first index saved.
    Returns how many files were deleted; never raises for an I/O error.
    """
    removed = 0
    try:
        items = list(folder.iterdir())
    except OSError:
        return 0
    now = time.time()
    for item in items:
        try:
            if item.name.endswith(".tmp"):
                if now - item.stat().st_mtime > _STALE_TEMP_S:
                    item.unlink()
                    removed += 1
            elif item.suffix == ".idx" and _indexed_path(item) is False:
                item.unlink()
                removed += 1
        except (OSError, ValueError, struct.error, msgspec.DecodeError):
            continue
    return removed


def load_index(
    target: Path, *, real_path: str, session_id: str, fd: int, st: os.stat_result
) -> AncestryIndex | None:
    """
    Map the index at ``target`` if it describes the open transcript ``fd`` (stat ``st``, header
    session id ``session_id``): ``None`` when it is missing, corrupt, foreign or stale (a debug log).
    """
    try:
        with target.open("rb") as handle:
            own = os.fstat(handle.fileno())
            mapping = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        identity = (own.st_dev, own.st_ino, own.st_size, own.st_mtime_ns)
    except (OSError, ValueError) as err:
        if not isinstance(err, FileNotFoundError):
            _log.debug("ancestry index %s not readable: %s", target, err)
        return None
    try:
        index = _parse(mapping, identity=identity, real_path=real_path, session_id=session_id, fd=fd, st=st)
    except (CorruptIndexError, ValueError, TypeError, struct.error, msgspec.DecodeError, OSError) as err:
        _log.debug("ancestry index %s ignored: %s", target, str(err) or "corrupt")
        index = None
    if index is None:
        mapping.close()
    return index


_VERIFIED: dict[tuple[int, int, int, int], None] = {}  # index files whose arrays were checked
_VERIFIED_LOCK: Final = threading.Lock()


def _parse(
    mapping: mmap.mmap,
    *,
    identity: tuple[int, int, int, int],
    real_path: str,
    session_id: str,
    fd: int,
    st: os.stat_result,
) -> AncestryIndex | None:
    if len(mapping) < _HEAD.size:
        raise CorruptIndexError
    (magic, mark, version, flags, data_crc, dev, ino, covered, n, m, var_len, end_hash, head_hash) = (
        _HEAD.unpack_from(mapping)
    )
    if (magic, mark, version) != (_MAGIC, _ENDIAN_MARK, _FORMAT) or var_len > len(mapping):
        raise CorruptIndexError
    var_bytes = mapping[_HEAD.size : _HEAD.size + var_len]
    blank = _HEAD.pack(
        magic, mark, version, flags, data_crc, dev, ino, covered, n, m, var_len, end_hash, b"\0" * 16
    )
    if hashlib.blake2b(blank + var_bytes, digest_size=16).digest() != head_hash:
        raise CorruptIndexError
    var = msgspec.json.decode(var_bytes, type=_Var)
    if var.path != real_path or var.sessionId != session_id or (dev, ino) != (st.st_dev, st.st_ino):
        return None  # another file (or the same path replaced by another file)
    if covered > st.st_size or end_hash_before(fd, covered) != end_hash:
        return None  # rewritten or truncated
    at = _HEAD.size + _pad8(var_len)
    if len(mapping) != at + 20 * n + 8 * m:
        raise CorruptIndexError
    view = memoryview(mapping)
    if identity not in _VERIFIED:  # the arrays' checksum, once per index file and process
        if zlib.crc32(view[at:]) != data_crc:
            view.release()
            raise CorruptIndexError
        with _VERIFIED_LOCK:
            _VERIFIED[identity] = None
            while len(_VERIFIED) > 256:
                del _VERIFIED[next(iter(_VERIFIED))]
    sections: list[memoryview[int]] = []
    for count, width in ((n, 8), (n, 8), (m, 8), (n, 4)):
        part = view[at : at + count * width]
        sections.append(part.cast("Q") if width == 8 else part.cast("i"))
        part.release()
        at += count * width
    view.release()
    return AncestryIndex(
        real_path=real_path,
        session_id=session_id,
        dev=dev,
        ino=ino,
        covered=covered,
        end_hash=end_hash,
        last_id=entry_key(var.lastId),
        unsupported=bool(flags & _UNSUPPORTED),
        offsets=sections[0],
        keys=sections[1],
        unresolved=sections[2],
        thinking=sections[3],
        mapping=mapping,
    )
