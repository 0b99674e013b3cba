"""
Compactions landing on transcripts kept in a storage (memory; PostgreSQL, the real server, two
instances with their own pools for two workers): a compaction another worker lands between this
landing's pick-up and its write does not let both land. Of two compactions planned from one snapshot,
one lands and the other is superseded or joins it (issue 13: "no two compactions landed from one snapshot").
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import pytest
from tests._helpers import user
from tests._servers import pg_schema

from sessionkeeper.compaction import CompactionProviderRegistry, CompactionSettings, Compactor, SummaryRequest
from sessionkeeper.store import PostgresTranscriptStorage
from sessionkeeper.transcript import (
    MemoryTranscriptStorage,
    StorageMark,
    TranscriptManager,
    TranscriptStorage,
)


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema",)
PAD = " words to summarise" * 300


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the PostgreSQL storage is asyncio-only (docs/decisions.md PG-ASYNCIO)


class _Tap:
    """A storage that runs ``before_pick_up`` inside its next ``read_since`` once armed (else delegates)."""

    def __init__(self, inner: TranscriptStorage) -> None:
        self.inner = inner
        self.armed = False
        self.before_pick_up: Callable[[], Awaitable[None]] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def read_since(self, session_id: str, mark: StorageMark) -> tuple[list[bytes], StorageMark]:
        found = await self.inner.read_since(session_id, mark)
        if self.armed and self.before_pick_up is not None:
            self.armed = False
            await self.before_pick_up()
        return found

    def read_backwards(self, session_id: str) -> AsyncIterator[bytes]:
        return self.inner.read_backwards(session_id)


class _Arming:
    """A summariser that arms the tap: the next pick-up is the landing's."""

    id = "arming"
    label = "arms the tap while it summarises"

    def __init__(self, tap: _Tap) -> None:
        self.tap = tap

    async def summarize(self, request: SummaryRequest) -> str:
        self.tap.armed = True
        return "## Decisions\n- ours"


@pytest.fixture(params=["memory", "postgres"])
async def storages(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[TranscriptStorage, TranscriptStorage]]:
    """Two handles on one storage: two workers' (PostgreSQL: two instances, two pools)."""
    if request.param == "memory":
        shared = MemoryTranscriptStorage()
        yield shared, shared
        return
    dsn, schema = request.getfixturevalue("pg_schema")
    async with (
        PostgresTranscriptStorage(dsn, schema=schema, max_size=3) as one,
        PostgresTranscriptStorage(dsn, schema=schema, max_size=3) as two,
    ):
        yield one, two


async def test_a_compaction_landing_between_the_pick_up_and_the_write_leaves_one(
    storages: tuple[TranscriptStorage, TranscriptStorage],
) -> None:
    mine, theirs = storages
    tap = _Tap(mine)
    ours = await TranscriptManager.create_in(tap, cwd="/w")  # type: ignore[arg-type]
    for i in range(6):
        await ours.append_message(user(f"turn {i}" + PAD))
    other = await TranscriptManager.open_in(theirs, ours.session_id)
    registry = CompactionProviderRegistry()
    registry.register(_Arming(tap))
    compactor = Compactor(settings=CompactionSettings(provider="arming"), providers=registry)
    statuses: dict[str, str] = {}

    async with anyio.create_task_group() as tg:

        async def other_compacts() -> None:
            statuses["other"] = (await Compactor().compact(other, keep_recent_tokens=50)).status

        async def start_the_other() -> None:  # inside our landing: after our pick-up, before our write
            tg.start_soon(other_compacts)
            await anyio.sleep(0.3)  # it lands meanwhile (or waits, if the storage makes it)

        tap.before_pick_up = start_the_other
        statuses["ours"] = (await compactor.compact(ours, keep_recent_tokens=50)).status

    landed = [who for who, status in statuses.items() if status == "compacted"]
    assert len(landed) == 1, statuses  # the other one is superseded, or joined the one that landed
    assert {status for who, status in statuses.items() if who not in landed} <= {"superseded", "joined"}
    lines, _ = await theirs.read(ours.session_id)
    assert sum(b'"type":"compaction"' in line for line in lines) == 1
    reopened = await TranscriptManager.open_in(theirs, ours.session_id)
    assert reopened.leaf_id == ours.leaf_id
