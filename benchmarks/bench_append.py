"""
Durable append of one turn (fsync per turn) as the transcript grows, with and without the write lock.

Run: ``python -m benchmarks.bench_append [--sizes 1000,10000,100000] [--appends 300] [--backend asyncio]``.
Prints a table of medians and p95 in ms.

For each history size a transcript of that many entries (~600-byte messages, a linear chain) is
written, opened with :class:`TranscriptManager`, and then one ~3 KB user turn is appended ``--appends``
times, each fsynced before it returns:

- ``held lock``: inside ``hold_write_lock()`` (a run holds the lock; each append checks it in memory);
- ``lock per append``: the default outside a run: each append takes and releases the lock file;
- ``no lock``: ``locking = False`` (what the append itself costs);
- ``turn of 3: 3 appends`` / ``turn of 3: append_messages``: a 3-message turn (reply, tool result,
  final reply: what ``SessionRuntime.after_turn`` records) as three appends or as one
  :meth:`TranscriptManager.append_messages` (one write, one fsync), lock per write; time per turn;
- ``floor: os.write+fsync``: a raw ``os.write`` of the same bytes plus ``os.fsync`` on an ``O_APPEND``
  fd, synchronously (the machine's floor), and ``floor via to_thread``: the same from the event loop
  through ``anyio.to_thread.run_sync`` (the floor for any async appender that keeps the loop free).

Target (DESIGN "Targets"): at most 0.2 ms median per durable append, flat as the history grows.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import msgspec

from sessionkeeper.transcript import TranscriptManager, UserMessage


TURN_TEXT = "Please refactor the session loader so that it streams lines. " * 48  # ~3 KB


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


async def _timed(count: int, step: Callable[[int], Awaitable[object]]) -> list[float]:
    times = []
    for i in range(count):
        start = time.perf_counter()
        await step(i)
        times.append((time.perf_counter() - start) * 1000)
    return times


def _turn(i: int) -> UserMessage:
    return UserMessage(content=f"{i} {TURN_TEXT}", timestamp=1_900_000_000_000 + i)


def _append_step(manager: TranscriptManager) -> Callable[[int], Awaitable[object]]:
    return lambda i: manager.append_message(_turn(i))


async def run_size(size: int, workdir: Path, appends: int) -> list[tuple[str, list[float]]]:
    results: list[tuple[str, list[float]]] = []
    for mode in ("held lock", "lock per append", "no lock"):
        path = workdir / f"{size}-{mode.replace(' ', '-')}.jsonl"
        write_history(path, size)
        manager = await TranscriptManager.open(path)
        await manager.append_message(_turn(-1))  # warm-up: thread pool, lock directory cache
        step = _append_step(manager)
        if mode == "held lock":
            async with manager.hold_write_lock():
                times = await _timed(appends, step)
        else:
            manager.locking = mode == "lock per append"
            times = await _timed(appends, step)
        results.append((mode, times))
        path.unlink()
    for mode in ("turn of 3: 3 appends", "turn of 3: append_messages"):
        path = workdir / f"{size}-turn-{len(results)}.jsonl"
        write_history(path, size)
        manager = await TranscriptManager.open(path)
        await manager.append_message(_turn(-1))
        batched = mode.endswith("append_messages")

        async def turn(i: int, m: TranscriptManager = manager, batched: bool = batched) -> None:
            if batched:
                await m.append_messages([_turn(i), _turn(i), _turn(i)])
            else:
                for _ in range(3):
                    await m.append_message(_turn(i))

        results.append((mode, await _timed(appends, turn)))
        path.unlink()
    line = msgspec.json.encode({"type": "message", "message": {"content": TURN_TEXT}}) + b"\n"
    floor_path = workdir / f"{size}-floor.jsonl"
    write_history(floor_path, size)
    fd = os.open(floor_path, os.O_WRONLY | os.O_APPEND)
    try:

        def raw(_: int) -> None:
            os.write(fd, line)
            os.fsync(fd)

        sync_times = []
        for i in range(appends):
            start = time.perf_counter()
            raw(i)
            sync_times.append((time.perf_counter() - start) * 1000)
        results.append(("floor: os.write+fsync", sync_times))
        results.append(
            ("floor via to_thread", await _timed(appends, lambda i: anyio.to_thread.run_sync(raw, i)))
        )
    finally:
        os.close(fd)
        floor_path.unlink()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--backend", default="asyncio", choices=("asyncio", "trio"))
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"durable append of a ~{len(TURN_TEXT) // 1024} KB turn, fsync per append, backend {args.backend}")
    print(f"{'mode':26} {'entries':>8} {'n':>5} {'median ms':>10} {'p95 ms':>8}")
    with tempfile.TemporaryDirectory(prefix="bench-append-", dir=os.environ.get("BENCH_DIR")) as tmp:
        for size in sizes:
            for label, times in anyio.run(run_size, size, Path(tmp), args.appends, backend=args.backend):
                ordered = sorted(times)
                p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
                print(f"{label:26} {size:>8} {len(times):>5} {statistics.median(ordered):>10.3f} {p95:>8.3f}")


if __name__ == "__main__":
    main()
