"""
Reading a whole transcript in bounded memory, first line first, from any transcript storage (issue 13:
``sessionkeeper export`` / ``import`` copy transcripts of any size).

:meth:`TranscriptStorage.read <sessionkeeper.transcript.TranscriptStorage.read>` returns every line at
once. :func:`iter_line_batches` yields them in batches of about ``batch_bytes`` instead: a pi JSONL file
is read in chunks, a storage with its own ``iter_line_batches`` method (:class:`LineBatchReader`, e.g. a
database cursor) is asked for them, and any other storage is read with ``read`` and cut into batches.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Final, Protocol, runtime_checkable

import anyio.to_thread

from sessionkeeper.exceptions import TranscriptFormatError
from sessionkeeper.transcript._storage import TranscriptStorage
from sessionkeeper.transcript.file._io import open_transcript_fd, pread_all
from sessionkeeper.transcript.file._storage import FileTranscriptStorage


__all__ = ("DEFAULT_BATCH_BYTES", "LineBatchReader", "iter_file_line_batches", "iter_line_batches")

DEFAULT_BATCH_BYTES: Final = 4 << 20
"""About how many bytes of lines one batch holds (4 MiB; a longer line is one batch of its own)."""

_CHUNK: Final = 1 << 20


@runtime_checkable
class LineBatchReader(Protocol):
    """A transcript storage that streams a transcript's lines itself (a database cursor)."""

    def iter_line_batches(self, session_id: str, *, batch_bytes: int) -> AsyncIterator[list[bytes]]:
        """
        Every complete line of the transcript, first line first, in batches of about ``batch_bytes``.

        Raises:
            TranscriptNotFoundError: There is no such transcript (on the first iteration).
        """
        ...


async def iter_file_line_batches(
    path: Path, *, batch_bytes: int = DEFAULT_BATCH_BYTES
) -> AsyncGenerator[list[bytes], None]:
    """
    The lines of the pi JSONL file ``path`` (without their ``\\n``), first line first, in batches of
    about ``batch_bytes`` bytes, read in 1 MiB chunks: memory stays bounded by the batch and the longest
    line. The file is read up to its size when opened (lines appended later are not included). A
    symbolic link is followed (a read).

    Raises:
        TranscriptNotFoundError: There is no file at ``path``.
        TranscriptFormatError: The file does not end with ``\\n``: its last line is unterminated (a torn
            write, or a writer mid-append); ``line`` is its 1-based number. The batches before it were
            yielded; a copy must not keep them as the whole transcript.
    """
    fd = await anyio.to_thread.run_sync(open_transcript_fd, path, os.O_RDONLY)
    try:
        end = os.fstat(fd).st_size
        offset = 0
        carry = b""
        batch: list[bytes] = []
        held = 0
        count = 0
        while offset < end:
            chunk = await anyio.to_thread.run_sync(pread_all, fd, min(_CHUNK, end - offset), offset)
            if not chunk:
                break  # the file shrank meanwhile: what was read ends here
            offset += len(chunk)
            data = carry + chunk
            parts = data.split(b"\n")
            carry = parts.pop()
            batch.extend(parts)
            held += len(data) - len(carry)
            count += len(parts)
            if held >= batch_bytes:
                yield batch
                batch, held = [], 0
        if carry:
            raise TranscriptFormatError(
                f"the last line is unterminated ({len(carry)} bytes after the last newline: a torn write, "
                "or a writer mid-append); repair it (sessionkeeper doctor --fix) or stop the writer first",
                path=path,
                line=count + 1,
            )
        if batch:
            yield batch
    finally:
        os.close(fd)


async def iter_line_batches(
    storage: TranscriptStorage, session_id: str, *, batch_bytes: int = DEFAULT_BATCH_BYTES
) -> AsyncGenerator[list[bytes], None]:
    """
    Every line of one transcript of ``storage``, byte for byte and first line first, in batches of about
    ``batch_bytes`` bytes (module docstring). An empty transcript yields nothing.

    Raises:
        TranscriptNotFoundError: There is no such transcript (on the first iteration).
        TranscriptFormatError: A file's last line is unterminated (:func:`iter_file_line_batches`).
        UnsafePathError: ``session_id`` is not a safe name.
    """
    if isinstance(storage, FileTranscriptStorage):
        async for batch in iter_file_line_batches(storage.path_for(session_id), batch_bytes=batch_bytes):
            yield batch
        return
    if isinstance(storage, LineBatchReader):
        async for batch in storage.iter_line_batches(session_id, batch_bytes=batch_bytes):
            yield batch
        return
    lines, _ = await storage.read(session_id)
    start = held = 0
    for index, line in enumerate(lines):
        held += len(line) + 1
        if held >= batch_bytes:
            yield lines[start : index + 1]
            start, held = index + 1, 0
    if start < len(lines):
        yield lines[start:]
