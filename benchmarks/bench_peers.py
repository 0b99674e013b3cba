"""
The hot paths a host calls every turn, side by side with openai-agents' ``SQLiteSession`` (issue 16).

Run: ``python -m benchmarks peers [--repeat N] [--rounds R] [--appends A] [--json]``.

openai-agents is pinned (``PEER_REQUIREMENT``) and installed on first use into its own venv,
``benchmarks/.data/peers-venv`` (git-ignored; rebuilt when the pin changes), so one command gives every
ratio; its side runs in a subprocess of that venv, ours in this process. Data: the 20k-entry pi sample
(``tests/data/pi/large-20k.jsonl.gz``, 18.5 MB): ours reads the transcript file; theirs holds the same
messages (each ``message`` entry's JSON object as one item, 20k items) in a SQLite file. The blocks of
each side alternate ``--rounds`` times; each figure is the median over all rounds.

Rows (ms, medians; ratio = ours / theirs or ours / floor; under 1 is faster):

- ``last 50 messages``: :func:`read_last_messages` (sync; and ``aread_last_messages``, through a worker
  thread like theirs) vs ``await session.get_items(limit=50)``. Target: at most 0.5x.
- ``full parsed history``: ``load_transcript`` + every entry decoded to its typed record vs
  ``await session.get_items()`` (dicts). Target: at most 0.5x.
- ``durable turn append``: one ~3 KB turn (reply, tool result, reply) as one
  ``TranscriptManager.append_messages`` (one write + fsync) inside a ``SessionRuntime`` turn (the
  runtime holds the write lock from ``before_model_call`` to ``after_turn``), and the same with the
  lock taken per append (the behaviour before the runtime held it), vs the raw floor (``os.write`` of
  the same bytes + ``os.fsync`` on an ``O_APPEND`` fd) and vs theirs ``await session.add_items(turn)``.
  Target: at most 1.2x the floor.

A run on the 2-core box shared with ~6 other engineers' jobs (``--rounds 3 --repeat 3 --appends 100``,
2026-12-02, load average 9.1: absolute times are 2-5x those of a quiet run, the ratios within one run
are what carries)::

    openai-agents SQLiteSession: 20000 items; openai-agents==0.24.0; medians over 3 rounds
    ours                                         ms | anchor                                   ms |  ratio
    ------------------------------------------------------------------------------------------------------
    last 50 messages (sync)                   0.499 | openai-agents get_items(limit=50)     0.688 |  0.73x
    last 50 messages (async)                  0.508 | openai-agents get_items(limit=50)     0.688 |  0.74x
    full parsed history                     488.095 | openai-agents get_items()           692.937 |  0.70x
    turn append, runtime turn (held lock)     6.492 | raw write+fsync floor                 3.711 |  1.75x
    turn append, lock per append (before)     6.396 | raw write+fsync floor                 3.711 |  1.72x
    turn append, runtime turn (held lock)     6.492 | openai-agents add_items(turn)         1.268 |  5.12x

Where the time goes (CPU, this box): the full parsed history is about 20 % reading and splitting the
file, 13 % the head decode of the open, 46 % msgspec's typed decode of the lines, the rest building
the index and the records; the typed decode alone is 0.3-0.4x the stdlib ``json.loads`` of the same
lines (the peer's main cost), so 0.5x leaves little room. The last 50 messages decode each line met
once, straight into its record; the async variant walks on the event loop's thread (a worker-thread
trip cost 2.5 ms here).
An append spends about 0.1 ms of CPU above its ``write`` (3 entries built, encoded, indexed; lock
check; ``open``/``fstat``/``pread``/``close``); with ``fsync`` taking 3-8 ms under this load, the
manager's inline-write gate (1 ms budget) sends each write to a worker thread, and that round trip on
a saturated CPU is most of the gap to the floor (on a quiet disk the writes stay inline).
Theirs ``add_items`` commits into a SQLite WAL (``journal_mode=WAL``): the sync of a WAL whose size
does not change is cheaper here than the fsync of an append that grows a file (which also commits the
size change to the file system's journal), so the last row sits below our own raw floor; the JSONL
floor is the anchor of the target.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec

from sessionkeeper.records import AssistantMessage, TextContent, ToolResultMessage, Usage
from sessionkeeper.runtime import ModelInfo, SessionRuntime
from sessionkeeper.store import SessionStore
from sessionkeeper.transcript import (
    TranscriptManager,
    aread_last_messages,
    load_transcript,
    read_last_messages,
)


REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "tests" / "data" / "pi" / "large-20k.jsonl.gz"
DATA = REPO / "benchmarks" / ".data"
PEER_VENV = DATA / "peers-venv"
PEER_REQUIREMENT = "openai-agents==0.24.0"

_PEER_SCRIPT = r"""
import asyncio, gc, json, os, statistics, sys, time
from agents import SQLiteSession

