"""
Transcripts at scale (DESIGN "Targets"): the leaf's context and the last 50 messages from a bounded
tail read, the shared index cache, and session listing from headers and tails.

Run: ``python -m benchmarks scale [--size-mb 1024] [--repeat N] [--listing 1000] [--no-pi] [--json]``.

Generated files (under a temp dir in ``/tmp``, deleted at the end; never committed):

- ``big``: about ``--size-mb`` MiB of coding-agent turns (user, assistant with a tool call, tool
  result of 0.5-3 KB), the model and thinking level recorded at the start, then a compaction near the
  end whose kept range and later turns (the "tail") are identical in every file; the thinking level is
  changed once after the compaction (so the tail alone proves the context, see scenario B).
- ``small``: the same tail after 10 MiB of turns.
- Scenario B (``settings-at-start``): 10 MiB, 100 MiB and ``--size-mb`` files whose only thinking
  level change is at the start (pi writes one only when the level changes): the context depends on
  the whole path. The first read walks 8 MiB back, then builds the ancestry index (a forward scan of
  the file at C speed, see ``transcript/file/_sidecar.py``) and saves it in the cache dir (a temp dir
  here); later reads answer from it with one lookup and one line read. Both are measured: "first"
  with no index (median of 3, the index deleted before each), "second" with the index (median of
  ``--repeat`` in this process, where the index's checksum was already verified), "second, fresh
  process" (time and peak of a new process: includes the one CRC-32 pass over the index).

  A run on the 2-core CI box (``--size-mb 1024 --repeat 5``, another benchmark running on the second
  core): first read 75 ms / 350 ms / 2.8 s (peak +20 / +23 / +58 MB) at 10 MiB / 100 MiB / 1 GiB;
  second read 3.7-7.9 ms at every size (index 0.2 / 2.3 / 23 MB); second read in a fresh process
  7-13 ms (peak +2 / +3 / +24 MB, the mapped index). Before the index the walk took about 2.3 s and
  124 MB at 1 GiB on every read.

Timings are medians of ``--repeat`` rounds in this process with a warm page cache. Peak memory is
the peak RSS growth (VmHWM) of a fresh process doing one call. pi's ``SessionManager.list`` is timed
by ``benchmarks/pi_list.mjs`` when an installed pi-oracle copy is found (``$SESSIONKEEPER_PI_ORACLE_DIR``
or ``/tmp/pi-oracle``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sessionkeeper.transcript import load_transcript
from sessionkeeper.transcript.file._index_cache import TranscriptIndexCache
from sessionkeeper.transcript.file._listing import list_transcripts
from sessionkeeper.transcript.file._tail import read_tail_context
from sessionkeeper.transcript.file._tail_messages import read_last_messages


REPO = Path(__file__).resolve().parent.parent
TS = "2026-01-01T00:00:00.000Z"

_RSS_PROBE = """
import sys, time
from sessionkeeper.transcript.file._tail import read_tail_context
from sessionkeeper.transcript.file._tail_messages import read_last_messages
def peak_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0
before = peak_kb()
t0 = time.perf_counter()
result = read_tail_context(sys.argv[1]) if sys.argv[2] == "context" else read_last_messages(sys.argv[1], 50)
print(before, peak_kb(), (time.perf_counter() - t0) * 1000)
"""


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def _header(sid: str) -> bytes:
    return _dump({"type": "session", "version": 3, "id": sid, "timestamp": TS, "cwd": "/home/dev/project"})


def _turn(n: int, parent: str, size: int) -> tuple[bytes, str]:
    """One user -> assistant (tool call) -> tool result turn; returns its lines and the last id."""
    usage = {"input": 900, "output": 60, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 960}
    usage["cost"] = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
    u, a, r = f"u{n:x}", f"a{n:x}", f"r{n:x}"
    lines = [
        {"type": "message", "id": u, "parentId": parent, "timestamp": TS,
         "message": {"role": "user", "content": f"step {n}: look at file_{n % 97}.py", "timestamp": n}},
        {"type": "message", "id": a, "parentId": u, "timestamp": TS,
         "message": {"role": "assistant", "content": [{"type": "toolCall", "id": f"c{n:x}", "name": "read",
                                                          "arguments": {"path": f"file_{n % 97}.py"}}],
                     "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
                     "usage": usage, "stopReason": "toolUse", "timestamp": n}},
        {"type": "message", "id": r, "parentId": a, "timestamp": TS,
         "message": {"role": "toolResult", "toolCallId": f"c{n:x}", "toolName": "read",
                     "content": [{"type": "text", "text": "x" * size}], "isError": False, "timestamp": n}},
    ]  # fmt: skip
    return b"".join(_dump(line) for line in lines), r


def write_transcript(path: Path, size_mb: float, *, settings_after_compaction: bool) -> None:
    """A transcript of about ``size_mb`` MiB ending with the common tail (module docstring)."""
    target = int(size_mb * (1 << 20))
    start = [
        {"type": "model_change", "id": "m0", "parentId": None, "timestamp": TS, "provider": "anthropic",
         "modelId": "claude-sonnet-4-5"},
        {"type": "thinking_level_change", "id": "t0", "parentId": "m0", "timestamp": TS,
         "thinkingLevel": "low"},
    ]  # fmt: skip
    with path.open("wb") as out:
        out.write(_header(path.stem) + b"".join(_dump(e) for e in start))
        written, parent, n = out.tell(), "t0", 0
        batch: list[bytes] = []
        while written < target:
            data, parent = _turn(n, parent, 500 + (n * 37) % 2500)
            batch.append(data)
            written += len(data)
            n += 1
            if len(batch) >= 4096:
                out.write(b"".join(batch))
                batch.clear()
        out.write(b"".join(batch))
        # the common tail: 20 turns kept by the compaction, the compaction, 40 turns after it
        tail: list[bytes] = []
        kept_from = None
        for k in range(20):
            data, parent = _turn(10**9 + k, parent, 1500)
            kept_from = kept_from or f"u{10**9 + k:x}"
            tail.append(data)
        compaction = {"type": "compaction", "id": "cmp1", "parentId": parent, "timestamp": TS,
                      "summary": "## Goal\nwork through the files\n" * 40, "firstKeptEntryId": kept_from,
                      "tokensBefore": 180000}  # fmt: skip
        tail.append(_dump(compaction))
        parent = "cmp1"
        if settings_after_compaction:
            change = {"type": "thinking_level_change", "id": "t1", "parentId": parent, "timestamp": TS,
                      "thinkingLevel": "high"}  # fmt: skip
            tail.append(_dump(change))
            parent = "t1"
        for k in range(40):
            data, parent = _turn(2 * 10**9 + k, parent, 1500)
            tail.append(data)
        out.write(b"".join(tail))


def median_ms(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def probe(path: Path, what: str) -> tuple[float, float]:
    """Peak RSS growth (MB) and time (ms) of one call in a fresh process."""
    out = subprocess.run(
        [sys.executable, "-c", _RSS_PROBE, str(path), what], capture_output=True, text=True, check=True
    ).stdout.split()
    return (int(out[1]) - int(out[0])) / 1024, float(out[2])


def peak_mb(path: Path, what: str) -> float:
    return probe(path, what)[0]


def first_read_ms(path: Path, cache: Path, repeat: int) -> float:
    """Median ms of a read with no ancestry index (the cache emptied before each)."""
    times = []
    for _ in range(repeat):
        shutil.rmtree(cache, ignore_errors=True)
        t0 = time.perf_counter()
        read_tail_context(path)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def write_listing_dir(folder: Path, count: int) -> None:
    folder.mkdir()
    for i in range(count):
        path = folder / f"2026-01-01T00-00-00-000Z_{i:08x}-0000-7000-8000-000000000000.jsonl"
        parts = [_header(f"{i:08x}-0000-7000-8000-000000000000")]
        parent = "root"
        parts.append(
            _dump({"type": "session_info", "id": "root", "parentId": None, "timestamp": TS, "name": f"s{i}"})
        )
        for n in range(10 + i % 60):
            data, parent = _turn(n, parent, 200 + (i * 13 + n) % 1200)
            parts.append(data)
        path.write_bytes(b"".join(parts))


def find_pi_oracle() -> Path | None:
    for candidate in (os.environ.get("SESSIONKEEPER_PI_ORACLE_DIR"), "/tmp/pi-oracle"):
        if candidate and (Path(candidate) / "node_modules" / "@mariozechner" / "pi-coding-agent").is_dir():
            return Path(candidate)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks scale")
    parser.add_argument("--size-mb", type=float, default=1024.0, help="size of the big transcript (MiB)")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--listing", type=int, default=1000, help="transcripts in the listing directory")
    parser.add_argument("--no-pi", action="store_true", help="do not time pi's SessionManager.list")
    parser.add_argument(
        "--no-fallback", action="store_true", help="skip scenario B (thinking level at start only)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows: list[tuple[str, str, str]] = []
    result: dict[str, Any] = {}
    tmp = Path(tempfile.mkdtemp(prefix="sk-bench-scale-", dir="/tmp"))
    os.environ["SESSIONKEEPER_CACHE_DIR"] = str(tmp / "cache")  # the ancestry indexes (scenario B)
    try:
        big, small = tmp / "big.jsonl", tmp / "small.jsonl"
        t0 = time.perf_counter()
        write_transcript(big, args.size_mb, settings_after_compaction=True)
        write_transcript(small, 10, settings_after_compaction=True)
        result["generate_s"] = round(time.perf_counter() - t0, 1)
        assert read_tail_context(big) == read_tail_context(small)
        for label, path in (("10 MiB", small), (f"{big.stat().st_size / (1 << 20):.0f} MiB", big)):
            ctx_ms = median_ms(lambda p=path: read_tail_context(p), args.repeat)
            last_ms = median_ms(lambda p=path: read_last_messages(p, 50), args.repeat)
            result[label] = {
                "context_ms": ctx_ms,
                "context_peak_mb": peak_mb(path, "context"),
                "last50_ms": last_ms,
                "last50_peak_mb": peak_mb(path, "last"),
            }
            rows.append(
                (
                    f"tail context rebuild, {label}",
                    f"{ctx_ms:.2f} ms",
                    f"peak +{result[label]['context_peak_mb']:.1f} MB",
                )
            )
            rows.append(
                (
                    f"last 50 messages, {label}",
                    f"{last_ms:.3f} ms",
                    f"peak +{result[label]['last50_peak_mb']:.1f} MB",
                )
            )
        full_small = median_ms(lambda: load_transcript(small).build_context(), max(3, args.repeat // 3))
        rows.append(("full load + rebuild, 10 MiB (for scale)", f"{full_small:.1f} ms", ""))
        # the shared index cache on the 10 MiB file
        cache = TranscriptIndexCache()
        cache.get(small)
        hit = median_ms(lambda: cache.get(small), args.repeat)
        line = _turn(3 * 10**9, "r" + format(2 * 10**9 + 39, "x"), 1500)[0]

        def extend() -> None:
            with small.open("ab") as handle:
                handle.write(line)
            cache.get(small)

        ext = median_ms(extend, args.repeat)
        rows.append(("index cache hit, 10 MiB", f"{hit * 1000:.1f} us", ""))
        rows.append(
            ("index cache extend by one turn, 10 MiB", f"{ext:.2f} ms", f"vs full load {full_small:.1f} ms")
        )
        result["cache"] = {"hit_ms": hit, "extend_ms": ext, "full_load_ms": full_small}
        big.unlink()
        if not args.no_fallback:
            cache = Path(os.environ["SESSIONKEEPER_CACHE_DIR"])
            for size in (10, 100, args.size_mb):
                path = tmp / f"start-{size:g}.jsonl"
                write_transcript(path, size, settings_after_compaction=False)
                if size <= 100:  # the full loader as the reference (its memory grows with the file)
                    assert read_tail_context(path) == load_transcript(path).build_context()
                first = first_read_ms(path, cache, 3)
                shutil.rmtree(cache, ignore_errors=True)
                first_peak, _ = probe(path, "context")  # builds and saves the index
                second = median_ms(lambda p=path: read_tail_context(p), args.repeat)
                fresh_peak, fresh_ms = probe(path, "context")
                index_mb = sum(f.stat().st_size for f in cache.rglob("*.idx")) / (1 << 20)
                label = f"B: thinking level at start only, {size:g} MiB"
                rows.append((f"{label}, first read", f"{first:.1f} ms", f"peak +{first_peak:.1f} MB"))
                rows.append((f"{label}, second read", f"{second:.2f} ms", f"index {index_mb:.1f} MB"))
                rows.append(
                    (f"{label}, second, fresh process", f"{fresh_ms:.1f} ms", f"peak +{fresh_peak:.1f} MB")
                )
                result[f"settings_at_start_{size:g}mb"] = {
                    "first_ms": first,
                    "first_peak_mb": first_peak,
                    "second_ms": second,
                    "second_fresh_ms": fresh_ms,
                    "second_fresh_peak_mb": fresh_peak,
                    "index_mb": index_mb,
                }
                path.unlink()
        # listing
        folder = tmp / "sessions"
        write_listing_dir(folder, args.listing)
        ours = median_ms(lambda: list_transcripts(folder), max(3, args.repeat // 3))
        result["listing_ms"] = ours
        rows.append((f"list_transcripts, {args.listing} files", f"{ours:.1f} ms", ""))
        oracle = None if args.no_pi else find_pi_oracle()
        if oracle is not None and shutil.which("node"):
            out = subprocess.run(
                ["node", str(REPO / "benchmarks" / "pi_list.mjs"), str(oracle), str(folder), "--repeat", "3"],
                capture_output=True,
                text=True,
                check=True,
            )
            theirs = json.loads(out.stdout)["list_ms_median"]
            result["pi_listing_ms"] = theirs
            rows.append(
                (
                    f"pi SessionManager.list, {args.listing} files",
                    f"{theirs:.1f} ms",
                    f"{theirs / ours:.1f}x ours",
                )
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        width = max(len(r[0]) for r in rows)
        print(f"{'measure':<{width}}  {'median':>12}  note")
        for name, value, note in rows:
            print(f"{name:<{width}}  {value:>12}  {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
