"""Successor transcripts after compaction (OpenClaw §5.8) and checkpoint metadata (§5.9)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import anyio
import pytest
from tests import _pi_oracle
from tests._pi_oracle import PiOracle
from tests.compaction._build import assistant, result, user

from sessionkeeper.compaction import (
    CheckpointSide,
    CompactionCheckpoint,
    Compactor,
    rotate_after_compaction,
)
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import (
    AssistantMessage,
    CompactionEntry,
    MemoryTranscriptStorage,
    TextContent,
    ThinkingContent,
    ToolCall,
    UserMessage,
)
from sessionkeeper.transcript._load import load_transcript
from sessionkeeper.transcript._manager import TranscriptManager


pi_oracle = _pi_oracle.pi_oracle


async def _compacted_file(tmp_path: Path) -> tuple[TranscriptManager, dict[str, str]]:
    clock = FakeClock()
    transcript = await TranscriptManager.create(tmp_path / "old.jsonl", cwd="/home/dev/project", clock=clock)
    ids: dict[str, str] = {}

    async def add(name: str, message: object) -> None:
        clock.advance(1)
        entry = await transcript.append_message(message)  # type: ignore[arg-type]
        ids[name] = entry.id

    ids["m1"] = (await transcript.append_model_change("anthropic", model_id="old-model")).id
    long_ask = "Please migrate the billing job to the new queue today."
    await add("u1", UserMessage(content=long_ask, timestamp=clock.now_ms()))
    await add("u1dup", UserMessage(content=long_ask, timestamp=clock.now_ms() + 1000))
    await add(
        "a1",
        AssistantMessage(
            content=[TextContent(text="Reading.")],
            api="anthropic-messages",
            provider="anthropic",
            model="claude",
            stop_reason="stop",
        ),
    )
    ids["m2"] = (await transcript.append_model_change("anthropic", model_id="new-model")).id
    signed = AssistantMessage(
        content=[
            ThinkingContent(thinking="plan", thinking_signature="sig"),
            ToolCall(id="c1", name="read", arguments={"path": "billing.py"}),
        ],
        api="anthropic-messages",
        provider="anthropic",
        model="claude",
        stop_reason="toolUse",
    )
    await add("a2", signed)
    await add("r2", result("c1", "x" * 3000))
    await add("u3", user("Now run the tests."))
    await add("a3", assistant("Tests pass."))
    await transcript.append_label(ids["u1"], "start")
    outcome = await Compactor(clock=clock).compact(transcript, keep_recent_tokens=5)
    assert outcome.entry is not None and outcome.entry.first_kept_entry_id == ids["u3"]
    ids["c"] = outcome.entry.id
    ask = "Double-check the migration of the billing job."
    await add("u4", UserMessage(content=ask, timestamp=clock.now_ms()))
    await add("u4dup", UserMessage(content=ask, timestamp=clock.now_ms()))
    return transcript, ids


def test_successor_drops_summarised_and_keeps_the_last_assistant_pair(tmp_path: Path) -> None:
    async def run() -> None:
        transcript, ids = await _compacted_file(tmp_path)
        before = (tmp_path / "old.jsonl").read_bytes()
        successor = await rotate_after_compaction(
            transcript, clock=FakeClock(), session_id="0190a000-0000-7000-8000-000000000001"
        )
        assert successor is not None
        assert successor.path.name == "2026-01-01T00-00-00-000Z_0190a000-0000-7000-8000-000000000001.jsonl"
        assert stat.S_IMODE(successor.path.stat().st_mode) == 0o600
        assert (tmp_path / "old.jsonl").read_bytes() == before  # the old file stays as it was
        lines = [json.loads(line) for line in successor.path.read_text(encoding="utf-8").splitlines()]
        header, entries = lines[0], lines[1:]
        assert header["parentSession"] == str(tmp_path / "old.jsonl") and header["cwd"] == "/home/dev/project"
        kept = [e["id"] for e in entries]
        by_id = {e["id"]: e for e in entries}
        # Summarised messages go, except the last summarised assistant (a2) and its result (r2).
        assert set(kept) == {ids[n] for n in ("m2", "a2", "r2", "u3", "a3", "c", "u4")}
        assert by_id[ids["c"]]["firstKeptEntryId"] == ids["a2"]
        assert "thinkingSignature" not in by_id[ids["a2"]]["message"]["content"][0]
        assert by_id[ids["m2"]]["parentId"] is None  # re-linked past the dropped entries
        assert by_id[ids["a2"]]["parentId"] == ids["m2"]
        assert ids["u4dup"] not in kept  # a long user turn repeated within 60 s
        assert successor.leaf_id == kept[-1] and successor.entries_written == len(entries)
        index = load_transcript(successor.path)
        assert index.leaf_id == ids["u4"]
        context = index.build_context()
        assert context.messages[0].__class__.__name__ == "CompactionSummaryMessage"
        for entry in entries:
            assert entry["parentId"] is None or entry["parentId"] in kept

    anyio.run(run)


def test_a_storage_transcript_rotates_to_a_successor_in_the_same_storage(tmp_path: Path) -> None:
    # issue 13: the storage form of the successor file, the same lines after its header
    async def run() -> None:
        transcript, _ = await _compacted_file(tmp_path)
        new_id = "0190a000-0000-7000-8000-000000000001"
        storage = MemoryTranscriptStorage()
        old_lines = (tmp_path / "old.jsonl").read_bytes().splitlines()
        await storage.create(transcript.session_id, old_lines)
        stored = await TranscriptManager.open_in(storage, transcript.session_id)
        successor = await rotate_after_compaction(stored, clock=FakeClock(), session_id=new_id)
        assert successor is not None and successor.path is None
        assert successor.location == storage.location(new_id) == f"memory:{new_id}"
        as_file = await rotate_after_compaction(transcript, clock=FakeClock(), session_id=new_id)
        assert as_file is not None and as_file.path is not None
        file_lines = as_file.path.read_bytes().splitlines()
        lines, _ = await storage.read(new_id)
        assert lines[1:] == file_lines[1:]
        header = json.loads(lines[0])
        assert header["parentSession"] == storage.location(transcript.session_id)
        assert {k: v for k, v in header.items() if k != "parentSession"} == {
            k: v for k, v in json.loads(file_lines[0]).items() if k != "parentSession"
        }
        assert (await storage.read(transcript.session_id))[0] == old_lines  # the old one stays
        assert (successor.leaf_id, successor.entries_written) == (as_file.leaf_id, as_file.entries_written)

    anyio.run(run)


def test_strict_checkpoint_successor_keeps_nothing_before(tmp_path: Path) -> None:
    async def run() -> None:
        clock = FakeClock()
        transcript = await TranscriptManager.create(tmp_path / "s.jsonl", cwd="/p", clock=clock)
        await transcript.append_message(user("Set up the project " + "a" * 3000))
        await transcript.append_message(assistant("Done, created the layout " + "b" * 3000))
        outcome = await Compactor(clock=clock).compact(transcript)
        assert outcome.entry is not None and outcome.entry.first_kept_entry_id == outcome.entry.id
        successor = await rotate_after_compaction(transcript, clock=clock)
        assert successor is not None
        index = load_transcript(successor.path)
        entries = list(index.entries())
        assert len(entries) == 1 and isinstance(entries[0], CompactionEntry)
        assert entries[0].parent_id is None and entries[0].first_kept_entry_id == entries[0].id

    anyio.run(run)


def test_in_memory_or_uncompacted_transcripts_are_not_rotated() -> None:
    async def run() -> None:
        memory = TranscriptManager.in_memory()
        assert await rotate_after_compaction(memory) is None

    anyio.run(run)


def test_checkpoint_json_shape() -> None:
    checkpoint = CompactionCheckpoint(
        checkpoint_id="c-1",
        session_key="agent:main:main",
        session_id="new",
        created_at=1_700_000_000_000,
        reason="auto-threshold",
        tokens_before=180_000,
        first_kept_entry_id="e9",
        pre_compaction=CheckpointSide(session_id="old", session_file="/s/old.jsonl", leaf_id="e12"),
        post_compaction=CheckpointSide(session_id="new", session_file="/s/new.jsonl", entry_id="c1"),
    )
    assert checkpoint.to_json() == {
        "checkpointId": "c-1",
        "sessionKey": "agent:main:main",
        "sessionId": "new",
        "createdAt": 1_700_000_000_000,
        "reason": "auto-threshold",
        "tokensBefore": 180_000,
        "firstKeptEntryId": "e9",
        "preCompaction": {"sessionId": "old", "sessionFile": "/s/old.jsonl", "leafId": "e12"},
        "postCompaction": {"sessionId": "new", "sessionFile": "/s/new.jsonl", "entryId": "c1"},
    }


@pytest.mark.oracle
def test_pi_loads_the_successor_with_our_context(pi_oracle: PiOracle, tmp_path: Path) -> None:
    async def run() -> Path:
        transcript, _ = await _compacted_file(tmp_path)
        successor = await rotate_after_compaction(transcript, clock=FakeClock())
        assert successor is not None
        return successor.path

    path = anyio.run(run)
    ours = load_transcript(path).build_context().to_json()
    assert pi_oracle.context(path)["messages"] == json.loads(json.dumps(ours["messages"]))


def test_compactor_rotates_when_truncate_after_compaction(tmp_path: Path) -> None:
    from sessionkeeper.compaction import CompactionSettings

    async def run() -> None:
        clock = FakeClock()
        transcript = await TranscriptManager.create(tmp_path / "t.jsonl", cwd="/p", clock=clock)
        await transcript.append_message(user("Set up the project " + "a b " * 1500))
        await transcript.append_message(assistant("Done. " + "c d " * 1500))
        await transcript.append_message(user("Next step?"))
        settings = CompactionSettings(truncate_after_compaction=True)
        outcome = await Compactor(settings=settings, clock=clock).compact(transcript, keep_recent_tokens=1)
        assert outcome.successor is not None and outcome.successor.path.exists()
        assert outcome.to_json()["successor"]["sessionId"] == outcome.successor.session_id
        plain = await Compactor(clock=clock).compact(transcript, keep_recent_tokens=1)
        assert plain.successor is None

    anyio.run(run)
