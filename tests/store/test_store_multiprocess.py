"""
No lost update across processes (issue 13): 8 processes, each with its own connection pool, run many
concurrent field updates on a few shared keys of one PostgreSQL / Redis store. Every update must be in
the final entries, and each entry's revision must count exactly the updates it received.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests._servers import pg_schema, redis_prefix

from sessionkeeper.store import PostgresStoreBackend, RedisStoreBackend, session_entry_to_dict


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema", "redis_prefix")

WORKER = Path(__file__).with_name("_store_worker.py")
PROCESSES = 8
KEYS = 4
UPDATES = 24  # per process, all in flight at once


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _run_workers(kind: str, url: str, namespace: str) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), kind, url, namespace, str(i), str(KEYS), str(UPDATES)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(PROCESSES)
    ]
    try:
        for proc in procs:  # every worker connected before any starts: maximal overlap
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            out, _ = proc.communicate(timeout=240)
            assert proc.returncode == 0 and out.strip() == "done", (proc.returncode, out)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


async def _check(backend: PostgresStoreBackend | RedisStoreBackend) -> None:
    expected: dict[str, set[str]] = {f"shared:{k}": set() for k in range(KEYS)}
    for worker in range(PROCESSES):
        for n in range(UPDATES):
            expected[f"shared:{n % KEYS}"].add(f"{worker}:{n}")
    for key, marks in expected.items():
        found = await backend.get_with_revision(key)
        assert found is not None, key
        stored = session_entry_to_dict(found.entry)["marks"]
        assert len(stored) == len(marks) and set(stored) == marks, key  # each update exactly once
        assert found.revision == len(marks), key  # created by the first update, +1 for each other one


async def test_postgres_no_lost_update_across_processes(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    _run_workers("postgres", dsn, schema)
    async with PostgresStoreBackend(dsn, schema=schema) as backend:
        await _check(backend)


async def test_redis_no_lost_update_across_processes(redis_prefix: tuple[str, str]) -> None:
    url, prefix = redis_prefix
    _run_workers("redis", url, prefix)
    async with RedisStoreBackend(url, key_prefix=prefix) as backend:
        await _check(backend)
