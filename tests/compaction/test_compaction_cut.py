"""Cut points equal pi 0.73.1's ``findCutPoint`` (pi spec §13.3): golden fixtures, live oracle, rules."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from tests import _pi_oracle
from tests._pi_oracle import PiOracle

from sessionkeeper.compaction import find_cut_point, find_turn_start_index, is_cut_point, prepare_compaction
from sessionkeeper.transcript import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomMessageEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    TextContent,
    ToolResultMessage,
    TranscriptEntry,
    UserMessage,
)
from sessionkeeper.transcript._load import TranscriptIndex, load_transcript


pi_oracle = _pi_oracle.pi_oracle

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parent / "data" / "pi"
FIXTURE = json.loads((HERE / "data" / "cut_points.json").read_text(encoding="utf-8"))


@functools.cache
def _index(name: str) -> TranscriptIndex:
    return load_transcript(SAMPLES / f"{name}.jsonl")


def _branch(name: str, leaf: str) -> list[TranscriptEntry]:
    index = _index(name)
    return index.branch(leaf or index.leaf_id)


def _boundary(branch: list[TranscriptEntry]) -> int:
    previous = max((i for i, e in enumerate(branch) if isinstance(e, CompactionEntry)), default=-1)
    if previous < 0:
        return 0
    kept = branch[previous]
    assert isinstance(kept, CompactionEntry)
    found = next((i for i, e in enumerate(branch) if e.id == kept.first_kept_entry_id), -1)
    return found if found >= 0 else previous + 1


CASES = [
    (name, leaf, budget)
    for name, leaves in sorted(FIXTURE.items())
    for leaf, budgets in sorted(leaves.items())
    for budget in sorted(budgets, key=int)
]


@pytest.mark.parametrize(
    ("name", "leaf", "budget"), CASES, ids=[f"{n}-{lf or 'leaf'}-{b}" for n, lf, b in CASES]
)
def test_cut_point_equals_pi_on_samples(name: str, leaf: str, budget: str) -> None:
    expected = FIXTURE[name][leaf][budget]
    branch = _branch(name, leaf)
    if "skipped" in expected:  # pi: the branch already ends with a compaction
        assert isinstance(branch[-1], CompactionEntry)
        assert prepare_compaction(branch, keep_recent_tokens=int(budget)) is None
        return
    start = _boundary(branch)
    assert start == expected["boundaryStart"]
    cut = find_cut_point(branch, keep_recent_tokens=int(budget), start_index=start)
    assert cut.first_kept_entry_index == expected["firstKeptEntryIndex"]
    assert branch[cut.first_kept_entry_index].id == expected["firstKeptEntryId"]
    assert cut.turn_start_index == expected["turnStartIndex"]
    assert cut.is_split_turn == expected["isSplitTurn"]
    plan = prepare_compaction(branch, keep_recent_tokens=int(budget))
    assert plan is not None
    assert plan.pi_first_kept_entry_id == expected["firstKeptEntryId"]
    if plan.deviation is None:
        assert plan.first_kept_entry_id == expected["firstKeptEntryId"]


def test_fixture_covers_many_budgets_and_leaves() -> None:
    assert len(CASES) >= 300
    assert {name for name, _, _ in CASES} == {"basic", "full", "branchy", "large-2000"}
    assert any(FIXTURE[n][lf][b].get("isSplitTurn") for n, lf, b in CASES)


def test_meta_golden_cut_point_at_20000(pi_samples: Path) -> None:
    for name in ("basic", "full", "branchy", "large-2000"):
        meta = json.loads((pi_samples / f"{name}.meta.json").read_text(encoding="utf-8"))
        expected = meta["cutPoint"]
        branch = load_transcript(pi_samples / f"{name}.jsonl").branch(meta["meta"]["leafId"])
        cut = find_cut_point(branch, keep_recent_tokens=20000, start_index=expected["boundaryStart"])
        assert branch[cut.first_kept_entry_index].id == expected["firstKeptEntryId"]
        assert cut.is_split_turn == expected["isSplitTurn"]
        plan = prepare_compaction(branch, keep_recent_tokens=20000)
        assert plan is not None
        assert plan.tokens_before == meta["meta"]["contextTokens"]["tokens"]


@pytest.mark.oracle
@pytest.mark.parametrize("budget", [333])
def test_cut_point_live_against_pi(pi_oracle: PiOracle, budget: int) -> None:
    for name in ("full", "branchy"):
        sample = SAMPLES / f"{name}.jsonl"
        expected = pi_oracle.context(sample, cut_point=budget)["cutPoint"]
        index = load_transcript(sample)
        branch = index.branch(index.leaf_id)
        cut = find_cut_point(branch, keep_recent_tokens=budget, start_index=expected["boundaryStart"])
        assert branch[cut.first_kept_entry_index].id == expected["firstKeptEntryId"]
        assert cut.turn_start_index == expected["turnStartIndex"]
        assert cut.is_split_turn == expected["isSplitTurn"]


# --------------------------------------------------------------------------- rules of pi spec §13.3


def _user(i: str, parent: str | None, text: str) -> MessageEntry:
    return MessageEntry(
        id=i,
        parent_id=parent,
        timestamp="2026-01-05T10:00:00.000Z",
        message=UserMessage(content=text, timestamp=0),
    )


def _result(i: str, parent: str, text: str) -> MessageEntry:
    message = ToolResultMessage(tool_call_id="c", tool_name="read", content=[TextContent(text=text)])
    return MessageEntry(id=i, parent_id=parent, timestamp="2026-01-05T10:00:00.000Z", message=message)


def test_tool_result_is_never_a_cut_point() -> None:
    assert not is_cut_point(_result("r", "a", "x"))
    assert is_cut_point(_user("u", None, "x"))
    summary = BranchSummaryEntry(id="b", parent_id=None, timestamp="t", from_id="root", summary="")
    assert is_cut_point(summary)
    custom = CustomMessageEntry(
        custom_type="k", content="x", display=True, id="m", parent_id=None, timestamp="t"
    )
    assert is_cut_point(custom)
    label = LabelEntry(id="l", parent_id=None, timestamp="t", target_id="u")
    assert not is_cut_point(label)


def test_no_cut_point_keeps_start() -> None:
    branch = [_result("r1", "x", "a" * 400), _result("r2", "r1", "b" * 400)]
    cut = find_cut_point(branch, keep_recent_tokens=10)
    assert (cut.first_kept_entry_index, cut.turn_start_index, cut.is_split_turn) == (0, -1, False)


def test_budget_reached_cuts_at_next_valid_point_and_extends_over_settings() -> None:
    branch: list[TranscriptEntry] = [
        _user("u1", None, "a" * 400),  # 100 tokens
        ModelChangeEntry(id="m1", parent_id="u1", timestamp="t", provider="p", model_id="x"),
        _user("u2", "m1", "b" * 400),  # 100 tokens
        _user("u3", "u2", "c" * 400),  # 100 tokens
    ]
    # 100 (u3) < 150; 200 at u2 >= 150: cut at u2, extended back over the model change.
    cut = find_cut_point(branch, keep_recent_tokens=150)
    assert cut.first_kept_entry_index == 1
    # pi quirk: the cut was extended onto a non-message entry, so it reports a split turn from u1.
    assert cut.is_split_turn and cut.turn_start_index == 0


def test_budget_never_reached_keeps_everything() -> None:
    branch = [_user("u1", None, "short"), _user("u2", "u1", "short")]
    cut = find_cut_point(branch, keep_recent_tokens=10_000)
    assert cut.first_kept_entry_index == 0 and cut.budget_index is None


def test_turn_start_index_finds_user_or_custom_message() -> None:
    branch: list[TranscriptEntry] = [
        _user("u1", None, "q"),
        CustomMessageEntry(
            custom_type="k", content="x", display=False, id="c1", parent_id="u1", timestamp="t"
        ),
        _result("r1", "c1", "x"),
    ]
    assert find_turn_start_index(branch, entry_index=2) == 1
    assert find_turn_start_index(branch, entry_index=0) == 0
    assert find_turn_start_index(branch, entry_index=2, start_index=2) == -1
