"""TranscriptManager over a TranscriptStorage (issue 12): the same transcript whatever holds its lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessionkeeper.exceptions import TranscriptFormatError, TranscriptNotFoundError
from sessionkeeper.store import SessionStore
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import (
    FileTranscriptStorage,
    MemoryTranscriptStorage,
    TranscriptManager,
    TranscriptStorage,
    UserMessage,
    WriteLockSettings,
)


pytestmark = pytest.mark.anyio

SETTINGS = WriteLockSettings(acquire_timeout_ms=2000, poll_interval_ms=5)


def _user(text: str) -> UserMessage:
    return UserMessage(content=text, timestamp=1)


def _texts(manager: TranscriptManager) -> list[object]:
    return [m.content for m in manager.build_session_context().messages]  # type: ignore[union-attr]


@pytest.fixture(params=["file", "memory"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> TranscriptStorage:
    if request.param == "file":
        return FileTranscriptStorage(tmp_path / "sessions", durability="none", settings=SETTINGS)
    return MemoryTranscriptStorage()


async def test_a_transcript_reads_back_the_same_from_any_storage(storage: TranscriptStorage) -> None:
    clock = FakeClock()
    m = await TranscriptManager.create_in(storage, cwd="/w", session_id="s-1", clock=clock)
    await m.append_messages([_user("q1"), _user("q2")])
    await m.append_label(m.get_branch()[0].id, "start")
    await m.append_session_info("  named  ")
    reopened = await TranscriptManager.open_in(storage, "s-1", clock=clock)
    assert reopened.entries() == m.entries()
    assert reopened.header == m.header
    assert reopened.labels == m.labels and reopened.session_name == "named"
    assert _texts(reopened) == ["q1", "q2"]
    assert await storage.list_sessions() == ["s-1"]
    lines, _ = await storage.read("s-1")
    assert [json.loads(line)["type"] for line in lines] == [
        "session",
        "message",
        "message",
        "label",
        "session_info",
    ]
    assert m.location == storage.location("s-1")


async def test_two_managers_on_one_storage_build_one_chain(storage: TranscriptStorage) -> None:
    a = await TranscriptManager.create_in(storage, cwd="/w", session_id="s-1")
    b = await TranscriptManager.open_in(storage, "s-1")
    first = await a.append_message(_user("a1"))
    second = await b.append_message(_user("b1"))  # b had not seen a1: it follows the tip
    assert second.parent_id == first.id
    third = await a.append_message(_user("a2"))
    assert third.parent_id == second.id
    reopened = await TranscriptManager.open_in(storage, "s-1")
    assert _texts(reopened) == ["a1", "b1", "a2"]
    assert len({e.id for e in reopened.entries()}) == 3


async def test_refresh_picks_up_another_writer(storage: TranscriptStorage) -> None:
    a = await TranscriptManager.create_in(storage, cwd="/w", session_id="s-1")
    reader = await TranscriptManager.open_in(storage, "s-1")
    await a.append_messages([_user("x"), _user("y")])
    assert await reader.refresh() == 2
    assert _texts(reader) == ["x", "y"] and reader.leaf_id == a.leaf_id
    assert await reader.refresh() == 0


async def test_a_missing_transcript_is_not_found(storage: TranscriptStorage) -> None:
    with pytest.raises(TranscriptNotFoundError):
        await TranscriptManager.open_in(storage, "nope")
    await TranscriptManager.create_in(storage, cwd="/w", session_id="s-1")
    with pytest.raises(FileExistsError):
        await TranscriptManager.create_in(storage, cwd="/w", session_id="s-1")


async def test_a_file_storage_gives_a_file_manager_with_its_settings(tmp_path: Path) -> None:
    storage = FileTranscriptStorage(tmp_path, durability="none", settings=SETTINGS)
    m = await TranscriptManager.create_in(storage, cwd="/w", session_id="abc")
    assert m.path == tmp_path / "abc.jsonl"
    assert m.write_lock_settings is SETTINGS
    async with m.hold_write_lock():
        await m.append_message(_user("held"))
    reopened = await TranscriptManager.open_in(storage, "abc")
    assert reopened.path == m.path and _texts(reopened) == ["held"]


async def test_a_memory_storage_manager_has_no_write_lock_to_hold() -> None:
    m = await TranscriptManager.create_in(MemoryTranscriptStorage(), cwd="/w")
    assert m.path is None and m.location.startswith("memory:")
    with pytest.raises(RuntimeError):
        async with m.hold_write_lock():
            pass


async def test_a_legacy_transcript_in_a_storage_is_read_but_not_appended_to() -> None:
    storage = MemoryTranscriptStorage()
    v1 = [
        b'{"type":"session","id":"old","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}',
        b'{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}',
    ]
    await storage.create("old", v1)
    m = await TranscriptManager.open_in(storage, "old")
    assert _texts(m) == ["hi"]
    with pytest.raises(TranscriptFormatError):
        await m.append_message(_user("more"))
    assert (await storage.read("old"))[0] == v1


async def test_the_stores_storage_opens_its_transcripts(tmp_path: Path) -> None:
    async with SessionStore.in_memory() as store:
        m = await TranscriptManager.create_in(store.transcript_storage(), cwd="/w", session_id="s-1")
        await m.append_message(_user("kept"))
        again = await TranscriptManager.open_in(store.transcript_storage(), "s-1")
        assert _texts(again) == ["kept"]
    async with SessionStore.open(tmp_path / "sessions") as store:
        m = await TranscriptManager.create_in(store.transcript_storage(), cwd="/w", session_id="s-2")
        assert m.path == tmp_path / "sessions" / "s-2.jsonl"
