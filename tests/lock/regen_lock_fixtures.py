"""
Regenerate ``tests/data/oracle/write_lock.json`` from OpenClaw 2026.7.35's own write-lock code.

Runs ``tests/lock/openclaw_lock_oracle.mjs`` (which imports ``session-write-lock`` from the installed
oracle's ``dist/``) on the cases built here, and stores inputs and OpenClaw's answers together:
settings resolution (env > config > default, ``resolveSessionWriteLockOptions``), stale detection
(``inspectLockPayload``) and the lock file OpenClaw writes. ``tests/lock/test_lock_oracle.py`` replays
them against sessionkeeper.

    python tests/lock/regen_lock_fixtures.py [--oracle /tmp/openclaw-oracle]

``--oracle`` (or ``$OPENCLAW_ORACLE``) is an installed copy of ``tools/openclaw-oracle`` (``npm ci`` done).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
from pathlib import Path


HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "data" / "oracle" / "write_lock.json"
NOW = 1_778_148_672_345
ENV_KEYS = {
    "acquireTimeoutMs": "OPENCLAW_SESSION_WRITE_LOCK_ACQUIRE_TIMEOUT_MS",
    "staleMs": "OPENCLAW_SESSION_WRITE_LOCK_STALE_MS",
    "maxHoldMs": "OPENCLAW_SESSION_WRITE_LOCK_MAX_HOLD_MS",
}


def settings_cases() -> list[dict[str, object]]:
    config_values: list[object] = [None, 2000, 0, -1, 1.5, 1.0, "30m", "60000", True, 2**53, 2**53 - 1, [5]]
    env_values = [None, "1500", " 4000 ", "0", "-5", "1.5", "abc", "Infinity", "", "007", "1e3", "9" * 20]
    cases: list[dict[str, object]] = [{"config": {}, "env": {}}, {"config": {"session": {}}, "env": {}}]
    for key, variable in ENV_KEYS.items():
        for value in config_values:
            config = {} if value is None else {"session": {"writeLock": {key: value}}}
            cases.append({"config": config, "env": {}})
        for value in env_values:
            env = {} if value is None else {variable: value}
            cases.append({"config": {"session": {"writeLock": {key: 2000}}}, "env": env})
    return cases


def inspect_cases() -> list[dict[str, object]]:
    created = {
        "fresh": "2026-05-07T10:11:02.345Z",  # 10 s before NOW
        "old": "2026-05-07T09:00:00.000Z",  # 71 min before NOW
        "date-only": "2026-05-07",
        "garbage": "yesterday",
        "missing": None,
    }
    cases: list[dict[str, object]] = []
    for role, created_key, hold, start, respect, stale in itertools.product(
        ("live", "dead", "none"),
        created,
        (None, 5_000, 0),
        ("same", "other", "absent"),
        (True, False),
        (1_800_000, 60_000),
    ):
        payload: dict[str, object] = {}
        if created[created_key] is not None:
            payload["createdAt"] = created[created_key]
        if hold is not None:
            payload["maxHoldMs"] = hold
        if start != "absent":
            payload["starttime"] = 500 if start == "same" else 499
        if role == "none":
            payload["pid"] = "12"
        cases.append(
            {
                "payload": payload,
                "role": role,
                "nowMs": NOW,
                "staleMs": stale,
                "respectMaxHold": respect,
                "startTimes": {"live": 500},
            }
        )
    return cases


def _dump(fixture: dict[str, object]) -> str:
    """JSON with one case per line (small diffs on regeneration)."""
    parts = []
    for key, value in fixture.items():
        if isinstance(value, list):
            body = ",\n".join("  " + json.dumps(item, separators=(",", ":")) for item in value)
            parts.append(f"{json.dumps(key)}: [\n{body}\n ]")
        else:
            parts.append(f"{json.dumps(key)}: {json.dumps(value)}")
    return "{\n " + ",\n ".join(parts) + "\n}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--oracle", default=os.environ.get("OPENCLAW_ORACLE", "/tmp/openclaw-oracle"))
    parser.add_argument("--out", type=Path, default=OUT, help="where to write the fixture")
    args = parser.parse_args()
    request = {
        "settings": settings_cases(),
        "inspect": inspect_cases(),
        "lockFile": {"nowMs": NOW, "maxHoldMs": 300_000},
    }
    done = subprocess.run(
        ["node", str(HERE / "openclaw_lock_oracle.mjs")],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "OPENCLAW_ORACLE": args.oracle},
        timeout=600,
    )
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    fixture = {
        "source": "openclaw 2026.7.35 session-write-lock-hTSNPB_L.js, tests/lock/openclaw_lock_oracle.mjs",
        "settings": [
            dict(case, expected=exp)
            for case, exp in zip(request["settings"], answer["settings"], strict=True)
        ],
        "inspect": [
            dict(case, expected=exp) for case, exp in zip(request["inspect"], answer["inspect"], strict=True)
        ],
        "lockFile": dict(
            request["lockFile"],
            raw=answer["lockFile"],
            mode=answer["lockFileMode"],
            removedOnRelease=answer["lockFileRemovedOnRelease"],
        ),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(_dump(fixture))
    counts = f"{len(fixture['settings'])} settings cases, {len(fixture['inspect'])} inspect cases"
    print(f"wrote {args.out} ({counts})")


if __name__ == "__main__":
    main()
