"""``sessionkeeper context``: the tail read for the default leaf prints what the full load prints."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import json_line, run_cli

from sessionkeeper.exceptions import TranscriptFormatError
from sessionkeeper.transcript import load_transcript, message_to_builtins
from sessionkeeper.transcript.file._tail_messages import last_messages_of_index


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSIONKEEPER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")


def _samples(pi_samples: Path, openclaw_samples: Path) -> list[Path]:
    """Every pi sample and OpenClaw's small store; one in 24 of the medium store's 716 transcripts."""
    medium = sorted((openclaw_samples / "medium").rglob("*.jsonl"))[::24]
    others = [p for p in openclaw_samples.rglob("*.jsonl") if "medium" not in p.parts]
    return sorted([*pi_samples.rglob("*.jsonl"), *others, *medium])


def test_default_leaf_output_equals_the_full_load_on_every_sample(
    pi_samples: Path, openclaw_samples: Path
) -> None:
    checked = 0
    for sample in _samples(pi_samples, openclaw_samples):
        try:
            leaf = load_transcript(sample).leaf_id
        except TranscriptFormatError:  # not a transcript: the command says so (bad input)
            assert run_cli("context", str(sample), "--json").exit_code == 2
            continue
        expected = load_transcript(sample).build_context().to_json()
        assert json.loads(run_cli("context", str(sample), "--json").output) == expected, sample
        if load_transcript(sample).migrated:  # ids of a migrated v1/v2 file are new on every load
            continue
        forced = ["--leaf", leaf if leaf is not None else "null"]
        for options in (["--json"], ["--json", "--llm"], []):
            tail = run_cli("context", str(sample), *options)
            full = run_cli("context", str(sample), *options, *forced)
            assert tail.exit_code == full.exit_code == 0, (sample, tail.output)
            assert tail.output == full.output, sample
        checked += 1
    assert checked >= 10


def test_the_default_leaf_does_not_load_the_whole_file(
    pi_samples: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sample = pi_samples / "full.jsonl"
    expected = run_cli("context", str(sample), "--json").output

    def refuse(file: Path) -> Any:
        raise AssertionError("the full loader was used")

    monkeypatch.setattr("sessionkeeper.cli._context._load", refuse)
    assert run_cli("context", str(sample), "--json").output == expected
    with pytest.raises(AssertionError, match="full loader"):
        run_cli("context", str(sample), "--leaf", "null", catch_exceptions=False)  # --leaf: the full load


def _scenario_b(path: Path, turns: int) -> None:
    ts = "2026-01-01T00:00:00.000Z"
    lines = [{"type": "session", "version": 3, "id": "s1", "timestamp": ts, "cwd": "/w"},
             {"type": "thinking_level_change", "id": "t0", "parentId": None, "timestamp": ts,
              "thinkingLevel": "high"}]  # fmt: skip
    parent = "t0"
    for i in range(turns):
        lines.append({"type": "message", "id": f"u{i}", "parentId": parent, "timestamp": ts,
                      "message": {"role": "user", "content": "x" * 2000, "timestamp": i}})  # fmt: skip
        parent = f"u{i}"
    lines.append({"type": "compaction", "id": "c1", "parentId": parent, "timestamp": ts, "summary": "S",
                  "firstKeptEntryId": parent, "tokensBefore": 5})  # fmt: skip
    lines.append({"type": "model_change", "id": "m1", "parentId": "c1", "timestamp": ts, "provider": "p",
                  "modelId": "x"})  # fmt: skip
    path.write_bytes(b"".join(json_line(o, end=b"\n") for o in lines))


def test_settings_at_the_start_through_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    _scenario_b(path, 6000)  # 12 MB: past the tail budget, the ancestry index answers
    for _ in range(2):
        tail = run_cli("context", str(path), "--json")
        full = run_cli("context", str(path), "--json", "--leaf", "m1")
        assert tail.output == full.output
        assert json.loads(tail.output)["thinkingLevel"] == "high"
    assert any((tmp_path / "cache" / "tail-index").iterdir())


def test_last_n_messages(pi_samples: Path) -> None:
    for name in ("basic", "full", "branchy"):
        sample = pi_samples / f"{name}.jsonl"
        index = load_transcript(sample)
        for n in (1, 3, 1000):
            result = run_cli("context", str(sample), "--last", str(n), "--json")
            assert result.exit_code == 0, result.output
            expected = [message_to_builtins(m) for m in last_messages_of_index(index, n)]
            assert json.loads(result.stdout) == {"messages": expected}
            assert result.output.count("\n") == 1
        text = run_cli("context", str(sample), "--last", "2")
        assert text.exit_code == 0
        assert "last 2 messages of the current branch" in text.output
        assert len(text.output.strip().splitlines()) == 3


@pytest.mark.parametrize(
    "args", [["--last", "0"], ["--last", "2", "--leaf", "null"], ["--last", "2", "--json", "--llm"]]
)
def test_last_bad_input_exit_2(pi_samples: Path, args: list[str]) -> None:
    result = run_cli("context", str(pi_samples / "basic.jsonl"), *args)
    assert result.exit_code == 2
    assert "sessionkeeper: error:" in result.output


def test_missing_file_and_fifo_are_bad_input(tmp_path: Path) -> None:
    missing = run_cli("context", str(tmp_path / "nope.jsonl"))
    assert missing.exit_code == 2
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    for args in (["--json"], ["--last", "3"]):
        result = run_cli("context", str(fifo), *args)  # would block forever if it were opened
        assert result.exit_code == 2, result.output
        assert "not a regular file" in result.output
