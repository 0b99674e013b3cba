"""Lock reclaim is an operator's concern: a WARNING on ``sessionkeeper.lock`` with structured ``extra``."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from sessionkeeper._lockfile import iso_ms
from sessionkeeper.transcript.lock._lock import SessionWriteLock
from sessionkeeper.transcript.lock._settings import WriteLockSettings
from sessionkeeper.transcript.lock._tools import clean_stale_lock_files


pytestmark = pytest.mark.anyio

FAST = WriteLockSettings(acquire_timeout_ms=2000, watchdog_interval_ms=0)


def _dead_lock(transcript: Path, pid: int, now_ms: int) -> None:
    payload = {"pid": pid, "createdAt": iso_ms(now_ms - 1000), "maxHoldMs": 300_000}
    transcript.with_name(transcript.name + ".lock").write_text(json.dumps(payload) + "\n")


def _reclaims(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "sessionkeeper.lock" and "stale" in r.getMessage()]


async def test_reclaiming_a_dead_owners_lock_is_a_structured_warning(
    tmp_path: Path, clock, reaped_pid: int, caplog: pytest.LogCaptureFixture
) -> None:
    transcript = tmp_path / "s.jsonl"
    _dead_lock(transcript, reaped_pid, clock.now_ms())
    with caplog.at_level(logging.WARNING, logger="sessionkeeper.lock"):
        async with SessionWriteLock.acquire(transcript, settings=FAST, clock=clock):
            pass
    (record,) = _reclaims(caplog)
    assert record.levelno == logging.WARNING
    assert record.lock_path == str(transcript) + ".lock"  # type: ignore[attr-defined]
    assert record.stale_reasons == ["dead-pid"]  # type: ignore[attr-defined]


async def test_cleaning_stale_lock_files_is_a_structured_warning(
    tmp_path: Path, clock, reaped_pid: int, caplog: pytest.LogCaptureFixture
) -> None:
    transcript = tmp_path / "s.jsonl"
    transcript.write_text("")
    _dead_lock(transcript, reaped_pid, clock.now_ms())
    with caplog.at_level(logging.WARNING, logger="sessionkeeper.lock"):
        reports = await clean_stale_lock_files(tmp_path, remove=True, clock=clock)
    assert [r.removed for r in reports] == [True]
    (record,) = _reclaims(caplog)
    assert record.lock_path == str(transcript) + ".lock"  # type: ignore[attr-defined]
    assert record.stale_reasons == ["dead-pid"]  # type: ignore[attr-defined]
