"""
Regenerate the OpenClaw 2026.9 import fixtures (``tests/data/openclaw9/``).

For each agent database in ``shared/samples/openclaw9/`` (written by the real OpenClaw 2026.9.6 from our
7.35 sample stores, see that folder's README), this copies the database (gzip, ``NAME.sqlite.gz``); a
third one, ``runtime``, is ``small`` after OpenClaw's runtime applied ``runtime.ops.json``
(``runtime-ops.mjs``: appends through the plugin SDK, a v4 header on a generation without rows, 36-character
ids, a compressed row, a Gateway ``/new`` reset boundary). Then it runs OpenClaw's own legacy bridge on
each, ``tools/openclaw9-oracle/export-legacy.mjs``, keeping what it
writes as ``NAME.export/`` (``sessions.json`` + ``<sessionId>.jsonl``) and its report as
``NAME.export.json``. ``index.json`` lists them. The tests read these files; node is not needed to run
them. Usage::

    python tests/openclaw/regen_openclaw9_fixtures.py [--oracle DIR] [--shared DIR]

``--oracle`` (or ``$OPENCLAW9_ORACLE``) is an installed copy of ``tools/openclaw9-oracle`` (``npm ci``
done); default ``/tmp/openclaw9-oracle``. ``--shared`` defaults to ``$SESSIONKEEPER_SHARED`` or ``../shared``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "data" / "openclaw9"
SAMPLES = ("small", "pi-store")
RUNTIME_NOW_MS = 1_790_000_000_000  # 2026-09-21T14:13:20Z


def export(oracle: Path, database: Path, out_dir: Path) -> dict[str, object]:
    """Run OpenClaw 2026.9.6's legacy bridge on ``database`` into ``out_dir``; its JSON report."""
    proc = subprocess.run(
        ["node", str(oracle / "export-legacy.mjs"), str(database), str(out_dir)],
        capture_output=True,
        text=True,
        check=True,
        cwd=oracle,
        timeout=600,
    )
    report: dict[str, object] = json.loads(proc.stdout)
    return report


def runtime_db(oracle: Path, samples: Path) -> bytes:
    """``small`` after OpenClaw 2026.9.6's runtime applied ``runtime.ops.json`` (ids are random)."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "small.sqlite"
        source.write_bytes((samples / "small.sqlite").read_bytes())
        target = Path(tmp) / "runtime.sqlite"
        subprocess.run(
            ["node", str(oracle / "runtime-ops.mjs"), str(source), str(target),
             "--ops", f"@{OUT / 'runtime.ops.json'}", "--now", str(RUNTIME_NOW_MS), "--cwd", "/home/dev"],
            capture_output=True, check=True, cwd=oracle, timeout=600,
        )  # fmt: skip
        return target.read_bytes()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--oracle", type=Path, default=Path(os.environ.get("OPENCLAW9_ORACLE", "/tmp/openclaw9-oracle"))
    )
    shared = os.environ.get("SESSIONKEEPER_SHARED", str(HERE.parents[2] / "shared"))
    parser.add_argument("--shared", type=Path, default=Path(shared))
    args = parser.parse_args(argv)
    if not (args.oracle / "node_modules" / "openclaw").is_dir():
        print(f"no installed oracle at {args.oracle} (npm ci there)", file=sys.stderr)
        return 2
    samples = args.shared / "samples" / "openclaw9"
    OUT.mkdir(parents=True, exist_ok=True)
    index = []
    for name in (*SAMPLES, "runtime"):
        data = (
            (samples / f"{name}.sqlite").read_bytes()
            if name != "runtime"
            else runtime_db(args.oracle, samples)
        )
        (OUT / f"{name}.sqlite.gz").write_bytes(gzip.compress(data, mtime=0))
        target = OUT / f"{name}.export"
        if target.exists():
            shutil.rmtree(target)
        with tempfile.TemporaryDirectory() as tmp:  # the oracle reads a copy; shared/ is read-only
            copy = Path(tmp) / f"{name}.sqlite"
            copy.write_bytes(data)
            report = export(args.oracle, copy, target)
        (OUT / f"{name}.export.json").write_text(json.dumps(report, indent=2) + "\n")
        index.append(
            {"name": name, "database": f"{name}.sqlite.gz", "bytes": len(data), "export": f"{name}.export"}
        )
    (OUT / "index.json").write_text(json.dumps(index, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
