"""
The demo as a newcomer reads it (issue 11): the same report in every run, every number explained, and a
plain word on whether the work files are kept.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import run_cli

from sessionkeeper.runtime import ModelInfo, SessionRuntime
from sessionkeeper.store import SessionStore


PIPE = {"TTY_COMPATIBLE": None, "FORCE_COLOR": None, "COLUMNS": "100"}


def _demo(*args: str) -> str:
    result = run_cli("demo", *args, env=PIPE, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_two_runs_print_the_same_report() -> None:
    first, second = _demo(), _demo()
    assert first == second
    assert "sessionkeeper-demo-" not in first  # the temporary directory is never named
    assert "<workdir>/sessions" in first


def test_two_json_runs_give_the_same_document() -> None:
    first, second = _demo("--json"), _demo("--json")
    assert first == second
    report = json.loads(first)
    assert report["workdir"] is None and report["workdirKept"] is False
    compaction = next(s for s in report["steps"] if s["name"] == "compaction")
    legacy = next(r for r in compaction["rows"] if r["transcript"] == "v1-legacy")
    assert legacy["firstKeptEntryId"].startswith("#")  # a position: the v1 file has no ids on disk


def _numeric_columns(step: dict[str, Any]) -> set[str]:
    return {
        key
        for row in step["rows"]
        for key, value in row.items()
        if isinstance(value, int | float) and key not in ("transcript", "turn")
    }


def test_every_number_in_a_table_is_explained() -> None:
    report = json.loads(_demo("--json"))
    for step in report["steps"]:
        explained = {note.split(":", 1)[0] for note in step["notes"]}
        explained |= {part.strip() for name in list(explained) for part in name.split(",")}
        missing = _numeric_columns(step) - explained
        assert not missing, f"step {step['name']}: no note for {sorted(missing)}"
    context = next(s for s in report["steps"] if s["name"] == "context")
    notes = "\n".join(context["notes"])
    assert "contextTokens: " in notes and "charsOver4: " in notes
    compaction = next(s for s in report["steps"] if s["name"] == "compaction")
    summary_note = next(n for n in compaction["notes"] if n.startswith("summaryChars:"))
    assert "summarized 0" in summary_note  # why "summarized 0 / summaryChars 394" is no contradiction


def test_the_report_says_the_temporary_workdir_is_removed() -> None:
    out = _demo()
    assert out.splitlines()[0].startswith("workdir: a temporary directory (shown as <workdir>), removed")
    assert out.rstrip().endswith(
        "work files removed (they were in a temporary directory); --workdir DIR keeps them"
    )


def test_the_report_says_a_given_workdir_is_kept(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    out = _demo("--workdir", str(workdir))
    assert out.splitlines()[0] == f"workdir: {workdir}, kept after the demo"
    assert f"copied 4 bundled sample transcripts to {workdir / 'sessions'}" in out  # real paths when kept
    assert out.rstrip().endswith(f"work files kept in {workdir}")
    assert (workdir / "sessions" / "basic.jsonl").is_file()
    report = json.loads(_demo("--json", "--workdir", str(tmp_path / "other")))
    assert report["workdirKept"] is True


@pytest.mark.anyio
async def test_the_runtime_takes_new_session_ids_from_the_store_factory(tmp_path: Path) -> None:
    ids = iter(["00000000-0000-4000-8000-000000000007"])
    async with SessionStore.open(tmp_path, new_session_id=lambda: next(ids)) as store:
        runtime = SessionRuntime(
            store, model=ModelInfo(provider="anthropic", model_id="m", context_window=8000)
        )
        session = await runtime.open("agent:main:main", body="hi")
        assert session.entry.session_id == "00000000-0000-4000-8000-000000000007"
        assert (tmp_path / "00000000-0000-4000-8000-000000000007.jsonl").is_file()


_PRUNED = re.compile(
    r"pruned (\d+) soft-trimmed, (\d+) hard-cleared, (\d+) re-applied tool results \((\d+) -> (\d+) chars\)"
)


def test_the_runtime_pruning_events_explain_every_shrink() -> None:
    runtime = next(s for s in json.loads(_demo("--json"))["steps"] if s["name"] == "runtime")
    events = [row for row in runtime["rows"] if row["kind"] == "pruning"]
    assert events
    decided: dict[str, int] = {}
    only_reapplied = 0
    for row in events:
        found = _PRUNED.fullmatch(row["what"])
        assert found is not None, row["what"]
        soft, hard, again, before, after = map(int, found.groups())
        assert after < before  # a pruning row is a call whose context shrank ...
        assert soft + hard + again > 0, row  # ... and its counts say by what
        # only results pruned on an earlier call of the session can be re-applied (D11)
        assert again <= decided.get(row["session"], 0), row
        decided[row["session"]] = decided.get(row["session"], 0) + soft + hard
        assert ("D11" in row["why"]) == (again > 0)
        assert ("TTL expired" in row["why"]) == (soft + hard > 0)
        only_reapplied += soft + hard == 0
    assert only_reapplied > 0  # the case that read "pruned 0 soft-trimmed, 0 hard-cleared"
    notes = " ".join(runtime["notes"])
    assert "re-applied" in notes
