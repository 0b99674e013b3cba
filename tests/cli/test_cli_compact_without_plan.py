"""``compact`` with nothing to compact: exit 0, says why, every plan field present, nothing written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tests._helpers import run_cli


_HEADER = '{"type":"session","version":3,"id":"s1","timestamp":"2026-01-05T10:00:00.000Z","cwd":"/p"}'
_USER = (
    '{"type":"message","id":"e1","parentId":null,"timestamp":"2026-01-05T10:00:01.000Z",'
    '"message":{"role":"user","content":"hello there","timestamp":1}}'
)
_COMPACTION = (
    '{"type":"compaction","id":"c1","parentId":"e1","timestamp":"2026-01-05T10:00:02.000Z",'
    '"summary":"s","firstKeptEntryId":"e1","tokensBefore":3}'
)
_DESIGN_PLAN_FIELDS = {
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


@pytest.mark.parametrize(
    ("lines", "keep", "status"),
    [
        ([_HEADER], None, "empty"),
        ([_HEADER, _USER, _COMPACTION], None, "already_compacted"),
        ([_HEADER, _USER], "100000", "nothing_to_summarize"),
    ],
)
@pytest.mark.parametrize("dry_run", [True, False])
def test_nothing_to_compact_appends_nothing_says_why_exits_0(
    tmp_path: Path, lines: list[str], keep: str | None, status: str, dry_run: bool
) -> None:
    file = tmp_path / "t.jsonl"
    file.write_text("\n".join(lines) + "\n")
    before = file.read_bytes()
    args = ["compact", str(file), "--json"]
    args += ["--keep-recent-tokens", keep] if keep is not None else []
    args += ["--dry-run"] if dry_run else []
    run = run_cli(*args)
    assert run.exit_code == 0, run.output
    data = json.loads(run.stdout)
    assert data["status"] == ("planned" if dry_run and status == "nothing_to_summarize" else status)
    assert data["nothingToSummarize"] is True
    assert data["reason"]
    assert data.keys() >= _DESIGN_PLAN_FIELDS
    assert file.read_bytes() == before


def _compact_json(path: Path, *args: str) -> dict[str, object]:
    result = run_cli("compact", str(path), "--json", *args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def test_compact_json_has_every_plan_field_even_without_a_plan(tmp_path: Path, pi_samples: Path) -> None:
    # docs/compaction.md: "the plan fields are present even without a plan (nulls and zeros)"; keptTokens,
    # keepRecentTokens, piFirstKeptEntryId, strictCheckpoint and pendingToolCallIds were missing.
    path = tmp_path / "s.jsonl"
    shutil.copyfile(pi_samples / "full.jsonl", path)
    planned = _compact_json(path, "--dry-run", "--keep-recent-tokens", "500")
    written = _compact_json(path, "--keep-recent-tokens", "500")
    plan_fields = set(planned) - {"status", "reason"}
    for args in (("--dry-run",), ()):
        again = _compact_json(path, *args)
        assert again["status"] == "already_compacted"
        assert plan_fields <= set(again), plan_fields - set(again)
        assert again["keptTokens"] == 0 and again["pendingToolCallIds"] == []
        assert again["piFirstKeptEntryId"] is None and again["strictCheckpoint"] is False
    assert set(written) - {"reason"} <= set(_compact_json(path)) | {"hookErrors", "successor"}
