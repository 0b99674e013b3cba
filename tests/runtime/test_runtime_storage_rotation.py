"""
``truncateAfterCompaction`` (OpenClaw §5.8) on transcripts held in the store's storage, not files (issue
13): the compaction writes a successor transcript in the same storage, the store entry adopts its
``sessionId`` (no ``sessionFile``: the storage names a transcript by id), later turns go there, the old
transcript stays, and another runtime on the same key follows the successor. On memory and on the real
PostgreSQL server (one schema per test).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from msgspec import UNSET
from tests._servers import pg_schema
from tests.runtime._runtime_helpers import make_runtime, reply

from sessionkeeper.compaction import CompactionSettings
from sessionkeeper.runtime import SessionRuntime
from sessionkeeper.store import SessionStore
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import CompactionSummaryMessage


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema",)

KEY = "agent:main:main"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async API (decision PG-ASYNCIO)


@pytest.fixture(params=["memory", "postgres"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[SessionStore]:
    clock = FakeClock()
    if request.param == "memory":
        opened = SessionStore.in_memory(clock=clock)
    else:
        dsn, schema = request.getfixturevalue("pg_schema")
        opened = SessionStore.open(f"{dsn}?schema={schema}", clock=clock)
    async with opened:
        yield opened


def _runtime(store: SessionStore) -> SessionRuntime:
    settings = CompactionSettings(keep_recent_tokens=100, truncate_after_compaction=True)
    runtime, _, _ = make_runtime(store=store, clock=store.clock, compaction=settings)  # type: ignore[arg-type]
    return runtime


async def _fill(runtime: SessionRuntime, session: object, turns: int) -> None:
    for index in range(turns):
        await runtime.before_model_call(session, prompt=f"question {index} " + "q" * 2000)  # type: ignore[arg-type]
        await runtime.after_turn(session, messages=[reply("answer " + "a" * 2000)])  # type: ignore[arg-type]


async def test_a_compaction_rotates_to_a_successor_in_the_storage(store: SessionStore) -> None:
    runtime = _runtime(store)
    session = await runtime.open(KEY)
    await _fill(runtime, session, 3)
    storage = store.transcript_storage()
    old_id = session.transcript.session_id
    old_lines, _ = await storage.read(old_id)
    outcome = await runtime.compact(session)
    assert outcome.compacted and outcome.result is not None
    successor = outcome.result.successor
    assert successor is not None and successor.path is None
    assert successor.location == storage.location(successor.session_id)
    entry = await store.require(KEY)
    assert entry.session_id == successor.session_id == session.transcript.session_id != old_id
    assert entry.session_file is UNSET
    assert session.transcript.storage is storage
    lines, _ = await storage.read(successor.session_id)
    assert json.loads(lines[0])["parentSession"] == storage.location(old_id)
    old_after = (await storage.read(old_id))[0]
    assert old_after[: len(old_lines)] == old_lines and len(old_after) == len(old_lines) + 1  # + compaction
    await runtime.before_model_call(session, prompt="after the rotation")
    await runtime.after_turn(session, messages=[reply("still here")])
    assert (await storage.read(old_id))[0] == old_after  # later turns go to the successor
    assert any(b"still here" in line for line in (await storage.read(successor.session_id))[0])
    again = await runtime.open(KEY)
    assert again.transcript.session_id == successor.session_id
    plan = await runtime.before_model_call(again, prompt="next")
    assert isinstance(plan.messages[0], CompactionSummaryMessage)


async def test_another_runtime_follows_the_successor_at_its_next_turn(store: SessionStore) -> None:
    # a long-lived session of another worker: the turn in flight when the rotation lands picks up the
    # compaction; the store is read then and the session goes on in the successor, losing nothing
    first, second = _runtime(store), _runtime(store)
    mine = await first.open(KEY)
    await _fill(first, mine, 3)
    theirs = await second.open(KEY)
    old_id = theirs.transcript.session_id
    outcome = await first.compact(mine)
    assert outcome.result is not None and outcome.result.successor is not None
    new_id = outcome.result.successor.session_id
    for turn in ("in flight", "next"):
        await second.before_model_call(theirs, prompt=f"{turn} question")
        await second.after_turn(theirs, messages=[reply(f"{turn} answer")])
    assert theirs.transcript.session_id == new_id
    storage = store.transcript_storage()
    old, new = (await storage.read(old_id))[0], (await storage.read(new_id))[0]
    assert [any(f"next {part}".encode() in line for line in new) for part in ("question", "answer")] == [
        True,
        True,
    ]
    for text in (b"in flight question", b"in flight answer"):  # in one of the two, exactly once
        assert sum(text in line for line in old + new) == 1
    assert not any(b"next" in line for line in old)


async def test_a_session_opened_after_the_rotation_starts_in_the_successor(store: SessionStore) -> None:
    first = _runtime(store)
    mine = await first.open(KEY)
    await _fill(first, mine, 3)
    outcome = await first.compact(mine)
    assert outcome.result is not None and outcome.result.successor is not None
    reopened = await _runtime(store).open(KEY)
    assert reopened.transcript.session_id == outcome.result.successor.session_id
