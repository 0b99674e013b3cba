"""
The transcript side of :func:`~sessionkeeper.store.copy_sessions` (``_transfer``): where an entry's
transcript is in a store, the entry a target gets (``sessionFile``), and reading, comparing and writing
one transcript in bounded batches through the storage seam.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any, Final

import anyio
import attrs
import msgspec

from sessionkeeper.exceptions import (
    SessionExistsError,
    SessionKeeperError,
    TranscriptFormatError,
    TranscriptNotFoundError,
    UnsafePathError,
)
from sessionkeeper.store._entry import SessionEntry
from sessionkeeper.store._remote import encode_entry_text
from sessionkeeper.store._store import SessionStore
from sessionkeeper.transcript import (
    FileTranscriptStorage,
    TranscriptStorage,
    WriterClaim,
    iter_line_batches,
)


__all__ = (
    "Digest",
    "Place",
    "digest_of",
    "entry_text",
    "place_of",
    "prefix_length",
    "remove_quietly",
    "remove_stale",
    "resume_transcript",
    "stale_temps",
    "target_entry",
    "write_transcript",
)

_SUFFIX: Final = ".jsonl"
_TEMP: Final = re.compile(
    r"(.+\.jsonl)\.(\d+)\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.tmp"
)
"""What a killed transcript write leaves: ``<name>.jsonl.<pid>.<uuid4>.tmp`` (``_fs.temp_name``)."""


@attrs.frozen
class Place:
    """One transcript: its storage and its id there."""

    storage: TranscriptStorage
    key: str

    @property
    def location(self) -> str:
        return self.storage.location(self.key)


@attrs.frozen
class Digest:
    """A transcript's line count, size in bytes and SHA-256 (``b""`` when only written, not compared)."""

    lines: int
    size: int
    sha256: bytes


def entry_text(entry: SessionEntry) -> str:
    """An entry's JSON text, what two stores compare (lone surrogates escaped, raw values verbatim)."""
    return encode_entry_text(entry)[0]


def _inside(directory: Path, candidate: Path) -> bool:
    base = os.path.realpath(directory)
    resolved = os.path.realpath(candidate)
    return os.path.commonpath([base, resolved]) == base and resolved != base


def target_entry(target: SessionStore, entry: SessionEntry) -> SessionEntry:
    """
    The entry :func:`copy_sessions` writes to ``target`` for ``entry``: ``entry`` itself, except that in
    a target with a sessions directory a ``sessionFile`` that would not lie inside it (an absolute path
    into the source's directory, a sibling agent's file) is moved there: its file name in the target
    directory (an absolute path for an absolute value, the bare name for a relative one). A copy
    into the same directory, or into a database (no sessions directory: ``sessionFile`` is then only
    kept, as the runtime names database transcripts by ``sessionId``), keeps it byte for byte.
    """
    directory = target.sessions_dir
    value = entry.session_file
    if directory is None or not isinstance(value, str) or not value.strip():
        return entry
    stripped = value.strip()
    if "\0" in stripped:
        return entry  # refused by transcript_file: reported, never rewritten
    path = Path(stripped)
    if _inside(directory, path if path.is_absolute() else directory / path):
        return entry
    moved = str(directory.absolute() / path.name) if path.is_absolute() else path.name
    return msgspec.structs.replace(entry, session_file=moved)


def place_of(store: SessionStore, entry: SessionEntry) -> Place | None:
    """
    Where ``entry``'s transcript is in ``store`` (module docstring), ``None`` without a ``sessionId``.

    Raises:
        UnsafePathError: A refused ``sessionFile``, or an id that cannot name a transcript.
    """
    if store.sessions_dir is None:
        session_id = entry.session_id
        if not isinstance(session_id, str):
            return None
        return Place(store.transcript_storage(), session_id)
    path = store.transcript_file(entry)
    if path is None:
        return None
    if not path.name.endswith(_SUFFIX) or path.name == _SUFFIX:
        raise UnsafePathError(f"{path.name!r} is not a transcript file name (*.jsonl)", value=str(path))
    key = path.name[: -len(_SUFFIX)]
    storage = store.transcript_storage()
    same_dir = os.path.realpath(path.parent) == os.path.realpath(store.sessions_dir)
    if not (same_dir and isinstance(storage, FileTranscriptStorage)):
        storage = FileTranscriptStorage(path.parent, clock=store.clock)
    return Place(storage, key)


def _hash_batch(digest: Any, batch: list[bytes]) -> int:
    """Feed ``batch`` (each line with its ``\\n``) to ``digest``; its size in bytes."""
    if not batch:
        return 0
    data = b"\n".join(batch) + b"\n"
    digest.update(data)
    return len(data)


async def digest_of(place: Place, batch_bytes: int) -> Digest:
    """Line count, size and SHA-256 of the transcript's bytes, read in batches."""
    lines = size = 0
    digest = hashlib.sha256()
    async for batch in iter_line_batches(place.storage, place.key, batch_bytes=batch_bytes):
        size += _hash_batch(digest, batch)
        lines += len(batch)
    return Digest(lines, size, digest.digest())


