"""
``copy_sessions``: sessions move between stores without loss (issue 13, ``sessionkeeper export`` /
``import``; docs/postgres.md "Moving a sessions directory into a database"). A sessions directory goes
into another store and back into a new directory: ``sessions.json`` and every transcript byte for byte;
a session the target holds differently is refused whole; the source is never written.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import msgspec
import pytest
from tests._helpers import header_obj, json_line, user_entry
from tests._servers import pg_schema, redis_prefix

from sessionkeeper.exceptions import (
    ConfigError,
    InvalidSessionEntryError,
    SessionExistsError,
    SessionNotFoundError,
    StoreCorruptError,
    StoreUnavailableError,
    TranscriptFormatError,
    TranscriptNotFoundError,
    UnsafePathError,
)
from sessionkeeper.store import (
    CopyReport,
    InMemoryStoreBackend,
    PostgresStoreBackend,
    PostgresTranscriptStorage,
    SessionEntry,
    SessionStore,
    copy_sessions,
    encode_session_entry,
    target_entry,
)
from sessionkeeper.transcript import (
    LineBatchReader,
    MemoryTranscriptStorage,
    StorageMark,
    iter_file_line_batches,
    iter_line_batches,
)


pytestmark = pytest.mark.anyio
T = TypeVar("T")
__all__ = ("pg_schema", "redis_prefix")

SID = (f"0190a1b2-0000-7000-8000-00000000000{i}" for i in range(10))
PLAIN, ABSOLUTE, TOPIC, FORK, NO_FILE = (next(SID) for _ in range(5))
FORK_NAME = f"2026-09-20T14-13-48-902Z_{FORK}.jsonl"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the database stores are asyncio-only (docs/decisions.md PG-ASYNCIO)


def _transcript(sid: str, *extra: bytes) -> bytes:
    lines = [
        json_line(header_obj(sid)),
        json_line(user_entry("e1", None, "hello é ✓")),
        json_line(user_entry("e2", "e1", "x" * 300), ensure_ascii=False),
        *extra,
    ]
    return b"".join(line + b"\n" for line in lines)


def _files(directory: Path) -> dict[str, bytes]:
    """The files of ``directory`` (lock files aside) and their bytes."""
    return {
        path.name: path.read_bytes()
        for path in sorted(directory.iterdir())
        if path.is_file() and not path.name.endswith(".lock")
    }


def _snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {
        path.name: (path.read_bytes(), path.stat().st_mtime_ns)
        for path in sorted(directory.iterdir())
        if path.is_file()
    }


def _lay_out(directory: Path) -> None:
    """The transcripts of :func:`_source`, an unnamed one and an archive."""
    directory.mkdir()
    files = {
        f"{PLAIN}.jsonl": _transcript(PLAIN, b"not json at all {", b"", "ünïcode ✓".encode()),
        f"{ABSOLUTE}.jsonl": _transcript(ABSOLUTE, b"\xff\xfe raw bytes"),
        f"{TOPIC}-topic-42.jsonl": _transcript(TOPIC),
        FORK_NAME: _transcript(FORK),
        "0190a1b2-ffff-7000-8000-000000000000.jsonl": _transcript("orphan"),
        f"{PLAIN}.jsonl.reset.2026-01-01T00-00-00.000Z": b"archived\n",
    }
    for name, data in files.items():
        (directory / name).write_bytes(data)


async def _source(directory: Path, *, absolute: bool = False) -> Path:
    """A sessions directory written by the library: five sessions, one file no entry names."""
    _lay_out(directory)
    async with SessionStore.open(directory) as store:
        await store.patch("agent:main:main", session_id=PLAIN, label="Main")
        absolute_file = str(directory / f"{ABSOLUTE}.jsonl") if absolute else f"{ABSOLUTE}.jsonl"
        await store.patch("agent:main:abs", session_id=ABSOLUTE, session_file=absolute_file)
        await store.patch(
            "agent:main:telegram:group:1:topic:42",
            {"extraFieldKept": {"nested": [1, 2.5, "x"]}},
            session_id=TOPIC,
            session_file=f"{TOPIC}-topic-42.jsonl",
        )
        await store.patch("agent:main:fork", session_id=FORK, session_file=FORK_NAME)
        await store.patch("agent:main:empty", session_id=NO_FILE)
    return directory


def _sessions_json(directory: Path) -> dict[str, bytes]:
    """Each entry of the directory's ``sessions.json`` as its exact JSON text."""
    raw = msgspec.json.decode((directory / "sessions.json").read_bytes(), type=dict[str, msgspec.Raw])
    return {key: bytes(value) for key, value in raw.items()}