db, items_file, turn_file = sys.argv[1], sys.argv[2], sys.argv[5]
repeat, appends = int(sys.argv[3]), int(sys.argv[4])

async def median_ms(fn, n):
    samples = []
    gc.collect()
    for _ in range(n):
        gc.disable()
        try:
            start = time.perf_counter()
            await fn()
            samples.append((time.perf_counter() - start) * 1000)
        finally:
            gc.enable()
    return statistics.median(samples)

async def main():
    session = SQLiteSession("bench", db)
    if not os.path.exists(db + ".ready"):
        with open(items_file) as f:
            items = json.load(f)
        for i in range(0, len(items), 1000):
            await session.add_items(items[i : i + 1000])
        open(db + ".ready", "w").close()
    with open(turn_file) as f:
        turn = json.load(f)
    assert len(await session.get_items(limit=50)) == 50
    out = {
        "last50": await median_ms(lambda: session.get_items(limit=50), repeat * 20),
        "full": await median_ms(lambda: session.get_items(), repeat),
    }
    appender = SQLiteSession("appends", db + ".appends")
    out["append"] = await median_ms(lambda: appender.add_items(turn), appends)
    out["items"] = len(await session.get_items())
    print(json.dumps(out))

asyncio.run(main())
"""


def ensure_peer_venv() -> Path:
    """The peers venv's python, built (``venv`` + ``pip install PEER_REQUIREMENT``) when missing."""
    python = PEER_VENV / "bin" / "python"
    stamp = PEER_VENV / "requirement.txt"
    if python.exists() and stamp.exists() and stamp.read_text() == PEER_REQUIREMENT:
        return python
    if PEER_VENV.exists():
        shutil.rmtree(PEER_VENV)
    DATA.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", PEER_REQUIREMENT], check=True)
    stamp.write_text(PEER_REQUIREMENT)
    return python


def _median_ms(fn: Callable[[], Any], repeat: int) -> list[float]:
    samples = []
    gc.collect()
    for _ in range(repeat):
        gc.disable()
        try:
            start = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - start) * 1000)
        finally:
            gc.enable()
    return samples


async def _amedian_ms(fn: Callable[[], Awaitable[Any]], repeat: int) -> list[float]:
    samples = []
    gc.collect()
    for _ in range(repeat):
        gc.disable()
        try:
            start = time.perf_counter()
            await fn()
            samples.append((time.perf_counter() - start) * 1000)
        finally:
            gc.enable()
    return samples


TOOL_TEXT = "x" * 1800


def _turn(i: int) -> list[Any]:
    """One ~3 KB turn: a reply with a tool call's worth of text, its result, a final reply."""
    usage = Usage(input=1200, output=300)
    reply = AssistantMessage(
        content=[TextContent(text=f"{i} let me look at the file " + "y" * 300)],
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
        usage=usage,
        timestamp=1_900_000_000_000 + i,
    )
    result = ToolResultMessage(
        tool_call_id=f"call_{i}", tool_name="read", content=[TextContent(text=TOOL_TEXT)], timestamp=1
    )
    return [reply, result, reply]


def _full_parsed(path: Path) -> int:
    index = load_transcript(path, decode_all=True)
    return sum(1 for _ in index.entries())


async def ours(path: Path, workdir: Path, repeat: int, appends: int) -> dict[str, list[float]]:
    """Our side's samples in ms."""
    assert len(read_last_messages(path, 50)) == 50
    out: dict[str, list[float]] = {
        "last50": _median_ms(lambda: read_last_messages(path, 50), repeat * 20),
        "last50_async": await _amedian_ms(lambda: aread_last_messages(path, 50), repeat * 20),
        "full": _median_ms(lambda: _full_parsed(path), repeat),
    }
    store = SessionStore.open(workdir / "sessions")
    runtime = SessionRuntime(
        store, model=ModelInfo(provider="anthropic", model_id="claude-sonnet-4-5", api="anthropic-messages")
    )
    session = await runtime.open(f"agent:main:bench-{time.monotonic_ns()}")
    await runtime.before_model_call(session, prompt="go")  # the runtime now holds the lock for the turn
    assert session.holds_turn_lock
    held = session.transcript
    per_append_path = workdir / "per-append.jsonl"
    shutil.copyfile(path, per_append_path)
    per_append = await TranscriptManager.open(per_append_path)
    turn_bytes = b"".join(
        msgspec.json.encode({"type": "message", "message": msgspec.to_builtins(m)}) + b"\n" for m in _turn(0)
    )
    floor_path = workdir / "floor.jsonl"
    shutil.copyfile(path, floor_path)
    fd = os.open(floor_path, os.O_WRONLY | os.O_APPEND)

    def floor() -> None:
        os.write(fd, turn_bytes)
        os.fsync(fd)

    async def floor_step(_: int) -> None:
        floor()

    async def held_step(i: int) -> None:
        await held.append_messages(_turn(i))

    async def per_append_step(i: int) -> None:
        await per_append.append_messages(_turn(i))

    steps = {"append_held": held_step, "append_per_lock": per_append_step, "floor": floor_step}
    times: dict[str, list[float]] = {key: [] for key in steps}
    try:
        for i in range(5):  # warm-up
            for step in steps.values():
                await step(-1 - i)
        order = list(steps.items())
        for i in range(appends):  # interleaved, rotated: the machine's noise falls on every column
            shift = i % len(order)
            for key, step in order[shift:] + order[:shift]:
                start = time.perf_counter()
                await step(i)
                times[key].append((time.perf_counter() - start) * 1000)
    finally:
        os.close(fd)
        await runtime.release_turn_lock(session)
    out.update(times)
    return out


