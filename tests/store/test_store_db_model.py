"""
Property: any sequence of store operations leaves the PostgreSQL and Redis backends in the same state
as the in-memory reference backend (entries, unknown fields, insertion order; DESIGN "Storage backends":
one semantics for every backend).
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from tests._servers import pg_schema, redis_prefix

from sessionkeeper.store import (
    InMemoryStoreBackend,
    PostgresStoreBackend,
    RedisStoreBackend,
    SessionEntry,
    StoreBackend,
    session_entry_from_dict,
)


__all__ = ("pg_schema", "redis_prefix")

KEYS = st.sampled_from(["agent:main:main", "k:ü✓", "k:a", "k:b", "agent:main:cron:1", "k:with space"])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
ENTRIES = st.builds(
    lambda sid, label, extra: session_entry_from_dict(
        {"sessionId": sid, "label": label, "futureField": extra, "updatedAt": 1789990375000}
    ),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,12}", fullmatch=True),
    st.text(max_size=12),
    JSON,
)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), KEYS, ENTRIES),
        st.tuples(st.just("update"), KEYS, ENTRIES),
        st.tuples(st.just("update_none"), KEYS, st.none()),
        st.tuples(st.just("delete"), KEYS, st.none()),
        st.tuples(st.just("transaction"), st.lists(KEYS, max_size=3), ENTRIES),
    ),
    max_size=12,
)


async def _apply(backend: StoreBackend, op: tuple[Any, ...]) -> Any:
    kind, target, entry = op
    if kind == "put":
        return await backend.put(target, entry)
    if kind == "update":
        return await backend.update(
            target, lambda cur: entry if cur is None else msgspec.structs.replace(cur, label="x")
        )
    if kind == "update_none":
        return await backend.update(target, lambda cur: None)
    if kind == "delete":
        return await backend.delete(target)

    def edit(entries: dict[str, SessionEntry]) -> int:
        for key in target:
            if key in entries:
                del entries[key]
            else:
                entries[key] = entry
        return len(entries)

    return await backend.transaction(edit)


def _check(make: Any, ops: list[tuple[Any, ...]]) -> None:
    async def run() -> None:
        model = InMemoryStoreBackend()
        async with make() as backend:
            for op in ops:
                expected = await _apply(model, op)
                assert await _apply(backend, op) == expected, op
                assert await backend.keys() == await model.keys(), op
            assert await backend.load_all() == await model.load_all()

    asyncio.run(run())


def test_postgres_matches_the_reference_backend(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    stores = itertools.count()

    @settings(max_examples=25, deadline=None)
    @given(ops=OPS)
    def check(ops: list[tuple[Any, ...]]) -> None:
        store_id = f"s{next(stores)}"
        _check(lambda: PostgresStoreBackend(dsn, schema=schema, store_id=store_id, max_size=2), ops)

    check()


def test_redis_matches_the_reference_backend(redis_prefix: tuple[str, str]) -> None:
    url, prefix = redis_prefix
    stores = itertools.count()

    @settings(max_examples=25, deadline=None)
    @given(ops=OPS)
    def check(ops: list[tuple[Any, ...]]) -> None:
        store_id = f"s{next(stores)}"
        _check(lambda: RedisStoreBackend(url, key_prefix=prefix, store_id=store_id), ops)

    check()
