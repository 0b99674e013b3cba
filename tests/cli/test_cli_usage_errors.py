"""CLI usage errors and non-regular input files: one ``sessionkeeper: error:`` line on stderr, exit 2."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests._helpers import run_cli


@pytest.mark.parametrize(
    "args",
    [
        ["context", "{dir}"],
        ["tree", "{dir}"],
        ["context"],
        ["context", "--bogus", "x.jsonl"],
        ["compact", "x.jsonl", "--keep-recent-tokens", "-5"],
        ["prune", "x.jsonl"],
        ["sessions", "list", "--bogus"],
        ["--bogus"],
        ["no-such-command"],
    ],
)
def test_usage_errors_are_one_stderr_line_exit_2(tmp_path: Path, args: list[str]) -> None:
    argv = [a.replace("{dir}", str(tmp_path)) for a in args]
    run = run_cli(*argv)
    assert run.exit_code == 2
    assert run.stdout == ""
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sessionkeeper: error: "), run.stderr


def test_help_and_version_are_unchanged() -> None:
    assert run_cli("context", "--help").output.startswith("Usage: ")
    assert run_cli("--version").exit_code == 0


@pytest.mark.parametrize("command", ["context", "tree", "doctor", "compact", "prune"])
def test_a_fifo_is_bad_input_not_a_hang(tmp_path: Path, command: str) -> None:
    fifo = tmp_path / "t.jsonl"
    os.mkfifo(fifo)
    extra = ["--context-window", "1000"] if command == "prune" else []
    run = run_cli(command, str(fifo), *extra)
    assert run.exit_code == 2
    assert "not a regular file" in run.stderr and len(run.stderr.splitlines()) == 1
