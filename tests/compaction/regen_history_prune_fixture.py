"""
Regenerate tests/data/oracle/history-prune.json.gz: OpenClaw 2026.7.35's ``pruneHistoryForContextShare``.

Runs ``tests/compaction/history_prune_oracle.mjs`` (OpenClaw's own code through ``buildHistoryPrunePlan``,
loaded from the installed oracle) on crafted histories whose tool pairing breaks when the oldest chunks are
dropped: results displaced after a user turn, calls whose results sit in the next chunk, missing and
duplicate results, several drops in a row. Usage::

    python tests/compaction/regen_history_prune_fixture.py [--oracle /tmp/openclaw-oracle]

Writes ``{"cases": [{name, messages, contextWindow, maxHistoryShare, parts?}], "results": [...]}``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


HERE = Path(__file__).resolve().parent
OUT = HERE.parents[1] / "tests" / "data" / "oracle" / "history-prune.json.gz"
T0 = 1_796_000_000_000


def _user(text: str, ts: int) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": ts}


def _assistant(blocks: list[dict[str, Any]], ts: int, stop: str = "toolUse") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": blocks,
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "usage": {
            "input": 0,
            "output": 0,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 0,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        },
        "stopReason": stop,
        "timestamp": ts,
    }


def _call(call_id: str, name: str = "read") -> dict[str, Any]:
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": {"path": f"src/{call_id}.py"}}


def _result(call_id: str, text: str, ts: int, name: str = "read") -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": [{"type": "text", "text": text}],
        "isError": False,
        "timestamp": ts,
    }


def history(seed: int, turns: int) -> list[dict[str, Any]]:
    """A history of tool turns with pairing defects placed by ``seed``."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = []
    ts = T0
    for n in range(turns):
        ts += 10
        messages.append(_user(f"step {n}: " + "u" * rng.randint(50, 1500), ts))
        calls = [f"call_{seed}_{n}_{k}" for k in range(rng.randint(1, 3))]
        messages.append(_assistant([_call(c) for c in calls], ts + 1))
        defect = rng.choice(["none", "none", "displaced", "missing", "duplicate", "late"])
        results = [_result(c, f"{c} " + "r" * rng.randint(100, 4000), ts + 2) for c in calls]
        if defect == "missing":
            results = results[1:]
        if defect == "duplicate":
            results.append(dict(results[0]))
        if defect in ("displaced", "late"):
            messages.append(_user("(meanwhile) " + "m" * rng.randint(20, 400), ts + 3))
        messages.extend(results)
        if defect == "late":
            messages.append(
                _assistant([{"type": "text", "text": "a" * rng.randint(20, 300)}], ts + 4, stop="stop")
            )
            messages.append(_result(calls[-1], "late duplicate " + "l" * 200, ts + 5))
        messages.append(
            _assistant([{"type": "text", "text": "done " + "d" * rng.randint(20, 600)}], ts + 6, "stop")
        )
    return messages


def cases() -> list[dict[str, Any]]:
    out = []
    for seed in range(12):
        messages = history(seed, 6 + seed % 5)
        for window, share in ((4_000, 0.5), (9_000, 0.5), (6_000, 0.3)):
            out.append(
                {
                    "name": f"seed{seed}-w{window}-s{share}",
                    "messages": messages,
                    "contextWindow": window,
                    "maxHistoryShare": share,
                }
            )
    out.append(
        {
            "name": "parts-3",
            "messages": history(99, 10),
            "contextWindow": 5_000,
            "maxHistoryShare": 0.5,
            "parts": 3,
        }
    )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument(
        "--oracle", default="/tmp/openclaw-oracle", help="installed copy of tools/openclaw-oracle"
    )
    args = parser.parse_args()
    batch = cases()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as handle:
        json.dump(batch, handle)
    proc = subprocess.run(
        ["node", str(HERE / "history_prune_oracle.mjs"), args.oracle, handle.name],
        check=True,
        capture_output=True,
        text=True,
    )
    results = json.loads(proc.stdout)
    data = (json.dumps({"cases": batch, "results": results}, ensure_ascii=False) + "\n").encode("utf-8")
    OUT.write_bytes(gzip.compress(data, mtime=0))  # byte-identical on rerun
    print(f"wrote {len(batch)} cases to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
