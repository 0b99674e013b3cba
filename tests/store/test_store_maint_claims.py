"""
A held transcript writer claim is a held lock file to store maintenance (DESIGN D6, field report B19;
breakit M1): on PostgreSQL (the set-based SQL passes, the claim an advisory lock) and in memory (the
claim registry of ``MemoryTranscriptStorage``) the claimed session's entry comes out as ``keep`` from the
age, count and budget passes, its transcript is never archived or deleted, and its writer keeps
appending afterwards. Released, the same session is pruned as usual. The real server, one schema per test.
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg import sql
from tests._servers import pg_schema

from sessionkeeper.store import (
    MaintenanceSettings,
    PostgresStoreBackend,
    SessionEntry,
    SessionStore,
    run_maintenance,
)
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import TranscriptStorage, WriterClaim


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema",)

DAY_MS = 86_400_000
NOW_MS = int(datetime.datetime.now(datetime.UTC).timestamp() * 1000)
HEADER = b'{"type":"session","version":3,"id":"x","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}'
HELD, FREE = "agent:main:direct:held", "agent:main:direct:free"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async API (decision PG-ASYNCIO)


@pytest.fixture(params=["postgresql", "memory"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[SessionStore]:
    if request.param == "memory":
        async with SessionStore.in_memory(clock=FakeClock(now_ms=NOW_MS)) as memory:
            yield memory
        return
    dsn, schema = request.getfixturevalue("pg_schema")
    async with SessionStore.open(f"{dsn}?schema={schema}", clock=FakeClock(now_ms=NOW_MS)) as opened:
        yield opened


@pytest.fixture
async def pg_store(pg_schema: tuple[str, str]) -> AsyncIterator[SessionStore]:
    dsn, schema = pg_schema
    async with SessionStore.open(f"{dsn}?schema={schema}", clock=FakeClock(now_ms=NOW_MS)) as opened:
        yield opened


def _age(store: SessionStore, sid: str, age_days: float) -> None:
    """Make ``sid``'s transcript last written ``age_days`` ago (PostgreSQL stamps writes itself)."""
    backend = store.backend
    if not isinstance(backend, PostgresStoreBackend):
        return
    assert backend.dsn is not None
    when = datetime.datetime.fromtimestamp((NOW_MS - age_days * DAY_MS) / 1000, datetime.UTC)
    with psycopg.connect(backend.dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("UPDATE {h} SET updated_at = %s WHERE session_id = %s").format(
                h=sql.Identifier(backend.schema, "sk_transcripts")
            ),
            (when, sid),
        )


async def _session(store: SessionStore, key: str, sid: str, *, age_days: float, size: int = 0) -> None:
    updated = NOW_MS - int(age_days * DAY_MS)
    await store.backend.put(key, SessionEntry(session_id=sid, updated_at=updated))
    pad = [b'{"pad":"' + b"x" * size + b'"}'] if size else []
    await store.transcript_storage().create(sid, [HEADER, *pad])
    _age(store, sid, age_days)


async def _append_as_writer(storage: TranscriptStorage, sid: str, claim: WriterClaim) -> list[bytes]:
    """The claim holder appends a line after maintenance and reads its transcript back."""
    _, mark = await storage.read(sid)
    await storage.append(sid, [b'{"after":"maintenance"}'], mark=mark, claim=claim)
    lines, _ = await storage.read(sid)
    return lines


async def test_a_held_claim_keeps_a_stale_entry_and_its_transcript(store: SessionStore) -> None:
    await _session(store, HELD, "s-held", age_days=40)
    await _session(store, FREE, "s-free", age_days=40)
    storage = store.transcript_storage()
    claim = await storage.claim("s-held")
    try:
        dry = await run_maintenance(store, now_ms=NOW_MS, dry_run=True)
        assert dict(dry.actions) == {HELD: "keep", FREE: "prune-stale"}
        report = await run_maintenance(store, now_ms=NOW_MS)
        assert dict(report.actions) == {HELD: "keep", FREE: "prune-stale"}
        assert [(a.name, a.action) for a in report.file_actions] == [("s-free", "archive")]
        assert await storage.list_sessions() == ["s-held"]
        assert await store.get(HELD) is not None and await store.get(FREE) is None
        # the writer keeps appending afterwards: its transcript was never moved
        assert (await _append_as_writer(storage, "s-held", claim))[-1] == b'{"after":"maintenance"}'
    finally:
        await claim.release()
    # released, the same stale session is pruned and archived as usual
    report = await run_maintenance(store, now_ms=NOW_MS)
    assert dict(report.actions) == {HELD: "prune-stale"}
    assert [(a.name, a.action) for a in report.file_actions] == [("s-held", "archive")]
    assert await storage.list_sessions() == []


async def test_a_held_claim_keeps_its_entry_under_the_entry_cap(store: SessionStore) -> None:
    await _session(store, HELD, "s-held", age_days=3)
    await _session(store, FREE, "s-free", age_days=2)
    claim = await store.transcript_storage().claim("s-held")
    try:
        settings = MaintenanceSettings(max_entries=1)
        report = await run_maintenance(store, settings=settings, now_ms=NOW_MS)
        assert dict(report.actions) == {HELD: "keep", FREE: "cap-overflow"}
        assert await store.transcript_storage().list_sessions() == ["s-held"]
    finally:
        await claim.release()


async def test_the_disk_budget_never_evicts_a_claimed_session(store: SessionStore) -> None:
    await _session(store, HELD, "s-held", age_days=9, size=3000)  # the least recently updated
    await _session(store, FREE, "s-free", age_days=8, size=3000)
    await _session(store, "agent:main:direct:new", "s-new", age_days=1, size=3000)
    storage = store.transcript_storage()
    claim = await storage.claim("s-held")
    try:
        # PostgreSQL counts transcript rows and entries; memory only its entries' JSON bytes
        on_pg = isinstance(store.backend, PostgresStoreBackend)
        max_bytes, high = (9000, 7000) if on_pg else (10, 5)
        settings = MaintenanceSettings(prune_after_ms=None, max_disk_bytes=max_bytes, high_water_bytes=high)
        dry = await run_maintenance(store, settings=settings, now_ms=NOW_MS, on_save=True, dry_run=True)
        assert dry.actions[HELD] == "keep" and dry.actions[FREE] == "evict-budget"
        report = await run_maintenance(store, settings=settings, now_ms=NOW_MS, on_save=True)
        assert dict(report.actions) == dict(dry.actions)
        assert "s-held" not in [a.name for a in report.file_actions]
        assert "s-held" in await storage.list_sessions() and await store.get(HELD) is not None
        assert (await _append_as_writer(storage, "s-held", claim))[-1] == b'{"after":"maintenance"}'
    finally:
        await claim.release()


async def test_a_claimed_transcript_without_an_entry_is_never_swept(pg_store: SessionStore) -> None:
    store = pg_store
    storage = store.transcript_storage()
    await storage.create("s-new-writer", [HEADER, b'{"pad":"' + b"x" * 4000 + b'"}'])
    _age(store, "s-new-writer", 40)
    await storage.create("s-orphan", [HEADER])
    _age(store, "s-orphan", 40)
    claim = await storage.claim("s-new-writer")  # its entry is not written yet
    try:
        settings = MaintenanceSettings(max_disk_bytes=1000, high_water_bytes=500)
        report = await run_maintenance(store, settings=settings, now_ms=NOW_MS)
        assert [a.name for a in report.file_actions] == ["s-orphan"]
        assert await storage.list_sessions() == ["s-new-writer"]
    finally:
        await claim.release()