def _outcomes(report: CopyReport) -> dict[str, str]:
    return {session.session_key: session.outcome for session in report.sessions}


# -- round trips -----------------------------------------------------------------------------------------


async def _round_trip(tmp_path: Path, middle: Callable[[], SessionStore]) -> tuple[Path, Path]:
    source = await _source(tmp_path / "a")
    before = _snapshot(source)
    async with SessionStore.open(source, read_only=True) as src, middle() as mid:
        there = await copy_sessions(src, mid)
    assert there.ok, there.failed
    back_dir = tmp_path / "b"
    async with middle() as mid, SessionStore.open(back_dir) as back:
        back_report = await copy_sessions(mid, back)
    assert back_report.ok, back_report.failed
    assert _outcomes(back_report) == dict.fromkeys(_outcomes(there), "copied")
    assert _snapshot(source) == before  # the source is never written
    return source, back_dir


def _assert_byte_equal(source: Path, back: Path) -> None:
    assert (back / "sessions.json").read_bytes() == (source / "sessions.json").read_bytes()
    copied = _files(back)
    original = _files(source)
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
    assert _files(middle)[f"{TOPIC}-topic-42.jsonl"] == _files(source)[f"{TOPIC}-topic-42.jsonl"]


async def test_directory_to_postgres_store_and_back_is_byte_equal(
    tmp_path: Path, pg_schema: tuple[str, str]
) -> None:
    dsn, schema = pg_schema
    files = tmp_path / "pg-files"
    url = f"{dsn}?schema={schema}&store=export"
    source, back = await _round_trip(tmp_path, lambda: SessionStore.open(url, transcripts_dir=files))
    _assert_byte_equal(source, back)


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
    source = await _source(tmp_path / "a")
    async with (
        SessionStore.open(source, read_only=True) as src,
        SessionStore.open(f"{dsn}?schema={schema}", transcripts_dir=tmp_path / "t") as db,
    ):
        await copy_sessions(src, db)
        stored = await db.backend.load_all()
        loaded = await src.backend.load_all()
    assert list(stored) == list(loaded) == list(_sessions_json(source))  # the source's order
    assert [encode_session_entry(e) for e in stored.values()] == [
        encode_session_entry(e) for e in loaded.values()
    ]
    assert stored["agent:main:telegram:group:1:topic:42"].extra["extraFieldKept"] == {"nested": [1, 2.5, "x"]}


# -- sessionFile ----------------------------------------------------------------------------------------


async def test_an_absolute_session_file_moves_into_the_target_directory(tmp_path: Path) -> None:
    source = await _source(tmp_path / "a", absolute=True)
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
    source = await _source(tmp_path / "a")
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
    assert _outcomes(report)["agent:main:main"] == "copied"
    assert FORK_NAME not in _files(target_dir)


# -- conflicts, re-runs, overwrite ----------------------------------------------------------------------


async def test_running_the_copy_again_changes_nothing(tmp_path: Path) -> None:
    source = await _source(tmp_path / "a")
    target_dir = tmp_path / "b"
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        first = await copy_sessions(src, dst)
        written = _snapshot(target_dir)
        again = await copy_sessions(src, dst)
    assert set(_outcomes(first).values()) == {"copied"}
    assert set(_outcomes(again).values()) == {"unchanged"}
    assert _snapshot(target_dir) == written
    plain = next(s for s in again.sessions if s.session_key == "agent:main:main")
    data = (source / f"{PLAIN}.jsonl").read_bytes()
    assert (plain.lines, plain.size) == (data.count(b"\n"), len(data))


async def test_a_different_entry_in_the_target_refuses_the_session(tmp_path: Path) -> None:
    source = await _source(tmp_path / "a")
    target_dir = tmp_path / "b"
    async with SessionStore.open(target_dir) as dst:
        await dst.patch("agent:main:main", session_id=PLAIN, label="Theirs")
    before = _files(target_dir)
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        report = await copy_sessions(src, dst)
        assert (await dst.require("agent:main:main")).label == "Theirs"
    (failed,) = report.failed
    assert isinstance(failed.error, SessionExistsError)
    assert failed.error.location == "entry"
    assert f"{PLAIN}.jsonl" not in _files(target_dir)  # nothing of the refused session
    assert _files(target_dir)["sessions.json"] != before["sessions.json"]  # the others were copied
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        forced = await copy_sessions(src, dst, keys=["agent:main:main"], overwrite=True)
        assert (await dst.require("agent:main:main")).label == "Main"
    assert _outcomes(forced) == {"agent:main:main": "replaced"}
    assert _files(target_dir)[f"{PLAIN}.jsonl"] == _files(source)[f"{PLAIN}.jsonl"]


