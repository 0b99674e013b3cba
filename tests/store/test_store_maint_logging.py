"""Maintenance says what it removed: one INFO record on ``sessionkeeper.maintenance`` per run that changes
(enforce) or would change (warn mode) something; a dry run logs nothing."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from sessionkeeper.store.maintenance._run import run_maintenance
from sessionkeeper.store.maintenance._settings import MaintenanceSettings


NOW = 1_767_571_200_000  # 2026-01-05T00:00:00Z
DAY = 86_400_000
LOGGER = "sessionkeeper.maintenance"
pytestmark = pytest.mark.anyio


def _store(directory: Path) -> Path:
    directory.mkdir(parents=True)
    entries = {
        f"agent:main:direct:a{i}": {"sessionId": f"a{i}", "updatedAt": NOW - days * DAY}
        for i, days in enumerate((40, 35, 1))
    }
    (directory / "sessions.json").write_text(json.dumps(entries, indent=2))
    for entry in entries.values():
        path = directory / f"{entry['sessionId']}.jsonl"
        path.write_text(json.dumps({"type": "session", "version": 3, "id": entry["sessionId"]}) + "\n")
        os.utime(path, ns=(entry["updatedAt"] * 1_000_000,) * 2)
    return directory


@pytest.mark.parametrize(("mode", "dry_run"), [("enforce", False), ("warn", False), ("enforce", True)])
async def test_maintenance_logs_one_info_record_per_run_that_changes_something(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: str, dry_run: bool
) -> None:
    store = _store(tmp_path / "sessions")
    settings = MaintenanceSettings.from_mapping({"pruneAfter": "30d", "mode": mode})
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        report = await run_maintenance(store, settings=settings, now_ms=NOW, dry_run=dry_run)
    assert sorted(report.removed_keys) == ["agent:main:direct:a0", "agent:main:direct:a1"]
    records = [r for r in caplog.records if r.name == LOGGER]
    if dry_run:
        assert records == []
        return
    (record,) = records
    assert record.levelno == logging.INFO
    assert record.applied is (mode == "enforce")  # type: ignore[attr-defined]
    assert record.mode == mode  # type: ignore[attr-defined]
    assert sorted(record.removed_keys) == sorted(report.removed_keys)  # type: ignore[attr-defined]
    assert ("removed" if mode == "enforce" else "would remove") in record.getMessage()
