"""SessionWriteLock: acquire, release, reclaim, report, watchdog (OpenClaw spec §3; DESIGN D8)."""

from __future__ import annotations

import json
import logging
import math
import os
import stat
import subprocess
import time
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from sessionkeeper._lockfile import process_start_time
from sessionkeeper.exceptions import LockError, LockNotHeldError, SessionBusyError, StaleLockError
from sessionkeeper.transcript.lock import _registry as _lock_registry
from sessionkeeper.transcript.lock._lock import SessionWriteLock
from sessionkeeper.transcript.lock._settings import WriteLockSettings
from sessionkeeper.transcript.lock._tools import clean_stale_lock_files, is_locked, read_lock_owner


pytestmark = pytest.mark.anyio

FAST = WriteLockSettings(acquire_timeout_ms=2000, watchdog_interval_ms=0)


def write_lock(transcript: Path, payload: dict[str, object]) -> Path:
    lock = transcript.with_name(transcript.name + ".lock")
    lock.write_text(json.dumps(payload, indent=2) + "\n")
    return lock


def iso(ms: int) -> str:
    from sessionkeeper._lockfile import iso_ms

    return iso_ms(ms)


# -- the basics ---------------------------------------------------------------------------------


async def test_acquire_writes_openclaw_lock_file_and_release_removes_it(tmp_path: Path, clock) -> None:
    transcript = tmp_path / "s.jsonl"
    lock = await SessionWriteLock.acquire(transcript, settings=FAST, clock=clock)
    lock_file = tmp_path / "s.jsonl.lock"
    assert lock.lock_path == lock_file
    assert stat.S_IMODE(lock_file.stat().st_mode) == 0o600
    payload = json.loads(lock_file.read_text())
    assert list(payload)[:3] == ["pid", "createdAt", "maxHoldMs"]
    assert payload["pid"] == os.getpid()
    assert payload["createdAt"] == iso(clock.now_ms())
    assert payload["maxHoldMs"] == 300_000
    assert payload.get("starttime") == process_start_time(os.getpid())
    assert lock_file.read_text().endswith("}\n")
    assert lock.held
    await lock.release()
    assert not lock_file.exists()
    assert not lock.held
    await lock.release()  # twice is safe
    assert not transcript.exists()  # the lock never creates the transcript


async def test_missing_directory_is_created_0700(tmp_path: Path, clock) -> None:
    transcript = tmp_path / "agents" / "main" / "sessions" / "s.jsonl"
    async with SessionWriteLock.acquire(transcript, settings=FAST, clock=clock):
        assert stat.S_IMODE(transcript.parent.stat().st_mode) == 0o700


async def test_lock_path_uses_the_real_directory(tmp_path: Path, clock) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    async with SessionWriteLock.acquire(tmp_path / "link" / "s.jsonl", settings=FAST, clock=clock) as lock:
        assert lock.lock_path == real / "s.jsonl.lock"
        assert (real / "s.jsonl.lock").exists()


async def test_context_manager_releases_on_exception(tmp_path: Path, clock) -> None:
    transcript = tmp_path / "s.jsonl"
    with pytest.raises(RuntimeError, match="boom"):
        async with SessionWriteLock.acquire(transcript, settings=FAST, clock=clock):
            raise RuntimeError("boom")
    assert not (tmp_path / "s.jsonl.lock").exists()


async def test_cancelled_holder_releases(tmp_path: Path) -> None:
    transcript = tmp_path / "s.jsonl"
    with anyio.move_on_after(0.05):
        async with SessionWriteLock.acquire(transcript, settings=FAST):
            await anyio.sleep(5)
    assert not (tmp_path / "s.jsonl.lock").exists()


