"""
The ``session_id`` column of a PostgreSQL store is the library's, never ``jsonb``'s (breakit H1, migration
6): an entry ``jsonb`` cannot hold (a NUL, a lone surrogate: OpenClaw writes such entries) has a ``NULL``
``entry``, and every pass asking "does an entry still use this session id?" (the disk budget, the
unreferenced pass, ``delete`` and ``reset`` of a key sharing the id, the TTL sweep) must still see it, or
it deletes or archives the live transcript. The real server, one schema per test.
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from typing import LiteralString

import psycopg
import pytest
from psycopg import sql
from tests._servers import pg_schema

from sessionkeeper.store import (
    MaintenanceSettings,
    PostgresStoreBackend,
    PostgresTranscriptStorage,
    SessionEntry,
    SessionStore,
    run_maintenance,
)
from sessionkeeper.store._postgres_migrations import MIGRATIONS, POSTGRES_SCHEMA_VERSION
from sessionkeeper.testing import FakeClock


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema",)

DAY_MS = 86_400_000
NOW_MS = int(datetime.datetime.now(datetime.UTC).timestamp() * 1000)
HEADER = b'{"type":"session","version":3,"id":"x","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}'
ODD_LABELS = pytest.mark.parametrize("label", ["a NUL \x00 here", "Bob \ud83d"], ids=["nul", "surrogate"])


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async API (decision PG-ASYNCIO)


@pytest.fixture
async def store(pg_schema: tuple[str, str]) -> AsyncIterator[SessionStore]:
    dsn, schema = pg_schema
    async with SessionStore.open(f"{dsn}?schema={schema}", clock=FakeClock(now_ms=NOW_MS)) as opened:
        yield opened


def _storage(store: SessionStore) -> PostgresTranscriptStorage:
    storage = store.transcript_storage()
    assert isinstance(storage, PostgresTranscriptStorage)
    return storage


def _sql(store: SessionStore, text: LiteralString, *params: object) -> list[tuple[object, ...]]:
    backend = store.backend
    assert isinstance(backend, PostgresStoreBackend) and backend.dsn is not None
    tables = {
        "t": sql.Identifier(backend.schema, "sk_sessions"),
        "h": sql.Identifier(backend.schema, "sk_transcripts"),
    }
    with psycopg.connect(backend.dsn, autocommit=True) as conn:
        cur = conn.execute(sql.SQL(text).format(**tables), params)
        return cur.fetchall() if cur.description else []


async def _session(
    store: SessionStore, key: str, sid: str, *, label: str | None, age_days: float, size: int = 0
) -> None:
    """An entry (``label`` on it) updated ``age_days`` ago and its transcript, last written then."""
    entry = SessionEntry(session_id=sid, updated_at=NOW_MS - int(age_days * DAY_MS))
    if label is not None:
        entry = SessionEntry(session_id=sid, updated_at=NOW_MS - int(age_days * DAY_MS), label=label)
    await store.backend.put(key, entry)
    lines = [HEADER] + ([b'{"pad":"' + b"x" * size + b'"}'] if size else [])
    if sid not in await _storage(store).list_sessions():
        await _storage(store).create(sid, lines)
    when = datetime.datetime.fromtimestamp((NOW_MS - age_days * DAY_MS) / 1000, datetime.UTC)
    _sql(store, "UPDATE {h} SET updated_at = %s WHERE session_id = %s", when, sid)


def _assert_row_id(store: SessionStore, key: str, sid: str) -> None:
    """``key``'s row has no ``jsonb`` copy (the case of H1) and still its session id."""
    [(session_id, no_jsonb)] = _sql(
        store, "SELECT session_id, entry IS NULL FROM {t} WHERE session_key = %s", key
    )
    assert (session_id, no_jsonb) == (sid, True)


@ODD_LABELS
async def test_the_disk_budget_keeps_the_transcript_of_an_entry_jsonb_cannot_hold(
    store: SessionStore, label: str
) -> None:
    await _session(store, "agent:main:main", "s-main", label=label, age_days=9, size=5000)
    await _session(store, "agent:main:direct:other", "s-other", label=None, age_days=1, size=100)
    settings = MaintenanceSettings(prune_after_ms=None, max_disk_bytes=1000)
    report = await run_maintenance(store, settings=settings, now_ms=NOW_MS, on_save=True)
    assert "s-main" not in [a.name for a in report.file_actions]
    assert "s-main" in await _storage(store).list_sessions()
    entry = await store.get("agent:main:main")
    assert entry is not None and entry.session_id == "s-main"
    _assert_row_id(store, "agent:main:main", "s-main")


@ODD_LABELS
async def test_the_unreferenced_pass_keeps_the_transcript_of_an_entry_jsonb_cannot_hold(
    store: SessionStore, label: str
) -> None:
    await _session(store, "agent:main:main", "s-main", label=label, age_days=50)
    report = await run_maintenance(store, settings=MaintenanceSettings(), now_ms=NOW_MS)
    assert report.actions["agent:main:main"] == "keep"
    assert [a.name for a in report.file_actions if a.reason == "unreferenced-artifact"] == []
    assert await _storage(store).list_sessions() == ["s-main"]
    _assert_row_id(store, "agent:main:main", "s-main")


