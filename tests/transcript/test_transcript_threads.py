"""
One ``TranscriptManager`` used from several threads, each with its own ``anyio.run`` (issue 15 item 6).

Before the fix the manager's ``anyio.Lock`` belonged to one event loop: a release from another thread
never woke the waiter, and both threads hung silently after the first append. Now it is safe: appends
from every thread are serialised, none is lost, and they form one chain.
"""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest

from sessionkeeper.transcript import TranscriptManager, UserMessage, load_transcript
from sessionkeeper.transcript.lock._local import ThreadSafeEvent, ThreadSafeLock


APPENDS = 25


def _run_threads(targets: list[threading.Thread], timeout_s: float = 60.0) -> None:
    for thread in targets:
        thread.start()
    for thread in targets:
        thread.join(timeout_s)
    assert not any(thread.is_alive() for thread in targets), "a thread hung (deadlock)"


@pytest.mark.parametrize(
    "backends", [("asyncio", "asyncio"), ("asyncio", "trio"), ("trio", "trio")], ids="-".join
)
def test_two_threads_with_their_own_event_loops_share_one_manager(
    tmp_path: Path, backends: tuple[str, str]
) -> None:
    path = tmp_path / "s.jsonl"
    manager = anyio.run(lambda: TranscriptManager.create(path, cwd="/"))
    errors: list[BaseException] = []

    def worker(name: str, backend: str) -> None:
        async def main() -> None:
            for i in range(APPENDS):
                await manager.append_message(UserMessage(content=f"{name}-{i}", timestamp=1))

        try:
            anyio.run(main, backend=backend)
        except BaseException as err:  # reported below; a hang is what the test is about
            errors.append(err)

    _run_threads(
        [threading.Thread(target=worker, args=(f"t{n}", b), daemon=True) for n, b in enumerate(backends)]
    )
    assert errors == []
    index = load_transcript(path)
    entries = list(index.entries())
    assert len(entries) == 2 * APPENDS
    # one chain: every entry's parent is the one written before it
    assert [e.parent_id for e in entries] == [None, *(e.id for e in entries[:-1])]
    texts = [e.message.content for e in entries]  # type: ignore[union-attr]
    for name in ("t0", "t1"):
        assert [t for t in texts if t.startswith(f"{name}-")] == [f"{name}-{i}" for i in range(APPENDS)]


def test_hold_write_lock_in_one_thread_and_appends_in_another(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    manager = anyio.run(lambda: TranscriptManager.create(path, cwd="/"))
    holding = threading.Event()
    appended = threading.Event()
    errors: list[BaseException] = []

    def holder() -> None:
        async def main() -> None:
            async with manager.hold_write_lock():
                holding.set()
                await anyio.to_thread.run_sync(appended.wait, 30)
                await manager.append_message(UserMessage(content="holder", timestamp=1))

        try:
            anyio.run(main)
        except BaseException as err:
            errors.append(err)

    def appender() -> None:
        async def main() -> None:
            await anyio.to_thread.run_sync(holding.wait, 30)
            await manager.append_message(UserMessage(content="other", timestamp=1))
            appended.set()

        try:
            anyio.run(main, backend="trio")
        except BaseException as err:
            errors.append(err)

    _run_threads(
        [threading.Thread(target=holder, daemon=True), threading.Thread(target=appender, daemon=True)]
    )
    assert errors == []
    texts = [e.message.content for e in load_transcript(path).entries()]  # type: ignore[union-attr]
    assert texts == ["other", "holder"]


def test_lock_is_fifo_and_survives_a_cancelled_waiter() -> None:
    lock = ThreadSafeLock()
    order: list[str] = []

    async def main() -> None:
        await lock.acquire()
        async with anyio.create_task_group() as tg:

            async def waiter(name: str) -> None:
                async with lock:
                    order.append(name)

            async def cancelled() -> None:
                with anyio.move_on_after(0):
                    await lock.acquire()
                order.append("cancelled-gave-up")

            tg.start_soon(waiter, "a")
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(cancelled)
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(waiter, "b")
            await anyio.wait_all_tasks_blocked()
            assert lock.statistics().tasks_waiting == 2
            lock.release()
        assert not lock.locked()

    anyio.run(main)
    assert order == ["cancelled-gave-up", "a", "b"]


def test_event_wakes_waiters_of_other_threads() -> None:
    event = ThreadSafeEvent()
    woken: list[str] = []
    ready = threading.Barrier(3)

    def waiter(backend: str) -> None:
        async def main() -> None:
            await anyio.to_thread.run_sync(ready.wait)
            await event.wait()
            woken.append(backend)

        anyio.run(main, backend=backend)

    threads = [threading.Thread(target=waiter, args=(b,), daemon=True) for b in ("asyncio", "trio")]
    for thread in threads:
        thread.start()
    ready.wait()
    while True:  # both registered (state, not sleep): then set from this third thread
        with event._mutex:
            if len(event._waiters) == 2:
                break
        threading.Event().wait(0.001)
    event.set()
    for thread in threads:
        thread.join(30)
    assert sorted(woken) == ["asyncio", "trio"]
    assert event.is_set()
