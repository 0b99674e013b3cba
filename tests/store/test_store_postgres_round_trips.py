"""
What the PostgreSQL backends send per operation (issue 13, the turn-throughput target): no round trip to
check a pooled connection while it is quiet, an entry update in two round trips and one transaction,
and a dead connection found before anything was committed replaced by another (the operation runs
again) while one that may have committed raises ``StoreUnavailableError``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import psycopg
import pytest
from psycopg import sql
from psycopg_pool import AsyncConnectionPool
from tests._pg_statements import count_statements
from tests._servers import pg_schema

from sessionkeeper.exceptions import StoreUnavailableError
from sessionkeeper.store import SessionEntry, SessionResolution, SessionStore, resolve_session
from sessionkeeper.store._postgres import PostgresStoreBackend


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema",)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async API is asyncio-only (docs/decisions.md PG-ASYNCIO)


def _terminate(dsn: str, application_name: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s AND pid <> pg_backend_pid()"
            ),
            (application_name,),
        ).fetchall()
    return sum(1 for row in rows if row[0])


async def test_a_quiet_pooled_connection_is_handed_out_without_a_round_trip(
    pg_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn, schema = pg_schema
    async with PostgresStoreBackend(dsn, schema=schema, max_size=2) as backend:
        await backend.put("k", SessionEntry(session_id="s1"))
        with count_statements(monkeypatch) as sent:
            assert await backend.get("k") == SessionEntry(session_id="s1")
        assert len(sent.statements) == 1
        assert "" not in sent.statements  # no check statement


async def test_an_update_is_two_round_trips_in_one_transaction(
    pg_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn, schema = pg_schema
    async with PostgresStoreBackend(dsn, schema=schema, max_size=2) as backend:
        await backend.put("k", SessionEntry(session_id="s1", updated_at=1))
        with count_statements(monkeypatch) as sent:
            await backend.update("k", lambda _e: SessionEntry(session_id="s1", updated_at=2))
        assert sent.round_trips == 2  # BEGIN with the locking read, the write with COMMIT
        assert sent.commands == ["BEGIN", "COMMIT"]
        assert sent.transactions == 1
        assert await backend.get("k") == SessionEntry(session_id="s1", updated_at=2)


async def test_a_resolve_that_reuses_the_entry_commits_its_stamp_without_waiting_for_the_flush(
    pg_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the reuse writes only the activity stamp (updatedAt, lastInteractionAt): visible to every other
    # writer at once, durable with the next durable commit; a new key and a rollover commit durably
    dsn, schema = pg_schema
    now = [int(time.time() * 1000) - 3_600_000]  # an hour ago, then a minute later each time

    def decide(body: str) -> Callable[[SessionEntry | None, Callable[[], str]], SessionResolution]:
        def run(current: SessionEntry | None, new_id: Callable[[], str]) -> SessionResolution:
            return resolve_session(
                current, session_key="agent:main:main", now_ms=now[0], body=body, new_session_id=new_id
            )

        return run

    async with (
        SessionStore(PostgresStoreBackend(dsn, schema=schema, max_size=2)) as store,
        PostgresStoreBackend(dsn, schema=schema, max_size=1) as other,
    ):
        with count_statements(monkeypatch) as sent:
            created, _ = await store.resolve("agent:main:main", decide("hi"))
            assert sent.lazy_commits == 0
            sent.clear()
            now[0] += 60_000
            reused, resolution = await store.resolve("agent:main:main", decide("hi"))
            assert not resolution.is_new
            assert sent.lazy_commits == 1
            assert sent.round_trips == 2  # the locking read, the write with COMMIT
            sent.clear()
            seen = await other.get("agent:main:main")  # another backend, another connection
            assert seen is not None
            assert seen == reused
            assert seen.last_interaction_at == now[0]
            assert reused.session_id == created.session_id
            sent.clear()
            now[0] += 60_000
            rolled, resolution = await store.resolve("agent:main:main", decide("/new"))
            assert resolution.is_new
            assert rolled.session_id != created.session_id
            assert sent.lazy_commits == 0


async def test_a_dead_connection_runs_the_operation_again_only_when_nothing_was_committed(
    pg_schema: tuple[str, str],
) -> None:
    # a pool given without a check hands out connections the server closed: what the check-less pool
    # sees when a connection dies between the check and its first statement
    dsn, schema = pg_schema
    name = f"sk-dead-{schema}"[:63]
    pool: AsyncConnectionPool[psycopg.AsyncConnection[object]] = AsyncConnectionPool(
        dsn, min_size=2, max_size=2, open=False, kwargs={"autocommit": True, "application_name": name}
    )
    await pool.open(wait=True)
    try:
        backend = PostgresStoreBackend(pool=pool, schema=schema)
        await backend.put("k", SessionEntry(session_id="s1"))
        assert _terminate(dsn, name) == 2
        assert await backend.get("k") == SessionEntry(session_id="s1")  # a read: again
        assert _terminate(dsn, name) >= 1
        updated = await backend.update("k", lambda _e: SessionEntry(session_id="s2"))  # died at BEGIN
        assert updated == SessionEntry(session_id="s2")
        found = await backend.get_with_revision("k")
        assert found is not None
        assert _terminate(dsn, name) >= 1
        for _ in range(2):  # one of the two connections is the dead one: a single write may have landed
            try:
                await backend.compare_and_swap(
                    "k", SessionEntry(session_id="s3"), expected_revision=found.revision
                )
            except StoreUnavailableError:
                break
        else:
            pytest.fail("a write on a dead connection was not reported")
        assert await backend.get("k") == SessionEntry(session_id="s2")  # nothing written
        await backend.aclose()
    finally:
        await pool.close()
