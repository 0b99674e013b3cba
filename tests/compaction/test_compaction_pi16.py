"""Compaction on pi 1.6 files (issue 18): the planner reads every pi 1.6 entry type."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionkeeper.compaction import prepare_compaction
from sessionkeeper.transcript import load_transcript


NAMES = ["basic", "full", "branchy", "modern", "large-2000"]


@pytest.mark.parametrize("name", NAMES)
def test_compaction_plans_a_pi16_file(pi16_samples: Path, name: str) -> None:
    """The typed usage and context-edit entries have a kind for the planner (it raised KeyError)."""
    index = load_transcript(pi16_samples / f"{name}.jsonl")
    plan = prepare_compaction(index.branch(index.leaf_id), keep_recent_tokens=2000)
    assert plan is not None
    assert plan.first_kept_entry_id in {e.id for e in index.branch(index.leaf_id)}
