"""
:class:`MemoryTranscriptStorage`: transcripts' lines in this process's memory (tests, ephemeral agents,
``SessionStore.in_memory()``), with the contract of the storage seam (:mod:`._storage`).
"""

from __future__ import annotations

import abc
import itertools
import threading
from collections.abc import AsyncIterator, Sequence

import anyio
import anyio.lowlevel
import attrs

from sessionkeeper.exceptions import (
    LockNotHeldError,
    SessionBusyError,
    StaleTranscriptError,
    TranscriptChangedError,
    TranscriptNotFoundError,
)
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
from sessionkeeper.transcript.lock._local import ThreadSafeLock


__all__ = ("MemoryTranscriptStorage",)

_GENERATIONS = itertools.count(1)


@attrs.define(eq=False)
class _Log:
    """One transcript: its lines, their size, and the generation that tells it from a re-created one."""

    generation: int
    lines: list[bytes] = attrs.Factory(list)
    size: int = 0
    keys: dict[str, StorageMark] = attrs.Factory(dict)

    def mark(self) -> StorageMark:
        return StorageMark(lines=len(self.lines), size=self.size, token=self.generation)


class _HeldClaim(abc.ABC):
    """A claim on one in-memory transcript, held from creation until :meth:`release` (subclasses free it)."""

    _what = "writer claim"

    def __init__(self, storage: MemoryTranscriptStorage, session_id: str) -> None:
        self._storage = storage
        self._session_id = session_id
        self._held = True

    @property
    def held(self) -> bool:
        """Whether the claim is still held."""
        return self._held

    def ensure_held(self) -> None:
        """Raise :class:`~sessionkeeper.exceptions.LockNotHeldError` once released."""
        if not self._held:
            location = self._storage.location(self._session_id)
            raise LockNotHeldError(
                f"the {self._what} of {location} was released", path=location, reason="released"
            )

    async def release(self) -> None:
        """Give the claim up (a second call does nothing)."""
        if self._held:
            self._held = False
            self._free()

    @abc.abstractmethod
    def _free(self) -> None:
        """Free what the claim holds (called once, by the first :meth:`release`)."""


class _MemoryClaim(_HeldClaim):
    """The writer claim of one in-memory transcript (a lock shared by every task and thread)."""

    def __init__(self, storage: MemoryTranscriptStorage, session_id: str, lock: ThreadSafeLock) -> None:
        super().__init__(storage, session_id)
        self._lock = lock

    def owns(self, storage: MemoryTranscriptStorage, session_id: str) -> bool:
        return storage is self._storage and session_id == self._session_id

    def _free(self) -> None:
        self._lock.release()


class _MemoryCompactionClaim(_HeldClaim):
    """The compaction claim of one in-memory transcript (:meth:`MemoryTranscriptStorage.claim_compaction`)."""

    _what = "compaction claim"

    def _free(self) -> None:
        self._storage._end_compaction_claim(self._session_id)


