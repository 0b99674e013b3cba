"""
Cost of context pruning and transcript hygiene (``sessionkeeper.pruning``) per model call.

Run: ``python -m benchmarks.bench_pruning [--repeat 50]``. Prints a table of medians.

Input: the context of the 20k-entry pi sample (``tests/data/pi/large-20k.context.json``, ~38k tokens),
repeated with fresh tool-call ids until it holds about 200k tokens (OpenClaw's chars/4 estimate), plus
the sample itself. Measured: the char estimate alone, a full prune (soft trim + hard clear) against a
200k-token window, a prune stopped by the soft-trim ratio, a prune stopped by the TTL gate, and the
hygiene pipeline for three provider families, and ``check_tool_pairing``. Target (DESIGN "Targets"):
pruning a 200k-token context in under 5 ms.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from sessionkeeper.pruning import (
    Pruner,
    PruningSettings,
    check_tool_pairing,
    estimate_context_chars,
    prune_context_messages,
    resolve_replay_policy,
    sanitize_replay_history,
)
from sessionkeeper.transcript import (
    AgentMessage,
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    message_from_json,
)


REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "tests" / "data" / "pi" / "large-20k.context.json"
NOW = 1_900_000_000_000


def _median_ms(fn: Callable[[], Any], repeat: int) -> float:
    """Median wall time of ``fn`` in ms; the cyclic GC is paused while timing, as ``timeit`` does."""
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
    return statistics.median(samples)


def _renamed(message: AgentMessage, copy: int) -> AgentMessage:
    if isinstance(message, AssistantMessage):
        content = [
            msgspec.structs.replace(b, id=f"{b.id}_{copy}") if isinstance(b, ToolCall) else b
            for b in message.content
        ]
        return msgspec.structs.replace(message, content=content)
    if isinstance(message, ToolResultMessage):
        return msgspec.structs.replace(message, tool_call_id=f"{message.tool_call_id}_{copy}")
    return message


def contexts() -> dict[str, list[AgentMessage]]:
    """The 20k sample's context, and it repeated up to about 200k tokens."""
    raw = json.loads(SAMPLE.read_text(encoding="utf-8"))["messages"]
    sample = [message_from_json(m) for m in raw]
    big: list[AgentMessage] = []
    copy = 0
    while estimate_context_chars(big) < 800_000:
        big += [_renamed(m, copy) for m in sample]
        copy += 1
    return {"large-20k": sample, "200k-tokens": big}


def main() -> None:
    parser = argparse.ArgumentParser(description="pruning and hygiene benchmark")
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    settings = PruningSettings(mode="cache-ttl")
    rows: list[tuple[str, str, int, float]] = []
    for name, messages in contexts().items():
        chars = estimate_context_chars(messages)
        tokens = chars // 4
        window = 200_000
        full = prune_context_messages(messages, settings=settings, context_window_tokens=window)
        cases: list[tuple[str, Callable[[], Any]]] = [
            ("char estimate", lambda m=messages: estimate_context_chars(m)),
            (
                f"prune, window {window} (trim {len(full.soft_trimmed)}, clear {len(full.hard_cleared)})",
                lambda m=messages, w=window: prune_context_messages(
                    m, settings=settings, context_window_tokens=w
                ),
            ),
            (
                "prune, under the soft-trim ratio",
                lambda m=messages: prune_context_messages(m, settings=settings, context_window_tokens=10**7),
            ),
            (
                "Pruner.prune, TTL not expired",
                lambda m=messages, w=window: Pruner(settings=settings).prune(
                    m, context_window_tokens=w, last_cache_touch_at=NOW - 1000, now_ms=NOW
                ),
            ),
            ("check_tool_pairing", lambda m=messages: check_tool_pairing(m)),
        ]
        for api, model in (
            ("anthropic-messages", "claude-sonnet-4-5"),
            ("openai-responses", "gpt-5"),
            ("google-generative-ai", "gemini-2.5-pro"),
        ):
            policy = resolve_replay_policy(api=api, model_id=model)
            cases.append(
                (
                    f"hygiene {api}",
                    lambda m=messages, p=policy, a=api: sanitize_replay_history(
                        m, policy=p, timestamp_ms=NOW, api=a, provider="p"
                    ),
                )
            )
        for label, fn in cases:
            rows.append((name, label, tokens, _median_ms(fn, args.repeat)))
    print(f"{'context':<12} {'operation':<58} {'~tokens':>8} {'median ms':>10}")
    print("-" * 92)
    for name, label, tokens, ms in rows:
        print(f"{name:<12} {label:<58} {tokens:>8} {ms:>10.3f}")


if __name__ == "__main__":
    main()
