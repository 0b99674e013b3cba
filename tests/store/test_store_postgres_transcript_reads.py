"""
Partial reads of ``PostgresTranscriptStorage`` on the real server (issue 13: context rebuild and "last
N" in O(live context)): lines from a line number, the last n lines, and the live lines whose context is
the whole transcript's, on straight and branched transcripts with compactions.
"""

from __future__ import annotations

import anyio
import pytest
from tests._helpers import user
from tests._servers import pg_schema

from sessionkeeper.compaction import Compactor
from sessionkeeper.exceptions import TranscriptNotFoundError
from sessionkeeper.store import PostgresTranscriptStorage
from sessionkeeper.transcript import TranscriptManager, load_transcript_bytes


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema",)
PAD = " words to summarise" * 200


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async API is asyncio-only (docs/decisions.md PG-ASYNCIO)


async def test_lines_from_a_line_number_and_the_last_lines(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    async with PostgresTranscriptStorage(dsn, schema=schema) as pg:
        lines = [b'{"type":"session","version":3,"id":"s"}', *(f'{{"n":{n}}}'.encode() for n in range(9))]
        await pg.create("s", lines)
        everything, mark = await pg.read("s")
        assert await pg.read_from("s", start=7) == (lines[7:], mark)
        assert await pg.read_from("s", start=10) == ([], mark)
        assert await pg.read_from("s", start=0) == (everything, mark)
        assert await pg.read_tail("s", lines=3) == (7, lines[7:], mark)
        assert await pg.read_tail("s", lines=100) == (0, lines, mark)
        assert await pg.read_tail("s", lines=0) == (10, [], mark)
        with pytest.raises(ValueError, match="start"):
            await pg.read_from("s", start=-1)
        with pytest.raises(ValueError, match="lines"):
            await pg.read_tail("s", lines=-1)
        with pytest.raises(TranscriptNotFoundError):
            await pg.read_from("nope", start=0)
        with pytest.raises(TranscriptNotFoundError):
            await pg.read_tail("nope", lines=1)
        with pytest.raises(TranscriptNotFoundError):
            await pg.read_live("nope")


async def _live_context_is_the_whole(pg: PostgresTranscriptStorage, session_id: str) -> int:
    """The live lines' context equals the whole transcript's; returns where the live lines start."""
    lines, mark = await pg.read(session_id)
    whole = load_transcript_bytes(b"".join(line + b"\n" for line in lines)).build_context()
    live = await pg.read_live(session_id)
    assert live.mark == mark and live.header == lines[0]
    assert live.lines == lines[live.start :]
    partial = load_transcript_bytes(live.jsonl()).build_context()
    assert partial.to_json()["messages"] == whole.to_json()["messages"]
    return live.start


async def test_the_live_lines_start_at_the_kept_entry_of_the_compaction_on_the_path(
    pg_schema: tuple[str, str],
) -> None:
    dsn, schema = pg_schema
    async with PostgresTranscriptStorage(dsn, schema=schema) as pg:
        manager = await TranscriptManager.create_in(pg, cwd="/w")
        sid = manager.session_id
        for i in range(4):
            await manager.append_message(user(f"before {i}" + PAD))
        assert await _live_context_is_the_whole(pg, sid) == 1  # no compaction: every entry

        first = await Compactor().compact(manager, keep_recent_tokens=50)
        assert first.entry is not None
        kept_1 = [
            line for line in (await pg.read(sid))[0] if first.entry.first_kept_entry_id.encode() in line
        ]
        for i in range(3):
            await manager.append_message(user(f"middle {i}" + PAD))
        start_1 = await _live_context_is_the_whole(pg, sid)
        assert (await pg.read(sid))[0][start_1] == kept_1[0]  # from the kept entry, not the start

        fork_at = manager.leaf_id
        second = await Compactor().compact(manager, keep_recent_tokens=50)
        assert second.entry is not None
        await manager.append_message(user("after" + PAD))
        start_2 = await _live_context_is_the_whole(pg, sid)
        assert start_2 > start_1

        assert fork_at is not None
        manager.branch(fork_at)  # a branch off before the second compaction: only the first is on its path
        await manager.append_message(user("on the branch" + PAD))
        assert await _live_context_is_the_whole(pg, sid) == start_1


async def test_a_cycle_of_parent_ids_ends_the_walk(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    async with PostgresTranscriptStorage(dsn, schema=schema) as pg:
        header = b'{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}'
        looped = [
            b'{"type":"custom","customType":"x","id":"aaaaaaaa","parentId":"bbbbbbbb","timestamp":"2026-01-01T00:00:00.000Z"}',
            b'{"type":"custom","customType":"x","id":"bbbbbbbb","parentId":"aaaaaaaa","timestamp":"2026-01-01T00:00:00.000Z"}',
        ]
        await pg.create("s", [header, *looped])
        with anyio.fail_after(10):
            live = await pg.read_live("s")
        assert (live.header, live.start, live.lines) == (header, 1, looped)  # no compaction: every line


async def test_the_live_read_uses_the_indexes_on_statistics_taken_before_a_burst(
    pg_schema: tuple[str, str],
) -> None:
    # issue 13: context rebuild right after a fast fill must not wait for autovacuum's ANALYZE; the
    # statements' shapes (probes on the primary key and the entry-id index, LIMIT 1 steps behind an
    # OFFSET 0 fence) keep their plans on the indexes whatever the statistics say
    import psycopg
    from psycopg import sql

    from sessionkeeper.store._postgres_transcript_reads import _READS

    dsn, schema = pg_schema
    async with PostgresTranscriptStorage(dsn, schema=schema) as pg:
        manager = await TranscriptManager.create_in(pg, cwd="/w")
        sid = manager.session_id
        await manager.append_message(user("first"))
        with psycopg.connect(dsn, autocommit=True) as conn:  # statistics of a near-empty table
            conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(schema, "sk_transcript_lines")))
            conn.execute(
                sql.SQL("ALTER TABLE {} SET (autovacuum_enabled = false)").format(
                    sql.Identifier(schema, "sk_transcript_lines")
                )
            )
        written = await manager.append_messages([user(f"burst {i}") for i in range(3000)])
        await Compactor().compact(manager, keep_recent_tokens=50)
        await manager.append_message(user("after"))
        live = await pg.read_live(sid)
        assert live.start > 2000  # only the live lines
        params = {
            "store": pg.store_id,
            "session": sid,
            "max_depth": 1_000_000,
            "entry": written[-1].id,
            "before": live.start + 5,
            "start": live.start,
            "also": 0,
        }
        tables = {
            "h": sql.Identifier(schema, "sk_transcripts"),
            "l": sql.Identifier(schema, "sk_transcript_lines"),
        }
        with psycopg.connect(dsn, autocommit=True) as conn:
            for name in ("live_start", "entry_seq", "from"):
                query = sql.SQL("EXPLAIN " + _READS[name]).format(**tables)  # pyright: ignore[reportArgumentType]
                plan = "\n".join(row[0] for row in conn.execute(query, params).fetchall())
                assert "Seq Scan on sk_transcript_lines" not in plan, (name, plan)
