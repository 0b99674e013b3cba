"""``sessionkeeper sessions cleanup`` (DESIGN "CLI JSON" item 6): flags, JSON fields, exit codes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import click
import pytest
from tests._helpers import cli_output

from sessionkeeper.cli._cleanup import parse_now


SAMPLES = Path(__file__).resolve().parent.parent / "data" / "openclaw"
NOW = "1789992000000"


def _sample(tmp_path: Path, name: str = "small") -> Path:
    target = tmp_path / "agents" / "ops" / "sessions"
    shutil.copytree(SAMPLES / name, target)
    for file, ms in json.loads((SAMPLES / f"{name}.mtimes.json").read_text())["files"].items():
        if (target / file).exists():
            os.utime(target / file, ns=(int(ms * 1e6), int(ms * 1e6)))
    return target


def test_enforce_json_has_openclaws_fields_and_values(tmp_path):
    store = _sample(tmp_path)
    code, out = cli_output(
        "sessions",
        "cleanup",
        "--store",
        str(store),
        "--enforce",
        "--now",
        NOW,
        "--active-key",
        "agent:main:main",
        "--json",
        stdout=True,
    )
    assert code == 0
    data = json.loads(out)
    expected = json.loads((SAMPLES / "small.enforce.json").read_text())["summary"]
    for field in (
        "mode", "dryRun", "beforeCount", "afterCount", "modelRunPruned", "pruned", "capped",
        "unreferencedArtifacts", "diskBudget", "wouldMutate", "applied", "appliedCount",
    ):  # fmt: skip
        assert data[field] == expected[field], field
    assert data["agentId"] == "ops"
    assert data["actions"]["agent:main:direct:erin346"] == "prune-stale"
    assert data["actions"]["agent:main:main"] == "keep"
    assert data["droppedOnLoad"] == ["agent:main:signal:direct:485165954"]


def test_fix_missing_matches_openclaw(tmp_path):
    store = _sample(tmp_path)
    args = (
        "--store",
        str(store),
        "--enforce",
        "--fix-missing",
        "--now",
        NOW,
        "--active-key",
        "agent:main:main",
    )
    code, out = cli_output("sessions", "cleanup", *args, "--json", stdout=True)
    assert code == 0
    data = json.loads(out)
    expected = json.loads((SAMPLES / "small.enforce-fix-missing.json").read_text())
    for field in ("beforeCount", "afterCount", "missing", "pruned", "unreferencedArtifacts"):
        assert data[field] == expected["summary"][field], field
    assert [k for k, a in data["actions"].items() if a == "prune-missing"] == expected["preview"]["missing"]
    assert list(json.loads((store / "sessions.json").read_text())) == expected["entries"]["keysAfter"]


def test_dry_run_changes_nothing_and_reports_the_enforce_plan(tmp_path):
    store = _sample(tmp_path)
    before = {n: (store / n).read_bytes() for n in os.listdir(store)}
    code, out = cli_output(
        "sessions",
        "cleanup",
        "--store",
        str(store),
        "--dry-run",
        "--now",
        "2026-09-21T12:00:00Z",
        "--json",
        stdout=True,
    )
    assert code == 0
    data = json.loads(out)
    assert data["dryRun"] is True
    assert "applied" not in data
    assert data["pruned"] == 6
    after = {n: (store / n).read_bytes() for n in os.listdir(store) if n != "sessions.json.lock"}
    assert after == before


def test_configured_warn_mode_applies_nothing_unless_enforced(tmp_path):
    store = _sample(tmp_path)
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps({"session": {"maintenance": {"mode": "warn"}}}))
    code, out = cli_output(
        "sessions",
        "cleanup",
        "--store",
        str(store),
        "--config",
        str(config),
        "--now",
        NOW,
        "--json",
        stdout=True,
    )
    assert code == 0
    data = json.loads(out)
    assert data["mode"] == "warn"
    assert "applied" not in data
    assert data["pruned"] == 6  # what enforce would do
    assert "agent:main:direct:erin346" in json.loads((store / "sessions.json").read_text())
    code, out = cli_output(
        "sessions",
        "cleanup",
        "--store",
        str(store),
        "--config",
        str(config),
        "--now",
        NOW,
        "--enforce",
        "--json",
        stdout=True,
    )
    assert code == 0
    assert json.loads(out)["applied"] is True
    assert "agent:main:direct:erin346" not in json.loads((store / "sessions.json").read_text())


def test_human_output_lists_actions(tmp_path):
    store = _sample(tmp_path)
    code, out = cli_output(
        "sessions", "cleanup", "--store", str(store), "--dry-run", "--now", NOW, stdout=True
    )
    assert code == 0
    assert "prune-stale" in out
    assert "entries 19 -> 13" in out


def test_bad_input_exit_codes(tmp_path):
    store = _sample(tmp_path)
    code, _ = cli_output("sessions", "cleanup", "--store", str(store), "--now", "yesterday", stdout=True)
    assert code == 2
    code, _ = cli_output("sessions", "cleanup", "--store", str(tmp_path / "missing"), stdout=True)
    assert code == 2
    (store / "sessions.json").write_text("[1, 2]")
    code, _ = cli_output("sessions", "cleanup", "--store", str(store), "--now", NOW, stdout=True)
    assert code == 1  # StoreCorruptError


def test_parse_now():
    assert parse_now("1789992000000") == 1789992000000
    assert parse_now("2026-09-21T12:00:00Z") == 1789992000000
    assert parse_now("2026-09-21T14:00:00+02:00") == 1789992000000
    assert parse_now("2026-09-21T12:00:00") == 1789992000000
    with pytest.raises(click.BadParameter, match="ISO"):
        parse_now("soon")


def test_unsafe_rows_alone_dry_run_and_enforce_agree_with_the_file(tmp_path):
    """Break-it #1: dropping unsafe rows was reported but the file kept them when nothing else changed."""
    oracle = Path(__file__).resolve().parent.parent / "data" / "oracle" / "maintenance"
    store = tmp_path / "agents" / "main" / "sessions"
    shutil.copytree(oracle / "unsafe", store)
    original = (store / "sessions.json").read_bytes()
    code, out = cli_output(
        "sessions",
        "cleanup",
        "--store",
        str(store),
        "--dry-run",
        "--enforce",
        "--now",
        NOW,
        "--json",
        stdout=True,
    )
    assert code == 0
    dry = json.loads(out)
    assert (store / "sessions.json").read_bytes() == original
    code, out = cli_output(
        "sessions", "cleanup", "--store", str(store), "--enforce", "--now", NOW, "--json", stdout=True
    )
    assert code == 0
    real = json.loads(out)
    for field in ("actions", "droppedOnLoad", "files", "bytesAfter", "beforeCount", "afterCount"):
        assert dry[field] == real[field], field
    kept = [key for key, action in real["actions"].items() if action == "keep"]
    assert list(json.loads((store / "sessions.json").read_text())) == kept
    expected = json.loads((oracle / "unsafe.enforce.json").read_text())
    assert kept == expected["entries"]["keysAfter"]
    assert sorted(real["droppedOnLoad"]) == sorted(expected["entries"]["droppedOnLoad"])
    on_disk = sum(p.stat().st_size for p in store.iterdir() if not p.name.startswith("sessions.json."))
    assert on_disk == real["bytesAfter"] == expected["files"]["bytesAfter"]
