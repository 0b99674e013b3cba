"""
What one ``SessionRuntime`` turn sends to PostgreSQL (issue 13, the turn-throughput target): the store
entry resolved and the turn's usage written (two round trips each, one transaction each), the transcript
read once, the prompt and the reply appended (one statement each, the advisory lock inside it), and no
connection-check round trip. For a cache-TTL-eligible model (Anthropic: an ``openclaw.cache-ttl`` marker
every turn, OpenClaw §7) the marker joins the reply's append and the usage still rides on it: 2 durable
commits per turn too, with the bytes and the entry a run without riders writes.
"""

from __future__ import annotations

import re

import pytest
from tests._pg_statements import Sent, count_statements
from tests._servers import pg_schema

from sessionkeeper.pruning import CACHE_TTL_CUSTOM_TYPE
from sessionkeeper.runtime import ModelInfo, SessionRuntime
from sessionkeeper.store import PostgresStoreBackend, PostgresTranscriptStorage, SessionEntry, SessionStore
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import AssistantMessage, CustomEntry, TextContent, Usage


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
        adopted: SessionEntry | None = None
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
                adopted = session.entry
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
        assert entry == adopted  # what the runtime adopted is what was stored
        assert isinstance(entry.total_tokens, int) and entry.total_tokens > 0


ANTHROPIC = ModelInfo(
    provider="anthropic", model_id="claude-sonnet-4-5", api="anthropic-messages", context_window=200_000
)


async def _anthropic_turns(store: SessionStore, sent: Sent) -> tuple[Sent, list[bytes], SessionEntry]:
    """Three turns of ``ANTHROPIC``: what the last one sent, then the transcript and the entry."""
    clock = store.clock
    assert isinstance(clock, FakeClock)
    adopted: SessionEntry | None = None
    runtime = SessionRuntime(store, model=ANTHROPIC, cwd="/w", clock=clock)
    for turn in range(3):
        sent.clear()
        clock.advance(7)
        session = await runtime.open("agent:main:main", body="hi")
        await runtime.before_model_call(session, prompt=f"question {turn}")
        answer = AssistantMessage(
            content=[TextContent(text=f"answer {turn}")],
            api="anthropic-messages",
            provider="anthropic",
            model="claude-sonnet-4-5",
            usage=Usage(input=10 + turn, output=5, cache_read=turn),
        )
        outcome = await runtime.after_turn(session, messages=[answer])
        assert isinstance(outcome.cache_ttl_marker, CustomEntry)
        assert outcome.cache_ttl_marker.custom_type == CACHE_TTL_CUSTOM_TYPE
        adopted = session.entry
    last = Sent(list(sent.statements), list(sent.commands), sent.transactions, sent.lone_commands)
    entry = await store.require("agent:main:main")
    assert entry == adopted  # what the runtime adopted is what was stored
    assert isinstance(entry.session_id, str)
    lines, _ = await store.transcript_storage().read(entry.session_id)
    return last, lines, entry


def _durable(sent: Sent) -> int:
    return sent.transactions - 1 - sent.lazy_commits  # the resolve's activity stamp is not waited on


async def test_an_anthropic_turn_with_its_ttl_marker_also_waits_for_two_commits(
    pg_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn, schema = pg_schema
    ridden = SessionStore(
        PostgresStoreBackend(dsn, schema=schema, store_id="ridden", max_size=4),
        clock=FakeClock(),
        new_session_id=lambda: "s-1",
    )
    # the same turns, the transcripts on a backend of their own: the entry update cannot ride
    unridden = SessionStore(
        PostgresStoreBackend(dsn, schema=schema, store_id="unridden", max_size=4),
        clock=FakeClock(),
        new_session_id=lambda: "s-1",
        transcripts=PostgresTranscriptStorage(dsn, schema=schema, store_id="unridden", max_size=4),
    )
    async with ridden, unridden:
        with count_statements(monkeypatch) as sent:
            last, lines, entry = await _anthropic_turns(ridden, sent)
            alone, alone_lines, alone_entry = await _anthropic_turns(unridden, sent)
    # resolve (2), read (1), prompt (1), reply + marker with the usage (3)
    assert last.round_trips == 7, last.statements
    assert last.transactions == 4 and _durable(last) == 2  # was 4 (then 3 with the marker joined)
    assert sum("pg_advisory_xact_lock" in s for s in last.statements) == 2  # prompt, reply + marker
    assert _durable(alone) == 3  # without the rider: the entry update on its own
    assert (entry.input_tokens, entry.output_tokens, entry.cache_read) == (12, 5, 2)
    assert entry == alone_entry  # the same entry values, updatedAt included
    assert b"openclaw.cache-ttl" in lines[-1] and len(lines) == len(alone_lines) == 10  # header + 3 x 3

    def ids_numbered(all_lines: list[bytes]) -> list[bytes]:  # entry ids are random: number them
        text = b"\n".join(all_lines)
        ids = list(dict.fromkeys(re.findall(rb'"id":"([0-9a-f]{8})"', text)))
        for index, entry_id in enumerate(ids):
            text = text.replace(b'"' + entry_id + b'"', b'"id-%d"' % index)
        return text.split(b"\n")

    assert ids_numbered(lines) == ids_numbered(alone_lines)  # byte for byte, but for the random ids
