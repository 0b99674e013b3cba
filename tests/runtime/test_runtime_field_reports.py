"""
Field reports B09, B11, B13, B14 and B15 (``cases/field-reports.md``) with their expected values.

Each test drives the runtime's pure decisions through the report's sequence, the way a runtime would: the
decisions say what to do, the test plays the runtime's part (counters, store fields, event order).
"""

from __future__ import annotations

from typing import Any

import pytest

from sessionkeeper._silent_stream import SilentReplyStreamFilter
from sessionkeeper.compaction import CompactionSettings, should_compact
from sessionkeeper.runtime import (
    MemoryFlushPolicy,
    MemoryFlushSettings,
    OverflowRecoveryState,
    compaction_progress,
    decide_threshold_compaction,
    is_context_overflow,
    parse_observed_token_count,
    plan_overflow_recovery,
)


# ---- B09 ----------------------------------------------------------------------------------------------
B09_P = {
    "P1": (
        "This model's maximum context length is 100000 tokens. However, you requested 107000 tokens "
        "(75000 in the messages, 32000 in the completion)."
    ),
    "P2": "prompt is too long: 101234 tokens > 100000 maximum",
    "P3": (
        "Your input exceeds the context window of this model. Please adjust your input and try again. "
        "(code=context_length_exceeded)"
    ),
    "P4": "request_too_large",
}
B09_N = {
    "N1": "429 Too Many Requests: rate limit of 30000 input tokens per minute exceeded",
    "N2": "500 Internal Server Error",
    "N3": "overloaded_error: Overloaded",
}
B09_SETTINGS = CompactionSettings(reserve_tokens=16384, reserve_tokens_floor=20000)


def test_b09_threshold_counts_the_output_budget() -> None:
    assert should_compact(75000, context_window=100000, settings=B09_SETTINGS, max_output_tokens=32000)
    decision = decide_threshold_compaction(
        context_tokens=75000, context_window=100000, settings=B09_SETTINGS, max_output_tokens=32000
    )
    assert (decision.compact, decision.threshold, decision.effective_reserve) == (True, 68000, 32000)
    # max_output_tokens unknown: falls back to max(reserve, floor) = 20000 -> threshold 80000
    unknown = decide_threshold_compaction(context_tokens=75000, context_window=100000, settings=B09_SETTINGS)
    assert (unknown.compact, unknown.threshold) == (False, 80000)


@pytest.mark.parametrize("name", sorted(B09_P))
def test_b09_positives(name: str) -> None:
    assert is_context_overflow(B09_P[name])


@pytest.mark.parametrize("name", sorted(B09_N))
def test_b09_negatives(name: str) -> None:
    assert not is_context_overflow(B09_N[name])


@pytest.mark.parametrize(
    ("name", "expected"),
    [("P1", 107000), ("P2", 101234), ("P3", None), ("P4", None), ("N1", None), ("N2", None), ("N3", None)],
)
def test_b09_attempted_tokens(name: str, expected: int | None) -> None:
    assert parse_observed_token_count({**B09_P, **B09_N}[name]) == expected


def test_b09_runner_does_one_compact_and_retry_then_reports() -> None:
    state = OverflowRecoveryState()
    compactions = 0
    outcome: Any = None
    for _ in range(10):  # the provider keeps answering P1
        step = plan_overflow_recovery(B09_P["P1"], state=state, context_window=100000)
        if step.action == "compact":
            compactions += 1
            state = state.after_compaction(succeeded=True)
            continue
        outcome = step
        break
    assert compactions == 1
    assert outcome is not None
    assert (outcome.action, outcome.reason) == ("give_up", "retry_overflowed")


# ---- B11 ----------------------------------------------------------------------------------------------
def test_b11_ineffective_compaction_is_committed_once_then_reported() -> None:
    # context_window=20000, reserve_tokens=4000 (threshold 16000: the report assumes no reserve floor)
    settings = CompactionSettings(reserve_tokens=4000, reserve_tokens_floor=0)
    system, tail, summary, history = 9000, 6000, 2000, 30000
    before = system + history + tail
    first = decide_threshold_compaction(context_tokens=before, context_window=20000, settings=settings)
    assert (first.compact, first.threshold) == (True, 16000)
    progress = compaction_progress(
        tokens_before=before, tokens_after=system + summary + tail, threshold=16000
    )
    assert progress.commit is True  # it freed tokens: committed
    assert (progress.tokens_after, progress.effective) == (17000, False)
    ineffective = 0 if progress.effective else 1
    second = decide_threshold_compaction(
        context_tokens=progress.tokens_after,
        context_window=20000,
        settings=settings,
        ineffective_compactions=ineffective,
    )
    assert (second.compact, second.reason) == (False, "compaction_ineffective")
    assert (second.context_tokens, second.threshold) == (17000, 16000)


