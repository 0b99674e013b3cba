"""
Non-string entry ids (hand-edited or foreign files) link exactly as pi 0.73.1 links them.

pi keys its ``byId`` index with the raw JSON values (a JavaScript ``Map``): the number ``1`` and the string
``"1"`` are different ids, ``1``, ``1.0`` and ``1e0`` are the same one, and the path walk follows a
``parentId`` only when it is truthy (``0``, ``false`` and ``""`` end the walk, while ``getTree`` still
links them). The fixtures in ``tests/data/oracle/numeric-ids/`` cover these cases; ``pi-results.json``
holds what the real pi answers for each (leaf, context, branch, the context and branch at every entry,
labels, tree). The golden test compares ours with it; the oracle test checks that the golden file is
what pi answers today.

Regenerate the fixtures and the golden file (needs node and the installed pi oracle)::

    python tests/transcript/test_transcript_numeric_ids_oracle.py [PI_ORACLE_DIR]   # default /tmp/pi-oracle
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from tests import _pi_oracle
from tests._pi_oracle import PiOracle

from sessionkeeper.records._entries import key_to_json
from sessionkeeper.transcript import TreeNode, build_tree, load_transcript


pi_oracle = _pi_oracle.pi_oracle  # the session-scoped fixture, made visible to this module


HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data" / "oracle" / "numeric-ids"
GOLDEN = DATA / "pi-results.json"

_T = "2026-03-01T10:00:{:02d}.000Z"
_MS = 1772359200000  # 2026-03-01T10:00:00.000Z
_USAGE = {
    "input": 10,
    "output": 5,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 15,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
}


def _line(entry_id: str, parent_id: str, n: int, fields: dict[str, Any]) -> str:
    """One entry line; ``entry_id``/``parent_id`` are JSON literals written as is (``1.0``, ``"1"``)."""
    kind = json.dumps(fields["type"])
    rest = json.dumps({k: v for k, v in fields.items() if k != "type"}, separators=(",", ":"))[1:-1]
    return f'{{"type":{kind},"id":{entry_id},"parentId":{parent_id},"timestamp":"{_T.format(n)}",{rest}}}'


def _user(entry_id: str, parent_id: str, n: int, text: str) -> str:
    message = {"role": "user", "content": text, "timestamp": _MS + n * 1000}
    return _line(entry_id, parent_id, n, {"type": "message", "message": message})


def _assistant(entry_id: str, parent_id: str, n: int, text: str) -> str:
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "usage": _USAGE,
        "stopReason": "stop",
        "timestamp": _MS + n * 1000,
    }
    return _line(entry_id, parent_id, n, {"type": "message", "message": message})


def _thinking(entry_id: str, parent_id: str, n: int, level: str) -> str:
    return _line(entry_id, parent_id, n, {"type": "thinking_level_change", "thinkingLevel": level})


def _compaction(entry_id: str, parent_id: str, n: int, first_kept: Any, summary: str) -> str:
    fields = {"type": "compaction", "summary": summary, "firstKeptEntryId": first_kept, "tokensBefore": 500}
    return _line(entry_id, parent_id, n, fields)


def _label(entry_id: str, parent_id: str, n: int, target: Any, label: str) -> str:
    return _line(entry_id, parent_id, n, {"type": "label", "targetId": target, "label": label})


def _header(name: str) -> str:
    header = {
        "type": "session",
        "version": 3,
        "id": f"numeric-{name}",
        "timestamp": _T.format(0),
        "cwd": "/w",
    }
    return json.dumps(header, separators=(",", ":"))


CASES: dict[str, list[str]] = {
    # every id and parentId a number: pi links them like strings
    "numeric-chain": [
        _user("1", "null", 1, "one"),
        _assistant("2", "1", 2, "two"),
        _thinking("3", "2", 3, "high"),
        _user("4", "3", 4, "four"),
    ],
    # a string parentId "1" does not find the numeric id 1
    "numeric-id-string-parent": [
        _user("1", "null", 1, "one"),
        _user('"b"', '"1"', 2, "b: parent is the string 1"),
        _user('"c"', "1", 3, "c: parent is the number 1"),
        _user('"d"', '"b"', 4, "d under b"),
    ],
    # a numeric parentId 1 does not find the string id "1"
    "string-id-numeric-parent": [
        _user('"1"', "null", 1, "string one"),
        _user('"x"', "1", 2, "x: parent is the number 1"),
        _user('"y"', '"1"', 3, "y: parent is the string 1"),
    ],
    # the number 1 and the string "1" are two different entries
    "number-and-string-one": [
        _user("1", "null", 1, "number one"),
        _user('"1"', "null", 2, "string one"),
        _user('"n"', "1", 3, "under the number"),
        _user('"s"', '"1"', 4, "under the string"),
    ],
    # JSON.parse reads 1.0, 1e2, 2.50 and 9007199254740993 as the numbers 1, 100, 2.5, 2**53
    "number-forms": [
        _user("1.0", "null", 1, "one point zero"),
        _user('"a"', "1", 2, "a under 1"),
        _user("1e2", '"a"', 3, "one e two"),
        _user('"b"', "100", 4, "b under 100"),
        _user("2.5", '"b"', 5, "two and a half"),
        _user('"c"', "2.50", 6, "c under 2.50"),
        _user("9007199254740993", '"c"', 7, "two to the 53 plus one"),
        _user('"d"', "9007199254740992", 8, "d under two to the 53"),
    ],
    # falsy parents end pi's path walk (0, false, ""), getTree still links them; true links
    "falsy-ids": [
        _user("0", "null", 1, "zero"),
        _user('"z"', "0", 2, "z under zero"),
        _user("true", "null", 3, "true"),
        _user('"t"', "true", 4, "t under true"),
        _user("false", "null", 5, "false"),
        _user('"f"', "false", 6, "f under false"),
        _user('""', "null", 7, "empty string id"),
        _user('"e"', '""', 8, "e under the empty string"),
        _user('"last"', '"e"', 9, "last"),
    ],
    # leaf id 0: the context falls back to the last entry (the same one), getBranch() is empty
    "leaf-zero": [
        _user('"a"', "null", 1, "a"),
        _assistant("7", '"a"', 2, "seven"),
        _user("0", "7", 3, "zero is the leaf"),
    ],
    # firstKeptEntryId is compared with === : the number 3 keeps entry 3, the string "3" keeps nothing
    "numeric-compaction": [
        _user("1", "null", 1, "one"),
        _assistant("2", "1", 2, "two"),
        _user("3", "2", 3, "three"),
        _assistant("4", "3", 4, "four"),
        _compaction("5", "4", 5, 3, "summary keeping from the number 3"),
        _user("6", "5", 6, "six"),
    ],
    "string-first-kept": [
        _user("1", "null", 1, "one"),
        _assistant("2", "1", 2, "two"),
        _user("3", "2", 3, "three"),
        _assistant("4", "3", 4, "four"),
        _compaction('"c5"', "4", 5, "3", "summary keeping from the string 3"),
        _user("6", '"c5"', 6, "six"),
    ],
    # labels are keyed by targetId as is
    "numeric-labels": [
        _user("1", "null", 1, "one"),
        _user("2", "1", 2, "two"),
        _label('"l1"', "2", 3, 1, "number-label"),
        _label('"l2"', '"l1"', 4, "2", "string-label"),
        _user("3", '"l2"', 5, "three"),
    ],
}

PROBE = r"""
const pkg = process.argv[2] + "/node_modules/@mariozechner/pi-coding-agent/dist/index.js";
const { SessionManager, buildSessionContext } = await import(pkg);
const fs = await import("node:fs");
const path = await import("node:path");
const os = await import("node:os");
const out = {};
for (const file of process.argv.slice(3)) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "pi-numeric-"));
  const copy = path.join(tmp, path.basename(file));
  fs.copyFileSync(file, copy);
  const sm = SessionManager.open(copy, tmp);
  const entries = sm.getEntries();
  const tree = (node) => ({
    id: node.entry.id,
    label: node.label ?? null,
    children: node.children.map(tree),
  });
  out[path.basename(file, ".jsonl")] = {
    leafId: sm.getLeafId() ?? null,
    context: sm.buildSessionContext(),
    branch: sm.getBranch().map((e) => e.id),
    entries: entries.map((e) => ({
      id: e.id,
      branch: sm.getBranch(e.id).map((x) => x.id),
      context: buildSessionContext(entries, e.id),
      label: sm.getLabel(e.id) ?? null,
    })),
    tree: sm.getTree().map(tree),
  };
  fs.rmSync(tmp, { recursive: true, force: true });
}
process.stdout.write(JSON.stringify(out, null, 1) + "\n");
"""


def ours(file: Path) -> dict[str, Any]:
    """Our answers for ``file``, in the probe's shape (ids as their JSON values)."""
    index = load_transcript(file)
    ids = [index.ids[pos] for pos in range(len(index))]

    def branch(key: str | None) -> list[Any]:
        return [key_to_json(index.ids[pos]) for pos in index.path_positions(key)]

    def node(tree_node: TreeNode) -> dict[str, Any]:
        return {
            "id": key_to_json(tree_node.entry.id),
            "label": tree_node.label,
            "children": [node(child) for child in tree_node.children],
        }

    indexed = (index.entry_at(pos) for pos in sorted(index.by_id.values()))
    roots = build_tree(indexed, labels=index.labels, label_timestamps=index.label_timestamps)
    return {
        "leafId": key_to_json(index.leaf_id),
        "context": index.build_context().to_json(),
        "branch": branch(index.leaf_id),
        "entries": [
            {
                "id": key_to_json(key),
                "branch": branch(key),
                "context": index.build_context(key).to_json(),
                "label": index.labels.get(key) if key is not None else None,
            }
            for key in ids
        ],
        "tree": [node(root) for root in roots],
    }


