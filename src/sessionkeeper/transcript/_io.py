"""
Blocking file operations of :class:`TranscriptManager` (run through ``anyio.to_thread``).

- :func:`create_exclusive`: a new transcript appears complete or not at all (temp file + hard link,
  which fails if the target exists), mode 0600, directories 0700.
- :func:`append_lines`: one ``write`` of complete ``\\n``-terminated lines with ``O_APPEND``, after
  checking the file's real tail (field reports B01/B02): a valid last line without newline gets one; a
  torn last line (no newline, does not parse) is backed up (0600) with the whole file and cut off, so a
  new line is never glued onto a fragment. Optional fsync.
- :func:`rewrite_lines`: backup, then atomic replace (migration of v1/v2 files on first write, D7).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

import attrs
import msgspec

from sessionkeeper._fs import (
    FILE_MODE,
    atomic_write_bytes,
    backup_file,
    ensure_dir,
    fsync_dir,
    temp_name,
)
from sessionkeeper.exceptions import TranscriptNotFoundError
from sessionkeeper.transcript._codec import decode_json_line


__all__ = ("TailRepair", "append_lines", "create_exclusive", "rewrite_lines")

_CHUNK = 64 * 1024


@attrs.frozen(kw_only=True)
class TailRepair:
    """
    What :func:`append_lines` did to the file's tail before appending.

    Attributes:
        kind: ``"newline"`` (a valid last line got its missing ``\\n``) or ``"torn"`` (a torn last line
            was cut off).
        offset: Byte offset of the last line's start.
        removed: Bytes removed (0 for ``"newline"``).
        backup_path: The 0600 backup made before cutting, or ``None``.
    """

    kind: str
    offset: int
    removed: int = 0
    backup_path: Path | None = None


def _payload(lines: Sequence[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def create_exclusive(path: Path, lines: Sequence[bytes], *, fsync: bool) -> None:
    """
    Create ``path`` holding ``lines``; fail with :class:`FileExistsError` if it exists.

    The content is written to a temp file first and hard-linked into place, so the file is never seen
    empty or half-written.
    """
    ensure_dir(path.parent)
    tmp = temp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        try:
            _write_all(fd, _payload(lines))
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.link(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    if fsync:
        fsync_dir(path.parent)


def _last_line_start(fd: int, size: int) -> int:
    end = size
    while end > 0:
        start = max(0, end - _CHUNK)
        chunk = os.pread(fd, end - start, start)
        found = chunk.rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


def _parses(fragment: bytes) -> bool:
    if not fragment.strip():
        return True
    try:
        msgspec.json.decode(fragment)
    except (msgspec.DecodeError, RecursionError):
        try:
            decode_json_line(fragment)
        except ValueError:
            return False
    return True


def append_lines(path: Path, lines: Sequence[bytes], *, fsync: bool, now_ms: int) -> TailRepair | None:
    """
    Append complete lines to an existing transcript in one write, repairing its tail first.

    Args:
        path: The transcript.
        lines: JSON lines without newline.
        fsync: fsync the file after writing.
        now_ms: Time for the backup name, in ms since the epoch.

    Returns:
        The tail repair made, or ``None``.

    Raises:
        TranscriptNotFoundError: The transcript vanished (e.g. archived by a reset or a cleanup).
        OSError: The write failed (nothing was cut unless the backup succeeded).
    """
    repair: TailRepair | None = None
    payload = _payload(lines)
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND)
    except FileNotFoundError as err:
        raise TranscriptNotFoundError(
            f"transcript not found: {path} (archived or removed since it was opened; nothing was written)"
        ) from err
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            start = _last_line_start(fd, size)
            fragment = os.pread(fd, size - start, start)
            if _parses(fragment):
                payload = b"\n" + payload
                repair = TailRepair(kind="newline", offset=start)
            else:
                backup = backup_file(path, now_ms=now_ms)
                os.ftruncate(fd, start)
                repair = TailRepair(kind="torn", offset=start, removed=size - start, backup_path=backup)
        _write_all(fd, payload)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    return repair


def rewrite_lines(path: Path, lines: Sequence[bytes], *, fsync: bool, now_ms: int) -> Path | None:
    """
    Back ``path`` up (0600, when it exists) and replace it atomically with ``lines``.

    Returns:
        The backup path, or ``None`` when there was no file to back up.
    """
    backup = backup_file(path, now_ms=now_ms) if path.exists() else None
    atomic_write_bytes(path, _payload(lines), fsync=fsync)
    return backup
