"""
:class:`FileTranscriptStorage`: transcripts as pi JSONL files ``<sessionId>.jsonl`` in one directory
(OpenClaw's sessions directory layout), with the contract of the storage seam (``transcript._storage``).

It is the file machinery :class:`~sessionkeeper.transcript.TranscriptManager` writes with: exclusive
creation written at once (D7), appends under the transcript's write lock
(:class:`~sessionkeeper.transcript.SessionWriteLock`), a torn last line backed up and cut before an
append, other writers' complete lines picked up by the mark's end (:mod:`._follow`), reads from the
end in chunks.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Final, Literal

import anyio
import anyio.to_thread

from sessionkeeper._clock import SYSTEM_CLOCK, Clock
from sessionkeeper._fs import fsync_dir
from sessionkeeper.exceptions import LockNotHeldError, StaleTranscriptError, TranscriptChangedError
from sessionkeeper.records import parse_iso_ms
from sessionkeeper.transcript._storage import (
    ArchiveReason,
    StorageMark,
    TranscriptArchive,
    WriterClaim,
    archive_stamp,
    check_claim_timeout,
    check_lines,
    check_session_id,
)
from sessionkeeper.transcript.file._follow import (
    CHECK_BYTES,
    FileMark,
    ForeignLines,
    PendingWrite,
    append_following,
    mark_of_file,
    read_foreign_lines,
)
from sessionkeeper.transcript.file._io import append_lines, create_exclusive, open_transcript_fd, pread_all
from sessionkeeper.transcript.lock._lock import SessionWriteLock
from sessionkeeper.transcript.lock._run import run_locked
from sessionkeeper.transcript.lock._settings import WriteLockSettings


__all__ = ("FileTranscriptStorage",)

SUFFIX: Final = ".jsonl"
_CHUNK: Final = 64 << 10
_ARCHIVE: Final = re.compile(
    r"(?P<id>.+)\.jsonl\.(?P<reason>reset|deleted)\.(?P<date>\d{4}-\d{2}-\d{2})T(?P<time>\d{2}-\d{2}-\d{2}\.\d{3})Z"
)
"""``<sessionId>.jsonl.<reason>.<stamp>``: an archive this storage (or OpenClaw) wrote (spec §2.4)."""


def _storage_mark(mark: FileMark) -> StorageMark:
    return StorageMark(lines=mark.lines, size=mark.end, token=mark)


def _file_mark(mark: StorageMark, path: Path) -> FileMark:
    token = mark.token
    if not isinstance(token, FileMark):
        raise TranscriptChangedError("the mark is not one of this file's (another storage's?)", path=path)
    return token


def _lines_of(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    lines.pop()  # data ends with "\n" (or is empty)
    return lines


def _read_all(path: Path) -> tuple[list[bytes], FileMark]:
    fd = open_transcript_fd(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        data = pread_all(fd, st.st_size, 0)
    finally:
        os.close(fd)
    body = data[: data.rfind(b"\n") + 1]
    lines = _lines_of(body)
    return lines, FileMark(st.st_dev, st.st_ino, len(body), body[-CHECK_BYTES:], len(lines))


class _ExactWrite(PendingWrite):
    """A write that must land right after its mark: other writers' lines refuse it (no re-linking)."""

    __slots__ = ("location",)

    def __init__(self, lines: Sequence[bytes], location: Path) -> None:
        super().__init__((), lines, follow=False)
        self.location = location

    def rebase(self, foreign: ForeignLines) -> None:
        """Refuse: lines were appended since the mark."""
        raise StaleTranscriptError(
            f"{len(_lines_of(foreign.data))} line(s) were appended since the writer's mark; nothing was"
            " written (read them and append again)",
            path=self.location,
        )


