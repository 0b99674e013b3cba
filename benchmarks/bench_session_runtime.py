"""
Cost of one agent-loop turn through ``SessionRuntime`` as the history grows.

A turn is ``before_model_call(prompt=...)`` (rebuild, estimate, flush/preflight checks, prompt append,
pruning, hygiene) plus ``after_turn`` (reply + tool result appended, threshold check, TTL marker, store
update). The transcript and ``sessions.json`` are real files (fsync on). Compaction is kept out of the
measurement (a window large enough that it never triggers) so that the numbers show how the per-turn
overhead scales with history.

Run: ``python -m benchmarks.bench_session_runtime [--turns 2000] [--window 50]``. Prints a table of
medians per history size. Hygiene (OpenClaw §9) and the context rebuild are O(live context): with a
real window (200k tokens is about 1000 entries here) compaction keeps that bounded.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from sessionkeeper.records import AssistantMessage, TextContent, ToolCall, ToolResultMessage, Usage
from sessionkeeper.runtime import ModelInfo, SessionRuntime
from sessionkeeper.store import SessionStore
from sessionkeeper.testing import FakeClock


MODEL = ModelInfo(
    provider="anthropic", model_id="claude-sonnet-4-5", api="anthropic-messages", context_window=100_000_000
)


def _turn_messages(index: int, now_ms: int) -> list[AssistantMessage | ToolResultMessage]:
    call = AssistantMessage(
        content=[ToolCall(id=f"c{index}", name="read", arguments={"path": f"src/file_{index}.py"})],
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
        stop_reason="toolUse",
        timestamp=now_ms,
    )
    result = ToolResultMessage(
        tool_call_id=f"c{index}",
        tool_name="read",
        content=[TextContent(text="x = 1\n" * 300)],
        timestamp=now_ms,
    )
    final = AssistantMessage(
        content=[TextContent(text=f"File {index} sets x to 1. " * 20)],
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
        usage=Usage(input=1000 + index * 600, output=120),
        timestamp=now_ms,
    )
    return [call, result, final]


async def _run(turns: int, window: int) -> list[tuple[int, float, float, float]]:
    rows: list[tuple[int, float, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        clock = FakeClock()
        async with SessionStore.open(Path(tmp) / "sessions", clock=clock) as store:
            runtime = SessionRuntime(store, model=MODEL, clock=clock, cwd="/bench", host_supports_flush=False)
            session = await runtime.open("agent:main:main")
            before: list[float] = []
            after: list[float] = []
            checkpoints = {100, 500, 1000, 2000, 5000, 10000}
            for index in range(1, turns + 1):
                clock.advance(1)
                t0 = time.perf_counter()
                await runtime.before_model_call(session, prompt=f"Read src/file_{index}.py and explain it.")
                t1 = time.perf_counter()
                await runtime.after_turn(session, messages=_turn_messages(index, clock.now_ms()))
                t2 = time.perf_counter()
                before.append((t1 - t0) * 1000)
                after.append((t2 - t1) * 1000)
                if index in checkpoints or index == turns:
                    b = statistics.median(before[-window:])
                    a = statistics.median(after[-window:])
                    rows.append((len(session.transcript.entries()), b, a, b + a))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--window", type=int, default=50, help="turns per median")
    args = parser.parse_args()
    rows = anyio.run(_run, args.turns, args.window)
    print(f"{'entries':>8} {'before_model_call ms':>21} {'after_turn ms':>14} {'turn ms':>9}")
    for entries, before, after, total in rows:
        print(f"{entries:>8} {before:>21.2f} {after:>14.2f} {total:>9.2f}")


if __name__ == "__main__":
    main()
