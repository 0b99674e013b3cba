"""Invariants of SessionRuntime over random agent loops (hypothesis)."""

from __future__ import annotations

import contextlib
from typing import Any

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.runtime._runtime_helpers import make_runtime, reply, tool_call, tool_result

from sessionkeeper.compaction import CompactionSettings
from sessionkeeper.exceptions import ContextOverflowError
from sessionkeeper.runtime import MemoryFlushRequest, ModelInfo, RuntimeSettings
from sessionkeeper.transcript import CompactionEntry, MessageEntry


KEY = "agent:main:main"

step = st.one_of(
    st.tuples(st.just("turn"), st.integers(0, 12_000), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("overflow"), st.integers(0, 0), st.integers(0, 0), st.booleans()),
    st.tuples(st.just("compact"), st.integers(0, 0), st.integers(0, 0), st.booleans()),
)


async def _run(steps: list[tuple[str, int, int, bool]]) -> None:
    cycles: list[int] = []

    async def flush(request: MemoryFlushRequest) -> str:
        cycles.append(await _count())
        return "NO_REPLY"

    runtime, store, clock = make_runtime(
        model=ModelInfo(provider="anthropic", model_id="claude-sonnet-4-5", context_window=16_000),
        settings=RuntimeSettings(compaction=CompactionSettings(keep_recent_tokens=800)),
        memory_flush_runner=flush,
    )

    async def _count() -> int:
        entry = await store.require(KEY)
        return entry.compaction_count if isinstance(entry.compaction_count, int) else 0

    session = await runtime.open(KEY)
    session_id = session.session_id
    turn = 0
    for kind, size, tools, silent in steps:
        clock.advance(400)
        if kind == "turn":
            turn += 1
            plan = await runtime.before_model_call(session, prompt=f"turn {turn} " + "u" * (size // 4))
            messages: list[Any] = []
            for index in range(tools):
                call_id = f"t{turn}_{index}"
                messages += [tool_call(call_id), tool_result(call_id, "r" * size)]
            sent = plan.context_tokens + sum(len(getattr(m.content[0], "text", "")) // 4 for m in messages)
            messages.append(reply("NO_REPLY" if silent else "a" * (size // 8 + 1), input_tokens=sent))
            outcome = await runtime.after_turn(session, messages=messages)
            assert (outcome.delivered_text is None) is silent
        elif kind == "overflow":
            with contextlib.suppress(ContextOverflowError):
                await runtime.on_model_error(session, "prompt is too long: 20000 tokens > 16000 maximum")
        else:
            await runtime.compact(session, keep_recent_tokens=200)
        entry = await store.require(KEY)
        compactions = [e for e in session.transcript.entries() if isinstance(e, CompactionEntry)]
        assert entry.session_id == session_id == session.transcript.session_id
        assert (entry.compaction_count or 0) == len(compactions)
        if isinstance(entry.memory_flush_compaction_count, int):
            assert entry.memory_flush_compaction_count <= (entry.compaction_count or 0)
        assert len(cycles) == len(set(cycles))  # at most one flush per compaction cycle
        assert sum(isinstance(e, MessageEntry) for e in session.transcript.entries()) >= turn


@settings(max_examples=30, deadline=None)
@given(st.lists(step, min_size=1, max_size=12))
def test_store_and_transcript_stay_consistent_over_random_loops(
    steps: list[tuple[str, int, int, bool]],
) -> None:
    anyio.run(_run, steps)
