"""Stale session write locks are reclaimed, live ones never (field report B22, its expected values)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import anyio
import pytest

from sessionkeeper._lockfile import is_pid_alive, iso_ms, process_start_time
from sessionkeeper.exceptions import LockNotHeldError, SessionBusyError, StaleLockError
from sessionkeeper.transcript.lock._lock import SessionWriteLock
from sessionkeeper.transcript.lock._settings import WriteLockSettings


pytestmark = pytest.mark.anyio

# Input of B22: acquire_timeout_ms=2000, stale_ms=1800000.
B22 = WriteLockSettings(acquire_timeout_ms=2000, stale_ms=1_800_000, watchdog_interval_ms=0)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def b22_lock(transcript: Path, pid: int, *, starttime: int = 123, age_ms: int = 120_000) -> Path:
    """``{"pid":<pid>,"createdAt":<now-2min>,"starttime":123,"maxHoldMs":300000}`` (numeric createdAt)."""
    lock = transcript.with_name(transcript.name + ".lock")
    payload = {"pid": pid, "createdAt": now_ms() - age_ms, "starttime": starttime, "maxHoldMs": 300_000}
    lock.write_text(json.dumps(payload))
    return lock


async def test_1_dead_holder_is_reclaimed_well_within_the_timeout(tmp_path: Path) -> None:
    transcript = tmp_path / "sid.jsonl"
    pid = 999_999
    if is_pid_alive(pid):  # pragma: no cover - extremely unlikely
        pytest.skip("pid 999999 happens to be alive here")
    b22_lock(transcript, pid)
    started = time.monotonic()
    async with SessionWriteLock.acquire(transcript, settings=B22) as lock:
        assert lock.owner.pid == os.getpid()
    assert time.monotonic() - started < 1.0  # well within 2 s: no wait for stale_ms


@pytest.mark.skipif(process_start_time(os.getpid()) is None, reason="no /proc start times on this platform")
async def test_2_recycled_pid_is_reclaimed(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    transcript = tmp_path / "sid.jsonl"
    real = process_start_time(sleeper.pid)
    assert real is not None and real != 123
    b22_lock(transcript, sleeper.pid, starttime=123)
    async with SessionWriteLock.acquire(transcript, settings=B22) as lock:
        assert lock.owner.pid == os.getpid()


async def test_3_live_holder_times_out_and_lock_file_is_untouched(tmp_path: Path, holder) -> None:
    transcript = tmp_path / "sid.jsonl"
    child = holder(transcript)
    lock_file = tmp_path / "sid.jsonl.lock"
    before = lock_file.read_bytes(), lock_file.stat().st_ino, lock_file.stat().st_mtime_ns
    started = time.monotonic()
    with pytest.raises(SessionBusyError) as info:
        await SessionWriteLock.acquire(transcript, settings=B22)
    elapsed = time.monotonic() - started
    assert 2.0 <= elapsed < 5.0  # "after about acquire_timeout_ms" (slack for loaded CI machines)
    assert info.value.owner_pid == child.pid
    assert info.value.waited_ms >= 2000
    assert (lock_file.read_bytes(), lock_file.stat().st_ino, lock_file.stat().st_mtime_ns) == before


async def test_4_release_removes_the_file_twice_safely_and_on_exceptions(tmp_path: Path) -> None:
    transcript = tmp_path / "sid.jsonl"
    lock_file = tmp_path / "sid.jsonl.lock"
    lock = await SessionWriteLock.acquire(transcript, settings=B22)
    assert lock_file.exists()
    await lock.release()
    assert not lock_file.exists()
    await lock.release()
    assert not lock_file.exists()
    with pytest.raises(ValueError, match="mid-run failure"):
        async with SessionWriteLock.acquire(transcript, settings=B22):
            raise ValueError("mid-run failure")
    assert not lock_file.exists()


async def test_5_reacquire_after_dispose_raises_and_creates_nothing(tmp_path: Path) -> None:
    transcript = tmp_path / "sid.jsonl"
    lock_file = tmp_path / "sid.jsonl.lock"
    handle = await SessionWriteLock.acquire(transcript, settings=B22)
    await handle.dispose()
    assert not lock_file.exists()
    with pytest.raises(LockNotHeldError):
        await handle.reacquire()
    assert not lock_file.exists()


async def test_5b_dispose_during_a_pending_reacquire_gives_the_lock_back(tmp_path: Path) -> None:
    transcript = tmp_path / "sid.jsonl"
    lock_file = tmp_path / "sid.jsonl.lock"
    handle = await SessionWriteLock.acquire(transcript, settings=B22)
    await handle.release()
    blocker = await SessionWriteLock.acquire(transcript, settings=B22)
    errors: list[BaseException] = []

    async def reacquire() -> None:
        try:
            await handle.reacquire()
        except LockNotHeldError as err:
            errors.append(err)

    async with anyio.create_task_group() as tg:
        tg.start_soon(reacquire)
        await anyio.sleep(0.02)
        await handle.dispose()  # the run is torn down while the re-acquire waits
        await blocker.release()
    assert len(errors) == 1
    assert not lock_file.exists()


async def test_6_stale_removal_is_remove_if_unchanged(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    from sessionkeeper._lockfile import read_lock_snapshot, remove_if_unchanged

    transcript = tmp_path / "sid.jsonl"
    lock_file = b22_lock(transcript, 999_999)
    observed = read_lock_snapshot(lock_file)
    assert observed is not None
    fresh = (
        json.dumps({"pid": sleeper.pid, "createdAt": iso_ms(now_ms()), "maxHoldMs": 300_000}, indent=2) + "\n"
    )
    lock_file.write_text(fresh)  # content changes between inspecting and deleting
    assert not remove_if_unchanged(lock_file, observed)
    assert lock_file.read_text() == fresh


async def test_7_live_holder_past_its_max_hold_is_reported_not_taken(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    transcript = tmp_path / "sid.jsonl"
    start = process_start_time(sleeper.pid)
    lock_file = b22_lock(
        transcript, sleeper.pid, starttime=start if start is not None else 123, age_ms=600_000
    )
    before = lock_file.read_bytes()
    with pytest.raises(StaleLockError) as info:
        await SessionWriteLock.acquire(transcript, settings=B22)
    assert info.value.stale_reasons == ("hold-exceeded",)
    assert info.value.owner_pid == sleeper.pid
    assert lock_file.read_bytes() == before
    assert sleeper.poll() is None
