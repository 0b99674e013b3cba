"""
Compaction planning on transcripts whose ids are JSON numbers (pi spec §13.2): a previous compaction with a
numeric id or ``firstKeptEntryId`` sets the summarised span's start as pi's ``prepareCompaction`` does
(``findIndex(e => e.id === firstKeptEntryId)``), checked against the real pi on the numeric-id fixtures.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests import _pi_oracle
from tests._pi_oracle import PiOracle

from sessionkeeper.compaction import prepare_compaction
from sessionkeeper.transcript import load_transcript
from sessionkeeper.transcript._entries import entry_key, key_to_json


pi_oracle = _pi_oracle.pi_oracle  # the session-scoped fixture, made visible to this module

DATA = Path(__file__).resolve().parent.parent / "data" / "oracle" / "numeric-ids"
BUDGETS = (1, 12, 20_000)


def _plan(file: Path, budget: int):
    index = load_transcript(file)
    return prepare_compaction(index.branch(index.leaf_id), keep_recent_tokens=budget)


def test_numeric_previous_compaction_bounds_the_summarised_span() -> None:
    # 1 2 3 4 [compaction 5, firstKeptEntryId 3] 6: summarising starts at entry 3 (index 2)
    plan = _plan(DATA / "numeric-compaction.jsonl", 1)
    assert plan is not None
    assert plan.boundary_start == 2
    assert plan.previous_summary == "summary keeping from the number 3"
    assert plan.first_kept_entry_id == entry_key(6)
    assert plan.to_json()["firstKeptEntryId"] == 6


def test_string_first_kept_does_not_find_a_numeric_entry() -> None:
    # firstKeptEntryId "3" names no entry (the entry's id is the number 3): start after the compaction
    plan = _plan(DATA / "string-first-kept.jsonl", 1)
    assert plan is not None
    assert plan.boundary_start == 5
    assert plan.previous_summary == "summary keeping from the string 3"


@pytest.mark.oracle
@pytest.mark.parametrize("file", sorted(DATA.glob("*.jsonl")), ids=lambda p: p.stem)
def test_cut_point_and_boundary_equal_pi(pi_oracle: PiOracle, file: Path) -> None:
    for budget in BUDGETS:
        expected = pi_oracle.context(file, cut_point=budget, meta=True)
        cut = expected["cutPoint"]
        plan = _plan(file, budget)
        if plan is None:
            assert "skipped" in cut or expected["meta"]["branchEntryIds"] == [], (file.stem, budget)
            continue
        assert plan.boundary_start == cut["boundaryStart"], (file.stem, budget)
        assert key_to_json(plan.pi_first_kept_entry_id) == cut["firstKeptEntryId"], (file.stem, budget)
        assert plan.tokens_before == expected["meta"]["contextTokens"]["tokens"], (file.stem, budget)
