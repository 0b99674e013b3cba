"""
Cost of the runtime's per-call decisions (``sessionkeeper.runtime``): what an agent loop pays before and
after every model call, on the pi samples' contexts and on a synthetic ~200k-token context.

Run: ``python -m benchmarks.bench_runtime [--repeat 200]``. Prints a table of medians.

Measured: ``estimate_context_usage`` (best token count), ``estimate_prompt_pressure`` (OpenClaw's
conservative pre-prompt estimate), the whole before-turn decision (flush + preflight + budget route),
``is_context_overflow`` and ``parse_observed_token_count`` per error text, and ``MemoryFlushPolicy.plan``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sessionkeeper import is_context_overflow
from sessionkeeper.compaction import CompactionSettings
from sessionkeeper.records import AgentMessage, AssistantMessage, message_from_json
from sessionkeeper.runtime import (
    MemoryFlushPolicy,
    decide_preflight_compaction,
    estimate_context_usage,
    estimate_prompt_pressure,
    parse_observed_token_count,
    plan_prompt_budget,
)


REPO = Path(__file__).resolve().parent.parent
PI = REPO / "tests" / "data" / "pi"

ERRORS = [
    "prompt is too long: 213462 tokens > 200000 maximum",
    "429 Too Many Requests: rate limit of 30000 input tokens per minute exceeded",
    "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
    "ThrottlingException: Too many tokens, please wait before trying again.",
    "500 Internal Server Error",
    "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).",
]


def _median_us(fn: Callable[[], Any], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e6)
    return statistics.median(samples)


def _contexts() -> dict[str, list[AgentMessage]]:
    out: dict[str, list[AgentMessage]] = {}
    for name in ("basic", "large-2000"):
        meta = json.loads((PI / f"{name}.meta.json").read_text(encoding="utf-8"))
        out[name] = [message_from_json(m) for m in meta["messages"]]
    big = json.loads((PI / "large-20k.context.json").read_text(encoding="utf-8"))
    out["large-20k"] = [message_from_json(m) for m in big["messages"]]
    # ~200k tokens: the 20k sample's context repeated, usage stripped (worst case: every message estimated)
    stripped = [m for m in out["large-20k"] if not isinstance(m, AssistantMessage)]
    out["synthetic-200k"] = stripped * 5
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    settings = CompactionSettings()
    policy = MemoryFlushPolicy()
    rows: list[tuple[str, str, float]] = []
    for name, messages in _contexts().items():
        usage = estimate_context_usage(messages)
        pressure = estimate_prompt_pressure(messages, system_prompt="system", prompt="next")
        label = f"{name} ({len(messages)} msgs, ~{usage.tokens} tok)"
        rows.append(
            (
                label,
                "estimate_context_usage",
                _median_us(lambda m=messages: estimate_context_usage(m), args.repeat),
            )
        )
        rows.append(
            (
                label,
                "estimate_prompt_pressure",
                _median_us(
                    lambda m=messages: estimate_prompt_pressure(m, prompt="next"), max(10, args.repeat // 10)
                ),
            )
        )

        def before_turn(m: list[AgentMessage] = messages, p: int = pressure) -> None:
            tokens = estimate_context_usage(m).tokens
            policy.decide(
                context_tokens=tokens,
                context_window=200000,
                compaction_count=3,
                memory_flush_compaction_count=2,
                active_transcript_bytes=1_000_000,
            )
            decide_preflight_compaction(context_tokens=tokens, context_window=200000, settings=settings)
            plan_prompt_budget(estimated_prompt_tokens=p, context_window=200000, settings=settings)

        rows.append((label, "before-turn decisions (no pressure)", _median_us(before_turn, args.repeat)))
    for text in ERRORS:
        label = text[:44] + "…"
        rows.append(
            (label, "is_context_overflow", _median_us(lambda t=text: is_context_overflow(t), args.repeat))
        )
        rows.append(
            (
                label,
                "parse_observed_token_count",
                _median_us(lambda t=text: parse_observed_token_count(t), args.repeat),
            )
        )
    rows.append(
        (
            "-",
            "MemoryFlushPolicy.plan",
            _median_us(lambda: policy.plan(now_ms=1_767_607_200_000), args.repeat),
        )
    )
    width = max(len(r[0]) for r in rows)
    print(f"{'input':<{width}}  {'operation':<38}  median")
    for label, op, us in rows:
        value = f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} µs"
        print(f"{label:<{width}}  {op:<38}  {value:>10}")


if __name__ == "__main__":
    main()
