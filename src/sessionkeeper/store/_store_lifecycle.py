"""
The lifecycle steps of :class:`~sessionkeeper.store.SessionStore` that touch an entry and its transcript
together (OpenClaw ``deleteSessionEntryLifecycle``, ``resetSessionEntryLifecycle`` and
``initSessionState``, spec §1.5, §4.3): delete, reset and resolve. ``SessionStore`` documents them and
delegates here; the file side (headers, archives) is :mod:`._store_files`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from sessionkeeper.exceptions import SessionNotFoundError, UnsafePathError
from sessionkeeper.store._backend import LazyStampBackend
from sessionkeeper.store._entry import SessionEntry
from sessionkeeper.store._postgres import PostgresStoreBackend
from sessionkeeper.store._postgres_transcript_archives import delete_returning, entry_using
from sessionkeeper.store._reset import SessionResolution
from sessionkeeper.store._rollover import ReplayedIds
from sessionkeeper.store._store_files import unlink_quietly, warn_refused_reset
from sessionkeeper.transcript import ArchivingTranscriptStorage


if TYPE_CHECKING:
    from sessionkeeper.store._store import SessionStore


__all__ = ("delete_entry", "reset_entry", "resolve_entry")

_log = logging.getLogger("sessionkeeper.store")


async def delete_entry(store: SessionStore, session_key: str, *, archive_transcript: bool) -> bool:
    """:meth:`SessionStore.delete <sessionkeeper.store.SessionStore.delete>`."""
    backend = store.backend
    if isinstance(backend, PostgresStoreBackend):  # one row deleted, one index probe: no store read
        gone = await delete_returning(backend, session_key)
        if gone is None:
            return False
        session_id = gone.session_id
        if (
            archive_transcript
            and isinstance(session_id, str)
            and await entry_using(backend, session_id) is None
        ):
            if store.sessions_dir is not None:
                await store._archive_transcript(gone, "deleted")
            else:
                await _delete_stored_transcript(store, session_id)
        return True
    removed: dict[str, SessionEntry] = {}
    remaining_ids: set[str] = set()

    def txn(entries: dict[str, SessionEntry]) -> None:
        entry = entries.pop(session_key, None)
        if entry is not None:
            removed[session_key] = entry
        remaining_ids.update(e.session_id for e in entries.values() if isinstance(e.session_id, str))

    await store.backend.transaction(txn)
    entry = removed.get(session_key)
    if entry is None:
        return False
    if archive_transcript and isinstance(entry.session_id, str) and entry.session_id not in remaining_ids:
        if store.sessions_dir is not None:
            await store._archive_transcript(entry, "deleted")
        else:
            await _delete_stored_transcript(store, entry.session_id)
    return True


async def reset_entry(store: SessionStore, session_key: str, *, cwd: str | None) -> SessionEntry:
    """:meth:`SessionStore.reset <sessionkeeper.store.SessionStore.reset>`."""
    now = store.clock.now_ms()
    new_id = store._new_session_id()
    previous: dict[str, SessionEntry] = {}
    refusals: dict[str, UnsafePathError] = {}

    def rolled(current: SessionEntry) -> SessionEntry:
        return store._rollover_entry(current, new_id, now, refusals)

    def apply(current: SessionEntry | None) -> SessionEntry:
        if current is None:
            raise SessionNotFoundError(session_key)
        previous["entry"] = current
        return rolled(current)

    created: Path | None = None
    if store.sessions_dir is not None:
        # the new transcript first: when it cannot be created the store is left as it was
        current = await store.backend.get(session_key)
        if current is None:
            raise SessionNotFoundError(session_key)
        created = await anyio.to_thread.run_sync(store._write_header, rolled(current), now, cwd)
    try:
        result = await store.backend.update(session_key, apply)
        assert result is not None
        if store.sessions_dir is not None and store.transcript_file(result) != created:
            # the entry changed between the read and the update (another writer): its header now
            await anyio.to_thread.run_sync(store._write_header, result, now, cwd)
    except BaseException:
        with anyio.CancelScope(shield=True):
            if created is not None:
                await anyio.to_thread.run_sync(unlink_quietly, created)
            if "entry" in previous:
                await store._undo_reset(session_key, previous["entry"], new_id)
        raise
    refused = refusals.get("sessionFile")
    if refused is not None:
        warn_refused_reset(session_key, previous["entry"], refused, result)
    elif store.sessions_dir is not None:
        await store._archive_transcript(previous["entry"], "reset")
    else:
        await _archive_stored_transcript(store, previous["entry"])
    return result


async def resolve_entry(
    store: SessionStore,
    session_key: str,
    decide: Callable[[SessionEntry | None, Callable[[], str]], SessionResolution],
    *,
    cwd: str | None,
) -> tuple[SessionEntry, SessionResolution]:
    """:meth:`SessionStore.resolve <sessionkeeper.store.SessionStore.resolve>`."""
    now = store.clock.now_ms()
    ids = ReplayedIds(store._new_session_id)
    refusals: dict[str, UnsafePathError] = {}
    decided: dict[str, Any] = {}

    def rollover_id() -> str:
        decided["new_id"] = new_id = ids()  # drawn after decide's ids (as resolve_session, then reset)
        return new_id

    def apply(current: SessionEntry | None) -> SessionEntry:
        decided.clear()
        ids.restart()
        resolution = decide(current, ids)
        decided["resolution"] = resolution
        at = max(now, store.clock.now_ms())  # stamps no earlier than the decision just made
        if resolution.is_new and current is not None:
            decided["previous"] = current
            return store._rollover_entry(current, rollover_id(), at, refusals)
        # an unsafe sessionFile is refused before the store is written (issue 15, F1)
        store.transcript_file(resolution.entry)
        return store._merge(current, resolution.entry, now_ms=at, preserve_activity=False)

    created: Path | None = None
    if store.sessions_dir is not None:
        # a rollover writes the new transcript first: when it cannot be created the store is unchanged
        current = await store.backend.get(session_key)
        ids.restart()
        if current is not None and decide(current, ids).is_new:
            header_entry = store._rollover_entry(current, rollover_id(), now, {})
            created = await anyio.to_thread.run_sync(store._write_header, header_entry, now, cwd)

    def stamp_only() -> bool:
        # the decision reused the stored entry: the write is its activity stamp (LazyStampBackend)
        return not decided["resolution"].is_new

    rolled = False
    try:
        backend = store.backend
        if isinstance(backend, LazyStampBackend):
            result = await backend.update_lazily(session_key, apply, lazy=stamp_only)
        else:
            result = await backend.update(session_key, apply)
        assert result is not None
        rolled = "previous" in decided
        if rolled and store.sessions_dir is not None and store.transcript_file(result) != created:
            # the stored entry changed between the pre-check and the update: its header now
            await anyio.to_thread.run_sync(store._write_header, result, now, cwd)
    except BaseException:
        with anyio.CancelScope(shield=True):
            if created is not None:
                await anyio.to_thread.run_sync(unlink_quietly, created)
            if rolled:
                await store._undo_reset(session_key, decided["previous"], decided["new_id"])
        raise
    if created is not None and (not rolled or store.transcript_file(result) != created):
        # another writer decided first: this caller continues its session, the header is not used
        await anyio.to_thread.run_sync(unlink_quietly, created)
    resolution: SessionResolution = decided["resolution"]
    if rolled:
        previous: SessionEntry = decided["previous"]
        refused = refusals.get("sessionFile")
        if refused is not None:
            warn_refused_reset(session_key, previous, refused, result)
        elif store.sessions_dir is not None:
            await store._archive_transcript(previous, "reset")
        else:
            await _archive_stored_transcript(store, previous)
    _log.debug(
        "resolved %r: %s",
        session_key,
        resolution.reason,
        extra={"session_key": session_key, "session_id": result.session_id, "reason": resolution.reason},
    )
    return result, resolution


async def _delete_stored_transcript(store: SessionStore, session_id: str) -> None:
    """Delete a removed session's transcript from the store's storage (no sessions directory; issue 13)."""
    try:
        await store.transcript_storage().delete(session_id)
    except UnsafePathError as err:  # an id no storage holds: there is nothing to delete
        _log.warning("transcript not deleted: %s", err, extra={"session_id": session_id, "reason": "deleted"})


async def _archive_stored_transcript(store: SessionStore, previous: SessionEntry) -> None:
    """
    Archive a reset session's transcript in the store's storage (no sessions directory; issue 13), as
    ``<file>.reset.<stamp>`` is for a file: only an :class:`ArchivingTranscriptStorage`, and not while a
    live entry still uses its session id (a warning then, as for a file).
    """
    session_id = previous.session_id
    storage = store.transcript_storage()
    if not isinstance(session_id, str) or not isinstance(storage, ArchivingTranscriptStorage):
        return
    extra = {"session_id": session_id, "reason": "reset"}
    key = await _entry_using(store, session_id)
    if key is not None:
        _log.warning(
            "transcript %s not archived: the live entry %r uses it",
            session_id,
            key,
            extra={**extra, "session_key": key},
        )
        return
    try:
        await storage.archive(session_id, reason="reset", now_ms=store.clock.now_ms())
    except (UnsafePathError, FileExistsError) as err:
        _log.warning("transcript not archived: %s", err, extra=extra)


async def _entry_using(store: SessionStore, session_id: str) -> str | None:
    """The key of a live entry whose ``sessionId`` is ``session_id`` (PostgreSQL: one index probe)."""
    backend = store.backend
    if isinstance(backend, PostgresStoreBackend):
        return await entry_using(backend, session_id)
    return next((k for k, e in (await backend.load_all()).items() if e.session_id == session_id), None)