def test_b11_summary_that_frees_nothing_is_not_committed() -> None:
    assert not compaction_progress(tokens_before=17000, tokens_after=17000, threshold=16000).commit
    assert not compaction_progress(tokens_before=17000, tokens_after=18000, threshold=16000).commit


# ---- B13 ----------------------------------------------------------------------------------------------
B13 = MemoryFlushPolicy(
    settings=MemoryFlushSettings(soft_threshold_tokens=4000),
    compaction=CompactionSettings(reserve_tokens=62500, reserve_tokens_floor=20000),
)


def test_b13_thresholds() -> None:
    assert B13.thresholds(context_window=200000) == (133500, 137500)


@pytest.mark.parametrize(
    ("total", "compaction_count", "flushed_at", "expected"),
    [(134000, 0, None, True), (133000, 0, None, False), (134000, 2, 2, False), (134000, 3, 2, True)],
)
def test_b13_table(total: int, compaction_count: int, flushed_at: int | None, expected: bool) -> None:
    decision = B13.decide(
        context_tokens=total,
        context_window=200000,
        compaction_count=compaction_count,
        memory_flush_compaction_count=flushed_at,
    )
    assert decision.run is expected


def test_b13_compaction_during_the_flush_is_recorded_against_the_old_cycle() -> None:
    store: dict[str, Any] = {"compactionCount": 2, "memoryFlushCompactionCount": 1}
    start = B13.decide(
        context_tokens=134000,
        context_window=200000,
        compaction_count=store["compactionCount"],
        memory_flush_compaction_count=store["memoryFlushCompactionCount"],
    )
    assert start.run
    count_at_start = store["compactionCount"]
    # inside the flush turn the flush check is off (no nested flush)
    nested = B13.decide(
        context_tokens=190000,
        context_window=200000,
        compaction_count=count_at_start,
        memory_flush_compaction_count=store["memoryFlushCompactionCount"],
        in_flush_turn=True,
    )
    assert (nested.run, nested.reason) == (False, "flush_in_progress")
    # a compaction completes during the flush turn
    record = B13.record_success(
        compaction_count_at_start=count_at_start, now_ms=1_000, compacted_during_flush=True
    )
    store.update(record.to_entry_patch())
    assert store["compactionCount"] == 3
    assert store["memoryFlushCompactionCount"] == 2
    assert store["memoryFlushAt"] == 1_000
    # the next cycle still flushes once, and only once
    nxt = B13.decide(
        context_tokens=134000,
        context_window=200000,
        compaction_count=store["compactionCount"],
        memory_flush_compaction_count=store["memoryFlushCompactionCount"],
    )
    assert nxt.run
    store.update(B13.record_success(compaction_count_at_start=3, now_ms=2_000).to_entry_patch())
    again = B13.decide(
        context_tokens=135000,
        context_window=200000,
        compaction_count=store["compactionCount"],
        memory_flush_compaction_count=store["memoryFlushCompactionCount"],
    )
    assert (again.run, again.reason) == (False, "already_flushed")


def test_b13_flush_reply_is_never_delivered() -> None:
    plan = B13.plan(now_ms=0)
    assert plan.silent_expected
    stream = SilentReplyStreamFilter()
    shown = "".join(stream.feed(delta) for delta in ["NO", "_RE", "PLY"]) + stream.finish()
    assert shown == ""
    assert stream.silent


