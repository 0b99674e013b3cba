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
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias, cast

import anyio
import anyio.lowlevel
import anyio.to_thread
import msgspec
from msgspec import UNSET, UnsetType

from sessionkeeper._clock import SYSTEM_CLOCK, Clock
from sessionkeeper._fs import check_safe_name
from sessionkeeper.exceptions import EntryNotFoundError, TranscriptChangedError, TranscriptFormatError
from sessionkeeper.records import (
    CURRENT_SESSION_VERSION,
    AgentMessage,
    BranchSummaryEntry,
    BranchSummaryMessage,
    CompactionEntry,
    CompactionSummaryMessage,
    CustomEntry,
    CustomMessage,
    CustomMessageEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    SessionInfoEntry,
    SystemMessage,
    ThinkingLevelChangeEntry,
    TranscriptEntry,
    Usage,
    UserContent,
    UserMessage,
    encode_entry,
    encode_header,
    entry_from_json,
    iso_from_ms,
    uuid7,
)
from sessionkeeper.transcript._context import SessionContext
from sessionkeeper.transcript._copy import copy_path
from sessionkeeper.transcript._diagnostics import TranscriptDiagnostics
from sessionkeeper.transcript._load import TranscriptIndex, js_trim, load_transcript, new_entry_id
from sessionkeeper.transcript._pi16_writes import Pi16Appends
from sessionkeeper.transcript._tree import TreeNode, build_tree
from sessionkeeper.transcript.file._follow import (
    FileMark,
    ForeignLines,
    PendingWrite,
    append_following,
    apply_foreign,
    mark_after_load,
    mark_of_file,
    read_foreign_lines,
)
from sessionkeeper.transcript.file._io import (
    InlineWriteGate,
    TailRepair,
    append_lines,
    create_exclusive,
    rewrite_lines,
)
from sessionkeeper.transcript.lock._local import ThreadSafeEvent, ThreadSafeLock
from sessionkeeper.transcript.lock._lock import SessionWriteLock
from sessionkeeper.transcript.lock._registry import default_settings
from sessionkeeper.transcript.lock._run import run_locked, run_locked_now
from sessionkeeper.transcript.lock._settings import WriteLockSettings


__all__ = ("Durability", "TranscriptManager")


def _new_write_lock() -> ThreadSafeLock:
    """
    The lock that serialises this manager's appends, from any task, event loop or thread (issue 15
    item 6: with ``anyio.Lock`` a manager used by two threads, each with its own ``anyio.run``, deadlocked
    after the first append).

    Uncontended, it is taken without a trip through the event loop (the write checks for cancellation
    right after: ``checkpoint_if_cancelled`` before an inline write, the worker-thread call otherwise).
    """
    return ThreadSafeLock()


Durability: TypeAlias = Literal["fsync", "none"]
"""
``"fsync"``: every append is fsynced (``os.fsync``) before it returns (default); ``"none"``: left to
the OS. ``fdatasync`` and ``O_DSYNC`` were measured too: no faster for appends on ext4 (an append
changes the file size, so they flush the same metadata), so ``fsync`` it is.
"""

DEFAULT_INLINE_WRITE_BUDGET_MS = 1.0
"""Default :attr:`TranscriptManager.inline_write_budget_ms`."""


def _draw_entry_id(taken: dict[str, int]) -> str:
    """
    :func:`new_entry_id`'s rule with a faster first draw: 8 random hex digits (32 bits from
    ``os.urandom``, exactly what the first 8 hex digits of a UUID v4 hold); on a collision it falls
    back to :func:`new_entry_id` (redraws, then a full UUID after 100 collisions; spec §4).
    """
    candidate = os.urandom(4).hex()
    return candidate if candidate not in taken else new_entry_id(taken)


