"""
Compactions of a transcript kept in a storage shared without a write lock (issue 13: memory, a database):
single-flight summarising through the storage's compaction claim (``CompactionClaimStorage``), and a
landing by exact conditional append, so no two compactions land from one snapshot even when the
storage offers no claim and another writer lands between the check and the write. Both anyio backends.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator, Sequence

import anyio
import pytest
from tests._helpers import user

from sessionkeeper.abc import CompactionClaimStorage, TranscriptStorage, WriterClaim
from sessionkeeper.compaction import (
    CompactionProviderRegistry,
    CompactionResult,
    CompactionSettings,
    Compactor,
    SummaryRequest,
)
from sessionkeeper.compaction._flight import _storage_claim
from sessionkeeper.exceptions import CompactionCancelled
from sessionkeeper.transcript import MemoryTranscriptStorage, StorageMark, TranscriptManager


pytestmark = pytest.mark.anyio
PAD = " words to summarise" * 300
SUMMARY = "## Decisions\n- one summary for every worker"


class Counting:
    """A provider that counts its calls and answers once ``gate`` is set (threads may wait on it)."""

    id = "counting"
    label = "Counting provider"

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.gate = gate
        self.calls = 0
        self._lock = threading.Lock()

    async def summarize(self, request: SummaryRequest) -> str:
        with self._lock:
            self.calls += 1
        if self.gate is not None:
            assert await anyio.to_thread.run_sync(self.gate.wait, 30)
        return SUMMARY


def _compactor(provider: Counting) -> Compactor:
    registry = CompactionProviderRegistry()
    registry.register(provider)
    return Compactor(settings=CompactionSettings(provider="counting"), providers=registry)


async def _filled(storage: TranscriptStorage, turns: int = 6) -> str:
    manager = await TranscriptManager.create_in(storage, cwd="/w")
    for i in range(turns):
        await manager.append_message(user(f"turn {i}" + PAD))
    return manager.session_id


async def _kinds(storage: TranscriptStorage, session_id: str) -> list[str]:
    lines, _ = await storage.read(session_id)
    return [json.loads(line)["type"] for line in lines]


class NoClaims:
    """
    A storage that delegates to a real one and offers no compaction claim (a third-party storage); the
    first append of a ``compaction`` line waits for ``go`` (another writer lands meanwhile).
    """

    def __init__(self, inner: MemoryTranscriptStorage, go: anyio.Event) -> None:
        self.inner = inner
        self.go = go
        self.held_back = anyio.Event()

    def location(self, session_id: str) -> str:
        return self.inner.location(session_id)

    async def create(self, session_id: str, lines: Sequence[bytes]) -> StorageMark:
        return await self.inner.create(session_id, lines)

    async def read(self, session_id: str) -> tuple[list[bytes], StorageMark]:
        return await self.inner.read(session_id)

    async def read_since(self, session_id: str, mark: StorageMark) -> tuple[list[bytes], StorageMark]:
        return await self.inner.read_since(session_id, mark)

    async def append(
        self,
        session_id: str,
        lines: Sequence[bytes],
        *,
        mark: StorageMark,
        claim: WriterClaim | None = None,
        idempotency_key: str | None = None,
    ) -> StorageMark:
        if not self.held_back.is_set() and any(b'"type":"compaction"' in line for line in lines):
            self.held_back.set()
            await self.go.wait()
        return await self.inner.append(
            session_id, lines, mark=mark, claim=claim, idempotency_key=idempotency_key
        )

    async def read_backwards(self, session_id: str) -> AsyncIterator[bytes]:
        async for line in self.inner.read_backwards(session_id):
            yield line

    async def claim(self, session_id: str, *, timeout_ms: float | None = None) -> WriterClaim:
        return await self.inner.claim(session_id, timeout_ms=timeout_ms)

    async def list_sessions(self) -> list[str]:
        return await self.inner.list_sessions()

    async def delete(self, session_id: str) -> bool:
        return await self.inner.delete(session_id)


async def test_two_managers_of_one_stored_transcript_summarise_once() -> None:
    storage = MemoryTranscriptStorage()
    session_id = await _filled(storage)
    gate = threading.Event()
    provider = Counting(gate)
    compactor = _compactor(provider)
    managers = [await TranscriptManager.open_in(storage, session_id) for _ in range(3)]
    results: list[CompactionResult] = []

    async def one(manager: TranscriptManager) -> None:
        results.append(await compactor.compact(manager, reason="threshold", keep_recent_tokens=50))

    async with anyio.create_task_group() as tg:
        for manager in managers:
            tg.start_soon(one, manager)
        await anyio.sleep(0.2)
        gate.set()
    assert provider.calls == 1
    assert sorted(r.status for r in results) == ["compacted", "joined", "joined"]
    assert (await _kinds(storage, session_id)).count("compaction") == 1
    landed = next(r.entry for r in results if r.status == "compacted")
    assert landed is not None
    for manager in managers:
        assert landed.id in {e.id for e in manager.get_branch()}


def test_managers_in_two_event_loops_share_the_storage_claim() -> None:
    """Each thread runs its own event loop (no in-process flight is shared): the storage's claim is."""
    storage = MemoryTranscriptStorage()
    session_id = anyio.run(_filled, storage)
    gate = threading.Event()
    provider = Counting(gate)
    compactor = _compactor(provider)
    statuses: list[str] = []

    def worker() -> None:
        async def main() -> None:
            manager = await TranscriptManager.open_in(storage, session_id)
            result = await compactor.compact(manager, reason="threshold", keep_recent_tokens=50)
            statuses.append(result.status)

        anyio.run(main)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while provider.calls < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # the two others are polling the claim now
    gate.set()
    for thread in threads:
        thread.join(30)
    assert provider.calls == 1
    assert sorted(statuses) == ["compacted", "joined", "joined"]
    assert anyio.run(_kinds, storage, session_id).count("compaction") == 1


