"""
Deleting and resetting a session whose transcript is held in a storage, not a sessions directory
(issue 13): delete removes the transcript (its rows, on PostgreSQL), reset and a rollover archive it
(the storage's ``<file>.reset.<stamp>``), never while a live entry still uses its session id. On memory
and on the real PostgreSQL server (one schema per test); files keep their renames
(tests/store/test_store_reset.py).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import psycopg
import pytest
from psycopg import sql
from tests._helpers import user
from tests._servers import pg_schema

from sessionkeeper.exceptions import TranscriptNotFoundError
from sessionkeeper.store import (
    MaintenanceSettings,
    PostgresStoreBackend,
    SessionEntry,
    SessionResolution,
    SessionStore,
    resolve_session,
    run_maintenance,
)
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import ArchivingTranscriptStorage, TranscriptManager, archive_stamp


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema",)

NOW = 1_790_000_000_000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async API is asyncio-only (docs/decisions.md PG-ASYNCIO)


@pytest.fixture(params=["memory", "postgres"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[SessionStore]:
    clock = FakeClock(now_ms=NOW)
    if request.param == "memory":
        opened = SessionStore.in_memory(clock=clock)
    else:
        dsn, schema = request.getfixturevalue("pg_schema")
        opened = SessionStore.open(f"{dsn}?schema={schema}", clock=clock)
    async with opened:
        yield opened


async def _session(store: SessionStore, key: str) -> str:
    entry = await store.patch(key, label="x")
    assert isinstance(entry.session_id, str)
    storage = store.transcript_storage()
    manager = await TranscriptManager.create_in(storage, session_id=entry.session_id, cwd="/w")
    await manager.append_message(user("hello"))
    return entry.session_id


def _line_rows(store: SessionStore, session_id: str) -> int:
    backend = store.backend
    assert isinstance(backend, PostgresStoreBackend) and backend.dsn is not None
    dsn, schema = backend.dsn, backend.schema
    with psycopg.connect(dsn, autocommit=True) as conn:
        query = sql.SQL("SELECT count(*) FROM {} WHERE session_id = %s").format(
            sql.Identifier(schema, "sk_transcript_lines")
        )
        [(count,)] = conn.execute(query, (session_id,)).fetchall()
    assert isinstance(count, int)
    return count


async def test_delete_removes_the_transcript_from_the_storage(store: SessionStore) -> None:
    session_id = await _session(store, "agent:main:a")
    assert await store.delete("agent:main:a")
    storage = store.transcript_storage()
    with pytest.raises(TranscriptNotFoundError):
        await storage.read(session_id)
    assert await storage.list_sessions() == []
    assert isinstance(storage, ArchivingTranscriptStorage)
    assert await storage.list_archives() == []  # removed, not archived
    if isinstance(store.backend, PostgresStoreBackend):
        assert _line_rows(store, session_id) == 0


async def test_delete_keeps_a_transcript_another_entry_uses(store: SessionStore) -> None:
    session_id = await _session(store, "agent:main:a")
    await store.patch("agent:main:b", session_id=session_id)
    assert await store.delete("agent:main:a")
    lines, _ = await store.transcript_storage().read(session_id)
    assert len(lines) == 2


async def test_delete_without_archive_transcript_leaves_it(store: SessionStore) -> None:
    session_id = await _session(store, "agent:main:a")
    assert await store.delete("agent:main:a", archive_transcript=False)
    assert await store.transcript_storage().list_sessions() == [session_id]


async def test_reset_archives_the_old_transcript_in_the_storage(store: SessionStore) -> None:
    old_id = await _session(store, "agent:main:a")
    storage = store.transcript_storage()
    old_lines, _ = await storage.read(old_id)
    entry = await store.reset("agent:main:a")
    assert entry.session_id != old_id
    with pytest.raises(TranscriptNotFoundError):
        await storage.read(old_id)
    assert isinstance(storage, ArchivingTranscriptStorage)
    [archived] = await storage.list_archives()
    assert (archived.session_id, archived.reason, archived.archived_at_ms) == (old_id, "reset", NOW)
    assert archived.size == sum(len(line) + 1 for line in old_lines)
    if isinstance(store.backend, PostgresStoreBackend):
        assert _line_rows(store, archived.name) == len(old_lines)  # kept, under the archive's name
    assert await storage.delete_archive(archived.name)
    assert await storage.list_archives() == []


async def test_a_rollover_by_resolve_archives_the_old_transcript(store: SessionStore) -> None:
    old_id = await _session(store, "agent:main:a")

    def roll(current: SessionEntry | None, ids: Callable[[], str]) -> SessionResolution:
        return resolve_session(
            current, session_key="agent:main:a", now_ms=NOW, body="/new", new_session_id=ids
        )

    entry, resolution = await store.resolve("agent:main:a", roll)
    assert resolution.is_new and entry.session_id != old_id
    storage = store.transcript_storage()
    assert isinstance(storage, ArchivingTranscriptStorage)
    assert [(a.session_id, a.reason) for a in await storage.list_archives()] == [(old_id, "reset")]


async def test_reset_keeps_a_transcript_another_entry_uses(
    store: SessionStore, caplog: pytest.LogCaptureFixture
) -> None:
    old_id = await _session(store, "agent:main:a")
    await store.patch("agent:main:b", session_id=old_id)
    with caplog.at_level(logging.WARNING, logger="sessionkeeper.store"):
        await store.reset("agent:main:a")
    assert len((await store.transcript_storage().read(old_id))[0]) == 2
    assert any("not archived" in r.getMessage() for r in caplog.records)


async def test_delete_on_postgres_with_a_transcripts_dir_archives_the_file(
    pg_schema: tuple[str, str], tmp_path: Path
) -> None:
    dsn, schema = pg_schema
    async with SessionStore.open(f"{dsn}?schema={schema}", transcripts_dir=tmp_path) as store:
        session_id = await _session(store, "agent:main:a")
        await store.patch("agent:main:b", label="y")
        assert await store.delete("agent:main:a")
        assert not await store.delete("agent:main:a")
        archived = [p.name async for p in anyio.Path(tmp_path).glob("*.deleted.*")]
        assert [name.split(".deleted.")[0] for name in archived] == [f"{session_id}.jsonl"]
        assert list(await store.backend.keys()) == ["agent:main:b"]


async def test_maintenance_of_a_memory_store_archives_and_retains_its_transcripts() -> None:
    day = 86_400_000
    store = SessionStore.in_memory(clock=FakeClock(now_ms=NOW))
    storage = store.transcript_storage()
    assert isinstance(storage, ArchivingTranscriptStorage)
    stale = await _session(store, "agent:main:stale")
    await store.backend.put("agent:main:stale", SessionEntry(session_id=stale, updated_at=NOW - 40 * day))
    await _session(store, "agent:main:fresh")
    await storage.create("old-reset", [b'{"type":"session","version":3,"id":"old-reset"}'])
    await storage.archive("old-reset", reason="reset", now_ms=NOW - 31 * day)
    dry = await run_maintenance(store, settings=MaintenanceSettings(), now_ms=NOW, dry_run=True)
    done = await run_maintenance(store, settings=MaintenanceSettings(), now_ms=NOW)
    assert [(a.name, a.action, a.reason) for a in done.file_actions] == [
        (stale, "archive", "archive-removed-transcript"),
        ("old-reset/reset/" + archive_stamp(NOW - 31 * day), "delete", "archive-retention"),
    ]
    assert dry.file_actions == done.file_actions  # the dry run reports what the run then does
    [archived] = await storage.list_archives()
    assert (archived.session_id, archived.reason) == (stale, "deleted")
