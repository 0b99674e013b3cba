"""Compactions landing while tasks of the same manager or other writers append (both anyio backends)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import anyio.from_thread
import pytest
from tests._helpers import user

from sessionkeeper.compaction import CompactionProviderRegistry, CompactionSettings, Compactor, SummaryRequest
from sessionkeeper.transcript import TranscriptManager, UserMessage, WriteLockSettings, message_to_builtins
from sessionkeeper.transcript.file import _writer as manager_module
from sessionkeeper.transcript.file._follow import FileMark, ForeignLines


pytestmark = pytest.mark.anyio
PAD = " words to summarise" * 300
SHORT = WriteLockSettings(acquire_timeout_ms=2_000, watchdog_interval_ms=0)


class _Fixed:
    id = "fixed"
    label = "a fixed summary"

    async def summarize(self, request: SummaryRequest) -> str:
        return "## Decisions\n- short summary"


def _texts(manager: TranscriptManager) -> list[str]:
    out = []
    for message in manager.build_session_context().messages:
        content = message_to_builtins(message).get("content")
        out.append(content if isinstance(content, str) else "<summary>")
    return out


async def test_a_message_of_the_same_manager_arriving_while_the_landing_picks_up_stays_in_the_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One manager: the compaction lands (a strict checkpoint: everything planned is summarised)
    # while another task appends the user's next question. The question queued for the manager's
    # write lock during the landing's pick-up, was written after the landing's check and before the
    # compaction entry, and the checkpoint (firstKeptEntryId = its own id) dropped it from the
    # context: neither summarised nor kept.
    path = tmp_path / "t.jsonl"
    m = await TranscriptManager.create(path, cwd="/w")
    for i in range(6):
        await m.append_message(UserMessage(content=f"turn {i}" + PAD, timestamp=1))
    registry = CompactionProviderRegistry()
    registry.register(_Fixed())
    compactor = Compactor(settings=CompactionSettings(provider="fixed"), providers=registry)
    picking_up = anyio.Event()
    original = manager_module.read_foreign_lines

    def slow_pick_up(file: Path, mark: FileMark) -> tuple[ForeignLines | None, FileMark]:
        anyio.from_thread.run_sync(picking_up.set)
        time.sleep(0.2)  # the question arrives while the landing reads the file
        return original(file, mark)

    monkeypatch.setattr(manager_module, "read_foreign_lines", slow_pick_up)
    results = []

    async def compact() -> None:
        results.append(await compactor.compact(m))

    async def ask() -> None:
        await picking_up.wait()
        monkeypatch.setattr(manager_module, "read_foreign_lines", original)
        await m.append_message(UserMessage(content="the new question", timestamp=1))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(compact)
            tg.start_soon(ask)
    result = results[0]
    assert result.status == "compacted"
    assert result.preparation is not None
    assert result.preparation.first_kept_entry_id is None  # planned as a strict checkpoint
    assert _texts(m) == ["<summary>", "the new question"]
    records = [json.loads(line) for line in path.read_bytes().splitlines()]
    question = next(r for r in records if r.get("message", {}).get("content") == "the new question")
    assert records[-1]["type"] == "compaction"
    assert records[-1]["firstKeptEntryId"] == question["id"]
    reopened = await TranscriptManager.open(path)
    assert _texts(reopened) == ["<summary>", "the new question"]


async def test_a_compaction_does_not_follow_a_line_written_without_the_lock_after_its_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pi takes no lock: it may append (here on another branch) between the landing's check and the
    # write. The compaction used to follow that line as the new tip and land under an entry the
    # check never saw, away from the branch it summarised.
    path = tmp_path / "t.jsonl"
    m = await TranscriptManager.create(path, cwd="/w")
    first = await m.append_message(UserMessage(content="turn 0" + PAD, timestamp=1))
    for i in range(1, 6):
        await m.append_message(UserMessage(content=f"turn {i}" + PAD, timestamp=1))
    tip = m.leaf_id
    registry = CompactionProviderRegistry()
    registry.register(_Fixed())
    compactor = Compactor(settings=CompactionSettings(provider="fixed"), providers=registry)
    original = manager_module.append_following
    foreign = {
        "type": "message",
        "id": "pi000001",
        "parentId": first.id,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {"role": "user", "content": "pi, on its own branch", "timestamp": 1},
    }

    def pi_writes_first(file: Path, pending: object, **kwargs: object) -> bool:
        if getattr(pending, "entries", [None])[0].__class__.__name__ == "CompactionEntry":
            with file.open("ab") as handle:
                handle.write(json.dumps(foreign).encode() + b"\n")
        return original(file, pending, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(manager_module, "append_following", pi_writes_first)
    result = await compactor.compact(m)
    assert result.status == "compacted"
    assert result.entry is not None
    assert result.entry.parent_id == tip  # the checked leaf, not pi's line
    records = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert [r["id"] for r in records[-2:]] == ["pi000001", result.entry.id]
    assert _texts(await TranscriptManager.open(path))[0] == "<summary>"


def _ids_and_parents(path: Path) -> list[tuple[str, str | None]]:
    records = [json.loads(line) for line in path.read_bytes().splitlines()][1:]
    return [(r["id"], r["parentId"]) for r in records]


class _Gated:
    id = "gated"
    label = "waits for the test"

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.go = anyio.Event()

    async def summarize(self, request: SummaryRequest) -> str:
        self.started.set()
        await self.go.wait()
        return "## Decisions\n- short summary"


async def test_appends_of_one_manager_while_its_compaction_lands(tmp_path: Path) -> None:
    # One manager, two tasks: a compaction lands while the other task appends. The landing holds the
    # file lock and waits for the manager's own appends; an append already waiting for the file lock
    # used to deadlock with it (SessionBusyError after acquire_timeout_ms).
    path = tmp_path / "t.jsonl"
    m = await TranscriptManager.create(path, cwd="/w")
    m.write_lock_settings = SHORT
    for i in range(6):
        await m.append_message(user(f"turn {i}" + PAD))
    provider = _Gated()
    registry = CompactionProviderRegistry()
    registry.register(provider)
    compactor = Compactor(settings=CompactionSettings(provider="gated"), providers=registry)
    results = []

    async def compact() -> None:
        results.append(await compactor.compact(m))

    async def append() -> None:
        await provider.started.wait()  # planned: what follows was written during the summary
        for i in range(30):
            if i == 2:
                provider.go.set()
            await m.append_message(user(f"during {i}"))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(compact)
            tg.start_soon(append)
    assert results[0].status == "compacted"
    chain = _ids_and_parents(path)
    assert len(chain) == 6 + 30 + 1
    for (_, parent), (previous, _) in zip(chain[1:], chain, strict=False):
        assert parent == previous
    texts = [getattr(msg, "content", None) for msg in m.build_session_context().messages]
    missing = [i for i in range(30) if f"during {i}" not in texts]
    assert not missing, (missing, chain, results[0].entry)
