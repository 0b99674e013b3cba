"""
A refused ``sessionFile`` never blocks a reset, and a reset is atomic (issue 15 item 1, deviation F1).

Before the fix ``reset()`` of an entry whose ``sessionFile`` the store refuses raised ``UnsafePathError``
until someone edited the value (the session was stuck), and a link planted at the new transcript's name
made ``reset()`` raise after the store had already moved the entry to the new session id.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from msgspec import UNSET

from sessionkeeper.exceptions import UnsafePathError
from sessionkeeper.store import SessionEntry, SessionStore, session_entry_from_dict
from sessionkeeper.testing import FakeClock


NOW = 1_767_571_200_000  # 2026-01-05T00:00:00Z
MAIN = "agent:main:main"
OTHER = "agent:main:direct:bob"
pytestmark = pytest.mark.anyio


def _header(session_id: str) -> str:
    return json.dumps(
        {"type": "session", "version": 3, "id": session_id, "timestamp": "2026-01-01T00:00:00Z"}
    )


def _directory(tmp_path: Path, entries: dict[str, dict[str, Any]], backend: str) -> Path:
    directory = tmp_path / "agents" / "main" / "sessions"
    directory.mkdir(parents=True)
    for entry in entries.values():
        (directory / f"{entry['sessionId']}.jsonl").write_text(_header(entry["sessionId"]) + "\n")
    if backend == "json":
        (directory / "sessions.json").write_text(json.dumps(entries, indent=2))
    return directory


async def _seed(directory: Path, backend: str, entries: dict[str, dict[str, Any]]) -> None:
    if backend == "sqlite":
        async with SessionStore.open(directory, backend="sqlite", clock=FakeClock(now_ms=NOW)) as store:
            for key, fields in entries.items():
                await store.backend.put(key, _entry(fields))


def _entry(fields: dict[str, Any]) -> SessionEntry:
    return session_entry_from_dict(fields)


def _files(directory: Path) -> dict[str, bytes]:
    skip = ("sessions.",)  # the store's own files change with every write: compared through the API
    return {
        p.name: p.read_bytes() for p in directory.iterdir() if p.is_file() and not p.name.startswith(skip)
    }


@pytest.mark.parametrize("backend", ["json", "sqlite"])
@pytest.mark.parametrize(
    "bad", ["sessions.json", "main-id.jsonl", "\ud800.jsonl", "../../other/bob-id.jsonl"]
)
async def test_reset_of_a_refused_session_file_starts_fresh_and_leaves_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, bad: str, backend: str
) -> None:
    entries = {
        MAIN: {"sessionId": "main-id", "updatedAt": NOW},
        OTHER: {"sessionId": "bob-id", "updatedAt": NOW, "sessionFile": bad, "label": "Bob"},
    }
    directory = _directory(tmp_path, entries, backend)
    await _seed(directory, backend, entries)
    before = _files(directory)
    ids = iter(["new-1", "new-2"])
    clock = FakeClock(now_ms=NOW + 1000)
    async with SessionStore.open(
        directory, backend=backend, clock=clock, new_session_id=lambda: next(ids)
    ) as store:
        with caplog.at_level(logging.WARNING, logger="sessionkeeper.store"):
            fresh = await store.reset(OTHER)
        assert fresh.session_id == "new-1"
        assert fresh.session_file is UNSET and fresh.label == "Bob"
        assert store.transcript_file(fresh) == directory / "new-1.jsonl"
        assert (await store.require(OTHER)).session_id == "new-1"
        # never stuck: the next reset works as for any entry, and archives the fresh transcript
        again = await store.reset(OTHER)
        assert again.session_id == "new-2"
    assert json.loads((directory / "new-1.jsonl.reset.2026-01-05T00-00-01.000Z").read_text())["id"] == "new-1"
    assert json.loads((directory / "new-2.jsonl").read_text())["id"] == "new-2"
    # the refused file and every other file is untouched; nothing else was archived
    after = _files(directory)
    assert {name: after[name] for name in before} == before
    assert set(after) - set(before) == {"new-1.jsonl.reset.2026-01-05T00-00-01.000Z", "new-2.jsonl"}
    warnings = [r for r in caplog.records if r.name == "sessionkeeper.store" and r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].session_key == OTHER  # type: ignore[attr-defined]
    assert warnings[0].session_file == bad  # type: ignore[attr-defined]
    assert "left as it is" in warnings[0].getMessage()


async def test_delete_of_a_refused_session_file_removes_the_entry_and_reports_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    entries = {
        MAIN: {"sessionId": "main-id", "updatedAt": NOW},
        OTHER: {"sessionId": "bob-id", "updatedAt": NOW, "sessionFile": "main-id.jsonl"},
    }
    directory = _directory(tmp_path, entries, "json")
    before = _files(directory)
    async with SessionStore.open(directory, clock=FakeClock(now_ms=NOW)) as store:
        with caplog.at_level(logging.WARNING, logger="sessionkeeper.store"):
            assert await store.delete(OTHER)
        assert await store.get(OTHER) is None
    assert _files(directory) == before
    warnings = [r for r in caplog.records if r.name == "sessionkeeper.store" and r.levelno == logging.WARNING]
    assert [r.session_file for r in warnings] == ["main-id.jsonl"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", ["json", "sqlite"])
@pytest.mark.parametrize(("where", "dangling"), [("inside", True), ("outside", True), ("outside", False)])
async def test_reset_is_atomic_when_a_link_sits_at_the_new_transcript_name(
    tmp_path: Path, backend: str, where: str, dangling: bool
) -> None:
    entries = {OTHER: {"sessionId": "bob-id", "updatedAt": NOW, "label": "Bob"}}
    directory = _directory(tmp_path, entries, backend)
    await _seed(directory, backend, entries)
    outside = tmp_path / "outside"
    outside.mkdir()
    target = (directory if where == "inside" else outside) / "planted.jsonl"
    if not dangling:
        target.write_text("not ours\n")
    (directory / "new-1.jsonl").symlink_to(target)
    clock = FakeClock(now_ms=NOW + 1000)
    async with SessionStore.open(
        directory, backend=backend, clock=clock, new_session_id=lambda: "new-1"
    ) as store:
        stored_before = await store.require(OTHER)
        before = _files(directory)
        with pytest.raises(UnsafePathError):  # SymlinkRefusedError for a link that stays inside
            await store.reset(OTHER)
        # nothing changed: the entry keeps its session id, no file was created, moved or archived
        assert await store.require(OTHER) == stored_before
        assert _files(directory) == before
    assert (directory / "bob-id.jsonl").read_text() == _header("bob-id") + "\n"
    assert target.exists() is not dangling
    assert sorted(p.name for p in outside.iterdir()) == ([] if dangling else ["planted.jsonl"])
