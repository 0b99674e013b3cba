"""
Regenerate ``tests/data/oracle/overflow.json`` from the references' own overflow classifiers.

For every text of the runtime's overflow tables it records what OpenClaw 2026.7.35 says
(``isContextOverflowError``, ``isLikelyContextOverflowError``, ``extractObservedOverflowTokenCount``,
``isRateLimitErrorMessage``, ``isBillingErrorMessage``, loaded from its dist chunks through the OpenClaw
oracle's ``lib/oc.mjs``), what pi 0.73.1 says (``isContextOverflow`` of ``@mariozechner/pi-ai`` on an
error reply), and what OpenClaw's bundled fork of it says (``isContextOverflow`` of ``@openclaw/ai``,
which OpenClaw's harness uses and which knows a few more providers). ``test_runtime_overflow_oracle.py``
checks DESIGN D5 against it without node.

    python tests/runtime/regen_overflow_fixture.py

Environment: ``$OPENCLAW_ORACLE`` (default ``/tmp/openclaw-oracle``) and ``$PI_ORACLE`` (default
``/tmp/pi-oracle``), both after ``npm ci`` (see ``tools/*-oracle/README.md``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "data" / "oracle" / "overflow.json"

_SCRIPT = r"""
import { pathToFileURL } from "node:url";
import fs from "node:fs";
const [ocDir, piDir, casesFile] = process.argv.slice(2);
const oc = await import(pathToFileURL(`${ocDir}/lib/oc.mjs`).href);
oc.ensureSupportedNode();
oc.isolateEnv();
oc.quietConsole?.();
const errors = await oc.loadDist("errors-_fvSgM8T.js",
  ["isContextOverflowError", "isLikelyContextOverflowError", "extractObservedOverflowTokenCount"]);
const sanitize = await oc.loadDist("sanitize-user-facing-text-D-sR-1VY.js",
  ["isRateLimitErrorMessage", "isBillingErrorMessage"]);
const pi = await import(pathToFileURL(
  `${piDir}/node_modules/@mariozechner/pi-ai/dist/utils/overflow.js`).href);
const ocAi = await import(pathToFileURL(
  `${ocDir}/node_modules/@openclaw/ai/dist/internal/runtime.mjs`).href);
const texts = JSON.parse(fs.readFileSync(casesFile, "utf8"));
const errorReply = (text) => ({ role: "assistant", stopReason: "error", errorMessage: text,
  usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 } });
const rows = texts.map((text) => ({
  text,
  openclaw: errors.isContextOverflowError(text),
  openclawLikely: errors.isLikelyContextOverflowError(text),
  openclawObserved: errors.extractObservedOverflowTokenCount(text) ?? null,
  openclawRateLimit: sanitize.isRateLimitErrorMessage(text),
  openclawBilling: sanitize.isBillingErrorMessage(text),
  pi: pi.isContextOverflow(errorReply(text)),
  openclawAi: ocAi.isContextOverflow(errorReply(text)),
}));
process.stdout.write(JSON.stringify(rows));
"""


def _texts() -> list[str]:
    sys.path.insert(0, str(HERE))
    import test_runtime_field_reports as reports
    import test_runtime_overflow as tables

    texts = (
        [t for _, t in tables.POSITIVES] + [t for _, t in tables.NEGATIVES] + [t for t, _ in tables.OBSERVED]
    )
    texts += list(reports.B09_P.values()) + list(reports.B09_N.values())
    return list(dict.fromkeys(t for t in texts if t))


def main() -> int:
    oc_dir = Path(os.environ.get("OPENCLAW_ORACLE", "/tmp/openclaw-oracle"))
    pi_dir = Path(os.environ.get("PI_ORACLE", "/tmp/pi-oracle"))
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "overflow.mjs"
        script.write_text(_SCRIPT, encoding="utf-8")
        cases = Path(tmp) / "cases.json"
        cases.write_text(json.dumps(_texts(), ensure_ascii=False), encoding="utf-8")
        done = subprocess.run(
            ["node", str(script), str(oc_dir), str(pi_dir), str(cases)],
            check=True,
            capture_output=True,
            text=True,
            cwd=oc_dir,
        )
    rows = json.loads(done.stdout)
    payload = {"openclaw": "2026.7.35", "pi": "0.73.1", "rows": rows}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(payload, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(rows)} rows to {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
