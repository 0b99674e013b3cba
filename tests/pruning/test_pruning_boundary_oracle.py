"""
Pruning at the thresholds equals OpenClaw 2026.7.35's, for every tool-result shape (issue 11).

Fixture: ``tests/data/oracle/prune-boundary.json.gz``, written by ``tests/pruning/regen_prune_fixtures.py``
from ``tools/openclaw-oracle/prune.mjs``: per shape, a session of six large ``read`` results, and cases
whose context ratio lies within 2 weighted chars of ``softTrimRatio`` (0.3) and, after the soft trims, of
``hardClearRatio`` (0.5).
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from sessionkeeper._config import load_config
from sessionkeeper.pruning import Pruner, PruningSettings, estimate_message_chars
from sessionkeeper.pruning._settings import DEFAULT_HARD_CLEAR_PLACEHOLDER
from sessionkeeper.records import js_number_to_string
from sessionkeeper.transcript import message_from_json, message_to_builtins


DATA = Path(__file__).resolve().parents[1] / "data" / "oracle"
FIXTURE = json.loads(gzip.decompress((DATA / "prune-boundary.json.gz").read_bytes()))
SESSIONS: dict[str, list[dict[str, Any]]] = FIXTURE["sessions"]
CASES: list[dict[str, Any]] = FIXTURE["cases"]
RESULTS = {r["name"]: r for r in FIXTURE["results"]}


def _messages(case: dict[str, Any]) -> list[dict[str, Any]]:
    pad = {"role": "user", "content": "p" * case["padChars"], "timestamp": 1_796_000_000_999}
    return [*SESSIONS[case["session"]], pad]


def _prune(case: dict[str, Any]) -> tuple[list[Any], Any]:
    config = load_config({"agents": {"defaults": {"contextPruning": case["config"]}}})
    messages = [message_from_json(m) for m in _messages(case)]
    result = Pruner(settings=PruningSettings.from_config(config)).prune(
        messages,
        context_window_tokens=case["contextWindow"],
        last_cache_touch_at=1,
        provider="anthropic",
        model_id="claude-sonnet-4-5",
        api="anthropic-messages",
        now_ms=1_900_000_000_000,
    )
    return messages, result


def _hard_cleared(result: dict[str, Any]) -> int:
    return sum(
        1
        for message in result["changedMessages"].values()
        if message["content"] == [{"type": "text", "text": DEFAULT_HARD_CLEAR_PLACEHOLDER}]
    )


def test_every_shape_has_cases_that_straddle_openclaws_thresholds() -> None:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for case in CASES:
        threshold = "soft" if "-soft" in case["name"] else "hard"
        groups[case["session"], threshold].append(RESULTS[case["name"]])
    assert len(SESSIONS) >= 12 and len(groups) == 2 * len(SESSIONS)
    for (shape, threshold), results in groups.items():
        if threshold == "soft":  # OpenClaw leaves everything below, prunes from the threshold on
            flips = {r["changed"] for r in results}
        else:  # the soft trims happen on both sides; the hard clear only from the threshold on
            flips = {_hard_cleared(r) > 0 for r in results}
        assert flips == {False, True}, f"{shape}/{threshold} does not straddle OpenClaw's threshold"


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_pruning_at_the_thresholds_equals_openclaw(case: dict[str, Any]) -> None:
    expected = RESULTS[case["name"]]
    messages, result = _prune(case)
    assert len(result.messages) == expected["messageCount"]
    changed = [i for i, (a, b) in enumerate(zip(messages, result.messages, strict=True)) if a is not b]
    assert changed == expected["changedIndexes"]
    assert result.changed == expected["changed"]
    for index in changed:
        assert message_to_builtins(result.messages[index]) == expected["changedMessages"][str(index)]


def test_tool_call_numbers_are_counted_as_javascript_writes_them() -> None:
    """
    OpenClaw counts a tool call as ``JSON.stringify(arguments).length``: ``1.0`` is ``1``, ``2000.0``
    is ``2000``, ``1e21`` is ``1e+21``. The fixture's numbers were written by Node.
    """
    numbers: list[list[str]] = FIXTURE["numbers"]
    assert len(numbers) > 1000
    for python_repr, javascript in numbers:
        assert js_number_to_string(float(python_repr)) == javascript, python_repr
    call = {"offset": 1.0, "limit": 2000.0, "scale": [1e21, -0.0, 7]}
    message = message_from_json(
        {
            "role": "assistant",
            "content": [{"type": "toolCall", "id": "c1", "name": "read", "arguments": call}],
            "stopReason": "toolUse",
            "timestamp": 1,
        }
    )
    assert estimate_message_chars(message) == len('{"offset":1,"limit":2000,"scale":[1e+21,0,7]}')
