"""
Regenerate the OpenClaw oracle fixtures of the store tests (maintenance and reset policy).

Runs the real OpenClaw 2026.7.35 through ``tools/openclaw-oracle`` (``make-store.mjs``,
``maintenance.mjs``, ``reset.mjs``) and writes, under ``tests/data/oracle/``:

- ``maintenance/<store>/`` sessions directories (+ ``<store>.mtimes.json``) and
  ``maintenance/<store>.<variant>.json`` OpenClaw's results, listed in ``maintenance/index.json``;
- ``reset/cases.json.gz`` (inputs) and ``reset/results.json.gz`` (OpenClaw's freshness decision per
  case, one JSON object per line).

The tests read these files; node is not needed to run them. Usage::

    python tests/store/regen_openclaw_fixtures.py [--oracle DIR]

``--oracle`` (or ``$OPENCLAW_ORACLE``) is an installed copy of ``tools/openclaw-oracle`` (``npm ci`` done);
default ``/tmp/openclaw-oracle``. Output is deterministic (frozen clocks, fixed seeds).
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo


HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "data" / "oracle"
NOW_MS = 1_789_992_000_000  # 2026-09-21T12:00:00Z, the samples' now
DAY = 86_400_000


def _node(oracle: Path, script: str, *args: str) -> Any:
    proc = subprocess.run(
        ["node", str(oracle / script), *args], capture_output=True, text=True, check=True, cwd=oracle
    )
    return json.loads(proc.stdout)


def _iso(ms: int) -> str:
    return (
        dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    )


def _stamp(ms: int) -> str:
    return _iso(ms).replace(":", "-")


def _write_store(directory: Path, entries: dict[str, Any], files: dict[str, tuple[str, int]]) -> None:
    """Write a handcrafted sessions dir: sessions.json, ``files`` (name -> (content, mtime ms)), manifest."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    (directory / "sessions.json").write_text(json.dumps(entries, indent=2, ensure_ascii=False))
    mtimes: dict[str, int] = {}
    for name, (content, mtime) in files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(content)
        mtimes[name] = mtime
    manifest = {"generator": "regen_openclaw_fixtures.py", "files": mtimes}
    directory.with_name(f"{directory.name}.mtimes.json").write_text(json.dumps(manifest, indent=1) + "\n")


def _transcript(session_id: str, ms: int, body_chars: int = 200) -> str:
    header = {"type": "session", "version": 3, "id": session_id, "timestamp": _iso(ms), "cwd": "/home/dev"}
    message = {
        "type": "message",
        "id": "a1b2c3d4",
        "parentId": None,
        "timestamp": _iso(ms),
        "message": {"role": "user", "content": [{"type": "text", "text": "x" * body_chars}], "timestamp": ms},
    }
    return json.dumps(header) + "\n" + json.dumps(message) + "\n"


def _b18_store(directory: Path) -> int:
    now = 1_767_571_200_000  # 2026-01-05T00:00:00Z: the reset archive 2025-11-26 is 40 days old
    ages = {"a1": 40, "a2": 35, "a3": 10, "a4": 1, "a5": 0}
    entries = {}
    files: dict[str, tuple[str, int]] = {}
    for name, days in ages.items():
        updated = now - days * DAY
        entries[f"agent:main:direct:{name}"] = {"sessionId": name, "updatedAt": updated, "chatType": "direct"}
        files[f"{name}.jsonl"] = (_transcript(name, updated), updated)
    files["a1.jsonl.reset.2025-11-26T00-00-00.000Z"] = (_transcript("a1", now - 40 * DAY), now - 40 * DAY)
    files[f"a2.jsonl.deleted.{_stamp(now - 2 * DAY)}"] = (_transcript("a2", now - 2 * DAY), now - 2 * DAY)
    _write_store(directory, entries, files)
    return now


