"""
An append that carries a store entry patch (``EntryRider``, issue 13: a database turn's reply and its
usage in one commit): on PostgreSQL with the store on the same backend, both land in one transaction or
neither does; everywhere else the patch runs on its own after the append, as two writes did before; the
append is never refused for the patch's sake.
"""

from __future__ import annotations

import pytest
from tests._pg_statements import count_statements
from tests._servers import pg_schema

from sessionkeeper.exceptions import SessionNotFoundError, StaleTranscriptError
from sessionkeeper.store import EntryRider, PostgresStoreBackend, PostgresTranscriptStorage, SessionStore
from sessionkeeper.transcript import (
    MessageEntry,
    RidingStorage,
    TextContent,
    TranscriptManager,
    UserMessage,
)


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema",)

KEY = "agent:main:main"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async API is asyncio-only (docs/decisions.md PG-ASYNCIO)


def _said(manager: TranscriptManager) -> list[str]:
    texts = []
    for entry in manager.entries():
        if isinstance(entry, MessageEntry) and isinstance(entry.message, UserMessage):
            content = entry.message.content
            texts.append(
                content
                if isinstance(content, str)
                else "".join(block.text for block in content if isinstance(block, TextContent))
            )
    return texts


async def _open(store: SessionStore) -> TranscriptManager:
    entry = await store.patch(KEY, label="Main")
    session_id = entry.session_id
    assert isinstance(session_id, str)
    return await TranscriptManager.create_in(store.transcript_storage(), cwd="/w", session_id=session_id)


async def test_the_append_and_the_entry_patch_commit_once_together(
    pg_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn, schema = pg_schema
    async with SessionStore(PostgresStoreBackend(dsn, schema=schema, max_size=2)) as store:
        storage = store.transcript_storage()
        assert isinstance(storage, RidingStorage)
        manager = await _open(store)
        rider = EntryRider(store, KEY, {"inputTokens": 7, "totalTokens": 99})
        assert storage.carries(rider)
        with count_statements(monkeypatch) as sent:
            await manager.append_messages([UserMessage(content="hello", timestamp=1)], rider=rider)
        assert sent.commands == ["BEGIN", "COMMIT"]  # one transaction, one commit
        assert sent.transactions == 1
        stored = await store.require(KEY)
        assert rider.result() == stored
        assert (stored.input_tokens, stored.total_tokens, stored.label) == (7, 99, "Main")
        reopened = await TranscriptManager.open_in(storage, manager.session_id)
        assert _said(reopened) == ["hello"]


async def test_a_stale_append_writes_neither_and_the_retry_carries_the_patch(
    pg_schema: tuple[str, str],
) -> None:
    dsn, schema = pg_schema
    backend = PostgresStoreBackend(dsn, schema=schema, max_size=3)
    async with SessionStore(backend) as store:
        storage = store.transcript_storage()
        assert isinstance(storage, PostgresTranscriptStorage)
        first = await _open(store)
        second = await TranscriptManager.open_in(storage, first.session_id)
        await first.append_messages([UserMessage(content="from the first", timestamp=1)])
        before = await backend.get_with_revision(KEY)
        # the raw seam: the stale mark refuses the append, and the patch with it
        rider = EntryRider(store, KEY, {"inputTokens": 3})
        stale_mark = (await storage.read(first.session_id))[1]
        await first.append_messages([UserMessage(content="again", timestamp=1)])
        with pytest.raises(StaleTranscriptError):
            await storage.append_carrying(
                first.session_id, [b'{"type":"custom"}'], mark=stale_mark, rider=rider
            )
        assert await backend.get_with_revision(KEY) == before
        # through the manager: the second writer's append is stale, follows the first's lines, and lands
        # with its patch on the next try
        rider = EntryRider(store, KEY, {"inputTokens": 4})
        await second.append_messages([UserMessage(content="from the second", timestamp=1)], rider=rider)
        assert rider.result().input_tokens == 4
        assert (await store.require(KEY)).input_tokens == 4
        reopened = await TranscriptManager.open_in(storage, first.session_id)
        assert _said(reopened) == ["from the first", "again", "from the second"]


async def test_a_missing_entry_leaves_the_append_and_result_raises(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    async with SessionStore(PostgresStoreBackend(dsn, schema=schema, max_size=2)) as store:
        manager = await _open(store)
        await store.delete(KEY, archive_transcript=False)
        rider = EntryRider(store, KEY, {"inputTokens": 1})
        await manager.append_messages([UserMessage(content="kept", timestamp=1)], rider=rider)
        with pytest.raises(SessionNotFoundError):
            rider.result()
        assert await store.get(KEY) is None  # never recreated
        reopened = await TranscriptManager.open_in(store.transcript_storage(), manager.session_id)
        assert _said(reopened) == ["kept"]


async def test_a_rider_of_another_backend_runs_on_its_own_after_the_append(
    pg_schema: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn, schema = pg_schema
    async with (
        SessionStore(PostgresStoreBackend(dsn, schema=schema, max_size=2)) as store,
        SessionStore.in_memory() as elsewhere,
    ):
        manager = await _open(store)
        await elsewhere.patch(KEY, label="Elsewhere")
        rider = EntryRider(elsewhere, KEY, {"inputTokens": 5})
        storage = store.transcript_storage()
        assert isinstance(storage, RidingStorage)
        assert not storage.carries(rider)
        with count_statements(monkeypatch) as sent:
            await manager.append_messages([UserMessage(content="hi", timestamp=1)], rider=rider)
        assert sent.commands == []  # the append alone: one statement in autocommit
        assert rider.result().input_tokens == 5
        assert (await elsewhere.require(KEY)).input_tokens == 5


async def test_an_in_memory_transcript_runs_the_rider_after_the_append() -> None:
    async with SessionStore.in_memory() as store:
        await store.patch(KEY, label="Main")
        manager = TranscriptManager.in_memory(cwd="/w")
        rider = EntryRider(store, KEY, {"outputTokens": 2})
        await manager.append_messages([UserMessage(content="hi", timestamp=1)], rider=rider)
        assert rider.result().output_tokens == 2
        assert _said(manager) == ["hi"]
