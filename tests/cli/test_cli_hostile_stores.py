"""The store commands on hostile, corrupt, missing or wrong ``--store`` paths: escaped output, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests._helpers import run_cli

from sessionkeeper._config import load_config
from sessionkeeper.exceptions import ConfigError


def _store(tmp_path: Path, text: str) -> Path:
    (tmp_path / "sessions.json").write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("args", [["sessions", "list"], ["sessions", "cleanup", "--dry-run"]])
def test_lone_surrogate_key_is_printed_escaped_not_a_traceback(tmp_path: Path, args: list[str]) -> None:
    # JavaScript writes lone surrogates as \udXXX escapes; the store reads them, the CLI must print them
    store = _store(tmp_path, '{\n  "k\\ud800": {\n    "sessionId": "abc",\n    "updatedAt": 1\n  }\n}')
    result = run_cli(*args, "--store", str(store))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 0
    assert "k\\ud800" in result.output


def test_status_with_updated_at_beyond_datetime_range(tmp_path: Path) -> None:
    store = _store(tmp_path, json.dumps({"k": {"sessionId": "abc", "updatedAt": 1e300}}))
    result = run_cli("status", "k", "--store", str(store))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 0
    result = run_cli("sessions", "list", "--store", str(store))
    assert result.exit_code == 0, result.output


def _run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sessionkeeper", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_corrupt_store_stderr_is_one_line(tmp_path: Path) -> None:
    store = _store(tmp_path, "[]")
    run = _run_cli("sessions", "list", "--store", str(store))
    assert run.returncode == 1
    assert run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.startswith("sessionkeeper: error: ")
    assert "backup" in run.stderr


def test_dropped_rows_warning_is_one_prefixed_line(tmp_path: Path) -> None:
    store = _store(
        tmp_path, json.dumps({"bad": {"sessionId": 5}, "ok": {"sessionId": "abc", "updatedAt": 1}})
    )
    run = _run_cli("sessions", "list", "--store", str(store), "--json")
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.startswith("sessionkeeper: warning: ")
    assert json.loads(run.stdout)["droppedKeys"] == ["bad"]


_DEEP = "[" * 5000 + "]" * 5000  # past the JSON decoders' recursion limit


def test_maintenance_reads_deeply_nested_lock_and_transcript(tmp_path: Path) -> None:
    (tmp_path / "abc.jsonl").write_text(_DEEP + "\n")
    (tmp_path / "abc.jsonl.lock").write_text(_DEEP)
    store = _store(tmp_path, json.dumps({"k": {"sessionId": "abc", "updatedAt": 1}}))
    for mode in ("--dry-run", "--enforce"):
        result = run_cli("sessions", "cleanup", mode, "--fix-missing", "--json", "--store", str(store))
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("content", "message"),
    [(b'{"session": "\xff\xfe"}', "not UTF-8"), (b'{"session": ' + _DEEP.encode() + b"}", "nested")],
)
def test_cleanup_config_file_undecodable_is_bad_input(tmp_path: Path, content: bytes, message: str) -> None:
    config = tmp_path / "openclaw.json"
    config.write_bytes(content)
    with pytest.raises(ConfigError, match=message):
        load_config(config)
    store = _store(tmp_path, "{}")
    result = run_cli("sessions", "cleanup", "--dry-run", "--store", str(store), "--config", str(config))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2


@pytest.mark.parametrize(
    "args",
    [
        ["sessions", "list"],
        ["status", "k[/bold]x"],
        ["sessions", "cleanup", "--dry-run", "--now", "1799992000000"],
    ],
)
def test_stored_text_is_not_rich_markup_nor_terminal_escapes(tmp_path: Path, args: list[str]) -> None:
    raw = {
        "k[/bold]x": {"sessionId": "abc", "updatedAt": 1789990000000, "label": "[/]close"},
        "esc\x1b[31mred": {"sessionId": "def", "updatedAt": 1789990000000},
    }
    store = _store(tmp_path, json.dumps(raw))
    result = run_cli(*args, "--store", str(store))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 0
    assert "k[/bold]x" in result.output
    assert "\x1b" not in result.output


def test_cleanup_now_beyond_year_9999_is_bad_input(tmp_path: Path) -> None:
    store = _store(tmp_path, json.dumps({"k": {"sessionId": "abc", "updatedAt": 1}}))
    (tmp_path / "abc.jsonl").write_text("{}\n")
    for now in ("99999999999999999", "253402300800000"):
        result = run_cli("sessions", "cleanup", "--dry-run", "--store", str(store), "--now", now)
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        assert result.exit_code == 2
    result = run_cli("sessions", "cleanup", "--dry-run", "--store", str(store), "--now", "253402300799999")
    assert result.exit_code == 0, result.output


def test_cleanup_bytes_after_counts_numbers_as_written(tmp_path: Path) -> None:
    # Python's json.dumps wrote 1.2e-05 (7 bytes) where the store writes 0.000012 (8 bytes)
    text = (
        '{\n  "old": {\n    "sessionId": "old",\n    "updatedAt": 1\n  },\n'
        '  "keep": {\n    "sessionId": "keep",\n    "updatedAt": 1789990000000,\n'
        '    "estimatedCostUsd": 0.000012\n  }\n}'
    )
    store = _store(tmp_path, text)
    args = ["sessions", "cleanup", "--store", str(store), "--json", "--now", "1789992000000"]
    planned = json.loads(run_cli(*args, "--dry-run").output)
    done = json.loads(run_cli(*args, "--enforce").output)
    size = (store / "sessions.json").stat().st_size
    assert planned["bytesAfter"] == done["bytesAfter"] == size


@pytest.mark.parametrize("command", ["sessions list --store {}", "status --store {} agent:main:main"])
def test_read_commands_on_a_missing_store_are_bad_input(tmp_path: Path, command: str) -> None:
    """Like `sessions cleanup`: a missing --store is a usage error (exit 2), never an empty store."""
    missing = tmp_path / "nope"
    result = run_cli(*command.format(missing).split())
    assert result.exit_code == 2
    assert not missing.exists()


def test_store_that_is_another_file_is_bad_input(tmp_path: Path) -> None:
    # `--store FILE` (not sessions.json / sessions.sqlite) failed with a bare NotADirectoryError, exit 1.
    other = tmp_path / "notes.txt"
    other.write_text("x")
    for args in (["sessions", "list"], ["status", "k"], ["sessions", "cleanup", "--dry-run"]):
        result = run_cli(*args[:2], "--store", str(other), *args[2:])
        assert result.exit_code == 2, (args, result.output)
        assert "not a sessions directory" in result.stderr
    assert other.read_text() == "x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("content", ["", "{not json", "[]"])
@pytest.mark.parametrize(
    "args",
    [["sessions", "list"], ["status", "agent:main:main"], ["sessions", "cleanup", "--dry-run"]],
    ids=["list", "status", "cleanup-dry-run"],
)
def test_read_only_commands_write_no_backup_of_a_corrupt_store(
    tmp_path: Path, content: str, args: list[str]
) -> None:
    # README: `sessions list`, `status` and `sessions cleanup --dry-run` never modify the store; store.md:
    # a read-only open writes no backup. Each wrote sessions.json.bak.<stamp> beside a corrupt store.
    (tmp_path / "sessions.json").write_text(content)
    result = run_cli(*args[:2], "--store", str(tmp_path), *args[2:])
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("sessionkeeper: error: ") and result.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sessions.json"]
    assert (tmp_path / "sessions.json").read_text() == content


@pytest.mark.parametrize("content", [b"", b"   \n\t  \n", b"{not json", b"[]"])
def test_cleanup_dry_run_on_an_empty_or_corrupt_store_writes_nothing(tmp_path: Path, content: bytes) -> None:
    store = tmp_path / "sessions"
    store.mkdir()
    (store / "sessions.json").write_bytes(content)
    (store / "s1.jsonl").write_text('{"type":"session","version":3,"id":"s1"}\n')
    before = sorted(os.listdir(store))
    for extra in (["--dry-run"], ["--dry-run", "--enforce"], ["--dry-run", "--json"]):
        result = run_cli("sessions", "cleanup", "--store", str(store), *extra)
        assert result.exit_code != 0
        assert sorted(os.listdir(store)) == before, extra
    assert (store / "sessions.json").read_bytes() == content