def _b19_store(directory: Path) -> int:
    now = NOW_MS
    rows = {
        "agent:main:main": ("m0", now - 20 * DAY),
        "agent:main:subagent:a": ("s1", now - 15 * 60_000),
        "cron:nightly": ("c1", now - 10 * DAY),
        "hook:1": ("h1", now - 5 * DAY),
        "hook:2": ("h2", now - 3_600_000),
    }
    entries = {key: {"sessionId": sid, "updatedAt": updated} for key, (sid, updated) in rows.items()}
    files = {f"{sid}.jsonl": (_transcript(sid, updated), updated) for sid, updated in rows.values()}
    _write_store(directory, entries, files)
    return now


def _blobs_store(directory: Path) -> int:
    """Skills prompt blobs: referenced, referenced only by a stale entry, orphaned (old/new), temp files."""
    now = NOW_MS
    blob_dir = "skills-prompts/sha256"
    prompts = {name: f"You are skilled at {name}. " + f"{name} " * 300 for name in ("a", "b", "c", "d", "e")}
    digests = {name: hashlib.sha256(text.encode()).hexdigest() for name, text in prompts.items()}

    def ref(name: str) -> dict[str, Any]:
        text = prompts[name]
        return {"version": 1, "algorithm": "sha256", "hash": digests[name], "bytes": len(text.encode())}

    rows = {
        "agent:main:main": ("m0", now - 60_000, "a"),
        "agent:main:direct:old": ("o1", now - 60 * DAY, "b"),
        "agent:main:direct:mid": ("d1", now - 10 * DAY, "c"),
    }
    entries = {
        key: {
            "sessionId": sid,
            "updatedAt": updated,
            "skillsSnapshot": {"skills": [name], "promptRef": ref(name)},
        }
        for key, (sid, updated, name) in rows.items()
    }
    files = {f"{sid}.jsonl": (_transcript(sid, updated, 3000), updated) for sid, updated, _ in rows.values()}
    ages = {"a": DAY, "b": 60 * DAY, "c": 10 * DAY, "d": 40 * DAY, "e": 60_000}
    for name, age in ages.items():
        digest = digests[name]
        files[f"{blob_dir}/{digest[:2]}/{digest}.txt"] = (prompts[name], now - age)
    d = digests["d"]
    files[f"{blob_dir}/{d[:2]}/{d}.txt.123.12345678-1234-4234-9234-123456789abc.tmp"] = (
        "x" * 700,
        now - 10 * 60_000,
    )
    files[f"{blob_dir}/{d[:2]}/{d}.txt.124.12345678-1234-4234-9234-123456789abd.tmp"] = (
        "y" * 700,
        now - 60_000,
    )
    _write_store(directory, entries, files)
    return now


def _unsafe_store(directory: Path) -> int:
    """Rows OpenClaw's loader drops (unsafe sessionId, not an object) and nothing else to remove."""
    now = NOW_MS
    rows = {"agent:main:main": ("m0", now - 60_000), "agent:main:direct:ok": ("k1", now - DAY)}
    entries: dict[str, Any] = {
        key: {"sessionId": sid, "updatedAt": updated} for key, (sid, updated) in rows.items()
    }
    entries["agent:main:direct:escape"] = {"sessionId": "../escape", "updatedAt": now - DAY}
    entries["agent:main:direct:junk"] = "not an object"
    entries["agent:main:direct:blank"] = {"sessionId": "", "updatedAt": now - DAY}
    files = {f"{sid}.jsonl": (_transcript(sid, updated), updated) for sid, updated in rows.values()}
    _write_store(directory, entries, files)
    return now


_DISK = {"maxDiskBytes": "140kb", "highWaterBytes": "90kb"}


