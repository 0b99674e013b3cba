"""Regressions found by following the README and the guides as a new user (brkz)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from sessionkeeper.cli._main import cli
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.store import SessionStore


def test_demo_never_overwrites_files_in_a_used_workdir(tmp_path: Path) -> None:
    # `demo --workdir DIR` used to copy the samples over DIR/sessions/basic.jsonl and friends.
    workdir = tmp_path / "work"
    (workdir / "sessions").mkdir(parents=True)
    mine = workdir / "sessions" / "basic.jsonl"
    mine.write_bytes(b"precious\n")
    result = CliRunner().invoke(cli, ["demo", "--json", "--workdir", str(workdir)])
    assert result.exit_code == 2
    assert "not empty" in result.stderr
    assert result.stderr.count("\n") == 1
    assert mine.read_bytes() == b"precious\n"
    assert sorted(p.name for p in workdir.rglob("*")) == ["basic.jsonl", "sessions"]


def test_demo_accepts_an_existing_empty_workdir(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["demo", "--json", "--workdir", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "sessions" / "basic.jsonl").is_file()


def _compact_json(path: Path, *args: str) -> dict[str, object]:
    result = CliRunner().invoke(cli, ["compact", str(path), "--json", *args], catch_exceptions=False)
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


def test_store_that_is_another_file_is_bad_input(tmp_path: Path) -> None:
    # `--store FILE` (not sessions.json / sessions.sqlite) failed with a bare NotADirectoryError, exit 1.
    other = tmp_path / "notes.txt"
    other.write_text("x")
    for args in (["sessions", "list"], ["status", "k"], ["sessions", "cleanup", "--dry-run"]):
        result = CliRunner().invoke(cli, [*args[:2], "--store", str(other), *args[2:]])
        assert result.exit_code == 2, (args, result.output)
        assert "not a sessions directory" in result.stderr
    assert other.read_text() == "x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_session_store_open_refuses_another_file(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("x")
    with pytest.raises(ConfigError, match="not a sessions directory"):
        SessionStore.open(other)