@ODD_LABELS
async def test_deleting_a_key_sharing_the_id_keeps_the_transcript_an_odd_entry_uses(
    store: SessionStore, label: str
) -> None:
    await _session(store, "agent:main:a", "s-shared", label=label, age_days=1)
    await _session(store, "agent:main:b", "s-shared", label=None, age_days=1)
    assert await store.delete("agent:main:b")
    assert await _storage(store).list_sessions() == ["s-shared"]
    assert await _storage(store).list_archives() == []
    _assert_row_id(store, "agent:main:a", "s-shared")


@ODD_LABELS
async def test_resetting_a_key_sharing_the_id_does_not_archive_what_an_odd_entry_uses(
    store: SessionStore, label: str
) -> None:
    await _session(store, "agent:main:a", "s-shared", label=label, age_days=1)
    await _session(store, "agent:main:b", "s-shared", label=None, age_days=1)
    reset = await store.reset("agent:main:b")
    assert reset.session_id != "s-shared"
    assert "s-shared" in await _storage(store).list_sessions()
    assert await _storage(store).list_archives() == []
    _assert_row_id(store, "agent:main:a", "s-shared")


@ODD_LABELS
async def test_the_ttl_sweep_keeps_the_transcript_an_odd_entry_still_uses(
    store: SessionStore, label: str
) -> None:
    await _session(store, "agent:main:a", "s-shared", label=label, age_days=1)
    await _session(store, "agent:main:b", "s-shared", label=None, age_days=1)
    _sql(store, "UPDATE {t} SET expires_at = now() - interval '1 second' WHERE session_key = 'agent:main:b'")
    backend = store.backend
    assert isinstance(backend, PostgresStoreBackend)
    assert await backend.sweep_expired() == ["agent:main:b"]
    assert await _storage(store).list_sessions() == ["s-shared"]
    _assert_row_id(store, "agent:main:a", "s-shared")


async def test_migration_6_gives_rows_written_without_jsonb_their_session_id(
    pg_schema: tuple[str, str],
) -> None:
    dsn, schema = pg_schema
    name = sql.Identifier(schema)
    table = sql.Identifier(schema, "sk_sessions")
    rows = [  # as version 5 wrote them: no jsonb copy for a NUL or a lone surrogate
        ("agent:main:nul", '{"sessionId":"s-nul","label":"a\\u0000b"}', None),
        ("agent:main:surrogate", '{"sessionId":"s-sur","label":"Bob \\ud83d"}', None),
        ("agent:main:plain", '{"sessionId":"s-plain"}', '{"sessionId":"s-plain"}'),
        ("agent:main:none", '{"label":"x\\u0000"}', None),
    ]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(name))
        migrations = sql.Identifier(schema, "sk_migrations")
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz)"
            ).format(migrations)
        )
        for number, title, statements in MIGRATIONS[:5]:
            for statement in statements:
                conn.execute(sql.SQL(statement).format(schema=name))  # pyright: ignore[reportArgumentType]
            conn.execute(sql.SQL("INSERT INTO {} VALUES (%s, %s, now())").format(migrations), (number, title))
        insert = sql.SQL(
            "INSERT INTO {} (store_id, session_key, entry_text, entry) VALUES ('default', %s, %s, %s)"
        )
        for row in rows:
            conn.execute(insert.format(table), row)
        before: dict[object, object] = dict(
            conn.execute(sql.SQL("SELECT session_key, session_id FROM {}").format(table)).fetchall()
        )
        assert before["agent:main:nul"] is None and before["agent:main:surrogate"] is None
    async with PostgresStoreBackend(dsn, schema=schema) as pg:
        assert (await pg.get("agent:main:surrogate")) is not None  # opening migrates
        await pg.put("agent:main:new", SessionEntry(session_id="s-new", label="n\x00"))
    with psycopg.connect(dsn, autocommit=True) as conn:  # a version-5 writer still running (no session_id)
        conn.execute(
            insert.format(table), ("agent:main:old-writer", '{"sessionId":"s-ow"}', '{"sessionId":"s-ow"}')
        )
        conn.execute(
            sql.SQL(
                "UPDATE {} SET entry_text = %s, entry = %s WHERE session_key = 'agent:main:plain'"
            ).format(table),
            ('{"sessionId":"s-plain2"}', '{"sessionId":"s-plain2"}'),
        )
        after: dict[object, object] = dict(
            conn.execute(sql.SQL("SELECT session_key, session_id FROM {}").format(table)).fetchall()
        )
        version = conn.execute(sql.SQL("SELECT max(version) FROM {}.sk_migrations").format(name)).fetchone()
    assert after == {
        "agent:main:nul": "s-nul",
        "agent:main:surrogate": "s-sur",
        "agent:main:plain": "s-plain2",
        "agent:main:none": None,
        "agent:main:new": "s-new",
        "agent:main:old-writer": "s-ow",
    }
    assert version == (POSTGRES_SCHEMA_VERSION,) == (6,)


@ODD_LABELS
async def test_a_new_session_id_on_an_odd_entry_is_the_rows_id(store: SessionStore, label: str) -> None:
    await _session(store, "agent:main:a", "s-first", label=label, age_days=1)
    await store.patch("agent:main:a", session_id="s-second")
    _assert_row_id(store, "agent:main:a", "s-second")
    entry = await store.get("agent:main:a")
    assert entry is not None and (entry.session_id, entry.label) == ("s-second", label)
