"""
Inline appends (issue #7, "durable append of one turn"): the write runs on the event-loop thread while
writes stay within ``inline_write_budget_ms``, else in a worker thread; same bytes, same errors.

Where a write ran is observed through seams, never through timing: ``append_following`` (the plain
append) is wrapped to record the thread it ran on, ``anyio.to_thread.run_sync`` is wrapped to count
thread hops, and the gate's ``timer`` is a fake whose writes "take" what the test says.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests._helpers import user

from sessionkeeper._clock import SYSTEM_CLOCK, Clock
from sessionkeeper._lockfile import iso_ms, parse_lock_payload
from sessionkeeper.exceptions import LockNotHeldError, SessionBusyError, TranscriptNotFoundError
from sessionkeeper.records._jscompat import iso_from_ms
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import TranscriptManager, load_transcript
from sessionkeeper.transcript import _appends as manager_module
from sessionkeeper.transcript.file import _writer as writer_module
from sessionkeeper.transcript.file._io import InlineWriteGate
from sessionkeeper.transcript.lock._lock import SessionWriteLock
from sessionkeeper.transcript.lock._run import run_locked, run_locked_now
from sessionkeeper.transcript.lock._settings import WriteLockSettings


pytestmark = pytest.mark.anyio

SETTINGS = WriteLockSettings(acquire_timeout_ms=300, watchdog_interval_ms=0)
LOCK_MODES = ("held lock", "lock per append", "no lock")


class FakeTimer:
    """A perf counter for the gate: each (start, end) pair of calls spans ``duration_s``."""

    def __init__(self, duration_s: float = 0.0001) -> None:
        self.duration_s = duration_s
        self.now = 100.0
        self.calls = 0

    def __call__(self) -> float:
        self.calls += 1
        if self.calls % 2 == 0:
            self.now += self.duration_s
        return self.now


class WriteLog:
    """Records, for each plain append, whether it ran on the event-loop thread."""

    def __init__(self, loop_thread: int) -> None:
        self.loop_thread = loop_thread
        self.inline: list[bool] = []
        self.hops = 0


@pytest.fixture
def write_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], WriteLog]]:
    logs: list[WriteLog] = []
    real_append = writer_module.append_following
    real_run_sync = anyio.to_thread.run_sync

    def make() -> WriteLog:
        log = WriteLog(threading.get_ident())
        logs.append(log)
        return log

    def recording(*args: Any, **kwargs: Any) -> bool:
        if logs:  # the latest log is the current one
            logs[-1].inline.append(threading.get_ident() == logs[-1].loop_thread)
        return real_append(*args, **kwargs)

    async def counting(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if logs:
            logs[-1].hops += 1
        return await real_run_sync(func, *args, **kwargs)

    monkeypatch.setattr(writer_module, "append_following", recording)
    monkeypatch.setattr(anyio.to_thread, "run_sync", counting)
    yield make


@pytest.fixture
def live_pid() -> Iterator[int]:
    """The pid of a live process that is not ours."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc.pid
    proc.kill()
    proc.wait()


@pytest.fixture
def reaped_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def relative_to_cwd(path: Path) -> Path:
    return Path(os.path.relpath(path))