def _maintenance(oracle: Path) -> None:
    out = OUT / "maintenance"
    out.mkdir(parents=True, exist_ok=True)
    index: list[dict[str, Any]] = []
    disk = out / "disk"
    if disk.exists():
        shutil.rmtree(disk)
    _node(
        oracle, "make-store.mjs", str(disk), "--now", str(NOW_MS), "--entries", "30", "--seed", "5",
        "--kb-per-entry", "1.5",
    )  # fmt: skip
    b18_now = _b18_store(out / "b18")
    b19_now = _b19_store(out / "b19")
    blobs_now = _blobs_store(out / "blobs")
    unsafe_now = _unsafe_store(out / "unsafe")
    runs: list[tuple[str, str, int, dict[str, Any], list[str], str]] = [
        ("disk", "enforce", NOW_MS, _DISK, ["--enforce"], "agent:main:main"),
        ("disk", "dry-run", NOW_MS, _DISK, ["--dry-run", "--enforce"], "agent:main:main"),
        ("disk", "on-save", NOW_MS, _DISK, ["--on-save"], "agent:main:main"),
        ("disk", "on-save-warn", NOW_MS, {**_DISK, "mode": "warn"}, ["--on-save"], "agent:main:main"),
        ("b18", "enforce", b18_now, {"pruneAfter": "30d", "maxEntries": 500}, ["--enforce"], ""),
        ("b18", "on-save", b18_now, {"pruneAfter": "30d", "maxEntries": 500}, ["--on-save"], ""),
        ("b18", "enforce-prune-zero", b18_now, {"pruneAfter": 0, "maxEntries": 500}, ["--enforce"], ""),
        ("b18", "on-save-warn", b18_now, {"pruneAfter": "30d", "mode": "warn"}, ["--on-save"], ""),
        ("b19", "enforce", b19_now, {"maxEntries": 3}, ["--enforce"], "agent:main:subagent:a"),
        ("blobs", "enforce", blobs_now, {}, ["--enforce"], "agent:main:main"),
        ("blobs", "on-save", blobs_now, {}, ["--on-save"], "agent:main:main"),
        ("blobs", "enforce-budget", blobs_now, {"maxDiskBytes": "8kb"}, ["--enforce"], "agent:main:main"),
        (
            "blobs",
            "dry-run-budget",
            blobs_now,
            {"maxDiskBytes": "8kb"},
            ["--dry-run", "--enforce"],
            "agent:main:main",
        ),
        ("unsafe", "enforce", unsafe_now, {}, ["--enforce"], "agent:main:main"),
        ("unsafe", "dry-run", unsafe_now, {}, ["--dry-run", "--enforce"], "agent:main:main"),
    ]
    for store, variant, now, config, flags, active in runs:
        args = [str(out / store), "--now", str(now), "--config", json.dumps(config), *flags, "--pretty"]
        if active:
            args += ["--active-key", active]
        result = _node(oracle, "maintenance.mjs", *args)
        name = f"{store}.{variant}.json"
        (out / name).write_text(json.dumps(result, indent=2) + "\n")
        index.append(
            {"store": store, "variant": variant, "nowMs": now, "config": config, "flags": flags,
             "activeKey": active or None, "result": name}
        )  # fmt: skip
    (out / "index.json").write_text(json.dumps(index, indent=2) + "\n")


def _local_ms(zone: str, year: int, month: int, day: int, hour: int, *, minute: int = 0) -> int:
    when = dt.datetime(year, month, day, hour, minute, tzinfo=ZoneInfo(zone))
    return int(when.timestamp() * 1000)


