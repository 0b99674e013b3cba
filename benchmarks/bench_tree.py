"""
``sessionkeeper tree``: time to lay out and print a transcript's entry tree, by shape and width.

Run: ``python -m benchmarks.bench_tree [--sizes 2000,20000,100000] [--repeat 3]``.

For each size, three synthetic transcripts (short user messages, increasing timestamps) are written:
``chain`` (one linear branch, the common case), ``comb`` (a fork at every 4th entry of the main line,
each side branch 3 entries long: the prefix grows with every fork) and ``bushy`` (every entry's parent
drawn at random among the earlier ones). The table shows, per shape and width (80 and 40 columns), the
median wall time of the whole command (load, tree build, layout, print to a null sink) over
``--repeat`` runs, the output's line count and its widest line in cells (never above the width).
"""

from __future__ import annotations

import argparse
import io
import json
import random
import statistics
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

from click.testing import CliRunner
from rich.cells import cell_len

from sessionkeeper.cli._main import cli


def _parents(shape: str, size: int) -> list[int | None]:
    if shape == "chain":
        return [None, *range(size - 1)]
    if shape == "comb":
        parents: list[int | None] = [None]
        spine = 0
        while len(parents) < size:
            parents.append(spine)  # the main line goes on
            nxt = len(parents) - 1
            if len(parents) % 4 == 0:
                side = spine
                for _ in range(3):
                    parents.append(side)
                    side = len(parents) - 1
            spine = nxt
        return parents[:size]
    rng = random.Random(size)
    return [None, *(rng.randrange(n) for n in range(1, size))]


def _write(path: Path, parents: list[int | None]) -> None:
    lines = [
        json.dumps({"type": "session", "version": 3, "id": "bench", "timestamp": "2026-01-01T00:00:00.000Z"})
    ]
    for n, parent in enumerate(parents):
        stamp = f"2026-01-01T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}.{n % 1000:03d}Z"
        entry = {
            "type": "message",
            "id": f"{n:08x}",
            "parentId": None if parent is None else f"{parent:08x}",
            "timestamp": stamp,
            "message": {
                "role": "user",
                "content": f"message {n}: please look at the loader again",
                "timestamp": n,
            },
        }
        lines.append(json.dumps(entry))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _run(path: Path, width: int) -> tuple[float, int, int]:
    runner = CliRunner()
    start = time.perf_counter()
    with redirect_stdout(io.StringIO()):
        result = runner.invoke(cli, ["tree", str(path), "--width", str(width)])
    elapsed = time.perf_counter() - start
    if result.exit_code != 0:
        raise SystemExit(f"tree failed on {path}: {result.output}")
    lines = result.stdout.splitlines()[1:]
    return elapsed, len(lines), max((cell_len(line) for line in lines), default=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000,20000,100000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'shape':<7} {'entries':>8} {'width':>5} {'median s':>9} {'lines':>8} {'widest':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            for shape in ("chain", "comb", "bushy"):
                path = Path(tmp) / f"{shape}-{size}.jsonl"
                _write(path, _parents(shape, size))
                for width in (80, 40):
                    runs = [_run(path, width) for _ in range(args.repeat)]
                    median = statistics.median(r[0] for r in runs)
                    _, lines, widest = runs[-1]
                    print(f"{shape:<7} {size:>8} {width:>5} {median:>9.3f} {lines:>8} {widest:>6}")


if __name__ == "__main__":
    main()
