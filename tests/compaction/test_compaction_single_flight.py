"""
Concurrent compactions of one transcript call the summariser once (issue #11, DESIGN D10): tasks of one
process (any manager) and processes wait for the compaction in flight and use its entry (``"joined"``)
instead of summarising again and being ``superseded``. The cross-process claim
``<transcript>.compaction.lock`` is reclaimed when its owner died, is an orphan or is stale, and is never
waited for by a manager that holds the write lock. Both anyio backends.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from tests._helpers import user

from sessionkeeper._lockfile import format_lock_payload, iso_ms, parse_lock_payload
from sessionkeeper.compaction import CompactionProviderRegistry, CompactionSettings, Compactor, SummaryRequest
from sessionkeeper.compaction._flight import claim_path_for
from sessionkeeper.hooks import CompactionStartEvent, HookRegistry
from sessionkeeper.runtime import RuntimeSettings, SessionRuntime
from sessionkeeper.store import SessionStore
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import TranscriptManager


pytestmark = pytest.mark.anyio
PAD = " words to summarise" * 300
SUMMARY = "## Decisions\n- one summary for everyone"


class Gated:
    """A provider that counts its calls and answers once ``gate`` is set (the others are waiting then)."""

    id = "gated"
    label = "Gated provider"

    def __init__(self, gate: anyio.Event | None = None) -> None:
        self.gate = gate
        self.calls = 0
        self.claims: list[bytes] = []

    async def summarize(self, request: SummaryRequest) -> str:
        self.calls += 1
        if self.gate is not None:
            with anyio.fail_after(30):
                await self.gate.wait()
        return SUMMARY


def _compactor(provider: Gated, hooks: HookRegistry | None = None) -> Compactor:
    registry = CompactionProviderRegistry()
    registry.register(provider)
    return Compactor(settings=CompactionSettings(provider="gated"), providers=registry, hooks=hooks)


async def _file(tmp_path: Path, turns: int = 6) -> Path:
    path = tmp_path / "t.jsonl"
    manager = await TranscriptManager.create(path, cwd="/w")
    for i in range(turns):
        await manager.append_message(user(f"turn {i}" + PAD))
    return path


def _compactions(path: Path) -> list[dict[str, object]]:
    return [r for r in map(json.loads, path.read_bytes().splitlines()[1:]) if r["type"] == "compaction"]


def _starts(count: int) -> tuple[HookRegistry, anyio.Event]:
    """Hooks whose ``compaction_start`` handler sets the returned event once ``count`` runs started."""
    hooks = HookRegistry()
    started = anyio.Event()
    seen: list[object] = []

    def on_start(event: CompactionStartEvent) -> None:
        seen.append(event)
        if len(seen) == count:
            started.set()

    hooks.on(CompactionStartEvent, on_start)
    return hooks, started


async def test_four_tasks_call_the_summariser_once_and_all_get_the_landed_compaction(tmp_path: Path) -> None:
    path = await _file(tmp_path)
    hooks, started = _starts(4)
    provider = Gated(started)
    compactor = _compactor(provider, hooks)
    shared = await TranscriptManager.open(path)
    managers = [shared, shared, await TranscriptManager.open(path), await TranscriptManager.open(path)]
    results = []

    async def one(manager: TranscriptManager) -> None:
        results.append(await compactor.compact(manager, reason="threshold", keep_recent_tokens=50))

    async with anyio.create_task_group() as tg:
        for manager in managers:
            tg.start_soon(one, manager)
    assert provider.calls == 1
    assert sorted(r.status for r in results) == ["compacted", "joined", "joined", "joined"]
    (landed,) = _compactions(path)
    assert {r.entry.id for r in results if r.entry is not None} == {landed["id"]}
    assert all(r.summary is not None and r.summary.startswith(SUMMARY) for r in results)
    assert [r.compacted for r in results].count(True) == 1  # only the owner wrote
    for manager in managers:  # every manager picked the entry up
        assert landed["id"] in {e.id for e in manager.get_branch()}
    assert not claim_path_for(path).exists()


def _process(path: Path, calls: Path, started: Path, out: Path, backend: str) -> None:
    class FileGated:
        id = "gated"
        label = "waits for every process to start"

        async def summarize(self, request: SummaryRequest) -> str:
            with calls.open("a") as handle:
                handle.write(f"{os.getpid()}\n")
            deadline = time.monotonic() + 30
            # another process's state: every process has started its compaction (no event crosses)
            while len((await anyio.Path(started).read_text()).splitlines()) < 3:
                assert time.monotonic() < deadline
                await anyio.sleep(0.01)
            return SUMMARY

    async def main() -> None:
        manager = await TranscriptManager.open(path)
        hooks = HookRegistry()

        def on_start(event: CompactionStartEvent) -> None:
            with started.open("a") as handle:
                handle.write(f"{os.getpid()}\n")

        hooks.on(CompactionStartEvent, on_start)
        registry = CompactionProviderRegistry()
        registry.register(FileGated())
        compactor = Compactor(settings=CompactionSettings(provider="gated"), providers=registry, hooks=hooks)
        result = await compactor.compact(manager, reason="threshold", keep_recent_tokens=50)
        entry = result.entry.id if result.entry is not None else None
        await anyio.Path(out).write_text(json.dumps({"status": result.status, "entry": entry}))

    anyio.run(main, backend=backend)


@pytest.mark.timeout(120)
def test_three_processes_call_the_summariser_once(tmp_path: Path) -> None:
    path = anyio.run(_file, tmp_path)
    calls, started = tmp_path / "calls.txt", tmp_path / "started.txt"
    started.write_text("")
    outs = [tmp_path / f"out-{n}.json" for n in range(3)]
    ctx = multiprocessing.get_context("fork")
    procs = [
        ctx.Process(target=_process, args=(path, calls, started, outs[n], ("asyncio", "trio")[n % 2]))
        for n in range(3)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(90)
        assert proc.exitcode == 0
    assert len(calls.read_text().splitlines()) == 1
    results = [json.loads(out.read_text()) for out in outs]
    assert sorted(r["status"] for r in results) == ["compacted", "joined", "joined"]
    (landed,) = _compactions(path)
    assert {r["entry"] for r in results} == {landed["id"]}
    assert not claim_path_for(path).exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


async def test_four_runtimes_on_one_key_compact_once(tmp_path: Path) -> None:
    provider = Gated()
    registry = CompactionProviderRegistry()
    registry.register(provider)
    clock = FakeClock()
    settings = RuntimeSettings(compaction=CompactionSettings(provider="gated"))
    async with SessionStore.open(tmp_path / "sessions", clock=clock, durable=False) as store:
        runtimes = [
            SessionRuntime(store, settings=settings, providers=registry, clock=clock, cwd="/w")
            for _ in range(4)
        ]
        first = await runtimes[0].open("agent:main:main")
        for i in range(6):
            await first.transcript.append_message(user(f"turn {i}" + PAD))
        sessions = [await runtime.open("agent:main:main") for runtime in runtimes]
        hooks_started = anyio.Event()
        waiting: list[object] = []

        def on_start(event: CompactionStartEvent) -> None:
            waiting.append(event)
            if len(waiting) == 4:
                hooks_started.set()

        for runtime in runtimes:
            runtime.hooks.on(CompactionStartEvent, on_start)
        provider.gate = hooks_started
        outcomes = []

        async def one(runtime: SessionRuntime, session: object) -> None:
            outcomes.append(await runtime.compact(session, keep_recent_tokens=50))  # type: ignore[arg-type]

        async with anyio.create_task_group() as tg:
            for runtime, session in zip(runtimes, sessions, strict=True):
                tg.start_soon(one, runtime, session)
        assert provider.calls == 1
        assert sorted(o.status for o in outcomes) == ["compacted", "joined", "joined", "joined"]
        assert all(o.context_compacted for o in outcomes)
        assert (await store.require("agent:main:main")).compaction_count == 1  # counted once


# ------------------------------------------------------------------------------------- the claim


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    proc.kill()
    proc.wait()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _claim(path: Path, pid: int, *, age_ms: int = 0) -> Path:
    claim = claim_path_for(path)
    now = int(time.time() * 1000) - age_ms
    claim.write_bytes(format_lock_payload(pid=pid, created_at_ms=now, max_hold_ms=360_000, starttime=None))
    return claim


@pytest.mark.parametrize("owner", ["dead", "orphan", "stale"])
async def test_a_claim_whose_owner_is_gone_is_taken_over(
    tmp_path: Path, owner: str, sleeper: subprocess.Popen[bytes]
) -> None:
    path = await _file(tmp_path)
    pid = {"dead": _dead_pid(), "orphan": os.getpid(), "stale": sleeper.pid}[owner]
    _claim(path, pid, age_ms=2 * 3600 * 1000 if owner == "stale" else 0)
    provider = Gated()
    manager = await TranscriptManager.open(path)
    with anyio.fail_after(10):
        result = await _compactor(provider).compact(manager, keep_recent_tokens=50)
    assert result.status == "compacted" and provider.calls == 1
    assert not claim_path_for(path).exists()


async def test_an_unbounded_timeout_still_writes_a_bounded_claim(tmp_path: Path) -> None:
    path = await _file(tmp_path)
    payloads: list[int | None] = []

    class Looking(Gated):
        async def summarize(self, request: SummaryRequest) -> str:
            payloads.append(parse_lock_payload(claim_path_for(path).read_bytes()).max_hold_ms)
            return await super().summarize(request)

    registry = CompactionProviderRegistry()
    registry.register(Looking())
    settings = CompactionSettings(provider="gated", timeout_seconds=float("inf"))
    manager = await TranscriptManager.open(path)
    result = await Compactor(settings=settings, providers=registry).compact(manager, keep_recent_tokens=50)
    assert result.status == "compacted"
    assert payloads == [24 * 3600 * 1000]


async def test_a_live_claim_is_waited_for_and_its_compaction_joined(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    path = await _file(tmp_path)
    claim = _claim(path, sleeper.pid)
    hooks, started = _starts(1)
    provider = Gated()
    waiter = await TranscriptManager.open(path)
    other = await TranscriptManager.open(path)
    results = []

    async def compact() -> None:
        results.append(await _compactor(provider, hooks).compact(waiter, keep_recent_tokens=50))

    async with anyio.create_task_group() as tg:
        tg.start_soon(compact)
        await started.wait()
        assert not results  # waiting for the claim's owner
        landed = await other.append_compaction(summary="theirs", first_kept_entry_id=None, tokens_before=7)
        claim.unlink()  # the other process is done
    (result,) = results
    assert result.status == "joined" and result.entry is not None and result.entry.id == landed.id
    assert result.summary == "theirs" and provider.calls == 0


async def test_an_abort_stops_the_wait(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    path = await _file(tmp_path)
    _claim(path, sleeper.pid)
    hooks, started = _starts(1)
    abort = anyio.Event()
    manager = await TranscriptManager.open(path)
    errors: list[BaseException] = []

    async def compact() -> None:
        try:
            await _compactor(Gated(), hooks).compact(manager, keep_recent_tokens=50, abort=abort)
        except Exception as err:
            errors.append(err)

    async with anyio.create_task_group() as tg:
        tg.start_soon(compact)
        await started.wait()
        abort.set()
    assert [type(e).__name__ for e in errors] == ["CompactionCancelled"]
    assert _compactions(path) == []


async def test_a_manager_holding_the_write_lock_never_waits_for_a_claim(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    path = await _file(tmp_path)
    _claim(path, sleeper.pid)
    provider = Gated()
    manager = await TranscriptManager.open(path)
    with anyio.fail_after(10):
        async with manager.hold_write_lock():
            result = await _compactor(provider).compact(manager, keep_recent_tokens=50)
    assert result.status == "compacted" and provider.calls == 1
    assert claim_path_for(path).exists()  # the other owner's claim is left alone


async def test_the_claim_is_complete_and_private_while_held(tmp_path: Path) -> None:
    path = await _file(tmp_path)
    seen: list[tuple[object, int]] = []

    class Looking(Gated):
        async def summarize(self, request: SummaryRequest) -> str:
            claim = claim_path_for(path)
            seen.append((parse_lock_payload(claim.read_bytes()).pid, claim.stat().st_mode & 0o777))
            return await super().summarize(request)

    manager = await TranscriptManager.open(path)
    result = await _compactor(Looking()).compact(manager, keep_recent_tokens=50)
    assert result.status == "compacted"
    assert seen == [(os.getpid(), 0o600)]
    assert not claim_path_for(path).exists()
    assert iso_ms(0) == "1970-01-01T00:00:00.000Z"  # the payload's createdAt format
