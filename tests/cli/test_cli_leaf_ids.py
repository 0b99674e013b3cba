"""``context --leaf`` takes the ids ``tree`` shows (numbers, booleans, falsy); the default leaf is pi's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests._helpers import TS, run_cli, user_entry


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSIONKEEPER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")


def test_context_leaf_accepts_the_number_and_boolean_ids_tree_prints(tmp_path: Path) -> None:
    header = {"type": "session", "version": 3, "id": "s", "timestamp": TS, "cwd": "/w"}
    objs = [
        header,
        user_entry(1, None, "A"),
        user_entry(2, 1, "B"),
        user_entry("2", 1, "C"),
        user_entry(True, 2, "D"),
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    tree = run_cli("tree", str(path), "--width", "80")
    assert tree.exit_code == 0
    assert "true ◀ leaf" in tree.output
    # the default leaf and --leaf <the leaf id tree shows> print the same
    default = run_cli("context", str(path), "--json")
    by_id = run_cli("context", str(path), "--json", "--leaf", "true")
    assert default.exit_code == by_id.exit_code == 0, by_id.output
    assert by_id.output == default.output
    assert [m["content"] for m in json.loads(by_id.output)["messages"]] == ["A", "B", "D"]
    # a number id; "1.0" is the same key as 1 (JavaScript's Map)
    for text in ("1", "1.0"):
        one = run_cli("context", str(path), "--json", "--leaf", text)
        assert one.exit_code == 0, one.output
        assert [m["content"] for m in json.loads(one.output)["messages"]] == ["A"]
    # the string id wins over the number with the same text
    two = run_cli("context", str(path), "--json", "--leaf", "2")
    assert [m["content"] for m in json.loads(two.output)["messages"]] == ["A", "C"]
    for missing in ("3", "false", "{", "1e400"):
        bad = run_cli("context", str(path), "--json", "--leaf", missing)
        assert bad.exit_code == 2
        assert "not found" in bad.output


def test_the_text_view_names_a_falsy_leaf_id(tmp_path: Path) -> None:
    header = {"type": "session", "version": 3, "id": "s", "timestamp": TS, "cwd": "/w"}
    objs = [header, user_entry("a", None, "A"), user_entry(0, "a", "Z")]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    shown = run_cli("context", str(path))
    assert shown.exit_code == 0
    assert "leaf 0 ·" in shown.output


def test_default_leaf_of_a_file_without_entry_ids_is_the_last_entry_as_in_pi(tmp_path: Path) -> None:
    # a "v3" file whose entries carry no id (pi's forkFrom of a v1 file): pi builds the context from
    # the last entry; the CLI's full-load path asked for leaf None (the empty context) instead
    header = {"type": "session", "version": 3, "id": "s", "timestamp": TS, "cwd": "/w"}
    objs = [
        header,
        {"type": "message", "timestamp": TS, "message": {"role": "user", "content": "A", "timestamp": 1}},
        {"type": "thinking_level_change", "timestamp": TS, "thinkingLevel": "high"},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    result = run_cli("context", str(path), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"messages": [], "thinkingLevel": "high", "model": None}  # pi 0.73.1
    null = run_cli("context", str(path), "--json", "--leaf", "null")
    assert json.loads(null.output)["thinkingLevel"] == "off"


def test_prune_default_leaf_of_a_file_without_entry_ids_is_the_last_entry(tmp_path: Path) -> None:
    header = {"type": "session", "version": 3, "id": "s", "timestamp": TS, "cwd": "/w"}
    message = {"role": "user", "content": "A", "timestamp": 1}
    objs = [header, {"type": "message", "timestamp": TS, "message": message}]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    result = run_cli("prune", str(path), "--context-window", "100000", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["messages"] == [message]  # pi: the last entry's context
