"""
Blocking file operations of :class:`TranscriptManager` (run inline or through ``anyio.to_thread``).

- :func:`create_exclusive`: a new transcript appears complete or not at all (temp file + hard link,
  which fails if the target exists), mode 0600, directories 0700.
- :func:`append_lines`: one ``write`` of complete ``\\n``-terminated lines with ``O_APPEND``, after
  checking the file's real tail (field reports B01/B02): a valid last line without newline gets one; a
  torn last line (no newline, does not parse) is backed up (0600) with the whole file and cut off, so a
  new line is never glued onto a fragment. Optional fsync.
- :func:`rewrite_lines`: backup, then atomic replace (migration of v1/v2 files on first write, D7).
- :class:`InlineWriteGate`: decides whether the next append's write runs inline on the event-loop
  thread or in a worker thread, from how long recent writes took.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import attrs
import msgspec

from sessionkeeper._fs import (
    FILE_MODE,
    atomic_write_bytes,
    backup_bytes,
    backup_file,
    ensure_dir,
    fsync_dir,
    temp_name,
)
from sessionkeeper.exceptions import SymlinkRefusedError, TranscriptNotFoundError
from sessionkeeper.records import decode_json_line


__all__ = (
    "InlineWriteGate",
    "TailRepair",
    "append_lines",
    "create_exclusive",
    "rewrite_lines",
)

_CHUNK = 64 * 1024
_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)


@attrs.frozen(kw_only=True)
class TailRepair:
    """
    What :func:`append_lines` did to the file's tail before appending.

    Attributes:
        kind: ``"newline"`` (a valid last line got its missing ``\\n``) or ``"torn"`` (a torn last line
            was cut off).
        offset: Byte offset of the last line's start.
        removed: Bytes removed (0 for ``"newline"``).
        backup_path: The 0600 backup of the removed bytes (``<name>.torn-<offset>.bak.<stamp>``), or ``None``.
    """

    kind: str
    offset: int
    removed: int = 0
    backup_path: Path | None = None


def _payload(lines: Sequence[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def write_all(fd: int, data: bytes) -> None:
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
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, FILE_MODE)
    try:
        try:
            write_all(fd, _payload(lines))
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


def pread_all(fd: int, length: int, offset: int) -> bytes:
    """``length`` bytes at ``offset`` (fewer only at the end of the file), whatever ``pread`` returns."""
    parts: list[bytes] = []
    while length > 0:
        chunk = os.pread(fd, length, offset)
        if not chunk:
            break
        parts.append(chunk)
        length -= len(chunk)
        offset += len(chunk)
    return b"".join(parts)


def last_line_start(fd: int, size: int) -> int:
    """Offset just after the last ``\\n`` before ``size`` (0 when there is none)."""
    end = size
    while end > 0:
        start = max(0, end - _CHUNK)
        found = pread_all(fd, end - start, start).rfind(b"\n")
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


def open_transcript_fd(path: Path, flags: int) -> int:
    """
    ``os.open`` of an existing transcript (close-on-exec). Opened for writing, a symbolic link is never
    followed (``O_NOFOLLOW``; issue 15 item 7): appends go to the transcript, not to a link's target.

    Raises:
        TranscriptNotFoundError: The transcript vanished (e.g. archived by a reset or a cleanup).
        SymlinkRefusedError: Opened for writing, the path is a symbolic link (nothing written).
    """
    writing = flags & (os.O_WRONLY | os.O_RDWR)
    try:
        return os.open(path, flags | _CLOEXEC | (_NOFOLLOW if writing else 0))
    except FileNotFoundError as err:
        raise TranscriptNotFoundError(
            f"transcript not found: {path} (archived or removed since it was opened; nothing was written)"
        ) from err
    except OSError as err:
        if writing and (err.errno == errno.ELOOP or path.is_symlink()):
            raise SymlinkRefusedError(path, what="transcript") from err
        raise


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
    fd = open_transcript_fd(path, os.O_RDWR | os.O_APPEND)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            start = last_line_start(fd, size)
            fragment = pread_all(fd, size - start, start)
            if _parses(fragment):
                payload = b"\n" + payload
                repair = TailRepair(kind="newline", offset=start)
            else:
                # back up what the repair removes, not the whole file (issue 15: 19 repairs made 470 MB)
                backup = backup_bytes(path, fragment, label=f"torn-{start}", now_ms=now_ms)
                os.ftruncate(fd, start)
                repair = TailRepair(kind="torn", offset=start, removed=size - start, backup_path=backup)
        write_all(fd, payload)
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


class InlineWriteGate:
    """
    Where the next append's write runs: inline on the event-loop thread, or in a worker thread.

    An append's write (``open``, 1-byte tail check, ``write``, ``fsync``, ``close``) takes about
    0.2 ms on a local SSD, and a hop to a worker thread (``anyio.to_thread.run_sync``) adds 0.06-0.2 ms
    more on a small machine; so while writes are fast they run inline, blocking the loop for no longer
    than the write itself. Rules:

    - ``budget_ms == 0``: never inline (every write goes through a worker thread).
    - Start inline. A write (inline or not) that takes longer than ``budget_ms`` switches to thread
      mode: the slow disk (a network file system, a stalled journal) then costs the loop one slow
      write, and later writes are kept off the loop.
    - In thread mode, after ``reprobe_after`` consecutive writes within the budget, the next write is
      tried inline again (a probe). A probe that is slow again doubles the number of fast writes the
      next probe waits for (up to ``reprobe_after * 64``); a fast write in inline mode resets it.
    - Inline writes do not each yield to the event loop (a yield costs 10-20 µs on asyncio);
      :meth:`take_yield` says when the inline writes since the last yield add up to one budget, so
      a task appending in a loop still lets the others run at least every budget or so.

    Durations come from ``timer`` (seconds; default :func:`time.perf_counter`), a seam for tests. Not
    thread-safe by itself: one manager serialises its writes, so one write is measured at a time.

    Raises:
        ValueError: ``budget_ms`` is negative or NaN (``math.inf``: always inline).
    """

    REPROBE_AFTER: Final = 32
    """Fast thread-mode writes before the first probe back inline."""

    MAX_BACKOFF: Final = 64
    """Cap on the probe back-off factor (so at most ``32 * 64`` fast writes between probes)."""

    __slots__ = (
        "_backoff",
        "_budget_s",
        "_fast_in_thread",
        "_inline",
        "_unyielded_s",
        "budget_ms",
        "reprobe_after",
        "timer",
    )

    def __init__(
        self,
        budget_ms: float,
        *,
        timer: Callable[[], float] = time.perf_counter,
        reprobe_after: int = REPROBE_AFTER,
    ) -> None:
        if math.isnan(budget_ms) or budget_ms < 0:
            raise ValueError(f"inline_write_budget_ms must be >= 0, got {budget_ms!r}")
        if reprobe_after < 1:
            raise ValueError(f"reprobe_after must be >= 1, got {reprobe_after!r}")
        self.budget_ms = budget_ms
        self._budget_s = budget_ms / 1000
        self.timer = timer
        self.reprobe_after = reprobe_after
        self._inline = budget_ms > 0
        self._fast_in_thread = 0
        self._backoff = 1
        self._unyielded_s = 0.0

    @property
    def inline(self) -> bool:
        """Whether the next write should run on the event-loop thread."""
        return self._inline

    def take_yield(self) -> bool:
        """
        Whether the caller should yield to the event loop before its next inline write: ``True``
        (and the count starts over) once the inline writes since the last yield add up to the budget.
        """
        if self._unyielded_s < self._budget_s:
            return False
        self._unyielded_s = 0.0
        return True

    def record(self, seconds: float) -> None:
        """Account for one write that took ``seconds`` (measured with :attr:`timer`), wherever it ran."""
        if self.budget_ms == 0:
            return
        if self._inline:
            self._unyielded_s += seconds
        if seconds > self._budget_s:
            self._inline = False
            self._fast_in_thread = 0
            return
        if self._inline:
            self._backoff = 1  # a fast inline write: the disk is fine again
            return
        self._fast_in_thread += 1
        if self._fast_in_thread >= self.reprobe_after * self._backoff:
            self._inline = True
            self._fast_in_thread = 0
            self._backoff = min(self._backoff * 2, self.MAX_BACKOFF)

    def __repr__(self) -> str:
        mode = "inline" if self._inline else "thread"
        return f"InlineWriteGate(budget_ms={self.budget_ms!r}, mode={mode})"
