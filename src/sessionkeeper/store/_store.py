"""
``SessionStore``: the public facade over a :class:`StoreBackend` (OpenClaw spec §1.3, §1.5; DESIGN "Files").

Every write goes through :func:`merge_session_entry`, so timestamps, ``sessionStartedAt``,
``sessionFile`` rewriting and model-field normalisation follow OpenClaw exactly; time comes from the
injected :class:`~sessionkeeper.Clock`.
"""

from __future__ import annotations

import builtins
import logging
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

from msgspec import UNSET

from sessionkeeper._clock import SYSTEM_CLOCK, Clock
from sessionkeeper.exceptions import ConfigError, SessionNotFoundError, UnsafePathError
from sessionkeeper.store._backend import StoreBackend
from sessionkeeper.store._entry import SessionEntry, session_entry_to_dict
from sessionkeeper.store._entry_merge import merge_session_entry
from sessionkeeper.store._json import JsonFileStoreBackend
from sessionkeeper.store._location import BackendName, resolve_store_location
from sessionkeeper.store._memory import InMemoryStoreBackend
from sessionkeeper.store._postgres import PostgresStoreBackend
from sessionkeeper.store._postgres_transcripts import PostgresTranscriptStorage
from sessionkeeper.store._reset import SessionResolution
from sessionkeeper.store._rollover import RESET_CLEARED_FIELDS, rollover_patch
from sessionkeeper.store._sqlite import SqliteStoreBackend
from sessionkeeper.store._store_files import (
    archive_transcript,
    refusal_of,
    transcript_file_of,
    write_header,
)
from sessionkeeper.store._store_lifecycle import delete_entry, reset_entry, resolve_entry
from sessionkeeper.store._urls import is_store_url, open_store_url
from sessionkeeper.transcript import FileTranscriptStorage, MemoryTranscriptStorage, TranscriptStorage


__all__ = ("RESET_CLEARED_FIELDS", "BackendName", "SessionStore", "resolve_store_location")

_log = logging.getLogger("sessionkeeper.store")

EntryPatch = SessionEntry | Mapping[str, Any]


