"""The text views never send control characters from the file to the terminal: shown escaped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests._helpers import TS, run_cli, user_entry


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSIONKEEPER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")


def test_control_characters_from_the_file_are_shown_escaped_not_sent_to_the_terminal(tmp_path: Path) -> None:
    # ids, labels, the session id and message text come from the file: a raw ESC (clear screen, OSC
    # title) or newline reached the terminal and broke the one-entry-a-line layout
    header = {"type": "session", "version": 3, "id": "s\x1b]0;title\x07", "timestamp": TS, "cwd": "/w"}
    label = {"type": "label", "id": "l", "parentId": "c\x1b[31m", "timestamp": TS, "targetId": "a\nb",
             "label": "L\nM\x1b[5m"}  # fmt: skip
    objs = [
        header,
        user_entry("a\nb", None, "hi\x1b[2J\x1b[31mRED"),
        user_entry("c\x1b[31m", "a\nb", "ok"),
        label,
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    for args in (["tree", "--width", "100"], ["context"], ["context", "--last", "5"]):
        result = run_cli(*args, str(path))
        assert result.exit_code == 0, result.output
        assert "\x1b" not in result.output
        assert "\x07" not in result.output
        assert "\\x1b" in result.output
    tree = run_cli("tree", "--width", "100", str(path)).output.splitlines()
    assert len(tree) == 4  # the header and one line per entry
    assert "a\\nb" in tree[1]
    assert "⟨L\\nM\\x1b[5m⟩" in tree[1]
