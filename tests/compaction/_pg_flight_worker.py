"""
One worker process of the PostgreSQL single-flight tests (``test_compaction_postgres_flight.py``).

``python _pg_flight_worker.py compact DSN SCHEMA SESSION_ID``: its own ``PostgresTranscriptStorage`` (its
own pool); prints ``ready``, waits for ``go`` on stdin, compacts the transcript with a provider that
records each call as a row of ``<schema>.flight_calls`` and answers once every worker has started (rows
in ``<schema>.flight_starts``), then prints the result as JSON.

``python _pg_flight_worker.py hold DSN SCHEMA SESSION_ID``: takes the compaction claim, prints ``held``
and sleeps until killed.
"""

from __future__ import annotations

import asyncio
import json
import sys

import psycopg
from psycopg import sql

from sessionkeeper.compaction import CompactionProviderRegistry, CompactionSettings, Compactor, SummaryRequest
from sessionkeeper.hooks import CompactionStartEvent, HookRegistry
from sessionkeeper.store import PostgresTranscriptStorage
from sessionkeeper.transcript import TranscriptManager


WORKERS = 3


async def _execute(dsn: str, query: sql.Composable) -> int:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(query)
        row = await cur.fetchone() if cur.description else None
        return int(row[0]) if row else 0


async def compact(dsn: str, schema: str, session_id: str) -> None:
    starts = sql.Identifier(schema, "flight_starts")
    calls = sql.Identifier(schema, "flight_calls")

    class Recorded:
        id = "recorded"
        label = "records its calls in the database"

        async def summarize(self, request: SummaryRequest) -> str:
            await _execute(dsn, sql.SQL("INSERT INTO {} DEFAULT VALUES").format(calls))
            for _ in range(3000):  # every worker has started its compaction (no event crosses processes)
                if await _execute(dsn, sql.SQL("SELECT count(*) FROM {}").format(starts)) >= WORKERS:
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.3)  # the others are polling the claim now
            return "## Decisions\n- one summary for every worker"

    hooks = HookRegistry()

    async def on_start(event: CompactionStartEvent) -> None:
        await _execute(dsn, sql.SQL("INSERT INTO {} DEFAULT VALUES").format(starts))

    hooks.on(CompactionStartEvent, on_start)
    registry = CompactionProviderRegistry()
    registry.register(Recorded())
    compactor = Compactor(settings=CompactionSettings(provider="recorded"), providers=registry, hooks=hooks)
    async with PostgresTranscriptStorage(dsn, schema=schema, max_size=4) as storage:
        manager = await TranscriptManager.open_in(storage, session_id)
        print("ready", flush=True)
        line = await asyncio.to_thread(sys.stdin.readline)
        assert line.strip() == "go", line
        result = await compactor.compact(manager, reason="threshold", keep_recent_tokens=50)
        entry = result.entry.id if result.entry is not None else None
        print(json.dumps({"status": result.status, "entry": entry}), flush=True)


async def hold(dsn: str, schema: str, session_id: str) -> None:
    async with PostgresTranscriptStorage(dsn, schema=schema, max_size=2) as storage:
        claim = await storage.claim_compaction(session_id)
        assert claim is not None
        print("held", flush=True)
        await asyncio.sleep(3600)


if __name__ == "__main__":
    action, dsn, schema, session_id = sys.argv[1:]
    asyncio.run((compact if action == "compact" else hold)(dsn, schema, session_id))