class FileTranscriptStorage:
    """
    pi JSONL transcripts ``<directory>/<sessionId>.jsonl``; a :class:`~sessionkeeper.abc.TranscriptStorage`
    and an :class:`~sessionkeeper.abc.ArchivingTranscriptStorage` (an archive is the file renamed
    ``<sessionId>.jsonl.<reason>.<stamp>``, as OpenClaw names it, spec §2.4).

    Args:
        directory: The sessions directory (created 0700 on the first create).
        durability: ``"fsync"`` (default): creates and appends are fsynced; ``"none"``: left to the OS.
        settings: The write lock's settings (``None``: from the environment,
            :meth:`WriteLockSettings.from_config`).
        clock: Time source of lock payloads and repair backups.

    Writer claims are the transcript's :class:`~sessionkeeper.transcript.SessionWriteLock`, so they
    exclude other processes (and OpenClaw) as well. Idempotency keys are remembered by this instance
    (a file has no place for them): a retry through the same storage object is safe.
    """

    def __init__(
        self,
        directory: Path | str,
        *,
        durability: Literal["fsync", "none"] = "fsync",
        settings: WriteLockSettings | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        """See the class docstring."""
        if durability not in {"fsync", "none"}:
            raise ValueError(f"durability must be 'fsync' or 'none', not {durability!r}")
        self.directory: Path = Path(directory)
        """The sessions directory."""
        self.settings: WriteLockSettings | None = settings
        """The write lock's settings (``None``: from the environment)."""
        self.clock: Clock = clock
        """Time source of lock payloads and repair backups."""
        self.durability: Literal["fsync", "none"] = durability
        """``"fsync"`` or ``"none"`` (class docstring)."""
        self._fsync = durability == "fsync"
        self._keys: dict[tuple[str, str], StorageMark] = {}

    def __repr__(self) -> str:
        return f"FileTranscriptStorage({str(self.directory)!r})"

    def path_for(self, session_id: str) -> Path:
        """
        The file of ``session_id``: ``<directory>/<sessionId>.jsonl``.

        Raises:
            UnsafePathError: ``session_id`` is not a safe name
                (:func:`~sessionkeeper.transcript._storage.check_session_id`: it could escape the
                directory, or is too long for a file name).
        """
        check_session_id(session_id)
        return self.directory / f"{session_id}{SUFFIX}"

    def location(self, session_id: str) -> str:
        """The file's path, as text."""
        return str(self.path_for(session_id))

    async def create(self, session_id: str, lines: Sequence[bytes]) -> StorageMark:
        """Create the file holding ``lines``, written at once. Raises ``FileExistsError`` when it exists."""
        path = self.path_for(session_id)
        content = check_lines(lines, location=str(path))

        def write() -> FileMark:
            create_exclusive(path, content, fsync=self._fsync)
            return mark_of_file(path, lines=len(content))

        return _storage_mark(await anyio.to_thread.run_sync(write))

    async def read(self, session_id: str) -> tuple[list[bytes], StorageMark]:
        """Every complete line (a torn or unfinished last line is left out) and their mark."""
        lines, mark = await anyio.to_thread.run_sync(_read_all, self.path_for(session_id))
        return lines, _storage_mark(mark)

    async def read_since(self, session_id: str, mark: StorageMark) -> tuple[list[bytes], StorageMark]:
        """The complete lines appended after ``mark`` and the mark after them."""
        path = self.path_for(session_id)
        foreign, after = await anyio.to_thread.run_sync(read_foreign_lines, path, _file_mark(mark, path))
        return ([] if foreign is None else _lines_of(foreign.data)), _storage_mark(after)

    async def append(
        self,
        session_id: str,
        lines: Sequence[bytes],
        *,
        mark: StorageMark,
        claim: WriterClaim | None = None,
        idempotency_key: str | None = None,
    ) -> StorageMark:
        """
        Append ``lines`` in one write if nothing was appended since ``mark`` (``TranscriptStorage.append``);
        a torn last line is backed up and cut first (:func:`._io.append_lines`).
        """
        path = self.path_for(session_id)
        if idempotency_key is not None and (session_id, idempotency_key) in self._keys:
            return self._keys[session_id, idempotency_key]
        lines = check_lines(lines, location=str(path))
        if not lines:
            return mark
        file_mark = _file_mark(mark, path)
        held: SessionWriteLock | None = None
        if claim is not None:
            claim.ensure_held()
            if not isinstance(claim, SessionWriteLock):
                raise LockNotHeldError(
                    "the claim given is not a file write lock", path=path, reason="foreign"
                )
            held = claim
        now_ms = self.clock.now_ms()

        def write() -> FileMark:
            if held is not None:
                if held.path != Path(os.path.realpath(path.absolute().parent)) / path.name:
                    raise LockNotHeldError(
                        f"the claim given is not this transcript's (it is {held.path}'s)",
                        path=path,
                        reason="foreign",
                    )
                held.verify_file()
            pending = _ExactWrite(lines, path)
            for _ in range(3):
                if append_following(path, pending, mark=file_mark, fsync=self._fsync):
                    assert pending.mark is not None
                    return pending.mark
                append_lines(path, (), fsync=False, now_ms=now_ms)  # cut a torn tail, end a whole one
            raise TranscriptChangedError(
                "its last line kept changing while it was repaired (a writer without the lock?);"
                " nothing was written",
                path=path,
            )

        if held is None:
            after = await run_locked(path, write, settings=self.settings, clock=self.clock)
        else:
            after = await anyio.to_thread.run_sync(write)
        result = _storage_mark(after)
        if idempotency_key is not None:
            self._keys[session_id, idempotency_key] = result
        return result

    async def read_backwards(self, session_id: str) -> AsyncIterator[bytes]:
        """
        The complete lines from the last to the first, read in 64 KiB chunks from the end.

        A line longer than a chunk is gathered chunk by chunk and joined once (linear in its length).
        """
        path = self.path_for(session_id)
        fd = await anyio.to_thread.run_sync(open_transcript_fd, path, os.O_RDONLY)
        try:
            pos = os.fstat(fd).st_size
            pieces: list[bytes] = []  # the part of the file after ``pos`` not yet split, last piece first
            started = False
            while pos > 0:
                size = min(_CHUNK, pos)
                pos -= size
                chunk = await anyio.to_thread.run_sync(pread_all, fd, size, pos)
                newline = chunk.rfind(b"\n")
                if newline < 0:
                    if started:
                        pieces.append(chunk)  # inside a long line: join it once its start is found
                    continue  # else still inside an unfinished last line: dropped
                if not started:
                    chunk = chunk[:newline]  # drop the unfinished last line (and the final "\n")
                    started = True
                    pieces.clear()
                pieces.append(chunk)
                buffer = b"".join(reversed(pieces))
                parts = buffer.split(b"\n")
                pieces = [parts[0]]
                for line in reversed(parts[1:]):
                    yield line
            if started:
                yield b"".join(reversed(pieces))
        finally:
            os.close(fd)

    async def claim(self, session_id: str, *, timeout_ms: float | None = None) -> WriterClaim:
        """
        The transcript's write lock (:meth:`SessionWriteLock.acquire` with this storage's settings).

        Raises:
            SessionBusyError: Not taken within ``timeout_ms``.
            LockError: ``timeout_ms`` is not positive.
        """
        path = self.path_for(session_id)
        check_claim_timeout(timeout_ms)
        return await SessionWriteLock.acquire(
            path, settings=self.settings, clock=self.clock, timeout_ms=timeout_ms
        )

    async def list_sessions(self) -> list[str]:
        """The session ids of the ``*.jsonl`` files of the directory, sorted (none when it is missing)."""

        def scan() -> list[str]:
            try:
                names = [entry.name for entry in os.scandir(self.directory) if entry.is_file()]
            except FileNotFoundError:
                return []
            return sorted(name[: -len(SUFFIX)] for name in names if name.endswith(SUFFIX) and name != SUFFIX)

        return await anyio.to_thread.run_sync(scan)

    async def delete(self, session_id: str) -> bool:
        """Remove the file; ``False`` when there was none."""
        path = self.path_for(session_id)
        self._keys = {key: value for key, value in self._keys.items() if key[0] != session_id}
        try:
            await anyio.Path(path).unlink()
        except FileNotFoundError:
            return False
        return True

    async def archive(
        self, session_id: str, *, reason: ArchiveReason, now_ms: int
    ) -> TranscriptArchive | None:
        """
        Rename the file ``<sessionId>.jsonl.<reason>.<stamp>`` (``ArchivingTranscriptStorage``; never over
        an existing file); ``None`` when there is no file.

        Raises:
            FileExistsError: The archive name is taken; nothing was renamed.
        """
        path = self.path_for(session_id)
        name = f"{path.name}.{reason}.{archive_stamp(now_ms)}"
        target = self.directory / name
        self._keys = {key: value for key, value in self._keys.items() if key[0] != session_id}

        def move() -> int | None:
            try:
                size = os.lstat(path).st_size
            except FileNotFoundError:
                return None
            if os.path.lexists(target):
                raise FileExistsError(f"archive exists: {target}")
            try:
                path.rename(target)
            except FileNotFoundError:
                return None
            if self._fsync:
                fsync_dir(self.directory)
            return size

        size = await anyio.to_thread.run_sync(move)
        if size is None:
            return None
        return TranscriptArchive(
            name=name, session_id=session_id, reason=reason, archived_at_ms=_stamp_ms(name), size=size
        )

    async def list_archives(self) -> list[TranscriptArchive]:
        """The ``<sessionId>.jsonl.<reason>.<stamp>`` files of the directory, oldest first (then by name)."""

        def scan() -> list[TranscriptArchive]:
            found: list[TranscriptArchive] = []
            try:
                entries = list(os.scandir(self.directory))
            except FileNotFoundError:
                return found
            for entry in entries:
                match = _ARCHIVE.fullmatch(entry.name)
                if match is None:
                    continue
                try:
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    size = entry.stat(follow_symlinks=False).st_size
                except OSError:
                    continue
                reason: ArchiveReason = "reset" if match["reason"] == "reset" else "deleted"
                found.append(
                    TranscriptArchive(
                        name=entry.name,
                        session_id=match["id"],
                        reason=reason,
                        archived_at_ms=_stamp_ms(entry.name),
                        size=size,
                    )
                )
            return sorted(found, key=lambda a: (a.archived_at_ms, a.name))

        return await anyio.to_thread.run_sync(scan)

    async def delete_archive(self, name: str) -> bool:
        """Remove the archive file ``name``; ``False`` when there is none or ``name`` is no archive's."""
        if "/" in name or "\\" in name or "\0" in name or _ARCHIVE.fullmatch(name) is None:
            return False
        try:
            await anyio.Path(self.directory / name).unlink()
        except FileNotFoundError:
            return False
        return True


def _stamp_ms(name: str) -> int:
    """The time stamp of an archive name :data:`_ARCHIVE` matches, in ms since epoch."""
    match = _ARCHIVE.fullmatch(name)
    assert match is not None
    return int(parse_iso_ms(f"{match['date']}T{match['time'].replace('-', ':')}Z"))
