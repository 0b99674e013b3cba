"""
Reading a transcript file from its end: its header (pi-format spec §3), and a backward reader of
complete lines in growing chunks (the building blocks of :mod:`._tail` and :mod:`._tail_messages`).
"""

from __future__ import annotations

import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Final

import msgspec

from sessionkeeper.exceptions import TranscriptFormatError, TranscriptNotFoundError
from sessionkeeper.records import (
    SessionHeader,
    header_from_json,
)
from sessionkeeper.transcript._index import decode_line
from sessionkeeper.transcript._lines import TailRecord, decode_object


__all__ = ("DEFAULT_MAX_TAIL_BYTES", "TailHeader", "TailReader", "open_transcript_file", "read_header")

DEFAULT_MAX_TAIL_BYTES: Final = 8 << 20
"""Default bound on the bytes a tail read reads line by line before handing over (8 MiB; a live
context of a 200k-token window is about 1 MB of JSON)."""

_BOM: Final = b"\xef\xbb\xbf"
_MAX_HEADER_BYTES: Final = 1 << 20
MAX_CHUNK: Final = 1 << 20
"""Largest backward read, in bytes (1 MiB)."""


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
        decoded = decode_object(line)
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
        self._max_chunk = max(first_chunk, MAX_CHUNK)
        self._carry = b""
        self.bytes_read = 0
        self.reads = 0
        self.exhausted = end <= start

    def size_next(self, size: int) -> None:
        """Make the next read ``size`` bytes (at least 1, at most the chunk cap) instead of doubling."""
        self._chunk = min(max(size, 1), self._max_chunk)

    @property
    def unread_end(self) -> int:
        """End offset of the part not yet returned (``[start, unread_end)``, ending at a line end)."""
        return self._pos + len(self._carry)

    def previous_lines(self) -> list[bytes]:
        """The next complete lines going backwards, in file order (possibly empty); sets
        :attr:`exhausted` once the start was reached."""
        data, first = self._next_chunk()
        return data[first:].split(b"\n") if first >= 0 else []

    def previous_lines_reversed(self) -> Iterator[bytes]:
        """
        :meth:`previous_lines` last line first, each cut out (``rfind``) only when asked for: a walk
        that stops within the chunk does not split the rest of it. The chunk is read (and
        :attr:`exhausted` set) before the first line is returned.
        """
        data, first = self._next_chunk()
        return _lines_backwards(data, first) if first >= 0 else iter(())

    def _next_chunk(self) -> tuple[bytes, int]:
        """Read the next chunk backwards: its bytes and where its complete lines start (``-1``: none)."""
        if self.exhausted:
            return b"", -1
        size = min(self._chunk, self._pos - self._start)
        self._pos -= size
        self._chunk = min(self._chunk * 2, self._max_chunk)
        self._handle.seek(self._pos)
        data = self._handle.read(size)
        self.bytes_read += len(data)
        self.reads += 1
        if self._carry:
            data += self._carry
        if self._pos > self._start:
            cut = data.find(b"\n")
            if cut < 0:
                self._carry = data
                return b"", -1
            self._carry = data[:cut]
            return data, cut + 1
        self._carry = b""
        self.exhausted = True
        return data, 0


def _lines_backwards(data: bytes, first: int) -> Iterator[bytes]:
    """``data[first:].split(b"\\n")`` in reverse order, lazily."""
    end = len(data)
    rfind = data.rfind
    while (cut := rfind(b"\n", first, end)) >= 0:
        yield data[cut + 1 : end]
        end = cut
    yield data[first:end]


def open_transcript_file(path: Path) -> IO[bytes]:
    """Open ``path`` for reading with the loader's errors (:class:`TranscriptNotFoundError`,
    :class:`TranscriptFormatError` for a directory, or for a FIFO, device or socket, which is never
    opened: reading it would block or never end)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError as err:
        raise TranscriptNotFoundError(f"transcript not found: {path}") from err
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise TranscriptFormatError(
            "not a regular file (a FIFO, device or socket), not a transcript", path=path
        )
    try:
        return path.open("rb")
    except FileNotFoundError as err:
        raise TranscriptNotFoundError(f"transcript not found: {path}") from err
    except IsADirectoryError as err:
        raise TranscriptFormatError("is a directory, not a transcript", path=path) from err


_Visit = Callable[[TailRecord], bool]