@pytest.fixture
def fixed_ids(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Deterministic entry ids (a fresh counter at each call): two files can be compared byte for byte."""

    def reset() -> None:
        counter = itertools.count()
        monkeypatch.setattr(manager_module, "_draw_entry_id", lambda taken: f"{next(counter):08x}")

    reset()
    return reset


async def new_manager(
    path: Path, *, budget: float = 1.0, clock: Clock | None = None, timer: FakeTimer | None = None
) -> TranscriptManager:
    """A new transcript whose writes "take" 0.1 ms each unless ``timer`` says otherwise."""
    manager = await TranscriptManager.create(
        path, cwd="/w", session_id="s1", clock=clock or FakeClock(), inline_write_budget_ms=budget
    )
    manager.write_lock_settings = SETTINGS
    manager._inline_gate.timer = timer if timer is not None else FakeTimer()
    # The first lock taken in a directory resolves it (realpath) from a worker thread; later lock-per-
    # append writes can then take a free lock inline.
    await run_locked(path, lambda: None, settings=SETTINGS)
    return manager


async def run_in_mode(manager: TranscriptManager, mode: str, body: Callable[[], Any]) -> None:
    manager.locking = mode != "no lock"
    if mode == "held lock":
        async with manager.hold_write_lock():
            await body()
    else:
        await body()


# --------------------------------------------------------------------------- same bytes, both ways


@pytest.mark.parametrize("mode", LOCK_MODES)
async def test_inline_and_thread_writes_give_the_same_bytes(
    tmp_path: Path, mode: str, fixed_ids: Callable[[], None], write_log: Callable[[], WriteLog]
) -> None:
    files = {}
    logs = {}
    for budget in (1.0, 0.0):
        fixed_ids()
        log = write_log()
        path = tmp_path / f"b{budget}.jsonl"
        manager = await new_manager(path, budget=budget, timer=FakeTimer())

        async def body(m: TranscriptManager = manager) -> None:
            first = await m.append_message(user("hello \ud800 lone", ts=1_780_000_000_000))
            await m.append_messages(
                [
                    user("a", ts=1_780_000_000_000),
                    user("b", ts=1_780_000_000_000),
                    user("c", ts=1_780_000_000_000),
                ]
            )
            await m.append_label(first.id, "start")
            await m.append_session_info("  name  ")
            await m.append_custom("ext", data={"k": [1, 2.5, None]})

        await run_in_mode(manager, mode, body)
        files[budget] = path.read_bytes()
        logs[budget] = log
        assert not (tmp_path / f"b{budget}.jsonl.lock").exists()
        reopened = await TranscriptManager.open(path)
        assert reopened.entries() == manager.entries()
    assert files[1.0] == files[0.0]
    assert logs[1.0].inline == [True] * 5
    assert logs[0.0].inline == [False] * 5
    assert logs[0.0].hops >= 5


async def test_lone_surrogate_entry_is_the_one_written_inline(tmp_path: Path) -> None:
    manager = await new_manager(tmp_path / "s.jsonl")
    entry = await manager.append_message(user("a\udc00b", ts=1_780_000_000_000))
    assert manager.writes_inline
    on_disk = (await TranscriptManager.open(tmp_path / "s.jsonl")).get_entry(entry.id)
    assert on_disk == entry
    assert entry.message.content == "a\ufffdb"


# --------------------------------------------------------------------------- the gate inside the manager


@pytest.mark.parametrize("mode", LOCK_MODES)
async def test_a_slow_write_sends_the_next_ones_to_a_thread_and_they_come_back(
    tmp_path: Path, mode: str, write_log: Callable[[], WriteLog]
) -> None:
    log = write_log()
    timer = FakeTimer(duration_s=0.0002)
    manager = await new_manager(tmp_path / "s.jsonl", budget=1.0, timer=timer)
    reprobe = manager._inline_gate.reprobe_after

    async def body() -> None:
        await manager.append_message(user("fast", ts=1_780_000_000_000))
        timer.duration_s = 0.005  # this write is over the 1 ms budget: it ran inline, the next ones won't
        await manager.append_message(user("slow", ts=1_780_000_000_000))
        assert not manager.writes_inline
        timer.duration_s = 0.0002
        for i in range(reprobe):
            await manager.append_message(user(f"thread {i}", ts=1_780_000_000_000))
        assert manager.writes_inline
        await manager.append_message(user("probe", ts=1_780_000_000_000))

    await run_in_mode(manager, mode, body)
    assert log.inline == [True, True, *([False] * reprobe), True]
    assert len(load_transcript(tmp_path / "s.jsonl").lines) == reprobe + 3


async def test_a_slow_thread_write_resets_the_count_and_a_slow_probe_doubles_the_wait(
    tmp_path: Path, write_log: Callable[[], WriteLog]
) -> None:
    log = write_log()
    timer = FakeTimer(duration_s=0.005)
    manager = await new_manager(tmp_path / "s.jsonl", budget=1.0, timer=timer)
    manager._inline_gate = gate = InlineWriteGate(1.0, timer=timer, reprobe_after=3)
    manager.locking = False
    await manager.append_message(user("slow inline", ts=1_780_000_000_000))
    timer.duration_s = 0.0001
    await manager.append_message(user("fast in thread", ts=1_780_000_000_000))
    timer.duration_s = 0.005
    await manager.append_message(user("slow in thread: count starts over", ts=1_780_000_000_000))
    timer.duration_s = 0.0001
    for _ in range(3):
        assert not gate.inline
        await manager.append_message(user("fast in thread", ts=1_780_000_000_000))
    assert gate.inline
    timer.duration_s = 0.005
    await manager.append_message(user("slow probe", ts=1_780_000_000_000))
    timer.duration_s = 0.0001
    for _ in range(6):  # twice the first wait
        assert not gate.inline
        await manager.append_message(user("fast in thread", ts=1_780_000_000_000))
    assert gate.inline
    assert log.inline == [True, False, False, False, False, False, True, *([False] * 6)]


async def test_budget_zero_never_writes_inline(tmp_path: Path, write_log: Callable[[], WriteLog]) -> None:
    log = write_log()
    manager = await new_manager(tmp_path / "s.jsonl", budget=0, timer=FakeTimer(duration_s=0.0))
    assert not manager.writes_inline
    for mode in LOCK_MODES:

        async def body(mode: str = mode) -> None:
            await manager.append_message(user(mode, ts=1_780_000_000_000))
            await manager.append_messages([user("x", ts=1_780_000_000_000), user("y", ts=1_780_000_000_000)])

        log.hops = 0
        await run_in_mode(manager, mode, body)
        assert log.hops >= 2
    assert log.inline == [False] * 6
    assert not manager.writes_inline


async def test_budget_setting_is_validated_and_can_be_changed(
    tmp_path: Path, write_log: Callable[[], WriteLog]
) -> None:
    for bad in (-1.0, math.nan):
        with pytest.raises(ValueError, match="inline_write_budget_ms"):
            await TranscriptManager.create(tmp_path / "bad.jsonl", cwd="/w", inline_write_budget_ms=bad)
        assert not (tmp_path / "bad.jsonl").exists()
    path = tmp_path / "s.jsonl"
    manager = await new_manager(path)
    assert manager.inline_write_budget_ms == 1.0
    with pytest.raises(ValueError, match="inline_write_budget_ms"):
        await TranscriptManager.open(path, inline_write_budget_ms=-0.5)
    with pytest.raises(ValueError, match="inline_write_budget_ms"):
        manager.inline_write_budget_ms = -3
    assert manager.inline_write_budget_ms == 1.0
    log = write_log()
    manager.inline_write_budget_ms = 0
    await manager.append_message(user("thread", ts=1_780_000_000_000))
    manager.inline_write_budget_ms = math.inf
    await manager.append_message(user("inline", ts=1_780_000_000_000))
    assert log.inline == [False, True]
    opened = await TranscriptManager.open(path, inline_write_budget_ms=2.5)
    assert opened.inline_write_budget_ms == 2.5
    assert TranscriptManager.in_memory().writes_inline is False


async def test_forks_keep_the_budget(tmp_path: Path) -> None:
    manager = await new_manager(tmp_path / "s.jsonl", budget=0.25)
    entry = await manager.append_message(user("q", ts=1_780_000_000_000))
    clone = await manager.clone(entry.id, path=tmp_path / "clone.jsonl")
    assert clone.inline_write_budget_ms == 0.25
    await clone.append_message(user("in the clone", ts=1_780_000_000_000))
    assert len((tmp_path / "clone.jsonl").read_bytes().splitlines()) == 3


# --------------------------------------------------------------------------- same errors inline


@pytest.mark.parametrize("mode", LOCK_MODES)
@pytest.mark.parametrize(
    ("tail", "kind"), [(b'{"type":"message","id":"to', "torn"), (b'{"type":"custom","id":"x"}', "newline")]
)
async def test_tail_repairs_still_happen_with_inline_writes(
    tmp_path: Path, mode: str, tail: bytes, kind: str, write_log: Callable[[], WriteLog]
) -> None:
    log = write_log()
    path = tmp_path / "s.jsonl"
    manager = await new_manager(path, timer=FakeTimer())
    first = await manager.append_message(user("before", ts=1_780_000_000_000))
    good = path.read_bytes()
    with path.open("ab") as handle:  # another writer left a tail after we loaded
        handle.write(tail)

    async def body() -> None:
        await manager.append_message(user("after", ts=1_780_000_000_000))

    await run_in_mode(manager, mode, body)
    repair = manager.last_repair
    assert repair is not None
    assert repair.kind == kind
    data = path.read_bytes()
    assert data.endswith(b"\n")
    if kind == "torn":
        assert repair.backup_path is not None
        # only the removed bytes are backed up, named with the offset they stood at (issue 15)
        assert repair.backup_path.read_bytes() == tail
        assert repair.backup_path.name.startswith(f"s.jsonl.torn-{len(good)}.bak.")
        assert stat.S_IMODE(repair.backup_path.stat().st_mode) == 0o600
        assert tail not in data
    else:
        assert data.startswith(good + tail + b"\n")
    reopened = await TranscriptManager.open(path)
    assert reopened.diagnostics.torn_tail is None
    assert reopened.get_entry(first.id) is not None
    assert log.inline[:1] == [True]  # tried inline: the tail check found the damage, nothing written
    assert log.inline[-1] is False  # the repair ran in a worker thread
    await manager.append_message(user("clean again", ts=1_780_000_000_000))
    assert manager.last_repair is None
    assert log.inline[-1] is True


@pytest.mark.parametrize("mode", LOCK_MODES)
async def test_a_vanished_transcript_raises_inline_and_leaves_no_lock(
    tmp_path: Path, mode: str, write_log: Callable[[], WriteLog]
) -> None:
    log = write_log()
    path = tmp_path / "s.jsonl"
    manager = await new_manager(path)
    await manager.append_message(user("kept", ts=1_780_000_000_000))
    leaf = manager.leaf_id
    path.unlink()

    async def body() -> None:
        with pytest.raises(TranscriptNotFoundError):
            await manager.append_message(user("lost", ts=1_780_000_000_000))

    await run_in_mode(manager, mode, body)
    assert log.inline == [True, True]
    assert manager.leaf_id == leaf
    assert len(manager.entries()) == 1
    assert not path.exists()
    assert not (tmp_path / "s.jsonl.lock").exists()


async def test_a_lock_taken_away_raises_inline_before_writing(
    tmp_path: Path, write_log: Callable[[], WriteLog]
) -> None:
    log = write_log()
    path = tmp_path / "s.jsonl"
    manager = await new_manager(path)
    lock_file = tmp_path / "s.jsonl.lock"
    foreign = '{"pid": 1, "createdAt": "2026-01-01T00:00:00.000Z"}'
    async with manager.hold_write_lock() as lock:
        await manager.append_message(user("mine", ts=1_780_000_000_000))
        lock_file.unlink()
        lock_file.write_text(foreign)
        before = path.read_bytes()
        log.hops = 0
        with pytest.raises(LockNotHeldError) as info:
            await manager.append_message(user("would interleave", ts=1_780_000_000_000))
        assert info.value.reason == "lost"
        assert lock.lost_reason == "lost"
        assert path.read_bytes() == before
        assert log.hops == 0
    assert log.inline == [True]
    assert lock_file.read_text() == foreign


async def test_a_lock_released_by_the_watchdog_raises_inline(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "s.jsonl"
    manager = await new_manager(path, clock=clock)
    manager.write_lock_settings = WriteLockSettings(max_hold_ms=1000, watchdog_interval_ms=0)
    async with manager.hold_write_lock():
        await manager.append_message(user("in time", ts=1_780_000_000_000))
        clock.advance(1001)
        assert SessionWriteLock.run_watchdog() == 1
        before = path.read_bytes()
        with pytest.raises(LockNotHeldError) as info:
            await manager.append_message(user("too late", ts=1_780_000_000_000))
        assert info.value.reason == "max-hold-exceeded"
        assert path.read_bytes() == before


async def test_a_cancelled_append_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    manager = await new_manager(path)
    before = path.read_bytes()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await manager.append_message(user("cancelled", ts=1_780_000_000_000))
    assert scope.cancelled_caught
    assert path.read_bytes() == before
    assert manager.leaf_id is None
    await manager.append_message(user("next", ts=1_780_000_000_000))
    assert len(path.read_bytes().splitlines()) == 2


async def test_an_appending_loop_lets_other_tasks_run(tmp_path: Path) -> None:
    timer = FakeTimer(duration_s=0.0004)  # 0.4 ms per write: a yield at least every third write
    manager = await new_manager(tmp_path / "s.jsonl", timer=timer)
    manager.locking = False
    ticks: list[int] = []
    done = anyio.Event()

    async def ticker() -> None:
        while not done.is_set():
            ticks.append(len(manager.entries()))
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.lowlevel.checkpoint()
        for i in range(30):
            await manager.append_message(user(f"{i}", ts=1_780_000_000_000))
        done.set()
    between = {tick for tick in ticks if 0 < tick < 30}
    assert len(between) >= 3  # the ticker ran between appends, not only before and after


# --------------------------------------------------------------------------- the lock's fast path


async def test_lock_per_append_waits_off_the_loop_for_an_in_process_holder(
    tmp_path: Path, write_log: Callable[[], WriteLog]
) -> None:
    log = write_log()
    path = tmp_path / "s.jsonl"
    manager = await new_manager(path, clock=SYSTEM_CLOCK)  # the wait polls on a real clock
    await manager.append_message(user("first", ts=1_780_000_000_000))
    holder = await SessionWriteLock.acquire(path, settings=SETTINGS)
    order: list[str] = []

    async def append() -> None:
        await manager.append_message(user("queued", ts=1_780_000_000_000))
        order.append("appended")

    async with anyio.create_task_group() as tg:
        tg.start_soon(append)
        await anyio.sleep(0.02)
        order.append("release")
        await holder.release()
    assert order == ["release", "appended"]
    assert log.inline == [True, False]
    assert len(path.read_bytes().splitlines()) == 3


async def test_lock_per_append_against_a_live_foreign_lock_raises_busy_and_writes_nothing(
    tmp_path: Path, write_log: Callable[[], WriteLog], live_pid: int
) -> None:
    log = write_log()
    path = tmp_path / "s.jsonl"
    manager = await new_manager(path)
    await manager.append_message(user("first", ts=1_780_000_000_000))
    before = path.read_bytes()
    payload = json.dumps({"pid": live_pid, "createdAt": iso_ms(FakeClock().now_ms())})
    (tmp_path / "s.jsonl.lock").write_text(payload)
    log.hops = 0
    with pytest.raises(SessionBusyError):
        await manager.append_message(user("blocked", ts=1_780_000_000_000))
    assert log.hops >= 1  # inspected from a worker thread
    assert (tmp_path / "s.jsonl.lock").read_text() == payload
    assert path.read_bytes() == before
    assert log.inline == [True]


async def test_lock_per_append_reclaims_a_dead_owners_lock_off_the_loop(
    tmp_path: Path, write_log: Callable[[], WriteLog], reaped_pid: int
) -> None:
    log = write_log()
    path = tmp_path / "s.jsonl"
    manager = await new_manager(path)
    await manager.append_message(user("first", ts=1_780_000_000_000))
    (tmp_path / "s.jsonl.lock").write_text(json.dumps({"pid": reaped_pid, "createdAt": iso_ms(0)}))
    await manager.append_message(user("after reclaim", ts=1_780_000_000_000))
    assert log.inline == [True, False]
    assert not (tmp_path / "s.jsonl.lock").exists()
    assert len(path.read_bytes().splitlines()) == 3


async def test_run_locked_now_runs_work_under_a_fresh_lock_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    lock_file = tmp_path / "s.jsonl.lock"
    assert run_locked_now(path, lambda: 1, settings=SETTINGS) is None  # directory not resolved yet
    assert await run_locked(path, lambda: 2, settings=SETTINGS) == 2
    seen: list[tuple[int | None, int]] = []

    def work() -> str:
        owner = parse_lock_payload(lock_file.read_bytes())
        seen.append((owner.pid, stat.S_IMODE(lock_file.stat().st_mode)))
        return "done"

    attempt = run_locked_now(path, work, settings=SETTINGS, clock=FakeClock())
    assert attempt is not None
    assert attempt.result == "done"
    assert seen == [(os.getpid(), 0o600)]
    assert not lock_file.exists()

    def failing() -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        run_locked_now(path, failing, settings=SETTINGS)
    assert not lock_file.exists()


async def test_run_locked_now_never_touches_a_taken_lock(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    await run_locked(path, lambda: None, settings=SETTINGS)
    ran: list[int] = []
    lock_file = tmp_path / "s.jsonl.lock"
    lock_file.write_text('{"pid": 999999999, "createdAt": "2020-01-01T00:00:00.000Z"}')  # dead, stale
    assert run_locked_now(path, lambda: ran.append(1), settings=SETTINGS) is None
    assert lock_file.read_text() == '{"pid": 999999999, "createdAt": "2020-01-01T00:00:00.000Z"}'
    lock_file.unlink()
    async with SessionWriteLock.acquire(path, settings=SETTINGS):
        assert run_locked_now(path, lambda: ran.append(2), settings=SETTINGS) is None
    assert ran == []
    relative = relative_to_cwd(path)
    await run_locked(relative, lambda: ran.append(3), settings=SETTINGS)  # resolves its spelling
    attempt = run_locked_now(relative, lambda: ran.append(4), settings=SETTINGS)
    assert attempt is not None
    assert ran == [3, 4]


# --------------------------------------------------------------------------- pure parts


def test_gate_rules() -> None:
    timer = FakeTimer()
    gate = InlineWriteGate(1.0, timer=timer, reprobe_after=2)
    assert gate.inline
    gate.record(0.0009)
    assert gate.inline
    gate.record(0.0011)
    assert not gate.inline
    for factor in (1, 2, 4):
        for _ in range(2 * factor):
            assert not gate.inline
            gate.record(0.0001)
        assert gate.inline
        gate.record(0.002)  # the probe is slow again
    for _ in range(16):
        assert not gate.inline
        gate.record(0.0001)
    assert gate.inline
    gate.record(0.0001)  # a fast inline write: the back-off starts over
    gate.record(0.002)
    gate.record(0.0001)
    gate.record(0.0001)
    assert gate.inline
    assert "inline" in repr(gate)


def test_gate_back_off_is_capped() -> None:
    gate = InlineWriteGate(1.0, reprobe_after=1)
    waits = []
    for _ in range(10):
        gate.record(0.5)
        count = 0
        while not gate.inline:
            gate.record(0.0)
            count += 1
        waits.append(count)
    assert waits == [1, 2, 4, 8, 16, 32, 64, 64, 64, 64]


def test_gate_zero_and_infinite_budgets() -> None:
    never = InlineWriteGate(0)
    for seconds in (0.0, 1.0):
        never.record(seconds)
    assert not never.inline
    always = InlineWriteGate(math.inf)
    always.record(3600.0)
    assert always.inline
    with pytest.raises(ValueError, match="reprobe_after"):
        InlineWriteGate(1.0, reprobe_after=0)


def test_gate_asks_for_a_yield_once_per_budget_of_inline_writes() -> None:
    gate = InlineWriteGate(1.0)
    answers = []
    for _ in range(9):
        answers.append(gate.take_yield())
        gate.record(0.0004)
    assert answers == [False, False, False, True, False, False, True, False, False]


@given(st.integers(min_value=-(10**13), max_value=10**14), st.lists(st.integers(0, 5000), max_size=20))
def test_timestamps_match_iso_from_ms(start: int, steps: list[int]) -> None:
    clock = FakeClock(now_ms=start)
    manager = TranscriptManager.in_memory(clock=clock)
    for step in [0, *steps]:
        clock.advance(step)
        assert manager._timestamp() == iso_from_ms(clock.now_ms())


def test_entry_ids_are_8_hex_and_fall_back_on_collision(monkeypatch: pytest.MonkeyPatch) -> None:
    taken: dict[str, int] = {}
    for _ in range(200):
        entry_id = manager_module._draw_entry_id(taken)
        assert len(entry_id) == 8
        assert int(entry_id, 16) >= 0
        assert entry_id not in taken
        taken[entry_id] = 0
    monkeypatch.setattr(os, "urandom", lambda n: bytes(range(1, n + 1)))
    stuck = {"01020304": 0}
    fallback = manager_module._draw_entry_id(stuck)
    assert len(fallback) == 36  # 100 collisions: a full UUID (spec §4)
