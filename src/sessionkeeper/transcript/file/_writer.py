"""
:class:`FileWriter`: where one :class:`~sessionkeeper.transcript.TranscriptManager`'s lines go when
its transcript is a pi JSONL file (DESIGN D7): appends under the write lock, inline on the event-loop
thread while they are fast, after picking up other writers' lines; torn tails repaired; a v1/v2 file
rewritten once, after a backup; the write lock held for a run.

The manager keeps what the transcript *is* (index, leaf); this keeps the file state (its mark, the
inline-write gate, the lock holds) and is the one place that mutates the file.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.lowlevel
import anyio.to_thread

from sessionkeeper._clock import Clock
from sessionkeeper.exceptions import TranscriptChangedError
from sessionkeeper.records import encode_header
from sessionkeeper.transcript._index import TranscriptIndex
from sessionkeeper.transcript.file._follow import (
    FileMark,
    ForeignLines,
    PendingWrite,
    append_following,
    apply_foreign,
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


__all__ = ("FileWriter", "create_file")


def create_file(path: Path, lines: list[bytes], *, fsync: bool) -> FileMark:
    """Create ``path`` holding ``lines`` at once (never overwriting) and return its mark (blocking)."""
    create_exclusive(path, lines, fsync=fsync)
    return mark_of_file(path, lines=len(lines))


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


class FileWriter:
    """
    The file side of one manager (module docstring; the rules are on ``TranscriptManager``).

    Attributes:
        path: The transcript file.
        clock: Time source (lock payloads, backups).
        fsync: Every write is fsynced.
        gate: The inline-write gate (``TranscriptManager.inline_write_budget_ms``).
        mark: How much of the file the manager's index holds (``None``: take the file as it is).
        pending_rewrite: The file was migrated in memory; its first write rewrites it whole.
        last_repair, last_backup, locking, write_lock_settings: As on ``TranscriptManager``.
        held_lock: The lock a hold holds right now, or ``None``.
    """

    def __init__(
        self,
        path: Path,
        *,
        clock: Clock,
        fsync: bool,
        gate: InlineWriteGate,
        mark: FileMark | None,
        pending_rewrite: bool,
    ) -> None:
        self.path: Path = path
        self.clock: Clock = clock
        self.fsync: bool = fsync
        self.gate: InlineWriteGate = gate
        self.mark: FileMark | None = mark
        self.pending_rewrite: bool = pending_rewrite
        self.last_repair: TailRepair | None = None
        self.last_backup: Path | None = None
        self.locking: bool = True
        self.write_lock_settings: WriteLockSettings | None = None
        self.held_lock: SessionWriteLock | None = None
        self._holds: list[SessionWriteLock] = []  # open holds (nested: reentrant)
        self._holds_ended: ThreadSafeEvent | None = None  # set when the last open hold ends

    def take_foreign(
        self, index: TranscriptIndex, foreign: ForeignLines | None, mark: FileMark | None
    ) -> int:
        """Index other writers' lines picked up under ``mark`` (on the thread that owns the index)."""
        if mark is not None:
            self.mark = mark
        return apply_foreign(index, foreign) if foreign is not None else 0

    async def read_foreign(self) -> tuple[ForeignLines | None, FileMark | None]:
        """The complete lines other writers appended since the mark (``(None, None)``: nothing to follow)."""
        mark = self.mark
        if mark is None or self.pending_rewrite:
            return None, None
        return await anyio.to_thread.run_sync(read_foreign_lines, self.path, mark)

    # -- holding the lock --------------------------------------------------------------------------

    async def acquire_hold(self, serial: ThreadSafeLock, *, timeout_ms: float | None) -> SessionWriteLock:
        """
        ``TranscriptManager.acquire_write_lock_hold``: take the lock between the manager's writes
        (``serial`` is the lock that serialises them).
        """
        settings = self.write_lock_settings if self.write_lock_settings is not None else default_settings()
        wait_ms = settings.acquire_timeout_ms if timeout_ms is None else timeout_ms
        deadline = anyio.current_time() + wait_ms / 1000
        while True:
            async with serial:
                if not self._holds or settings.allow_reentrant or anyio.current_time() >= deadline:
                    lock = await SessionWriteLock.acquire(
                        self.path,
                        settings=self.write_lock_settings,
                        clock=self.clock,
                        timeout_ms=max(0.0, (deadline - anyio.current_time()) * 1000)
                        if self._holds
                        else timeout_ms,
                    )
                    self._holds.append(lock)
                    self.held_lock = lock
                    return lock
                # another task of this manager holds the lock for a run: wait for its end without
                # the manager's write lock (its writes need it), then take the lock as above
                if self._holds_ended is None:
                    self._holds_ended = ThreadSafeEvent()
                ended = self._holds_ended
            with anyio.move_on_after(deadline - anyio.current_time()):
                await ended.wait()

    async def release_hold(self, serial: ThreadSafeLock, lock: SessionWriteLock) -> None:
        """``TranscriptManager.release_write_lock_hold`` (shielded from cancellation)."""
        with anyio.CancelScope(shield=True):
            try:
                async with serial:
                    if lock in self._holds:
                        self._holds.remove(lock)
                    self.held_lock = self._holds[-1] if self._holds else None
            finally:
                await lock.release()
                if not self._holds and self._holds_ended is not None:
                    self._holds_ended.set()
                    self._holds_ended = None

    # -- writing -----------------------------------------------------------------------------------

    async def write(self, index: TranscriptIndex, pending: PendingWrite) -> None:
        """
        The one place where the manager mutates its file: append ``pending.lines`` (complete JSON
        lines, without newlines) in one write, after picking up other writers' lines (``pending`` is
        re-linked when it follows the tip; the lines picked up are indexed into ``index``). A pending
        migration rewrites the whole file instead (after a backup); a torn tail is backed up and cut
        first.

        Runs under the transcript's write lock: the one held by a hold (checked on disk first), else
        one taken for this write alone (unless :attr:`locking` is ``False``). The plain append runs
        inline or in a worker thread as the inline-write gate says; a rewrite, a tail repair and a
        contended lock always go to a worker thread.
        """
        path = self.path
        held = self.held_lock
        if held is not None:
            held.ensure_held()
        if self.pending_rewrite:
            await self._rewrite(index, pending, held)
            self.take_foreign(index, None, pending.mark)
            return
        fsync = self.fsync
        gate = self.gate
        mark = self.mark

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
                attempt = run_locked_now(path, plain, settings=self.write_lock_settings, clock=self.clock)
                written = attempt is not None and bool(attempt.result)
            else:
                written = plain()
            if written:
                self.last_repair = None
                self.take_foreign(index, pending.foreign, pending.mark)
                return
        now = self.clock.now_ms()

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
            repair = await run_locked(path, in_thread, settings=self.write_lock_settings, clock=self.clock)
        else:
            repair = await anyio.to_thread.run_sync(in_thread)
        self.last_repair = repair
        if repair is not None and repair.backup_path is not None:
            self.last_backup = repair.backup_path
        self.take_foreign(index, pending.foreign, pending.mark)

    async def _rewrite(
        self, index: TranscriptIndex, pending: PendingWrite, held: SessionWriteLock | None
    ) -> None:
        """The first write of a migrated v1/v2 file: backup, then the whole file atomically (D7)."""
        path = self.path
        fsync = self.fsync
        now = self.clock.now_ms()

        def write() -> Path | None:
            if held is not None:
                held.verify_file()
            _check_unchanged_since_load(path, index)
            content = [encode_header(index.header_raw), *index.lines, *pending.lines]
            backup = rewrite_lines(path, content, fsync=fsync, now_ms=now)
            pending.mark = mark_of_file(path, lines=len(content))
            return backup

        if held is None and self.locking:
            backup = await run_locked(path, write, settings=self.write_lock_settings, clock=self.clock)
        else:
            backup = await anyio.to_thread.run_sync(write)
        self.last_backup = backup
        self.pending_rewrite = False