async def test_a_different_transcript_in_the_target_refuses_the_session(tmp_path: Path) -> None:
    source = await _source(tmp_path / "a")
    target_dir = tmp_path / "b"
    target_dir.mkdir()
    theirs = _transcript(PLAIN, b'{"type":"custom","id":"x"}')
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
    assert _outcomes(forced)["agent:main:main"] == "replaced"
    assert _outcomes(forced)["agent:main:abs"] == "unchanged"
    assert (target_dir / f"{PLAIN}.jsonl").read_bytes() == (source / f"{PLAIN}.jsonl").read_bytes()


async def test_two_files_for_one_session_id_in_a_database_refuse_the_second(tmp_path: Path) -> None:
    source = await _source(tmp_path / "a")
    (source / f"{TOPIC}.jsonl").write_bytes(_transcript(TOPIC, b"other"))
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
    source = await _source(tmp_path / "a")
    async with SessionStore.open(source) as store:
        await store.patch("agent:main:alias", session_id=PLAIN)
    memory = SessionStore.in_memory()
    async with SessionStore.open(source, read_only=True) as src:
        report = await copy_sessions(src, memory)
    assert report.ok
    alias = next(s for s in report.sessions if s.session_key == "agent:main:alias")
    assert alias.transcript == memory.transcript_storage().location(PLAIN)
    assert alias.lines == (source / f"{PLAIN}.jsonl").read_bytes().count(b"\n")


# -- hostile input ----------------------------------------------------------------------------------------


async def test_an_unterminated_last_line_fails_that_session_and_writes_nothing(tmp_path: Path) -> None:
    source = await _source(tmp_path / "a")
    torn = _transcript(PLAIN) + b'{"type":"message","id":"e3","par'
    (source / f"{PLAIN}.jsonl").write_bytes(torn)
    target_dir = tmp_path / "b"
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        # small batches: the first ones are written before the torn tail is met, then removed again
        report = await copy_sessions(src, dst, batch_bytes=64)
        assert await dst.get("agent:main:main") is None
    (failed,) = report.failed
    assert isinstance(failed.error, TranscriptFormatError)
    assert failed.error.line == 4
    assert f"{PLAIN}.jsonl" not in _files(target_dir)
    assert not [name for name in os.listdir(target_dir) if PLAIN in name]  # no lock or temp file left
    assert (source / f"{PLAIN}.jsonl").read_bytes() == torn
    assert _outcomes(report)["agent:main:abs"] == "copied"


async def test_a_corrupt_sessions_json_raises_and_writes_nothing(tmp_path: Path) -> None:
    source = tmp_path / "a"
    source.mkdir()
    (source / "sessions.json").write_bytes(b'{"agent:main:main": {"sessionId": ')
    target_dir = tmp_path / "b"
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        with pytest.raises(StoreCorruptError):
            await copy_sessions(src, dst)
    assert not target_dir.exists()
    assert os.listdir(source) == ["sessions.json"]  # no backup either: the source is only read


async def test_dropped_rows_and_unreferenced_transcripts_are_reported(tmp_path: Path) -> None:
    source = await _source(tmp_path / "a")
    text = (source / "sessions.json").read_bytes()
    (source / "sessions.json").write_bytes(text[:-2] + b',\n  "agent:main:bad": {"sessionId": "../x"}\n}')
    memory = SessionStore.in_memory()
    async with SessionStore.open(source, read_only=True) as src:
        report = await copy_sessions(src, memory)
    assert report.dropped_keys == ("agent:main:bad",)
    assert report.unreferenced_transcripts == ("0190a1b2-ffff-7000-8000-000000000000",)
    assert len(report.sessions) == 5


async def test_unknown_keys_and_bad_targets_raise_before_writing(tmp_path: Path) -> None:
    source = await _source(tmp_path / "a")
    memory = SessionStore.in_memory()
    async with SessionStore.open(source, read_only=True) as src:
        with pytest.raises(SessionNotFoundError):
            await copy_sessions(src, memory, keys=["agent:main:main", "agent:main:nope"])
        assert await memory.backend.keys() == []
        with pytest.raises(ConfigError, match="memory"):
            # a database store opened without transcripts would keep them in memory only
            await copy_sessions(src, SessionStore.open("redis://127.0.0.1:1/0"))
        with pytest.raises(ConfigError):
            await copy_sessions(src, src)
        with pytest.raises(ConfigError):
            await copy_sessions(src, memory, batch_bytes=0)


