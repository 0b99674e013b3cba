"""
Regenerate ``data/cut_points.json``: pi 0.73.1's ``findCutPoint`` on the pi samples, for many keep
budgets and several leaves, computed by the real package through the pi oracle.

Usage (needs node and an installed copy of ``shared/tools/pi-oracle``)::

    python tests/compaction/regen_cut_fixtures.py [--oracle /tmp/pi-oracle]

For each sample, each leaf in ``LEAVES`` (``None`` = the file's own leaf) and each budget in
``BUDGETS``, it runs ``node context.mjs FILE --leaf ID --cut-point N`` and stores the ``cutPoint``
object. ``test_compaction_cut.py`` compares :func:`sessionkeeper.compaction.find_cut_point` with it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parent / "data" / "pi"
OUT = HERE / "data" / "cut_points.json"
BUDGETS = (0, 1, 10, 50, 100, 200, 300, 500, 800, 1000, 1500, 2000, 3000, 5000, 8000, 12000, 20000, 100000)
FILES = ("basic", "full", "branchy", "large-2000")
EXTRA_LEAVES = 4  # besides the file's own leaf, this many other leaves spread over the file


def _entry_ids(path: Path) -> list[str]:
    ids = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            obj = json.loads(line)
            if obj.get("type") != "session" and isinstance(obj.get("id"), str):
                ids.append(obj["id"])
    return ids


def _leaves(path: Path) -> list[str | None]:
    ids = _entry_ids(path)
    step = max(1, len(ids) // (EXTRA_LEAVES + 1))
    picked = [ids[i] for i in range(step, len(ids) - 1, step)][:EXTRA_LEAVES]
    return [None, *picked]


def _run(oracle: Path, sample: Path, leaf: str | None, budget: int) -> dict[str, object]:
    cmd = ["node", str(oracle / "context.mjs"), str(sample), "--cut-point", str(budget)]
    if leaf is not None:
        cmd += ["--leaf", leaf]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    cut = json.loads(out)["cutPoint"]
    cut.pop("branchEntryIds", None)
    return dict(cut)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--oracle", type=Path, default=Path("/tmp/pi-oracle"))
    parser.add_argument("--jobs", type=int, default=8)
    args = parser.parse_args()
    jobs = [
        (name, SAMPLES / f"{name}.jsonl", leaf, budget)
        for name in FILES
        for leaf in _leaves(SAMPLES / f"{name}.jsonl")
        for budget in BUDGETS
    ]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda job: _run(args.oracle, job[1], job[2], job[3]), jobs))
    fixture: dict[str, dict[str, dict[str, object]]] = {}
    for (name, _sample, leaf, budget), cut in zip(jobs, results, strict=True):
        fixture.setdefault(name, {}).setdefault(leaf or "", {})[str(budget)] = cut
    OUT.write_text(json.dumps(fixture, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({len(jobs)} oracle runs)")


if __name__ == "__main__":
    main()
