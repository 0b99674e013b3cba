"""
Compactions that land while other writers share the transcript (issue #7): messages written during the
summarisation stay in the context; a compaction planned from a snapshot another compaction already
landed on is superseded (nothing written, no ``session_compact``); so is one whose branch was left.
Another manager on the same file stands for another process. Both anyio backends.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from tests._helpers import user

from sessionkeeper.compaction import CompactionProviderRegistry, CompactionSettings, Compactor, SummaryRequest
from sessionkeeper.hooks import (
    CompactionHookOverride,
    HookRegistry,
    SessionBeforeCompactEvent,
    SessionCompactEvent,
)
from sessionkeeper.transcript import (
    CompactionEntry,
    CompactionSummaryMessage,
    TranscriptManager,
    load_transcript,
    message_to_builtins,
)


pytestmark = pytest.mark.anyio
PAD = " words to summarise" * 300


class _Meanwhile:
    """A provider that runs ``action`` (another writer's work) while it 'summarises'."""

    id = "meanwhile"
    label = "writes happen while it summarises"

    def __init__(self, action: Callable[[], Awaitable[None]]) -> None:
        self.action = action
        self.calls = 0

    async def summarize(self, request: SummaryRequest) -> str:
        self.calls += 1
        if self.calls == 1:
            await self.action()
        return "## Decisions\n- short summary"


def _compactor(action: Callable[[], Awaitable[None]], **settings: object) -> Compactor:
    registry = CompactionProviderRegistry()
    registry.register(_Meanwhile(action))
    return Compactor(settings=CompactionSettings(provider="meanwhile", **settings), providers=registry)  # type: ignore[arg-type]


async def _session(tmp_path: Path, turns: int = 6) -> tuple[Path, TranscriptManager, TranscriptManager]:
    path = tmp_path / "t.jsonl"
    ours = await TranscriptManager.create(path, cwd="/w")
    for i in range(turns):
        await ours.append_message(user(f"turn {i}" + PAD))
    other = await TranscriptManager.open(path)
    return path, ours, other


def _texts(manager: TranscriptManager) -> list[str]:
    out = []
    for message in manager.build_session_context().messages:
        raw = message_to_builtins(message)
        content = raw.get("content")
        out.append(content.removesuffix(PAD) if isinstance(content, str) else "<summary>")
    return out


def _compactions(path: Path) -> list[dict]:
    return [r for r in map(json.loads, path.read_bytes().splitlines()[1:]) if r["type"] == "compaction"]


async def test_messages_written_during_the_summary_stay_in_the_context(tmp_path: Path) -> None:
    path, ours, other = await _session(tmp_path)

    async def meanwhile() -> None:
        await other.append_message(user("during 1" + PAD))
        await other.append_message(user("during 2" + PAD))

    result = await _compactor(meanwhile).compact(ours, keep_recent_tokens=50)
    assert result.status == "compacted"
    assert result.entry is not None
    assert result.entry.parent_id == other.leaf_id  # a child of the tip, after what arrived
    texts = _texts(ours)
    assert texts[0] == "<summary>"
    assert texts[-2:] == ["during 1", "during 2"]
    reopened = await TranscriptManager.open(path)
    assert _texts(reopened) == texts
    later = await other.append_message(user("after" + PAD))
    assert later.parent_id == result.entry.id  # the other writer follows the compaction


async def test_a_compaction_planned_from_a_compacted_snapshot_is_superseded(tmp_path: Path) -> None:
    path, ours, other = await _session(tmp_path)
    hooks = HookRegistry()
    compacted: list[str] = []

    async def on_compact(event: SessionCompactEvent) -> None:
        compacted.append(event.compaction_entry.id)

    hooks.on(SessionCompactEvent, on_compact)

    async def another_compactor_lands_first() -> None:
        first = await Compactor(hooks=hooks).compact(other, keep_recent_tokens=50)
        assert first.status == "compacted"

    mine = _compactor(another_compactor_lands_first)
    mine.hooks = hooks
    result = await mine.compact(ours, keep_recent_tokens=50)
    assert result.status == "superseded"
    assert result.entry is None
    assert not result.compacted
    assert result.to_json()["status"] == "superseded"
    assert len(_compactions(path)) == 1
    assert compacted == [_compactions(path)[0]["id"]]  # session_compact fired for the landed one only
    assert ours.leaf_id == other.leaf_id  # it picked up the landed compaction
    again = await Compactor().compact(ours, keep_recent_tokens=50)
    assert again.status == "already_compacted"


async def test_two_compactions_of_one_manager_land_once(tmp_path: Path) -> None:
    path, ours, _ = await _session(tmp_path)
    results = []

    async def the_same_manager_compacts_meanwhile() -> None:
        results.append(await Compactor().compact(ours, keep_recent_tokens=50))

    results.append(await _compactor(the_same_manager_compacts_meanwhile).compact(ours, keep_recent_tokens=50))
    assert [r.status for r in results] == ["compacted", "superseded"]
    assert len(_compactions(path)) == 1


async def test_leaving_the_planned_branch_supersedes(tmp_path: Path) -> None:
    path, ours, other = await _session(tmp_path)
    fork_point = ours.get_branch()[2].id

    async def another_writer_branches_away() -> None:
        await other.branch_with_summary(fork_point, "went back to turn 2")

    result = await _compactor(another_writer_branches_away).compact(ours, keep_recent_tokens=50)
    assert result.status == "superseded"
    assert _compactions(path) == []


async def test_a_navigated_manager_lands_on_its_own_branch(tmp_path: Path) -> None:
    path, ours, other = await _session(tmp_path)
    leaf = ours.leaf_id
    assert leaf is not None
    ours.branch(leaf)  # explicitly stays where it is: others' messages go on another branch

    async def meanwhile() -> None:
        await other.append_message(user("elsewhere" + PAD))

    result = await _compactor(meanwhile).compact(ours, keep_recent_tokens=50)
    assert result.status == "compacted"
    assert result.entry is not None
    assert result.entry.parent_id == leaf
    assert "elsewhere" not in _texts(ours)
    assert len(_compactions(path)) == 1


async def test_a_strict_checkpoint_keeps_what_arrived_during_the_summary(tmp_path: Path) -> None:
    _, ours, other = await _session(tmp_path)

    async def meanwhile() -> None:
        await other.append_message(user("arrived" + PAD))

    compactor = _compactor(meanwhile)
    assert compactor.keep_budget(reason="manual", keep_recent_tokens=None) is None  # a strict checkpoint
    result = await compactor.compact(ours)
    assert result.status == "compacted"
    assert result.entry is not None
    arrived = other.leaf_id
    assert result.entry.first_kept_entry_id == arrived
    assert _texts(ours) == ["<summary>", "arrived"]


async def test_a_strict_checkpoint_without_arrivals_points_at_itself(tmp_path: Path) -> None:
    _, ours, _ = await _session(tmp_path)

    async def nothing() -> None:
        return None

    result = await _compactor(nothing).compact(ours)
    assert result.entry is not None
    assert result.entry.first_kept_entry_id == result.entry.id
    assert _texts(ours) == ["<summary>"]


async def test_the_successor_holds_what_arrived_during_the_summary(tmp_path: Path) -> None:
    _, ours, other = await _session(tmp_path)

    async def meanwhile() -> None:
        await other.append_message(user("arrived" + PAD))

    result = await _compactor(meanwhile, truncate_after_compaction=True).compact(ours, keep_recent_tokens=50)
    assert result.successor is not None
    successor = load_transcript(result.successor.path)
    texts = [
        content.removesuffix(PAD) if isinstance(content := getattr(m, "content", None), str) else "<summary>"
        for m in successor.build_context().messages
    ]
    assert texts[0] == "<summary>"
    assert texts[-1] == "arrived"
    assert result.successor.leaf_id == successor.leaf_id


async def test_a_hook_supplied_compaction_is_superseded_too(tmp_path: Path) -> None:
    path, ours, other = await _session(tmp_path)
    hooks = HookRegistry()
    fired: list[str] = []

    async def before(event: SessionBeforeCompactEvent) -> CompactionHookOverride:
        landed = await Compactor().compact(other, keep_recent_tokens=50)  # another process, meanwhile
        assert landed.status == "compacted"
        return CompactionHookOverride(
            summary="hook summary", first_kept_entry_id=event.branch_entries[-1].id, tokens_before=10
        )

    async def on_compact(event: SessionCompactEvent) -> None:
        fired.append(event.compaction_entry.id)

    hooks.on(SessionBeforeCompactEvent, before)
    hooks.on(SessionCompactEvent, on_compact)
    result = await Compactor(hooks=hooks).compact(ours, keep_recent_tokens=50)
    assert result.status == "superseded"
    assert result.provider == "hook"
    assert fired == []
    assert len(_compactions(path)) == 1


async def test_compacting_under_a_held_write_lock_lands_without_waiting_for_itself(tmp_path: Path) -> None:
    path, ours, _ = await _session(tmp_path)
    ours.write_lock_settings = None
    async with ours.hold_write_lock():
        result = await Compactor().compact(ours, keep_recent_tokens=50)
    assert result.status == "compacted"
    assert len(_compactions(path)) == 1
    assert not path.with_name(path.name + ".lock").exists()


async def test_in_memory_transcripts_still_compact() -> None:
    ours = TranscriptManager.in_memory()
    for i in range(6):
        await ours.append_message(user(f"turn {i}" + PAD))
    result = await Compactor().compact(ours, keep_recent_tokens=50)
    assert result.status == "compacted"
    assert isinstance(ours.get_branch()[-1], CompactionEntry)
    assert isinstance(ours.build_session_context().messages[0], CompactionSummaryMessage)


def test_compact_json_explains_a_superseded_compaction() -> None:
    from sessionkeeper.cli._compact import _NOTHING_TO_DO, _with_reason
    from sessionkeeper.compaction import CompactionResult

    data = _with_reason(CompactionResult(status="superseded").to_json())
    assert data["status"] == "superseded"
    assert data["entryId"] is None
    assert "another writer" in data["reason"]
    assert "superseded" not in _NOTHING_TO_DO  # nothing was written by this run: exit 1


async def test_a_standalone_rotation_picks_up_other_writers_first(tmp_path: Path) -> None:
    from sessionkeeper.compaction import rotate_after_compaction

    _, ours, other = await _session(tmp_path)
    landed = await Compactor().compact(ours, keep_recent_tokens=50)
    assert landed.status == "compacted"
    await other.append_message(user("written elsewhere" + PAD))
    async with ours.hold_write_lock():  # under a lock the caller holds: no wait for itself
        successor = await rotate_after_compaction(ours)
    assert successor is not None
    assert ours.leaf_id == other.leaf_id
    rotated = load_transcript(successor.path)
    assert successor.leaf_id == rotated.leaf_id == other.leaf_id
    again = await rotate_after_compaction(ours)  # taking the lock itself
    assert again is not None
    assert again.entries_written == successor.entries_written
