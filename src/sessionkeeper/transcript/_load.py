"""
Loading a transcript: a lazy index over the file's lines (pi-format spec §2, §5.11, §8).

Every line is scanned once, decoding only its ``type``, ``id`` and ``parentId``; full entries are
decoded on demand (the path being rebuilt, labels, session names), so opening a large transcript costs
about as much as splitting it into lines. Rules, as pi 0.73.1 reads files, with the documented repairs:

- UTF-8; a leading BOM and blank lines are ignored; invalid UTF-8 bytes read as U+FFFD (as Node does);
  lone surrogate escapes read as U+FFFD (field report B02).
- The first *parseable* line must be a ``session`` header with a string ``id``; otherwise
  :class:`TranscriptFormatError` naming the file and line (pi would overwrite the file: we never do).
- Lines that are not valid JSON (or nested too deeply to decode), or not a JSON object, are skipped
  and reported. A last line without
  newline that does not parse is a *torn tail* (reported separately; cut off before the next append).
- Later ``session`` lines are ignored; entries with a repeated id: the later one wins in the index.
  Ids are keyed as pi's ``byId`` map keys them (:func:`entry_key`): a number or boolean ``id`` or
  ``parentId`` is a key of its own (``1`` and ``"1"`` differ, ``1`` and ``1.0`` do not) and a falsy
  ``parentId`` (``0``, ``false``, ``""``) ends the path walk; entries whose ``id`` is ``null``, missing,
  an object or an array are kept in file order but are not part of the tree.
- Leaf = the last entry (with an id) in file order. Labels are replayed in file order (last write wins,
  empty clears; the label entry's timestamp is kept). Session name = the latest ``session_info``.
- Versions 1 and 2 are migrated in memory (v1: fresh ids chained in file order, ``firstKeptEntryIndex``
  -> ``firstKeptEntryId`` counting the header as line 0; v2: role ``hookMessage`` -> ``custom``).
  Loading never writes.
- Missing parents make roots; ``parentId`` cycles are detected and reported (walks stop before
  repeating an entry).
"""

from __future__ import annotations

import io
import math
import operator
import os
import re
import stat
from pathlib import Path
from typing import Any, Final, get_args

import msgspec

from sessionkeeper.exceptions import TranscriptFormatError, TranscriptNotFoundError
from sessionkeeper.records import (
    CURRENT_SESSION_VERSION,
    TranscriptEntry,
    decode_json_line,
    entry_key,
    header_from_json,
    typed_entries_from_lines,
)
from sessionkeeper.transcript._diagnostics import TornTail
from sessionkeeper.transcript._index import TranscriptIndex, decode_line, js_trim, new_entry_id


__all__ = (
    "TranscriptIndex",
    "js_trim",
    "load_transcript",
    "load_transcript_bytes",
    "new_entry_id",
)

_BOM: Final = b"\xef\xbb\xbf"
_READ_CHUNK: Final = 8 << 20


class _Head(msgspec.Struct):
    """Only what the index needs from a line: its type, id and parent id."""

    type: Any = None
    id: Any = None
    parentId: Any = None  # noqa: N815 - the on-disk key


_HEAD_DECODER: Final = msgspec.json.Decoder(_Head)


def _migrate(index: TranscriptIndex, order: list[int | None], version: int) -> None:
    """
    Migrate a v1/v2 index to v3 in memory (spec §5.11); ``order`` maps each parsed line (header = 0,
    repeated headers included) to its entry position, ``None`` for header lines.
    """
    raws: dict[int, dict[str, Any]] = {}
    for pos in range(len(index)):
        raws[pos] = decode_line(index.line_bytes(pos))
    if version < 2:
        taken: set[str] = set()
        previous: str | None = None
        for pos in range(len(index)):
            raw = raws[pos]
            new_id = new_entry_id(taken)
            taken.add(new_id)
            raw["id"] = new_id
            raw["parentId"] = previous
            previous = new_id
            if raw.get("type") == "compaction" and "firstKeptEntryIndex" in raw:
                target = raw["firstKeptEntryIndex"]
                if isinstance(target, int | float) and not isinstance(target, bool):
                    target_pos = (
                        order[int(target)] if 0 <= target < len(order) and target == int(target) else None
                    )
                    if target_pos is not None:
                        target_id = raws[target_pos].get("id")
                        if isinstance(target_id, str):
                            raw["firstKeptEntryId"] = target_id
                    del raw["firstKeptEntryIndex"]
        index.by_id.clear()
        for pos in range(len(index)):
            index.ids[pos] = raws[pos]["id"]
            index.parents[pos] = raws[pos]["parentId"]
            index.by_id[raws[pos]["id"]] = pos
        index.leaf_id = index.ids[-1] if len(index) else None
    for raw in raws.values():
        message = raw.get("message")
        if (
            raw.get("type") == "message"
            and isinstance(message, dict)
            and message.get("role") == "hookMessage"
        ):
            message["role"] = "custom"
    for pos, raw in raws.items():
        index.lines[pos] = msgspec.json.encode(raw)
    index.header_raw["version"] = CURRENT_SESSION_VERSION
    index.header = header_from_json(index.header_raw)
    index.migrated = True


