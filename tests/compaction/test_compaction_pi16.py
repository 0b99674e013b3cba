"""
Compaction on pi 1.6 files (issue 18): the planner works on the projected context as pi 1.6.0's
``prepareCompaction`` does (cut points, tokens before, file lists equal to the pi16 oracle's), system
message entries are never summarised, and the instructions survive a compaction and a successor rotation.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests import _pi16_oracle
from tests._pi16_oracle import Pi16Oracle

from sessionkeeper._estimate import estimate_tokens_pi16
from sessionkeeper.compaction import Compactor, prepare_compaction, rotate_after_compaction
from sessionkeeper.compaction._projected import (
    estimate_projected_context_tokens,
    is_pi16_branch,
    plan_projected_compaction,
)
from sessionkeeper.records import CompactionEntry, SystemMessage
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import TranscriptManager, load_transcript, project_path


pi16_oracle = _pi16_oracle.pi16_oracle
NAMES = ["basic", "full", "branchy", "modern", "large-2000"]


def _meta(samples: Path, name: str) -> dict[str, Any]:
    return json.loads((samples / f"{name}.meta.json").read_text("utf-8"))


@pytest.mark.parametrize("name", NAMES)
def test_cut_point_equals_pi16_golden(pi16_samples: Path, name: str) -> None:
    index = load_transcript(pi16_samples / f"{name}.jsonl")
    expected = _meta(pi16_samples, name)["cutPoint"]
    branch = index.branch(index.leaf_id)
    plan = plan_projected_compaction(branch, keep_recent_tokens=expected["keepRecentTokens"])
    assert plan is not None
    assert plan.to_json() == expected


@pytest.mark.parametrize("name", NAMES)
def test_estimates_equal_pi16_golden(pi16_samples: Path, name: str) -> None:
    index = load_transcript(pi16_samples / f"{name}.jsonl")
    meta = _meta(pi16_samples, name)["meta"]
    branch = index.branch(index.leaf_id)
    assert [estimate_tokens_pi16(m) for m in index.build_context().messages] == meta["messageTokenEstimates"]
    projected = project_path(branch)
    assert estimate_projected_context_tokens(projected, branch).to_json() == meta["contextTokens"]
    assert [{"id": e.entry.id, "type": e.entry.type, "messages": len(e.messages)} for e in projected] == meta[
        "contextEntries"
    ]


@pytest.mark.parametrize("name", NAMES)
def test_prepare_compaction_on_a_pi16_branch_never_summarises_system_messages(
    pi16_samples: Path, name: str
) -> None:
    index = load_transcript(pi16_samples / f"{name}.jsonl")
    branch = index.branch(index.leaf_id)
    assert is_pi16_branch(branch)
    expected = _meta(pi16_samples, name)["cutPoint"]
    plan = prepare_compaction(branch, keep_recent_tokens=expected["keepRecentTokens"])
    assert plan is not None
    assert plan.first_kept_entry_id == expected["firstKeptEntryId"]
    assert plan.pi_first_kept_entry_id == expected["firstKeptEntryId"]
    assert plan.deviation is None
    assert len(plan.messages_to_summarize) == expected["messagesToSummarize"]
    assert len(plan.turn_prefix_messages) == expected["turnPrefixMessages"]
    assert plan.tokens_before == expected["tokensBefore"]
    assert branch[plan.first_kept_entry_index].id == plan.first_kept_entry_id
    every = [*plan.messages_to_summarize, *plan.turn_prefix_messages]
    assert not any(isinstance(m, SystemMessage) for m in every)
    strict = prepare_compaction(branch, keep_recent_tokens=None)
    assert strict is not None and strict.strict_checkpoint
    assert not any(isinstance(m, SystemMessage) for m in strict.messages_to_summarize)


def test_073_branches_keep_the_073_planner(pi_samples: Path) -> None:
    for name in ("basic", "full", "branchy", "large-2000"):
        index = load_transcript(pi_samples / f"{name}.jsonl")
        assert not is_pi16_branch(index.branch(index.leaf_id))


def test_instructions_survive_compaction_and_successor_rotation(pi16_samples: Path, tmp_path: Path) -> None:
    async def run() -> None:
        path = tmp_path / "modern.jsonl"
        shutil.copy(pi16_samples / "modern.jsonl", path)
        path.chmod(0o600)
        transcript = await TranscriptManager.open(path, clock=FakeClock(now_ms=1_796_200_000_000))
        assert transcript.pi_generation == "1.6"
        before = transcript.build_session_context().messages
        system_before = [m for m in before if isinstance(m, SystemMessage)]
        assert system_before
        outcome = await Compactor(clock=FakeClock(now_ms=1_796_200_000_000)).compact(
            transcript, keep_recent_tokens=200
        )
        entry = outcome.entry
        assert isinstance(entry, CompactionEntry)
        assert isinstance(entry.system_message, SystemMessage)
        after = transcript.build_session_context().messages
        assert isinstance(after[0], SystemMessage)  # the instructions come first, then the summary
        assert after[1].role == "compactionSummary"
        assert "You are a" not in entry.summary  # the system prompt was not summarised as conversation
        successor = await rotate_after_compaction(transcript, clock=FakeClock(now_ms=1_796_200_000_000))
        assert successor is not None
        rotated = load_transcript(successor.path).build_context()
        assert rotated.to_json()["messages"][0] == transcript.build_session_context().to_json()["messages"][0]

    anyio.run(run)


@pytest.mark.oracle
@pytest.mark.parametrize("name", ["modern", "branchy", "full"])
def test_cut_points_equal_pi16_live(pi16_oracle: Pi16Oracle, pi16_samples: Path, name: str) -> None:
    """``--cut-point N`` on leaves spread over the file (every 8th entry and the default leaf)."""
    path = pi16_samples / f"{name}.jsonl"
    index = load_transcript(path)
    ids = [e.id for e in index.entries()]
    compared = 0
    for n, leaf in enumerate(ids[3::8]):
        budget = (0, 500, 2000, 8000)[n % 4]
        expected = pi16_oracle.context(path, leaf=leaf, cut_point=budget)["cutPoint"]
        expected.pop("branchEntryIds", None)
        plan = plan_projected_compaction(index.branch(leaf), keep_recent_tokens=budget)
        got = (
            plan.to_json()
            if plan is not None
            else {
                "keepRecentTokens": budget,
                "skipped": "last entry on branch is a compaction",
                "firstKeptEntryId": None,
            }
        )
        assert got == expected, (leaf, budget)
        compared += 1
    assert compared >= 7


@pytest.mark.oracle
def test_pi16_loads_our_compaction_and_successor_with_our_context(
    pi16_oracle: Pi16Oracle, pi16_samples: Path, tmp_path: Path
) -> None:
    async def run() -> tuple[Path, Path]:
        path = tmp_path / "modern.jsonl"
        shutil.copy(pi16_samples / "modern.jsonl", path)
        path.chmod(0o600)
        transcript = await TranscriptManager.open(path)
        await Compactor().compact(transcript, keep_recent_tokens=300)
        successor = await rotate_after_compaction(transcript)
        assert successor is not None
        return path, successor.path

    compacted, rotated = anyio.run(run)
    for file in (compacted, rotated):
        expected = pi16_oracle.context(file, all_leaves=True)
        index = load_transcript(file)
        assert [leaf for leaf, ctx in expected.items() if index.build_context(leaf).to_json() != ctx] == []