def _reset_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    # Daily boundary across DST days and zones: (zone, transition dates, hours at which to reset).
    dst_days = {
        "UTC": [(2026, 3, 29), (2026, 10, 25)],
        "Europe/Paris": [(2026, 3, 29), (2026, 10, 25)],
        "America/New_York": [(2026, 3, 8), (2026, 11, 1)],
        "Australia/Sydney": [(2026, 4, 5), (2026, 10, 4)],
        "Asia/Kolkata": [(2026, 3, 8)],
        "America/Santiago": [(2026, 4, 5), (2026, 9, 6)],
    }
    for zone, days in dst_days.items():
        for year, month, day in days:
            for at_hour in (4, 2, 0, 23):
                for hour, minute in ((0, 30), (1, 30), (2, 30), (3, 59), (4, 0), (5, 0), (23, 30)):
                    now = _local_ms(zone, year, month, day, hour, minute=minute)
                    for started_offset_h in (1, 6, 30):
                        started = now - started_offset_h * 3_600_000
                        cases.append(
                            {
                                "name": f"daily {zone} {year}-{month:02d}-{day:02d} {hour:02d}:{minute:02d} "
                                f"at{at_hour} started-{started_offset_h}h",
                                "tz": zone,
                                "nowMs": now,
                                "entry": {
                                    "sessionId": "s1",
                                    "updatedAt": now - 60_000,
                                    "sessionStartedAt": started,
                                },
                                "config": {"reset": {"mode": "daily", "atHour": at_hour}},
                            }
                        )
    base_now = NOW_MS
    hour = 3_600_000
    entry = {"sessionId": "s1", "updatedAt": base_now - 60_000, "sessionStartedAt": base_now - 2 * hour}
    policy_cases: list[tuple[str, dict[str, Any], dict[str, Any], str, dict[str, Any]]] = [
        ("default config (daily 4)", {}, entry, "agent:main:main", {}),
        ("idle 60 fresh", {"reset": {"mode": "idle", "idleMinutes": 60}},
         {**entry, "lastInteractionAt": base_now - 30 * 60_000}, "agent:main:main", {}),
        ("idle 60 stale", {"reset": {"mode": "idle", "idleMinutes": 60}},
         {**entry, "lastInteractionAt": base_now - 61 * 60_000}, "agent:main:main", {}),
        ("idle exactly at expiry", {"reset": {"mode": "idle", "idleMinutes": 60}},
         {**entry, "lastInteractionAt": base_now - 60 * 60_000}, "agent:main:main", {}),
        ("idle without minutes never expires", {"reset": {"mode": "idle"}},
         {**entry, "lastInteractionAt": base_now - 900 * DAY}, "agent:main:main", {}),
        ("legacy idleMinutes only", {"idleMinutes": 30},
         {**entry, "lastInteractionAt": base_now - 31 * 60_000}, "agent:main:main", {}),
        ("legacy idleMinutes with reset block", {"idleMinutes": 30, "reset": {"atHour": 4}},
         {**entry, "lastInteractionAt": base_now - 31 * 60_000}, "agent:main:main", {}),
        ("daily + idle: idle first", {"reset": {"mode": "daily", "atHour": 4, "idleMinutes": 60}},
         {**entry, "sessionStartedAt": base_now - 30 * hour, "lastInteractionAt": base_now - 20 * hour},
         "agent:main:main", {}),
        ("daily + idle: daily first", {"reset": {"mode": "daily", "atHour": 4, "idleMinutes": 600}},
         {**entry, "sessionStartedAt": base_now - 30 * hour, "lastInteractionAt": base_now - 9 * hour},
         "agent:main:main", {}),
        ("heartbeat bumped updatedAt only", {"reset": {"mode": "idle", "idleMinutes": 60}},
         {"sessionId": "s1", "updatedAt": base_now - 60_000, "sessionStartedAt": base_now - 9 * hour,
          "lastInteractionAt": base_now - 9 * hour + 5 * 60_000}, "agent:main:main", {}),
        ("no lifecycle fields: updatedAt fallback", {"reset": {"mode": "idle", "idleMinutes": 60}},
         {"sessionId": "s1", "updatedAt": base_now - 2 * hour}, "agent:main:main", {}),
        ("future timestamps ignored", {"reset": {"mode": "idle", "idleMinutes": 60}},
         {"sessionId": "s1", "updatedAt": base_now - 2 * hour, "sessionStartedAt": base_now + DAY,
          "lastInteractionAt": base_now + DAY}, "agent:main:main", {}),
        ("negative timestamps ignored", {"reset": {"mode": "daily"}},
         {"sessionId": "s1", "updatedAt": base_now - 60_000, "sessionStartedAt": -5}, "agent:main:main", {}),
        ("atHour clamped high", {"reset": {"mode": "daily", "atHour": 99}}, entry, "agent:main:main", {}),
        ("atHour clamped low and floored", {"reset": {"mode": "daily", "atHour": -3.7}}, entry,
         "agent:main:main", {}),
        ("atHour fractional floored", {"reset": {"mode": "daily", "atHour": 11.9}}, entry,
         "agent:main:main", {}),
        ("idleMinutes floored", {"reset": {"mode": "idle", "idleMinutes": 1.9}},
         {**entry, "lastInteractionAt": base_now - 90_000}, "agent:main:main", {}),
        ("resetByType group",
         {"reset": {"mode": "daily"}, "resetByType": {"group": {"mode": "idle", "idleMinutes": 5}}},
         {**entry, "lastInteractionAt": base_now - 6 * 60_000}, "agent:main:telegram:group:-100123", {}),
        ("resetByType dm alias", {"resetByType": {"dm": {"mode": "idle", "idleMinutes": 5}}},
         {**entry, "lastInteractionAt": base_now - 6 * 60_000}, "agent:main:direct:bob", {}),
        ("resetByType thread via key", {"resetByType": {"thread": {"mode": "idle", "idleMinutes": 5}}},
         {**entry, "lastInteractionAt": base_now - 6 * 60_000}, "agent:main:slack:channel:c1:thread:171", {}),
        ("resetByType thread via context", {"resetByType": {"thread": {"mode": "idle", "idleMinutes": 5}}},
         {**entry, "lastInteractionAt": base_now - 6 * 60_000}, "agent:main:main", {"messageThreadId": 7}),
        ("group via chatType context", {"resetByType": {"group": {"mode": "idle", "idleMinutes": 5}}},
         {**entry, "lastInteractionAt": base_now - 6 * 60_000}, "agent:main:main", {"chatType": "group"}),
        ("resetByChannel replaces reset",
         {"reset": {"mode": "idle", "idleMinutes": 5}, "resetByChannel": {"discord": {"idleMinutes": 600}}},
         {**entry, "lastInteractionAt": base_now - 6 * 60_000}, "agent:main:main", {"channel": "discord"}),
        ("resetByChannel other channel",
         {"reset": {"mode": "idle", "idleMinutes": 5}, "resetByChannel": {"discord": {"idleMinutes": 600}}},
         {**entry, "lastInteractionAt": base_now - 6 * 60_000}, "agent:main:main", {"channel": "telegram"}),
        ("provider-owned CLI session, implicit", {},
         {**entry, "sessionStartedAt": base_now - 3 * DAY, "modelProvider": "claude-cli",
          "cliSessionBindings": {"claude-cli": {"sessionId": "x"}}}, "agent:main:main", {}),
        ("provider-owned CLI session, configured", {"reset": {"mode": "daily"}},
         {**entry, "sessionStartedAt": base_now - 3 * DAY, "modelProvider": "claude-cli",
          "cliSessionBindings": {"claude-cli": {"sessionId": "x"}}}, "agent:main:main", {}),
    ]  # fmt: skip
    for name, config, case_entry, key, context in policy_cases:
        cases.append(
            {"name": name, "tz": "UTC", "nowMs": base_now, "entry": case_entry, "config": config, "key": key,
             "context": context}
        )  # fmt: skip
    cases.append({"name": "missing entry", "tz": "UTC", "nowMs": base_now, "entry": None, "config": {}})
    return cases


