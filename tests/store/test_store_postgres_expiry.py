"""
Time to live on PostgreSQL (issue 13): the ``ttl`` URL parameter (a duration or seconds) sets ``ttl_s`` of
the store backend and of its transcript storage; a write that changes an entry sets its ``expires_at``;
``sweep_expired`` removes expired entries in batches with the transcript rows they alone used. The real
server, one schema per test; expiry is made to pass by moving ``expires_at`` back, never by waiting.
"""

from __future__ import annotations

import datetime

import psycopg
import pytest
from psycopg import sql
from tests._servers import pg_schema

from sessionkeeper.exceptions import ConfigError
from sessionkeeper.store import PostgresStoreBackend, PostgresTranscriptStorage, SessionStore
from sessionkeeper.store._urls import open_store_url


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema",)

HEADER = b'{"type":"session","version":3,"id":"x","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}'


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async API (decision PG-ASYNCIO)


def _sql(dsn: str, schema: str, text: str, *params: object) -> list[tuple[object, ...]]:
    tables = {"t": sql.Identifier(schema, "sk_sessions"), "h": sql.Identifier(schema, "sk_transcripts")}
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(sql.SQL(text).format(**tables), params)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


def _expire(dsn: str, schema: str, *keys: str) -> None:
    """Move the entries' expiry an hour into the past."""
    _sql(
        dsn,
        schema,
        "UPDATE {t} SET expires_at = now() - interval '1 hour' WHERE session_key = ANY(%s)",
        list(keys),
    )


@pytest.mark.parametrize(
    ("value", "seconds"), [("30d", 30 * 86400), ("12h", 43200), ("1h30m", 5400), ("3600", 3600), ("0.5", 0.5)]
)
def test_the_ttl_url_parameter_is_a_duration_or_seconds(value: str, seconds: float) -> None:
    backend = open_store_url(f"postgresql://127.0.0.1/test?ttl={value}")
    assert isinstance(backend, PostgresStoreBackend) and backend.ttl_s == seconds
    assert "ttl" not in str(backend.dsn)  # ours, not libpq's
    redis = open_store_url(f"redis://127.0.0.1:6379/0?ttl={value}")
    assert redis.ttl_s == seconds  # type: ignore[attr-defined]


@pytest.mark.parametrize("value", ["soon", "0", "-5", "0d"])
def test_a_bad_ttl_is_a_config_error(value: str) -> None:
    with pytest.raises(ConfigError, match="ttl"):
        open_store_url(f"postgresql://127.0.0.1/test?ttl={value}")


async def test_writes_set_the_expiry_of_entries_and_transcripts(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    async with SessionStore.open(f"{dsn}?schema={schema}&ttl=2d") as store:
        storage = store.transcript_storage()
        assert isinstance(storage, PostgresTranscriptStorage)
        assert storage.ttl == datetime.timedelta(days=2)
        entry = await store.patch("agent:main:a", label="x")
        await storage.create(str(entry.session_id), [HEADER])
        [(entry_left, transcript_left)] = _sql(
            dsn,
            schema,
            "SELECT (SELECT expires_at - now() FROM {t}), (SELECT expires_at - now() FROM {h})",
        )
        for left in (entry_left, transcript_left):
            assert isinstance(left, datetime.timedelta)
            assert datetime.timedelta(days=1, hours=23) < left <= datetime.timedelta(days=2)
    async with SessionStore.open(f"{dsn}?schema={schema}") as plain:  # no ttl: kept
        await plain.patch("agent:main:b", label="y")
        assert _sql(dsn, schema, "SELECT expires_at FROM {t} WHERE session_key = 'agent:main:b'") == [(None,)]


async def test_sweep_expired_removes_entries_and_the_transcripts_they_alone_used(
    pg_schema: tuple[str, str],
) -> None:
    dsn, schema = pg_schema
    async with SessionStore.open(f"{dsn}?schema={schema}&ttl=1h") as store:
        storage = store.transcript_storage()
        ids = {}
        for key in ["agent:main:a", "agent:main:b", "agent:main:c"]:
            ids[key] = str((await store.patch(key, label="x")).session_id)
            await storage.create(ids[key], [HEADER])
        await store.patch("agent:main:shares-c", session_id=ids["agent:main:c"])
        _expire(dsn, schema, "agent:main:a", "agent:main:c")
        backend = store.backend
        assert isinstance(backend, PostgresStoreBackend)
        assert await backend.sweep_expired() == ["agent:main:a", "agent:main:c"]
        assert sorted(await backend.keys()) == ["agent:main:b", "agent:main:shares-c"]
        # a's transcript went with it; c's stays for the entry that shares it
        assert await storage.list_sessions() == sorted([ids["agent:main:b"], ids["agent:main:c"]])
        assert await backend.sweep_expired() == []


async def test_sweep_expired_goes_in_batches(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    async with SessionStore.open(f"{dsn}?schema={schema}&ttl=60") as store:
        keys = [f"agent:main:k{i}" for i in range(7)]
        for key in keys:
            await store.patch(key, label="x")
        _expire(dsn, schema, *keys)
        backend = store.backend
        assert isinstance(backend, PostgresStoreBackend)
        first = await backend.sweep_expired(batch_size=3, max_batches=2)
        assert len(first) == 6
        assert len(await backend.sweep_expired(batch_size=3)) == 1
        assert await backend.keys() == []
        with pytest.raises(ValueError, match="positive"):
            await backend.sweep_expired(batch_size=0)


async def test_an_expired_archive_is_swept_with_the_transcripts(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    async with PostgresTranscriptStorage(dsn, schema=schema, ttl_s=60) as storage:
        await storage.create("s-1", [HEADER])
        await storage.create("s-2", [HEADER])
        archived = await storage.archive("s-1", reason="reset", now_ms=1_790_000_000_000)
        assert archived is not None
        _sql(dsn, schema, "UPDATE {h} SET expires_at = now() - interval '1 hour'")
        assert await storage.sweep_expired() == sorted([archived.name, "s-2"])
        assert await storage.list_archives() == [] and await storage.list_sessions() == []
