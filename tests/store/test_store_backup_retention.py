"""
Maintenance sweeps old transcript backups under ``pruneAfter`` (issue 15, operational).

Torn-tail repairs and migrations leave ``<name>.jsonl[.<label>].bak.<stamp>`` files; before the fix they
stayed forever (19 repairs of one transcript made 470 MB). Store backups (``sessions.json.bak.*``) stay.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessionkeeper._fs import backup_bytes, iso_stamp
from sessionkeeper.store.maintenance._artifacts import is_transcript_backup_name
from sessionkeeper.store.maintenance._run import run_maintenance
from sessionkeeper.store.maintenance._settings import MaintenanceSettings


NOW = 1_767_571_200_000  # 2026-01-05T00:00:00Z
DAY = 86_400_000
pytestmark = pytest.mark.anyio


def _directory(tmp_path: Path) -> Path:
    directory = tmp_path / "sessions"
    directory.mkdir()
    (directory / "sessions.json").write_text(
        json.dumps({"agent:main:main": {"sessionId": "s1", "updatedAt": NOW}})
    )
    (directory / "s1.jsonl").write_text(
        '{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00Z"}\n'
    )
    return directory


async def test_old_transcript_backups_are_swept_after_prune_after(tmp_path: Path) -> None:
    directory = _directory(tmp_path)
    old = NOW - 31 * DAY
    recent = NOW - 2 * DAY
    old_torn = backup_bytes(directory / "s1.jsonl", b'{"type":"mess', label="torn-120", now_ms=old)
    recent_torn = backup_bytes(directory / "s1.jsonl", b'{"type":"mess', label="torn-300", now_ms=recent)
    old_full = directory / f"s1.jsonl.bak.{iso_stamp(old)}"
    old_full.write_text("whole file before a migration\n")
    old_store = directory / f"sessions.json.bak.{iso_stamp(old)}"
    old_store.write_text("{}")
    settings = MaintenanceSettings(prune_after_ms=30 * DAY)

    dry = await run_maintenance(directory, settings=settings, mode="enforce", now_ms=NOW, dry_run=True)
    planned = {(a.name, a.reason) for a in dry.file_actions}
    assert planned == {(old_torn.name, "backup-retention"), (old_full.name, "backup-retention")}
    assert old_torn.exists()  # a dry run changes nothing

    await run_maintenance(directory, settings=settings, mode="enforce", now_ms=NOW)
    names = {p.name for p in directory.iterdir()}
    assert old_torn.name not in names
    assert old_full.name not in names
    assert {recent_torn.name, old_store.name, "s1.jsonl", "sessions.json"} <= names


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("s1.jsonl.bak.2026-01-01T00-00-00-000Z", True),
        ("s1.jsonl.torn-4096.bak.2026-01-01T00-00-00-000Z", True),
        ("s1.jsonl.torn-4096.bak.2026-01-01T00-00-00-000Z.1", True),  # a second backup of that ms
        ("s1.jsonl.bak.2026-01-01T00-00-00-000Z.12", True),
        ("sessions.json.bak.2026-01-01T00-00-00-000Z.1", False),
        ("s1.jsonl.bak.notastamp", False),
        ("sessions.json.bak.2026-01-01T00-00-00-000Z", False),
        ("s1.jsonl.reset.2026-01-01T00-00-00.000Z", False),
        ("s1.jsonl", False),
    ],
)
def test_transcript_backup_names(name: str, expected: bool) -> None:
    assert is_transcript_backup_name(name) is expected


def test_backup_bytes_keeps_exactly_the_removed_bytes(tmp_path: Path) -> None:
    target = tmp_path / "s.jsonl"
    target.write_bytes(b"x" * 10_000)
    first = backup_bytes(target, b'{"torn', label="torn-9994", now_ms=NOW)
    second = backup_bytes(target, b'{"other', label="torn-9994", now_ms=NOW)
    assert first.read_bytes() == b'{"torn'
    assert second.read_bytes() == b'{"other'  # a second backup never overwrites the first
    assert first != second
    assert {first.stat().st_mode & 0o777, second.stat().st_mode & 0o777} == {0o600}
    assert target.read_bytes() == b"x" * 10_000
