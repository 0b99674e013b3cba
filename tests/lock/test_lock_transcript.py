"""The write lock around TranscriptManager's writes, and ``run_locked`` (issue 7; OpenClaw spec §3)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import anyio
import pytest
from tests._helpers import user

from sessionkeeper._lockfile import iso_ms
from sessionkeeper.exceptions import LockNotHeldError, SessionBusyError
from sessionkeeper.transcript import TranscriptManager
from sessionkeeper.transcript.lock._lock import SessionWriteLock
from sessionkeeper.transcript.lock._run import run_locked
from sessionkeeper.transcript.lock._settings import WriteLockSettings


pytestmark = pytest.mark.anyio

SETTINGS = WriteLockSettings(acquire_timeout_ms=300, watchdog_interval_ms=0)


async def manager_for(path: Path) -> TranscriptManager:
    try:
        manager = await TranscriptManager.create(path, cwd="/w", session_id="s1")
    except FileExistsError:
        manager = await TranscriptManager.open(path)
    manager.write_lock_settings = SETTINGS
    return manager


async def test_each_append_takes_and_releases_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    manager = await manager_for(path)
    await manager.append_message(user("hello", ts=1_780_000_000_000))
    assert not (tmp_path / "s.jsonl.lock").exists()
    assert len(path.read_text().splitlines()) == 2


async def test_append_waits_for_a_foreign_live_lock_and_writes_nothing(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    path = tmp_path / "s.jsonl"
    manager = await manager_for(path)
    before = path.read_bytes()
    lock = tmp_path / "s.jsonl.lock"
    lock.write_text(json.dumps({"pid": sleeper.pid, "createdAt": iso_ms(_now()), "maxHoldMs": 300_000}))
    with pytest.raises(SessionBusyError):
        await manager.append_message(user("blocked", ts=1_780_000_000_000))
    assert path.read_bytes() == before
    assert manager.leaf_id is None
    lock.unlink()
    entry = await manager.append_message(user("now", ts=1_780_000_000_000))
    assert manager.leaf_id == entry.id


async def test_hold_write_lock_keeps_the_file_for_a_run(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    manager = await manager_for(path)
    other = await manager_for(path)
    async with manager.hold_write_lock() as lock:
        assert lock.held
        for i in range(3):
            await manager.append_message(user(f"turn {i}", ts=1_780_000_000_000))
            assert (tmp_path / "s.jsonl.lock").exists()
        with pytest.raises(SessionBusyError):
            await other.append_message(user("concurrent", ts=1_780_000_000_000))
    assert not (tmp_path / "s.jsonl.lock").exists()
    await other.append_message(user("after", ts=1_780_000_000_000))
    assert len(path.read_text().splitlines()) == 5


async def test_append_after_the_watchdog_released_the_run_lock_raises(tmp_path: Path, clock) -> None:
    path = tmp_path / "s.jsonl"
    manager = await TranscriptManager.create(path, cwd="/w", session_id="s1", clock=clock)
    manager.write_lock_settings = WriteLockSettings(max_hold_ms=1000, watchdog_interval_ms=0)
    async with manager.hold_write_lock():
        await manager.append_message(user("in time", ts=1_780_000_000_000))
        clock.advance(ms=1001)
        assert SessionWriteLock.run_watchdog() == 1
        before = path.read_bytes()
        with pytest.raises(LockNotHeldError) as info:
            await manager.append_message(user("too late", ts=1_780_000_000_000))
        assert info.value.reason == "max-hold-exceeded"
        assert path.read_bytes() == before


async def test_append_after_the_lock_file_was_taken_over_raises(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    manager = await manager_for(path)
    lock_file = tmp_path / "s.jsonl.lock"
    async with manager.hold_write_lock() as lock:
        await manager.append_message(user("mine", ts=1_780_000_000_000))
        lock_file.unlink()  # e.g. OpenClaw's non-openclaw-owner takeover
        lock_file.write_text('{"pid": 1, "createdAt": "2026-01-01T00:00:00.000Z"}')
        before = path.read_bytes()
        with pytest.raises(LockNotHeldError) as info:
            await manager.append_message(user("would interleave", ts=1_780_000_000_000))
        assert info.value.reason == "lost"
        assert lock.lost_reason == "lost"
        assert path.read_bytes() == before
    assert (
        lock_file.read_text() == '{"pid": 1, "createdAt": "2026-01-01T00:00:00.000Z"}'
    )  # not ours to remove


async def test_locking_can_be_turned_off(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    path = tmp_path / "s.jsonl"
    manager = await manager_for(path)
    (tmp_path / "s.jsonl.lock").write_text(json.dumps({"pid": sleeper.pid, "createdAt": iso_ms(_now())}))
    manager.locking = False
    await manager.append_message(user("single writer", ts=1_780_000_000_000))
    assert len(path.read_text().splitlines()) == 2


async def test_run_locked_removes_the_lock_when_work_fails(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"

    def work() -> int:
        assert (tmp_path / "s.jsonl.lock").exists()
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        await run_locked(path, work, settings=SETTINGS)
    assert not (tmp_path / "s.jsonl.lock").exists()
    assert await run_locked(path, lambda: 42, settings=SETTINGS) == 42


async def test_run_locked_waits_for_an_in_process_holder(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    order: list[str] = []
    held = await SessionWriteLock.acquire(path, settings=SETTINGS)

    async def locked_work() -> None:
        order.append(
            await run_locked(path, lambda: "work", settings=WriteLockSettings(watchdog_interval_ms=0))
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(locked_work)
        await anyio.sleep(0.02)
        order.append("release")
        await held.release()
    assert order == ["release", "work"]


def _now() -> int:
    return time.time_ns() // 1_000_000
