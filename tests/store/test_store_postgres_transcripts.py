"""
``PostgresTranscriptStorage`` on the real PostgreSQL server, beyond the seam's conformance suite
(tests/transcript/test_transcript_storage_conformance.py): the rows it writes, exact bytes, idempotency
keys and claims across instances, lost claims, deletion of every row, reads from the end.
"""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from tests._servers import pg_schema

from sessionkeeper.exceptions import (
    LockNotHeldError,
    SessionBusyError,
    StaleTranscriptError,
    StoreError,
    TranscriptChangedError,
    TranscriptNotFoundError,
    UnsafePathError,
)
from sessionkeeper.store import PostgresStoreBackend, PostgresTranscriptStorage, SessionEntry
from sessionkeeper.transcript import FileTranscriptStorage, StorageMark


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema",)

HEADER = b'{"type":"session","version":3,"id":"s-1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}'


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async API is asyncio-only (docs/decisions.md PG-ASYNCIO)


def _rows(dsn: str, query: sql.Composable, *params: object) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(query, params).fetchall()


def _count(dsn: str, schema: str, table: str) -> int:
    [(n,)] = _rows(dsn, sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, table)))
    assert isinstance(n, int)
    return n


def _count_schemas(dsn: str, schema: str) -> int:
    [(n,)] = _rows(
        dsn, sql.SQL("SELECT count(*) FROM pg_namespace WHERE nspname = {}").format(sql.Literal(schema))
    )
    assert isinstance(n, int)
    return n


def _entry(n: int, parent: int | None) -> bytes:
    parent_id = "null" if parent is None else f'"e{parent}"'
    return f'{{"type":"message","id":"e{n}","parentId":{parent_id},"n":{n}}}'.encode()


async def test_lines_round_trip_byte_for_byte_and_read_back_as_the_file(
    pg_schema: tuple[str, str], tmp_path: Path
) -> None:
    dsn, schema = pg_schema
    lines = [
        HEADER,
        b'{"type":"custom","id":"a","parentId":null,"data":"\xff\xfe not UTF-8"}',
        b'{"type":"custom","id":"b","parentId":"a","data":"\\ud800 lone, \\u0000 nul, \xe2\x9c\x93"}',
        b"",  # a blank line is a line
        b"not json at all \x00",
        b'{"type":"custom","id":"c","parentId":"b","data":"' + b"x" * 300_000 + b'"}',
    ]
    async with PostgresTranscriptStorage(dsn, schema=schema) as pg:
        mark = await pg.create("s-1", lines[:2])
        mark = await pg.append("s-1", lines[2:], mark=mark)
        got, read_mark = await pg.read("s-1")
        assert got == lines and read_mark == mark
        assert [line async for line in pg.read_backwards("s-1")] == lines[::-1]
    files = FileTranscriptStorage(tmp_path, durability="none")
    file_mark = await files.create("s-1", lines[:2])
    file_mark = await files.append("s-1", lines[2:], mark=file_mark)
    exported = b"".join(line + b"\n" for line in got)
    assert exported == (tmp_path / "s-1.jsonl").read_bytes()  # the same pi JSONL file, byte for byte
    assert (mark.lines, mark.size) == (file_mark.lines, file_mark.size)


