"""``sessionkeeper compact`` (DESIGN "CLI JSON" item 6) and pi 0.73.1 loading what we compacted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tests import _pi_oracle
from tests._helpers import run_cli
from tests._pi_oracle import PiOracle

from sessionkeeper.transcript import CompactionEntry
from sessionkeeper.transcript._load import load_transcript


pi_oracle = _pi_oracle.pi_oracle

PLAN_FIELDS = {
    "firstKeptEntryId",
    "isSplitTurn",
    "turnStartEntryId",
    "tokensBefore",
    "messagesToSummarize",
    "turnPrefixMessages",
    "keptMessages",
    "nothingToSummarize",
    "deviation",
    "fileOps",
}


def _copy(pi_samples: Path, tmp_path: Path, name: str) -> Path:
    target = tmp_path / f"{name}.jsonl"
    shutil.copyfile(pi_samples / f"{name}.jsonl", target)
    return target


def test_dry_run_json_fields_and_no_write(pi_samples: Path, tmp_path: Path) -> None:
    file = _copy(pi_samples, tmp_path, "full")
    before = file.read_bytes()
    out = run_cli("compact", str(file), "--dry-run", "--json", "--keep-recent-tokens", "500")
    assert out.exit_code == 0, out.output
    plan = json.loads(out.output)
    assert plan.keys() >= PLAN_FIELDS
    assert plan["firstKeptEntryId"] == "564e6279"  # pi's cut (fixture: full, leaf, 500)
    assert plan["isSplitTurn"] is True and plan["turnStartEntryId"] == "fe935806"
    assert plan["tokensBefore"] == 4070
    assert set(plan["fileOps"]) == {"read", "modified"}
    assert file.read_bytes() == before


def test_dry_run_reports_b05_deviation(tmp_path: Path) -> None:
    lines = [
        {
            "type": "session",
            "version": 3,
            "id": "s-b05",
            "timestamp": "2026-01-05T10:00:00.000Z",
            "cwd": "/p",
        },
    ]
    parent = None

    def add(entry_id: str, message: dict[str, object]) -> None:
        nonlocal parent
        lines.append(
            {
                "type": "message",
                "id": entry_id,
                "parentId": parent,
                "timestamp": "2026-01-05T10:00:01.000Z",
                "message": message,
            }
        )
        parent = entry_id

    add("e1", {"role": "user", "content": "Audit the service logs.", "timestamp": 1})
    add("e2", {"role": "user", "content": "Extra context: " + "x" * 6000, "timestamp": 2})
    add("e3", {"role": "user", "content": "Read the log.", "timestamp": 3})
    add(
        "e4",
        {
            "role": "assistant",
            "content": [{"type": "toolCall", "id": "l1", "name": "read", "arguments": {"path": "a.log"}}],
            "api": "x",
            "provider": "p",
            "model": "m",
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0},
            "stopReason": "toolUse",
            "timestamp": 4,
        },
    )
    add(
        "e5",
        {
            "role": "toolResult",
            "toolCallId": "l1",
            "toolName": "read",
            "content": [{"type": "text", "text": "1" * 12000}],
            "isError": False,
            "timestamp": 5,
        },
    )
    file = tmp_path / "b05.jsonl"
    file.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    out = run_cli("compact", str(file), "--dry-run", "--json", "--keep-recent-tokens", "2000")
    plan = json.loads(out.output)
    assert (
        plan["deviation"] == "B05" and plan["firstKeptEntryId"] == "e3" and plan["piFirstKeptEntryId"] == "e1"
    )


def test_real_run_writes_entry_and_reports_it(pi_samples: Path, tmp_path: Path) -> None:
    file = _copy(pi_samples, tmp_path, "full")
    out = run_cli("compact", str(file), "--json", "--keep-recent-tokens", "500")
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["status"] == "compacted" and data["provider"] == "extractive"
    index = load_transcript(file)
    entry = index.get(data["entryId"])
    assert isinstance(entry, CompactionEntry) and entry.first_kept_entry_id == "564e6279"
    assert data["summaryChars"] == len(entry.summary)
    again = run_cli("compact", str(file), "--json", "--keep-recent-tokens", "500")
    assert again.exit_code == 0 and json.loads(again.output)["status"] == "already_compacted"


def test_missing_file_is_bad_input(tmp_path: Path) -> None:
    out = run_cli("compact", str(tmp_path / "nope.jsonl"), "--dry-run")
    assert out.exit_code == 2


@pytest.mark.oracle
@pytest.mark.parametrize(("name", "keep"), [("full", "500"), ("branchy", None), ("large-2000", "20000")])
def test_pi_loads_our_compacted_file_with_our_context(
    pi_oracle: PiOracle, pi_samples: Path, tmp_path: Path, name: str, keep: str | None
) -> None:
    file = _copy(pi_samples, tmp_path, name)
    args = ["compact", str(file), "--json"] + (["--keep-recent-tokens", keep] if keep else [])
    out = run_cli(*args)
    assert out.exit_code == 0, out.output
    ours = load_transcript(file).build_context().to_json()
    theirs = pi_oracle.context(file)
    assert theirs["messages"] == json.loads(json.dumps(ours["messages"]))
    assert theirs["messages"][0]["role"] == "compactionSummary"
    if keep is None:  # strict checkpoint: the context is the summary alone
        assert len(theirs["messages"]) == 1
