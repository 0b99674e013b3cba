"""
``copy_sessions`` on hostile input and failures (issue 13): a torn transcript, a corrupt or lossy store, a
key the target cannot hold, a target lost or written by someone else mid-copy each give a typed error
and leave nothing partial; a dry run predicts all of it and writes nothing; memory stays bounded.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import pytest
from tests._servers import pg_schema
from tests.store._transfer_source import (
    FORK,
    FORK_NAME,
    PLAIN,
    TOPIC,
    files_of,
    make_source,
    outcomes,
    pg_store,
    snapshot,
    transcript_bytes,
)

from sessionkeeper.exceptions import (
    ConfigError,
    InvalidSessionEntryError,
    SessionExistsError,
    SessionNotFoundError,
    StoreCorruptError,
    StoreUnavailableError,
    TranscriptFormatError,
)
from sessionkeeper.store import InMemoryStoreBackend, SessionEntry, SessionStore, copy_sessions
from sessionkeeper.transcript import MemoryTranscriptStorage, StorageMark, iter_file_line_batches


pytestmark = pytest.mark.anyio
T = TypeVar("T")
__all__ = ("pg_schema",)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the database stores are asyncio-only (docs/decisions.md PG-ASYNCIO)


# -- hostile input ----------------------------------------------------------------------------------------


async def test_an_unterminated_last_line_fails_that_session_and_writes_nothing(tmp_path: Path) -> None:
    source = await make_source(tmp_path / "a")
    torn = transcript_bytes(PLAIN) + b'{"type":"message","id":"e3","par'
    (source / f"{PLAIN}.jsonl").write_bytes(torn)
    target_dir = tmp_path / "b"
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        # small batches: the first ones are written before the torn tail is met, then removed again
        report = await copy_sessions(src, dst, batch_bytes=64)
        assert await dst.get("agent:main:main") is None
    (failed,) = report.failed
    assert isinstance(failed.error, TranscriptFormatError)
    assert failed.error.line == 4
    assert f"{PLAIN}.jsonl" not in files_of(target_dir)
    assert not [name for name in os.listdir(target_dir) if PLAIN in name]  # no lock or temp file left
    assert (source / f"{PLAIN}.jsonl").read_bytes() == torn
    assert outcomes(report)["agent:main:abs"] == "copied"


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
    source = await make_source(tmp_path / "a")
    text = (source / "sessions.json").read_bytes()
    (source / "sessions.json").write_bytes(text[:-2] + b',\n  "agent:main:bad": {"sessionId": "../x"}\n}')
    memory = SessionStore.in_memory()
    async with SessionStore.open(source, read_only=True) as src:
        report = await copy_sessions(src, memory)
    assert report.dropped_keys == ("agent:main:bad",)
    assert report.unreferenced_transcripts == ("0190a1b2-ffff-7000-8000-000000000000",)
    assert len(report.sessions) == 5


async def test_unknown_keys_and_bad_targets_raise_before_writing(tmp_path: Path) -> None:
    source = await make_source(tmp_path / "a")
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
    source = await make_source(tmp_path / "a")
    memory = SessionStore.in_memory()
    async with SessionStore.open(source, read_only=True) as src:
        report = await copy_sessions(src, memory, keys=["agent:main:fork", "agent:main:fork"])
    assert outcomes(report) == {"agent:main:fork": "copied"}
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
    source = await make_source(tmp_path / "a")
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
    source = await make_source(tmp_path / "a")
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
    source = await make_source(tmp_path / "a")
    target_dir = tmp_path / "b"
    target_dir.mkdir()
    theirs = transcript_bytes(FORK, b"theirs")
    (target_dir / FORK_NAME).write_bytes(theirs)
    (source / f"{TOPIC}-topic-42.jsonl").write_bytes(transcript_bytes(TOPIC) + b'{"torn')
    before = snapshot(target_dir)
    async with (
        SessionStore.open(source, read_only=True) as src,
        SessionStore.open(target_dir, read_only=True) as dst,
    ):
        preview = await copy_sessions(src, dst, dry_run=True)
        forced = await copy_sessions(src, dst, dry_run=True, overwrite=True)
    assert snapshot(target_dir) == before
    expected = {
        "agent:main:main": "copied",
        "agent:main:abs": "copied",
        "agent:main:telegram:group:1:topic:42": "failed",
        "agent:main:fork": "failed",
        "agent:main:empty": "copied",
    }
    assert outcomes(preview) == expected
    assert outcomes(forced) == {**expected, "agent:main:fork": "replaced"}
    errors = {s.session_key: type(s.error) for s in preview.failed}
    assert errors == {
        "agent:main:telegram:group:1:topic:42": TranscriptFormatError,
        "agent:main:fork": SessionExistsError,
    }
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        real = await copy_sessions(src, dst)
    assert outcomes(real) == expected
    for dry, done in zip(preview.sessions, real.sessions, strict=True):
        assert (dry.lines, dry.size, dry.transcript) == (done.lines, done.size, done.transcript)


async def test_a_target_whose_next_write_would_erase_rows_is_refused(tmp_path: Path) -> None:
    source = await make_source(tmp_path / "a")
    target_dir = tmp_path / "b"
    target_dir.mkdir()
    kept = b'{\n  "agent:main:theirs": {"sessionId": "../escape", "label": "keep me"}\n}'
    (target_dir / "sessions.json").write_bytes(kept)
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        with pytest.raises(StoreCorruptError, match="would erase them"):
            await copy_sessions(src, dst)
    assert files_of(target_dir) == {"sessions.json": kept}


async def test_entries_holding_lone_surrogates_are_copied_and_compared(tmp_path: Path) -> None:
    source = await make_source(tmp_path / "a")
    async with SessionStore.open(source) as store:
        await store.patch("agent:main:main", {"label": "half \ud83d", "note\udfff": ["\udc00"]})
    target_dir = tmp_path / "b"
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        first = await copy_sessions(src, dst)
        again = await copy_sessions(src, dst)
    assert first.ok, first.failed
    assert set(outcomes(again).values()) == {"unchanged"}
    assert (target_dir / "sessions.json").read_bytes() == (source / "sessions.json").read_bytes()


async def test_a_key_the_target_cannot_hold_fails_that_session_only(
    tmp_path: Path, pg_schema: tuple[str, str]
) -> None:
    dsn, schema = pg_schema
    source = await make_source(tmp_path / "a")
    async with SessionStore.open(source) as store:
        await store.patch("agent:main:nul\x00key", session_id=PLAIN)
        await store.patch("agent:main:half\ud83d", label="x")
    async with SessionStore.open(source, read_only=True) as src, pg_store(dsn, schema) as db:
        report = await copy_sessions(src, db)
        stored = await db.backend.keys()
    failed = {s.session_key: type(s.error) for s in report.failed}
    assert failed == {
        "agent:main:nul\x00key": InvalidSessionEntryError,
        "agent:main:half\ud83d": InvalidSessionEntryError,
    }
    assert len(stored) == 5
    assert outcomes(report)["agent:main:main"] == "copied"