async def remove_quietly(place: Place) -> None:
    with anyio.CancelScope(shield=True):
        # the error that made us clean up is the one to report
        with contextlib.suppress(SessionKeeperError, OSError):
            await place.storage.delete(place.key)


async def write_transcript(source: Place, target: Place, batch_bytes: int, session_key: str) -> Digest | None:
    """
    Create ``target`` with every line of ``source``: the first batch with ``create``, the others appended
    under the target's writer claim. ``None`` when the source has no transcript. On any failure the
    target transcript is removed again.
    """
    batches = iter_line_batches(source.storage, source.key, batch_bytes=batch_bytes)
    lines = size = 0

    def count(batch: list[bytes]) -> None:
        nonlocal lines, size
        size += sum(map(len, batch)) + len(batch)
        lines += len(batch)

    try:
        try:
            first: list[bytes] = await anext(batches, [])
        except TranscriptNotFoundError:
            return None
        try:
            mark = await target.storage.create(target.key, first)
        except FileExistsError as err:  # created by someone else since it was checked
            raise SessionExistsError(session_key, location=target.location) from err
        count(first)
        claim: WriterClaim | None = None
        try:
            async for batch in batches:
                if claim is None:
                    claim = await target.storage.claim(target.key)
                mark = await target.storage.append(target.key, batch, mark=mark, claim=claim)
                count(batch)
        except BaseException:
            await remove_quietly(target)
            raise
        finally:
            if claim is not None:
                with anyio.CancelScope(shield=True):
                    await claim.release()
    finally:
        await batches.aclose()
    return Digest(lines, size, b"")  # written, not compared: no hash needed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: alive
    return True


def stale_temps(directory: Path | None) -> dict[str, list[Path]]:
    """
    The temp files a killed transcript write left in ``directory`` (``<name>.jsonl.<pid>.<uuid4>.tmp``
    whose process is gone), by the path of the transcript they were for; ``{}`` without a directory.
    Listed once per copy: a rerun removes those of each transcript it writes.
    """
    found: dict[str, list[Path]] = {}
    if directory is None:
        return found
    try:
        names = [item.name for item in directory.iterdir()]
    except OSError:
        return found
    for name in names:
        match = _TEMP.fullmatch(name)
        if match is not None and not _alive(int(match.group(2))):
            found.setdefault(os.path.realpath(directory / match.group(1)), []).append(directory / name)
    return found


def remove_stale(stale: dict[str, list[Path]], place: Place) -> None:
    """Remove the temp files of :func:`stale_temps` left for ``place``'s transcript (a file)."""
    if isinstance(place.storage, FileTranscriptStorage):
        for temp in stale.pop(os.path.realpath(place.storage.path_for(place.key)), ()):
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()


async def _lines(place: Place, batch_bytes: int) -> AsyncGenerator[bytes, None]:
    async for batch in iter_line_batches(place.storage, place.key, batch_bytes=batch_bytes):
        for line in batch:
            yield line


async def prefix_length(target: Place, source: Place, batch_bytes: int) -> int | None:
    """
    How many complete lines ``target`` holds when they are, byte for byte, the first lines of ``source``
    (an interrupted copy of it); ``None`` when they are not (another transcript, or a longer one). A torn
    last line of a target file is left out (an append backs it up and cuts it first).
    """
    wanted = _lines(source, batch_bytes)
    have = _lines(target, batch_bytes)
    count = 0
    try:
        while True:
            try:
                line = await anext(have, None)
            except TranscriptFormatError:
                return count  # the complete lines before a torn tail matched
            if line is None:
                return count
            if await anext(wanted, None) != line:
                return None
            count += 1
    finally:
        await have.aclose()
        await wanted.aclose()


async def resume_transcript(source: Place, target: Place, batch_bytes: int) -> tuple[Digest, int] | None:
    """
    Finish an interrupted copy of ``source`` at ``target``: under the target's writer claim, when its
    lines (read there) are the first lines of ``source``, byte for byte, append the missing ones with
    mark-conditional appends. The source's digest (hash left out) and the lines appended (``0``: the
    target was complete already); ``None`` when the target is not such a prefix (nothing written).

    Raises:
        SessionBusyError: Another writer holds the target's claim past its timeout.
        StaleTranscriptError: Someone appended without the claim meanwhile (nothing more written).
    """
    claim = await target.storage.claim(target.key)
    try:
        have, mark = await target.storage.read(target.key)  # a torn last line left out
        skip, seen, lines, size, appended = len(have), 0, 0, 0, 0
        async for batch in iter_line_batches(source.storage, source.key, batch_bytes=batch_bytes):
            lines += len(batch)
            size += sum(map(len, batch)) + len(batch)
            part = batch
            if seen < skip:
                count = min(len(batch), skip - seen)
                if batch[:count] != have[seen : seen + count]:
                    return None  # not a prefix: another transcript
                seen += count
                part = batch[count:]
                if seen == skip:
                    have = []
            if part:
                mark = await target.storage.append(target.key, part, mark=mark, claim=claim)
                appended += len(part)
        if seen < skip:
            return None  # longer than the source
        return Digest(lines, size, b""), appended
    finally:
        with anyio.CancelScope(shield=True):
            await claim.release()
