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
from sessionkeeper.transcript import AssistantMessage, TextContent


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema",)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async API is asyncio-only (docs/decisions.md PG-ASYNCIO)


async def test_a_runtime_turn_is_seven_round_trips_and_four_writes(
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
                    content=[TextContent(text=f"answer {turn}")], api="a", provider="p", model="m"
                )
                await runtime.after_turn(session, messages=[answer])
        # the last turn: resolve (2), read (1), prompt (1), reply (1), usage (2)
        assert sent.round_trips == 7, sent.statements
        assert "" not in sent.statements
        assert sent.commands == ["BEGIN", "COMMIT", "BEGIN", "COMMIT"]  # sent with statements (pipeline)
        assert sent.transactions == 5  # four writes and the read
        assert sum("pg_advisory_xact_lock" in s and "UPDATE" in s for s in sent.statements) == 2
