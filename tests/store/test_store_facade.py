"""SessionStore: listing order, patch/update_entry merge, archive/pin, reset and delete archives, open()."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
from pathlib import Path

import pytest
from msgspec import UNSET
from tests._helpers import TickingClock

from sessionkeeper.exceptions import ConfigError, SessionNotFoundError
from sessionkeeper.store import (
    InMemoryStoreBackend,
    JsonFileStoreBackend,
    SessionEntry,
    SessionStore,
    SqliteStoreBackend,
    resolve_store_location,
)


pytestmark = pytest.mark.anyio

T0 = 1_790_000_000_000


def _ids():
    counter = iter(range(1, 10_000))
    return lambda: f"00000000-0000-4000-8000-{next(counter):012d}"


@pytest.fixture(params=["memory", "json", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> SessionStore:
    clock = TickingClock(T0)
    if request.param == "memory":
        return SessionStore(InMemoryStoreBackend(), clock=clock, new_session_id=_ids())
    return SessionStore.open(tmp_path, backend=request.param, clock=clock, new_session_id=_ids())


async def test_patch_creates_then_merges(store: SessionStore) -> None:
    async with store:
        created = await store.patch("agent:main:main", label="Main", thinking_level="high")
        assert created.session_id == "00000000-0000-4000-8000-000000000001"
        assert created.updated_at == created.session_started_at
        updated = await store.patch("agent:main:main", {"modelProvider": "anthropic", "model": "claude"})
        assert updated.session_id == created.session_id
        assert isinstance(updated.updated_at, int)
        assert isinstance(created.updated_at, int)
        assert updated.updated_at > created.updated_at
        assert updated.session_started_at == created.session_started_at
        assert (updated.label, updated.model, updated.model_provider) == ("Main", "claude", "anthropic")
        switched = await store.patch("agent:main:main", model="gpt")
        assert switched.model_provider is UNSET
        with pytest.raises(SessionNotFoundError):
            await store.patch("agent:main:none", label="x", create=False)
        assert await store.get("agent:main:none") is None


async def test_update_entry_only_touches_existing_entries(store: SessionStore) -> None:
    async with store:
        assert await store.update_entry("missing", lambda e: {"label": "x"}) is None
        assert await store.get("missing") is None
        await store.patch("k", label="a")
        result = await store.update_entry("k", lambda e: {"compaction_count": 1, "label": UNSET})
        assert result is not None
        assert (result.compaction_count, result.label) == (1, UNSET)
        unchanged = await store.update_entry("k", lambda e: None)
        assert unchanged == result


async def test_preserve_activity_keeps_updated_at(store: SessionStore) -> None:
    async with store:
        first = await store.patch("k", label="a")
        kept = await store.patch("k", {"lastTo": "42"}, preserve_activity=True)
        assert kept.updated_at == first.updated_at
        assert kept.last_to == "42"


async def test_list_active_archived_pinned_order(store: SessionStore) -> None:
    async with store:
        for key in ["a", "b", "c", "d"]:
            await store.patch(key, label=key)
        await store.pin("a")  # oldest, but pinned
        await store.archive("c")
        active = [key for key, _ in await store.list()]
        assert active == ["a", "d", "b"]
        assert [key for key, _ in await store.list(archived=True)] == ["c"]
        assert [key for key, _ in await store.list(archived=None)] == ["a", "d", "c", "b"]
        assert [key for key, _ in await store.list(limit=1)] == ["a"]
        archived = await store.get("c")
        assert archived is not None
        assert archived.is_archived
        assert archived.archived_at != UNSET
        await store.unarchive("c")
        await store.unpin("a")
        assert [key for key, _ in await store.list()] == ["d", "c", "b", "a"]


async def test_archive_is_not_activity(store: SessionStore) -> None:
    async with store:
        before = await store.patch("k", label="a")
        after = await store.archive("k")
        assert after.updated_at == before.updated_at
        with pytest.raises(SessionNotFoundError):
            await store.pin("missing")


async def test_list_puts_entries_without_updated_at_last() -> None:
    backend = InMemoryStoreBackend(
        {"old": SessionEntry(session_id="x"), "new": SessionEntry(session_id="y", updated_at=5)}
    )
    store = SessionStore(backend)
    assert [k for k, _ in await store.list()] == ["new", "old"]


async def test_require_raises_for_missing_keys() -> None:
    store = SessionStore.in_memory()
    with pytest.raises(SessionNotFoundError, match="nope"):
        await store.require("nope")


async def test_reset_rotates_the_session_and_archives_the_transcript(tmp_path: Path) -> None:
    clock = TickingClock(T0)
    async with SessionStore.open(tmp_path, clock=clock, new_session_id=_ids()) as store:
        entry = await store.patch(
            "agent:main:main",
            label="Main",
            thinking_level="high",
            total_tokens=5000,
            compaction_count=4,
            model="claude",
            model_provider="anthropic",
        )
        old_id = entry.session_id
        assert isinstance(old_id, str)
        old_file = tmp_path / f"{old_id}.jsonl"
        old_file.write_text('{"type":"session","version":3,"id":"x"}\n')
        new = await store.reset("agent:main:main", cwd="/work")
        assert new.session_id == "00000000-0000-4000-8000-000000000002"
        assert (new.label, new.thinking_level) == ("Main", "high")
        assert (new.total_tokens, new.total_tokens_fresh, new.compaction_count) == (0, True, 0)
        assert new.model is UNSET
        assert new.session_started_at == new.updated_at
        archives = [name for name in os.listdir(tmp_path) if ".jsonl.reset." in name]
        assert len(archives) == 1
        assert re.fullmatch(
            rf"{old_id}\.jsonl\.reset\.\d{{4}}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{{3}}Z", archives[0]
        )
        assert not old_file.exists()
        header_file = tmp_path / f"{new.session_id}.jsonl"
        header = json.loads(header_file.read_text())
        assert header["type"] == "session"
        assert header["version"] == 3
        assert header["id"] == new.session_id
        assert header["cwd"] == "/work"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", header["timestamp"])
        assert stat.S_IMODE(header_file.stat().st_mode) == 0o600
        with pytest.raises(SessionNotFoundError):
            await store.reset("agent:main:none")


async def test_reset_rewrites_an_explicit_session_file(tmp_path: Path) -> None:
    async with SessionStore.open(tmp_path, new_session_id=_ids()) as store:
        await store.patch("k", session_id="abc", session_file=str(tmp_path / "abc-topic-7.jsonl"))
        new = await store.reset("k")
        assert new.session_file == str(tmp_path / f"{new.session_id}-topic-7.jsonl")


async def test_delete_archives_unshared_transcripts_only(tmp_path: Path) -> None:
    async with SessionStore.open(tmp_path) as store:
        await store.patch("a", session_id="shared")
        await store.patch("b", session_id="shared")
        await store.patch("c", session_id="solo")
        (tmp_path / "shared.jsonl").write_text("{}\n")
        (tmp_path / "solo.jsonl").write_text("{}\n")
        assert await store.delete("a") is True
        assert (tmp_path / "shared.jsonl").exists()  # still used by "b"
        assert await store.delete("c") is True
        assert not (tmp_path / "solo.jsonl").exists()
        assert any(name.startswith("solo.jsonl.deleted.") for name in os.listdir(tmp_path))
        assert await store.delete("c") is False
        assert [k for k, _ in await store.list()] == ["b"]


async def test_transcript_file_refuses_paths_outside_the_directory(tmp_path: Path) -> None:
    from sessionkeeper.exceptions import UnsafePathError

    store = SessionStore(InMemoryStoreBackend(), sessions_dir=tmp_path)
    assert store.transcript_file(SessionEntry(session_id="abc")) == tmp_path / "abc.jsonl"
    with pytest.raises(UnsafePathError):
        store.transcript_file(SessionEntry(session_id="abc", session_file="/etc/passwd"))
    assert SessionStore.in_memory().transcript_file(SessionEntry(session_id="abc")) is None


def test_open_picks_the_backend_whose_file_exists(tmp_path: Path) -> None:
    assert resolve_store_location(tmp_path) == (tmp_path / "sessions.json", "json")
    sqlite3.connect(tmp_path / "sessions.sqlite").close()
    assert resolve_store_location(tmp_path) == (tmp_path / "sessions.sqlite", "sqlite")
    assert isinstance(SessionStore.open(tmp_path).backend, SqliteStoreBackend)
    (tmp_path / "sessions.json").write_text("{}")
    with pytest.raises(ConfigError, match="both"):
        resolve_store_location(tmp_path)
    assert resolve_store_location(tmp_path, "json")[1] == "json"
    assert isinstance(SessionStore.open(tmp_path / "sessions.json").backend, JsonFileStoreBackend)
    with pytest.raises(ConfigError):
        resolve_store_location(tmp_path / "sessions.json", "sqlite")
    with pytest.raises(ConfigError, match="unknown backend"):
        resolve_store_location(tmp_path, "postgres")  # type: ignore[arg-type]


async def test_open_creates_nothing_until_the_first_write(tmp_path: Path) -> None:
    target = tmp_path / "agents" / "main" / "sessions"
    async with SessionStore.open(target) as store:
        assert await store.list() == []
        assert not target.exists()
        await store.patch("k", label="x")
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    assert sorted(os.listdir(target)) == ["sessions.json", "sessions.json.lock"]


async def test_archiving_clears_the_pin(store: SessionStore) -> None:
    async with store:
        await store.patch("k", label="x")
        await store.pin("k")
        archived = await store.archive("k")
        assert archived.is_archived
        assert not archived.is_pinned


def test_codex_thread_state_is_in_seconds() -> None:
    from sessionkeeper.store import codex_seconds_to_ms, codex_thread_state

    entry = SessionEntry(session_id="s", updated_at=1, archived_at=1_790_000_000_999)
    assert codex_thread_state(entry) == {
        "archived": True,
        "archivedAt": 1_790_000_000,
        "pinned": False,
        "pinnedAt": None,
    }
    assert codex_seconds_to_ms(1_790_000_000.5) == 1_790_000_000_500
    assert codex_seconds_to_ms(None) is None
