"""
Maintenance sweeps the temp files killed writes leave (issue 15, operational).

The lock's named-temp fallback and transcript rewrites write ``<name>.<pid>.<uuid>.tmp`` next to their
target; a process killed before the link or rename left the file, and before the fix no maintenance pass
ever removed it. Now every run deletes such files once older than 5 minutes (``stale-temp``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sessionkeeper._fs import temp_name
from sessionkeeper.store.maintenance._artifacts import STORE_TEMP_STALE_MS, is_write_temp_name
from sessionkeeper.store.maintenance._run import run_maintenance
from sessionkeeper.store.maintenance._settings import MaintenanceSettings


NOW = 1_767_571_200_000  # 2026-01-05T00:00:00Z
pytestmark = pytest.mark.anyio


def _file(path: Path, mtime_ms: int, text: str = "partial") -> Path:
    path.write_text(text)
    os.utime(path, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
    return path


@pytest.mark.parametrize("prune_after_ms", [30 * 86_400_000, None])
async def test_stale_write_temps_are_swept_in_every_run(tmp_path: Path, prune_after_ms: int | None) -> None:
    directory = tmp_path / "sessions"
    directory.mkdir()
    _file(
        directory / "sessions.json",
        NOW,
        json.dumps({"agent:main:main": {"sessionId": "s1", "updatedAt": NOW}}),
    )
    _file(
        directory / "s1.jsonl",
        NOW,
        '{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00Z"}\n',
    )
    stale = NOW - STORE_TEMP_STALE_MS - 1000
    fresh = NOW - 60_000
    old_lock_temp = _file(temp_name(directory / "s1.jsonl.lock"), stale)
    old_rewrite_temp = _file(temp_name(directory / "s1.jsonl"), stale)
    live_rewrite_temp = _file(temp_name(directory / "s1.jsonl"), fresh)
    # a name that only looks like a temp is not ours
    other = _file(directory / "notes.tmp", stale)
    settings = MaintenanceSettings(prune_after_ms=prune_after_ms)

    dry = await run_maintenance(directory, settings=settings, mode="enforce", now_ms=NOW, dry_run=True)
    planned = {(a.name, a.reason) for a in dry.file_actions}
    assert planned == {(old_lock_temp.name, "stale-temp"), (old_rewrite_temp.name, "stale-temp")}
    assert old_lock_temp.exists()  # a dry run changes nothing

    await run_maintenance(directory, settings=settings, mode="enforce", now_ms=NOW)
    names = {p.name for p in directory.iterdir()}
    assert not {old_lock_temp.name, old_rewrite_temp.name} & names
    assert {live_rewrite_temp.name, other.name, "s1.jsonl", "sessions.json"} <= names


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("s1.jsonl.4242.0f8e2a3c-1b2d-4e5f-8a9b-0c1d2e3f4a5b.tmp", True),
        ("s1.jsonl.lock.4242.0f8e2a3c-1b2d-4e5f-8a9b-0c1d2e3f4a5b.tmp", True),
        ("sessions.json.lock.7.0f8e2a3c-1b2d-4e5f-8a9b-0c1d2e3f4a5b.tmp", True),
        ("sessions.json.7.0f8e2a3c-1b2d-4e5f-8a9b-0c1d2e3f4a5b.tmp", False),  # the store's own temp
        ("s1.jsonl.0f8e2a3c-1b2d-4e5f-8a9b-0c1d2e3f4a5b.tmp", False),  # no pid
        ("s1.jsonl.4242.tmp", False),
        ("skills-prompts/sha256/ab/" + "a" * 64 + ".txt.7.0f8e2a3c-1b2d-4e5f-8a9b-0c1d2e3f4a5b.tmp", False),
        ("s1.jsonl", False),
    ],
)
def test_write_temp_names(name: str, expected: bool) -> None:
    assert is_write_temp_name(name) is expected
