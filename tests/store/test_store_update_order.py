"""Concurrent updates of one store apply in call order, on every backend (a read sees earlier updates)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from sessionkeeper.store import (
    InMemoryStoreBackend,
    JsonFileStoreBackend,
    SessionEntry,
    SessionStore,
    SqliteStoreBackend,
    StoreBackend,
    session_entry_from_dict,
    session_entry_to_dict,
)


def attrs_evolve_label(entry: SessionEntry | None, label: str) -> SessionEntry:
    raw = session_entry_to_dict(entry) if entry is not None else {"sessionId": "s"}
    return session_entry_from_dict({**raw, "label": label})


# ------------------------------------------------------------ concurrent updates apply in call order


def _backend(kind: str, where: Path) -> StoreBackend:
    if kind == "memory":
        return InMemoryStoreBackend()
    if kind == "json":
        return JsonFileStoreBackend(where / "sessions.json", durable=False)
    return SqliteStoreBackend(where / "sessions.sqlite", synchronous="NORMAL")


async def _in_call_order(calls: list[Callable[[], Awaitable[object]]]) -> None:
    """
    Run ``calls`` concurrently, each started after the previous one began (trio starts tasks in random
    order): task i lets task i+1 go, then calls; task i+1 runs only once task i is suspended in its call.
    """
    gates = [anyio.Event() for _ in range(len(calls) + 1)]

    async def run(i: int) -> None:
        await gates[i].wait()
        gates[i + 1].set()
        await calls[i]()

    async with anyio.create_task_group() as tg:
        for i in range(len(calls)):
            tg.start_soon(run, i)
        gates[0].set()


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["memory", "json", "sqlite"])
async def test_concurrent_updates_apply_in_call_order(kind: str, tmp_path: Path) -> None:
    backend = _backend(kind, tmp_path)
    await backend.put("agent:main:main", session_entry_from_dict({"sessionId": "s", "label": ""}))
    applied: list[int] = []

    def step(i: int) -> Any:
        def fn(current: SessionEntry | None) -> SessionEntry:
            assert current is not None
            applied.append(i)
            return attrs_evolve_label(current, f"{current.label}{i},")

        return fn

    n = 120
    await _in_call_order([functools.partial(backend.update, "agent:main:main", step(i)) for i in range(n)])
    assert applied == list(range(n))
    final = await backend.get("agent:main:main")
    assert final is not None and final.label == "".join(f"{i}," for i in range(n))
    await backend.aclose()


@pytest.mark.anyio
async def test_concurrent_store_update_entry_calls_apply_in_call_order(tmp_path: Path) -> None:
    store = SessionStore.open(tmp_path, durable=False)
    await store.patch("agent:main:main", {"sessionId": "s", "label": ""})
    n = 100
    await _in_call_order(
        [
            functools.partial(
                store.update_entry, "agent:main:main", lambda e, i=i: {"label": f"{e.label}{i},"}
            )
            for i in range(n)
        ]
    )
    final = await store.require("agent:main:main")
    assert final.label == "".join(f"{i}," for i in range(n))
    await store.aclose()


@pytest.mark.anyio
async def test_a_read_issued_after_an_update_sees_it(tmp_path: Path) -> None:
    backend = JsonFileStoreBackend(tmp_path / "sessions.json", durable=False)
    await backend.put("k", session_entry_from_dict({"sessionId": "s"}))
    seen: dict[int, str | None] = {}

    async def read(i: int) -> None:
        entry = await backend.get("k")
        seen[i] = entry.label if entry is not None and isinstance(entry.label, str) else None

    calls: list[Callable[[], Awaitable[object]]] = []
    for i in range(30):
        calls.append(functools.partial(backend.update, "k", lambda e, i=i: attrs_evolve_label(e, str(i))))
        calls.append(functools.partial(read, i))
    await _in_call_order(calls)
    assert seen == {i: str(i) for i in range(30)}
    await backend.aclose()


@pytest.mark.anyio
@pytest.mark.timeout(60)  # without the fix the next call waits for the cancelled ticket forever
@pytest.mark.parametrize("kind", ["json", "sqlite"])
async def test_a_cancelled_call_does_not_block_the_calls_after_it(kind: str, tmp_path: Path) -> None:
    backend = _backend(kind, tmp_path)
    await backend.put("k", session_entry_from_dict({"sessionId": "s"}))
    with anyio.CancelScope() as scope:
        scope.cancel()
        await backend.update("k", lambda e: attrs_evolve_label(e, "cancelled"))
    with anyio.fail_after(10):
        await backend.update("k", lambda e: attrs_evolve_label(e, "after"))
        entry = await backend.get("k")
    assert entry is not None and entry.label == "after"
    await backend.aclose()