async def test_ensure_held_and_dispose(tmp_path: Path, clock) -> None:
    transcript = tmp_path / "s.jsonl"
    lock = await SessionWriteLock.acquire(transcript, settings=FAST, clock=clock)
    lock.ensure_held()
    await lock.release()
    with pytest.raises(LockNotHeldError) as info:
        lock.ensure_held()
    assert info.value.reason == "released"
    await lock.reacquire()
    assert lock.held
    assert (tmp_path / "s.jsonl.lock").exists()
    await lock.reacquire()  # no-op while held
    await lock.dispose()
    assert not (tmp_path / "s.jsonl.lock").exists()
    with pytest.raises(LockNotHeldError) as info:
        await lock.reacquire()
    assert info.value.reason == "disposed"
    assert not (tmp_path / "s.jsonl.lock").exists()


# -- in-process contention ----------------------------------------------------------------------


async def test_second_acquire_in_process_waits_for_release(tmp_path: Path) -> None:
    transcript = tmp_path / "s.jsonl"
    events: list[str] = []
    first = await SessionWriteLock.acquire(transcript, settings=FAST)

    async def second() -> None:
        async with SessionWriteLock.acquire(transcript, settings=FAST):
            events.append("second")

    async with anyio.create_task_group() as tg:
        tg.start_soon(second)
        await anyio.sleep(0.05)
        events.append("release")
        await first.release()
    assert events == ["release", "second"]


async def test_in_process_waiters_are_served_fifo(tmp_path: Path, anyio_backend: str) -> None:
    transcript = tmp_path / "s.jsonl"
    order: list[int] = []
    first = await SessionWriteLock.acquire(transcript, settings=FAST)

    async def worker(i: int) -> None:
        async with SessionWriteLock.acquire(transcript, settings=FAST):
            order.append(i)

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(worker, i)
            await anyio.sleep(0.001)  # let each one queue before the next starts
        await first.release()
    assert order == list(range(20))


async def test_in_process_timeout_raises_busy_with_details(tmp_path: Path, clock) -> None:
    transcript = tmp_path / "s.jsonl"
    settings = WriteLockSettings(acquire_timeout_ms=500, watchdog_interval_ms=0)
    async with SessionWriteLock.acquire(transcript, settings=settings, clock=clock) as lock:
        clock.advance(ms=1234)
        with pytest.raises(SessionBusyError) as info:
            await SessionWriteLock.acquire(transcript, settings=settings, clock=clock)
        assert lock.held
    err = info.value
    assert err.owner_pid == os.getpid()
    assert err.owner_created_at == lock.owner.created_at_ms
    assert err.waited_ms >= 500
    assert str(err).startswith(f"session file locked (timeout 500ms): pid={os.getpid()} alive=true ageMs=")
    assert str(err).endswith(str(tmp_path / "s.jsonl.lock"))


async def test_reentrant_acquire_counts_holds(tmp_path: Path, clock) -> None:
    transcript = tmp_path / "s.jsonl"
    outer = await SessionWriteLock.acquire(transcript, settings=FAST, clock=clock)
    inner = await SessionWriteLock.acquire(transcript, settings=FAST, clock=clock, reentrant=True)
    await inner.release()
    assert (tmp_path / "s.jsonl.lock").exists()
    assert outer.held
    await outer.release()
    assert not (tmp_path / "s.jsonl.lock").exists()


async def test_reentrancy_is_off_by_default(tmp_path: Path, clock) -> None:
    transcript = tmp_path / "s.jsonl"
    settings = WriteLockSettings(acquire_timeout_ms=200, watchdog_interval_ms=0)
    async with SessionWriteLock.acquire(transcript, settings=settings, clock=clock):
        with pytest.raises(SessionBusyError):
            await SessionWriteLock.acquire(transcript, settings=settings, clock=clock)
    reentrant = WriteLockSettings(allow_reentrant=True, watchdog_interval_ms=0)
    async with SessionWriteLock.acquire(transcript, settings=reentrant, clock=clock):
        async with SessionWriteLock.acquire(transcript, settings=reentrant, clock=clock) as inner:
            assert inner.held


