"""
Durable append of one turn (fsync per turn) as the transcript grows: inline writes vs worker thread.

Run: ``python -m benchmarks.bench_append [--sizes 1000,10000,100000] [--appends 300] [--backend asyncio]``.
Prints, per history size and mode, the median and p95 in ms of three managers: ``inline``, the
default (writes inline on the event-loop thread while they stay within ``inline_write_budget_ms``,
1 ms; after a slower one, in a worker thread until 32 in a row are fast again); ``always``, with
``inline_write_budget_ms=math.inf`` (every write inline: the cost of the inline path itself); and
``thread``, with ``inline_write_budget_ms=0`` (every write through ``anyio.to_thread.run_sync``, the
behaviour before inline writes). On a disk where some writes stall (journal commits of other jobs),
``inline`` spends part of the run in thread mode, by design.

For each history size a transcript of that many entries (~600-byte messages, a linear chain) is
written once and copied for every manager; then ``--appends`` rounds are run. Each round makes one
timed step on every (mode, inline/thread) manager and on the two floors, in an order rotated every
round, so that the machine's noise (other jobs, journal commits) falls on every column alike. Modes:

- ``held lock``: one ~3 KB user turn appended inside ``hold_write_lock()`` (a run holds the lock; each
  append checks it in memory and with one ``lstat``);
- ``lock per append``: the default outside a run: each append takes and releases the lock file;
- ``no lock``: ``locking = False`` (what the append itself costs);
- ``turn of 3, held lock`` / ``turn of 3, lock per write``: a 3-message turn (reply, tool result,
  final reply: what ``SessionRuntime.after_turn`` records) as one
  :meth:`TranscriptManager.append_messages` (one write, one fsync); time per turn;
- ``floor: os.write+fsync``: a raw ``os.write`` of one turn's bytes plus ``os.fsync`` on an
  ``O_APPEND`` fd, synchronously (the machine's floor); ``floor via to_thread``: the same through
  ``anyio.to_thread.run_sync`` (shown in the thread columns).

Per column: median and p95 in ms, and ``floor x``, the median over the rounds of the step's time divided
by the floor's time of the same round (``floor: os.write+fsync`` for ``inline`` and ``always``, ``floor
via to_thread`` for ``thread``): a paired ratio, so that a load spike falls on both. The load average is
printed with the table; on a shared box the absolute times move several-fold with it.

Targets: at most 0.2 ms median per durable append (issue #7) and at most 1.2x the floor for a turn
under a held lock (issue 16; ``benchmarks peers`` times it inside a ``SessionRuntime`` turn), flat as
the history grows.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import anyio.to_thread
import msgspec

from sessionkeeper.records import UserMessage
from sessionkeeper.transcript import TranscriptManager


TURN_TEXT = "Please refactor the session loader so that it streams lines. " * 48  # ~3 KB

MODES = ("held lock", "lock per append", "no lock", "turn of 3, held lock", "turn of 3, lock per write")
VARIANTS = (("inline", 1.0), ("always", math.inf), ("thread", 0.0))
WARM_UP = 5

Step = Callable[[int], Awaitable[object]]


def write_history(path: Path, entries: int) -> None:
    """A v3 transcript with a linear chain of ``entries`` user/assistant messages (~600 bytes each)."""
    lines = [
        msgspec.json.encode(
            {
                "type": "session",
                "version": 3,
                "id": "bench",
                "timestamp": "2026-01-01T00:00:00.000Z",
                "cwd": "/w",
            }
        )
    ]
    parent = None
    body = "history " * 60
    for i in range(entries):
        entry_id = f"{i:08x}"
        role = "user" if i % 2 == 0 else "assistant"
        message: dict[str, object] = {
            "role": role,
            "content": [{"type": "text", "text": body}],
            "timestamp": i,
        }
        if role == "assistant":
            message.update(api="anthropic-messages", provider="anthropic", model="m", stopReason="stop")
            message["usage"] = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2}
        lines.append(
            msgspec.json.encode(
                {
                    "type": "message",
                    "id": entry_id,
                    "parentId": parent,
                    "timestamp": "2026-01-01T00:00:00.000Z",
                    "message": message,
                }
            )
        )
        parent = entry_id
    path.write_bytes(b"\n".join(lines) + b"\n")
    path.chmod(0o600)


def _turn(i: int) -> UserMessage:
    return UserMessage(content=f"{i} {TURN_TEXT}", timestamp=1_900_000_000_000 + i)


def _step(manager: TranscriptManager, mode: str) -> Step:
    if mode.startswith("turn of 3"):
        return lambda i: manager.append_messages([_turn(i), _turn(i), _turn(i)])
    return lambda i: manager.append_message(_turn(i))


async def run_size(size: int, workdir: Path, appends: int) -> dict[tuple[str, str], list[float]]:
    """Times in ms per (mode, variant) for one history size."""
    source = workdir / f"{size}-history.jsonl"
    write_history(source, size)
    steps: dict[tuple[str, str], Step] = {}
    async with contextlib.AsyncExitStack() as stack:
        for mode in MODES:
            for variant, budget in VARIANTS:
                path = workdir / f"{size}-{mode.replace(' ', '-').replace(',', '')}-{variant}.jsonl"
                shutil.copyfile(source, path)
                manager = await TranscriptManager.open(path, inline_write_budget_ms=budget)
                manager.locking = mode != "no lock"
                if mode.endswith("held lock"):
                    await stack.enter_async_context(manager.hold_write_lock())
                step = _step(manager, mode)
                for i in range(WARM_UP):  # thread pool, lock directory cache, page cache
                    await step(-1 - i)
                steps[mode, variant] = step
        line = msgspec.json.encode({"type": "message", "message": {"content": TURN_TEXT}}) + b"\n"
        fd = os.open(source, os.O_WRONLY | os.O_APPEND)
        stack.callback(os.close, fd)

        def raw() -> None:
            os.write(fd, line)
            os.fsync(fd)

        async def floor_sync(_: int) -> None:
            raw()

        async def floor_thread(_: int) -> None:
            await anyio.to_thread.run_sync(raw)

        steps["floor: os.write+fsync", "inline"] = floor_sync
        steps["floor via to_thread", "thread"] = floor_thread
        os.sync()  # start with no dirty pages from the setup
        order = list(steps.items())
        times: dict[tuple[str, str], list[float]] = {key: [] for key in steps}
        for i in range(appends):
            shift = i % len(order)
            for key, step in order[shift:] + order[:shift]:
                start = time.perf_counter()
                await step(i)
                times[key].append((time.perf_counter() - start) * 1000)
    return times


FLOORS = {"thread": ("floor via to_thread", "thread")}
SYNC_FLOOR = ("floor: os.write+fsync", "inline")


def _stats(times: dict[tuple[str, str], list[float]], key: tuple[str, str]) -> str:
    """Median and p95 (ms) of ``key``'s samples, and the median of its ratios to the same round's floor."""
    samples = times.get(key)
    if not samples:
        return f"{'':>8} {'':>8} {'':>6}"
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    floor = times[FLOORS.get(key[1], SYNC_FLOOR)]
    ratio = statistics.median(a / b for a, b in zip(samples, floor, strict=True))
    return f"{statistics.median(ordered):>8.3f} {p95:>8.3f} {ratio:>5.2f}x"


def main() -> None:
    """Parse the command line, run every size, print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--backend", default="asyncio", choices=("asyncio", "trio"))
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    one, five, _ = os.getloadavg()
    print(
        f"durable append of a ~{len(TURN_TEXT) // 1024} KB turn, fsync per append, backend {args.backend},"
        f" {args.appends} rounds; ms; load average {one:.1f} (5 min {five:.1f})"
    )
    names = "".join(f" {name:>8} {'p95':>8} {'floor':>6}" for name, _ in VARIANTS)
    print(f"{'mode':26} {'entries':>8}{names}")
    print(f"{'':26} {'':>8}" + f" {'median':>8} {'':>8} {'x':>6}" * len(VARIANTS))
    rows = [*MODES, "floor: os.write+fsync", "floor via to_thread"]
    with tempfile.TemporaryDirectory(prefix="bench-append-", dir=os.environ.get("BENCH_DIR")) as tmp:
        for size in sizes:
            times = anyio.run(run_size, size, Path(tmp), args.appends, backend=args.backend)
            for mode in rows:
                cells = " ".join(_stats(times, (mode, name)) for name, _ in VARIANTS)
                print(f"{mode:26} {size:>8} {cells}")
            for leftover in Path(tmp).iterdir():
                leftover.unlink()


if __name__ == "__main__":
    main()
