"""
``sessionkeeper tree`` lays entries out as pi 0.73.1's ``/tree`` selector does: the same order and the
same gutter/connector prefix for every entry, taken from pi's own ``TreeSelectorComponent`` (every entry
laid out by its ``flattenTree``, rendered wide, colours stripped; pi's fold marker ``⊟`` in a connector is
its ``─``).
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from tests import _pi_oracle
from tests._pi_oracle import PiOracle
from tests.cli.test_cli_tree import _write

from sessionkeeper.cli._tree import _flatten, _prefix
from sessionkeeper.transcript import build_tree, load_transcript


pytestmark = pytest.mark.oracle
pi_oracle = _pi_oracle.pi_oracle  # the session-scoped fixture, made visible to this module

_PROBE = r"""
const root = process.argv[2] + "/node_modules/@mariozechner/pi-coding-agent/dist/";
const { SessionManager } = await import(root + "index.js");
const { initTheme } = await import(root + "modes/interactive/theme/theme.js");
const { TreeSelectorComponent } = await import(root + "modes/interactive/components/tree-selector.js");
initTheme("dark");
const out = {};
for (const file of process.argv.slice(3)) {
  const sm = SessionManager.open(file, "/nonexistent-dir-never-written");
  const component = new TreeSelectorComponent(
    sm.getTree(), sm.getLeafId(), 10_000_000, () => {}, () => {}, () => {}, undefined, "all");
  const list = component.treeList;
  // every entry, laid out by flattenTree itself (the selector's filters hide tool-call-only replies
  // and re-lay the rest out; the tree command shows every entry)
  list.flatNodes = list.flattenTree(sm.getTree());
  list.filteredNodes = list.flatNodes;
  const lines = list.render(100_000).map((line) => line.replace(/\x1b\[[0-9;]*m/g, ""));
  out[file] = { ids: list.filteredNodes.map((n) => n.node.entry.id), lines: lines.slice(0, -1) };
}
process.stdout.write(JSON.stringify(out));
"""

_PREFIX = re.compile(r"[ │├└─⊟⊞]*")


def _pi_layout(oracle: PiOracle, files: list[Path]) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".mjs", delete=False) as handle:
        handle.write(_PROBE)
    try:
        run = subprocess.run(
            [oracle.node, handle.name, str(oracle.root), *map(str, files)],
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        )
    finally:
        Path(handle.name).unlink()
    result: dict[str, Any] = json.loads(run.stdout)
    return result


def _pi_prefix(line: str) -> str:
    """The gutter/connector part of one of pi's lines (after its 2-cell cursor), fold marks as ``─``."""
    body = line[2:]
    match = _PREFIX.match(body)
    assert match is not None
    prefix = match.group(0).replace("⊟", "─").replace("⊞", "─")
    return prefix if len(prefix) % 3 == 0 else prefix[: len(prefix) - len(prefix) % 3]


def _ours(file: Path) -> tuple[list[str], list[str]]:
    index = load_transcript(file)
    indexed = (index.entry_at(pos) for pos in sorted(index.by_id.values()))
    roots = build_tree(indexed, labels=index.labels, label_timestamps=index.label_timestamps)
    rows = _flatten(roots, index.leaf_id)
    several = len(roots) > 1
    return [row.node.entry.id for row in rows], [
        _prefix(row, several_roots=several, room=10**6) for row in rows
    ]


def _random_trees(tmp: Path, count: int) -> list[Path]:
    rng = random.Random(20261130)
    files = []
    for n in range(count):
        size = rng.randint(1, 40)
        branchiness = rng.random()
        parents: list[int | None] = [None]
        for i in range(1, size):
            if rng.random() < 0.05:
                parents.append(None)  # another root
            elif rng.random() < branchiness:
                parents.append(rng.randrange(i))
            else:
                parents.append(i - 1)
        files.append(_write(tmp / f"random-{n}.jsonl", parents))
    return files


def test_layout_equals_pi_tree_selector(pi_oracle: PiOracle, pi_samples: Path, tmp_path: Path) -> None:
    samples = [
        pi_samples / name for name in ("basic.jsonl", "full.jsonl", "branchy.jsonl", "large-2000.jsonl")
    ]
    files = samples + _random_trees(tmp_path, 80)
    expected = _pi_layout(pi_oracle, files)
    for file in files:
        pi = expected[str(file)]
        ids, prefixes = _ours(file)
        assert ids == pi["ids"], file.name
        assert prefixes == [_pi_prefix(line) for line in pi["lines"]], file.name