class SessionStore:
    """
    Session key -> :class:`SessionEntry`, over any :class:`StoreBackend` (OpenClaw spec §1).

    Use it as an async context manager (``async with SessionStore.open(dir) as store:``) or call
    :meth:`aclose`. All writes merge with OpenClaw's ``mergeSessionEntry`` semantics (§1.3).

    Args:
        backend: Where entries live.
        sessions_dir: The sessions directory holding the transcripts (``None`` for a store without
            files: :meth:`reset` and :meth:`delete` then archive nothing).
        clock: Time source for ``updatedAt``, ``archivedAt``, ``pinnedAt`` and archive stamps.
        new_session_id: Factory for new session ids (default: uuid4, as OpenClaw's ``randomUUID``).
        transcripts: Where the transcripts' lines live (:meth:`transcript_storage`); ``None``: pi JSONL
            files in ``sessions_dir``, or memory without one.
    """

    def __init__(
        self,
        backend: StoreBackend,
        *,
        sessions_dir: Path | str | None = None,
        clock: Clock = SYSTEM_CLOCK,
        new_session_id: Callable[[], str] | None = None,
        transcripts: TranscriptStorage | None = None,
    ) -> None:
        self.backend = backend
        self.sessions_dir: Path | None = Path(sessions_dir) if sessions_dir is not None else None
        self.clock = clock
        self._new_session_id = new_session_id or (lambda: str(uuid.uuid4()))
        self._transcripts = transcripts

    def transcript_storage(self) -> TranscriptStorage:
        """
        Where this store's transcripts live, by session id (issue 12: the store decides, so a runtime
        never builds paths): the ``transcripts`` given, else a
        :class:`~sessionkeeper.transcript.FileTranscriptStorage` on the sessions directory
        (``<sessions dir>/<sessionId>.jsonl``, next to ``sessions.json``), else on a PostgreSQL backend
        a :class:`PostgresTranscriptStorage` in its database (its pool, schema, store id and ``ttl_s``),
        else one :class:`~sessionkeeper.transcript.MemoryTranscriptStorage` for the life of this store
        (:meth:`in_memory`, Redis). The same object on every call.
        """
        if self._transcripts is None:
            if self.sessions_dir is not None:
                self._transcripts = FileTranscriptStorage(self.sessions_dir, clock=self.clock)
            elif isinstance(self.backend, PostgresStoreBackend):
                self._transcripts = PostgresTranscriptStorage(backend=self.backend, ttl_s=self.backend.ttl_s)
            else:
                self._transcripts = MemoryTranscriptStorage()
        return self._transcripts

    def new_session_id(self) -> str:
        """A new session id from this store's factory (``new_session_id``; default uuid4)."""
        return self._new_session_id()

    @classmethod
    def open(
        cls,
        path: Path | str,
        *,
        backend: BackendName | None = None,
        clock: Clock = SYSTEM_CLOCK,
        durable: bool = True,
        new_session_id: Callable[[], str] | None = None,
        read_only: bool = False,
        transcripts_dir: Path | str | None = None,
    ) -> SessionStore:
        """
        Open the store of a sessions directory (DESIGN "Files"), or of a database server.

        Args:
            path: The sessions directory (``<root>/agents/<agentId>/sessions``), or its ``sessions.json``
                or ``sessions.sqlite``; or a ``postgresql://`` / ``redis://`` URL
                (:class:`~sessionkeeper.store.PostgresStoreBackend`,
                :class:`~sessionkeeper.store.RedisStoreBackend`; query parameters ``schema``, ``prefix``,
                ``store``, ``ttl``: see docs/postgres.md).
            transcripts_dir: With a URL only: the directory of the transcripts' JSONL files; ``None``: on
                PostgreSQL they are in the same database (:meth:`transcript_storage`), on Redis in memory.
            backend: ``"json"`` or ``"sqlite"``; default: the one whose file exists, else ``"json"``.
            clock: See :class:`SessionStore`.
            durable: fsync every write (JSON: file + directory; SQLite: ``synchronous=FULL``, else
                ``NORMAL``).
            new_session_id: See :class:`SessionStore`.
            read_only: Open for reading only (``sessions list``, ``status``, dry runs): nothing of ours is
                created or written (a SQLite file is opened ``mode=ro``, and SQLite may add its
                ``-wal``/``-shm`` files; a missing, empty or table-less one reads
                as an empty store); every write raises :class:`~sessionkeeper.exceptions.StoreError`.

        Raises:
            ConfigError: See :func:`resolve_store_location`; ``backend`` or ``transcripts_dir`` given with
                the wrong kind of ``path``.
        """
        if is_store_url(path):
            if backend is not None:
                raise ConfigError("is for sessions directories; a URL names its backend", key="backend")
            backend_ = open_store_url(str(path), read_only=read_only)
            return cls(backend_, sessions_dir=transcripts_dir, clock=clock, new_session_id=new_session_id)
        if transcripts_dir is not None:
            raise ConfigError(
                "is for store URLs; a sessions directory holds its transcripts", key="transcripts_dir"
            )
        file, name = resolve_store_location(path, backend)
        store_backend: StoreBackend
        if name == "json":
            store_backend = JsonFileStoreBackend(file, durable=durable, read_only=read_only)
        else:
            store_backend = SqliteStoreBackend(
                file, synchronous="FULL" if durable else "NORMAL", read_only=read_only
            )
        return cls(store_backend, sessions_dir=file.parent, clock=clock, new_session_id=new_session_id)

    @classmethod
    def in_memory(cls, *, clock: Clock = SYSTEM_CLOCK) -> SessionStore:
        """A store on an :class:`InMemoryStoreBackend` (tests, ephemeral agents)."""
        return cls(InMemoryStoreBackend(), clock=clock)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the backend."""
        await self.backend.aclose()

    def __repr__(self) -> str:
        return f"SessionStore({self.backend!r})"

    # ------------------------------------------------------------------ reading

    async def get(self, session_key: str) -> SessionEntry | None:
        """Return the entry of ``session_key`` (exact key), or ``None``."""
        return await self.backend.get(session_key)

    async def require(self, session_key: str) -> SessionEntry:
        """Return the entry of ``session_key``. Raises :class:`SessionNotFoundError` when absent."""
        entry = await self.backend.get(session_key)
        if entry is None:
            raise SessionNotFoundError(session_key)
        return entry

    async def list(
        self, *, archived: bool | None = False, limit: int | None = None
    ) -> builtins.list[tuple[str, SessionEntry]]:
        """
        List sessions: pinned first, then by ``updatedAt`` descending (missing ``updatedAt`` last).

        Args:
            archived: ``False`` (default): active sessions (no ``archivedAt``); ``True``: archived ones
                only; ``None``: all.
            limit: At most this many rows.

        Returns:
            ``(session key, entry)`` pairs. Ties keep the store's order.
        """
        rows = [
            (key, entry)
            for key, entry in (await self.backend.load_all()).items()
            if archived is None or entry.is_archived == archived
        ]

        def sort_key(row: tuple[str, SessionEntry]) -> tuple[int, int]:
            entry = row[1]
            updated = entry.updated_at if isinstance(entry.updated_at, int) else -1
            return (0 if entry.is_pinned else 1, -updated)

        rows.sort(key=sort_key)
        return rows if limit is None else rows[: max(0, limit)]

    # ------------------------------------------------------------------ writing

    async def update_entry(
        self,
        session_key: str,
        fn: Callable[[SessionEntry], EntryPatch | None],
        *,
        preserve_activity: bool = False,
    ) -> SessionEntry | None:
        """
        Patch an existing entry atomically (OpenClaw ``updateSessionStoreEntry``, §1.5).

        ``fn`` receives the current entry and returns a patch (a mapping of fields, see
        :func:`merge_session_entry`, or a :class:`SessionEntry`), or ``None`` to change nothing. The
        result is ``merge_session_entry(current, patch)``. It runs under the backend's writer lock:
        keep it quick and free of I/O.

        Returns:
            The stored entry, or ``None`` when the key is absent (nothing is written then).
        """
        now = self.clock.now_ms()

        def apply(current: SessionEntry | None) -> SessionEntry | None:
            if current is None:
                return None
            patch = fn(current)
            if patch is None:
                return None
            return self._merge(current, patch, now_ms=now, preserve_activity=preserve_activity)

        return await self.backend.update(session_key, apply)

    def _merge(
        self, current: SessionEntry | None, patch: EntryPatch, *, now_ms: int, preserve_activity: bool
    ) -> SessionEntry:
        """OpenClaw's ``mergeSessionEntry`` with this store's session id factory (§1.3)."""
        return merge_session_entry(
            current,
            patch,
            now_ms=now_ms,
            preserve_activity=preserve_activity,
            new_session_id=self._new_session_id,
        )

    async def patch(
        self,
        session_key: str,
        fields: EntryPatch | None = None,
        /,
        *,
        create: bool = True,
        preserve_activity: bool = False,
        **kwargs: Any,
    ) -> SessionEntry:
        """
        Merge fields into an entry (OpenClaw ``patchSessionEntry``), creating it when absent.

        Fields come from ``fields`` (a mapping keyed by Python or on-disk names, or a
        :class:`SessionEntry`) and keyword arguments (Python names); ``msgspec.UNSET`` removes a field.

        Examples:
            ``await store.patch("agent:main:main", label="Main", thinking_level="high")``

        Args:
            create: Create the entry when absent (a new ``sessionId`` unless given). ``False`` raises
                :class:`SessionNotFoundError` instead.
            preserve_activity: Keep ``updatedAt`` of an existing entry (metadata that is not activity).

        Returns:
            The stored entry.
        """
        patch: dict[str, Any] = {}
        if isinstance(fields, SessionEntry):
            patch.update(session_entry_to_dict(fields))
        elif fields is not None:
            patch.update(fields)
        patch.update(kwargs)
        now = self.clock.now_ms()

        def apply(current: SessionEntry | None) -> SessionEntry:
            if current is None and not create:
                raise SessionNotFoundError(session_key)
            return self._merge(current, patch, now_ms=now, preserve_activity=preserve_activity)

        result = await self.backend.update(session_key, apply)
        assert result is not None
        return result

    async def _set_marker(self, session_key: str, field: str, value: Any) -> SessionEntry:
        return await self.patch(session_key, {field: value}, create=False, preserve_activity=True)

    async def archive(self, session_key: str) -> SessionEntry:
        """
        Set ``archivedAt`` to now (ms) and clear ``pinnedAt``: the session leaves the active list, its
        transcript stays (seeds, "Session store schema": archiving a session clears its pin). Not counted
        as activity (``updatedAt`` is kept).
        """
        return await self.patch(
            session_key,
            {"archived_at": self.clock.now_ms(), "pinned_at": UNSET},
            create=False,
            preserve_activity=True,
        )

    async def unarchive(self, session_key: str) -> SessionEntry:
        """Remove ``archivedAt``."""
        return await self._set_marker(session_key, "archived_at", UNSET)

    async def pin(self, session_key: str) -> SessionEntry:
        """Set ``pinnedAt`` to now (ms); pinned sessions list first."""
        return await self._set_marker(session_key, "pinned_at", self.clock.now_ms())

    async def unpin(self, session_key: str) -> SessionEntry:
        """Remove ``pinnedAt``."""
        return await self._set_marker(session_key, "pinned_at", UNSET)

    async def delete(self, session_key: str, *, archive_transcript: bool = True) -> bool:
        """
        Remove an entry. Its transcript, when no other entry still uses its ``sessionId``, is archived as
        ``<file>.deleted.<stamp>`` (OpenClaw ``deleteSessionEntryLifecycle``, §1.5); in a store without a
        sessions directory it is deleted from :meth:`transcript_storage` (issue 13: a database store
        removes its rows). ``archive_transcript=False`` leaves the transcript as it is.

        Returns:
            Whether the entry existed.
        """
        return await delete_entry(self, session_key, archive_transcript=archive_transcript)

    async def reset(self, session_key: str, *, cwd: str | None = None) -> SessionEntry:
        """
        Start a new session under ``session_key`` (OpenClaw ``resetSessionEntryLifecycle``, §1.5, §4.3).

        The entry gets a new ``sessionId`` (``sessionStartedAt`` = now, ``sessionFile`` rewritten to the
        new id), ``compactionCount`` 0, ``totalTokens`` 0 with ``totalTokensFresh``, and loses the
        per-session fields of :data:`RESET_CLEARED_FIELDS`; toggles, overrides, labels and routing stay.
        With a sessions directory, the new transcript header ``{type:"session",version:3,id,timestamp,cwd}``
        is written (0600) *before* the store changes, then the old transcript is archived as
        ``<file>.reset.<stamp>``: when the header cannot be created (a link at the new name, an unsafe
        id), the error propagates and the store is unchanged (issue 15). Without a sessions directory the
        old transcript is archived in :meth:`transcript_storage` when it is an
        :class:`~sessionkeeper.abc.ArchivingTranscriptStorage` (PostgreSQL, memory: it leaves the live
        set, store maintenance's archive retention removes it later; issue 13), unless a live entry
        still uses its session id.

        A refused ``sessionFile`` never blocks a reset (issue 15 item 1, deviation F1): when the entry's
        value (or its rewrite for the new id) is one :meth:`transcript_file` refuses, the new entry drops
        ``sessionFile`` (its transcript is ``<new sessionId>.jsonl``), the refused file is left untouched
        (never archived or renamed) and a ``sessionkeeper.store`` WARNING reports it (``extra``:
        ``session_key``, ``session_id``, ``session_file``, ``reason``). The returned entry then has no
        ``sessionFile``.

        Args:
            cwd: The header's ``cwd`` (default: the process's working directory).

        Returns:
            The stored entry.

        Raises:
            SessionNotFoundError: No entry for ``session_key``.
            UnsafePathError: The new session id cannot name a transcript file; nothing was changed.
            SymlinkRefusedError: A symbolic link sits at the new transcript's name; nothing was changed.
        """
        return await reset_entry(self, session_key, cwd=cwd)

    async def resolve(
        self,
        session_key: str,
        decide: Callable[[SessionEntry | None, Callable[[], str]], SessionResolution],
        *,
        cwd: str | None = None,
    ) -> tuple[SessionEntry, SessionResolution]:
        """
        Decide and store which session ``session_key`` continues, in one atomic step against the entry
        stored *now* (OpenClaw ``initSessionState``, §4.3; several writers on one key, docs/runtime.md).

        ``decide(current, new_session_id)`` is usually :func:`~sessionkeeper.store.resolve_session`: it gets
        the stored entry (``None`` when absent) and a session id factory, and returns the resolution. It
        runs inside :meth:`StoreBackend.update`, under the backend's write serialisation (tasks, threads,
        processes, database row lock), so the decision is never made on an entry another writer has
        replaced meanwhile: of several callers that find a new key (or a stale session) at once, the first
        creates (or rolls over) the session and the others see its fresh entry and continue it (their
        resolution says ``fresh``). It may run more than once (a pre-check before the update, a database
        retry); keep it quick, pure and free of I/O; the ids it draws are the same on every run.

        - Reuse (``is_new`` false) or a new key: the resolution's entry is merged into the stored one
          (``patch``); an unsafe ``sessionFile`` raises before anything is written (issue 15, F1).
          On a backend that offers it (:class:`~sessionkeeper.store.PostgresStoreBackend`), a reuse's
          write (the activity stamp: ``updatedAt``, ``lastInteractionAt``) commits without waiting for
          its own durability: visible to every writer at once, durable with the next durable commit on
          the server (the turn's first append) or within a fraction of a second; a server crash before
          then forgets only the stamp (docs/postgres.md "Commits per turn").
        - Rollover (``is_new`` with an existing entry): as :meth:`reset` (the next id of the factory,
          cleared per-session fields, header written before the store changes, old transcript archived
          as ``<file>.reset.<stamp>`` afterwards), only by the caller whose decision won.

        Args:
            session_key: The session key.
            decide: ``(current entry or None, id factory) -> SessionResolution``.
            cwd: The new transcript header's ``cwd`` on rollover (default: the process's).

        Returns:
            ``(stored entry, the resolution that decided it)``.

        Raises:
            SessionArchivedError: ``decide`` refused an archived entry; nothing is written.
            UnsafePathError, SymlinkRefusedError: As :meth:`reset`, and for an unsafe ``sessionFile`` of a
                reused entry; nothing is written.
        """
        return await resolve_entry(self, session_key, decide, cwd=cwd)

    def _rollover_entry(
        self, current: SessionEntry, new_id: str, now: int, refusals: dict[str, UnsafePathError]
    ) -> SessionEntry:
        """The entry :meth:`reset` stores for ``current`` with ``new_id`` (a refused file: ``refusals``)."""
        patch = rollover_patch(new_id, now)
        merged = self._merge(current, patch, now_ms=now, preserve_activity=False)
        refused = self._refusal(current) or self._refusal(merged)
        refusals.pop("sessionFile", None)
        if refused is not None:
            # F1: start fresh at <new id>.jsonl; the refused file is reported, never acted on
            refusals["sessionFile"] = refused
            patch["sessionFile"] = UNSET
            merged = self._merge(current, patch, now_ms=now, preserve_activity=False)
        # refuse before anything is written: an id that cannot name a transcript would otherwise
        # leave the store pointing at a session whose transcript cannot be created
        self.transcript_file(merged)
        return merged

    async def _undo_reset(self, session_key: str, before: SessionEntry, new_id: str) -> None:
        """Put back the entry a failed :meth:`reset` replaced, unless another writer changed it since."""

        def undo(current: SessionEntry | None) -> SessionEntry | None:
            return before if current is not None and current.session_id == new_id else None

        await self.backend.update(session_key, undo)

    # ------------------------------------------------------------------ transcripts

    def transcript_file(self, entry: SessionEntry) -> Path | None:
        """
        The transcript path of ``entry``: its ``sessionFile`` (checked to stay in the sessions directory and
        to be attributable to the entry) or ``<sessions dir>/<sessionId>.jsonl``; ``None`` without a
        sessions directory or session id.

        Attributable (deviation F1, docs/store.md "Whose file is it"): ``<sessionId>.jsonl``, its topic form
        ``<sessionId>-topic-<thread>.jsonl`` or its fork/successor form ``<ISO stamp>_<sessionId>.jsonl``,
        never a file of the store itself (``sessions.json``, ``sessions.sqlite``, their locks, backups).

        Raises:
            UnsafePathError: The path would leave the sessions directory, is not valid Unicode, or names a
                file that is not the entry's (nothing is read, written or moved through it).
        """
        return transcript_file_of(self.sessions_dir, entry)

    def _refusal(self, entry: SessionEntry) -> UnsafePathError | None:
        """The error :meth:`transcript_file` raises for ``entry``'s explicit ``sessionFile``, if any."""
        return refusal_of(self.sessions_dir, entry)

    def _write_header(self, entry: SessionEntry, now_ms: int, cwd: str | None) -> Path | None:
        """Create ``entry``'s transcript with its header; the path when created here, else ``None``."""
        return write_header(self.sessions_dir, entry, now_ms, cwd)

    async def _archive_transcript(self, entry: SessionEntry, reason: Literal["reset", "deleted"]) -> None:
        """Archive the transcript of a removed or reset ``entry`` (:func:`archive_transcript`)."""
        await archive_transcript(
            self.sessions_dir, entry, reason, live=self.backend.load_all, now_ms=self.clock.now_ms
        )
