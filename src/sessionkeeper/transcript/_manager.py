"""
:class:`TranscriptManager`: create, open, read and append to one pi-compatible transcript (spec §4-11).

Writes follow DESIGN D7: every append is written at once as one complete line (the header is written
by :meth:`TranscriptManager.create`; there is no deferred first write), optionally fsynced; a v1/v2 file
is migrated in memory on load and rewritten atomically, after a 0600 backup, on its first write; a torn
last line is backed up and cut off before appending. Every file mutation goes through
``TranscriptManager._write_lines`` (the seam the write lock wraps).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Literal, TypeAlias

import anyio.to_thread

from sessionkeeper._clock import SYSTEM_CLOCK, Clock
from sessionkeeper._fs import check_safe_name
from sessionkeeper.exceptions import EntryNotFoundError
from sessionkeeper.records import (
    MessageEntry,
    UserMessage,
    encode_header,
)
from sessionkeeper.transcript._appends import TranscriptAppends
from sessionkeeper.transcript._copy import copy_branch
from sessionkeeper.transcript._create import fresh_session_header
from sessionkeeper.transcript._load import (
    TranscriptIndex,
    load_transcript,
    load_transcript_bytes,
)
from sessionkeeper.transcript._riders import AppendRider
from sessionkeeper.transcript._storage import TranscriptStorage
from sessionkeeper.transcript._storage_writer import StorageWriter
from sessionkeeper.transcript.file._follow import FileMark, PendingWrite, mark_after_load
from sessionkeeper.transcript.file._io import InlineWriteGate, TailRepair
from sessionkeeper.transcript.file._storage import FileTranscriptStorage
from sessionkeeper.transcript.file._writer import FileWriter, create_file
from sessionkeeper.transcript.lock._local import ThreadSafeEvent
from sessionkeeper.transcript.lock._lock import SessionWriteLock
from sessionkeeper.transcript.lock._settings import WriteLockSettings


__all__ = ("Durability", "TranscriptManager")


Durability: TypeAlias = Literal["fsync", "none"]
"""
``"fsync"``: every append is fsynced (``os.fsync``) before it returns (default); ``"none"``: left to
the OS. ``fdatasync`` and ``O_DSYNC`` were measured too: no faster for appends on ext4 (an append
changes the file size, so they flush the same metadata), so ``fsync`` it is.
"""

DEFAULT_INLINE_WRITE_BUDGET_MS = 1.0
"""Default :attr:`TranscriptManager.inline_write_budget_ms`."""


class TranscriptManager(TranscriptAppends):
    """
    One transcript: its header, entry tree, leaf pointer, labels and session name; appends of every
    entry type; branching; fork/clone into new transcripts (pi's ``SessionManager``, spec §4-11).

    Build one with :meth:`create`, :meth:`open` or :meth:`in_memory`. All appends are async (anyio,
    asyncio or trio). Appends within one manager are serialised. Every ``append_*`` creates a child of
    the current leaf and moves the leaf to it, and returns the new entry.

    Where the blocking I/O runs: loading, creating, forking, migration rewrites and tail repairs run in
    a worker thread. An append's own write (``open``, 1-byte tail check, ``write``, ``fsync``,
    ``close``; with :attr:`locking` and no held lock, also creating and removing the lock file when it
    is free) runs inline on the event-loop thread while recent writes finished within
    :attr:`inline_write_budget_ms` (default 1.0 ms), since a hop to a worker thread costs about as
    much as the write itself on a local disk. The trade-off: each append may block the event loop for
    up to about one budget on a fast disk; on a slow one (a network file system, a stalled journal)
    the first write over the budget blocks the loop once for as long as it takes, and the following
    writes go to a worker thread until 32 of them in a row are within the budget again (then one is
    tried inline; each failed try doubles that wait, up to 2048). A contended lock (waiting, polling,
    reclaiming a stale lock) is always handled off the loop. ``inline_write_budget_ms=0`` sends every
    write to a worker thread. An inline append is cancellable up to the write (a pending cancellation
    is raised before anything is written) but does not itself yield to the event loop, except once
    the inline writes since its last yield add up to one budget: a task appending in a loop lets other
    tasks run at least about every budget.

    pi 1.6 (issue 18, docs/pi16.md): :meth:`append_usage`, :meth:`append_system_message`,
    :meth:`append_context_edit`; :attr:`pi_generation` picks the conventions appends follow.

    The leaf is not persisted (spec §4): on load it is the last entry in file order, so navigation that
    appends nothing (:meth:`branch`, :meth:`reset_leaf`) is lost when the file is reopened.

    Several writers on one file (other managers, other processes; issue #7): each append, under the
    write lock, first picks up the complete lines other writers appended since this manager last saw
    the file (the ``fstat`` the append makes anyway says whether it grew; only the new bytes are
    read, with the loader's line rules) and adds them to the index, so ids stay unique and
    :meth:`get_branch` sees them. If the leaf was the last entry the manager knew (it was at the tip),
    the new entry becomes a child of the new last entry: writers that never navigate build one chain,
    and nothing they wrote ends up on a side branch. A manager that navigated (:meth:`branch`,
    :meth:`reset_leaf`; :meth:`branch_with_summary` hangs its entry where asked) appends its next
    entry where it chose, even on the entry that was its tip; after that it is at the tip again. A file that
    shrank, was replaced (another inode) or whose bytes before the known end changed raises
    :class:`~sessionkeeper.exceptions.TranscriptChangedError` and nothing is written: reopen it.
    :meth:`refresh` picks up without writing (readers). A line another writer is still writing is
    read once complete.
    """

    def __init__(
        self,
        index: TranscriptIndex,
        *,
        path: Path | None,
        clock: Clock,
        durability: Durability,
        inline_write_budget_ms: float = DEFAULT_INLINE_WRITE_BUDGET_MS,
        mark: FileMark | None = None,
        store: StorageWriter | None = None,
    ) -> None:
        """Internal: use :meth:`create`, :meth:`open`, :meth:`in_memory`, :meth:`create_in`."""
        gate = InlineWriteGate(inline_write_budget_ms)
        self._gate = gate
        self._file: FileWriter | None = None  # where the lines go (None: memory only)
        if path is not None:
            self._file = FileWriter(
                path,
                clock=clock,
                fsync=durability == "fsync",
                gate=gate,
                mark=mark,
                pending_rewrite=index.migrated,
            )
        super().__init__(index, path=path, clock=clock)
        self._store = store  # where the lines go when they live in a storage that is not a file
        self._durability: Durability = durability
        self._locking = True  # kept for in-memory managers (a file manager's are on its writer)
        self._lock_settings: WriteLockSettings | None = None

    # -- construction ------------------------------------------------------------------------------

    @classmethod
    async def create(
        cls,
        path: Path | str,
        *,
        cwd: str,
        session_id: str | None = None,
        parent_session: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
        durability: Durability = "fsync",
        inline_write_budget_ms: float = DEFAULT_INLINE_WRITE_BUDGET_MS,
    ) -> TranscriptManager:
        """
        Create a new transcript file holding only its header, written at once (D7).

        Args:
            path: The file to create (any name; pi uses ``<ts>_<sessionId>.jsonl``, OpenClaw
                ``<sessionId>.jsonl``). Missing directories are created with mode 0700; the file is 0600.
            cwd: Working directory recorded in the header.
            session_id: The session id; default a new UUID v7 (pi 0.73.1).
            parent_session: Path of the transcript this one was forked from (header ``parentSession``).
            clock: Time source for timestamps.
            durability: ``"fsync"`` (default) or ``"none"``.
            inline_write_budget_ms: See :attr:`inline_write_budget_ms` (default 1.0 ms; 0 = every
                append writes from a worker thread).

        Raises:
            UnsafePathError: ``session_id`` or the file name could escape its directory.
            FileExistsError: ``path`` already exists (it is never overwritten).
            ValueError: ``inline_write_budget_ms`` is negative or NaN.
            OSError: The file could not be written.
        """
        file = Path(path)
        InlineWriteGate(inline_write_budget_ms)  # validate before creating anything
        check_safe_name(file.name, what="transcript file name")
        now = clock.now_ms()
        header = fresh_session_header(now, cwd=cwd, session_id=session_id, parent_session=parent_session)

        lines = [encode_header(header)]
        mark = await anyio.to_thread.run_sync(lambda: create_file(file, lines, fsync=durability == "fsync"))
        return cls(
            TranscriptIndex.empty(header, path=file),
            path=file,
            clock=clock,
            durability=durability,
            inline_write_budget_ms=inline_write_budget_ms,
            mark=mark,
        )

    @classmethod
    def in_memory(
        cls,
        *,
        cwd: str = "",
        session_id: str | None = None,
        parent_session: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> TranscriptManager:
        """A transcript that lives only in memory (tests, ephemeral agents): same API, no file."""
        header = fresh_session_header(
            clock.now_ms(), cwd=cwd, session_id=session_id, parent_session=parent_session
        )
        return cls(TranscriptIndex.empty(header), path=None, clock=clock, durability="none")

    @classmethod
    async def open(
        cls,
        path: Path | str,
        *,
        clock: Clock = SYSTEM_CLOCK,
        durability: Durability = "fsync",
        inline_write_budget_ms: float = DEFAULT_INLINE_WRITE_BUDGET_MS,
    ) -> TranscriptManager:
        """
        Open an existing transcript (read-only until the first append; loading never writes).

        Damaged lines are skipped and reported in :attr:`diagnostics`; a v1/v2 file is migrated in
        memory (rewritten after a backup on the first write). ``durability`` and
        ``inline_write_budget_ms`` are as for :meth:`create`.

        Raises:
            TranscriptNotFoundError: The file does not exist.
            TranscriptFormatError: It is not a transcript (names the file and line); it is left as is.
            ValueError: ``inline_write_budget_ms`` is negative or NaN.
        """
        file = Path(path)
        InlineWriteGate(inline_write_budget_ms)  # validate before loading

        # the worker thread may keep its return value alive after the loop ends (issue 16, "No reference
        # cycles"): the index travels in a box this task empties, so nothing but the manager holds it
        box: list[tuple[TranscriptIndex, FileMark | None]] = []

        def load() -> None:
            index = load_transcript(file)
            box.append((index, mark_after_load(file, index)))

        await anyio.to_thread.run_sync(load)
        index, mark = box.pop()
        return cls(
            index,
            path=file,
            clock=clock,
            durability=durability,
            inline_write_budget_ms=inline_write_budget_ms,
            mark=mark,
        )

    @classmethod
    async def create_in(
        cls,
        storage: TranscriptStorage,
        *,
        cwd: str,
        session_id: str | None = None,
        parent_session: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> TranscriptManager:
        """
        Create a new transcript holding only its header in ``storage`` (issue 12: where the lines live is
        the storage's business; ``SessionStore.transcript_storage()`` says which one a store uses).

        A :class:`~sessionkeeper.transcript.FileTranscriptStorage` gives what :meth:`create` gives on
        ``storage.path_for(session_id)``, with the storage's lock settings and durability. Any other
        storage gives a manager whose appends are conditional on what it has seen
        (``TranscriptStorage.append``), following other writers as on a file; it has no write lock to
        hold (:meth:`hold_write_lock` raises ``RuntimeError``). Arguments as for :meth:`create`.

        Raises:
            UnsafePathError: ``session_id`` is not a safe name.
            FileExistsError: The transcript exists already.
        """
        header = fresh_session_header(
            clock.now_ms(), cwd=cwd, session_id=session_id, parent_session=parent_session
        )
        if isinstance(storage, FileTranscriptStorage):
            manager = await cls.create(
                storage.path_for(header.id),
                cwd=cwd,
                session_id=header.id,
                parent_session=parent_session,
                clock=clock,
                durability=storage.durability,
            )
            manager.write_lock_settings = storage.settings
            return manager
        mark = await storage.create(header.id, [encode_header(header)])
        writer = StorageWriter(storage, header.id, mark, legacy=False)
        return cls(TranscriptIndex.empty(header), path=None, clock=clock, durability="none", store=writer)

    @classmethod
    async def open_in(
        cls, storage: TranscriptStorage, session_id: str, *, clock: Clock = SYSTEM_CLOCK
    ) -> TranscriptManager:
        """
        Open the transcript of ``session_id`` in ``storage`` (see :meth:`create_in`; on a file storage,
        :meth:`open` of its file). Loading follows the file loader's rules (damaged lines skipped and
        reported in :attr:`diagnostics`); a v1/v2 transcript outside a file is read, but appends to it
        raise :class:`~sessionkeeper.exceptions.TranscriptFormatError` (a storage does not rewrite).

        Raises:
            TranscriptNotFoundError: There is no such transcript.
            TranscriptFormatError: It is not a transcript.
        """
        if isinstance(storage, FileTranscriptStorage):
            manager = await cls.open(storage.path_for(session_id), clock=clock, durability=storage.durability)
            manager.write_lock_settings = storage.settings
            return manager
        lines, mark = await storage.read(session_id)
        index = load_transcript_bytes(b"".join(line + b"\n" for line in lines))
        writer = StorageWriter(storage, session_id, mark, legacy=index.migrated)
        return cls(index, path=None, clock=clock, durability="none", store=writer)

    # -- read API ----------------------------------------------------------------------------------

    @property
    def path(self) -> Path | None:
        """The transcript file, or ``None`` for an in-memory transcript."""
        return self._path

    @property
    def storage(self) -> TranscriptStorage | None:
        """
        The storage the lines live in, for a manager of :meth:`create_in` / :meth:`open_in` on a storage
        other than a file one (memory, a database); ``None`` for a file (see :attr:`path`) or a
        transcript only in memory (:meth:`in_memory`).
        """
        return self._store.storage if self._store is not None else None

    @property
    def location(self) -> str:
        """Where the lines live: the file's path, the storage's location (:meth:`open_in`), or <memory>."""
        if self._path is not None:
            return str(self._path)
        return self._store.storage.location(self.session_id) if self._store is not None else "<memory>"

    @property
    def locking(self) -> bool:
        """Take the transcript's :class:`SessionWriteLock` around every file mutation (default ``True``)."""
        return self._file.locking if self._file is not None else self._locking

    @locking.setter
    def locking(self, value: bool) -> None:
        if self._file is not None:
            self._file.locking = value
        self._locking = value

    @property
    def write_lock_settings(self) -> WriteLockSettings | None:
        """Settings of that lock (``None``: :meth:`WriteLockSettings.from_config`, i.e. the environment)."""
        return self._file.write_lock_settings if self._file is not None else self._lock_settings

    @write_lock_settings.setter
    def write_lock_settings(self, value: WriteLockSettings | None) -> None:
        if self._file is not None:
            self._file.write_lock_settings = value
        self._lock_settings = value

    @property
    def last_repair(self) -> TailRepair | None:
        """The tail repair made by the last append, if any (torn tail cut or newline added)."""
        return self._file.last_repair if self._file is not None else None

    @property
    def last_backup(self) -> Path | None:
        """The latest backup this manager made before a repair or migration rewrite."""
        return self._file.last_backup if self._file is not None else None

    @property
    def _inline_gate(self) -> InlineWriteGate:
        return self._gate

    @_inline_gate.setter
    def _inline_gate(self, gate: InlineWriteGate) -> None:
        self._gate = gate
        if self._file is not None:
            self._file.gate = gate

    @property
    def _holds_ended(self) -> ThreadSafeEvent | None:
        return self._file._holds_ended if self._file is not None else None

    @property
    def inline_write_budget_ms(self) -> float:
        """
        Longest write, in ms, that keeps appends writing inline on the event-loop thread (default 1.0).

        ``0``: every append writes from a worker thread (``anyio.to_thread.run_sync``); ``math.inf``:
        always inline. Setting it starts over in inline mode (see the class docstring for the rules).

        Raises:
            ValueError: Set to a negative number or NaN.
        """
        return self._gate.budget_ms

    @inline_write_budget_ms.setter
    def inline_write_budget_ms(self, value: float) -> None:
        self._inline_gate = InlineWriteGate(value, timer=self._gate.timer)

    @property
    def writes_inline(self) -> bool:
        """
        Whether the next append's write is sent inline, to the event-loop thread (class docstring).

        With a lock per append, a lock that is taken, or the first lock taken in a directory, still
        sends that write to a worker thread.
        """
        return self._gate.inline and self._file is not None

    # -- writing -------------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def hold_write_lock(self, *, timeout_ms: float | None = None) -> AsyncIterator[SessionWriteLock]:
        """
        Hold the transcript's write lock for a whole run, so appends inside do not take it each time.

        Appends made while the lock is held check it first (:meth:`SessionWriteLock.ensure_held`): if
        the watchdog released it after ``max_hold_ms``, they raise
        :class:`~sessionkeeper.exceptions.LockNotHeldError` instead of writing without the lock.

        The lock is taken and given back between this manager's own writes (under the lock that
        serialises them): an append of another task of this manager that is already waiting for the
        file lock finishes first (else it would wait for a lock its own manager holds, and the
        holder's writes for it), and one in flight with the held lock is never left writing after
        the lock file is removed. Blocks nested with a reentrant lock (``allow_reentrant``) share it:
        leaving one leaves the lock held, and used, by the blocks still open.

        Raises:
            SessionBusyError: The lock was not acquired in time (OpenClaw spec §3).
        """
        lock = await self.acquire_write_lock_hold(timeout_ms=timeout_ms)
        try:
            yield lock
        finally:
            await self.release_write_lock_hold(lock)

    async def acquire_write_lock_hold(self, *, timeout_ms: float | None = None) -> SessionWriteLock:
        """
        Start holding the write lock as :meth:`hold_write_lock` does, without a ``with`` block (for a hold
        that spans calls, as ``SessionRuntime``'s turn). Every call must be paired with
        :meth:`release_write_lock_hold`; until then the lock stays held (the watchdog still releases it
        after ``max_hold_ms``).

        Raises:
            SessionBusyError: The lock was not acquired in time (OpenClaw spec §3).
            RuntimeError: The transcript is in memory (it has no lock).
        """
        if self._file is None:
            raise RuntimeError("an in-memory transcript has no write lock")
        return await self._file.acquire_hold(self._write_lock, timeout_ms=timeout_ms)

    async def release_write_lock_hold(self, lock: SessionWriteLock) -> None:
        """
        End a hold started by :meth:`acquire_write_lock_hold` (between this manager's writes, shielded
        from cancellation; a lock the watchdog already released is not removed again).
        """
        if self._file is None:
            await lock.release()
            return
        await self._file.release_hold(self._write_lock, lock)

    @property
    def held_write_lock(self) -> SessionWriteLock | None:
        """The lock :meth:`hold_write_lock` holds right now, or ``None``."""
        return self._file.held_lock if self._file is not None else None

    async def refresh(self) -> int:
        """
        Pick up the complete lines other writers appended since this manager last saw its file, without
        writing and without the write lock (for readers; appends do it by themselves).

        The lines are indexed with the loader's rules; when the leaf was the last entry the manager knew
        (at the tip, not moved by :meth:`branch` or :meth:`reset_leaf`), it moves to the new last
        entry. A line still being written is read once complete. No-op for in-memory transcripts and
        for a v1/v2 file migrated in memory (not written yet).

        Returns:
            How many entries were added.

        Raises:
            TranscriptChangedError: The file shrank, was replaced, or its bytes before the known end
                changed (reopen it).
            TranscriptNotFoundError: The file does not exist any more.
        """
        if self._file is None and self._store is None:
            return 0
        async with self._write_lock:
            at_tip = not self._navigated and self._leaf_id == self._index.leaf_id
            if self._file is not None:
                foreign, file_mark = await self._file.read_foreign()
                added = self._file.take_foreign(self._index, foreign, file_mark)
            else:
                assert self._store is not None
                foreign, mark = await self._store.read_foreign()
                added = self._store.take_foreign(self._index, foreign, mark)
            if at_tip:
                self._leaf_id = self._index.leaf_id
            return added

    async def _write_lines(self, pending: PendingWrite, rider: AppendRider | None = None) -> bool:
        """
        The seam every append writes through: ``pending`` goes to the file (:class:`FileWriter`: the
        write lock, the inline-write gate, other writers' lines, repairs and migrations) or the storage
        (with ``rider`` when it carries it: returns ``True``); a no-op for in-memory transcripts.
        """
        if self._file is not None:
            await self._file.write(self._index, pending)
        elif self._store is not None:
            return await self._store.write(self._index, pending, rider=rider)
        return False

    # -- new sessions from this one --------------------------------------------------------------------

    async def create_branched_session(
        self,
        leaf_id: str,
        *,
        path: Path | str | None,
        session_id: str | None = None,
    ) -> TranscriptManager:
        """
        Write a new transcript holding the path root -> ``leaf_id`` (spec §11, ``createBranchedSession``).

        Label entries on the path are left out; then one fresh ``label`` entry per label whose target is
        on the path is chained after the last path entry, keeping the label's original timestamp (pi
        0.73.1). Path entries are copied byte for byte, except that an entry whose parent was a label
        gets the nearest copied ancestor and a compaction whose ``firstKeptEntryId`` was a label the
        next copied entry after it (deviation ``fork-keeps-context``, :mod:`._copy`): the new
        session's context at its leaf equals this one's at ``leaf_id``, always. The header gets a new
        UUID v7 session id, this transcript's ``cwd`` and ``parentSession`` = this file's path (absent
        for in-memory sources). Written at once, whatever the content (D7).

        Args:
            leaf_id: Last entry to copy.
            path: The new file; ``None`` for an in-memory result.
            session_id: Id for the new session (default: a new UUID v7).

        Raises:
            EntryNotFoundError: ``leaf_id`` is not in the transcript.
            FileExistsError: ``path`` exists.
        """
        if leaf_id not in self._index.by_id:
            raise EntryNotFoundError(leaf_id)
        positions = self._index.path_positions(leaf_id)
        return await self._new_session_from(positions, path=path, session_id=session_id)

    async def clone(
        self, entry_id: str, *, path: Path | str | None, session_id: str | None = None
    ) -> TranscriptManager:
        """``/clone`` (position "at"): a new session with the path up to and including ``entry_id``."""
        return await self.create_branched_session(entry_id, path=path, session_id=session_id)

    async def fork(
        self, entry_id: str, *, path: Path | str | None, session_id: str | None = None
    ) -> TranscriptManager:
        """
        ``/fork`` (position "before", spec §11): ``entry_id`` must be a user message; the new session
        holds the path up to its parent (an empty session, header only, when it is a root).

        Raises:
            EntryNotFoundError: ``entry_id`` is not in the transcript.
            ValueError: ``entry_id`` is not a user message.
        """
        entry = self._index.require(entry_id)
        if not (isinstance(entry, MessageEntry) and isinstance(entry.message, UserMessage)):
            raise ValueError(f"fork target {entry_id!r} is not a user message")  # noqa: TRY004 - a value error
        if entry.parent_id is None or entry.parent_id not in self._index.by_id:
            return await self._new_session_from([], path=path, session_id=session_id)
        return await self.create_branched_session(entry.parent_id, path=path, session_id=session_id)

    async def _new_session_from(
        self, positions: list[int], *, path: Path | str | None, session_id: str | None
    ) -> TranscriptManager:
        index = self._index
        parent_session = str(self._path) if self._path is not None and path is not None else None
        now = self._clock.now_ms()
        header = fresh_session_header(now, cwd=self.cwd, session_id=session_id, parent_session=parent_session)
        target = Path(path) if path is not None else None
        new_index, lines = copy_branch(index, positions, header, path=target, now_ms=now)
        mark: FileMark | None = None
        if target is not None:
            check_safe_name(target.name, what="transcript file name")
            all_lines = [encode_header(header), *lines]
            fsync = self._durability == "fsync"
            mark = await anyio.to_thread.run_sync(lambda: create_file(target, all_lines, fsync=fsync))
        return TranscriptManager(
            new_index,
            path=target,
            clock=self._clock,
            durability=self._durability if target is not None else "none",
            inline_write_budget_ms=self.inline_write_budget_ms,
            mark=mark,
        )

    def __repr__(self) -> str:
        return (
            f"TranscriptManager({self.location}, session_id={self.session_id!r}, entries={len(self._index)})"
        )