def _exact(value: Any) -> str:
    """JSON text: ``1``, ``1.0``, ``true`` and ``"1"`` all differ (Python's ``1 == True`` does not count)."""
    return json.dumps(value, sort_keys=True)


GOLDEN_CASES: dict[str, Any] = json.loads(GOLDEN.read_text("utf-8"))["cases"] if GOLDEN.exists() else {}


@pytest.mark.parametrize("name", list(CASES))
def test_numeric_ids_link_as_pi_links_them(name: str) -> None:
    expected = GOLDEN_CASES[name]
    got = ours(DATA / f"{name}.jsonl")
    for key in ("leafId", "branch", "context", "tree"):
        assert _exact(got[key]) == _exact(expected[key]), (name, key)
    assert len(got["entries"]) == len(expected["entries"])
    for mine, theirs in zip(got["entries"], expected["entries"], strict=True):
        assert _exact(mine) == _exact(theirs), (name, theirs["id"])


def test_fixture_files_are_the_case_table() -> None:
    for name, lines in CASES.items():
        text = (DATA / f"{name}.jsonl").read_text("utf-8")
        assert text == "\n".join([_header(name), *lines]) + "\n", name


@pytest.mark.oracle
def test_golden_file_is_what_pi_answers(pi_oracle: PiOracle) -> None:
    assert _exact(run_probe(pi_oracle.node, pi_oracle.root, case_files())) == _exact(GOLDEN_CASES)


