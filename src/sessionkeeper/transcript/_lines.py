"""
One transcript line read the way the loader reads it (pi-format spec §2), for the readers that do not
load the whole file (tail reads, the ancestry index, listing): the entry's ``type``, id and parent id
without decoding the rest, at C speed for well-formed lines and with the loader's careful rules
otherwise (blank and unparseable lines skipped, ``session`` lines ignored after the header, invalid
UTF-8 and lone surrogates read as U+FFFD, nesting too deep = an invalid line).
"""

from __future__ import annotations

import operator
from itertools import compress
from typing import Any, Final

import msgspec

from sessionkeeper.records import (
    TranscriptEntry,
    decode_json_line,
    entry_from_line,
    entry_key,
    typed_entry_from_line,
)


__all__ = (
    "TailRecord",
    "chunk_heads",
    "decode_object",
    "entry_heads_at",
    "parse_entry_line",
    "parse_entry_line_typed",
)


class _Head(msgspec.Struct, gc=False):
    type: Any = None
    id: Any = None
    parentId: Any = None  # noqa: N815 - the on-disk key


_HEAD_DECODER: Final = msgspec.json.Decoder(_Head)


class TailRecord:
    """
    One entry line met by a reader: its ``type``, id, parent id and JSON bytes (repaired bytes for a
    line with invalid UTF-8 or lone surrogates). The full entry is decoded on first use (or given when
    the reader decoded it already).
    """

    __slots__ = ("_entry", "entry_id", "kind", "line", "parent_id")

    def __init__(
        self,
        kind: str,
        entry_id: str | None,
        parent_id: str | None,
        line: bytes,
        entry: TranscriptEntry | None = None,
    ) -> None:
        self.kind = kind
        self.entry_id = entry_id
        self.parent_id = parent_id
        self.line = line
        self._entry = entry

    @property
    def entry(self) -> TranscriptEntry:
        """The decoded entry (decoded once, straight into its record; cached)."""
        if self._entry is None:
            self._entry = entry_from_line(self.line)
        return self._entry


def decode_object(line: bytes) -> tuple[Any, bytes] | None:
    """The careful scan's reading of one line: ``(head or dict, bytes)``, ``None`` when skipped."""
    try:
        head = _HEAD_DECODER.decode(line)
        if not line.isascii():  # fields msgspec skips are not UTF-8 checked
            line.decode("utf-8")
    except (UnicodeDecodeError, msgspec.DecodeError, RecursionError):  # RecursionError: ~1000 deep
        if not line.strip():
            return None
        try:
            value, bad_utf8, lone = decode_json_line(line)
        except ValueError:
            return None
        if not isinstance(value, dict):
            return None
        # the loader's rule: re-encoded only when the text was repaired (else the bytes stay as read)
        return value, msgspec.json.encode(value) if bad_utf8 or lone else line
    return head, line


def parse_entry_line(line: bytes) -> TailRecord | None:
    """
    Read one line (no newline) as the loader does: ``None`` for a blank, unparseable, non-object or
    ``session`` line (skipped or ignored after the header, spec §2), else its :class:`TailRecord`.
    """
    if not line:
        return None
    decoded = decode_object(line)
    if decoded is None:
        return None
    value, data = decoded
    if isinstance(value, dict):
        kind, entry_id, parent = value.get("type"), value.get("id"), value.get("parentId")
    else:
        kind, entry_id, parent = value.type, value.id, value.parentId
    if kind == "session":
        return None
    return TailRecord(kind if isinstance(kind, str) else "", entry_key(entry_id), entry_key(parent), data)


def parse_entry_line_typed(line: bytes) -> TailRecord | None:
    """
    :func:`parse_entry_line` for a reader that needs the entry of (nearly) every line it meets: a line
    whose typed record one decode proves (:func:`typed_entry_from_line`) gives its record with the entry
    already decoded; any other line is read by :func:`parse_entry_line` (the same result, two decodes).
    """
    entry = typed_entry_from_line(line) if line else None
    if entry is None:
        return parse_entry_line(line)
    return TailRecord(entry.type, entry.id, entry.parent_id, line, entry)


class _StrictHead(msgspec.Struct, gc=False):
    type: str
    id: str | None = None
    parentId: str | None = None  # noqa: N815 - the on-disk key


_STRICT_DECODER: Final = msgspec.json.Decoder(_StrictHead)
_TYPE_OF: Final = operator.attrgetter("type")
_ID_OF: Final = operator.attrgetter("id")
_PARENT_OF: Final = operator.attrgetter("parentId")


def chunk_heads(lines: list[bytes]) -> tuple[list[str], list[str | None], list[str | None], list[bytes]]:
    """
    Types, ids, parent ids and bytes of the entry lines of a batch, in order (blank, skipped and
    ``session`` lines left out): C-speed for well-formed lines, the loader's careful rules otherwise.
    Lines with invalid UTF-8 in fields other than these three are entries for the loader too (it
    repairs them), so the fast path need not check them.
    """
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


def entry_heads_at(
    lines: list[bytes], starts: list[int]
) -> tuple[list[str], list[str | None], list[str | None], list[bytes], list[int]]:
    """
    :func:`chunk_heads` keeping each entry line's byte offset: ``starts[i]`` is where ``lines[i]``
    begins in the file; the result's last list holds the offsets of the entry lines returned.
    """
    keep = list(map(bool, lines))
    lines = list(compress(lines, keep))
    starts = list(compress(starts, keep))
    try:
        heads = list(map(_STRICT_DECODER.decode, lines))
        kinds: list[str] = list(map(_TYPE_OF, heads))
        if "session" not in kinds:
            return kinds, list(map(_ID_OF, heads)), list(map(_PARENT_OF, heads)), lines, starts
    except (msgspec.DecodeError, RecursionError):
        pass
    found = [(r, at) for r, at in zip(map(parse_entry_line, lines), starts, strict=True) if r is not None]
    return (
        [r.kind for r, _ in found],
        [r.entry_id for r, _ in found],
        [r.parent_id for r, _ in found],
        [r.line for r, _ in found],
        [at for _, at in found],
    )
