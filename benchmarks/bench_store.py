"""
Store entry update cost: ``SessionStore.update_entry`` on the JSON and SQLite backends at 500, 10k and
100k entries, next to OpenClaw 2026.7.35's own ``updateSessionStoreEntry`` on the same file when the
openclaw oracle is installed (DESIGN "Targets": SQLite flat as the store grows and >= 20x faster than a
JSON rewrite at 10k; the JSON backend at least 2x faster than OpenClaw's 20 ms at 500 / 368 ms at 10k).

Run: ``python -m benchmarks.bench_store [--sizes 500,10000,100000] [--no-openclaw]``.
Entries are shaped like the sample store (``tests/data/openclaw/medium``), ~0.9 KB of JSON each.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import anyio
import msgspec

from sessionkeeper.store import JsonFileStoreBackend, SessionStore, SqliteStoreBackend


REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "tests" / "data" / "openclaw" / "medium" / "sessions.json"
ORACLE = Path(os.environ.get("OPENCLAW_ORACLE_DIR", "/tmp/openclaw-oracle"))
NOW = 1_789_992_000_000


def make_rows(count: int) -> dict[str, dict]:
    """``count`` rows cloned from the sample store, with unique keys and session ids."""
    sample = [v for v in json.loads(SAMPLE.read_bytes()).values() if v.get("sessionId") != "../escape"]
    rows: dict[str, dict] = {}
    for i in range(count):
        row = dict(sample[i % len(sample)])
        row["sessionId"] = f"{i:08x}-0000-4000-8000-000000000000"
        row["updatedAt"] = NOW - i * 1000
        row.pop("sessionFile", None)
        rows[f"agent:main:bench:{i}"] = row
    return rows


def write_json_store(path: Path, rows: dict[str, dict]) -> None:
    path.write_bytes(msgspec.json.format(msgspec.json.encode(rows), indent=2))


async def fill_sqlite(path: Path, rows: dict[str, dict]) -> None:
    from sessionkeeper.store import session_entry_from_dict

    backend = SqliteStoreBackend(path, synchronous="OFF")
    entries = {k: session_entry_from_dict(v) for k, v in rows.items()}
    await backend.transaction(lambda store: store.update(entries))
    await backend.aclose()


async def time_updates(store: SessionStore, key: str, updates: int) -> list[float]:
    await store.get(key)  # warm the cache / connection, as a running agent would be
    times = []
    for i in range(updates):
        t0 = time.perf_counter()
        await store.update_entry(key, lambda e, i=i: {"compaction_count": i + 1, "last_interaction_at": NOW})
        times.append((time.perf_counter() - t0) * 1000)
    return times


def openclaw_times(path: Path, key: str, updates: int) -> list[float] | None:
    if not (ORACLE / "node_modules" / "openclaw").is_dir() or shutil.which("node") is None:
        return None
    script = Path(__file__).with_name("openclaw_store_update.mjs")
    done = subprocess.run(
        ["node", str(script), str(path), key, str(updates)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "OPENCLAW_ORACLE_DIR": str(ORACLE)},
        timeout=1800,
    )
    if done.returncode != 0:
        print(f"  (openclaw run failed: {done.stderr.strip()[-300:]})")
        return None
    return list(json.loads(done.stdout.strip().splitlines()[-1])["timesMs"])


def summary(times: list[float]) -> tuple[float, float, float]:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    median = statistics.median(ordered)
    return median, p95, 1000 / median if median else float("inf")


async def run_size(size: int, workdir: Path, with_openclaw: bool) -> list[tuple[str, int, list[float]]]:
    rows = make_rows(size)
    key = f"agent:main:bench:{size // 2}"
    results: list[tuple[str, int, list[float]]] = []
    json_updates = 200 if size <= 1000 else 40 if size <= 20_000 else 8
    for durable in (True, False):
        path = workdir / f"json-{size}-{durable}" / "sessions.json"
        path.parent.mkdir()
        write_json_store(path, rows)
        async with SessionStore(JsonFileStoreBackend(path, durable=durable)) as store:
            label = "json (fsync)" if durable else "json (no fsync, as OpenClaw)"
            results.append((label, size, await time_updates(store, key, json_updates)))
    for synchronous in ("FULL", "NORMAL"):
        path = workdir / f"sqlite-{size}-{synchronous}" / "sessions.sqlite"
        path.parent.mkdir()
        await fill_sqlite(path, rows)
        async with SessionStore(SqliteStoreBackend(path, synchronous=synchronous)) as store:  # type: ignore[arg-type]
            label = "sqlite (synchronous=FULL)" if synchronous == "FULL" else "sqlite (synchronous=NORMAL)"
            results.append((label, size, await time_updates(store, key, 300)))
    if with_openclaw:
        path = workdir / f"openclaw-{size}" / "sessions.json"
        path.parent.mkdir()
        write_json_store(path, rows)
        oc_updates = 50 if size <= 1000 else 10 if size <= 20_000 else 3
        times = await anyio.to_thread.run_sync(openclaw_times, path, key, oc_updates)
        if times is not None:
            results.append(("openclaw 2026.7.35 (no fsync)", size, times))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="500,10000,100000")
    parser.add_argument("--no-openclaw", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'backend':32} {'entries':>8} {'n':>4} {'median ms':>10} {'p95 ms':>9} {'updates/s':>10}")
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        for size in sizes:
            for label, count, times in anyio.run(run_size, size, Path(tmp), not args.no_openclaw):
                median, p95, rate = summary(times)
                print(f"{label:32} {count:>8} {len(times):>4} {median:>10.3f} {p95:>9.3f} {rate:>10.0f}")


if __name__ == "__main__":
    main()
