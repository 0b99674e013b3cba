"""Regressions found by breaker brky: ``context --leaf`` with the ids ``tree`` shows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sessionkeeper.cli._main import cli


TS = "2026-01-01T00:00:00.000Z"


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSIONKEEPER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")


def _user(eid: Any, parent: Any, text: str) -> dict[str, Any]:
    message = {"role": "user", "content": text, "timestamp": 1}
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": TS, "message": message}


def _run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def test_context_leaf_accepts_the_number_and_boolean_ids_tree_prints(tmp_path: Path) -> None:
    header = {"type": "session", "version": 3, "id": "s", "timestamp": TS, "cwd": "/w"}
    objs = [header, _user(1, None, "A"), _user(2, 1, "B"), _user("2", 1, "C"), _user(True, 2, "D")]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    tree = _run("tree", str(path), "--width", "80")
    assert tree.exit_code == 0
    assert "true ◀ leaf" in tree.output
    # the default leaf and --leaf <the leaf id tree shows> print the same
    default = _run("context", str(path), "--json")
    by_id = _run("context", str(path), "--json", "--leaf", "true")
    assert default.exit_code == by_id.exit_code == 0, by_id.output
    assert by_id.output == default.output
    assert [m["content"] for m in json.loads(by_id.output)["messages"]] == ["A", "B", "D"]
    # a number id; "1.0" is the same key as 1 (JavaScript's Map)
    for text in ("1", "1.0"):
        one = _run("context", str(path), "--json", "--leaf", text)
        assert one.exit_code == 0, one.output
        assert [m["content"] for m in json.loads(one.output)["messages"]] == ["A"]
    # the string id wins over the number with the same text
    two = _run("context", str(path), "--json", "--leaf", "2")
    assert [m["content"] for m in json.loads(two.output)["messages"]] == ["A", "C"]
    for missing in ("3", "false", "{", "1e400"):
        bad = _run("context", str(path), "--json", "--leaf", missing)
        assert bad.exit_code == 2
        assert "not found" in bad.output


def test_the_text_view_names_a_falsy_leaf_id(tmp_path: Path) -> None:
    header = {"type": "session", "version": 3, "id": "s", "timestamp": TS, "cwd": "/w"}
    objs = [header, _user("a", None, "A"), _user(0, "a", "Z")]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    shown = _run("context", str(path))
    assert shown.exit_code == 0
    assert "leaf 0 ·" in shown.output


def test_doctor_fix_writes_numbers_as_json_stringify_does(tmp_path: Path) -> None:
    # JSON5 and JSON exponent/fraction forms of whole numbers (1e3, 2000., 0x10 stays an int) were
    # rewritten as Python floats ("maxEntries": 1000.0); OpenClaw's doctor --fix writes JSON.stringify
    path = tmp_path / "openclaw.json"
    path.write_text(
        "// legacy\n{ session: { rotateBytesX: 1, parentForkMaxTokens: 1000,\n"
        "  maintenance: { maxEntries: 1e3, rotateBytes: '10mb' } },\n"
        "  agents: { defaults: { compaction: { reserveTokensFloor: 2000., keepRecentTokens: 0x10 } } },\n"
        "  x: [1.5, -0.0, 2.0, 1e21, 1e300] }\n"
    )
    result = _run("doctor", str(path), "--fix", "--json")
    assert result.exit_code == 0, result.output
    text = path.read_text()
    tree = json.loads(text)
    assert tree["session"]["maintenance"] == {"maxEntries": 1000}
    assert '"maxEntries": 1000\n' in text
    assert '"reserveTokensFloor": 2000,' in text
    assert '"keepRecentTokens": 16\n' in text
    assert "1.5,\n" in text
    assert "-0.0" not in text
    assert "2.0" not in text
    assert "1e+21" in text  # JSON.stringify(1e21) is 1e+21, not 21 digits
    assert "1e+300" in text


def test_control_characters_from_the_file_are_shown_escaped_not_sent_to_the_terminal(tmp_path: Path) -> None:
    # ids, labels, the session id and message text come from the file: a raw ESC (clear screen, OSC
    # title) or newline reached the terminal and broke the one-entry-a-line layout
    header = {"type": "session", "version": 3, "id": "s\x1b]0;title\x07", "timestamp": TS, "cwd": "/w"}
    label = {"type": "label", "id": "l", "parentId": "c\x1b[31m", "timestamp": TS, "targetId": "a\nb",
             "label": "L\nM\x1b[5m"}  # fmt: skip
    objs = [header, _user("a\nb", None, "hi\x1b[2J\x1b[31mRED"), _user("c\x1b[31m", "a\nb", "ok"), label]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    for args in (["tree", "--width", "100"], ["context"], ["context", "--last", "5"]):
        result = _run(*args, str(path))
        assert result.exit_code == 0, result.output
        assert "\x1b" not in result.output
        assert "\x07" not in result.output
        assert "\\x1b" in result.output
    tree = _run("tree", "--width", "100", str(path)).output.splitlines()
    assert len(tree) == 4  # the header and one line per entry
    assert "a\\nb" in tree[1]
    assert "⟨L\\nM\\x1b[5m⟩" in tree[1]


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
    result = _run("context", str(path), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"messages": [], "thinkingLevel": "high", "model": None}  # pi 0.73.1
    null = _run("context", str(path), "--json", "--leaf", "null")
    assert json.loads(null.output)["thinkingLevel"] == "off"


def test_prune_default_leaf_of_a_file_without_entry_ids_is_the_last_entry(tmp_path: Path) -> None:
    header = {"type": "session", "version": 3, "id": "s", "timestamp": TS, "cwd": "/w"}
    message = {"role": "user", "content": "A", "timestamp": 1}
    objs = [header, {"type": "message", "timestamp": TS, "message": message}]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    result = _run("prune", str(path), "--context-window", "100000", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["messages"] == [message]  # pi: the last entry's context
