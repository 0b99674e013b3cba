"""
Parent fork of a thread or subagent session (OpenClaw spec §4.3) as the parent's transcript grows.

Run: ``python -m benchmarks fork [--sizes 1000,20000,100000] [--runs 5]``. Prints medians in ms.

For each size a parent transcript of that many entries (~600-byte messages, a linear chain, usage on
every assistant reply, the parent's ``totalTokens`` stale so the transcript is read) is written into a
JSON store,
then a child session is forked ``--runs`` times (a new child key each time):

- ``size decision``: open the parent (lazy index), :func:`read_transcript_usage`, :func:`decide_parent_fork`;
- ``fork lines``: :func:`fork_transcript_lines` on the opened parent (branch copy, byte for byte);
- ``apply_parent_fork``: the whole operation (store reads, open, decision, durable write of the fork, child
  entry update).

The fork copies the whole branch, so ``fork lines`` and ``apply_parent_fork`` grow with the branch; the
size decision reads only the tail once the index is built.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import msgspec

from sessionkeeper.store import (
    SessionStore,
    apply_parent_fork,
    decide_parent_fork,
    fork_transcript_lines,
    read_transcript_usage,
)
from sessionkeeper.transcript import TranscriptManager


PARENT = "agent:main:discord:channel:c1"
PARENT_ID = "11111111-1111-4111-8111-111111111111"
TEXT = "Refactor the loader so that it streams lines and keeps the index lazy. " * 7  # ~500 chars


def write_parent(path: Path, entries: int) -> None:
    """A v3 transcript: a linear chain of user/assistant messages, usage on every reply."""
    header = {
        "type": "session",
        "version": 3,
        "id": PARENT_ID,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/w",
    }
    lines = [msgspec.json.encode(header)]
    parent = None
    for i in range(entries):
        entry_id = f"{i:08x}"
        if i % 2:
            message = {
                "role": "assistant",
                "content": [{"type": "text", "text": TEXT}],
                "api": "anthropic-messages",
                "provider": "anthropic",
                "model": "claude",
                "usage": {
                    "input": 20 * i,
                    "output": 50,
                    "cacheRead": 0,
                    "cacheWrite": 0,
                    "totalTokens": 20 * i + 50,
                },
                "stopReason": "stop",
                "timestamp": i,
            }
        else:
            message = {"role": "user", "content": TEXT, "timestamp": i}
        record = {
            "type": "message",
            "id": entry_id,
            "parentId": parent,
            "timestamp": "2026-01-01T00:00:00.000Z",
        }
        record["message"] = message
        lines.append(msgspec.json.encode(record))
        parent = entry_id
    path.write_bytes(b"\n".join(lines) + b"\n")


async def _time(fn: Callable[[], Awaitable[object]], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


async def bench(size: int, runs: int) -> tuple[float, float, float]:
    """Medians in ms: size decision, fork lines, apply_parent_fork."""
    with tempfile.TemporaryDirectory() as tmp:
        sessions = Path(tmp) / "agents" / "main" / "sessions"
        sessions.mkdir(parents=True)
        parent_file = sessions / f"{PARENT_ID}.jsonl"
        write_parent(parent_file, size)
        store = SessionStore.open(sessions, backend="json")
        parent = await store.patch(
            PARENT, {"sessionId": PARENT_ID, "totalTokens": 10, "totalTokensFresh": False}
        )

        async def decision() -> object:
            transcript = await TranscriptManager.open(parent_file)
            usage = read_transcript_usage(transcript)
            return decide_parent_fork(parent, usage=usage, transcript_bytes=parent_file.stat().st_size)

        opened = await TranscriptManager.open(parent_file)
        opened.index.path_positions(opened.leaf_id)  # build the index once, as a long-lived parent would

        async def lines() -> object:
            return fork_transcript_lines(
                opened, session_id="bench", now_ms=0, parent_session=str(parent_file)
            )

        counter = iter(range(10**6))

        async def apply() -> object:
            key = f"{PARENT}:thread:t{next(counter)}"
            await store.patch(key, {"parentSessionKey": PARENT})
            result = await apply_parent_fork(store, key, max_tokens=10**9)
            assert result.status == "forked"
            return result

        results = (await _time(decision, runs), await _time(lines, runs), await _time(apply, runs))
        await store.aclose()
        return results


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,20000,100000")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"{'entries':>8} {'size decision ms':>17} {'fork lines ms':>14} {'apply_parent_fork ms':>21}")
    for size in (int(s) for s in args.sizes.split(",")):
        decision, lines, apply = anyio.run(bench, size, args.runs)
        print(f"{size:>8} {decision:>17.2f} {lines:>14.2f} {apply:>21.2f}")


if __name__ == "__main__":
    main()