def _reset(oracle: Path) -> None:
    out = OUT / "reset"
    out.mkdir(parents=True, exist_ok=True)
    cases = _reset_cases()
    with tempfile.TemporaryDirectory() as tmp:
        batch = Path(tmp) / "cases.json"
        batch.write_text(json.dumps(cases))
        results = _node(oracle, "reset.mjs", "--cases", str(batch))
    for name, data in (("cases", cases), ("results", results)):
        payload = ("[\n" + ",\n".join(json.dumps(item) for item in data) + "\n]\n").encode()
        (out / f"{name}.json.gz").write_bytes(gzip.compress(payload, mtime=0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    default = os.environ.get("OPENCLAW_ORACLE", "/tmp/openclaw-oracle")
    parser.add_argument("--oracle", type=Path, default=Path(default), help="installed openclaw-oracle copy")
    parser.add_argument("--only", choices=["maintenance", "reset"], help="regenerate one part only")
    args = parser.parse_args(argv)
    if not (args.oracle / "node_modules").is_dir():
        print(f"no installed oracle at {args.oracle} (run npm ci there)", file=sys.stderr)
        return 2
    if args.only in (None, "maintenance"):
        _maintenance(args.oracle)
    if args.only in (None, "reset"):
        _reset(args.oracle)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
