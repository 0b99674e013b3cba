"""
The command line as an operator feels it: whole processes, wall time, each against an anchor timed in the
same run (issue 11, "speed an operator feels").

Run: ``python -m benchmarks cli [--repeat 7] [--json]`` from the repository root.

Pairs, each run alternately ``--repeat`` times (medians compared, so a load spike on a shared machine
hits both sides alike):

- ``sessionkeeper --version`` vs ``python -c "import click"`` (the floor of any click program).
  Target: at most 2x.
- ``sessionkeeper context F --json`` vs pi's ``node context.mjs F`` (the pi oracle,
  ``tests/_pi_oracle.py`` finds or installs it) on the 20k-entry pi sample
  (``tests/data/pi/large-20k.jsonl.gz``, 18 MB). Target: at least 5x faster. The two outputs are checked
  to be the same JSON document first. Our first run (fresh ``$SESSIONKEEPER_CACHE_DIR``, no tail index
  yet) is reported apart from the median of the later runs.

Also shown: ``python -c pass`` (interpreter start-up) for scale. Without node or the oracle the pi pair
is reported as skipped with the reason.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "tests" / "data" / "pi" / "large-20k.jsonl.gz"
VERSION_TARGET = 2.0  # --version at most this many times `import click`
CONTEXT_TARGET = 5.0  # context --json at least this many times faster than pi's context.mjs


def _sessionkeeper() -> list[str]:
    """The installed console script beside this interpreter, else ``python -m sessionkeeper``."""
    script = Path(sys.executable).parent / "sessionkeeper"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "sessionkeeper"]


def _time(argv: Sequence[str], env: dict[str, str], cwd: Path | None = None) -> tuple[float, bytes]:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, env=env, cwd=cwd, check=False, timeout=600)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    return elapsed, proc.stdout


def _alternate(
    ours: Sequence[str],
    anchor: Sequence[str],
    *,
    repeat: int,
    env: dict[str, str],
    anchor_cwd: Path | None = None,
) -> tuple[list[float], list[float]]:
    mine: list[float] = []
    theirs: list[float] = []
    for _ in range(repeat):
        mine.append(_time(ours, env)[0])
        theirs.append(_time(anchor, env, anchor_cwd)[0])
    return mine, theirs


def _pi_oracle() -> tuple[Path, str] | str:
    sys.path.insert(0, str(REPO))
    try:
        from tests._pi_oracle import find_pi_oracle  # the fixture logic, imported on demand
    except ImportError as err:  # pytest absent: the dev extra is not installed
        return f"cannot import tests/_pi_oracle.py ({err})"
    found = find_pi_oracle()
    if isinstance(found, str):
        return found
    return found.root, found.node


def run(repeat: int) -> dict[str, Any]:
    """Time every pair; return the JSON report (seconds, ratios, targets, verdicts)."""
    report: dict[str, Any] = {"repeat": repeat, "python": sys.version.split()[0]}
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        env = {**os.environ, "SESSIONKEEPER_CACHE_DIR": str(Path(tmp) / "cache")}
        sk = _sessionkeeper()
        startup = [_time([sys.executable, "-c", "pass"], env)[0] for _ in range(repeat)]
        version, click_import = _alternate(
            [*sk, "--version"], [sys.executable, "-c", "import click"], repeat=repeat, env=env
        )
        v_ratio = statistics.median(version) / statistics.median(click_import)
        report["startup"] = {"pythonPassS": statistics.median(startup)}
        report["version"] = {
            "sessionkeeperVersionS": statistics.median(version),
            "importClickS": statistics.median(click_import),
            "ratio": v_ratio,
            "target": f"<= {VERSION_TARGET}x",
            "met": v_ratio <= VERSION_TARGET,
        }
        sample = Path(tmp) / "large-20k.jsonl"
        sample.write_bytes(gzip.decompress(SAMPLE.read_bytes()))
        oracle = _pi_oracle()
        if isinstance(oracle, str):
            report["context"] = {"skipped": oracle}
            return report
        root, node = oracle
        ours = [*sk, "context", str(sample), "--json"]
        pi = [node, str(root / "context.mjs"), str(sample)]
        first, our_out = _time(ours, env)
        _, pi_out = _time(pi, env, root)
        if json.loads(our_out) != json.loads(pi_out):
            raise SystemExit("context --json and pi's context.mjs disagree on the 20k sample")
        mine, theirs = _alternate(ours, pi, repeat=repeat, env=env, anchor_cwd=root)
        c_ratio = statistics.median(theirs) / statistics.median(mine)
        report["context"] = {
            "sample": "tests/data/pi/large-20k.jsonl.gz",
            "sampleBytes": sample.stat().st_size,
            "sessionkeeperFirstS": first,
            "sessionkeeperS": statistics.median(mine),
            "piContextMjsS": statistics.median(theirs),
            "speedup": c_ratio,
            "speedupFirstRun": statistics.median(theirs) / first,
            "target": f">= {CONTEXT_TARGET}x",
            "met": c_ratio >= CONTEXT_TARGET,
        }
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks cli", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs of each command (alternating pairs)")
    parser.add_argument("--json", action="store_true", help="print the JSON report")
    args = parser.parse_args(argv)
    if shutil.which("node") is None:
        print("note: node not found; the pi pair will be skipped", file=sys.stderr)
    report = run(max(1, args.repeat))
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    v = report["version"]
    print(f"python -c pass                      {report['startup']['pythonPassS'] * 1000:8.1f} ms")
    print(f"python -c 'import click'            {v['importClickS'] * 1000:8.1f} ms   (anchor)")
    print(
        f"sessionkeeper --version             {v['sessionkeeperVersionS'] * 1000:8.1f} ms   "
        f"{v['ratio']:.2f}x the anchor (target {v['target']}: {'met' if v['met'] else 'NOT met'})"
    )
    c = report["context"]
    if "skipped" in c:
        print(f"context --json vs pi: skipped ({c['skipped']})")
        return 0
    print(f"node context.mjs 20k sample         {c['piContextMjsS'] * 1000:8.1f} ms   (anchor)")
    print(
        f"sessionkeeper context --json        {c['sessionkeeperS'] * 1000:8.1f} ms   "
        f"{c['speedup']:.1f}x faster (target {c['target']}: {'met' if c['met'] else 'NOT met'})"
    )
    print(
        f"  its first run (no tail index yet) {c['sessionkeeperFirstS'] * 1000:8.1f} ms   "
        f"{c['speedupFirstRun']:.1f}x faster"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
