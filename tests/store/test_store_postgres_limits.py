"""
What PostgreSQL cannot hold, on the real server: entry ids too long for a btree entry are indexed by
their SHA-256 and read back byte for byte (the live read still walks them), session keys too long for
the primary key are refused with a typed error (never "server unreachable"), a refused login is a
``ConfigError``, and an append that waits on a claim this same storage holds says so.
"""

from __future__ import annotations

import asyncio
import random
import string

import pytest
from tests._helpers import json_line, user_entry
from tests._servers import pg_schema

from sessionkeeper.exceptions import (
    ConfigError,
    InvalidSessionEntryError,
    SessionBusyError,
    StoreUnavailableError,
    TranscriptFormatError,
)
from sessionkeeper.store import PostgresTranscriptStorage, SessionEntry
from sessionkeeper.store._postgres import PostgresStoreBackend
from sessionkeeper.store._postgres_transcript_parts import LONG_ID_PREFIX, indexed_id
from sessionkeeper.transcript import load_transcript_bytes


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema",)
TS = "2026-01-01T00:00:00.000Z"
HEADER = b'{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}'


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async API is asyncio-only (docs/decisions.md PG-ASYNCIO)


def _noise(n: int) -> str:
    rng = random.Random(n)  # random text does not compress: the index entry stays this long
    return "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(n))


def test_indexed_ids_are_the_id_or_a_prefixed_hash() -> None:
    assert indexed_id(None) is None
    assert indexed_id("a1b2c3d4") == "a1b2c3d4"
    long_id = _noise(5000)
    mapped = indexed_id(long_id)
    assert mapped is not None and mapped.startswith(LONG_ID_PREFIX) and len(mapped) < 100
    assert indexed_id(long_id) == mapped and indexed_id(long_id + "x") != mapped
    assert indexed_id(mapped) != mapped  # an id that looks like a stand-in is mapped too: one-to-one


async def test_very_long_entry_ids_are_stored_exactly_and_walked(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    a, b, c = _noise(5000), _noise(4000) + "b", "cccccccc"
    compaction = {
        "type": "compaction",
        "id": _noise(3000) + "k",
        "parentId": b,
        "timestamp": TS,
        "summary": "the story so far",
        "firstKeptEntryId": b,
        "tokensBefore": 100,
    }
    lines = [
        HEADER,
        json_line(user_entry(a, None, "first")),
        json_line(user_entry(b, a, "second")),
        json_line(compaction),
        json_line(user_entry(c, compaction["id"], "third")),
    ]
    async with PostgresTranscriptStorage(dsn, schema=schema) as pg:
        mark = await pg.create("s", lines[:2])
        mark = await pg.append("s", lines[2:], mark=mark)
        got, now = await pg.read("s")
        assert got == lines and now == mark
        live = await pg.read_live("s")
        assert live.start == 2 and live.lines == lines[2:]  # from the kept entry, found by its long id
        whole = load_transcript_bytes(b"".join(line + b"\n" for line in lines)).build_context()
        partial = load_transcript_bytes(live.jsonl()).build_context()
        assert partial.to_json()["messages"] == whole.to_json()["messages"]


async def test_a_refused_write_of_lines_is_a_format_error(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    async with PostgresTranscriptStorage(dsn, schema=schema) as pg:
        mark = await pg.create("s", [HEADER])
        with pytest.raises(TranscriptFormatError, match="nothing was written"):
            await pg.append("s", [b'{"n":1}'], mark=mark, idempotency_key=_noise(5000))
        assert await pg.read("s") == ([HEADER], mark)


async def test_session_keys_too_long_to_index_are_refused(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    async with PostgresStoreBackend(dsn, schema=schema, max_size=2) as store:
        key = "agent:main:" + _noise(5000)
        with pytest.raises(InvalidSessionEntryError, match="at most 2048 bytes"):
            await store.put(key, SessionEntry(session_id="s1"))
        with pytest.raises(InvalidSessionEntryError):
            await store.update(key, lambda _now: SessionEntry(session_id="s1"))
        assert await store.get(key) is None and await store.keys() == []
        fits = "agent:main:" + _noise(2000)
        await store.put(fits, SessionEntry(session_id="s1"))
        assert await store.keys() == [fits]
    with pytest.raises(ConfigError, match="512 bytes"):
        PostgresStoreBackend(dsn, store_id="x" * 513)


async def test_a_refused_login_is_a_config_error() -> None:
    store = PostgresStoreBackend("postgresql://no_such_role_sk@127.0.0.1:5432/test", connect_timeout_s=5)
    try:
        with pytest.raises(ConfigError, match="no_such_role_sk"):
            await store.keys()
    finally:
        await store.aclose()
    store = PostgresStoreBackend("postgresql://127.0.0.1:1/test", connect_timeout_s=0.5)
    try:
        with pytest.raises(StoreUnavailableError):  # nobody answered: that one is worth a retry
            await store.keys()
    finally:
        await store.aclose()


async def test_an_append_waiting_on_its_own_storages_claim_says_so(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    backend = PostgresStoreBackend(dsn, schema=schema, lock_timeout_s=0.3, max_size=3)
    async with backend, PostgresTranscriptStorage(backend=backend) as pg:
        mark = await pg.create("s", [HEADER])
        claim = await pg.claim("s")
        with pytest.raises(SessionBusyError, match="this same storage"):
            await pg.append("s", [b'{"n":1}'], mark=mark)
        mark = await pg.append("s", [b'{"n":1}'], mark=mark, claim=claim)
        await claim.release()
        other = await PostgresTranscriptStorage(backend=backend).claim("s")
        with pytest.raises(SessionBusyError, match="another writer"):
            await pg.append("s", [b'{"n":2}'], mark=mark)
        await other.release()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def test_a_server_gone_past_the_lock_timeout_is_unavailable(
    pg_schema: tuple[str, str],
) -> None:
    # a TCP relay to the real server stands for the network: closing it makes the server unreachable
    dsn, schema = pg_schema
    relayed: list[asyncio.StreamWriter] = []

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", 5432)
        relayed.extend((writer, up_writer))
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(relay, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    url = dsn.replace("127.0.0.1:5432", f"127.0.0.1:{port}")
    store = PostgresStoreBackend(url, schema=schema, max_size=1, lock_timeout_s=0.5, connect_timeout_s=2)
    try:
        await store.put("k", SessionEntry(session_id="s1"))
        pg = PostgresTranscriptStorage(backend=store)
        claim = await pg.claim("s")  # holds the pool's only connection: a real wait
        with pytest.raises(SessionBusyError):
            await store.get("k")
        await claim.release()
        assert await store.get("k") == SessionEntry(session_id="s1")
        server.close()
        for writer in relayed:
            writer.close()
        await server.wait_closed()
        with pytest.raises(StoreUnavailableError, match="cannot reach PostgreSQL"):  # after the pool wait
            await store.get("k")
    finally:
        server.close()
        await store.aclose()
