"""
SessionRuntime on a PostgreSQL store URL (issue 13): the same agent loop as on a sessions directory, by
changing the store URL only; the transcripts live in the same database and hold, line for line, the
bytes the sessions directory's files hold after the same turns.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from tests._servers import pg_schema
from tests.runtime._runtime_helpers import make_runtime, reply

from sessionkeeper.compaction import CompactionSettings
from sessionkeeper.runtime import ModelInfo
from sessionkeeper.store import PostgresTranscriptStorage, SessionStore
from sessionkeeper.testing import FakeClock, ScriptedModelClient
from sessionkeeper.transcript import (
    AssistantMessage,
    CompactionEntry,
    CompactionSummaryMessage,
    MessageEntry,
    TranscriptManager,
    _appends,
)


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema",)

KEY = "agent:main:main"
MODEL = ModelInfo(provider="anthropic", model_id="m", context_window=16_000)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async API is asyncio-only (docs/decisions.md PG-ASYNCIO)


def _restart_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Session and entry ids drawn from counters, restarted by each run, so two runs write alike."""
    sessions = iter(range(1, 1 << 30))
    entries = iter(range(1, 1 << 30))
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=(next(sessions) << 96) | (4 << 76) | (1 << 63)))
    monkeypatch.setattr(_appends, "_draw_entry_id", lambda taken: f"{next(entries):08x}")


async def _agent_loop(store: SessionStore, clock: FakeClock) -> int:
    """Six turns of a scripted agent whose context outgrows the threshold: how many compactions landed."""
    summaries = ScriptedModelClient(handler=lambda request: f"summary after {len(request.messages)} messages")
    runtime, _, _ = make_runtime(
        store=store,
        clock=clock,
        model=MODEL,
        compaction=CompactionSettings(keep_recent_tokens=100),
        model_client=summaries,
    )
    session = await runtime.open(KEY)
    compactions = 0
    for turn in range(6):
        clock.advance(1000)
        plan = await runtime.before_model_call(session, prompt=f"question {turn} " + "q" * 2000)
        answer = reply(f"answer {turn} " + "a" * 2000, input_tokens=3000 + 1500 * turn)
        outcome = await runtime.after_turn(session, messages=[answer])
        for step in (plan.compaction, outcome.compaction):
            compactions += step is not None and step.compacted
    return compactions


async def test_the_runtime_runs_unchanged_on_a_postgres_url(
    pg_schema: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn, schema = pg_schema
    _restart_ids(monkeypatch)
    clock = FakeClock()
    async with SessionStore.open(tmp_path / "sessions", clock=clock, durable=False) as files:
        file_compactions = await _agent_loop(files, clock)
        entry = await files.require(KEY)
        file_lines = (tmp_path / "sessions" / f"{entry.session_id}.jsonl").read_bytes().split(b"\n")[:-1]

    _restart_ids(monkeypatch)
    clock = FakeClock()
    url = f"{dsn}?schema={schema}&store=agent-main"
    async with SessionStore.open(url, clock=clock) as db:
        storage = db.transcript_storage()
        assert isinstance(storage, PostgresTranscriptStorage)
        assert (storage.schema, storage.store_id) == (schema, "agent-main")
        db_compactions = await _agent_loop(db, clock)
        db_entry = await db.require(KEY)
        assert db_entry.session_id == entry.session_id
        db_lines, _ = await storage.read(str(db_entry.session_id))

    assert file_compactions == db_compactions >= 1
    assert db_lines == file_lines  # the same transcript, line for line and byte for byte
    assert db_entry.compaction_count == entry.compaction_count == db_compactions

    # another worker (its own store, its own pool) goes on with the session from the database
    async with SessionStore.open(url, clock=clock) as other:
        again = make_runtime(store=other, clock=clock, model=MODEL)[0]
        session = await again.open(KEY)
        plan = await again.before_model_call(session, prompt="and now?")
        assert isinstance(plan.messages[0], CompactionSummaryMessage)
        await again.after_turn(session, messages=[reply("still here")])
        manager = await TranscriptManager.open_in(other.transcript_storage(), str(db_entry.session_id))
        assert [type(e) for e in manager.entries() if isinstance(e, CompactionEntry)] == [
            CompactionEntry
        ] * db_compactions
        last = [e for e in manager.entries() if isinstance(e, MessageEntry)][-1]
        assert (
            isinstance(last.message, AssistantMessage) and last.message.content == reply("still here").content
        )
