"""
Compaction planning time: cut point + chunking + token counts, no summariser.

Run: ``python -m benchmarks.bench_compaction [--repeat 15]``. Prints a table of medians in ms.

Cases:

- ``200k-token branch``: a synthetic linear branch of about 200,000 estimated tokens (user turns,
  assistant tool calls, tool results), never compacted: the whole branch is planned.
- ``large-20k sample``: ``tests/data/pi/large-20k.jsonl.gz`` (20,001 entries written by pi, with
  compactions), its current branch.
- ``large-2000 sample``: ``tests/data/pi/large-2000.jsonl``.

Each row times, on an already-loaded branch: ``prepare_compaction`` (pi's cut point, the B05 check,
the context estimate, messages to summarise, file operations), then the safeguard chunk plan over the
messages to summarise (``split_messages_by_token_share`` + ``chunk_messages_by_max_tokens`` +
``max_chunk_tokens``). Target (DESIGN "Targets"): < 20 ms on a 200k-token branch.
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sessionkeeper import estimate_tokens
from sessionkeeper.compaction import prepare_compaction, split_messages_by_token_share
from sessionkeeper.compaction._chunking import chunk_messages_by_max_tokens, max_chunk_tokens
from sessionkeeper.compaction._memo import clear_token_memo
from sessionkeeper.records import (
    AssistantMessage,
    MessageEntry,
    TextContent,
    ToolCall,
    ToolResultMessage,
    TranscriptEntry,
    UserMessage,
)
from sessionkeeper.transcript import build_context_from_path
from sessionkeeper.transcript._load import load_transcript


DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "pi"
T0 = "2026-01-05T10:00:00.000Z"


def synthetic_branch(target_tokens: int = 200_000) -> list[TranscriptEntry]:
    """A linear branch of user turns with tool calls and results, about ``target_tokens`` tokens."""
    entries: list[TranscriptEntry] = []
    tokens = 0
    turn = 0

    def add(message: object) -> None:
        entry_id = f"{len(entries):08x}"
        parent = entries[-1].id if entries else None
        entries.append(MessageEntry(id=entry_id, parent_id=parent, timestamp=T0, message=message))  # type: ignore[arg-type]

    while tokens < target_tokens:
        turn += 1
        add(
            UserMessage(
                content=[TextContent(text=f"Turn {turn}: please fix module {turn}. " * 8)], timestamp=0
            )
        )
        for step in range(3):
            call_id = f"call_{turn}_{step}"
            add(
                AssistantMessage(
                    content=[
                        TextContent(text="Looking at the file. " * 5),
                        ToolCall(id=call_id, name="read", arguments={"path": f"src/mod{turn}/f{step}.py"}),
                    ],
                    api="anthropic-messages",
                    provider="anthropic",
                    model="claude",
                    stop_reason="toolUse",
                )
            )
            add(
                ToolResultMessage(
                    tool_call_id=call_id,
                    tool_name="read",
                    content=[TextContent(text="def f():\n    pass\n" * 60)],
                )
            )
            tokens += 300
        add(
            AssistantMessage(
                content=[TextContent(text="Done with this module. " * 10)],
                api="anthropic-messages",
                provider="anthropic",
                model="claude",
            )
        )
        tokens += 120
    return entries


def plan_once(branch: list[TranscriptEntry], window: int) -> int:
    plan = prepare_compaction(branch, keep_recent_tokens=20_000)
    assert plan is not None
    messages = list(plan.messages_to_summarize)
    budget = max_chunk_tokens(messages, context_window=window)
    shares = split_messages_by_token_share(messages, parts=2)
    chunks = chunk_messages_by_max_tokens(messages, max_tokens=budget)
    return len(shares) + len(chunks)


def timed(fn: Callable[[], object], repeat: int, *, cold: bool = False) -> float:
    """Median ms; ``cold`` clears the per-message token memo before every run (first plan of a turn)."""
    fn()  # warm-up
    samples = []
    for _ in range(repeat):
        if cold:
            clear_token_memo()
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    rows: list[tuple[str, int, int, int, float, float]] = []

    branch = synthetic_branch()
    context_tokens = sum(estimate_tokens(m) for m in build_context_from_path(branch).messages)
    plan = prepare_compaction(branch, keep_recent_tokens=20_000)
    assert plan is not None
    warm = timed(lambda: plan_once(branch, 200_000), args.repeat)
    cold = timed(lambda: plan_once(branch, 200_000), args.repeat, cold=True)
    rows.append(
        ("200k-token branch", len(branch), context_tokens, len(plan.messages_to_summarize), warm, cold)
    )

    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "large-20k.jsonl"
        big.write_bytes(gzip.decompress((DATA / "large-20k.jsonl.gz").read_bytes()))
        for name, path in (("large-20k sample", big), ("large-2000 sample", DATA / "large-2000.jsonl")):
            index = load_transcript(path)
            sample_branch = index.branch(index.leaf_id)
            sample_plan = prepare_compaction(sample_branch, keep_recent_tokens=20_000)
            assert sample_plan is not None
            tokens = sample_plan.tokens_before
            warm = timed(lambda b=sample_branch: plan_once(b, 200_000), args.repeat)  # type: ignore[misc]
            cold = timed(lambda b=sample_branch: plan_once(b, 200_000), args.repeat, cold=True)  # type: ignore[misc]
            rows.append(
                (name, len(sample_branch), tokens, len(sample_plan.messages_to_summarize), warm, cold)
            )

    header = f"{'case':<22}{'branch entries':>16}{'context tokens':>16}{'to summarise':>14}"
    print(header + f"{'warm ms':>10}{'cold ms':>10}")
    for name, entries, tokens, summarise, warm, cold in rows:
        print(f"{name:<22}{entries:>16}{tokens:>16}{summarise:>14}{warm:>10.2f}{cold:>10.2f}")
    print("warm: the token memo holds the branch's messages (every plan after the first on a loaded")
    print("transcript); cold: memo cleared before each run (chars/4 estimates computed afresh).")
    print("target: < 20 ms (DESIGN 'Targets': compaction planning on a 200k-token branch)")


if __name__ == "__main__":
    main()