# ---- B14 ----------------------------------------------------------------------------------------------
def test_b14_overflow_compaction_flushes_first_with_pre_compaction_history() -> None:
    events: list[str] = []
    store: dict[str, Any] = {"compactionCount": 4, "memoryFlushCompactionCount": 3}
    # turn start: 120000 < 133500, no flush
    at_start = B13.decide(
        context_tokens=120000,
        context_window=200000,
        compaction_count=store["compactionCount"],
        memory_flush_compaction_count=store["memoryFlushCompactionCount"],
    )
    assert (at_start.run, at_start.reason) == (False, "below_threshold")
    # a tool result brings the estimate to 210000; the provider answers with a P1-style overflow
    step = plan_overflow_recovery(
        B09_P["P1"], state=OverflowRecoveryState(), context_window=200000, estimate_tokens=210000
    )
    assert step.action == "compact"
    assert step.token_count is not None
    assert step.token_count.tokens == 200001  # P1 observed 107000 is under this window: raised to window + 1
    flush = B13.decide(
        context_tokens=210000,
        context_window=200000,
        compaction_count=store["compactionCount"],
        memory_flush_compaction_count=store["memoryFlushCompactionCount"],
        pending_compaction=True,
    )
    assert flush.run
    events.append("memory_flush")  # the flush sees the messages about to be summarised
    count_before = store["compactionCount"]
    store.update(B13.record_success(compaction_count_at_start=count_before, now_ms=10).to_entry_patch())
    events.append("compaction")
    store["compactionCount"] += 1
    assert events == ["memory_flush", "compaction"]
    assert store["memoryFlushCompactionCount"] == count_before


def test_b14_failed_flush_does_not_block_compaction_nor_flush_the_summary_later() -> None:
    store: dict[str, Any] = {
        "compactionCount": 4,
        "memoryFlushCompactionCount": 3,
        "memoryFlushFailureCount": 0,
    }
    flush = B13.decide(
        context_tokens=210000,
        context_window=200000,
        compaction_count=store["compactionCount"],
        memory_flush_compaction_count=store["memoryFlushCompactionCount"],
        pending_compaction=True,
    )
    assert flush.run
    record = B13.record_failure(
        error=RuntimeError("flush hook raised"),
        previous_failure_count=store["memoryFlushFailureCount"],
        compaction_count=store["compactionCount"],
        now_ms=10,
        pending_compaction=True,
    )
    assert record.diagnostic == "memoryFlushSkipped"
    store.update(record.to_entry_patch())
    assert store["memoryFlushCompactionCount"] == 4  # the count from before compaction
    store["compactionCount"] += 1  # compaction still goes ahead
    # next turn: only the summary and tail remain, well under the threshold: no flush on lossy data
    after = B13.decide(
        context_tokens=30000,
        context_window=200000,
        compaction_count=store["compactionCount"],
        memory_flush_compaction_count=store["memoryFlushCompactionCount"],
    )
    assert (after.run, after.reason) == (False, "below_threshold")


# ---- B15 (rule owned by the core engineer: sessionkeeper._silent; asserted here for the flush turn) ---
@pytest.mark.parametrize(
    ("deltas", "aborted", "expected"),
    [
        (["NO", "_REPLY"], False, ""),
        (["N", "O_RE", "PLY", "\n"], False, ""),
        (["no_reply"], False, ""),
        (["  NO_REPLY  "], False, ""),
        (["No", " problem, done."], False, "No problem, done."),
        (["NOTE: build passed"], False, "NOTE: build passed"),
        (["NO_REPLY", " Hello"], False, "NO_REPLY Hello"),
        (["NO_"], True, ""),
        (["NO"], True, ""),
    ],
)
def test_b15_streamed_silent_token_never_leaks(deltas: list[str], aborted: bool, expected: str) -> None:
    stream = SilentReplyStreamFilter()
    emitted = [stream.feed(delta) for delta in deltas]
    emitted.append(stream.finish(aborted=aborted))
    assert "".join(emitted) == expected
    assert stream.text == expected
    assert stream.silent == (expected == "")


def test_b14_forced_flush_by_size_does_not_refire_on_the_summary() -> None:
    # the transcript file is 5 MiB; a compaction just happened and only 40 KiB were written since
    big, since = 5 * 1024 * 1024, 40 * 1024
    before = B13.decide(
        context_tokens=None,
        context_window=200000,
        compaction_count=4,
        memory_flush_compaction_count=3,
        active_transcript_bytes=big,
    )
    assert (before.run, before.reason) == (True, "transcript_size")
    after = B13.decide(
        context_tokens=30000,
        context_window=200000,
        compaction_count=5,
        memory_flush_compaction_count=4,
        active_transcript_bytes=since,
    )
    assert (after.run, after.reason) == (False, "below_threshold")