class _FastHead(msgspec.Struct, gc=False):
    """Strict head for the fast path: any surprise sends the file to the line-by-line scan."""

    type: str
    id: str | None = None
    parentId: str | None = None  # noqa: N815 - the on-disk key


_FAST_DECODER: Final = msgspec.json.Decoder(_FastHead)
_TYPE_OF: Final = operator.attrgetter("type")
_ID_OF: Final = operator.attrgetter("id")
_PARENT_OF: Final = operator.attrgetter("parentId")


class _Scan:
    """What one pass over the lines found (shared by the fast and the careful scan)."""

    def __init__(self) -> None:
        # The index being built; cleared once the index owns this scan (``index._scan``), so the two
        # never form a reference cycle and a closed transcript is freed by reference counting alone.
        self.index: TranscriptIndex | None = None
        self.line_count = 0
        self.header_line = 0
        self.version = 1
        self.invalid: list[int] = []
        self.non_object: list[int] = []
        self.bad_utf8: list[int] = []
        self.lone: list[int] = []
        self.repeated: list[int] = []
        self.without_id: list[int] = []
        self.torn: TornTail | None = None
        self.missing_newline = False
        self.order: list[int | None] = []  # parsed lines -> entry position (None: header line)
        self.fast = False
        self.appended_from = 0  # entries at load time (set by the index when it first grows)