class MemoryTranscriptStorage:
    """
    Transcripts held in memory, keyed by session id; a :class:`~sessionkeeper.abc.TranscriptStorage`
    a :class:`~sessionkeeper.abc.CompactionClaimStorage` (compaction claims shared by every task,
    event loop and thread of the process) and an :class:`~sessionkeeper.abc.ArchivingTranscriptStorage`
    (archives named ``<sessionId>/<reason>/<stamp>``, kept in memory until deleted).

    Shared by every task, event loop and thread of the process that holds it; gone with it. Marks carry
    a generation, so a transcript deleted and created again is told apart from the one a mark saw.
    Idempotency keys are remembered with the transcript (until it is deleted).
    """

    def __init__(self) -> None:
        """An empty storage."""
        self._logs: dict[str, _Log] = {}
        self._archives: dict[str, tuple[TranscriptArchive, _Log]] = {}
        self._guard = threading.Lock()  # the dict and every log's lines
        self._claims: dict[str, ThreadSafeLock] = {}
        self._compacting: set[str] = set()  # session ids whose compaction claim is held

    def __repr__(self) -> str:
        return f"MemoryTranscriptStorage({len(self._logs)} transcripts)"

    def location(self, session_id: str) -> str:
        """``memory:<session_id>`` (the id is not checked: messages name even refused ids)."""
        return f"memory:{session_id}"

    def _get(self, session_id: str) -> _Log:
        check_session_id(session_id)
        log = self._logs.get(session_id)
        if log is None:
            raise TranscriptNotFoundError(f"transcript not found: {self.location(session_id)}")
        return log

    async def create(self, session_id: str, lines: Sequence[bytes]) -> StorageMark:
        """Create the transcript holding ``lines``. Raises ``FileExistsError`` when it exists."""
        check_session_id(session_id)
        content = check_lines(lines, location=self.location(session_id))
        await anyio.lowlevel.checkpoint()
        with self._guard:
            if session_id in self._logs:
                raise FileExistsError(f"transcript exists: {self.location(session_id)}")
            log = _Log(generation=next(_GENERATIONS))
            log.lines.extend(content)
            log.size = sum(len(line) + 1 for line in log.lines)
            self._logs[session_id] = log
            return log.mark()

    async def read(self, session_id: str) -> tuple[list[bytes], StorageMark]:
        """Every line and their mark. Raises ``TranscriptNotFoundError``."""
        await anyio.lowlevel.checkpoint()
        with self._guard:
            log = self._get(session_id)
            return list(log.lines), log.mark()

    def _check(self, session_id: str, log: _Log, mark: StorageMark) -> None:
        if mark.token != log.generation or mark.lines > len(log.lines):
            raise TranscriptChangedError(
                "the transcript was deleted or replaced since this mark; reopen it",
                path=self.location(session_id),
            )

    async def read_since(self, session_id: str, mark: StorageMark) -> tuple[list[bytes], StorageMark]:
        """The lines appended after ``mark`` and the mark after them."""
        await anyio.lowlevel.checkpoint()
        with self._guard:
            log = self._get(session_id)
            self._check(session_id, log, mark)
            return log.lines[mark.lines :], log.mark()

    async def append(
        self,
        session_id: str,
        lines: Sequence[bytes],
        *,
        mark: StorageMark,
        claim: WriterClaim | None = None,
        idempotency_key: str | None = None,
    ) -> StorageMark:
        """Append ``lines`` if nothing was appended since ``mark`` (``TranscriptStorage.append``)."""
        check_session_id(session_id)
        if idempotency_key is not None:
            with self._guard:
                first = self._get(session_id).keys.get(idempotency_key)
            if first is not None:
                await anyio.lowlevel.checkpoint()
                return first
        lines = check_lines(lines, location=self.location(session_id))
        if not lines:
            await anyio.lowlevel.checkpoint()
            return mark
        if claim is not None:
            claim.ensure_held()
            if not (isinstance(claim, _MemoryClaim) and claim.owns(self, session_id)):
                raise LockNotHeldError(
                    "the claim given is not this transcript's",
                    path=self.location(session_id),
                    reason="foreign",
                )
            return self._append_now(session_id, lines, mark, idempotency_key)
        own = await self.claim(session_id)
        try:
            return self._append_now(session_id, lines, mark, idempotency_key)
        finally:
            await own.release()

    def _append_now(
        self, session_id: str, lines: Sequence[bytes], mark: StorageMark, key: str | None
    ) -> StorageMark:
        with self._guard:
            log = self._get(session_id)
            if key is not None and key in log.keys:
                return log.keys[key]
            self._check(session_id, log, mark)
            if mark.lines != len(log.lines):
                raise StaleTranscriptError(
                    f"{len(log.lines) - mark.lines} line(s) were appended since the writer's mark;"
                    " nothing was written (read them and append again)",
                    path=self.location(session_id),
                )
            for line in lines:
                log.lines.append(bytes(line))
                log.size += len(line) + 1
            after = log.mark()
            if key is not None:
                log.keys[key] = after
            return after

    async def read_backwards(self, session_id: str) -> AsyncIterator[bytes]:
        """The lines from the last to the first."""
        check_session_id(session_id)
        with self._guard:
            lines = list(self._get(session_id).lines)
        for line in reversed(lines):
            await anyio.lowlevel.checkpoint()
            yield line

    async def claim(self, session_id: str, *, timeout_ms: float | None = None) -> WriterClaim:
        """
        Take the transcript's writer claim (``None``: wait as long as it takes).

        Raises:
            SessionBusyError: Not taken within ``timeout_ms``.
            LockError: ``timeout_ms`` is not positive.
        """
        check_session_id(session_id)
        check_claim_timeout(timeout_ms)
        with self._guard:
            lock = self._claims.setdefault(session_id, ThreadSafeLock())
        start = anyio.current_time()
        try:
            with anyio.fail_after(None if timeout_ms is None else timeout_ms / 1000):
                await lock.acquire()
        except TimeoutError:
            raise SessionBusyError(
                f"the writer claim of {self.location(session_id)} is held by another writer",
                path=self.location(session_id),
                waited_ms=round((anyio.current_time() - start) * 1000, 3),
            ) from None
        return _MemoryClaim(self, session_id, lock)

    def held_claims(self) -> frozenset[str]:
        """
        The session ids whose writer claim (:meth:`claim`) is held right now, by any task, event loop or
        thread of the process: store maintenance keeps their entries and transcripts (DESIGN D6, B19).
        """
        with self._guard:
            return frozenset(sid for sid, lock in self._claims.items() if lock.locked())

    async def claim_compaction(self, session_id: str) -> WriterClaim | None:
        """
        Take the transcript's compaction claim if no task, event loop or thread of this process holds it
        (never waits; ``None`` when taken). It blocks no append (``CompactionClaimStorage``).

        Raises:
            UnsafePathError: ``session_id`` is not a safe name.
        """
        check_session_id(session_id)
        await anyio.lowlevel.checkpoint()
        with self._guard:
            if session_id in self._compacting:
                return None
            self._compacting.add(session_id)
        return _MemoryCompactionClaim(self, session_id)

    def _end_compaction_claim(self, session_id: str) -> None:
        with self._guard:
            self._compacting.discard(session_id)

    async def list_sessions(self) -> list[str]:
        """The session ids, sorted."""
        await anyio.lowlevel.checkpoint()
        with self._guard:
            return sorted(self._logs)

    async def delete(self, session_id: str) -> bool:
        """Remove the transcript; ``False`` when there was none."""
        check_session_id(session_id)
        await anyio.lowlevel.checkpoint()
        with self._guard:
            return self._logs.pop(session_id, None) is not None

    async def archive(
        self, session_id: str, *, reason: ArchiveReason, now_ms: int
    ) -> TranscriptArchive | None:
        """
        Move the transcript to the archives as ``<sessionId>/<reason>/<stamp>``
        (``ArchivingTranscriptStorage``); ``None`` when there is none.

        Raises:
            FileExistsError: That archive name is taken (nothing moved).
        """
        check_session_id(session_id)
        await anyio.lowlevel.checkpoint()
        name = f"{session_id}/{reason}/{archive_stamp(now_ms)}"
        with self._guard:
            log = self._logs.get(session_id)
            if log is None:
                return None
            if name in self._archives:
                raise FileExistsError(f"archive exists: {self.location(name)}")
            del self._logs[session_id]
            archived = TranscriptArchive(
                name=name, session_id=session_id, reason=reason, archived_at_ms=int(now_ms), size=log.size
            )
            self._archives[name] = (archived, log)
            return archived

    async def list_archives(self) -> list[TranscriptArchive]:
        """The archives, oldest first (then by name)."""
        await anyio.lowlevel.checkpoint()
        with self._guard:
            found = [archived for archived, _ in self._archives.values()]
        return sorted(found, key=lambda a: (a.archived_at_ms, a.name))

    async def delete_archive(self, name: str) -> bool:
        """Remove the archive ``name``; ``False`` when there is none."""
        await anyio.lowlevel.checkpoint()
        with self._guard:
            return self._archives.pop(name, None) is not None
