"""
``prune_history_for_context_share`` equals OpenClaw 2026.7.35's ``pruneHistoryForContextShare`` (issue 11).

OpenClaw runs its full tool-pairing repair on the kept part after each dropped chunk: a displaced result
moves back right after its call, a duplicate is dropped, a call left without a result gets the synthetic
error result, and results whose call was dropped are counted (``droppedOrphanCount``). Fixture:
``tests/data/oracle/history-prune.json.gz`` (``regen_history_prune_fixture.py``).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from sessionkeeper.compaction._chunking import prune_history_for_context_share
from sessionkeeper.pruning import check_tool_pairing
from sessionkeeper.transcript import message_from_json, message_to_builtins


FIXTURE = json.loads(
    gzip.decompress(
        (Path(__file__).resolve().parents[1] / "data" / "oracle" / "history-prune.json.gz").read_bytes()
    )
)
CASES: list[dict[str, Any]] = FIXTURE["cases"]
RESULTS = {r["name"]: r for r in FIXTURE["results"]}
NOW = 1_800_000_000_000


def _run(case: dict[str, Any]) -> Any:
    return prune_history_for_context_share(
        [message_from_json(m) for m in case["messages"]],
        context_window=case["contextWindow"],
        max_history_share=case["maxHistoryShare"],
        parts=case.get("parts", 2),
        timestamp_ms=NOW,
    )


def test_the_fixture_exercises_every_repair() -> None:
    kept = [json.dumps(m) for r in RESULTS.values() for m in r["kept"]]
    assert sum("missing tool result in session history" in m for m in kept) >= 5  # synthetic results
    assert any(r["droppedMessages"] > len(r["dropped"]) for r in RESULTS.values())  # orphans counted
    assert sum(r["droppedChunks"] > 1 for r in RESULTS.values()) >= 3


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_history_prune_equals_openclaw(case: dict[str, Any]) -> None:
    expected = RESULTS[case["name"]]
    result = _run(case)
    assert [message_to_builtins(m) for m in result.kept] == expected["kept"]
    assert [message_to_builtins(m) for m in result.dropped] == expected["dropped"]
    assert result.dropped_chunks == expected["droppedChunks"]
    assert result.dropped_messages == expected["droppedMessages"]
    assert result.dropped_orphans == expected["droppedMessages"] - len(expected["dropped"])
    if result.dropped_chunks:
        assert check_tool_pairing(result.kept) == ()
