"""
The transcript-storage conformance suite on the file, memory and PostgreSQL storages (issues 12, 13;
PostgreSQL: the real server, one schema per test, asyncio only).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests._servers import pg_schema

from sessionkeeper.abc import TranscriptStorage
from sessionkeeper.exceptions import StaleTranscriptError
from sessionkeeper.store import PostgresTranscriptStorage
from sessionkeeper.testing.conformance import (
    TRANSCRIPT_STORAGE_CHECKS,
    StorageFactory,
    TranscriptStorageCheck,
    TranscriptStorageConformanceError,
    run_transcript_storage_conformance,
)
from sessionkeeper.transcript import FileTranscriptStorage, MemoryTranscriptStorage, WriteLockSettings


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema",)

SETTINGS = WriteLockSettings(acquire_timeout_ms=2000, poll_interval_ms=5)


def _factories(kind: str, tmp_path: Path) -> tuple[StorageFactory, StorageFactory]:
    if kind == "file":
        directory = tmp_path / "sessions"
        return (
            lambda: FileTranscriptStorage(directory, durability="none", settings=SETTINGS),
            lambda: FileTranscriptStorage(directory, durability="none", settings=SETTINGS),
        )
    shared = MemoryTranscriptStorage()
    made: list[MemoryTranscriptStorage] = []

    def fresh() -> MemoryTranscriptStorage:
        made.append(MemoryTranscriptStorage())
        return made[-1]

    # memory: a second "instance" on the same storage is the same object (it lives in this process)
    return fresh, lambda: made[-1] if made else shared


@pytest.mark.parametrize("kind", ["file", "memory"])
@pytest.mark.parametrize("check", TRANSCRIPT_STORAGE_CHECKS, ids=lambda c: c.name)
async def test_transcript_storage_conformance(
    check: TranscriptStorageCheck, kind: str, tmp_path: Path
) -> None:
    factory, reopen = _factories(kind, tmp_path)
    await check.run(factory, reopen=reopen)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # psycopg's async API (decision PG-ASYNCIO)
@pytest.mark.parametrize("check", TRANSCRIPT_STORAGE_CHECKS, ids=lambda c: c.name)
async def test_postgres_transcript_storage_conformance(
    check: TranscriptStorageCheck, pg_schema: tuple[str, str]
) -> None:
    dsn, schema = pg_schema
    made: list[PostgresTranscriptStorage] = []
    stores = {"n": 0}

    def factory() -> PostgresTranscriptStorage:
        stores["n"] += 1  # a new store id is a new, empty storage in the same schema
        made.append(PostgresTranscriptStorage(dsn, schema=schema, store_id=f"s{stores['n']}", max_size=4))
        return made[-1]

    def reopen() -> PostgresTranscriptStorage:  # another instance (its own pool) on the same store
        made.append(PostgresTranscriptStorage(dsn, schema=schema, store_id=f"s{stores['n']}", max_size=4))
        return made[-1]

    try:
        await check.run(factory, reopen=reopen)
    finally:
        for storage in made:
            await storage.aclose()


@pytest.mark.parametrize("kind", ["file", "memory"])
async def test_run_transcript_storage_conformance_runs_all(kind: str, tmp_path: Path) -> None:
    made = 0

    def counting() -> TranscriptStorage:
        nonlocal made
        made += 1
        if kind == "file":
            return FileTranscriptStorage(tmp_path / f"s{made}", durability="none", settings=SETTINGS)
        return MemoryTranscriptStorage()

    await run_transcript_storage_conformance(counting)
    assert made == len([c for c in TRANSCRIPT_STORAGE_CHECKS if not c.needs_reopen])


async def test_the_suite_catches_a_storage_that_appends_without_checking_the_mark() -> None:
    class Careless(MemoryTranscriptStorage):
        async def append(self, session_id, lines, *, mark, claim=None, idempotency_key=None):  # type: ignore[no-untyped-def]
            while True:
                try:
                    return await super().append(session_id, lines, mark=mark, claim=claim)
                except StaleTranscriptError:
                    _, mark = await self.read_since(session_id, mark)

    check = next(c for c in TRANSCRIPT_STORAGE_CHECKS if c.name == "conditional_append")
    with pytest.raises(TranscriptStorageConformanceError, match="conditional_append"):
        await check.run(Careless)


async def test_a_check_needing_a_second_instance_says_so() -> None:
    check = next(c for c in TRANSCRIPT_STORAGE_CHECKS if c.needs_reopen)
    with pytest.raises(TranscriptStorageConformanceError, match="needs reopen"):
        await check.run(MemoryTranscriptStorage)


async def test_file_storage_writes_pi_jsonl_files_next_to_each_other(tmp_path: Path) -> None:
    storage = FileTranscriptStorage(tmp_path, durability="none", settings=SETTINGS)
    mark = await storage.create("abc", [b'{"type":"session","version":3,"id":"abc"}'])
    await storage.append("abc", [b'{"type":"custom","id":"1"}'], mark=mark)
    path = tmp_path / "abc.jsonl"
    assert storage.location("abc") == str(path)
    assert path.read_bytes() == b'{"type":"session","version":3,"id":"abc"}\n{"type":"custom","id":"1"}\n'
    assert not (tmp_path / "abc.jsonl.lock").exists()  # the append's own lock is gone


async def test_file_storage_cuts_a_torn_tail_before_appending(tmp_path: Path) -> None:
    storage = FileTranscriptStorage(tmp_path, durability="none", settings=SETTINGS)
    mark = await storage.create("abc", [b'{"type":"session","version":3,"id":"abc"}'])
    path = tmp_path / "abc.jsonl"
    with path.open("ab") as handle:
        handle.write(b'{"type":"custom","id":"torn')  # a crash mid-write
    lines, seen = await storage.read("abc")
    assert seen == mark and len(lines) == 1  # the torn line is not a line
    assert [line async for line in storage.read_backwards("abc")] == lines
    await storage.append("abc", [b'{"type":"custom","id":"2"}'], mark=seen)
    assert (await storage.read("abc"))[0] == [lines[0], b'{"type":"custom","id":"2"}']


async def test_the_store_decides_where_transcripts_live(tmp_path: Path) -> None:
    from sessionkeeper.store import SessionStore

    async with SessionStore.open(tmp_path / "sessions") as store:
        storage = store.transcript_storage()
        assert isinstance(storage, FileTranscriptStorage)
        assert storage.directory == tmp_path / "sessions"
        assert store.transcript_storage() is storage
        assert storage.location("abc") == str(tmp_path / "sessions" / "abc.jsonl")
    async with SessionStore.in_memory() as store:
        memory = store.transcript_storage()
        assert isinstance(memory, MemoryTranscriptStorage)
        assert store.transcript_storage() is memory


async def test_a_check_names_itself_when_the_storage_raises_something_unexpected() -> None:
    class Broken(MemoryTranscriptStorage):
        async def list_sessions(self) -> list[str]:
            raise RuntimeError("the database went away")

    check = next(c for c in TRANSCRIPT_STORAGE_CHECKS if c.name == "list_delete")
    with pytest.raises(
        TranscriptStorageConformanceError,
        match=r"^list_delete: unexpected RuntimeError: the database went away",
    ) as caught:
        await check.run(Broken)
    assert isinstance(caught.value.__cause__, RuntimeError)


@pytest.mark.parametrize("finished", [True, False], ids=["complete", "unfinished"])
async def test_file_storage_reads_a_multi_megabyte_last_line_backwards(
    tmp_path: Path, finished: bool
) -> None:
    storage = FileTranscriptStorage(tmp_path, durability="none", settings=SETTINGS)
    header = b'{"type":"session","version":3,"id":"big"}'
    before = b'{"type":"custom","id":"1","data":"' + b"a" * 100_000 + b'"}'
    # 5 MiB + change: many 64 KiB chunks, and a chunk edge that falls inside the line
    big = b'{"type":"custom","id":"2","data":"' + bytes(range(32, 127)) * 55_200 + b'"}'
    mark = await storage.create("big", [header])
    mark = await storage.append("big", [before, big], mark=mark)
    if not finished:
        with (tmp_path / "big.jsonl").open("ab") as handle:
            handle.write(b'{"type":"custom","id":"3","data":"' + b"z" * (3 << 20))  # still being written
    backwards = [line async for line in storage.read_backwards("big")]
    assert backwards == [big, before, header]
    assert (await storage.read("big"))[0] == [header, before, big]
