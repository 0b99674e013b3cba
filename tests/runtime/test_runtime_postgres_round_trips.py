"""
What one ``SessionRuntime`` turn sends to PostgreSQL (issue 13, the turn-throughput target): the store
entry resolved and the turn's usage written (two round trips each, one transaction each), the transcript
read once, the prompt and the reply appended (one statement each, the advisory lock inside it), and no
connection-check round trip.
"""

from __future__ import annotations

import pytest
from tests._pg_statements import count_statements
from tests._servers import pg_schema

from sessionkeeper.runtime import ModelInfo, SessionRuntime
from sessionkeeper.store import PostgresStoreBackend, SessionStore
from sessionkeeper.transcript import AssistantMessage, TextContent, Usage


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema",)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async API is asyncio-only (docs/decisions.md PG-ASYNCIO)


async def test_a_runtime_turn_waits_for_two_commits_and_the_usage_rides_on_the_reply(
    pg_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn, schema = pg_schema
    async with SessionStore(PostgresStoreBackend(dsn, schema=schema, max_size=4)) as store:
        runtime = SessionRuntime(store, model=ModelInfo(context_window=200_000), cwd="/w")
        with count_statements(monkeypatch) as sent:
            for turn in range(3):
                sent.clear()  # the last turn's are kept (the first creates the entry and transcript)
                session = await runtime.open("agent:main:main", body="hi")
                await runtime.before_model_call(session, prompt=f"question {turn}")
                answer = AssistantMessage(
                    content=[TextContent(text=f"answer {turn}")],
                    api="a",
                    provider="p",
                    model="m",
                    usage=Usage(input=10 + turn, output=5),
                )
                await runtime.after_turn(session, messages=[answer])
        # the last turn: resolve (2: the locking read with BEGIN, the update with COMMIT), read (1),
        # prompt (1), reply with the usage (3: BEGIN, the append and the locking read in one pipeline
        # sync, the update with COMMIT)
        assert sent.round_trips == 7, sent.statements
        assert "" not in sent.statements
        assert sent.commands == ["BEGIN", "COMMIT", "BEGIN", "COMMIT"]  # sent with statements (pipeline)
        assert sent.transactions == 4  # the resolve, the read, the prompt, the reply with the usage
        assert sent.lazy_commits == 1  # the resolve's activity stamp: not waited on
        assert sent.transactions - 1 - sent.lazy_commits == 2  # durable commits waited on: 2 (were 4)
        assert sum("pg_advisory_xact_lock" in s and "UPDATE" in s for s in sent.statements) == 2
        entry = await store.require("agent:main:main")
        assert (entry.input_tokens, entry.output_tokens) == (12, 5)  # the last turn's usage
        assert entry == session.entry  # what the runtime adopted is what was stored
        assert entry.total_tokens is not None and entry.total_tokens > 0
