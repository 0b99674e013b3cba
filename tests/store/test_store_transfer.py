"""
``copy_sessions``: sessions move between stores without loss (issue 13, ``sessionkeeper export`` /
``import``; docs/postgres.md "Moving a sessions directory into a database"). A sessions directory goes
into another store and back into a new directory: ``sessions.json`` and every transcript byte for byte;
a session the target holds differently is refused whole; the source is never written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from tests._helpers import header_obj, json_line
from tests._servers import pg_schema, redis_prefix
from tests.store._transfer_source import (
    ABSOLUTE,
    FORK,
    FORK_NAME,
    PLAIN,
    TOPIC,
    files_of,
    make_source,
    outcomes,
    pg_store,
    sessions_json,
    snapshot,
    transcript_bytes,
)

from sessionkeeper.exceptions import (
    SessionExistsError,
    TranscriptNotFoundError,
    UnsafePathError,
)
from sessionkeeper.store import (
    SessionStore,
    copy_sessions,
    encode_session_entry,
    target_entry,
)
from sessionkeeper.transcript import (
    LineBatchReader,
    MemoryTranscriptStorage,
    iter_line_batches,
)


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema", "redis_prefix")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the database stores are asyncio-only (docs/decisions.md PG-ASYNCIO)


# -- round trips -----------------------------------------------------------------------------------------


async def _round_trip(tmp_path: Path, middle: Callable[[], SessionStore]) -> tuple[Path, Path]:
    source = await make_source(tmp_path / "a")
    before = snapshot(source)
    async with SessionStore.open(source, read_only=True) as src, middle() as mid:
        there = await copy_sessions(src, mid)
    assert there.ok, there.failed
    back_dir = tmp_path / "b"
    async with middle() as mid, SessionStore.open(back_dir) as back:
        back_report = await copy_sessions(mid, back)
    assert back_report.ok, back_report.failed
    assert outcomes(back_report) == dict.fromkeys(outcomes(there), "copied")
    assert snapshot(source) == before  # the source is never written
    return source, back_dir


def _assert_byte_equal(source: Path, back: Path) -> None:
    assert (back / "sessions.json").read_bytes() == (source / "sessions.json").read_bytes()
    copied = files_of(back)
    original = files_of(source)
    for name, data in copied.items():
        assert data == original[name], name
    # every transcript an entry names came along; the unnamed file and the archive stayed behind
    assert set(copied) == {"sessions.json", *(n for n in original if n.endswith(".jsonl"))} - {
        "0190a1b2-ffff-7000-8000-000000000000.jsonl"
    }


async def test_directory_to_memory_and_back_is_byte_equal(tmp_path: Path) -> None:
    memory = SessionStore.in_memory()
    storage = memory.transcript_storage()

    class Kept(SessionStore):
        async def aclose(self) -> None:  # one store for both legs of the trip
            pass

    kept = Kept(memory.backend, transcripts=storage)
    source, back = await _round_trip(tmp_path, lambda: kept)
    _assert_byte_equal(source, back)
    assert isinstance(storage, MemoryTranscriptStorage)
    # in a store without a sessions directory a transcript is named by the session id
    assert sorted(await storage.list_sessions()) == sorted([PLAIN, ABSOLUTE, TOPIC, FORK])
    lines, _ = await storage.read(TOPIC)
    assert b"".join(line + b"\n" for line in lines) == (source / f"{TOPIC}-topic-42.jsonl").read_bytes()


async def test_directory_to_sqlite_and_back_is_byte_equal(tmp_path: Path) -> None:
    middle = tmp_path / "m"
    middle.mkdir()
    (middle / "sessions.sqlite").touch()
    source, back = await _round_trip(tmp_path, lambda: SessionStore.open(middle, backend="sqlite"))
    _assert_byte_equal(source, back)
    assert files_of(middle)[f"{TOPIC}-topic-42.jsonl"] == files_of(source)[f"{TOPIC}-topic-42.jsonl"]


async def test_directory_to_postgres_store_and_back_is_byte_equal(
    tmp_path: Path, pg_schema: tuple[str, str]
) -> None:
    dsn, schema = pg_schema
    files = tmp_path / "pg-files"
    url = f"{dsn}?schema={schema}&store=export"
    source, back = await _round_trip(tmp_path, lambda: SessionStore.open(url, transcripts_dir=files))
    _assert_byte_equal(source, back)


async def test_an_entry_patched_twice_comes_back_value_equal_in_new_entry_key_order(
    tmp_path: Path, pg_schema: tuple[str, str]
) -> None:
    # docs/postgres.md: a directory keeps keys in first-written order (JavaScript's spread), a copy
    # writes a new entry's order, so the bytes differ and the values do not (break-it M5)
    dsn, schema = pg_schema
    source = tmp_path / "a"
    source.mkdir()
    async with SessionStore.open(source) as store:
        await store.patch("agent:main:main", session_id=PLAIN, total_tokens=7)
        await store.patch("agent:main:main", input_tokens=3, label="Main")
    url = f"{dsn}?schema={schema}&store=order"
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(url) as mid:
        assert (await copy_sessions(src, mid)).ok
    async with SessionStore.open(url) as mid, SessionStore.open(tmp_path / "b") as back:
        assert (await copy_sessions(mid, back)).ok
    before = msgspec.json.decode((source / "sessions.json").read_bytes())["agent:main:main"]
    after = msgspec.json.decode((tmp_path / "b" / "sessions.json").read_bytes())["agent:main:main"]
    assert after == before
    assert list(before).index("totalTokens") < list(before).index("inputTokens")
    assert list(after).index("inputTokens") < list(after).index("totalTokens")


async def test_directory_to_redis_store_and_back_is_byte_equal(
    tmp_path: Path, redis_prefix: tuple[str, str]
) -> None:
    url, prefix = redis_prefix
    files = tmp_path / "redis-files"
    full = f"{url}?prefix={prefix}&store=export"
    source, back = await _round_trip(tmp_path, lambda: SessionStore.open(full, transcripts_dir=files))
    _assert_byte_equal(source, back)


async def test_entries_keep_their_exact_json_in_a_database(
    tmp_path: Path, pg_schema: tuple[str, str]
) -> None:
    dsn, schema = pg_schema
    source = await make_source(tmp_path / "a")
    async with (
        SessionStore.open(source, read_only=True) as src,
        SessionStore.open(f"{dsn}?schema={schema}", transcripts_dir=tmp_path / "t") as db,
    ):
        await copy_sessions(src, db)
        stored = await db.backend.load_all()
        loaded = await src.backend.load_all()
    assert list(stored) == list(loaded) == list(sessions_json(source))  # the source's order
    assert [encode_session_entry(e) for e in stored.values()] == [
        encode_session_entry(e) for e in loaded.values()
    ]
    assert stored["agent:main:telegram:group:1:topic:42"].extra["extraFieldKept"] == {"nested": [1, 2.5, "x"]}


# -- sessionFile ----------------------------------------------------------------------------------------


async def test_an_absolute_session_file_moves_into_the_target_directory(tmp_path: Path) -> None:
    source = await make_source(tmp_path / "a", absolute=True)
    memory = SessionStore.in_memory()
    async with SessionStore.open(source, read_only=True) as src:
        assert (await copy_sessions(src, memory)).ok
    entry = await memory.require("agent:main:abs")
    assert entry.session_file == str(source / f"{ABSOLUTE}.jsonl")  # kept as it was in the database
    back = tmp_path / "b"
    async with SessionStore.open(back) as target:
        assert (await copy_sessions(memory, target)).ok
        moved = await target.require("agent:main:abs")
    assert moved.session_file == str(back.absolute() / f"{ABSOLUTE}.jsonl")
    assert (back / f"{ABSOLUTE}.jsonl").read_bytes() == (source / f"{ABSOLUTE}.jsonl").read_bytes()
    # everything else is the same entry
    assert msgspec.structs.replace(moved, session_file=entry.session_file) == entry
    # into the same directory it is kept byte for byte
    async with SessionStore.open(source, read_only=True) as same:
        assert target_entry(same, entry) is entry


async def test_a_refused_session_file_fails_that_session_only(tmp_path: Path) -> None:
    source = await make_source(tmp_path / "a")
    async with SessionStore.open(source) as store:
        await store.backend.update(
            "agent:main:fork",
            lambda e: msgspec.structs.replace(e, session_file="sessions.json") if e else None,
        )
    target_dir = tmp_path / "b"
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        report = await copy_sessions(src, dst)
        assert await dst.get("agent:main:fork") is None
    (failed,) = report.failed
    assert failed.session_key == "agent:main:fork"
    assert isinstance(failed.error, UnsafePathError)
    assert outcomes(report)["agent:main:main"] == "copied"
    assert FORK_NAME not in files_of(target_dir)


# -- conflicts, re-runs, overwrite ----------------------------------------------------------------------


async def test_running_the_copy_again_changes_nothing(tmp_path: Path) -> None:
    source = await make_source(tmp_path / "a")
    target_dir = tmp_path / "b"
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        first = await copy_sessions(src, dst)
        written = snapshot(target_dir)
        again = await copy_sessions(src, dst)
    assert set(outcomes(first).values()) == {"copied"}
    assert set(outcomes(again).values()) == {"unchanged"}
    assert snapshot(target_dir) == written
    plain = next(s for s in again.sessions if s.session_key == "agent:main:main")
    data = (source / f"{PLAIN}.jsonl").read_bytes()
    assert (plain.lines, plain.size) == (data.count(b"\n"), len(data))


async def test_a_different_entry_in_the_target_refuses_the_session(tmp_path: Path) -> None:
    source = await make_source(tmp_path / "a")
    target_dir = tmp_path / "b"
    async with SessionStore.open(target_dir) as dst:
        await dst.patch("agent:main:main", session_id=PLAIN, label="Theirs")
    before = files_of(target_dir)
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        report = await copy_sessions(src, dst)
        assert (await dst.require("agent:main:main")).label == "Theirs"
    (failed,) = report.failed
    assert isinstance(failed.error, SessionExistsError)
    assert failed.error.location == "entry"
    assert f"{PLAIN}.jsonl" not in files_of(target_dir)  # nothing of the refused session
    assert files_of(target_dir)["sessions.json"] != before["sessions.json"]  # the others were copied
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        forced = await copy_sessions(src, dst, keys=["agent:main:main"], overwrite=True)
        assert (await dst.require("agent:main:main")).label == "Main"
    assert outcomes(forced) == {"agent:main:main": "replaced"}
    assert files_of(target_dir)[f"{PLAIN}.jsonl"] == files_of(source)[f"{PLAIN}.jsonl"]


async def test_a_different_transcript_in_the_target_refuses_the_session(tmp_path: Path) -> None:
    source = await make_source(tmp_path / "a")
    target_dir = tmp_path / "b"
    target_dir.mkdir()
    theirs = transcript_bytes(PLAIN, b'{"type":"custom","id":"x"}')
    (target_dir / f"{PLAIN}.jsonl").write_bytes(theirs)
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        report = await copy_sessions(src, dst)
        assert await dst.get("agent:main:main") is None
    (failed,) = report.failed
    assert isinstance(failed.error, SessionExistsError)
    assert failed.error.location == str(target_dir / f"{PLAIN}.jsonl")
    assert (target_dir / f"{PLAIN}.jsonl").read_bytes() == theirs
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        forced = await copy_sessions(src, dst, overwrite=True)
    assert outcomes(forced)["agent:main:main"] == "replaced"
    assert outcomes(forced)["agent:main:abs"] == "unchanged"
    assert (target_dir / f"{PLAIN}.jsonl").read_bytes() == (source / f"{PLAIN}.jsonl").read_bytes()


async def test_two_files_for_one_session_id_in_a_database_refuse_the_second(tmp_path: Path) -> None:
    source = await make_source(tmp_path / "a")
    (source / f"{TOPIC}.jsonl").write_bytes(transcript_bytes(TOPIC, b"other"))
    async with SessionStore.open(source) as store:
        await store.patch("agent:main:same-id", session_id=TOPIC)
    memory = SessionStore.in_memory()
    async with SessionStore.open(source, read_only=True) as src:
        report = await copy_sessions(src, memory)
    (failed,) = report.failed
    assert failed.session_key == "agent:main:same-id"
    assert isinstance(failed.error, SessionExistsError)
    assert await memory.get("agent:main:same-id") is None


async def test_entries_sharing_one_transcript_copy_it_once(tmp_path: Path) -> None:
    source = await make_source(tmp_path / "a")
    async with SessionStore.open(source) as store:
        await store.patch("agent:main:alias", session_id=PLAIN)
    memory = SessionStore.in_memory()
    async with SessionStore.open(source, read_only=True) as src:
        report = await copy_sessions(src, memory)
    assert report.ok
    alias = next(s for s in report.sessions if s.session_key == "agent:main:alias")
    assert alias.transcript == memory.transcript_storage().location(PLAIN)
    assert alias.lines == (source / f"{PLAIN}.jsonl").read_bytes().count(b"\n")


# -- transcripts in PostgreSQL ----------------------------------------------------------------------------


async def test_directory_to_postgres_transcripts_and_back_is_byte_equal(
    tmp_path: Path, pg_schema: tuple[str, str]
) -> None:
    dsn, schema = pg_schema
    source, back = await _round_trip(tmp_path, lambda: pg_store(dsn, schema))
    _assert_byte_equal(source, back)
    async with pg_store(dsn, schema) as store:
        storage = store.transcript_storage()
        assert sorted(await storage.list_sessions()) == sorted([PLAIN, ABSOLUTE, TOPIC, FORK])
        lines, _ = await storage.read(ABSOLUTE)
        assert b"\xff\xfe raw bytes" in lines  # not UTF-8: kept as bytes
        again = await copy_sessions(store, SessionStore.in_memory())
    assert again.ok


async def test_postgres_transcripts_are_read_in_pages(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    async with pg_store(dsn, schema) as store:
        storage = store.transcript_storage()
        assert isinstance(storage, LineBatchReader)
        lines = [json_line(header_obj("big"))] + [b'{"n":%d}' % i for i in range(5000)] + [b"y" * 3000]
        await storage.create("big", lines)
        batches = [batch async for batch in iter_line_batches(storage, "big", batch_bytes=1000)]
        assert [line for batch in batches for line in batch] == lines
        assert all(sum(len(line) + 1 for line in batch) <= 1000 or len(batch) == 1 for batch in batches)
        assert batches[-1] == [b"y" * 3000]  # a line over the batch size comes alone
        whole = [batch async for batch in iter_line_batches(storage, "big", batch_bytes=1 << 30)]
        assert [len(batch) for batch in whole] == [4096, len(lines) - 4096]  # at most 4096 lines a page
        with pytest.raises(TranscriptNotFoundError):
            await anext(iter_line_batches(storage, "absent", batch_bytes=1000))
