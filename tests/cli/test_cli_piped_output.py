"""
Output to a pipe is one record per line, never wrapped or cut (issue 11: ``grep`` must find a key or an id);
rich tables only on a terminal. CliRunner's stdout is not a TTY; ``TTY_COMPATIBLE=1`` forces a terminal.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import Result
from tests._helpers import run_cli


LONG_KEY = "agent:main:explicit:model-run-ed26bf69-0403-492f-be6f-401a48c4d88c"
TERMINAL = {"TTY_COMPATIBLE": "1", "COLUMNS": "72"}
PIPE = {"TTY_COMPATIBLE": None, "FORCE_COLOR": None, "COLUMNS": "72"}


@pytest.fixture
def small_store(openclaw_samples: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "sessions"
    shutil.copytree(openclaw_samples / "small", dest)
    return dest


def _invoke(env: dict[str, str | None], *args: str) -> Result:
    result = run_cli(*args, env=env)
    assert result.exit_code in (0, 1), result.output
    return result


def test_sessions_list_piped_is_one_tab_separated_record_per_session(small_store: Path) -> None:
    rows = json.loads(_invoke(PIPE, "sessions", "list", "--store", str(small_store), "--json").stdout)[
        "sessions"
    ]
    lines = _invoke(PIPE, "sessions", "list", "--store", str(small_store)).stdout.splitlines()
    assert lines[1].split("\t") == ["key", "session id", "updated (UTC)", "label", "model", "tokens", "flags"]
    records = [line.split("\t") for line in lines[2 : 2 + len(rows)]]
    assert [(r[0], r[1]) for r in records] == [(row["key"], row["sessionId"] or "-") for row in rows]
    assert all(len(r) == 7 for r in records)
    assert any(r[0] == LONG_KEY for r in records)  # whole, so grep finds it
    assert "…" not in "\n".join(lines) and "┃" not in "\n".join(lines)


def test_sessions_list_on_a_terminal_is_a_rich_table(small_store: Path) -> None:
    out = _invoke(TERMINAL, "sessions", "list", "--store", str(small_store)).stdout
    assert "┃" in out or "│" in out
    assert LONG_KEY not in out  # folded over several lines of a 72-column table
    assert "\t" not in out


def test_status_piped_is_one_field_per_line(small_store: Path) -> None:
    entry = json.loads((small_store / "sessions.json").read_text())[LONG_KEY]
    lines = _invoke(PIPE, "status", "--store", str(small_store), LONG_KEY).stdout.splitlines()
    assert lines[0] == LONG_KEY
    fields = dict(line.split("\t", 1) for line in lines[1:])
    assert fields["sessionId"] == json.dumps(entry["sessionId"])
    assert set(entry) <= set(fields)
    terminal = _invoke(TERMINAL, "status", "--store", str(small_store), LONG_KEY).stdout
    assert "\t" not in terminal and "│" in terminal


def test_doctor_piped_reports_each_file_on_its_line_with_its_whole_path(small_store: Path) -> None:
    lines = _invoke(PIPE, "doctor", str(small_store)).stdout.splitlines()
    transcripts = sorted(
        p for p in small_store.glob("*.jsonl") if p.is_file() and not p.name.endswith(".trajectory.jsonl")
    )
    records = [line.split("\t") for line in lines if "\t" in line][1:]
    assert [r[0] for r in records] == [str(p) for p in transcripts]
    assert all(len(r) == 3 for r in records)


def test_context_piped_lines_are_not_wrapped(pi_samples: Path) -> None:
    piped = _invoke(PIPE, "context", str(pi_samples / "large-2000.jsonl")).stdout.splitlines()
    terminal = _invoke(TERMINAL, "context", str(pi_samples / "large-2000.jsonl")).stdout.splitlines()
    messages = json.loads(_invoke(PIPE, "context", str(pi_samples / "large-2000.jsonl"), "--json").stdout)
    assert len(piped) == 2 + len(messages["messages"])  # file line, summary line, one line per message
    assert max(len(line) for line in piped) > 72
    assert len(terminal) > len(piped)  # a 72-column terminal wraps the long ones


def test_compact_plan_piped_is_one_field_per_line(pi_samples: Path, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    shutil.copyfile(pi_samples / "large-2000.jsonl", path)
    args = ("compact", str(path), "--dry-run", "--keep-recent-tokens", "2000")
    plan = json.loads(_invoke(PIPE, *args, "--json").stdout)
    lines = _invoke(PIPE, *args).stdout.splitlines()
    fields = dict(line.split("\t", 1) for line in lines[1:])
    assert list(fields) == list(plan)
    assert isinstance(plan["firstKeptEntryId"], str)
    assert fields["firstKeptEntryId"] == plan["firstKeptEntryId"]
    assert json.loads(fields["fileOps"]) == plan["fileOps"]


def test_sessions_cleanup_piped_lists_each_key_and_its_action(small_store: Path) -> None:
    args = ("sessions", "cleanup", "--store", str(small_store), "--dry-run")
    report = json.loads(_invoke(PIPE, *args, "--json").stdout)
    changed = {key: action for key, action in report["actions"].items() if action != "keep"}
    lines = _invoke(PIPE, *args).stdout.splitlines()
    start = lines.index("session key\taction") + 1
    records = dict(line.split("\t") for line in lines[start : start + len(changed)])
    assert records == changed
    assert LONG_KEY in records or LONG_KEY not in changed
