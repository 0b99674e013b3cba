"""
Store entry update latency on the database backends: ``SessionStore.update_entry`` p50/p99 and throughput
with 1 and 8 concurrent workers on PostgreSQL and Redis, next to the SQLite backend in the same run
(ratios against SQLite ``synchronous=FULL`` at the same concurrency; issue 13).

Run: ``python -m benchmarks store_pg [--entries 1000] [--updates 300] [--workers 1,8]``. Workers are
asyncio tasks sharing one backend (one connection pool), each updating its own session key of a store
holding ``--entries`` entries shaped like the sample store. Servers: ``$SESSIONKEEPER_TEST_POSTGRES_DSN``
(default ``postgresql://127.0.0.1:5432/test``; a scratch schema, dropped afterwards) and
``$SESSIONKEEPER_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``; a scratch key prefix, deleted
afterwards). A backend whose server is unreachable is reported and left out.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from benchmarks.bench_store import NOW, make_rows
from sessionkeeper.store import (
    PostgresStoreBackend,
    RedisStoreBackend,
    SessionStore,
    SqliteStoreBackend,
    StoreBackend,
    session_entry_from_dict,
)


POSTGRES_DSN = os.environ.get("SESSIONKEEPER_TEST_POSTGRES_DSN", "postgresql://127.0.0.1:5432/test")
REDIS_URL = os.environ.get("SESSIONKEEPER_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


async def fill(backend: StoreBackend, entries: int) -> list[str]:
    rows = {k: session_entry_from_dict(v) for k, v in make_rows(entries).items()}
    await backend.transaction(lambda store: store.update(rows))
    return list(rows)


async def measure(
    backend: StoreBackend, keys: list[str], workers: int, updates: int
) -> tuple[list[float], float]:
    """Per-update latencies (ms) and the wall time (s) of ``updates`` updates spread over ``workers``."""
    store = SessionStore(backend)
    times: list[float] = []

    async def worker(key: str, count: int) -> None:
        await store.get(key)  # warm: a running worker holds a connection already
        for i in range(count):
            t0 = time.perf_counter()
            await store.update_entry(
                key, lambda e, i=i: {"compaction_count": i + 1, "last_interaction_at": NOW}
            )
            times.append((time.perf_counter() - t0) * 1000)

    per_worker = max(1, updates // workers)
    started = time.perf_counter()
    await asyncio.gather(*(worker(keys[w * 7 % len(keys)], per_worker) for w in range(workers)))
    return times, time.perf_counter() - started


async def run(entries: int, updates: int, worker_counts: list[int]) -> None:
    schema = f"sk_bench_{uuid.uuid4().hex[:10]}"
    prefix = f"skbench_{uuid.uuid4().hex[:10]}:"
    with tempfile.TemporaryDirectory(prefix="bench-store-pg-") as tmp:
        makers: list[tuple[str, Callable[[], StoreBackend]]] = [
            ("sqlite (synchronous=FULL)", lambda: SqliteStoreBackend(Path(tmp) / "full" / "sessions.sqlite")),
            (
                "sqlite (synchronous=NORMAL)",
                lambda: SqliteStoreBackend(Path(tmp) / "normal" / "sessions.sqlite", synchronous="NORMAL"),
            ),
            ("postgresql", lambda: PostgresStoreBackend(POSTGRES_DSN, schema=schema, max_size=8)),
            ("redis", lambda: RedisStoreBackend(REDIS_URL, key_prefix=prefix)),
        ]
        print(f"{entries} entries; {updates} updates per run; ratios: p50 against sqlite FULL, same workers")
        header = (
            f"{'backend':28} {'workers':>7} {'p50 ms':>8} {'p99 ms':>8} {'updates/s':>10} {'p50 ratio':>10}"
        )
        print(header)
        anchors: dict[int, float] = {}
        try:
            for label, make in makers:
                backend = make()
                try:
                    keys = await fill(backend, entries)
                except Exception as err:  # an unreachable server: report it and go on
                    print(f"{label:28} skipped: {type(err).__name__}: {err}")
                    await backend.aclose()
                    continue
                try:
                    for workers in worker_counts:
                        times, wall = await measure(backend, keys, workers, updates)
                        ordered = sorted(times)
                        p50, p99 = percentile(ordered, 0.5), percentile(ordered, 0.99)
                        anchors.setdefault(workers, p50)
                        ratio = p50 / anchors[workers]
                        rate = len(times) / wall
                        print(f"{label:28} {workers:>7} {p50:>8.3f} {p99:>8.3f} {rate:>10.0f} {ratio:>9.2f}x")
                finally:
                    await backend.aclose()
        finally:
            await cleanup(schema, prefix)


async def cleanup(schema: str, prefix: str) -> None:
    try:
        import psycopg
        from psycopg import sql

        async with await psycopg.AsyncConnection.connect(POSTGRES_DSN, autocommit=True) as conn:
            await conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    except Exception as err:
        print(f"(postgres cleanup: {err})")
    try:
        from redis.asyncio import Redis

        client = Redis.from_url(REDIS_URL)
        try:
            found = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
            if found:
                await client.delete(*found)
        finally:
            await client.aclose()
    except Exception as err:
        print(f"(redis cleanup: {err})")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--updates", type=int, default=400)
    parser.add_argument("--workers", default="1,8")
    args = parser.parse_args()
    asyncio.run(run(args.entries, args.updates, [int(w) for w in args.workers.split(",")]))


if __name__ == "__main__":
    main()
