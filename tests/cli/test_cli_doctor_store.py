"""
``doctor`` as an operator uses it on a sessions directory (issue 11): every file reported even when one
cannot be read, the store checked too, and a store file given where a transcript is expected recognised.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from tests._helpers import run_cli


NOW = 1_790_000_000_000
PIPE = {"TTY_COMPATIBLE": None, "FORCE_COLOR": None}


def _sessions(tmp_path: Path, pi_samples: Path, store: dict[str, object] | None) -> Path:
    directory = tmp_path / "agents" / "main" / "sessions"
    directory.mkdir(parents=True)
    for name in ("basic", "branchy", "full"):
        shutil.copyfile(pi_samples / f"{name}.jsonl", directory / f"{name}-id.jsonl")
    if store is not None:
        (directory / "sessions.json").write_text(json.dumps(store, indent=2))
    return directory


def _unreadable(path: Path) -> None:
    """A transcript that cannot be read, also by root: a link to this process's memory (EIO at offset 0)."""
    if not Path("/proc/self/mem").is_file():
        pytest.fail("the test needs Linux's /proc/self/mem")
    os.symlink("/proc/self/mem", path)


def test_doctor_dir_reports_an_unreadable_transcript_and_checks_the_others(
    tmp_path: Path, pi_samples: Path
) -> None:
    directory = _sessions(tmp_path, pi_samples, None)
    bad = directory / "aaa-unreadable.jsonl"  # sorted first: the old doctor stopped there
    _unreadable(bad)
    result = run_cli("doctor", str(directory), "--json", env=PIPE)
    assert result.exit_code == 1, result.output
    files = {Path(f["path"]).name: f for f in json.loads(result.stdout)["files"]}
    assert sorted(files) == ["aaa-unreadable.jsonl", "basic-id.jsonl", "branchy-id.jsonl", "full-id.jsonl"]
    assert [f["check"] for f in files["aaa-unreadable.jsonl"]["findings"]] == ["unreadable"]
    assert "Input/output error" in files["aaa-unreadable.jsonl"]["findings"][0]["message"]
    assert {files[n]["status"] for n in files if n != "aaa-unreadable.jsonl"} == {"healthy"}
    lines = run_cli("doctor", str(directory), env=PIPE).stdout.splitlines()
    assert sum("\thealthy\t" in line for line in lines) == 3
    assert any(line.startswith(f"{bad}\tproblems\terror: cannot read the file") for line in lines)


def test_doctor_fix_goes_on_past_an_unreadable_transcript(tmp_path: Path, pi_samples: Path) -> None:
    directory = _sessions(tmp_path, pi_samples, None)
    _unreadable(directory / "aaa-unreadable.jsonl")
    torn = directory / "torn.jsonl"
    torn.write_bytes((pi_samples / "basic.jsonl").read_bytes() + b'{"type":"message","id":"x","parentId":')
    result = run_cli("doctor", str(directory), "--fix", "--json", env=PIPE)
    statuses = {Path(f["path"]).name: f["status"] for f in json.loads(result.stdout)["files"]}
    assert statuses["torn.jsonl"] == "fixed"
    assert statuses["aaa-unreadable.jsonl"] == "problems"


def test_doctor_dir_checks_the_store(tmp_path: Path, pi_samples: Path) -> None:
    store = {
        "agent:main:main": {"sessionId": "basic-id", "updatedAt": NOW},
        "agent:main:gone": {"sessionId": "gone-id", "updatedAt": NOW},
        "agent:main:bad": {"sessionId": 5, "updatedAt": NOW},
        "agent:main:old": {"sessionId": "old-id", "updatedAt": NOW, "archivedAt": NOW},
    }
    directory = _sessions(tmp_path, pi_samples, store)
    before = sorted(os.listdir(directory))
    result = run_cli("doctor", str(directory), "--json", env=PIPE)
    assert result.exit_code == 1, result.output
    findings = [f for f in json.loads(result.stdout)["directoryFindings"] if f["check"] == "store"]
    assert [(f["severity"], f["ids"]) for f in findings] == [
        ("warning", ["agent:main:bad"]),
        ("warning", ["agent:main:gone"]),  # the archived entry's missing transcript is not a problem
    ]
    assert "--fix-missing" in findings[1]["message"]
    assert sorted(os.listdir(directory)) == before  # read-only: no backup, nothing created
    text = run_cli("doctor", str(directory), env=PIPE).stdout
    assert "warning: store: 1 of 3 entries have no transcript file: agent:main:gone" in text
    assert text.rstrip().endswith("; 2 store/directory problems")


def test_doctor_dir_reports_a_store_that_sessions_list_cannot_read(tmp_path: Path, pi_samples: Path) -> None:
    directory = _sessions(tmp_path, pi_samples, None)
    (directory / "sessions.json").write_text("{not json")
    listed = run_cli("sessions", "list", "--store", str(directory), env=PIPE)
    assert listed.exit_code == 1
    result = run_cli("doctor", str(directory), "--json", env=PIPE)
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    store = [f for f in report["directoryFindings"] if f["check"] == "store"]
    assert len(store) == 1 and store[0]["severity"] == "error"
    assert store[0]["message"].startswith("the store cannot be read: ")
    assert {f["status"] for f in report["files"]} == {"healthy"}
    assert (directory / "sessions.json").read_text() == "{not json"
    assert sorted(p.name for p in directory.iterdir() if "bak" in p.name) == []


def test_a_healthy_store_adds_no_finding(tmp_path: Path, pi_samples: Path) -> None:
    store = {"agent:main:main": {"sessionId": "basic-id", "updatedAt": NOW}}
    directory = _sessions(tmp_path, pi_samples, store)
    result = run_cli("doctor", str(directory), "--json", env=PIPE)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["directoryFindings"] == []


@pytest.mark.parametrize("command", ["doctor", "compact", "context", "tree"])
def test_a_store_file_given_for_a_transcript_says_what_to_run(
    command: str, tmp_path: Path, pi_samples: Path
) -> None:
    store = {"agent:main:main": {"sessionId": "basic-id", "updatedAt": NOW}}
    directory = _sessions(tmp_path, pi_samples, store)
    for path in (directory / "sessions.json", tmp_path / "store-backup.json"):
        shutil.copyfile(directory / "sessions.json", tmp_path / "store-backup.json")
        result = run_cli(command, str(path), env=PIPE)
        assert result.exit_code == 2
        assert result.stderr.startswith(f"sessionkeeper: error: {path} is a session store (sessions.json)")
        assert result.stderr.count("\n") == 1
        if command == "doctor":
            assert f"run 'sessionkeeper doctor {path.parent}'" in result.stderr
        else:
            assert f"'sessionkeeper sessions list --store {path.parent}'" in result.stderr


def test_a_transcript_that_is_not_a_store_keeps_the_loader_message(tmp_path: Path) -> None:
    path = tmp_path / "notes.json"
    path.write_text('{"title": "not a store", "items": []}\n')
    result = run_cli("compact", str(path), env=PIPE)
    assert result.exit_code == 2
    assert "session store" not in result.stderr and "not a pi session transcript" in result.stderr