async def test_a_compaction_landed_between_the_check_and_the_write_supersedes() -> None:
    """Without any claim, B checked the path before A landed and writes after: B's exact append fails."""
    storage = MemoryTranscriptStorage()
    session_id = await _filled(storage)
    go = anyio.Event()
    slow = NoClaims(storage, go)
    assert not isinstance(slow, CompactionClaimStorage)
    a = await TranscriptManager.open_in(storage, session_id)
    b = await TranscriptManager.open_in(slow, session_id)
    compactor = _compactor(Counting())
    late: list[CompactionResult] = []

    async def run_b() -> None:
        late.append(await compactor.compact(b, reason="threshold", keep_recent_tokens=50))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_b)
        with anyio.fail_after(10):
            await slow.held_back.wait()  # B checked the path and is writing its entry
        first = await compactor.compact(a, reason="threshold", keep_recent_tokens=50)
        go.set()
    assert first.status == "compacted"
    assert late[0].status == "superseded"
    assert late[0].entry is None
    assert (await _kinds(storage, session_id)).count("compaction") == 1
    assert first.entry is not None
    assert b.get_branch()[-1].id == first.entry.id  # B picked the winner up


async def test_messages_landed_between_the_check_and_the_write_stay_in_the_context() -> None:
    storage = MemoryTranscriptStorage()
    session_id = await _filled(storage)
    go = anyio.Event()
    slow = NoClaims(storage, go)
    other = await TranscriptManager.open_in(storage, session_id)
    compacting = await TranscriptManager.open_in(slow, session_id)
    results: list[CompactionResult] = []

    async def run() -> None:
        results.append(
            await _compactor(Counting()).compact(compacting, reason="threshold", keep_recent_tokens=50)
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(10):
            await slow.held_back.wait()
        arrived = await other.append_message(user("written by another worker meanwhile"))
        go.set()
    (result,) = results
    assert result.status == "compacted"
    assert result.entry is not None
    assert result.entry.parent_id == arrived.id  # landed after the line it had not seen
    reloaded = await TranscriptManager.open_in(storage, session_id)
    texts = [getattr(m, "content", None) for m in reloaded.build_session_context().messages]
    assert "written by another worker meanwhile" in texts
    assert (await _kinds(storage, session_id)).count("compaction") == 1


async def test_the_memory_compaction_claim_is_exclusive_and_blocks_no_append() -> None:
    storage = MemoryTranscriptStorage()
    session_id = await _filled(storage, turns=1)
    claim = await storage.claim_compaction(session_id)
    assert claim is not None
    assert claim.held
    assert await storage.claim_compaction(session_id) is None
    other_id = await _filled(storage, turns=1)
    other = await storage.claim_compaction(other_id)  # another transcript: its own claim
    assert other is not None
    manager = await TranscriptManager.open_in(storage, session_id)
    await manager.append_message(user("appends go on while a compaction is claimed"))
    writer = await storage.claim(session_id, timeout_ms=1000)  # and so does the writer claim
    await writer.release()
    await claim.release()
    await claim.release()  # a second release does nothing
    assert not claim.held
    again = await storage.claim_compaction(session_id)
    assert again is not None
    await again.release()
    await other.release()


async def test_an_abort_stops_waiting_for_another_workers_claim() -> None:
    storage = MemoryTranscriptStorage()
    session_id = await _filled(storage)
    held = await storage.claim_compaction(session_id)  # another worker is summarising
    assert held is not None
    provider = Counting()
    manager = await TranscriptManager.open_in(storage, session_id)
    abort = anyio.Event()
    outcome: list[BaseException] = []

    async def run() -> None:
        try:
            await _compactor(provider).compact(manager, reason="threshold", abort=abort)
        except CompactionCancelled as err:
            outcome.append(err)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await anyio.sleep(0.2)
        abort.set()
    assert len(outcome) == 1
    assert provider.calls == 0
    await held.release()


async def test_a_claim_held_past_the_stale_age_is_no_longer_waited_for() -> None:
    storage = MemoryTranscriptStorage()
    session_id = await _filled(storage, turns=1)
    held = await storage.claim_compaction(session_id)
    assert held is not None
    with anyio.fail_after(5):
        claim, waited = await _storage_claim(storage, session_id, stale_after_s=0.2, abort=None)
    assert (claim, waited) == (None, False)  # compact without it; the landing check still guards
    await held.release()
    claim, waited = await _storage_claim(storage, session_id, stale_after_s=0.2, abort=None)
    assert claim is not None
    assert not waited
    await claim.release()
