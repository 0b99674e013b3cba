"""
Copying sessions between two stores without loss (issue 13: ``sessionkeeper export`` / ``import``): a
sessions directory into a database and back, or between any two :class:`SessionStore` s.

Written against the seams only: entries through :class:`~sessionkeeper.store.StoreBackend`, transcripts
through :class:`~sessionkeeper.transcript.TranscriptStorage` (lines read in bounded batches,
:func:`~sessionkeeper.transcript.iter_line_batches`, written with ``create`` and ``append``), so it works
for files, memory, SQLite, PostgreSQL and Redis. The rules (docs/postgres.md "Moving a sessions
directory into a database"):

- **Exact.** Each entry is written as the source store holds it; each transcript line byte for byte,
  never parsed (a line that is not JSON is copied as it is). Only ``sessionFile`` may change, see
  :func:`target_entry`.
- **Where a transcript is.** In a store with a sessions directory: the entry's file
  (:meth:`SessionStore.transcript_file`: its ``sessionFile``, else ``<sessionId>.jsonl``); in a store
  without one: the transcript named by the ``sessionId`` in :meth:`SessionStore.transcript_storage`
  (as :class:`~sessionkeeper.runtime.SessionRuntime` opens them).
- **Never over another session.** A target holding a different entry under the key, or a different
  transcript where the session's goes, refuses that session
  (:class:`~sessionkeeper.exceptions.SessionExistsError`) and writes nothing of it, unless ``overwrite``.
  A session already there, identical, is left alone (``unchanged``): running a copy again is safe.
- **Resumed after a kill.** A target transcript no target entry names whose lines are the first lines
  of the source's, byte for byte (a copy killed mid-way, or another copy writing it now), is completed:
  the missing lines are appended under its writer claim, each append conditional on its mark. Temp
  files a killed write left for that transcript (``<name>.jsonl.<pid>.<uuid>.tmp``, their process gone)
  are removed.
- **All or nothing per session.** The transcript is written first, then the entry; when anything fails
  the transcript this copy created is removed again. A session that fails is reported with its error and
  the others go on. Sessions go in groups of 256: their transcripts (8 at once), then their entries in
  one store transaction, each checked again there against the entry stored then.
- **Never the source.** The source is only read.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Final, Literal

import anyio
import attrs

from sessionkeeper.exceptions import (
    ConfigError,
    InvalidSessionEntryError,
    SessionExistsError,
    SessionKeeperError,
    SessionNotFoundError,
    StoreCorruptError,
    StoreUnavailableError,
    TranscriptFormatError,
    TranscriptNotFoundError,
    UnsafePathError,
)
from sessionkeeper.store._entry import SessionEntry
from sessionkeeper.store._json import JsonFileStoreBackend
from sessionkeeper.store._memory import InMemoryStoreBackend
from sessionkeeper.store._store import SessionStore
from sessionkeeper.store._transfer_parts import (
    Digest,
    Place,
    digest_of,
    entry_text,
    place_of,
    prefix_length,
    remove_quietly,
    remove_stale,
    resume_transcript,
    stale_temps,
    target_entry,
    write_transcript,
)
from sessionkeeper.transcript import MemoryTranscriptStorage


__all__ = ("CopiedSession", "CopyOutcome", "CopyReport", "copy_sessions", "target_entry")

CopyOutcome = Literal["copied", "unchanged", "replaced", "failed"]
_Committed = CopyOutcome | SessionExistsError | InvalidSessionEntryError

DEFAULT_BATCH_BYTES: Final = 4 << 20
_GROUP: Final = 256
"""Sessions whose entries are committed in one store transaction (one rewrite of a ``sessions.json``)."""
_PARALLEL: Final = 8
"""Transcripts copied at once (their writes and fsyncs overlap)."""


@attrs.frozen(kw_only=True)
class CopiedSession:
    """
    What :func:`copy_sessions` did with one session.

    Attributes:
        session_key: Its key.
        session_id: Its entry's ``sessionId`` (``None`` when absent or not a string).
        outcome: ``"copied"`` (written to the target), ``"unchanged"`` (the target held it already,
            identical: nothing written), ``"replaced"`` (``overwrite``: a different entry or transcript
            in the target was replaced), ``"failed"`` (nothing of it written; :attr:`error` says why).
        transcript: Where its transcript is in the target (a path or a URI), ``None`` when the session
            has none (no ``sessionId``, or no transcript in the source) or it failed before that was known.
        lines: Transcript lines copied or found identical (the header included).
        size: Their size in bytes, each with its ``\\n``.
        error: Why it failed: :class:`~sessionkeeper.exceptions.SessionExistsError` (the target holds
            another session there), :class:`~sessionkeeper.exceptions.UnsafePathError` (a refused
            ``sessionFile`` or an id that cannot name a transcript),
            :class:`~sessionkeeper.exceptions.TranscriptFormatError` (an unterminated last line),
            :class:`~sessionkeeper.exceptions.SessionBusyError` (a transcript's writer claim), ...;
            ``None`` unless failed.
    """

    session_key: str
    session_id: str | None
    outcome: CopyOutcome
    transcript: str | None = None
    lines: int = 0
    size: int = 0
    error: SessionKeeperError | None = None


@attrs.frozen(kw_only=True)
class CopyReport:
    """
    The result of :func:`copy_sessions`.

    Attributes:
        sessions: One :class:`CopiedSession` per session key considered, in the source store's order.
        dropped_keys: Rows of the source's ``sessions.json`` its load dropped (OpenClaw's load-time shape
            check: a non-object row, an unsafe ``sessionId``): not copied, named here. Empty when only
            some ``keys`` were copied (a dropped row is no key to ask for).
        normalized_keys: Rows of the source's ``sessions.json`` normalised on load (legacy fields):
            copied in their normalised form, as every reader of the store sees them (of ``keys`` only,
            when given).
        unreferenced_transcripts: Transcripts of the source no copied entry names (their storage ids:
            file names without ``.jsonl``): not copied. Empty when only some ``keys`` were copied.
    """

    sessions: tuple[CopiedSession, ...] = ()
    dropped_keys: tuple[str, ...] = ()
    normalized_keys: tuple[str, ...] = ()
    unreferenced_transcripts: tuple[str, ...] = ()

    def with_outcome(self, *outcomes: CopyOutcome) -> tuple[CopiedSession, ...]:
        """The sessions whose outcome is one of ``outcomes``, in order."""
        return tuple(session for session in self.sessions if session.outcome in outcomes)

    @property
    def failed(self) -> tuple[CopiedSession, ...]:
        """The sessions that were not copied (each with its :attr:`CopiedSession.error`)."""
        return self.with_outcome("failed")

    @property
    def ok(self) -> bool:
        """Whether every session is now in the target (none failed)."""
        return not self.failed


@attrs.frozen
class _Pending:
    """A session whose transcript is in place, waiting for its entry to be committed with its group."""

    key: str
    session_id: str | None
    entry: SessionEntry
    encoded: str
    digest: Digest | None
    transcript_outcome: CopyOutcome
    target: Place | None
    written: bool

    def created(self) -> Place | None:
        """The target transcript this run created (to remove when the session fails)."""
        return self.target if self.written and self.transcript_outcome == "copied" else None


class _Copier:
    """One :func:`copy_sessions` run: the stores, its options and the transcripts it has placed."""

    def __init__(
        self,
        source: SessionStore,
        target: SessionStore,
        *,
        overwrite: bool,
        batch_bytes: int,
        dry_run: bool,
    ) -> None:
        self.source = source
        self.dry_run = dry_run
        self.target = target
        self.overwrite = overwrite
        self.batch_bytes = batch_bytes
        # target location -> (source location, digest): two entries sharing one transcript copy it once
        self.placed: dict[str, tuple[str, Digest | None]] = {}
        self.referenced: set[str] = set()  # target transcripts its entries name (never resumed)
        self.stale: dict[str, list[Path]] = {}  # temp files a killed write left, by transcript path

    async def copy_all(self, items: list[tuple[str, SessionEntry]]) -> list[CopiedSession]:
        """
        Copy the sessions ``items`` in groups of :data:`_GROUP`: the group's transcripts (up to
        :data:`_PARALLEL` at once), then its entries in one transaction.
        """
        existing = await self.target.backend.load_all() if items else {}
        dropped = self.target.backend.dropped_keys
        if dropped:
            # the target's next write would erase the rows its load drops (OpenClaw does the same)
            raise StoreCorruptError(
                f"{len(dropped)} rows fail the load-time shape check ({', '.join(map(repr, dropped[:3]))}"
                f"{', ...' if len(dropped) > 3 else ''}) and the copy's first write would erase them; "
                "nothing was written (fix or remove them first: sessions cleanup purges them as drop-unsafe)",
                path=self.target.backend.store_file or repr(self.target.backend),
            )
        for entry in existing.values():
            try:
                place = place_of(self.target, entry)
            except SessionKeeperError:
                continue
            if place is not None:
                self.referenced.add(place.location)
        if not self.dry_run:
            self.stale = stale_temps(self.target.sessions_dir)
        results: list[CopiedSession] = []
        for start in range(0, len(items), _GROUP):
            prepared = await self._prepare_group(items[start : start + _GROUP], existing)
            pending = [item for item in prepared if isinstance(item, _Pending)]
            try:
                committed = await self._commit_isolating(pending, existing)
            except BaseException:
                for waiting in pending:
                    created = waiting.created()
                    if created is not None:
                        await remove_quietly(created)
                raise
            results.extend(
                [
                    done if isinstance(done, CopiedSession) else await self._result(done, committed)
                    for done in prepared
                ]
            )
        return results

    def _bucket(self, index: int, entry: SessionEntry) -> str:
        """Sessions whose transcripts go to one place share a bucket, worked through in order."""
        try:
            place = place_of(self.target, target_entry(self.target, entry))
        except SessionKeeperError:
            place = None
        return place.location if place is not None else f"\0{index}"

    async def _prepare_group(
        self, group: list[tuple[str, SessionEntry]], existing: dict[str, SessionEntry]
    ) -> list[_Pending | CopiedSession]:
        """:meth:`_prepare` every session of ``group``, different target places at once, in its order."""
        slots: list[_Pending | CopiedSession | None] = [None] * len(group)
        buckets: dict[str, list[int]] = {}
        for index, (_, entry) in enumerate(group):
            buckets.setdefault(self._bucket(index, entry), []).append(index)
        limiter = anyio.CapacityLimiter(_PARALLEL)

        async def work(indexes: list[int]) -> None:
            async with limiter:
                for index in indexes:
                    key, entry = group[index]
                    slots[index] = await self._prepare(key, entry, existing.get(key))

        try:
            async with anyio.create_task_group() as tasks:
                for indexes in buckets.values():
                    tasks.start_soon(work, indexes)
        except BaseException as err:
            for slot in slots:
                created = slot.created() if isinstance(slot, _Pending) else None
                if created is not None:
                    await remove_quietly(created)
            while isinstance(err, BaseExceptionGroup):  # a task's error, as the caller would see it
                err = err.exceptions[0]
            raise err from None if err.__cause__ is None else err.__cause__
        return [slot for slot in slots if slot is not None]

    async def _prepare(
        self, key: str, entry: SessionEntry, current: SessionEntry | None
    ) -> _Pending | CopiedSession:
        """Check the target, put the transcript in place: the pending entry, or the failed session."""
        session_id = entry.session_id if isinstance(entry.session_id, str) else None
        new = target_entry(self.target, entry)
        encoded = entry_text(new)
        location: str | None = None
        try:
            source = place_of(self.source, entry)
            target = place_of(self.target, new)
            location = target.location if target is not None else None
            if current is not None and entry_text(current) != encoded and not self.overwrite:
                raise SessionExistsError(key, location="entry")
            digest, transcript_outcome, written = await self._transcript(key, source, target)
        except (StoreCorruptError, StoreUnavailableError):
            raise  # the store itself: no use going on with the next session
        except SessionKeeperError as err:
            return CopiedSession(
                session_key=key, session_id=session_id, outcome="failed", transcript=location, error=err
            )
        return _Pending(key, session_id, new, encoded, digest, transcript_outcome, target, written)

    async def _commit_isolating(
        self, pending: list[_Pending], snapshot: dict[str, SessionEntry]
    ) -> dict[str, _Committed]:
        """
        :meth:`_commit`; when the target refuses an entry of the group (a key it cannot hold: a NUL or a
        lone surrogate in PostgreSQL), each entry again in a transaction of its own, so only that one fails.
        """
        try:
            return await self._commit(pending, snapshot)
        except InvalidSessionEntryError as err:
            if len(pending) == 1:
                return {pending[0].key: err}
        committed: dict[str, _Committed] = {}
        for item in pending:
            try:
                committed.update(await self._commit([item], snapshot))
            except InvalidSessionEntryError as err:
                committed[item.key] = err
        return committed

    async def _commit(
        self, pending: list[_Pending], snapshot: dict[str, SessionEntry]
    ) -> dict[str, _Committed]:
        """
        Write the group's entries in one store transaction (one rewrite of a ``sessions.json``), each
        checked against the entry stored now: absent (written), identical (left), another (refused
        unless overwriting).
        """
        if not pending:
            return {}
        overwrite = self.overwrite

        def apply(entries: dict[str, SessionEntry]) -> dict[str, _Committed]:
            outcomes: dict[str, _Committed] = {}  # anew on a retried transaction
            for item in pending:
                current = entries.get(item.key)
                if current is None:
                    outcomes[item.key] = "copied"
                elif entry_text(current) == item.encoded:
                    outcomes[item.key] = "unchanged"
                    continue
                elif overwrite:
                    outcomes[item.key] = "replaced"
                else:
                    outcomes[item.key] = SessionExistsError(item.key, location="entry")
                    continue
                entries[item.key] = item.entry
            return outcomes

        if self.dry_run:
            return apply(snapshot)  # the target as read at the start, edited in memory only
        return await self.target.backend.transaction(apply)

    async def _result(self, item: _Pending, committed: dict[str, _Committed]) -> CopiedSession:
        location = item.target.location if item.target is not None else None
        entry_outcome = committed[item.key]
        if isinstance(entry_outcome, SessionKeeperError):  # another writer's entry, or one not storable
            created = item.created()
            if created is not None:
                await remove_quietly(created)
                self.placed.pop(created.location, None)
            return CopiedSession(
                session_key=item.key,
                session_id=item.session_id,
                outcome="failed",
                transcript=location,
                error=entry_outcome,
            )
        outcomes = {item.transcript_outcome, entry_outcome}
        outcome: CopyOutcome = (
            "replaced" if "replaced" in outcomes else "copied" if "copied" in outcomes else "unchanged"
        )
        digest = item.digest
        return CopiedSession(
            session_key=item.key,
            session_id=item.session_id,
            outcome=outcome,
            transcript=location if digest is not None else None,
            lines=digest.lines if digest is not None else 0,
            size=digest.size if digest is not None else 0,
        )

    async def _transcript(
        self, key: str, source: Place | None, target: Place | None
    ) -> tuple[Digest | None, CopyOutcome, bool]:
        """
        Put the source transcript at the target's place: its digest (``None``: none), the outcome, and
        whether it was written (a dry run writes nothing and predicts the outcome).
        """
        if source is None or target is None:
            return None, "unchanged", False
        done = self.placed.get(target.location)
        if done is not None:
            if done[0] != source.location:
                raise SessionExistsError(
                    key,
                    location=target.location,
                    message=f"{target.location} is the target of two transcripts of this copy "
                    f"({done[0]} and {source.location}); {key!r} was not copied",
                )
            return done[1], "unchanged", False
        try:
            existing: Digest | None = await digest_of(target, self.batch_bytes)
        except TranscriptNotFoundError:
            existing = None
        except TranscriptFormatError:
            existing = Digest(-1, -1, b"")  # a torn last line (a killed write): never the source's
        outcome: CopyOutcome = "copied"
        if existing is not None:
            try:
                wanted: Digest | None = await digest_of(source, self.batch_bytes)
            except TranscriptNotFoundError:
                wanted = None
            if wanted == existing:
                self.placed[target.location] = (source.location, wanted)
                return wanted, "unchanged", False
            if not self.overwrite:
                return await self._resume(key, source, target, wanted)
            outcome = "replaced"
            if self.dry_run:
                self.placed[target.location] = (source.location, wanted)
                return wanted, outcome, False
            await target.storage.delete(target.key)
        if self.dry_run:
            try:
                digest: Digest | None = await digest_of(source, self.batch_bytes)  # lines, size, torn tail
            except TranscriptNotFoundError:
                digest = None
        else:
            remove_stale(self.stale, target)
            try:
                digest = await write_transcript(source, target, self.batch_bytes, key)
            except SessionExistsError:
                if self.overwrite:
                    raise
                return await self._resume(key, source, target, None)  # another copy created it meanwhile
        self.placed[target.location] = (source.location, digest)
        written = digest is not None and not self.dry_run
        return digest, outcome if digest is not None or existing is not None else "unchanged", written

    async def _resume(
        self, key: str, source: Place, target: Place, wanted: Digest | None
    ) -> tuple[Digest | None, CopyOutcome, bool]:
        """
        A target transcript that differs, no target entry names, and holds the first lines of the
        source (an interrupted copy, or another copy writing it now): the missing lines are appended
        (``copied``; ``unchanged`` when it was complete). Anything else is refused.
        """
        if target.location in self.referenced or (wanted is None and self.dry_run):
            raise SessionExistsError(key, location=target.location)
        if self.dry_run:
            if await prefix_length(target, source, self.batch_bytes) is None:
                raise SessionExistsError(key, location=target.location)
            self.placed[target.location] = (source.location, wanted)
            return wanted, "copied", False
        remove_stale(self.stale, target)
        try:
            resumed = await resume_transcript(source, target, self.batch_bytes)
        except TranscriptNotFoundError:
            resumed = None  # the source has none, or the target went away: not ours to decide
        if resumed is None:
            raise SessionExistsError(key, location=target.location)
        digest, appended = resumed
        self.placed[target.location] = (source.location, digest)
        # never "written": a failure later leaves it (it may be another copy's)
        return digest, "copied" if appended else "unchanged", False


def _check_stores(source: SessionStore, target: SessionStore) -> None:
    if source is target:
        raise ConfigError("the source and the target are the same store object", key="target")
    storage = target.transcript_storage()
    if (
        target.sessions_dir is None
        and isinstance(storage, MemoryTranscriptStorage)
        and not isinstance(target.backend, InMemoryStoreBackend)
    ):
        raise ConfigError(
            "the target store keeps its transcripts in this process's memory only: they would be lost; "
            "give it a transcripts directory (transcripts_dir=..., --transcripts-dir)",
            key="target",
        )


async def copy_sessions(
    source: SessionStore,
    target: SessionStore,
    *,
    keys: Iterable[str] | None = None,
    overwrite: bool = False,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    dry_run: bool = False,
) -> CopyReport:
    """
    Copy sessions (entries and their transcripts) from ``source`` to ``target``, without loss (issue 13;
    module docstring: what is copied where, and when a session is refused).

    Args:
        source: The store read (never written): a sessions directory, a database store, memory.
        target: The store written.
        keys: The session keys to copy, in this order (``None``: every entry of ``source``, in its
            order).
        overwrite: Replace a different entry under a key, or a different transcript at a session's place,
            in ``target`` (default ``False``: such a session fails with
            :class:`~sessionkeeper.exceptions.SessionExistsError` and nothing of it is written).
        batch_bytes: About how many bytes of transcript lines are read and written at once (default
            4 MiB): memory stays bounded for transcripts of any size. A transcript up to this size is
            created in one write.
        dry_run: Write nothing: read both stores and report what a copy would do now (each session's
            outcome, its lines and bytes, the errors it would meet; a target opened ``read_only`` is
            enough).

    Returns:
        A :class:`CopyReport`: each session's outcome, the errors of those that failed, and what the
        source holds that was not copied.

    Raises:
        ConfigError: ``source is target``; a ``target`` that would keep transcripts only in memory (a
            database store opened without transcripts); ``batch_bytes`` not positive.
        SessionNotFoundError: A key of ``keys`` is not in ``source``; nothing was written.
        StoreCorruptError: The source store cannot be read, or the target's ``sessions.json`` holds rows
            its load drops (its first write would erase them); nothing was written.
        StoreUnavailableError: A database could not be reached (sessions before it are copied; run the
            copy again, it skips them).
        OSError: The file system failed.
    """
    if batch_bytes <= 0:
        raise ConfigError(f"must be positive, got {batch_bytes!r}", key="batch_bytes")
    _check_stores(source, target)
    entries = await source.backend.load_all()
    if keys is None:
        chosen = list(entries)
    else:
        chosen = list(dict.fromkeys(keys))
        for key in chosen:
            if key not in entries:
                raise SessionNotFoundError(key)
    load = source.backend.last_load if isinstance(source.backend, JsonFileStoreBackend) else None
    copier = _Copier(source, target, overwrite=overwrite, batch_bytes=batch_bytes, dry_run=dry_run)
    results = await copier.copy_all([(key, entries[key]) for key in chosen])
    unreferenced: tuple[str, ...] = ()
    if keys is None:
        unreferenced = await _unreferenced(source, entries.values())
    return CopyReport(
        sessions=tuple(results),
        dropped_keys=tuple(source.backend.dropped_keys) if keys is None else (),
        normalized_keys=tuple(
            key for key in (load.normalized_keys if load is not None else ()) if keys is None or key in chosen
        ),
        unreferenced_transcripts=unreferenced,
    )


async def _unreferenced(source: SessionStore, entries: Iterable[SessionEntry]) -> tuple[str, ...]:
    """The transcripts of the source's own storage that no entry names."""
    storage = source.transcript_storage()
    named: set[str] = set()
    for entry in entries:
        try:
            place = place_of(source, entry)
        except UnsafePathError:
            continue
        if place is not None and place.storage.location(place.key) == storage.location(place.key):
            named.add(place.key)
    return tuple(sid for sid in await storage.list_sessions() if sid not in named)
