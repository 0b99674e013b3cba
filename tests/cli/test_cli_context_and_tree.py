"""``sessionkeeper context`` and ``sessionkeeper tree``: JSON identical to pi, exit codes, readable views."""

from __future__ import annotations

import json
from pathlib import Path

from tests._helpers import run_cli


def test_context_json_equals_pi_golden(pi_samples: Path) -> None:
    for name in ("basic", "full", "branchy"):
        result = run_cli(
            "context", str(pi_samples / f"{name}.jsonl"), "--json", "--llm", catch_exceptions=False
        )
        assert result.exit_code == 0, result.output
        golden = json.loads((pi_samples / f"{name}.context.json").read_text("utf-8"))
        assert json.loads(result.stdout) == golden
        assert result.output.count("\n") == 1


def test_context_leaf_option(pi_samples: Path) -> None:
    file = str(pi_samples / "branchy.jsonl")
    leaves = json.loads((pi_samples / "branchy.all-leaves.json").read_text("utf-8"))
    leaf_id = next(iter(leaves))
    result = run_cli("context", file, "--json", "--leaf", leaf_id, catch_exceptions=False)
    assert json.loads(result.stdout) == leaves[leaf_id]
    empty = run_cli("context", file, "--json", "--leaf", "null", catch_exceptions=False)
    assert json.loads(empty.output) == {"messages": [], "thinkingLevel": "off", "model": None}


def test_context_bad_input_exit_2(tmp_path: Path, pi_samples: Path) -> None:
    unknown = run_cli("context", str(pi_samples / "basic.jsonl"), "--leaf", "nope")
    assert unknown.exit_code == 2
    assert "nope" in unknown.output
    missing = run_cli("context", str(tmp_path / "missing.jsonl"))
    assert missing.exit_code == 2
    bogus = tmp_path / "bogus.jsonl"
    bogus.write_text('{"type":"message"}\n')
    bad = run_cli("context", str(bogus), "--json")
    assert bad.exit_code == 2
    assert str(bogus) in bad.output
    assert bogus.read_text() == '{"type":"message"}\n'


def test_context_human_view(pi_samples: Path) -> None:
    result = run_cli("context", str(pi_samples / "full.jsonl"), catch_exceptions=False)
    assert result.exit_code == 0
    assert "20 messages" in result.output
    assert "thinking medium" in result.output
    assert "toolResult" in result.output


def test_tree_marks_leaf_and_labels(pi_samples: Path) -> None:
    result = run_cli("tree", str(pi_samples / "full.jsonl"), catch_exceptions=False)
    assert result.exit_code == 0
    meta = json.loads((pi_samples / "full.meta.json").read_text("utf-8"))["meta"]
    assert f"{meta['leafId']}" in result.output
    assert "◀ leaf" in result.output
    for label in meta["labels"].values():
        assert label in result.output
    assert "Fix failing math tests" in result.output


def test_tree_reports_findings_on_stderr(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}\n'
        '{"type":"custom","customType":"x","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z"}\n'
        '{"type":"cus'
    )
    result = run_cli("tree", str(path))
    assert result.exit_code == 0
    assert "custom [x]" in result.output
    assert "tornTail" in result.output