async def test_cancelled_waiter_leaves_the_queue(tmp_path: Path) -> None:
    transcript = tmp_path / "s.jsonl"
    got: list[str] = []
    first = await SessionWriteLock.acquire(transcript, settings=FAST)

    async def waiter(name: str, scope: anyio.CancelScope | None = None) -> None:
        with scope or anyio.CancelScope():
            async with SessionWriteLock.acquire(transcript, settings=FAST):
                got.append(name)

    doomed = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter, "cancelled", doomed)
        await anyio.sleep(0.01)
        tg.start_soon(waiter, "kept")
        await anyio.sleep(0.01)
        doomed.cancel()
        await anyio.sleep(0.01)
        await first.release()
    assert got == ["kept"]


def test_threads_with_their_own_event_loops_exclude_each_other(tmp_path: Path) -> None:
    import threading

    transcript = tmp_path / "s.jsonl"
    inside = 0
    overlaps = 0
    done = 0

    async def work() -> None:
        nonlocal inside, overlaps, done
        for _ in range(20):
            async with SessionWriteLock.acquire(transcript, settings=FAST):
                inside += 1
                if inside > 1:
                    overlaps += 1
                await anyio.lowlevel.checkpoint()
                inside -= 1
                done += 1

    threads = [threading.Thread(target=anyio.run, args=(work,)) for _ in range(3)]
    threads += [
        threading.Thread(target=anyio.run, args=(work,), kwargs={"backend": "trio"}) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert done == 100
    assert overlaps == 0
    assert not (tmp_path / "s.jsonl.lock").exists()


# -- other processes ----------------------------------------------------------------------------


async def test_live_foreign_owner_times_out_and_is_untouched(
    tmp_path: Path,
    clock,
    sleeper: subprocess.Popen[bytes],
) -> None:
    transcript = tmp_path / "s.jsonl"
    lock_file = write_lock(
        transcript,
        {"pid": sleeper.pid, "createdAt": iso(clock.now_ms() - 1000), "maxHoldMs": 300_000},
    )
    before = lock_file.read_bytes(), lock_file.stat().st_ino
    with pytest.raises(SessionBusyError) as info:
        await SessionWriteLock.acquire(transcript, settings=FAST, clock=clock)
    assert (lock_file.read_bytes(), lock_file.stat().st_ino) == before
    assert info.value.owner_pid == sleeper.pid
    assert info.value.owner_created_at == clock.now_ms() - info.value.waited_ms - 1000
    assert 2000 <= info.value.waited_ms <= 2050
    assert set(clock.sleeps) == {0.05}  # OpenClaw's constant 50 ms poll


async def test_dead_owner_is_reclaimed_at_once(tmp_path: Path, clock, reaped_pid: int) -> None:
    transcript = tmp_path / "s.jsonl"
    write_lock(transcript, {"pid": reaped_pid, "createdAt": iso(clock.now_ms() - 1000), "maxHoldMs": 300_000})
    async with SessionWriteLock.acquire(transcript, settings=FAST, clock=clock) as lock:
        assert lock.owner.pid == os.getpid()
    assert clock.sleeps == []


@pytest.mark.skipif(process_start_time(os.getpid()) is None, reason="no /proc start times on this platform")
async def test_recycled_pid_is_reclaimed(tmp_path: Path, clock, sleeper: subprocess.Popen[bytes]) -> None:
    transcript = tmp_path / "s.jsonl"
    real = process_start_time(sleeper.pid)
    assert real is not None
    write_lock(
        transcript,
        {
            "pid": sleeper.pid,
            "createdAt": iso(clock.now_ms() - 1000),
            "maxHoldMs": 300_000,
            "starttime": real + 1,
        },
    )
    async with SessionWriteLock.acquire(transcript, settings=FAST, clock=clock) as lock:
        assert lock.owner.pid == os.getpid()
    assert sleeper.poll() is None


async def test_orphan_of_this_process_is_reclaimed(tmp_path: Path, clock) -> None:
    transcript = tmp_path / "s.jsonl"
    payload: dict[str, object] = {"pid": os.getpid(), "createdAt": iso(clock.now_ms()), "maxHoldMs": 300_000}
    start = process_start_time(os.getpid())
    if start is not None:
        payload["starttime"] = start
    write_lock(transcript, payload)
    async with SessionWriteLock.acquire(transcript, settings=FAST, clock=clock):
        pass
    assert clock.sleeps == []


@pytest.mark.parametrize(
    ("age_ms", "max_hold", "reasons"),
    [
        (1_800_001, None, ("too-old",)),
        (300_001, 300_000, ("hold-exceeded",)),
        (1_800_001, 300_000, ("too-old", "hold-exceeded")),
    ],
)
async def test_live_owner_past_its_time_is_reported_never_evicted(  # noqa: PLR0917
    tmp_path: Path,
    clock,
    sleeper: subprocess.Popen[bytes],
    age_ms: int,
    max_hold: int | None,
    reasons: tuple[str, ...],
) -> None:
    transcript = tmp_path / "s.jsonl"
    payload: dict[str, object] = {"pid": sleeper.pid, "createdAt": iso(clock.now_ms() - age_ms)}
    if max_hold is not None:
        payload["maxHoldMs"] = max_hold
    lock_file = write_lock(transcript, payload)
    before = lock_file.read_bytes()
    with pytest.raises(StaleLockError) as info:
        await SessionWriteLock.acquire(transcript, settings=FAST, clock=clock)
    assert info.value.stale_reasons == reasons
    assert isinstance(info.value, SessionBusyError)
    assert info.value.owner_pid == sleeper.pid
    assert str(info.value).startswith(f"session file lock stale ({', '.join(reasons)}): pid={sleeper.pid}")
    assert lock_file.read_bytes() == before


async def test_empty_lock_file_waits_for_grace_then_is_removed(tmp_path: Path, clock) -> None:
    transcript = tmp_path / "s.jsonl"
    clock.set_now_ms(time.time_ns() // 1_000_000)
    lock_file = tmp_path / "s.jsonl.lock"
    lock_file.write_bytes(b"")
    settings = WriteLockSettings(acquire_timeout_ms=20_000, watchdog_interval_ms=0)  # < 30 s: grace 5 s
    async with SessionWriteLock.acquire(transcript, settings=settings, clock=clock):
        pass
    waited = sum(clock.sleeps)
    assert waited == pytest.approx(5.05, abs=0.051)  # grace 5 s, then one 50 ms poll at most


async def test_lock_rewritten_between_inspection_and_removal_is_kept(
    tmp_path: Path,
    clock,
    reaped_pid: int,
    sleeper: subprocess.Popen[bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    transcript = tmp_path / "s.jsonl"
    lock_file = write_lock(
        transcript, {"pid": reaped_pid, "createdAt": iso(clock.now_ms()), "maxHoldMs": 300_000}
    )
    fresh = (
        json.dumps({"pid": sleeper.pid, "createdAt": iso(clock.now_ms()), "maxHoldMs": 300_000}, indent=2)
        + "\n"
    )
    real_decision = _lock_registry.reclaim_decision
    calls = 0

    def racing_decision(*args: object, **kwargs: object) -> str:
        nonlocal calls
        calls += 1
        verdict = real_decision(*args, **kwargs)  # type: ignore[arg-type]
        if calls == 1:  # another process takes the lock right after we inspected the dead one
            lock_file.unlink()
            lock_file.write_text(fresh)
        return verdict

    monkeypatch.setattr(_lock_registry, "reclaim_decision", racing_decision)
    with pytest.raises(SessionBusyError) as info:
        await SessionWriteLock.acquire(transcript, settings=FAST, clock=clock)
    assert lock_file.read_text() == fresh
    assert info.value.owner_pid == sleeper.pid


async def test_holder_process_blocks_then_hands_over(tmp_path: Path, holder) -> None:
    transcript = tmp_path / "s.jsonl"
    child = holder(transcript)
    settings = WriteLockSettings(acquire_timeout_ms=300, watchdog_interval_ms=0)
    with pytest.raises(SessionBusyError) as info:
        await SessionWriteLock.acquire(transcript, settings=settings)
    assert info.value.owner_pid == child.pid
    assert is_locked(transcript)
    assert child.stdin is not None
    child.stdin.write("go\n")
    child.stdin.flush()
    async with SessionWriteLock.acquire(transcript, settings=FAST) as lock:
        assert lock.owner.pid == os.getpid()


async def test_killed_holder_process_is_reclaimed(tmp_path: Path, holder) -> None:
    transcript = tmp_path / "s.jsonl"
    child = holder(transcript)
    child.kill()
    child.wait()
    assert (tmp_path / "s.jsonl.lock").exists()
    assert not is_locked(transcript)
    started = time.monotonic()
    async with SessionWriteLock.acquire(transcript, settings=FAST):
        pass
    assert time.monotonic() - started < 2.0  # reclaimed at once, not after stale_ms


# -- watchdog -----------------------------------------------------------------------------------


async def test_watchdog_releases_locks_held_past_max_hold(
    tmp_path: Path,
    clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    transcript = tmp_path / "s.jsonl"
    settings = WriteLockSettings(max_hold_ms=1000, watchdog_interval_ms=0)
    lock = await SessionWriteLock.acquire(transcript, settings=settings, clock=clock)
    clock.advance(ms=1000)
    assert SessionWriteLock.run_watchdog() == 0
    clock.advance(ms=1)
    with caplog.at_level(logging.WARNING, logger="sessionkeeper.lock"):
        assert SessionWriteLock.run_watchdog() == 1
    assert "[session-write-lock] releasing lock held for 1001ms (max=1000ms)" in caplog.text
    assert not (tmp_path / "s.jsonl.lock").exists()
    assert not lock.held
    assert lock.lost_reason == "max-hold-exceeded"
    with pytest.raises(LockNotHeldError) as info:
        lock.ensure_held()
    assert info.value.reason == "max-hold-exceeded"
    other = await SessionWriteLock.acquire(transcript, settings=settings, clock=clock)
    await lock.release()  # the old holder's release must not remove the new lock
    assert (tmp_path / "s.jsonl.lock").exists()
    assert other.held
    await other.release()


async def test_watchdog_thread_runs_on_its_interval(tmp_path: Path) -> None:
    transcript = tmp_path / "s.jsonl"
    settings = WriteLockSettings(max_hold_ms=50, watchdog_interval_ms=20)
    lock = await SessionWriteLock.acquire(transcript, settings=settings)
    for _ in range(500):
        if not lock.held and not (tmp_path / "s.jsonl.lock").exists():
            break
        await anyio.sleep(0.01)
    assert lock.lost_reason == "max-hold-exceeded"
    assert not (tmp_path / "s.jsonl.lock").exists()


async def test_watchdog_wakes_in_process_waiters(tmp_path: Path, clock) -> None:
    transcript = tmp_path / "s.jsonl"
    settings = WriteLockSettings(max_hold_ms=1000, acquire_timeout_ms=math.inf, watchdog_interval_ms=0)
    wedged = await SessionWriteLock.acquire(transcript, settings=settings, clock=clock)
    got: list[str] = []

    async def waiter() -> None:
        async with SessionWriteLock.acquire(transcript, settings=settings, clock=clock):
            got.append("in")

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.sleep(0.01)
        clock.advance(ms=5000)
        SessionWriteLock.run_watchdog()
    assert got == ["in"]
    assert not wedged.held


# -- inspectors ---------------------------------------------------------------------------------


async def test_is_locked_and_read_lock_owner(
    tmp_path: Path,
    clock,
    sleeper: subprocess.Popen[bytes],
    reaped_pid: int,
) -> None:
    clock.set_now_ms(time.time_ns() // 1_000_000)
    mine, live, old, dead, none = (tmp_path / f"{n}.jsonl" for n in ("mine", "live", "old", "dead", "none"))
    async with SessionWriteLock.acquire(mine, settings=FAST, clock=clock):
        assert is_locked(mine, clock=clock)
        owner = read_lock_owner(mine)
        assert owner is not None
        assert owner.pid == os.getpid()
    assert not is_locked(mine, clock=clock)
    write_lock(live, {"pid": sleeper.pid, "createdAt": iso(clock.now_ms())})
    write_lock(old, {"pid": sleeper.pid, "createdAt": clock.now_ms() - 10**8})  # numeric createdAt, too old
    write_lock(dead, {"pid": reaped_pid, "createdAt": iso(clock.now_ms())})
    assert is_locked(live, clock=clock)
    assert is_locked(old, clock=clock)  # a live owner counts even when too old (D8)
    assert not is_locked(dead, clock=clock)
    assert not is_locked(none, clock=clock)
    assert read_lock_owner(none) is None
    old_owner = read_lock_owner(old)
    assert old_owner is not None
    assert old_owner.created_at_ms == clock.now_ms() - 10**8


async def test_clean_stale_lock_files(
    tmp_path: Path,
    clock,
    sleeper: subprocess.Popen[bytes],
    reaped_pid: int,
) -> None:
    write_lock(tmp_path / "a.jsonl", {"pid": reaped_pid, "createdAt": iso(clock.now_ms())})
    write_lock(tmp_path / "b.jsonl", {"pid": sleeper.pid, "createdAt": iso(clock.now_ms() - 10**8)})
    (tmp_path / "notes.txt.lock").write_text("{}")
    async with SessionWriteLock.acquire(tmp_path / "c.jsonl", settings=FAST, clock=clock):
        reports = await clean_stale_lock_files(tmp_path, settings=FAST, clock=clock)
        assert (tmp_path / "c.jsonl.lock").exists()
    by_name = {r.inspection.lock_path.name: r for r in reports}
    assert sorted(by_name) == ["a.jsonl.lock", "b.jsonl.lock", "c.jsonl.lock"]
    assert by_name["a.jsonl.lock"].removed
    assert not (tmp_path / "a.jsonl.lock").exists()
    assert not by_name["b.jsonl.lock"].removable
    assert by_name["b.jsonl.lock"].inspection.stale_reasons == ("too-old",)
    assert (tmp_path / "b.jsonl.lock").exists()
    assert not by_name["c.jsonl.lock"].removable
    assert await clean_stale_lock_files(tmp_path / "missing") == []


# -- environment overrides reach acquire ----------------------------------------------------------


async def test_env_timeout_applies_when_no_settings_are_given(
    tmp_path: Path, clock, sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCLAW_SESSION_WRITE_LOCK_ACQUIRE_TIMEOUT_MS", "250")
    transcript = tmp_path / "s.jsonl"
    write_lock(transcript, {"pid": sleeper.pid, "createdAt": iso(clock.now_ms()), "maxHoldMs": 300_000})
    with pytest.raises(SessionBusyError) as info:
        await SessionWriteLock.acquire(transcript, clock=clock)
    assert 250 <= info.value.waited_ms <= 300
    assert str(info.value).startswith("session file locked (timeout 250ms)")


async def test_env_max_hold_is_written_into_the_lock_file(
    tmp_path: Path, clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENCLAW_SESSION_WRITE_LOCK_MAX_HOLD_MS", "4321")
    async with SessionWriteLock.acquire(tmp_path / "s.jsonl", clock=clock) as lock:
        assert lock.owner.max_hold_ms == 4321
        assert json.loads((tmp_path / "s.jsonl.lock").read_text())["maxHoldMs"] == 4321


async def test_per_call_timeout_overrides_settings(tmp_path: Path, clock) -> None:
    transcript = tmp_path / "s.jsonl"
    async with SessionWriteLock.acquire(transcript, settings=FAST, clock=clock):
        with pytest.raises(SessionBusyError) as info:
            await SessionWriteLock.acquire(transcript, settings=FAST, clock=clock, timeout_ms=100)
    assert 100 <= info.value.waited_ms <= 150
    with pytest.raises(LockError):
        await SessionWriteLock.acquire(transcript, settings=FAST, clock=clock, timeout_ms=0)


async def test_unusable_directory_is_a_lock_error(tmp_path: Path, clock) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    with pytest.raises(LockError) as info:
        await SessionWriteLock.acquire(blocker / "s.jsonl", settings=FAST, clock=clock)
    assert isinstance(info.value.__cause__, OSError)
