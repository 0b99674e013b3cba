"""Typing tests of the session store: what users call, the types they get back (checked, never run)."""

from __future__ import annotations

from pathlib import Path
from typing import assert_type

import msgspec

from sessionkeeper import SessionEntry, SessionStore
from sessionkeeper.abc import Clock, StoreBackend
from sessionkeeper.exceptions import SessionKeeperError
from sessionkeeper.store import (
    CopiedSession,
    CopyReport,
    InMemoryStoreBackend,
    JsonFileStoreBackend,
    LiveTranscriptLines,
    PostgresStoreBackend,
    PostgresTranscriptStorage,
    SqliteStoreBackend,
    copy_sessions,
)
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import StorageMark, TranscriptStorage, WriterClaim, iter_line_batches


async def store_calls() -> None:
    assert_type(SessionStore.open("sessions.json"), SessionStore)
    assert_type(SessionStore.in_memory(), SessionStore)
    async with SessionStore.in_memory(clock=FakeClock()) as store:
        assert_type(store, SessionStore)
        assert_type(await store.get("agent:main:main"), SessionEntry | None)
        assert_type(await store.require("agent:main:main"), SessionEntry)
        assert_type(await store.patch("agent:main:main"), SessionEntry)
        assert_type(await store.list(), list[tuple[str, SessionEntry]])


async def postgres_store_calls() -> None:
    async with PostgresStoreBackend("postgresql://db/agents", store_id="main", ttl_s=86400) as backend:
        assert_type(backend.ttl_s, float | None)
        assert_type(await backend.sweep_expired(batch_size=100, max_batches=2), list[str])


async def postgres_transcript_calls() -> None:
    async with PostgresTranscriptStorage("postgresql://db/agents", store_id="main", ttl_s=86400) as pg:
        mark = await pg.create("s-1", [b'{"type":"session"}'])
        assert_type(mark, StorageMark)
        assert_type(await pg.read("s-1"), tuple[list[bytes], StorageMark])
        assert_type(await pg.append("s-1", [b"{}"], mark=mark, idempotency_key="k"), StorageMark)
        assert_type(await pg.claim("s-1", timeout_ms=500), WriterClaim)
        assert_type(await pg.sweep_expired(batch_size=100), list[str])
        assert_type(await pg.list_sessions(), list[str])
        assert_type(await pg.read_from("s-1", start=10), tuple[list[bytes], StorageMark])
        assert_type(await pg.read_tail("s-1", lines=50), tuple[int, list[bytes], StorageMark])
        assert_type(await pg.read_live("s-1"), LiveTranscriptLines)
        assert_type((await pg.read_live("s-1")).jsonl(), bytes)


def entry_fields(entry: SessionEntry) -> None:
    # absent optional wire fields are msgspec.UNSET, not None (CONTRIBUTING "Practices")
    assert_type(entry.session_id, str | msgspec.UnsetType)
    assert_type(entry.updated_at, int | msgspec.UnsetType)
    if entry.updated_at is not msgspec.UNSET:
        assert_type(entry.updated_at, int)
    if isinstance(entry.session_id, str):
        assert_type(entry.session_id, str)


def takes_backend(backend: StoreBackend) -> StoreBackend:
    return backend


def protocols(clock: Clock) -> None:
    # the shipped backends satisfy the public protocol statically, not only at run time
    assert_type(takes_backend(InMemoryStoreBackend()), StoreBackend)
    assert_type(takes_backend(JsonFileStoreBackend("sessions.json")), StoreBackend)
    assert_type(takes_backend(SqliteStoreBackend("sessions.sqlite")), StoreBackend)
    assert_type(clock.now_ms(), int)
    assert_type(clock.monotonic(), float)


async def maintenance_members(backend: StoreBackend) -> None:
    # what run_maintenance reads through the protocol (issue 12: no isinstance of a backend class)
    assert_type(backend.store_file, Path | None)
    assert_type(backend.dropped_keys, tuple[str, ...])
    assert_type(await backend.transaction(len, purge_dropped=True), int)


async def copying(source: SessionStore, target: SessionStore, storage: TranscriptStorage) -> None:
    # issue 13: sessionkeeper export / import
    report = await copy_sessions(source, target, keys=["agent:main:main"], overwrite=True, dry_run=True)
    assert_type(report, CopyReport)
    assert_type(report.failed, tuple[CopiedSession, ...])
    assert_type(report.ok, bool)
    for session in report.sessions:
        assert_type(session.error, SessionKeeperError | None)
        assert_type(session.lines, int)
    async for batch in iter_line_batches(storage, "s1", batch_bytes=1 << 20):
        assert_type(batch, list[bytes])
