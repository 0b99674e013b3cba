"""``sessionkeeper context --json`` on pi 1.6 files prints pi 1.6.0's context, without flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests._helpers import run_cli

from sessionkeeper.records import CompactionEntry
from sessionkeeper.transcript import load_transcript


NAMES = ["basic", "full", "branchy", "modern", "large-2000"]


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSIONKEEPER_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("name", NAMES)
def test_context_json_default_leaf_is_pi16s(pi16_samples: Path, name: str) -> None:
    """The default leaf goes through the tail read: the same context as pi 1.6.0 (``--llm`` too)."""
    result = run_cli("context", str(pi16_samples / f"{name}.jsonl"), "--json", "--llm")
    assert result.exit_code == 0, result.output
    golden = json.loads((pi16_samples / f"{name}.context.json").read_text("utf-8"))
    assert json.loads(result.stdout) == golden


def test_context_json_on_compactions_and_retain_none_is_pi16s(pi16_samples: Path, tmp_path: Path) -> None:
    """At each compaction of ``modern`` (a pi compaction and a retain-none one), cut as the file's last
    entry so the tail read rebuilds it: pi 1.6.0's context (system message, then summary)."""
    source = pi16_samples / "modern.jsonl"
    golden = json.loads((pi16_samples / "modern.all-leaves.json").read_text("utf-8"))
    index = load_transcript(source)
    lines = source.read_bytes().splitlines(keepends=True)
    compactions = [(n, e) for n, e in enumerate(index.entries()) if isinstance(e, CompactionEntry)]
    assert [e.retains_none for _, e in compactions] == [False, True]
    for n, entry in compactions:
        cut = tmp_path / f"upto-{entry.id}.jsonl"
        cut.write_bytes(b"".join(lines[: n + 2]))  # the header and entries 0..n
        result = run_cli("context", str(cut), "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout) == golden[entry.id]
        assert json.loads(result.stdout)["messages"][0]["role"] == "system"
