"""
Regenerate ``tests/data/oracle/pressure.json``: OpenClaw 2026.7.35's own pre-prompt estimate and route.

Runs ``estimateLlmBoundaryTokenPressure`` and ``shouldPreemptivelyCompactBeforePrompt`` (dist chunk
``attempt.tool-run-context-BD5DcQIk.js``, loaded through the OpenClaw oracle's ``lib/oc.mjs``) on the pi
samples' contexts and on synthetic messages (CJK text, tool results, images, bash executions, summaries,
tool calls), each with and without a system prompt and a new prompt. ``test_runtime_pressure.py`` compares
:func:`sessionkeeper.runtime.estimate_prompt_pressure` with it, without node.

    python tests/runtime/regen_pressure_fixture.py

Environment: ``$OPENCLAW_ORACLE`` (default ``/tmp/openclaw-oracle``) after ``npm ci``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "data" / "oracle" / "pressure.json"

_SCRIPT = r"""
import { pathToFileURL } from "node:url";
import fs from "node:fs";
const [ocDir, casesFile] = process.argv.slice(2);
const oc = await import(pathToFileURL(`${ocDir}/lib/oc.mjs`).href);
oc.ensureSupportedNode();
oc.isolateEnv();
oc.quietConsole?.();
const pre = await oc.loadDist("attempt.tool-run-context-BD5DcQIk.js",
  ["estimateLlmBoundaryTokenPressure", "shouldPreemptivelyCompactBeforePrompt"]);
const cases = JSON.parse(fs.readFileSync(casesFile, "utf8"));
const rows = cases.map((c) => {
  const estimate = pre.estimateLlmBoundaryTokenPressure(
    { messages: c.messages, systemPrompt: c.systemPrompt, prompt: c.prompt });
  const route = pre.shouldPreemptivelyCompactBeforePrompt({ messages: c.messages,
    systemPrompt: c.systemPrompt, prompt: c.prompt, contextTokenBudget: c.contextWindow,
    reserveTokens: c.reserveTokens });
  return { name: c.name, estimate, route: route.route, overflowTokens: route.overflowTokens,
    promptBudgetBeforeReserve: route.promptBudgetBeforeReserve,
    effectiveReserveTokens: route.effectiveReserveTokens };
});
process.stdout.write(JSON.stringify(rows));
"""


def _cases() -> list[dict[str, object]]:
    sys.path.insert(0, str(HERE))
    import test_runtime_pressure as t

    cases: list[dict[str, object]] = []
    for name, messages in t.all_message_sets().items():
        for system, prompt in t.PROMPT_VARIANTS:
            for window, reserve in t.BUDGETS:
                cases.append(
                    {
                        "name": t.case_name(name, system, prompt, window, reserve),
                        "messages": messages,
                        "systemPrompt": system,
                        "prompt": prompt,
                        "contextWindow": window,
                        "reserveTokens": reserve,
                    }
                )
    return cases


def main() -> int:
    oc_dir = Path(os.environ.get("OPENCLAW_ORACLE", "/tmp/openclaw-oracle"))
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "pressure.mjs"
        script.write_text(_SCRIPT, encoding="utf-8")
        cases_file = Path(tmp) / "cases.json"
        cases_file.write_text(json.dumps(_cases(), ensure_ascii=False), encoding="utf-8")
        done = subprocess.run(
            ["node", str(script), str(oc_dir), str(cases_file)],
            check=True,
            capture_output=True,
            text=True,
            cwd=oc_dir,
        )
    rows = json.loads(done.stdout)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"openclaw": "2026.7.35", "rows": rows}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(rows)} rows to {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
