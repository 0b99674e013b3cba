"""
Symbolic links at write paths are refused, never followed or replaced (issue 15 item 7).

Before the fix a dangling link at ``sessions.json.lock`` or ``sessions.sqlite`` made the library create
the link's target outside the sessions directory, a transcript that was a link was appended through, and
a linked ``sessions.json`` was silently replaced by a regular file on the first write.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from tests._helpers import run_cli

from sessionkeeper._fs import atomic_write_bytes
from sessionkeeper.exceptions import SymlinkRefusedError, UnsafePathError
from sessionkeeper.store import SessionStore
from sessionkeeper.transcript import TranscriptManager, UserMessage


pytestmark = pytest.mark.anyio
KEY = "agent:main:direct:bob"


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    sessions = tmp_path / "agents" / "main" / "sessions"
    outside = tmp_path / "outside"
    sessions.mkdir(parents=True)
    outside.mkdir()
    return sessions, outside


async def test_dangling_link_at_the_store_lock_is_refused(tmp_path: Path) -> None:
    sessions, outside = _dirs(tmp_path)
    (sessions / "sessions.json").write_text("{}")
    (sessions / "sessions.json.lock").symlink_to(outside / "planted.lock")
    async with SessionStore.open(sessions, backend="json") as store:
        with pytest.raises(SymlinkRefusedError) as caught:
            await store.patch(KEY, {"sessionId": "s1"})
    assert isinstance(caught.value, UnsafePathError)
    assert caught.value.path == sessions / "sessions.json.lock"
    assert list(outside.iterdir()) == []
    assert (sessions / "sessions.json").read_text() == "{}"


async def test_dangling_link_at_the_sqlite_store_is_refused(tmp_path: Path) -> None:
    sessions, outside = _dirs(tmp_path)
    (sessions / "sessions.sqlite").symlink_to(outside / "planted.sqlite")
    with pytest.raises(SymlinkRefusedError):
        async with SessionStore.open(sessions, backend="sqlite") as store:
            await store.patch(KEY, {"sessionId": "s1"})
    assert list(outside.iterdir()) == []
    assert sorted(os.listdir(sessions)) == ["sessions.sqlite"]


async def test_linked_sessions_json_is_never_replaced_by_a_regular_file(tmp_path: Path) -> None:
    sessions, outside = _dirs(tmp_path)
    real = outside / "real-sessions.json"
    real.write_text(json.dumps({"agent:main:main": {"sessionId": "m1", "updatedAt": 1}}))
    (sessions / "sessions.json").symlink_to(real)
    async with SessionStore.open(sessions, backend="json") as store:
        assert (await store.get("agent:main:main")) is not None  # reads follow the link
        with pytest.raises(SymlinkRefusedError):
            await store.patch(KEY, {"sessionId": "s1"})
    assert (sessions / "sessions.json").is_symlink()
    assert json.loads(real.read_text()).keys() == {"agent:main:main"}
    assert sorted(p.name for p in sessions.iterdir() if ".tmp" in p.name) == []


def test_atomic_write_refuses_a_link_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    with pytest.raises(SymlinkRefusedError):
        atomic_write_bytes(link, b"new", fsync=False)
    assert link.is_symlink()
    assert target.read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["link.json", "real.json"]


async def test_appends_never_go_through_a_transcript_link(tmp_path: Path) -> None:
    sessions, outside = _dirs(tmp_path)
    real = outside / "elsewhere.jsonl"
    await (await TranscriptManager.create(real, cwd="/")).append_message(
        UserMessage(content="a", timestamp=1)
    )
    before = real.read_bytes()
    link = sessions / "s1.jsonl"
    link.symlink_to(real)
    manager = await TranscriptManager.open(link)  # reading through the link is fine
    assert manager.leaf_id is not None
    with pytest.raises(SymlinkRefusedError):
        await manager.append_message(UserMessage(content="through the link", timestamp=2))
    assert real.read_bytes() == before
    assert link.is_symlink()


async def test_reset_refuses_to_create_a_transcript_through_a_dangling_link(tmp_path: Path) -> None:
    sessions, outside = _dirs(tmp_path)
    (sessions / "sessions.json").write_text(json.dumps({KEY: {"sessionId": "old", "updatedAt": 1}}))
    async with SessionStore.open(sessions, backend="json") as store:
        store._new_session_id = lambda: "fresh"  # type: ignore[method-assign]
        # a link leaving the directory is refused as unsafe already; a dangling one inside it too now
        (sessions / "fresh.jsonl").symlink_to(outside / "planted.jsonl")
        with pytest.raises(UnsafePathError):
            await store.reset(KEY)
        (sessions / "fresh.jsonl").unlink()
        (sessions / "fresh.jsonl").symlink_to(sessions / "planted.jsonl")
        with pytest.raises(SymlinkRefusedError):
            await store.reset(KEY)
    assert list(outside.iterdir()) == []
    assert not (sessions / "planted.jsonl").exists()


def test_symlink_error_is_bad_input_for_the_cli(tmp_path: Path) -> None:
    sessions, outside = _dirs(tmp_path)
    (sessions / "sessions.json").write_text("{}")
    (sessions / "sessions.json.lock").symlink_to(outside / "planted.lock")
    result = run_cli("sessions", "cleanup", "--store", str(sessions), "--enforce")
    assert result.exit_code == 2, result.output
    assert "symbolic link" in result.output
    assert list(outside.iterdir()) == []


def test_doctor_reports_links_at_write_paths_and_touches_nothing(tmp_path: Path) -> None:
    sessions, outside = _dirs(tmp_path)
    (sessions / "sessions.json").write_text("{}")
    (sessions / "sessions.json.lock").symlink_to(outside / "planted.lock")
    real = outside / "real.jsonl"
    real.write_text(
        '{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}\n'
    )
    (sessions / "s1.jsonl").symlink_to(real)
    (sessions / "notes.txt").symlink_to(real)  # not a name sessionkeeper writes: not reported
    result = run_cli("doctor", str(sessions), "--json")
    findings = [f for f in json.loads(result.stdout)["directoryFindings"] if f["check"] == "symlink"]
    assert [(f["ids"], "dangling" in f["message"]) for f in findings] == [
        (["s1.jsonl"], False),
        (["sessions.json.lock"], True),
    ]
    assert (sessions / "s1.jsonl").is_symlink() and (sessions / "sessions.json.lock").is_symlink()
    assert sorted(p.name for p in outside.iterdir()) == ["real.jsonl"]


def test_doctor_fix_skips_a_linked_transcript_and_fixes_the_others(tmp_path: Path) -> None:
    sessions, outside = _dirs(tmp_path)
    header = '{"type":"session","version":3,"id":"%s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}\n'
    real = outside / "real.jsonl"
    real.write_text(header % "s1" + '{"type":"mess')
    (sessions / "s1.jsonl").symlink_to(real)
    (sessions / "s2.jsonl").write_text(header % "s2" + '{"type":"mess')
    result = run_cli("doctor", str(sessions), "--fix", "--json")
    assert result.exit_code == 1, result.output
    files = {Path(f["path"]).name: f for f in json.loads(result.stdout)["files"]}
    assert files["s2.jsonl"]["status"] == "fixed"
    assert any(f["check"] == "symlink" for f in files["s1.jsonl"]["findings"])
    assert real.read_text() == header % "s1" + '{"type":"mess'  # the link's target is untouched
    assert (sessions / "s1.jsonl").is_symlink()
    assert not [p for p in sessions.iterdir() if p.name.startswith("s1.jsonl.")]  # no backup either