def _check_unchanged_since_load(path: Path, index: TranscriptIndex) -> None:
    """
    Before a migration rewrite (which replaces the whole file with what was loaded): refuse when the
    file changed since it was loaded (another writer appended, or migrated it with other ids), since
    the rewrite would drop those lines.

    Raises:
        TranscriptChangedError: The file changed; nothing was written (reopen it and append again).
    """
    if index.source_stat is None:
        return
    try:
        st = path.stat()
    except FileNotFoundError:
        current = None
    else:
        current = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if current != index.source_stat:
        raise TranscriptChangedError(
            "transcript changed on disk since it was loaded, and the rewrite that migrates "
            "it would overwrite the change; nothing was written (reopen it and append again)",
            path=path,
        )


class TranscriptManager(Pi16Appends):
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
    ) -> None:
        """Internal: use :meth:`create`, :meth:`open` or :meth:`in_memory`."""
        self._inline_gate = InlineWriteGate(inline_write_budget_ms)
        self._stamp_second: int | None = None  # the second whose ISO prefix is in _stamp_prefix
        self._stamp_prefix = ""
        self._index = index
        self._path = path
        self._clock = clock
        self._durability: Durability = durability
        self._leaf_id = index.leaf_id
        self._pending_rewrite = index.migrated
        self._write_lock = _new_write_lock()
        self.last_repair: TailRepair | None = None
        """The tail repair made by the last append, if any (torn tail cut or newline added)."""
        self.last_backup: Path | None = None
        """The latest backup this manager made before a repair or migration rewrite."""
        self.locking = True
        """Take the transcript's :class:`SessionWriteLock` around every file mutation (default ``True``)."""
        self.write_lock_settings: WriteLockSettings | None = None
        """Settings of that lock (``None``: :meth:`WriteLockSettings.from_config`, i.e. the environment)."""
        self._held_lock: SessionWriteLock | None = None
        self._holds: list[SessionWriteLock] = []  # open hold_write_lock() blocks (nested: reentrant)
        self._holds_ended: ThreadSafeEvent | None = None  # set when the last open block ends
        self._mark: FileMark | None = None  # how much of the file the index holds (see _follow)
        self._navigated = False  # branch()/reset_leaf() since the last append: do not follow the tip

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
        header = cls._new_header(now, cwd=cwd, session_id=session_id, parent_session=parent_session)

        def write() -> FileMark:
            create_exclusive(file, [encode_header(header)], fsync=durability == "fsync")
            return mark_of_file(file, lines=1)

        mark = await anyio.to_thread.run_sync(write)
        manager = cls(
            TranscriptIndex.empty(header, path=file),
            path=file,
            clock=clock,
            durability=durability,
            inline_write_budget_ms=inline_write_budget_ms,
        )
        manager._mark = mark
        return manager

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
        header = cls._new_header(
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

        def load() -> tuple[TranscriptIndex, FileMark | None]:
            index = load_transcript(file)
            return index, mark_after_load(file, index)

        index, mark = await anyio.to_thread.run_sync(load)
        manager = cls(
            index,
            path=file,
            clock=clock,
            durability=durability,
            inline_write_budget_ms=inline_write_budget_ms,
        )
        manager._mark = mark
        return manager

    @staticmethod
    def _new_header(
        now_ms: int, *, cwd: str, session_id: str | None, parent_session: str | None
    ) -> SessionHeader:
        sid = session_id if session_id is not None else uuid7(now_ms)
        check_safe_name(sid, what="session id")
        return SessionHeader(
            version=CURRENT_SESSION_VERSION,
            id=sid,
            timestamp=iso_from_ms(now_ms),
            cwd=cwd,
            parent_session=parent_session if parent_session is not None else UNSET,
        )

    # -- read API ----------------------------------------------------------------------------------

    @property
    def path(self) -> Path | None:
        """The transcript file, or ``None`` for an in-memory transcript."""
        return self._path

    @property
    def inline_write_budget_ms(self) -> float:
        """
        Longest write, in ms, that keeps appends writing inline on the event-loop thread (default 1.0).

        ``0``: every append writes from a worker thread (``anyio.to_thread.run_sync``); ``math.inf``:
        always inline. Setting it starts over in inline mode (see the class docstring for the rules).

        Raises:
            ValueError: Set to a negative number or NaN.
        """
        return self._inline_gate.budget_ms

    @inline_write_budget_ms.setter
    def inline_write_budget_ms(self, value: float) -> None:
        self._inline_gate = InlineWriteGate(value, timer=self._inline_gate.timer)

    @property
    def writes_inline(self) -> bool:
        """
        Whether the next append's write is sent inline, to the event-loop thread (class docstring).

        With a lock per append, a lock that is taken, or the first lock taken in a directory, still
        sends that write to a worker thread.
        """
        return self._inline_gate.inline and self._path is not None

    @property
    def header(self) -> SessionHeader:
        """The session header (version 3 after an in-memory migration)."""
        return self._index.header

    @property
    def session_id(self) -> str:
        """The header's session id."""
        return self._index.header.id

    @property
    def cwd(self) -> str:
        """The header's working directory (``""`` when absent)."""
        cwd = self._index.header.cwd
        return cwd if isinstance(cwd, str) else ""

    @property
    def leaf_id(self) -> str | None:
        """The current leaf: new entries become its children; ``None`` = before the first entry."""
        return self._leaf_id

    @property
    def session_name(self) -> str | None:
        """The latest ``session_info`` name in file order (trimmed), ``None`` when unset or cleared."""
        return self._index.session_name

    @property
    def labels(self) -> dict[str, str]:
        """Resolved labels: target entry id -> label (a copy)."""
        return dict(self._index.labels)

    @property
    def diagnostics(self) -> TranscriptDiagnostics:
        """What loading found (torn tail, invalid lines, duplicates, legacy version, ...)."""
        return self._index.diagnostics

    @property
    def index(self) -> TranscriptIndex:
        """The underlying lazy index (advanced use: positions, kinds, raw lines)."""
        return self._index

    def entries(self) -> list[TranscriptEntry]:
        """All entries in file order, header excluded, duplicates included (pi's ``getEntries``)."""
        return list(self._index.entries())

    def get_entry(self, entry_id: str) -> TranscriptEntry | None:
        """The entry with ``entry_id`` (the later one when the id is duplicated), or ``None``."""
        return self._index.get(entry_id)

    def get_label(self, entry_id: str) -> str | None:
        """The label of ``entry_id``, or ``None``."""
        return self._index.labels.get(entry_id)

    def get_children(self, entry_id: str) -> list[TranscriptEntry]:
        """Entries whose parent is ``entry_id``, in file order."""
        return self._index.children(entry_id)

    def get_branch(self, leaf_id: str | None = None) -> list[TranscriptEntry]:
        """
        The path from a root to ``leaf_id`` (default: the current leaf), root first (``getBranch``).

        Empty when the leaf is ``None`` or unknown. A ``parentId`` cycle ends the walk (see
        :func:`walk_path`).
        """
        return self._index.branch(leaf_id if leaf_id is not None else self._leaf_id)

    def build_session_context(self, leaf_id: str | UnsetType | None = UNSET) -> SessionContext:
        """
        The model context for ``leaf_id`` (default: the current leaf), exactly as pi (spec §9).

        ``None`` gives the empty context; an id that is not present falls back to the last entry.
        Only the entries the context needs are decoded.
        """
        if leaf_id is UNSET:
            if self._leaf_id is None and not self._navigated:
                return self._index.build_context()  # no entry has an id: pi starts from the last entry
            leaf_id = self._leaf_id
        return self._index.build_context(leaf_id)

    def tree(self) -> tuple[TreeNode, ...]:
        """The session tree (roots, children sorted by timestamp, labels resolved); see :func:`build_tree`."""
        index = self._index
        indexed = (index.entry_at(pos) for pos in sorted(index.by_id.values()))
        return build_tree(indexed, labels=index.labels, label_timestamps=index.label_timestamps)

    # -- navigation ----------------------------------------------------------------------------------

    def branch(self, entry_id: str) -> None:
        """
        Move the leaf to an existing entry; the next append starts a new branch there (not persisted),
        whatever other writers appended meanwhile (it does not follow the tip, see the class docstring).

        Raises:
            EntryNotFoundError: ``entry_id`` is not in the transcript.
        """
        if entry_id not in self._index.by_id:
            raise EntryNotFoundError(entry_id)
        self._leaf_id = entry_id
        self._navigated = True

    def reset_leaf(self) -> None:
        """Set the leaf to ``None``: the next append creates a new root (not persisted; no tip following)."""
        self._leaf_id = None
        self._navigated = True

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
        if self._path is None:
            raise RuntimeError("an in-memory transcript has no write lock")
        settings = self.write_lock_settings if self.write_lock_settings is not None else default_settings()
        wait_ms = settings.acquire_timeout_ms if timeout_ms is None else timeout_ms
        deadline = anyio.current_time() + wait_ms / 1000
        while True:
            async with self._write_lock:
                if not self._holds or settings.allow_reentrant or anyio.current_time() >= deadline:
                    lock = await SessionWriteLock.acquire(
                        self._path,
                        settings=self.write_lock_settings,
                        clock=self._clock,
                        timeout_ms=max(0.0, (deadline - anyio.current_time()) * 1000)
                        if self._holds
                        else timeout_ms,
                    )
                    self._holds.append(lock)
                    self._held_lock = lock
                    break
                # another task of this manager holds the lock for a run: wait for its end without
                # the manager's write lock (its writes need it), then take the lock as above
                if self._holds_ended is None:
                    self._holds_ended = ThreadSafeEvent()
                ended = self._holds_ended
            with anyio.move_on_after(deadline - anyio.current_time()):
                await ended.wait()
        return lock

    async def release_write_lock_hold(self, lock: SessionWriteLock) -> None:
        """
        End a hold started by :meth:`acquire_write_lock_hold` (between this manager's writes, shielded
        from cancellation; a lock the watchdog already released is not removed again).
        """
        with anyio.CancelScope(shield=True):
            try:
                async with self._write_lock:
                    if lock in self._holds:
                        self._holds.remove(lock)
                    self._held_lock = self._holds[-1] if self._holds else None
            finally:
                await lock.release()
                if not self._holds and self._holds_ended is not None:
                    self._holds_ended.set()
                    self._holds_ended = None

    @property
    def held_write_lock(self) -> SessionWriteLock | None:
        """The lock :meth:`hold_write_lock` holds right now, or ``None``."""
        return self._held_lock

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
        path = self._path
        if path is None or self._pending_rewrite:
            return 0
        async with self._write_lock:
            mark = self._mark
            if mark is None:
                return 0
            foreign, new_mark = await anyio.to_thread.run_sync(read_foreign_lines, path, mark)
            at_tip = not self._navigated and self._leaf_id == self._index.leaf_id
            added = self._take_foreign(foreign, new_mark)
            if at_tip:
                self._leaf_id = self._index.leaf_id
            return added

    def _take_foreign(self, foreign: ForeignLines | None, mark: FileMark | None) -> int:
        """Index other writers' lines picked up under ``mark`` (on the thread that owns the index)."""
        if mark is not None:
            self._mark = mark
        return apply_foreign(self._index, foreign) if foreign is not None else 0

    async def _write_lines(self, pending: PendingWrite) -> None:
        """
        The one place where this manager mutates its file: append ``pending.lines`` (complete JSON
        lines, without newlines) in one write, after picking up other writers' lines (class
        docstring; ``pending`` is re-linked when it follows the tip). A pending migration rewrites the
        whole file instead (after a backup); a torn tail is backed up and cut first. No-op for
        in-memory transcripts.

        Runs under the transcript's write lock: the one held by :meth:`hold_write_lock` (checked on
        disk first), else one taken for this write alone (unless :attr:`locking` is ``False``). The
        plain append runs inline or in a worker thread as the inline-write gate says (class
        docstring); a rewrite, a tail repair and a contended lock always go to a worker thread.
        """
        path = self._path
        if path is None:
            return
        held = self._held_lock
        if held is not None:
            held.ensure_held()
        if self._pending_rewrite:
            await self._rewrite(path, pending, held)
            self._take_foreign(None, pending.mark)
            return
        fsync = self._durability == "fsync"
        gate = self._inline_gate
        mark = self._mark

        def plain() -> bool:
            """Verify the held lock, then pick up and append if the tail is clean; timed for the gate."""
            if held is not None:
                held.verify_file()
            start = gate.timer()
            try:
                return append_following(path, pending, mark=mark, fsync=fsync)
            finally:
                gate.record(gate.timer() - start)

        if gate.inline:
            if gate.take_yield():
                await anyio.lowlevel.checkpoint()
            else:
                await anyio.lowlevel.checkpoint_if_cancelled()
            if held is not None:
                written = plain()
            elif self.locking:
                attempt = run_locked_now(path, plain, settings=self.write_lock_settings, clock=self._clock)
                written = attempt is not None and bool(attempt.result)
            else:
                written = plain()
            if written:
                self.last_repair = None
                self._take_foreign(pending.foreign, pending.mark)
                return
        now = self._clock.now_ms()

        def in_thread() -> TailRepair | None:
            if plain():
                return None
            for _ in range(3):  # repair the tail (cut a torn line, end a whole one), then append
                repair = append_lines(path, (), fsync=False, now_ms=now)
                if plain():
                    return repair
            raise TranscriptChangedError(
                "its last line kept changing while this manager repaired it (a writer that does not "
                "take the write lock?); nothing was written",
                path=path,
            )

        if held is None and self.locking:
            repair = await run_locked(path, in_thread, settings=self.write_lock_settings, clock=self._clock)
        else:
            repair = await anyio.to_thread.run_sync(in_thread)
        self.last_repair = repair
        if repair is not None and repair.backup_path is not None:
            self.last_backup = repair.backup_path
        self._take_foreign(pending.foreign, pending.mark)

    async def _rewrite(self, path: Path, pending: PendingWrite, held: SessionWriteLock | None) -> None:
        """The first write of a migrated v1/v2 file: backup, then the whole file atomically (D7)."""
        fsync = self._durability == "fsync"
        now = self._clock.now_ms()
        index = self._index

        def write() -> Path | None:
            if held is not None:
                held.verify_file()
            _check_unchanged_since_load(path, index)
            content = [encode_header(index.header_raw), *index.lines, *pending.lines]
            backup = rewrite_lines(path, content, fsync=fsync, now_ms=now)
            pending.mark = mark_of_file(path, lines=len(content))
            return backup

        if held is None and self.locking:
            backup = await run_locked(path, write, settings=self.write_lock_settings, clock=self._clock)
        else:
            backup = await anyio.to_thread.run_sync(write)
        self.last_backup = backup
        self._pending_rewrite = False

    def _timestamp(self) -> str:
        """``iso_from_ms(clock.now_ms())``, reusing the formatted date and time of the same second."""
        second, millis = divmod(self._clock.now_ms(), 1000)
        if second != self._stamp_second:
            self._stamp_prefix = iso_from_ms(second * 1000)[:-4]  # drop "000Z"
            self._stamp_second = second
        return f"{self._stamp_prefix}{millis:03d}Z"

    async def _append(self, build: Any, *, follow: bool = True) -> Any:
        """
        Build, write and index one entry as a child of the leaf; ``follow``: move it under the new last
        entry when other writers appended and the leaf was at the tip (class docstring).

        ``build(id, parent_id, timestamp)`` runs under the manager's write lock, so it sees the index
        and leaf the entry is written against; when it returns ``None`` nothing is written and
        ``None`` is returned (a compaction landing that is superseded, see ``compaction._landing``).
        """
        async with self._write_lock:
            at_tip = follow and not self._navigated and self._leaf_id == self._index.leaf_id
            entry_id = _draw_entry_id(self._index.by_id)
            timestamp = self._timestamp()
            entry: TranscriptEntry | None = build(entry_id, self._leaf_id, timestamp)
            if entry is None:
                return None
            try:
                line = encode_entry(entry)
            except (TypeError, ValueError, NotImplementedError, OverflowError) as err:
                raise TranscriptFormatError(
                    f"cannot write a {type(entry).__name__} as JSON: {err}; nothing was written",
                    path=self._path,
                ) from err
            if b"\xef\xbf\xbd" in line:  # lone surrogates were replaced: keep what the file holds
                entry = entry_from_json(msgspec.json.decode(line))
            pending = PendingWrite([entry], [line], follow=at_tip, known=self._index.by_id)
            await self._write_lines(pending)
            entry, line = pending.entries[0], pending.lines[0]
            self._index.add(entry, line)
            self._leaf_id = entry.id
            self._navigated = False
            return entry

    async def append_message(self, message: AgentMessage) -> MessageEntry:
        """
        Append a ``message`` entry (spec §5.1) for a user, assistant, toolResult or bashExecution message.

        Raises:
            TypeError: ``message`` is a compaction/branch summary or a custom message: those are
                stored as their own entry types (:meth:`append_compaction`,
                :meth:`branch_with_summary`, :meth:`append_custom_message`; spec §16.5).
            OSError: The write failed; nothing was added.
        """
        if isinstance(message, CompactionSummaryMessage | BranchSummaryMessage | CustomMessage):
            raise TypeError(
                f"{type(message).__name__} is not stored as a message entry; use the dedicated append method"
            )
        result: MessageEntry = await self._append(
            lambda i, p, t: MessageEntry(id=i, parent_id=p, timestamp=t, message=message)
        )
        return result

    async def append_messages(self, messages: Sequence[AgentMessage]) -> list[MessageEntry]:
        """
        Append several ``message`` entries, each a child of the previous one, in one write.

        What :meth:`append_message` does for each message, with one lock round, one thread hop and
        one fsync for all of them: the durable unit of an agent turn (reply and tool results). A
        crash during the write leaves a prefix of complete entries and at most a torn last line,
        which the next append cuts (as for any append).

        Raises:
            TypeError: A message is stored as its own entry type (see :meth:`append_message`);
                nothing was written.
            TranscriptFormatError: A message holds a value JSON cannot represent; nothing was written.
            OSError: The write failed; nothing was added.
        """
        for message in messages:
            if isinstance(message, CompactionSummaryMessage | BranchSummaryMessage | CustomMessage):
                raise TypeError(
                    f"{type(message).__name__} is not stored as a message entry;"
                    " use the dedicated append method"
                )
        if not messages:
            return []
        async with self._write_lock:
            at_tip = not self._navigated and self._leaf_id == self._index.leaf_id
            timestamp = self._timestamp()
            parent = self._leaf_id
            drawn: set[str] = set()
            entries: list[MessageEntry] = []
            lines: list[bytes] = []
            for message in messages:
                entry_id = _draw_entry_id(self._index.by_id)
                while entry_id in drawn:
                    entry_id = _draw_entry_id(self._index.by_id)
                drawn.add(entry_id)
                entry = MessageEntry(id=entry_id, parent_id=parent, timestamp=timestamp, message=message)
                try:
                    line = encode_entry(entry)
                except (TypeError, ValueError, NotImplementedError, OverflowError) as err:
                    raise TranscriptFormatError(
                        f"cannot write a {type(entry).__name__} as JSON: {err}; nothing was written",
                        path=self._path,
                    ) from err
                if b"\xef\xbf\xbd" in line:  # lone surrogates were replaced: keep what the file holds
                    decoded = entry_from_json(msgspec.json.decode(line))
                    assert isinstance(decoded, MessageEntry)
                    entry = decoded
                entries.append(entry)
                lines.append(line)
                parent = entry_id
            pending = PendingWrite(entries, lines, follow=at_tip, known=self._index.by_id)
            await self._write_lines(pending)
            for written, line in zip(pending.entries, pending.lines, strict=True):
                self._index.add(written, line)
            self._leaf_id = pending.entries[-1].id
            self._navigated = False
            return cast("list[MessageEntry]", pending.entries)  # re-linked at most, same types

    async def append_thinking_level_change(self, thinking_level: str) -> ThinkingLevelChangeEntry:
        """Append a ``thinking_level_change`` (spec §5.2): ``off|minimal|low|medium|high|xhigh``."""
        result: ThinkingLevelChangeEntry = await self._append(
            lambda i, p, t: ThinkingLevelChangeEntry(
                id=i, parent_id=p, timestamp=t, thinking_level=thinking_level
            )
        )
        return result

    async def append_model_change(self, provider: str, *, model_id: str) -> ModelChangeEntry:
        """Append a ``model_change`` (spec §5.3)."""
        result: ModelChangeEntry = await self._append(
            lambda i, p, t: ModelChangeEntry(
                id=i, parent_id=p, timestamp=t, provider=provider, model_id=model_id
            )
        )
        return result

    async def append_compaction(
        self,
        *,
        summary: str,
        first_kept_entry_id: str | None,
        tokens_before: int,
        details: Any | UnsetType = UNSET,
        from_hook: bool | UnsetType = UNSET,
        usage: Usage | UnsetType = UNSET,
        system_message: SystemMessage | UnsetType | None = UNSET,
    ) -> CompactionEntry:
        """
        Append a ``compaction`` entry (spec §5.4, §13.5). ``first_kept_entry_id`` is not validated,
        as in pi (hook-supplied compactions are written verbatim).

        Args:
            summary: The summary text.
            first_kept_entry_id: First entry kept verbatim (on the path before this entry). ``None`` writes
                a strict checkpoint: the entry's own id, so the rebuilt context starts from the summary and
                keeps nothing before it (OpenClaw's hardened boundary, spec openclaw.md §5.8; pi §9 6b).
            tokens_before: Context tokens before compaction.
            details: pi writes ``{"readFiles": [...], "modifiedFiles": [...]}``; omitted when ``UNSET``.
            from_hook: ``False`` for our own compactions, ``True`` when a hook supplied it.
            usage: Usage of the summariser call(s) (pi 1.6); omitted when ``UNSET``.
            system_message: pi 1.6 ``systemMessage``, the complete prompt and tools at this boundary.
                ``UNSET`` (default): on a :attr:`pi_generation` ``"1.6"`` transcript, the current system
                message of the leaf's context (as pi 1.6.0's ``appendCompaction``), else none;
                ``None``: none.
        """
        result: CompactionEntry = await self._append(
            lambda i, p, t: CompactionEntry(
                id=i,
                parent_id=p,
                timestamp=t,
                summary=summary,
                first_kept_entry_id=i if first_kept_entry_id is None else first_kept_entry_id,
                tokens_before=tokens_before,
                details=details,
                usage=usage,
                from_hook=from_hook,
                system_message=self._boundary_system_message(system_message, p, t),
            )
        )
        return result

    async def append_custom(self, custom_type: str, *, data: Any | UnsetType = UNSET) -> CustomEntry:
        """Append a ``custom`` entry: extension state, never in the model context (spec §5.6)."""
        result: CustomEntry = await self._append(
            lambda i, p, t: CustomEntry(custom_type=custom_type, data=data, id=i, parent_id=p, timestamp=t)
        )
        return result

    async def append_custom_message(
        self,
        custom_type: str,
        *,
        content: str | list[UserContent],
        display: bool = True,
        details: Any | UnsetType = UNSET,
    ) -> CustomMessageEntry:
        """Append a ``custom_message``: sent to the model as a user message (spec §5.7)."""
        result: CustomMessageEntry = await self._append(
            lambda i, p, t: CustomMessageEntry(
                custom_type=custom_type,
                content=content,
                display=display,
                details=details,
                id=i,
                parent_id=p,
                timestamp=t,
            )
        )
        return result

    async def append_label(self, target_id: str, label: str | None) -> LabelEntry:
        """
        Set (non-empty ``label``) or clear (``None`` or ``""``) the label of ``target_id`` (spec §5.8).

        An id this manager has not seen is looked for among the lines other writers appended since it
        last read the file (:meth:`refresh`) before the call fails.

        Raises:
            EntryNotFoundError: ``target_id`` is not in the transcript.
            TranscriptChangedError: Looking for it found the file shrunk or replaced (see :meth:`refresh`).
        """
        if target_id not in self._index.by_id:
            await self.refresh()
            if target_id not in self._index.by_id:
                raise EntryNotFoundError(target_id)
        value: str | UnsetType = UNSET if label is None else label
        result: LabelEntry = await self._append(
            lambda i, p, t: LabelEntry(id=i, parent_id=p, timestamp=t, target_id=target_id, label=value)
        )
        return result

    async def append_session_info(self, name: str) -> SessionInfoEntry:
        """Set the session's display name (stored trimmed; an empty name clears it, spec §5.9)."""
        result: SessionInfoEntry = await self._append(
            lambda i, p, t: SessionInfoEntry(id=i, parent_id=p, timestamp=t, name=js_trim(name))
        )
        return result

    async def branch_with_summary(
        self,
        entry_id: str | None,
        summary: str,
        *,
        details: Any | UnsetType = UNSET,
        from_hook: bool | UnsetType = UNSET,
        usage: Usage | UnsetType = UNSET,
    ) -> BranchSummaryEntry:
        """
        Move the leaf to ``entry_id`` (``None``: before the first entry) and append a ``branch_summary``
        child there (spec §4, §5.5). ``fromId`` follows :attr:`pi_generation`: ``"0.73"`` the target
        ``entry_id`` (``"root"`` for ``None``), ``"1.6"`` the abandoned leaf (``"root"`` when there was
        none). ``usage``: the summariser call's usage (pi 1.6).

        Raises:
            EntryNotFoundError: ``entry_id`` is not in the transcript.
        """
        if entry_id is not None and entry_id not in self._index.by_id:
            raise EntryNotFoundError(entry_id)
        from_id = self._summary_from_id(entry_id)
        self._leaf_id = entry_id
        result: BranchSummaryEntry = await self._append(
            lambda i, p, t: BranchSummaryEntry(
                id=i,
                parent_id=entry_id,
                timestamp=t,
                from_id=from_id,
                summary=summary,
                details=details,
                usage=usage,
                from_hook=from_hook,
            ),
            follow=False,  # hangs where it was asked to, whatever others appended
        )
        return result

    async def append_branch_summary(
        self,
        summary: str,
        *,
        details: Any | UnsetType = UNSET,
        from_hook: bool | UnsetType = UNSET,
        usage: Usage | UnsetType = UNSET,
    ) -> BranchSummaryEntry:
        """Append a ``branch_summary`` at the current leaf (:meth:`branch_with_summary` there)."""
        return await self.branch_with_summary(
            self._leaf_id, summary, details=details, from_hook=from_hook, usage=usage
        )

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
        header = self._new_header(now, cwd=self.cwd, session_id=session_id, parent_session=parent_session)
        target = Path(path) if path is not None else None
        new_index = TranscriptIndex.empty(header, path=target)
        copied, lines = copy_path(index, positions, leave_out=lambda kind: kind == "label")
        for entry, line in zip(copied, lines, strict=True):
            new_index.add(entry, line)
        path_ids = {entry.id for entry in copied}
        parent: str | None = copied[-1].id if copied else None
        taken: set[str] = set(path_ids)
        for target_id, label in index.labels.items():
            if target_id not in path_ids:
                continue
            label_id = new_entry_id(taken)
            taken.add(label_id)
            entry = LabelEntry(
                id=label_id,
                parent_id=parent,
                timestamp=index.label_timestamps.get(target_id, iso_from_ms(now)),
                target_id=target_id,
                label=label,
            )
            line = encode_entry(entry)
            new_index.add(entry, line)
            lines.append(line)
            parent = label_id
        if target is not None:
            check_safe_name(target.name, what="transcript file name")
            all_lines = [encode_header(header), *lines]
            fsync = self._durability == "fsync"

            def write() -> FileMark:
                create_exclusive(target, all_lines, fsync=fsync)
                return mark_of_file(target, lines=len(all_lines))

            mark: FileMark | None = await anyio.to_thread.run_sync(write)
        else:
            mark = None
        manager = TranscriptManager(
            new_index,
            path=target,
            clock=self._clock,
            durability=self._durability if target is not None else "none",
            inline_write_budget_ms=self.inline_write_budget_ms,
        )
        manager._mark = mark
        return manager

    def __repr__(self) -> str:
        where = str(self._path) if self._path is not None else "<memory>"
        return f"TranscriptManager({where!s}, session_id={self.session_id!r}, entries={len(self._index)})"