def case_files() -> list[Path]:
    """The committed fixture files, in case order."""
    return [DATA / f"{name}.jsonl" for name in CASES]


def run_probe(node: str, oracle_dir: Path, files: list[Path]) -> dict[str, Any]:
    """What pi 0.73.1 answers for each file (see the module docstring)."""
    with tempfile.NamedTemporaryFile("w", suffix=".mjs", delete=False) as handle:
        handle.write(PROBE)
    try:
        run = subprocess.run(
            [node, handle.name, str(oracle_dir), *map(str, files)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
    finally:
        Path(handle.name).unlink()
    result: dict[str, Any] = json.loads(run.stdout)
    return result


def regenerate(oracle_dir: Path) -> None:
    """Write the fixture files and the golden file from pi's answers."""
    DATA.mkdir(parents=True, exist_ok=True)
    for name, lines in CASES.items():
        (DATA / f"{name}.jsonl").write_text("\n".join([_header(name), *lines]) + "\n", encoding="utf-8")
    results = run_probe("node", oracle_dir, case_files())
    payload = {
        "pi": "0.73.1",
        "generatedBy": "tests/transcript/test_transcript_numeric_ids_oracle.py",
        "cases": results,
    }
    GOLDEN.write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(results)} cases to {GOLDEN}")


if __name__ == "__main__":
    regenerate(Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("PI_ORACLE", "/tmp/pi-oracle")))


@pytest.mark.parametrize("name", list(CASES))
def test_tail_read_context_of_numeric_ids_is_pi_context(name: str) -> None:
    # The bounded tail reader (CLI ``context``'s default path) follows the same id rules as the loader.
    from sessionkeeper.transcript import read_tail_context

    got = read_tail_context(DATA / f"{name}.jsonl").to_json()
    assert _exact(got) == _exact(GOLDEN_CASES[name]["context"]), name