async def test_rows_hold_the_order_the_entry_ids_and_the_head_mark(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    async with PostgresTranscriptStorage(dsn, schema=schema, store_id="agent-a") as pg:
        mark = await pg.create("s-1", [HEADER, _entry(1, None)])
        mark = await pg.append("s-1", [_entry(2, 1), b'{"type":"x","id":7,"parentId":["e2"]}'], mark=mark)
    lines = _rows(
        dsn,
        sql.SQL(
            "SELECT store_id, session_id, seq, entry_type, entry_id, parent_id FROM {} ORDER BY seq"
        ).format(sql.Identifier(schema, "sk_transcript_lines")),
    )
    assert lines == [
        ("agent-a", "s-1", 0, "session", "s-1", None),
        ("agent-a", "s-1", 1, "message", "e1", None),
        ("agent-a", "s-1", 2, "message", "e2", "e1"),
        ("agent-a", "s-1", 3, "x", None, None),  # ids that are not strings are not indexed
    ]
    [(count, size)] = _rows(
        dsn,
        sql.SQL("SELECT line_count, byte_size FROM {}").format(sql.Identifier(schema, "sk_transcripts")),
    )
    assert (count, size) == (mark.lines, mark.size) == (4, mark.size)


async def test_idempotency_keys_answer_every_instance_and_delete_removes_every_row(
    pg_schema: tuple[str, str],
) -> None:
    dsn, schema = pg_schema
    async with (
        PostgresTranscriptStorage(dsn, schema=schema, max_size=2) as one,
        PostgresTranscriptStorage(dsn, schema=schema, max_size=2) as two,
    ):
        start = await one.create("s-1", [HEADER])
        first = await one.append("s-1", [_entry(1, None)], mark=start, idempotency_key="turn-1 ✓")
        # the answer was lost; another worker retries with the mark it had: answered, nothing written
        retry = await two.append("s-1", [_entry(1, None)], mark=start, idempotency_key="turn-1 ✓")
        assert retry == first
        assert len((await two.read("s-1"))[0]) == 2
        assert _count(dsn, schema, "sk_transcript_keys") == 1
        assert await two.delete("s-1")
        for table in ("sk_transcripts", "sk_transcript_lines", "sk_transcript_keys"):
            assert _count(dsn, schema, table) == 0, table
        assert not await one.delete("s-1")
        again = await one.create("s-1", [HEADER])  # a used key is forgotten with its transcript
        after = await one.append("s-1", [_entry(2, None)], mark=again, idempotency_key="turn-1 ✓")
        assert after.lines == 2 and after != first


async def test_a_claim_whose_connection_died_is_lost_and_fenced(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    async with PostgresTranscriptStorage(dsn, schema=schema, max_size=3) as pg:
        mark = await pg.create("s-1", [HEADER])
        claim = await pg.claim("s-1", timeout_ms=1000)
        mark = await pg.append("s-1", [_entry(1, None)], mark=mark, claim=claim)
        [(pid,)] = _rows(  # the connection holding the claim's advisory lock (this test's schema only)
            dsn,
            sql.SQL(
                "SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
                " WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = %s"
            ),
            pg.backend.application_name,
        )
        _rows(dsn, sql.SQL("SELECT pg_terminate_backend(%s)"), pid)
        with pytest.raises(LockNotHeldError) as lost:  # found dead at its first use: nothing was sent
            await pg.append("s-1", [_entry(2, 1)], mark=mark, claim=claim)
        assert lost.value.reason == "lost"
        assert not claim.held
        with pytest.raises(LockNotHeldError, match="was lost"):
            claim.ensure_held()
        assert len((await pg.read("s-1"))[0]) == 2  # nothing written
        other = await pg.claim("s-1", timeout_ms=1000)  # the lock died with the connection
        await pg.append("s-1", [_entry(2, 1)], mark=mark, claim=other)
        await other.release()
        await claim.release()  # releasing a lost claim does nothing


async def test_an_unclaimed_append_waits_for_another_instance_then_gives_up(
    pg_schema: tuple[str, str],
) -> None:
    dsn, schema = pg_schema
    async with (
        PostgresTranscriptStorage(dsn, schema=schema, max_size=2) as holder,
        PostgresTranscriptStorage(dsn, schema=schema, max_size=2, lock_timeout_s=0.2) as other,
    ):
        mark = await holder.create("s-1", [HEADER])
        claim = await holder.claim("s-1")
        try:
            with pytest.raises(SessionBusyError):
                await other.append("s-1", [_entry(1, None)], mark=mark)
            with pytest.raises(SessionBusyError):
                await other.claim("s-1", timeout_ms=100)
            foreign = await other.claim("s-2", timeout_ms=100)
            with pytest.raises(LockNotHeldError, match="not this transcript"):
                await holder.append("s-1", [_entry(1, None)], mark=mark, claim=foreign)
            await foreign.release()
            mark = await holder.append("s-1", [_entry(1, None)], mark=mark, claim=claim)
        finally:
            await claim.release()
        assert (await other.append("s-1", [_entry(2, 1)], mark=mark)).lines == 3


async def test_writers_on_separate_pools_lose_and_duplicate_nothing(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    storages = [PostgresTranscriptStorage(dsn, schema=schema, max_size=2) for _ in range(3)]
    start = await storages[0].create("s-1", [HEADER])

    async def writer(w: int) -> int:
        stale = 0
        mark: StorageMark = start
        for t in range(10):
            while True:
                try:
                    mark = await storages[w].append("s-1", [_entry(w * 100 + t, None)], mark=mark)
                    break
                except StaleTranscriptError:
                    stale += 1
                    _, mark = await storages[w].read_since("s-1", mark)
        return stale

    try:
        await asyncio.gather(*(writer(w) for w in range(3)))
        lines, mark = await storages[1].read("s-1")
    finally:
        for storage in storages:
            await storage.aclose()
    assert sorted(lines[1:]) == sorted(_entry(w * 100 + t, None) for w in range(3) for t in range(10))
    assert mark.lines == 31


async def test_read_backwards_stops_where_the_reader_stops_and_sees_a_replacement(
    pg_schema: tuple[str, str],
) -> None:
    dsn, schema = pg_schema
    async with PostgresTranscriptStorage(dsn, schema=schema) as pg:
        lines = [HEADER, *(_entry(n, n - 1 if n else None) for n in range(3000))]
        await pg.create("s-1", lines)
        reader = pg.read_backwards("s-1")
        assert [await anext(reader) for _ in range(5)] == lines[:-6:-1]
        await reader.aclose()
        reader = pg.read_backwards("s-1")
        taken = [await anext(reader) for _ in range(40)]  # 16 + 32: inside the second batch
        assert taken == lines[:-41:-1]
        await pg.delete("s-1")
        await pg.create("s-1", lines[:100])
        with pytest.raises(TranscriptChangedError):
            async for _ in reader:
                pass


async def test_stores_keep_their_own_transcripts(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    async with (
        PostgresTranscriptStorage(dsn, schema=schema, store_id="a") as a,
        PostgresTranscriptStorage(dsn, schema=schema, store_id="b") as b,
    ):
        await a.create("same", [HEADER])
        await b.create("same", [HEADER, _entry(1, None)])
        await a.create("only-a", [HEADER])
        assert await a.list_sessions() == ["only-a", "same"]
        assert await b.list_sessions() == ["same"]
        assert len((await a.read("same"))[0]) == 1
        with pytest.raises(TranscriptChangedError, match="not one of this storage"):
            await a.read_since("same", (await b.read("same"))[1])
        with pytest.raises(UnsafePathError):
            await a.create("lone-\ud800", [HEADER])


async def test_a_storage_on_the_store_backend_shares_its_pool_and_schema(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    async with PostgresStoreBackend(dsn, schema=schema, store_id="agent-main") as backend:
        storage = PostgresTranscriptStorage(backend=backend)
        assert (storage.schema, storage.store_id) == (schema, "agent-main")
        await backend.put("agent:main:main", SessionEntry(session_id="s-1"))
        await storage.create("s-1", [HEADER])
        await storage.aclose()  # the backend's owner closes it, not the storage
        assert (await storage.read("s-1"))[0] == [HEADER]


async def test_expired_transcripts_are_swept_in_batches(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    heads = sql.Identifier(schema, "sk_transcripts")
    async with (
        PostgresTranscriptStorage(dsn, schema=schema, ttl_s=3600) as short,
        PostgresTranscriptStorage(dsn, schema=schema) as keep,
    ):
        marks = {sid: await short.create(sid, [HEADER]) for sid in ("a", "b", "c", "d", "e")}
        await keep.create("forever", [HEADER])
        await short.append("e", [_entry(1, None)], mark=marks["e"])
        ttl = _rows(
            dsn, sql.SQL("SELECT session_id, expires_at - updated_at FROM {} ORDER BY 1").format(heads)
        )
        hour = datetime.timedelta(hours=1)
        assert ttl == [("a", hour), ("b", hour), ("c", hour), ("d", hour), ("e", hour), ("forever", None)]
        assert await short.sweep_expired() == []  # nothing has expired yet
        _rows(  # a..d expired a minute ago, a first (the server's clock decides)
            dsn,
            sql.SQL(
                "UPDATE {} SET expires_at = now() - interval '1 minute' + ascii(session_id) * interval '1 ms'"
                " WHERE session_id < 'e' RETURNING 1"
            ).format(heads),
        )
        assert await short.sweep_expired(batch_size=2, max_batches=1) == ["a", "b"]  # the oldest first
        assert await keep.sweep_expired(batch_size=2) == ["c", "d"]  # any instance on the store sweeps
        assert await keep.list_sessions() == ["e", "forever"]
        assert _count(dsn, schema, "sk_transcript_lines") == 3
        with pytest.raises(ValueError, match="positive"):
            await short.sweep_expired(batch_size=0)


async def test_a_read_only_backend_without_the_tables_reads_as_empty(pg_schema: tuple[str, str]) -> None:
    # as the store backend does (docs/postgres.md "Setup"): a dry run or an export of a new database
    # finds no transcripts instead of failing, and nothing is created
    dsn, schema = pg_schema
    async with PostgresStoreBackend(dsn, schema=schema, read_only=True) as ro:
        storage = PostgresTranscriptStorage(backend=ro)
        assert await storage.list_sessions() == []
        with pytest.raises(TranscriptNotFoundError, match="no tables yet"):
            await storage.read("s-1")
        with pytest.raises(TranscriptNotFoundError):
            await anext(aiter(storage.read_backwards("s-1")))
        with pytest.raises(StoreError, match="read-only"):
            await storage.create("s-1", [HEADER])
    assert _count_schemas(dsn, schema) == 0
