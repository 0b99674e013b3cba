"""A write lock held for a run (``hold_write_lock``, reentrant or not) by tasks of one manager."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from tests._helpers import user

from sessionkeeper.transcript import TranscriptManager, WriteLockSettings


pytestmark = pytest.mark.anyio
SHORT = WriteLockSettings(acquire_timeout_ms=2_000, watchdog_interval_ms=0)


async def _until(condition: Callable[[], bool]) -> None:
    """Wait until ``condition()`` holds (polls: ``wait_all_tasks_blocked`` also waits for unrelated
    tasks of a shared event loop, and never returns while a lock poller keeps waking up)."""
    while not condition():  # noqa: ASYNC110 - the state polled has no event to wait on
        await anyio.sleep(0.002)


def _ids_and_parents(path: Path) -> list[tuple[str, str | None]]:
    records = [json.loads(line) for line in path.read_bytes().splitlines()][1:]
    return [(r["id"], r["parentId"]) for r in records]


async def test_hold_write_lock_while_an_append_of_the_same_manager_waits_for_the_file_lock(
    tmp_path: Path,
) -> None:
    # Task A of manager m starts holding the lock for a run while task B of the same manager is
    # already waiting for the file lock (another manager holds it). Before the fix B waited for the
    # lock its own manager held while A's first append waited for B: both stalled until
    # acquire_timeout_ms and B failed with SessionBusyError.
    path = tmp_path / "t.jsonl"
    m = await TranscriptManager.create(path, cwd="/w")
    other = await TranscriptManager.open(path)
    m.write_lock_settings = other.write_lock_settings = SHORT
    done: list[str] = []

    async def run_a() -> None:
        async with m.hold_write_lock():
            await m.append_message(user("a"))
            done.append("a")

    async def run_b() -> None:
        await m.append_message(user("b"))
        done.append("b")

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            async with other.hold_write_lock():
                tg.start_soon(run_a)
                await _until(m._write_lock.locked)  # A waits for the file lock under m's write lock
                tg.start_soon(run_b)
                await _until(lambda: m._write_lock.statistics().tasks_waiting == 1)  # B waits behind A
    assert sorted(done) == ["a", "b"]
    chain = _ids_and_parents(path)
    assert len(chain) == 2
    assert chain[1][1] == chain[0][0]  # one chain: the second append followed the first
    assert not path.with_name(path.name + ".lock").exists()


async def test_nested_reentrant_hold_write_lock_keeps_the_outer_block_holding(tmp_path: Path) -> None:
    # With allow_reentrant, a helper that holds the lock inside a run that holds it shares the lock.
    # Leaving the inner block used to forget the outer hold: the run's next append waited for its
    # own lock and failed with SessionBusyError after acquire_timeout_ms.
    path = tmp_path / "t.jsonl"
    m = await TranscriptManager.create(path, cwd="/w")
    m.write_lock_settings = WriteLockSettings(
        acquire_timeout_ms=2_000, watchdog_interval_ms=0, allow_reentrant=True
    )
    lock_file = path.with_name(path.name + ".lock")
    with anyio.fail_after(10):
        async with m.hold_write_lock() as outer:
            async with m.hold_write_lock():
                await m.append_message(user("inner"))
            assert m.held_write_lock is outer
            assert lock_file.exists()
            await m.append_message(user("after the inner block"))
        assert m.held_write_lock is None
    assert not lock_file.exists()
    assert len(_ids_and_parents(path)) == 2


async def test_overlapping_reentrant_holds_of_two_tasks_leave_the_lock_to_the_one_still_open(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.jsonl"
    m = await TranscriptManager.create(path, cwd="/w")
    m.write_lock_settings = WriteLockSettings(
        acquire_timeout_ms=2_000, watchdog_interval_ms=0, allow_reentrant=True
    )
    first_in, second_in, first_out = anyio.Event(), anyio.Event(), anyio.Event()

    async def first() -> None:
        async with m.hold_write_lock():
            first_in.set()
            await m.append_message(user("first"))
            await second_in.wait()
        first_out.set()

    async def second() -> None:
        await first_in.wait()
        async with m.hold_write_lock() as mine:
            second_in.set()
            await first_out.wait()  # the first block closed while this one is open
            assert m.held_write_lock is mine
            await m.append_message(user("second"))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(second)
            tg.start_soon(first)
    assert m.held_write_lock is None
    assert not path.with_name(path.name + ".lock").exists()
    assert len(_ids_and_parents(path)) == 2


async def test_two_runs_of_one_manager_take_turns(tmp_path: Path) -> None:
    # Two tasks of one manager each hold the lock for a run (not reentrant): the second waits for the
    # first to end while the first keeps writing. Waiting for the lock under the manager's own write
    # lock would stall the first run's appends until acquire_timeout_ms and fail the second run.
    path = tmp_path / "t.jsonl"
    m = await TranscriptManager.create(path, cwd="/w")
    m.write_lock_settings = SHORT
    order: list[str] = []
    first_in = anyio.Event()

    async def run(name: str, started: anyio.Event | None) -> None:
        async with m.hold_write_lock():
            if started is not None:
                started.set()
                await _until(lambda: m._holds_ended is not None)  # the other run is waiting now
            for i in range(3):
                await m.append_message(user(f"{name} {i}"))
                order.append(name)

    async def second() -> None:
        await first_in.wait()
        await run("second", None)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "first", first_in)
            tg.start_soon(second)
    assert order == ["first"] * 3 + ["second"] * 3  # runs stay contiguous
    assert m.held_write_lock is None
    assert not path.with_name(path.name + ".lock").exists()
    chain = _ids_and_parents(path)
    assert all(parent == previous for (_, parent), (previous, _) in zip(chain[1:], chain, strict=False))
