"""
Calls on one PostgreSQL / Redis backend instance apply in call order, as with every built-in backend
(docs/store.md; issue 11): updates of one key made one after the other by concurrent tasks apply in that
order, and a read or a whole-store call made after a write sees it. Different keys still run at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from tests._servers import pg_schema, redis_prefix

from sessionkeeper.store import (
    PostgresStoreBackend,
    RedisStoreBackend,
    SessionEntry,
    session_entry_from_dict,
    session_entry_to_dict,
)


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema", "redis_prefix")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["postgres", "redis"])
def make(request: pytest.FixtureRequest) -> Callable[[], PostgresStoreBackend | RedisStoreBackend]:
    if request.param == "postgres":
        dsn, schema = request.getfixturevalue("pg_schema")
        return lambda: PostgresStoreBackend(dsn, schema=schema, max_size=8)
    url, prefix = request.getfixturevalue("redis_prefix")
    return lambda: RedisStoreBackend(url, key_prefix=prefix)


def _append(mark: int) -> Callable[[SessionEntry | None], SessionEntry]:
    def fn(current: SessionEntry | None) -> SessionEntry:
        raw = session_entry_to_dict(current) if current is not None else {"sessionId": "s", "marks": []}
        raw["marks"] = [*raw["marks"], mark]
        return session_entry_from_dict(raw)

    return fn


async def test_updates_of_one_key_apply_in_call_order(make) -> None:  # type: ignore[no-untyped-def]
    async with make() as b:
        await b.keys()  # connected
        tasks = [asyncio.ensure_future(b.update("k", _append(i))) for i in range(40)]
        await asyncio.gather(*tasks)
        got = await b.get("k")
        assert got is not None and session_entry_to_dict(got)["marks"] == list(range(40))


async def test_reads_and_whole_store_calls_see_the_writes_made_before_them(make) -> None:  # type: ignore[no-untyped-def]
    async with make() as b:
        await b.keys()
        for round_ in range(10):
            put = asyncio.ensure_future(b.put(f"k{round_}", SessionEntry(session_id=f"s{round_}")))
            get = asyncio.ensure_future(b.get(f"k{round_}"))
            keys = asyncio.ensure_future(b.keys())
            delete = asyncio.ensure_future(b.delete(f"k{round_}"))
            everything = asyncio.ensure_future(b.load_all())
            await asyncio.gather(put, get, keys, delete, everything)
            assert get.result() == SessionEntry(session_id=f"s{round_}")
            assert f"k{round_}" in keys.result()
            assert delete.result() is True
            assert f"k{round_}" not in everything.result()


async def test_a_cancelled_call_gives_its_turn_up_without_reordering_the_rest(make) -> None:  # type: ignore[no-untyped-def]
    async with make() as b:
        await b.keys()
        tasks = [asyncio.ensure_future(b.update("k", _append(i))) for i in range(12)]
        tasks[5].cancel()
        tasks[6].cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        got = await b.get("k")
        assert got is not None
        marks = session_entry_to_dict(got)["marks"]
        assert marks == [i for i in range(12) if i not in (5, 6)]
