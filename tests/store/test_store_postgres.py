"""
``PostgresStoreBackend`` on the real PostgreSQL server (DESIGN "Storage backends", Decision 8): the full
store conformance suite, revisions and compare-and-swap, byte-exact rows, migrations under concurrent
starts, read-only opens.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

import psycopg
import pytest
from psycopg import sql
from tests._servers import pg_schema

from sessionkeeper.exceptions import (
    ConfigError,
    InvalidSessionEntryError,
    SessionBusyError,
    StaleEntryError,
    StoreCorruptError,
    StoreError,
    StoreUnavailableError,
)
from sessionkeeper.store import RawJsonValue, SessionEntry, session_entry_from_dict, session_entry_to_dict
from sessionkeeper.store._postgres import POSTGRES_SCHEMA_VERSION, PostgresStoreBackend
from sessionkeeper.testing.conformance import CONFORMANCE_CHECKS, ConformanceCheck


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema",)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async API is asyncio-only (docs/decisions.md PG-ASYNCIO)


def _rows(dsn: str, query: sql.Composable, *params: object) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(query, params).fetchall()


@pytest.mark.parametrize("check", CONFORMANCE_CHECKS, ids=lambda c: c.name)
async def test_postgres_backend_conformance(check: ConformanceCheck, pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    counter = {"n": 0}

    def factory() -> PostgresStoreBackend:
        counter["n"] += 1
        return PostgresStoreBackend(dsn, schema=schema, store_id=f"store{counter['n']}", max_size=4)

    def reopen() -> PostgresStoreBackend:
        return PostgresStoreBackend(dsn, schema=schema, store_id=f"store{counter['n']}", max_size=4)

    await check.run(factory, reopen=reopen)


async def test_rows_keep_the_exact_json_text_and_a_jsonb_copy(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    raw = (
        '{"sessionId":"s1","updatedAt":1789990375000,"label":"ünïcode ✓",'
        '"futurePlugin":{"z":[1,2.5,null],"a":{"deep":true}},"compactionCount":"nan"}'
    )
    entry = session_entry_from_dict(json.loads(raw))
    async with _backend(dsn, schema) as b:
        await b.put("agent:main:main", entry)
        assert await b.get("agent:main:main") == entry
    table = sql.Identifier(schema, "sk_sessions")
    rows = _rows(dsn, sql.SQL("SELECT entry_text, entry, session_id, revision FROM {}").format(table))
    [(text, jsonb, session_id, revision)] = rows
    assert isinstance(text, str)
    assert json.loads(text) == json.loads(raw)
    assert jsonb == json.loads(raw)  # the jsonb projection holds the same object
    assert session_id == "s1"
    assert revision == 1


async def test_entries_jsonb_cannot_hold_keep_their_text(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    entry = session_entry_from_dict({"sessionId": "s1", "label": "nul\x00 and lone \ud800 surrogate"})
    async with _backend(dsn, schema) as b:
        await b.put("k", entry)
        got = await b.get("k")
        assert got == entry
    [(jsonb,)] = _rows(dsn, sql.SQL("SELECT entry FROM {}").format(sql.Identifier(schema, "sk_sessions")))
    assert jsonb is None


async def test_keys_postgres_text_cannot_hold_are_refused(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    async with _backend(dsn, schema) as b:
        for key in ("a\x00b", "lone\udc00"):
            with pytest.raises(InvalidSessionEntryError):
                await b.put(key, SessionEntry(session_id="s1"))
            assert await b.get(key) is None
            assert await b.delete(key) is False
        assert await b.keys() == []


async def test_revision_counts_changes_and_cas_rejects_a_stale_writer(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    async with _backend(dsn, schema) as b:
        assert await b.get_with_revision("k") is None
        assert (
            await b.compare_and_swap("k", SessionEntry(session_id="s1", updated_at=1), expected_revision=None)
            == 1
        )
        with pytest.raises(StaleEntryError) as created_twice:
            await b.compare_and_swap("k", SessionEntry(session_id="s1", updated_at=2), expected_revision=None)
        assert created_twice.value.current_revision == 1
        # two writers read revision 1; the first swap wins, the second sees the error and nothing lands
        read_a = await b.get_with_revision("k")
        read_b = await b.get_with_revision("k")
        assert read_a is not None and read_b is not None and read_a.revision == read_b.revision == 1
        assert (
            await b.compare_and_swap("k", SessionEntry(session_id="s1", label="a"), expected_revision=1) == 2
        )
        with pytest.raises(StaleEntryError) as stale:
            await b.compare_and_swap("k", SessionEntry(session_id="s1", label="b"), expected_revision=1)
        assert (stale.value.expected_revision, stale.value.current_revision) == (1, 2)
        assert await b.get("k") == SessionEntry(session_id="s1", label="a")
        # an unchanged write keeps the revision; a changed one bumps it once
        await b.put("k", SessionEntry(session_id="s1", label="a"))
        await b.update("k", lambda cur: cur)
        assert (await b.get_with_revision("k")).revision == 2  # type: ignore[union-attr]
        await b.update("k", lambda cur: SessionEntry(session_id="s1", label="c"))
        assert (await b.get_with_revision("k")).revision == 3  # type: ignore[union-attr]
        await b.delete("k")
        with pytest.raises(StaleEntryError) as gone:
            await b.compare_and_swap("k", SessionEntry(session_id="s1"), expected_revision=3)
        assert gone.value.current_revision is None


async def test_concurrent_updates_from_many_pools_lose_nothing(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    backends = [_backend(dsn, schema, max_size=3) for _ in range(4)]
    try:
        await backends[0].put("shared", session_entry_from_dict({"sessionId": "s", "marks": []}))

        def add(mark: str):  # type: ignore[no-untyped-def]
            def fn(current: SessionEntry | None) -> SessionEntry:
                assert current is not None
                raw = session_entry_to_dict(current)
                raw["marks"] = [*raw["marks"], mark]
                return session_entry_from_dict(raw)

            return fn

        marks = [f"{i}:{j}" for i in range(4) for j in range(15)]
        await asyncio.gather(
            *(backends[int(m.split(":")[0])].update("shared", add(m)) for m in marks),
            *(backends[i].put(f"own:{i}", SessionEntry(session_id=f"o{i}")) for i in range(4)),
        )
        got = await backends[1].get_with_revision("shared")
        assert got is not None
        stored = session_entry_to_dict(got.entry)["marks"]
        assert sorted(stored) == sorted(marks)
        assert got.revision == 1 + len(marks)
        assert len(await backends[2].keys()) == 5
    finally:
        for b in backends:
            await b.aclose()


async def test_transaction_restarts_when_a_key_it_creates_appears(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    async with _backend(dsn, schema) as b, _backend(dsn, schema) as other:
        await b.put("a", SessionEntry(session_id="s1"))
        calls: list[list[str]] = []

        async def racer() -> None:
            await other.put("new", SessionEntry(session_id="racer", label="from the other writer"))

        loop = asyncio.get_running_loop()

        def edit(entries: dict[str, SessionEntry]) -> int:
            calls.append(list(entries))
            if len(calls) == 1:  # the other writer creates "new" while this transaction runs
                asyncio.run_coroutine_threadsafe(racer(), loop)
                _wait_for_row(dsn, schema, "new")
            if "new" in entries:
                entries["new"] = SessionEntry(session_id="racer", label="seen and kept")
            else:
                entries["new"] = SessionEntry(session_id="tx")
            return len(calls)

        result = await asyncio.to_thread(_run_in_new_loop, edit, dsn, schema)
        assert result == 2
        assert calls == [["a"], ["a", "new"]]
        assert await b.get("new") == SessionEntry(session_id="racer", label="seen and kept")


def _wait_for_row(dsn: str, schema: str, key: str) -> None:
    table = sql.Identifier(schema, "sk_sessions")
    with psycopg.connect(dsn, autocommit=True) as conn:
        for _ in range(2000):
            if conn.execute(
                sql.SQL("SELECT 1 FROM {} WHERE session_key = %s").format(table), (key,)
            ).fetchone():
                return
            time.sleep(0.005)
    raise AssertionError(f"{key!r} never committed")


def _run_in_new_loop(edit, dsn: str, schema: str) -> int:  # type: ignore[no-untyped-def]
    async def main() -> int:
        async with _backend(dsn, schema) as own:
            return await own.transaction(edit)

    return asyncio.run(main())


async def test_concurrent_first_starts_migrate_once(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    backends = [_backend(dsn, schema, store_id=f"s{i}", max_size=1) for i in range(6)]
    try:
        await asyncio.gather(*(b.put("k", SessionEntry(session_id=f"s{i}")) for i, b in enumerate(backends)))
    finally:
        for b in backends:
            await b.aclose()
    query = sql.SQL("SELECT version, name FROM {} ORDER BY version").format(
        sql.Identifier(schema, "sk_migrations")
    )
    rows = _rows(dsn, query)
    assert rows == [
        (1, "session entries"),
        (2, "maintenance columns"),
        (3, "transcripts"),
        (4, "transcript archives"),
        (5, "entry expiry"),
        (6, "session id from the library"),
    ]
    assert POSTGRES_SCHEMA_VERSION == 6


async def test_a_schema_newer_than_the_library_is_refused(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    async with _backend(dsn, schema) as b:
        await b.put("k", SessionEntry(session_id="s1"))
    migrations = sql.Identifier(schema, "sk_migrations")
    _rows(dsn, sql.SQL("INSERT INTO {} (version, name) VALUES (99, 'future') RETURNING 1").format(migrations))
    async with _backend(dsn, schema) as newer:
        with pytest.raises(StoreCorruptError, match="newer than this library"):
            await newer.get("k")


async def test_read_only_creates_nothing_and_refuses_writes(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    async with _backend(dsn, schema, read_only=True) as ro:
        assert await ro.load_all() == {}
        assert await ro.keys() == []
        assert await ro.get("k") is None
        with pytest.raises(StoreError, match="read-only"):
            await ro.put("k", SessionEntry(session_id="s1"))
    found = _rows(dsn, sql.SQL("SELECT 1 FROM pg_namespace WHERE nspname = %s"), schema)
    assert found == []  # no schema was created
    async with _backend(dsn, schema) as rw:
        await rw.put("k", SessionEntry(session_id="s1"))
    async with _backend(dsn, schema, read_only=True) as ro:
        assert await ro.load_all() == {"k": SessionEntry(session_id="s1")}


async def test_a_row_lock_held_too_long_raises_session_busy(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    async with _backend(dsn, schema, lock_timeout_s=0.2) as b:
        await b.put("k", SessionEntry(session_id="s1"))
        table = sql.Identifier(schema, "sk_sessions")
        async with await psycopg.AsyncConnection.connect(dsn) as holder:
            await holder.execute(sql.SQL("SELECT 1 FROM {} WHERE session_key = 'k' FOR UPDATE").format(table))
            with pytest.raises(SessionBusyError):
                await b.update("k", lambda cur: SessionEntry(session_id="s1", label="x"))
        assert await b.get("k") == SessionEntry(session_id="s1")


async def test_an_unreachable_server_raises_store_unavailable() -> None:
    b = PostgresStoreBackend("postgresql://127.0.0.1:1/test", connect_timeout_s=0.5)
    try:
        with pytest.raises(StoreUnavailableError):
            await b.keys()
    finally:
        await b.aclose()


def test_bad_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        PostgresStoreBackend()
    with pytest.raises(ConfigError):
        PostgresStoreBackend("postgresql://127.0.0.1/test", schema='x"; DROP TABLE y; --')


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_under_trio_a_clear_error(anyio_backend: str) -> None:
    b = PostgresStoreBackend("postgresql://127.0.0.1/test")
    with pytest.raises(StoreError, match="asyncio only"):
        await b.keys()
    await b.aclose()


def _backend(dsn: str, schema: str, **kwargs: object) -> PostgresStoreBackend:
    kwargs.setdefault("max_size", 4)
    return PostgresStoreBackend(dsn, schema=schema, **kwargs)  # type: ignore[arg-type]


def test_no_server_skips_with_the_reason_but_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import _servers

    monkeypatch.setattr(_servers, "POSTGRES_DSN", "postgresql://127.0.0.1:1/test")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(
        pytest.skip.Exception, match=r"no PostgreSQL server reachable at postgresql://127\.0\.0\.1:1"
    ):
        _servers.require_postgres()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must not skip the PostgreSQL tests"):
        _servers.require_postgres()


async def test_pooled_connections_the_server_dropped_are_replaced(pg_schema: tuple[str, str]) -> None:
    # a server restart or an idle-connection reaper closes pooled connections; the next operation must
    # get a live connection instead of failing with StoreUnavailableError
    dsn, schema = pg_schema
    async with _backend(dsn, schema, store_id="reaped", max_size=2) as b:
        await b.put("k", SessionEntry(session_id="s1"))
        killed = _rows(
            dsn,
            sql.SQL(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()"
            ),
            f"sessionkeeper:{schema}:reaped"[:63],
        )
        assert killed and all(row[0] for row in killed)
        assert await b.get("k") == SessionEntry(session_id="s1")
        await b.put("k", SessionEntry(session_id="s2"))
        assert await b.get("k") == SessionEntry(session_id="s2")


async def test_update_of_a_key_another_writer_creates_meanwhile_runs_again_on_its_entry(
    pg_schema: tuple[str, str],
) -> None:
    # deviation DB-RETRY: no row to lock yet, so the insert is the check; the loser runs again on the row
    dsn, schema = pg_schema
    async with _backend(dsn, schema, store_id="race") as b:
        await b.keys()  # schema created
        seen: list[SessionEntry | None] = []
        insert = sql.SQL(
            "INSERT INTO {} (store_id, session_key, entry_text, entry) VALUES ('race', 'k', %s, %s::jsonb)"
        ).format(sql.Identifier(schema, "sk_sessions"))

        def fn(current: SessionEntry | None) -> SessionEntry:
            seen.append(current)
            if current is None:  # another worker creates the key and commits before this insert
                text = '{"sessionId":"other","label":"first"}'
                with psycopg.connect(dsn, autocommit=True) as conn:
                    conn.execute(insert, (text, text))
                return SessionEntry(session_id="mine")
            return SessionEntry(session_id="other", label=f"{current.label}+mine")

        stored = await b.update("k", fn)
        assert seen == [None, SessionEntry(session_id="other", label="first")]
        assert stored == await b.get("k") == SessionEntry(session_id="other", label="first+mine")
        assert (await b.get_with_revision("k")).revision == 2  # type: ignore[union-attr]


async def test_raw_json_values_keep_their_text_and_deep_ones_skip_jsonb(pg_schema: tuple[str, str]) -> None:
    # issue 15 follow-up: 1e400 / huge integers / deep nesting (RawJsonValue) beside a lone surrogate
    # used to raise TypeError (json.dumps fallback); nesting too deep for jsonb failed the write
    dsn, schema = pg_schema
    deep = "[" * 6000 + "]" * 6000
    entries = {
        "plain": SessionEntry(
            session_id="s1", extra={"big": RawJsonValue("1e400"), "n": RawJsonValue("9" * 5000)}
        ),
        "lone": SessionEntry(session_id="s2", label="\ud83d", extra={"big": RawJsonValue("1e400")}),
        "deep": SessionEntry(session_id="s3", extra={"deep": RawJsonValue(deep)}),
    }
    async with _backend(dsn, schema) as b:
        for key, entry in entries.items():
            await b.put(key, entry)
    async with _backend(dsn, schema) as b:
        assert await b.load_all() == entries
    table = sql.Identifier(schema, "sk_sessions")
    rows = dict(_rows(dsn, sql.SQL("SELECT session_key, entry_text FROM {}").format(table)))
    assert '"big":1e400' in str(rows["plain"]) and "9" * 5000 in str(rows["plain"])
    assert '"big": 1e400' in str(rows["lone"]) and "\\ud83d" in str(rows["lone"])
    assert deep in str(rows["deep"])
    jsonb = dict(_rows(dsn, sql.SQL("SELECT session_key, entry IS NOT NULL FROM {}").format(table)))
    assert jsonb == {"plain": True, "lone": False, "deep": False}
    ids = dict(_rows(dsn, sql.SQL("SELECT session_key, session_id FROM {}").format(table)))
    assert ids["plain"] == "s1"


async def test_read_only_sees_a_schema_created_after_it_opened(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    async with _backend(dsn, schema, read_only=True) as ro:
        assert await ro.load_all() == {}  # no schema yet: an empty store
        assert await ro.get("k") is None
        async with _backend(dsn, schema) as rw:
            await rw.put("k", SessionEntry(session_id="s1"))
        assert await ro.get("k") == SessionEntry(session_id="s1")
        assert await ro.keys() == ["k"]
        assert await ro.load_all() == {"k": SessionEntry(session_id="s1")}


async def test_serialization_failures_are_retried(
    pg_schema: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    # a server whose default isolation is SERIALIZABLE rolls concurrent updates of one row back with
    # SQLSTATE 40001; they used to surface as StoreUnavailableError
    dsn, schema = pg_schema
    serializable = psycopg.conninfo.make_conninfo(
        dsn, options="-c default_transaction_isolation=serializable"
    )
    async with _backend(dsn, schema) as setup:
        await setup.put("shared", session_entry_from_dict({"sessionId": "s", "marks": []}))
    backends = [_backend(serializable, schema, max_size=2) for _ in range(3)]

    def add(mark: str):  # type: ignore[no-untyped-def]
        def fn(current: SessionEntry | None) -> SessionEntry:
            assert current is not None
            raw = session_entry_to_dict(current)
            raw["marks"] = [*raw["marks"], mark]
            return session_entry_from_dict(raw)

        return fn

    caplog.set_level(logging.DEBUG, logger="sessionkeeper.store")
    try:
        marks = [f"{i}:{j}" for i in range(3) for j in range(8)]
        await asyncio.gather(*(backends[int(m.split(":")[0])].update("shared", add(m)) for m in marks))
        got = await backends[0].get_with_revision("shared")
        assert got is not None
        assert sorted(session_entry_to_dict(got.entry)["marks"]) == sorted(marks)
        assert got.revision == 1 + len(marks)
        retried = [r for r in caplog.records if getattr(r, "sqlstate", None) == "40001"]
        assert retried  # some attempts were rolled back and run again
    finally:
        for b in backends:
            await b.aclose()


async def test_a_deadlock_victim_is_run_again(
    pg_schema: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    # transaction() locks a, then waits for b, held by another session, which then asks for a: the
    # server picks our transaction as the victim (SQLSTATE 40P01; the other session's deadlock_timeout is
    # longer); it used to surface as StoreUnavailableError
    dsn, schema = pg_schema
    caplog.set_level(logging.DEBUG, logger="sessionkeeper.store")
    async with _backend(dsn, schema, store_id="dl") as b:
        await b.put("a", SessionEntry(session_id="s1"))
        await b.put("b", SessionEntry(session_id="s2"))
        table = sql.Identifier(schema, "sk_sessions")
        lock = sql.SQL("SELECT 1 FROM {} WHERE store_id = 'dl' AND session_key = %s FOR UPDATE").format(table)
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as other:
            await other.execute("SET deadlock_timeout = '60s'")
            async with other.transaction():
                await other.execute(lock, ("b",))

                def edit(entries: dict[str, SessionEntry]) -> int:
                    entries["c"] = SessionEntry(session_id="s3")
                    return len(entries)

                ours = asyncio.create_task(b.transaction(edit))
                async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as watcher:
                    for _ in range(1000):  # wait (on the server's state) until ours waits for b's lock
                        cur = await watcher.execute(
                            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s "
                            "AND wait_event_type = 'Lock'",
                            (b.application_name,),
                        )
                        row = await cur.fetchone()
                        if row is not None and row[0] > 0:
                            break
                        await asyncio.sleep(0.01)
                await other.execute(lock, ("a",))  # the cycle: the server aborts ours, this lock is granted
            assert await ours == 3
        assert await b.keys() == ["a", "b", "c"]
    assert [r for r in caplog.records if getattr(r, "sqlstate", None) == "40P01"]
