"""
Single-flight summarising across workers on PostgreSQL (issue 13): ``PostgresTranscriptStorage``'s
compaction claim (``CompactionClaimStorage``) is exclusive across instances and processes, blocks no
append, dies with its holder's connection, and makes workers that compact one transcript at once call the
model once. The real server (``tests/_servers.py``), asyncio only (psycopg's async API).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import psycopg
import pytest
from psycopg import sql
from tests._helpers import user
from tests._servers import pg_schema

from sessionkeeper.abc import CompactionClaimStorage
from sessionkeeper.exceptions import UnsafePathError
from sessionkeeper.store import PostgresTranscriptStorage
from sessionkeeper.transcript import TranscriptManager


pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]
__all__ = ("pg_schema",)
WORKER = Path(__file__).with_name("_pg_flight_worker.py")
REPO = Path(__file__).resolve().parents[2]
PAD = " words to summarise" * 300


@pytest.fixture
async def storages(pg_schema: tuple[str, str]) -> AsyncIterator[tuple[PostgresTranscriptStorage, ...]]:
    """Two instances (two pools) on one schema and store: two workers."""
    dsn, schema = pg_schema
    async with (
        PostgresTranscriptStorage(dsn, schema=schema, max_size=3) as first,
        PostgresTranscriptStorage(dsn, schema=schema, max_size=3) as second,
    ):
        yield first, second


def _spawn(*args: str, stdin: bool = False) -> subprocess.Popen[bytes]:
    """The worker script with ``args``, its stdout piped (and stdin when asked)."""
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdin=subprocess.PIPE if stdin else None,
        stdout=subprocess.PIPE,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


async def _filled(storage: PostgresTranscriptStorage, turns: int = 6) -> str:
    manager = await TranscriptManager.create_in(storage, cwd="/w")
    for i in range(turns):
        await manager.append_message(user(f"turn {i}" + PAD))
    return manager.session_id


async def test_the_claim_is_exclusive_across_instances_and_blocks_no_append(
    storages: tuple[PostgresTranscriptStorage, ...],
) -> None:
    first, second = storages
    assert isinstance(first, CompactionClaimStorage)
    session_id = await _filled(first, turns=1)
    claim = await first.claim_compaction(session_id)
    assert claim is not None
    assert claim.held
    assert await second.claim_compaction(session_id) is None
    assert await first.claim_compaction(session_id) is None  # another connection of the same pool too
    other_id = await _filled(second, turns=1)
    other = await second.claim_compaction(other_id)  # another transcript: its own claim
    assert other is not None
    manager = await TranscriptManager.open_in(second, session_id)
    await manager.append_message(user("appends go on while a compaction is claimed"))
    writer = await second.claim(session_id, timeout_ms=2000)  # so does the writer claim
    await writer.release()
    await claim.release()
    await claim.release()  # a second release does nothing
    assert not claim.held
    again = await second.claim_compaction(session_id)
    assert again is not None
    await again.release()
    await other.release()
    with pytest.raises(UnsafePathError):
        await first.claim_compaction("../escape")


async def test_a_claim_dies_with_its_killed_holder(
    storages: tuple[PostgresTranscriptStorage, ...], pg_schema: tuple[str, str]
) -> None:
    first, _ = storages
    session_id = await _filled(first, turns=1)
    dsn, schema = pg_schema
    holder = _spawn("hold", dsn, schema, session_id)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == b"held"
        assert await first.claim_compaction(session_id) is None
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        deadline = time.monotonic() + 10
        claim = None
        while claim is None and time.monotonic() < deadline:
            await anyio.sleep(0.05)
            claim = await first.claim_compaction(session_id)
        assert claim is not None  # the server ended the dead worker's session and its lock
        await claim.release()
    finally:
        holder.kill()
        holder.wait(10)
        assert holder.stdout is not None
        holder.stdout.close()


async def test_three_processes_compact_once(
    storages: tuple[PostgresTranscriptStorage, ...], pg_schema: tuple[str, str]
) -> None:
    first, _ = storages
    dsn, schema = pg_schema
    session_id = await _filled(first)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for table in ("flight_starts", "flight_calls"):
            conn.execute(sql.SQL("CREATE TABLE {} (n serial)").format(sql.Identifier(schema, table)))
    workers = [_spawn("compact", dsn, schema, session_id, stdin=True) for _ in range(3)]
    try:
        for worker in workers:
            assert worker.stdout is not None
            assert worker.stdout.readline().strip() == b"ready"
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write(b"go\n")
            worker.stdin.flush()
        results = []
        for worker in workers:
            out, _ = worker.communicate(timeout=120)
            assert worker.returncode == 0
            results.append(json.loads(out.decode().splitlines()[-1]))
    finally:
        for worker in workers:
            worker.kill()
            worker.wait(10)
            for pipe in (worker.stdin, worker.stdout):
                if pipe is not None:
                    pipe.close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, "flight_calls")))
        (calls,) = row.fetchone() or (None,)
    assert calls == 1
    assert sorted(r["status"] for r in results) == ["compacted", "joined", "joined"]
    assert len({r["entry"] for r in results}) == 1
    lines, _ = await first.read(session_id)
    assert [json.loads(line)["type"] for line in lines].count("compaction") == 1