def theirs(python: Path, workdir: Path, repeat: int, appends: int) -> dict[str, float]:
    """The peer's medians in ms (``items``: how many items its session holds)."""
    db = workdir / "agents.db"
    items_file = workdir / "items.json"
    if not items_file.exists():
        items = []
        with gzip.open(SAMPLE, "rb") as src:
            for line in src:
                record = json.loads(line)
                if record.get("type") == "message" and isinstance(record.get("message"), dict):
                    items.append(record["message"])
        while len(items) < 20_000:
            items += items[: 20_000 - len(items)]
        items_file.write_text(json.dumps(items))
        (workdir / "turn.json").write_text(json.dumps([msgspec.to_builtins(m) for m in _turn(0)]))
    proc = subprocess.run(
        [
            str(python),
            "-c",
            _PEER_SCRIPT,
            str(db),
            str(items_file),
            str(repeat),
            str(appends),
            str(workdir / "turn.json"),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, float] = json.loads(proc.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description="hot paths vs openai-agents SQLiteSession")
    parser.add_argument("--repeat", type=int, default=5, help="rounds of the full-history load per block")
    parser.add_argument("--rounds", type=int, default=3, help="alternating blocks of each side")
    parser.add_argument("--appends", type=int, default=200, help="timed turn appends per block")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    python = ensure_peer_venv()
    with tempfile.TemporaryDirectory(dir=DATA) as tmp:
        workdir = Path(tmp)
        path = workdir / "large-20k.jsonl"
        with gzip.open(SAMPLE, "rb") as src, path.open("wb") as out:
            shutil.copyfileobj(src, out)
        ours_samples: dict[str, list[float]] = {}
        theirs_medians: dict[str, list[float]] = {}
        items = 0
        for round_no in range(args.rounds):
            peer = theirs(python, workdir, args.repeat, args.appends)
            items = int(peer.pop("items"))
            for key, value in peer.items():
                theirs_medians.setdefault(key, []).append(value)
            mine = asyncio.run(ours(path, workdir / f"round-{round_no}", args.repeat, args.appends))
            for key, samples in mine.items():
                ours_samples.setdefault(key, []).extend(samples)
    us = {key: statistics.median(samples) for key, samples in ours_samples.items()}
    them = {key: statistics.median(values) for key, values in theirs_medians.items()}
    rows = [
        ("last 50 messages (sync)", us["last50"], "openai-agents get_items(limit=50)", them["last50"]),
        ("last 50 messages (async)", us["last50_async"], "openai-agents get_items(limit=50)", them["last50"]),
        ("full parsed history", us["full"], "openai-agents get_items()", them["full"]),
        ("turn append, runtime turn (held lock)", us["append_held"], "raw write+fsync floor", us["floor"]),
        (
            "turn append, lock per append (before)",
            us["append_per_lock"],
            "raw write+fsync floor",
            us["floor"],
        ),
        (
            "turn append, runtime turn (held lock)",
            us["append_held"],
            "openai-agents add_items(turn)",
            them["append"],
        ),
    ]
    if args.json:
        print(json.dumps({"ours": us, "theirs": them, "items": items}))
        return 0
    print(
        f"openai-agents SQLiteSession: {items} items; {PEER_REQUIREMENT}; medians over {args.rounds} rounds"
    )
    print(f"{'ours':<38} {'ms':>8} | {'anchor':<34} {'ms':>8} | {'ratio':>6}")
    print("-" * 102)
    for label, mine_ms, anchor, anchor_ms in rows:
        print(f"{label:<38} {mine_ms:>8.3f} | {anchor:<34} {anchor_ms:>8.3f} | {mine_ms / anchor_ms:>5.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