_JS_SPACE: Final = (  # String.prototype.trim's white space and line terminators
    " \t\n\v\f\r\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_JS_DECIMAL: Final = re.compile(r"[+-]?(?:Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)")
_JS_RADIX: Final = re.compile(r"0(?:[xX][0-9a-fA-F]+|[oO][0-7]+|[bB][01]+)")


def _js_number(value: Any) -> float:
    """JavaScript's ``ToNumber`` of a JSON value (``NaN`` for what is not a number)."""
    if value is None:
        return 0.0
    if isinstance(value, bool | int | float):
        try:
            return float(value)
        except OverflowError:  # an integer literal beyond any double: JavaScript reads +-Infinity
            return math.inf if value > 0 else -math.inf
    if isinstance(value, list):  # ToPrimitive: the elements joined with "," ([] -> "", [x] -> String(x))
        if len(value) > 1 or (value and isinstance(value[0], bool | dict)):
            return math.nan  # "1,2", "true", "[object Object]"
        return _js_number(value[0]) if value and value[0] is not None else 0.0
    if isinstance(value, str):
        text = value.strip(_JS_SPACE)
        if not text:
            return 0.0
        if _JS_RADIX.fullmatch(text):
            return _js_number(int(text, 0))
        if _JS_DECIMAL.fullmatch(text):
            return float(text.replace("Infinity", "inf"))
    return math.nan  # an object ("[object Object]") or text that is no number


def _header_version(raw_header: dict[str, Any]) -> int:
    """
    The migrations a header asks for, as pi decides (``version = header.version ?? 1``, then
    ``>= 3``: none, ``< 2``: v1 and v2, ``< 3``: v2, with JavaScript's comparisons): 1, 2 or 3.
    ``3.0`` and ``"3"`` are version 3, ``2.5`` is a v2 file, ``true`` a v1 file, and a value that
    compares false both ways (``"abc"``, ``{}``) asks for no migration.
    """
    version = raw_header.get("version")
    number = 1.0 if version is None else _js_number(version)
    if number < 2:
        return 1
    if number < CURRENT_SESSION_VERSION:
        return 2
    return CURRENT_SESSION_VERSION  # >= 3, or NaN


def _make_index(raw_header: Any, head_id: Any, path: Path | None, line: int) -> TranscriptIndex:
    if (
        not isinstance(raw_header, dict)
        or raw_header.get("type") != "session"
        or not isinstance(head_id, str)
    ):
        raise TranscriptFormatError(
            "not a pi session transcript: the first parseable line is not a session header with a string id",
            path=path,
            line=line,
        )
    try:
        header = header_from_json(raw_header)
    except msgspec.ValidationError as err:
        raise TranscriptFormatError(f"invalid session header: {err}", path=path, line=line) from err
    return TranscriptIndex(path=path, header=header, header_raw=raw_header)


def _split_lines(data: bytes) -> tuple[list[bytes], bool]:
    """``data`` split on ``\n`` (the empty piece after a final newline dropped), and whether the last
    line lacks its newline."""
    lines = data.split(b"\n")
    missing_newline = lines[-1] != b""
    if not missing_newline:
        lines.pop()
    return lines, missing_newline


def _read_lines(file: Path) -> tuple[list[bytes], bool, tuple[int, int, int, int]]:
    """Like :func:`_split_lines` on the file's content, reading it in chunks so that the whole file
    and its lines are never held in memory at the same time; also the file's stat signature, taken
    before reading (see :attr:`TranscriptIndex.source_stat`)."""
    lines: list[bytes] = []
    carry = b""
    with file.open("rb") as handle:
        st = os.fstat(handle.fileno())
        signature = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        # read what the file holds (+1 byte to see its end), not a whole chunk: a read allocates its size
        size = min(_READ_CHUNK, st.st_size + 1)
        while chunk := handle.read(size):
            size = _READ_CHUNK
            # readlines finds each newline with memchr (bytes.split tests every byte): about 2.5x fewer
            # instructions, even with the copy that drops the newline
            parts = io.BytesIO(carry + chunk if carry else chunk).readlines()
            carry = parts.pop() if not parts[-1].endswith(b"\n") else b""
            lines.extend([part[:-1] for part in parts])
            del parts
    if carry:
        lines.append(carry)
    return lines, bool(carry), signature


def _join_lines(lines: list[bytes], missing_newline: bool) -> bytes:
    if not lines:
        return b""
    return b"\n".join(lines) + (b"" if missing_newline else b"\n")


def _scan_fast(lines: list[bytes], missing_newline: bool, path: Path | None) -> _Scan | None:
    """
    One C-speed pass for well-formed files; ``None`` means "use the careful scan". Takes ownership of
    ``lines`` (they become the index's lines).
    """
    if not lines or lines[0].startswith(_BOM):
        return None
    try:
        heads = list(map(_FAST_DECODER.decode, lines))
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    first = heads[0]
    if first.type != "session" or first.id is None:
        return None
    kinds = list(map(_TYPE_OF, heads))
    if kinds.count("session") != 1:  # the header is the first; a later one needs the careful scan
        return None
    del kinds[0], heads[0]
    header_raw = decode_line(lines[0])
    del lines[0]
    return _fast_index(
        header_raw,
        first.id,
        lines,
        (kinds, list(map(_ID_OF, heads)), list(map(_PARENT_OF, heads))),
        missing_newline=missing_newline,
        path=path,
    )


_TAG_OF: Final[dict[type[Any], str]] = {
    cls: cls.__struct_config__.tag for cls in get_args(TranscriptEntry) if hasattr(cls, "__struct_config__")
}
_ENTRY_ID_OF: Final = operator.attrgetter("id")
_ENTRY_PARENT_OF: Final = operator.attrgetter("parent_id")


def _scan_typed(lines: list[bytes], missing_newline: bool, path: Path | None) -> _Scan | None:
    """
    :func:`_scan_fast` decoding every entry line straight into its record instead of its head (one
    decode per line; :func:`load_transcript` with ``decode_all``): the records give the type, id and
    parent id, and fill the index's cache. A line that is not a typed record is read by its head (and
    decoded on access, the careful way); ``None`` (the careful scan decides) for the same files as
    :func:`_scan_fast`, and for a v1/v2 file (its migration rewrites the lines); ``lines`` is left
    as it was then. On success the index owns a copy of ``lines`` without the header.
    """
    if not lines or lines[0].startswith(_BOM):
        return None
    try:
        first = _FAST_DECODER.decode(lines[0])
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    if first.type != "session" or first.id is None:
        return None
    header_raw = decode_line(lines[0])
    if _header_version(header_raw) < CURRENT_SESSION_VERSION:
        return None
    lines = lines[1:]  # the caller's list stays whole for the other scans
    entries, complete = typed_entries_from_lines(lines)
    if complete:
        kinds = list(map(_TAG_OF.__getitem__, map(type, entries)))
        ids: list[str | None] = list(map(_ENTRY_ID_OF, entries))
        parents: list[str | None] = list(map(_ENTRY_PARENT_OF, entries))
    else:
        kinds, ids, parents = [], [], []
        for line, entry in zip(lines, entries, strict=True):
            if entry is not None:
                kinds.append(_TAG_OF[type(entry)])
                ids.append(entry.id)
                parents.append(entry.parent_id)
                continue
            try:
                head = _FAST_DECODER.decode(line)
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                return None
            if head.type == "session":
                return None
            kinds.append(head.type)
            ids.append(head.id)
            parents.append(head.parentId)
    scan = _fast_index(
        header_raw, first.id, lines, (kinds, ids, parents), missing_newline=missing_newline, path=path
    )
    assert scan.index is not None
    cache = scan.index._cache
    if complete:
        cache.update(zip(range(len(entries)), entries, strict=True))  # type: ignore[arg-type]
    else:
        cache.update((pos, entry) for pos, entry in enumerate(entries) if entry is not None)
    return scan


def _fast_index(
    header_raw: Any,
    header_id: str,
    lines: list[bytes],
    heads: tuple[list[str], list[str | None], list[str | None]],
    *,
    missing_newline: bool,
    path: Path | None,
) -> _Scan:
    """The scan and index of a well-formed file from its entry lines' types, ids and parent ids."""
    scan = _Scan()
    scan.fast = True
    index = _make_index(header_raw, header_id, path, 1)
    scan.index = index
    scan.line_count = len(lines) + 1
    scan.header_line = 1
    scan.version = _header_version(index.header_raw)
    scan.missing_newline = missing_newline
    kinds, ids, parents = heads
    index.lines = lines
    index.kinds = kinds
    index.ids = ids
    index.parents = parents
    index.line_numbers = range(2, len(lines) + 2)
    by_id: dict[Any, int] = dict(zip(ids, range(len(ids)), strict=True))
    by_id.pop(None, None)
    index.by_id = by_id
    index.leaf_id = (
        ids[-1] if ids and ids[-1] is not None else next((i for i in reversed(ids) if i is not None), None)
    )
    if scan.version >= 2 and len(index.by_id) != len(ids):
        scan.without_id = [pos + 2 for pos, entry_id in enumerate(ids) if entry_id is None]
    scan.order = [None, *range(len(ids))]
    return scan


def _scan_careful(data: bytes, path: Path | None) -> _Scan:
    """Line by line, tolerating and recording every defect (module docstring)."""
    scan = _Scan()
    length = len(data)
    pos = 3 if data.startswith(_BOM) else 0
    line_no = 0
    head_decode = _HEAD_DECODER.decode
    find = data.find
    index: TranscriptIndex | None = None
    while pos < length:
        end = find(b"\n", pos)
        complete = end >= 0
        if not complete:
            end = length
        line_no += 1
        start = pos
        pos = end + 1
        chunk = data[start:end]
        if not chunk:
            continue
        replacement: bytes | None = None
        try:
            head = head_decode(chunk)
            if not chunk.isascii():  # skipped fields are not UTF-8 checked by msgspec
                chunk.decode("utf-8")
        # DecodeError includes ValidationError (non-object, huge number); RecursionError: ~1000 deep
        except (UnicodeDecodeError, msgspec.DecodeError, RecursionError):
            if not chunk.strip():
                continue  # blank line (whitespace only)
            try:
                value, was_bad_utf8, had_lone = decode_json_line(chunk)
            except ValueError:
                if not complete:
                    scan.torn = TornTail(line=line_no, offset=start, length=end - start)
                else:
                    scan.invalid.append(line_no)
                continue
            if not isinstance(value, dict):
                if index is None:
                    raise TranscriptFormatError(
                        "not a pi session transcript: the first parseable line is not a JSON object",
                        path=path,
                        line=line_no,
                    ) from None
                scan.non_object.append(line_no)
                continue
            if was_bad_utf8:
                scan.bad_utf8.append(line_no)
            if had_lone:
                scan.lone.append(line_no)
            if was_bad_utf8 or had_lone:  # else (a number msgspec cannot hold) the bytes stay as read
                replacement = msgspec.json.encode(value)
            head = _Head(type=value.get("type"), id=value.get("id"), parentId=value.get("parentId"))
        if not complete:
            scan.missing_newline = True
        kind = head.type
        if index is None:
            raw_header = decode_line(replacement if replacement is not None else chunk)
            index = _make_index(raw_header, head.id, path, line_no)
            scan.index = index
            scan.header_line = line_no
            scan.version = _header_version(raw_header)
            scan.order.append(None)
            continue
        if kind == "session":
            scan.repeated.append(line_no)
            scan.order.append(None)
            continue
        entry_id = entry_key(head.id)
        parent = entry_key(head.parentId)
        if entry_id is None and scan.version >= 2:
            scan.without_id.append(line_no)
        entry_pos = index._push(kind if isinstance(kind, str) else "", entry_id, parent, line_no)
        scan.order.append(entry_pos)
        index.lines.append(replacement if replacement is not None else chunk)
    scan.line_count = line_no
    return scan


def load_transcript_bytes(data: bytes, *, path: Path | None = None) -> TranscriptIndex:
    """
    Build the index of a transcript held in memory (see the module docstring for the rules).

    Args:
        data: The file's bytes.
        path: The file, for error messages and diagnostics.

    Returns:
        The :class:`TranscriptIndex`, with :attr:`TranscriptIndex.diagnostics` filled in.

    Raises:
        TranscriptFormatError: No parseable line, or the first parseable line is not a session header
            with a string id (the error names the file and the line).
    """
    lines, missing_newline = _split_lines(data)
    return _index_lines(lines, missing_newline, path, data)


def _index_lines(
    lines: list[bytes],
    missing_newline: bool,
    path: Path | None,
    data: bytes | None,
    *,
    decode_all: bool = False,
) -> TranscriptIndex:
    scan = _scan_typed(lines, missing_newline, path) if decode_all else None
    if scan is None:
        scan = _scan_fast(lines, missing_newline, path)
    if scan is None:
        scan = _scan_careful(data if data is not None else _join_lines(lines, missing_newline), path)
    del lines, data
    index, scan.index = scan.index, None
    if index is None:
        raise TranscriptFormatError(
            "not a pi session transcript: no parseable line (empty file or no session header)", path=path
        )
    if scan.version < CURRENT_SESSION_VERSION:
        _migrate(index, scan.order, scan.version)
        scan.without_id = []
    index._replayed = False
    index._scan = scan
    return index


def load_transcript(path: Path | str, *, decode_all: bool = False) -> TranscriptIndex:
    """
    Read and index a transcript file (synchronous; async callers use ``TranscriptManager.open``).

    Args:
        path: The transcript file.
        decode_all: Decode every entry into its record while loading, instead of on first access: one
            typed decode per line in place of the scan of its ``type``, id and parent id, for a caller
            that reads every entry (:meth:`TranscriptIndex.entries`); the same index and entries either
            way (default ``False``: the open costs about as much as splitting the file into lines).

    Raises:
        TranscriptNotFoundError: The file does not exist.
        TranscriptFormatError: It is not a transcript (see :func:`load_transcript_bytes`), or not a
            regular file (a directory, FIFO, device or socket: never read).
        OSError: It could not be read.
    """
    file = Path(path)
    try:
        mode = file.stat().st_mode
    except FileNotFoundError as err:
        raise TranscriptNotFoundError(f"transcript not found: {file}") from err
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):  # reading a FIFO or device never ends
        raise TranscriptFormatError(
            "not a regular file (a FIFO, device or socket), not a transcript", path=file
        )
    try:
        lines, missing_newline, signature = _read_lines(file)
    except FileNotFoundError as err:
        raise TranscriptNotFoundError(f"transcript not found: {file}") from err
    except IsADirectoryError as err:
        raise TranscriptFormatError("is a directory, not a transcript", path=file) from err
    index = _index_lines(lines, missing_newline, file, None, decode_all=decode_all)
    index.source_stat = signature
    return index
