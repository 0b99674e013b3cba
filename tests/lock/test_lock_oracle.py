"""
The write lock against OpenClaw 2026.7.35's own code (fixture from ``tests/lock/regen_lock_fixtures.py``).

Settings resolution (env > config > default), stale detection, and the lock file format must equal
what OpenClaw computes and writes. Deliberate differences, not in the fixture: a numeric ``createdAt``
is read (D8: both formats), and lock files are created 0600 (OpenClaw: 0644).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from sessionkeeper._config import load_config
from sessionkeeper._lockfile import format_lock_payload, inspect_lock_owner, parse_lock_payload
from sessionkeeper.transcript.lock._settings import WriteLockSettings


FIXTURE = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "oracle" / "write_lock.json").read_text()
)
PIDS = {"live": 4100, "dead": 4200}


def _show(value: float) -> object:
    return "Infinity" if value == math.inf else value


@pytest.mark.parametrize("case", FIXTURE["settings"], ids=lambda c: json.dumps([c["config"], c["env"]]))
def test_settings_resolution_matches_openclaw(case: dict[str, Any]) -> None:
    settings = WriteLockSettings.from_config(load_config(case["config"]), env=case["env"])
    got = {
        "timeoutMs": _show(settings.acquire_timeout_ms),
        "staleMs": _show(settings.stale_ms),
        "maxHoldMs": _show(settings.max_hold_ms),
    }
    assert got == case["expected"]


def test_inspect_cases_cover_every_age_and_liveness_reason() -> None:
    seen = {reason for case in FIXTURE["inspect"] for reason in case["expected"]["staleReasons"]}
    assert seen == {
        "missing-pid",
        "dead-pid",
        "recycled-pid",
        "invalid-createdAt",
        "too-old",
        "hold-exceeded",
    }


@pytest.mark.parametrize("case", FIXTURE["inspect"], ids=lambda c: json.dumps([c["role"], c["payload"]]))
def test_stale_detection_matches_openclaw(case: dict[str, Any]) -> None:
    payload = dict(case["payload"])
    role = case["role"]
    if role in PIDS:
        payload["pid"] = PIDS[role]
    starts = {PIDS[name]: value for name, value in case["startTimes"].items()}
    result = inspect_lock_owner(
        parse_lock_payload(json.dumps(payload)),
        lock_path=Path("/s.jsonl.lock"),
        now_ms=case["nowMs"],
        stale_ms=case["staleMs"],
        held_by_this_process=not case["respectMaxHold"],
        self_pid=1,
        pid_alive=lambda pid: pid == PIDS["live"],
        start_time=starts.get,
    )
    expected = case["expected"]
    assert list(result.stale_reasons) == expected["staleReasons"]
    assert result.pid_alive == expected["pidAlive"]
    assert result.age_ms == expected["ageMs"]


def test_lock_file_bytes_match_what_openclaw_writes() -> None:
    spec = FIXTURE["lockFile"]
    ours = format_lock_payload(
        pid=31337, created_at_ms=spec["nowMs"], max_hold_ms=spec["maxHoldMs"], starttime=271828
    )
    theirs = spec["raw"].replace("PID", "31337").replace("START", "271828")
    assert ours.decode() == theirs
    assert spec["removedOnRelease"]