async def test_only_the_keys_asked_for_are_copied(tmp_path: Path) -> None:
    source = await _source(tmp_path / "a")
    memory = SessionStore.in_memory()
    async with SessionStore.open(source, read_only=True) as src:
        report = await copy_sessions(src, memory, keys=["agent:main:fork", "agent:main:fork"])
    assert _outcomes(report) == {"agent:main:fork": "copied"}
    assert await memory.backend.keys() == ["agent:main:fork"]
    assert report.unreferenced_transcripts == ()


# -- bounded memory -------------------------------------------------------------------------------------


async def test_files_are_read_in_bounded_batches(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    line = b'{"type":"custom","data":"' + b"y" * 1000 + b'"}'
    path.write_bytes((line + b"\n") * 5000)  # 5 MB, read in 1 MiB chunks
    sizes = []
    total = 0
    async for batch in iter_file_line_batches(path, batch_bytes=256 << 10):
        assert all(item == line for item in batch)
        sizes.append(sum(len(item) + 1 for item in batch))
        total += len(batch)
    assert total == 5000
    assert max(sizes) < (256 << 10) + (1 << 20) + len(line)  # at most a batch plus one chunk
    assert len(sizes) > 4


# -- failures during the copy -----------------------------------------------------------------------------


class _FailingStorage(MemoryTranscriptStorage):
    """Memory transcripts whose ``create`` fails from the ``fail_at``-th call on, as a lost server."""

    def __init__(self, fail_at: int) -> None:
        super().__init__()
        self.fail_at = fail_at
        self.calls = 0

    async def create(self, session_id: str, lines: Sequence[bytes]) -> StorageMark:
        self.calls += 1
        if self.calls >= self.fail_at:
            raise StoreUnavailableError("server closed the connection")
        return await super().create(session_id, lines)


async def test_a_lost_target_raises_its_own_error_and_leaves_no_transcript(tmp_path: Path) -> None:
    source = await _source(tmp_path / "a")
    storage = _FailingStorage(fail_at=3)
    target = SessionStore(InMemoryStoreBackend(), transcripts=storage)
    async with SessionStore.open(source, read_only=True) as src:
        with pytest.raises(StoreUnavailableError, match="closed"):
            await copy_sessions(src, target)
    assert storage.calls >= 3
    assert await storage.list_sessions() == []  # the group's transcripts were removed again
    assert await target.backend.keys() == []


class _RacedBackend(InMemoryStoreBackend):
    """A store where another writer stores ``agent:main:main`` just before each transaction."""

    async def transaction(
        self, fn: Callable[[dict[str, SessionEntry]], T], *, purge_dropped: bool = False
    ) -> T:
        await self.put("agent:main:main", SessionEntry(session_id=PLAIN, label="raced"))
        return await super().transaction(fn, purge_dropped=purge_dropped)


async def test_an_entry_stored_meanwhile_refuses_the_session_and_removes_its_transcript(
    tmp_path: Path,
) -> None:
    source = await _source(tmp_path / "a")
    target = SessionStore(_RacedBackend(), transcripts=MemoryTranscriptStorage())
    async with SessionStore.open(source, read_only=True) as src:
        report = await copy_sessions(src, target)
    (failed,) = report.failed
    assert failed.session_key == "agent:main:main"
    assert isinstance(failed.error, SessionExistsError)
    assert (await target.require("agent:main:main")).label == "raced"
    assert PLAIN not in await target.transcript_storage().list_sessions()
    assert len(await target.transcript_storage().list_sessions()) == 3  # the others are in place


async def test_a_dry_run_reports_what_the_copy_does_and_writes_nothing(tmp_path: Path) -> None:
    source = await _source(tmp_path / "a")
    target_dir = tmp_path / "b"
    target_dir.mkdir()
    theirs = _transcript(FORK, b"theirs")
    (target_dir / FORK_NAME).write_bytes(theirs)
    (source / f"{TOPIC}-topic-42.jsonl").write_bytes(_transcript(TOPIC) + b'{"torn')
    before = _snapshot(target_dir)
    async with (
        SessionStore.open(source, read_only=True) as src,
        SessionStore.open(target_dir, read_only=True) as dst,
    ):
        preview = await copy_sessions(src, dst, dry_run=True)
        forced = await copy_sessions(src, dst, dry_run=True, overwrite=True)
    assert _snapshot(target_dir) == before
    expected = {
        "agent:main:main": "copied",
        "agent:main:abs": "copied",
        "agent:main:telegram:group:1:topic:42": "failed",
        "agent:main:fork": "failed",
        "agent:main:empty": "copied",
    }
    assert _outcomes(preview) == expected
    assert _outcomes(forced) == {**expected, "agent:main:fork": "replaced"}
    errors = {s.session_key: type(s.error) for s in preview.failed}
    assert errors == {
        "agent:main:telegram:group:1:topic:42": TranscriptFormatError,
        "agent:main:fork": SessionExistsError,
    }
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        real = await copy_sessions(src, dst)
    assert _outcomes(real) == expected
    for dry, done in zip(preview.sessions, real.sessions, strict=True):
        assert (dry.lines, dry.size, dry.transcript) == (done.lines, done.size, done.transcript)


async def test_a_target_whose_next_write_would_erase_rows_is_refused(tmp_path: Path) -> None:
    source = await _source(tmp_path / "a")
    target_dir = tmp_path / "b"
    target_dir.mkdir()
    kept = b'{\n  "agent:main:theirs": {"sessionId": "../escape", "label": "keep me"}\n}'
    (target_dir / "sessions.json").write_bytes(kept)
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        with pytest.raises(StoreCorruptError, match="would erase them"):
            await copy_sessions(src, dst)
    assert _files(target_dir) == {"sessions.json": kept}


# -- transcripts in PostgreSQL ----------------------------------------------------------------------------


def _pg_store(dsn: str, schema: str) -> SessionStore:
    """Entries and transcripts in one PostgreSQL schema (a new store object each time: opened, closed)."""
    backend = PostgresStoreBackend(dsn, schema=schema, store_id="moved")
    return SessionStore(backend, transcripts=PostgresTranscriptStorage(backend=backend))


async def test_directory_to_postgres_transcripts_and_back_is_byte_equal(
    tmp_path: Path, pg_schema: tuple[str, str]
) -> None:
    dsn, schema = pg_schema
    source, back = await _round_trip(tmp_path, lambda: _pg_store(dsn, schema))
    _assert_byte_equal(source, back)
    async with _pg_store(dsn, schema) as store:
        storage = store.transcript_storage()
        assert sorted(await storage.list_sessions()) == sorted([PLAIN, ABSOLUTE, TOPIC, FORK])
        lines, _ = await storage.read(ABSOLUTE)
        assert b"\xff\xfe raw bytes" in lines  # not UTF-8: kept as bytes
        again = await copy_sessions(store, SessionStore.in_memory())
    assert again.ok


async def test_postgres_transcripts_are_read_in_pages(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    async with _pg_store(dsn, schema) as store:
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


async def test_entries_holding_lone_surrogates_are_copied_and_compared(tmp_path: Path) -> None:
    source = await _source(tmp_path / "a")
    async with SessionStore.open(source) as store:
        await store.patch("agent:main:main", {"label": "half \ud83d", "note\udfff": ["\udc00"]})
    target_dir = tmp_path / "b"
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        first = await copy_sessions(src, dst)
        again = await copy_sessions(src, dst)
    assert first.ok, first.failed
    assert set(_outcomes(again).values()) == {"unchanged"}
    assert (target_dir / "sessions.json").read_bytes() == (source / "sessions.json").read_bytes()


async def test_a_key_the_target_cannot_hold_fails_that_session_only(
    tmp_path: Path, pg_schema: tuple[str, str]
) -> None:
    dsn, schema = pg_schema
    source = await _source(tmp_path / "a")
    async with SessionStore.open(source) as store:
        await store.patch("agent:main:nul\x00key", session_id=PLAIN)
        await store.patch("agent:main:half\ud83d", label="x")
    async with SessionStore.open(source, read_only=True) as src, _pg_store(dsn, schema) as db:
        report = await copy_sessions(src, db)
        stored = await db.backend.keys()
    failed = {s.session_key: type(s.error) for s in report.failed}
    assert failed == {
        "agent:main:nul\x00key": InvalidSessionEntryError,
        "agent:main:half\ud83d": InvalidSessionEntryError,
    }
    assert len(stored) == 5
    assert _outcomes(report)["agent:main:main"] == "copied"
