"""
Store maintenance cost on a large sessions directory: the pure planner, a dry run (load + listing + lock
scan + plan) and an enforce run (store commit + archiving + deletions), with and without a disk budget, next
to OpenClaw 2026.7.35's own ``sessions cleanup --enforce`` on the same directory when the oracle is installed.

Run: ``python -m benchmarks.bench_maintenance [--entries 10000] [--repeat 5] [--no-openclaw]``.
The store has ``--entries`` entries (ages spread over 90 days), one ~1 KB transcript each, 2 % orphan
transcripts, reset/deleted archives and trajectory sidecars; default settings (pruneAfter 30d, maxEntries
500) remove most entries, as a long-neglected store would need.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
import tracemalloc
from pathlib import Path

import anyio

from sessionkeeper.store import (
    MaintenanceReport,
    MaintenanceSettings,
    StoreFile,
    plan_maintenance,
    run_maintenance,
)
from sessionkeeper.store.maintenance._plan import serialize_store
from sessionkeeper.store.maintenance._run import list_store_files


NOW = 1_789_992_000_000
DAY = 86_400_000
ORACLE = Path(os.environ.get("OPENCLAW_ORACLE_DIR", "/tmp/openclaw-oracle"))
KEY_SHAPES = (
    "agent:main:direct:u{i}",
    "agent:main:telegram:direct:{i}",
    "agent:main:discord:channel:{i}",
    "agent:main:hook:{i:08x}-0000-4000-8000-000000000000",
    "agent:main:subagent:{i:08x}-0000-4000-8000-000000000000",
    "agent:main:cron:job{i}:run:{i:08x}",
    "agent:main:slack:channel:c{i}:thread:{i}",
)


def make_store(directory: Path, entries: int, *, seed: int = 7) -> dict[str, int]:
    """Write the benchmark store; returns the mtime manifest (name -> ms)."""
    rng = random.Random(seed)
    directory.mkdir(parents=True)
    store: dict[str, dict] = {"agent:main:main": {"sessionId": "main-session", "updatedAt": NOW - 60_000}}
    mtimes: dict[str, int] = {}
    body = json.dumps({"type": "message", "message": {"role": "user", "content": "x" * 900}}) + "\n"

    def write(name: str, text: str, mtime: int) -> None:
        (directory / name).write_text(text)
        os.utime(directory / name, ns=(mtime * 1_000_000, mtime * 1_000_000))
        mtimes[name] = mtime

    write("main-session.jsonl", body, NOW - 60_000)
    for i in range(entries - 1):
        updated = NOW - int(rng.random() ** 1.5 * 90 * DAY)
        sid = f"{i:08x}-1111-4111-8111-{rng.getrandbits(48):012x}"
        store[KEY_SHAPES[i % len(KEY_SHAPES)].format(i=i)] = {
            "sessionId": sid,
            "updatedAt": updated,
            "label": f"s{i}",
        }
        write(f"{sid}.jsonl", '{"type":"session","version":3}\n' + body, updated)
        if i % 10 == 0:
            write(f"{sid}.trajectory.jsonl", body, updated)
    for i in range(max(1, entries // 50)):
        write(f"orphan-{i:06d}.jsonl", body, NOW - rng.randrange(90) * DAY)
        stamp = time.strftime("%Y-%m-%dT%H-%M-%S.000Z", time.gmtime((NOW - rng.randrange(90) * DAY) / 1000))
        write(f"old-{i:06d}.jsonl.reset.{stamp}", body, NOW - 10 * DAY)
        write(f"gone-{i:06d}.jsonl.deleted.{stamp}", body, NOW - 10 * DAY)
    write("sessions.json", serialize_store(store).decode(), NOW)
    (directory.parent / f"{directory.name}.mtimes.json").write_text(json.dumps({"files": mtimes}))
    return mtimes


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def bench_plan(directory: Path, settings: MaintenanceSettings, repeat: int) -> tuple[float, float, int, int]:
    entries = json.loads((directory / "sessions.json").read_bytes())
    files: list[StoreFile] = list_store_files(directory)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        plan = plan_maintenance(entries, files=files, settings=settings, now_ms=NOW, sessions_dir=directory)
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    plan_maintenance(entries, files=files, settings=settings, now_ms=NOW, sessions_dir=directory)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return _median_ms(times), peak / 2**20, len(plan.report.removals), len(plan.report.file_actions)


async def _run_once(copy: Path, settings: MaintenanceSettings, dry_run: bool) -> MaintenanceReport:
    return await run_maintenance(
        copy, settings=settings, now_ms=NOW, dry_run=dry_run, active_keys=["agent:main:main"]
    )


def bench_run(
    source: Path, settings: MaintenanceSettings, repeat: int, *, dry_run: bool
) -> tuple[float, int]:
    times = []
    actions = 0
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "sessions"
            shutil.copytree(source, copy)  # copy2 keeps the mtimes
            start = time.perf_counter()
            report = anyio.run(_run_once, copy, settings, dry_run)
            times.append(time.perf_counter() - start)
            actions = len(report.file_actions)
    return _median_ms(times), actions


def bench_openclaw(source: Path, config: dict, repeat: int) -> float | None:
    script = ORACLE / "maintenance.mjs"
    if not script.exists() or not (ORACLE / "node_modules").is_dir():
        return None
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(
            ["node", str(script), str(source), "--now", str(NOW), "--config", json.dumps(config), "--enforce",
             "--active-key", "agent:main:main"],
            capture_output=True, text=True, check=False, cwd=ORACLE,
        )  # fmt: skip
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            print(f"  (openclaw run failed: {done.stderr.strip()[-300:]})")
            return None
    return _median_ms(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-openclaw", action="store_true", help="skip the OpenClaw oracle comparison")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "sessions"
        make_store(source, args.entries)
        files = list_store_files(source)
        total = sum(f.size for f in files)
        print(f"store: {args.entries} entries, {len(files)} files, {total / 2**20:.1f} MiB")
        scenarios = {
            "defaults (30d, cap 500)": ({}, MaintenanceSettings()),
            "defaults + disk budget 50%": (
                {"maxDiskBytes": total // 2},
                MaintenanceSettings(max_disk_bytes=total // 2),
            ),
            "cap only (pruneAfter off, 20k)": (
                {"pruneAfter": "3650d", "maxEntries": 20_000},
                MaintenanceSettings(prune_after_ms=None, max_entries=20_000),
            ),
        }
        print(f"{'scenario':32} {'step':28} {'median ms':>10} {'removed':>8} {'files':>6} {'peak MiB':>9}")
        for name, (config, settings) in scenarios.items():
            plan_ms, peak, removed, actions = bench_plan(source, settings, args.repeat)
            step = "plan_maintenance (pure)"
            print(f"{name:32} {step:28} {plan_ms:>10.1f} {removed:>8} {actions:>6} {peak:>9.1f}")
            dry_ms, _ = bench_run(source, settings, min(args.repeat, 3), dry_run=True)
            print(f"{'':32} {'run_maintenance dry run':28} {dry_ms:>10.1f} {removed:>8} {actions:>6} {'':>9}")
            run_ms, done = bench_run(source, settings, min(args.repeat, 3), dry_run=False)
            print(f"{'':32} {'run_maintenance enforce':28} {run_ms:>10.1f} {removed:>8} {done:>6} {'':>9}")
            if not args.no_openclaw:
                oc = bench_openclaw(source, config, 1)
                if oc is not None:
                    label = "openclaw cleanup --enforce*"
                    print(f"{'':32} {label:28} {oc:>10.1f} {'':>8} {'':>6} {'':>9}")
        if not args.no_openclaw:
            print("* OpenClaw oracle wall time: node start-up (~1 s), a copy of the directory, the cleanup.")


if __name__ == "__main__":
    main()
