"""
Store maintenance on PostgreSQL as set-based SQL (issue 13): the model-run, age and count passes select
exactly what the Python plan selects on the same entries (DESIGN D6: main session, protected entries and
the active set survive), and only the removed rows are read.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql
from tests._servers import pg_schema

from sessionkeeper.store import (
    InMemoryStoreBackend,
    MaintenanceSettings,
    PostgresStoreBackend,
    run_maintenance,
    session_entry_from_dict,
)
from sessionkeeper.store._postgres_migrations import MIGRATIONS as _MIGRATIONS


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema",)

NOW_MS = 1_790_000_000_000
DAY_MS = 86_400_000
_stores = itertools.count()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


_KEYS = st.sampled_from(
    [
        "agent:main:main",
        "AGENT:MAIN:MAIN",
        "agent:ops:main",
        "agent:main:telegram:group:g1",
        "agent:main:slack:channel:c1",
        "agent:main:direct:a",
        "agent:main:direct:A",
        "agent:main:direct:b",
        "agent:main:direct:c:thread:9",
        "agent:main:subagent:x",
        "agent:main:cron:job:run:r1",
        "agent:main:explicit:model-run-0b6f2c1e-8d3a-4c5b-9e7f-1a2b3c4d5e6f",
        "agent:main:explicit:model-run-1b6f2c1e-8d3a-4c5b-9e7f-1a2b3c4d5e6f",
        "hook:h1",
        "ünïcode:Straße",
    ]
)
_UPDATED = st.one_of(
    st.none(),
    st.sampled_from([NOW_MS - 90 * DAY_MS, NOW_MS - 31 * DAY_MS, NOW_MS - 2 * DAY_MS, NOW_MS, 0, -5]),
    st.integers(min_value=NOW_MS - 60 * DAY_MS, max_value=NOW_MS),
    st.floats(min_value=NOW_MS - 60 * DAY_MS, max_value=NOW_MS),
    st.sampled_from(["yesterday", True]),
)
_ENTRY = st.fixed_dictionaries(
    {"updatedAt": _UPDATED, "chatType": st.sampled_from([None, "direct", "group", "Channel "])}
)


def _raw(index: int, fields: dict[str, Any]) -> dict[str, Any]:
    raw: dict[str, Any] = {"sessionId": f"s{index}"}
    raw.update({k: v for k, v in fields.items() if v is not None})
    return raw


async def _both(
    dsn: str, schema: str, entries: dict[str, dict[str, Any]], **kwargs: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    memory = InMemoryStoreBackend()
    store_id = f"store{next(_stores)}"
    async with PostgresStoreBackend(dsn, schema=schema, store_id=store_id, max_size=2) as pg:
        for key, raw in entries.items():
            await memory.put(key, session_entry_from_dict(raw))
            await pg.put(key, session_entry_from_dict(raw))
        expected = (await run_maintenance(memory, now_ms=NOW_MS, **kwargs)).to_json()
        got = (await run_maintenance(pg, now_ms=NOW_MS, **kwargs)).to_json()
        assert list(await pg.keys()) == list(await memory.keys())
    return expected, got


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    entries=st.dictionaries(_KEYS, _ENTRY, max_size=12),
    max_entries=st.integers(min_value=0, max_value=8),
    prune_after=st.sampled_from(["30d", "1d", 0]),
    active=st.lists(_KEYS.map(str.upper), max_size=2),
    on_save=st.booleans(),
    dry_run=st.booleans(),
)
async def test_sql_passes_select_what_the_python_plan_selects(  # noqa: PLR0917 - hypothesis arguments
    pg_schema: tuple[str, str],
    entries: dict[str, dict[str, Any]],
    max_entries: int,
    prune_after: Any,
    active: list[str],
    on_save: bool,
    dry_run: bool,
) -> None:
    dsn, schema = pg_schema
    raws = {key: _raw(i, fields) for i, (key, fields) in enumerate(entries.items())}
    maintenance = MaintenanceSettings.from_mapping({"maxEntries": max_entries, "pruneAfter": prune_after})
    expected, got = await _both(
        dsn,
        schema,
        raws,
        settings=maintenance,
        active_keys=active,
        on_save=on_save,
        dry_run=dry_run,
    )
    assert got == expected


async def test_only_the_removed_rows_are_read(
    pg_schema: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    dsn, schema = pg_schema
    raws = {f"agent:main:direct:u{i}": _raw(i, {"updatedAt": NOW_MS - i * DAY_MS}) for i in range(40)}
    raws["agent:main:main"] = _raw(99, {"updatedAt": 1})
    maintenance = MaintenanceSettings.from_mapping({"maxEntries": 10, "pruneAfter": "30d"})
    caplog.set_level(logging.DEBUG, logger="sessionkeeper.maintenance")
    expected, got = await _both(
        dsn, schema, raws, settings=maintenance, active_keys=["AGENT:MAIN:DIRECT:U35"]
    )
    assert got == expected
    assert got["pruned"] == 8 and got["capped"] == 23
    assert got["actions"]["agent:main:main"] == "keep"
    assert got["actions"]["agent:main:direct:u35"] == "keep"
    [record] = [r for r in caplog.records if r.getMessage().startswith("maintenance as set-based SQL")]
    assert record.rows_read == 8 + 23  # type: ignore[attr-defined]


async def test_rows_written_before_migration_2_are_maintained(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    with psycopg.connect(dsn, autocommit=True) as conn:  # a version-1 schema, as the previous release left it
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        migrations = sql.Identifier(schema, "sk_migrations")
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz)"
            ).format(migrations)
        )
        _, name, statements = _MIGRATIONS[0]
        for statement in statements:
            conn.execute(sql.SQL(statement).format(schema=sql.Identifier(schema)))
        conn.execute(sql.SQL("INSERT INTO {} VALUES (1, %s, now())").format(migrations), (name,))
        insert = sql.SQL(
            "INSERT INTO {} (store_id, session_key, entry_text, entry) VALUES ('default', %s, %s, %s)"
        )
        table = sql.Identifier(schema, "sk_sessions")
        for key, text in [
            ("agent:main:main", '{"sessionId":"m","updatedAt":1}'),
            ("agent:main:direct:old", '{"sessionId":"o","updatedAt":1}'),
            ("agent:main:telegram:group:g", '{"sessionId":"g","updatedAt":1}'),
            ("agent:main:direct:new", f'{{"sessionId":"n","updatedAt":{NOW_MS}}}'),
        ]:
            conn.execute(insert.format(table), (key, text, text))
        other = sql.SQL(
            "INSERT INTO {} (store_id, session_key, entry_text, entry) VALUES ('other', %s, %s, %s)"
        ).format(table)
        with conn.cursor() as cur:  # more rows than one backfill batch, in another store
            text = f'{{"sessionId":"x","updatedAt":{NOW_MS}}}'
            cur.executemany(other, [(f"agent:main:direct:x{i}", text, text) for i in range(2500)])
    maintenance = MaintenanceSettings.from_mapping({"maxEntries": 2000, "pruneAfter": "30d"})
    async with PostgresStoreBackend(dsn, schema=schema) as pg:
        report = await run_maintenance(pg, now_ms=NOW_MS, settings=maintenance)
        assert report.actions == {
            "agent:main:main": "keep",
            "agent:main:direct:old": "prune-stale",
            "agent:main:telegram:group:g": "keep",
            "agent:main:direct:new": "keep",
        }
        assert await pg.keys() == ["agent:main:main", "agent:main:telegram:group:g", "agent:main:direct:new"]
    async with PostgresStoreBackend(dsn, schema=schema, store_id="other") as pg:
        report = await run_maintenance(pg, now_ms=NOW_MS, settings=maintenance, dry_run=True)
        assert report.to_json()["capped"] == 500
        assert report.removals[0].key == "agent:main:direct:x2000"  # ties: insertion order


async def test_the_cap_breaks_ties_in_insertion_order_and_drops_missing_times_first(
    pg_schema: tuple[str, str],
) -> None:
    dsn, schema = pg_schema
    raws = {f"agent:main:direct:t{i}": _raw(i, {"updatedAt": NOW_MS - (i % 3)}) for i in range(9)}
    raws["agent:main:direct:none"] = _raw(50, {})
    raws["agent:main:direct:float"] = _raw(51, {"updatedAt": float(NOW_MS) - 1.0})
    maintenance = MaintenanceSettings.from_mapping({"maxEntries": 4, "pruneAfter": "30d"})
    expected, got = await _both(dsn, schema, raws, settings=maintenance)
    assert got == expected
    kept = [key for key, action in got["actions"].items() if action == "keep"]
    assert kept == [
        "agent:main:direct:t0",
        "agent:main:direct:t1",
        "agent:main:direct:t3",
        "agent:main:direct:t6",
    ]
