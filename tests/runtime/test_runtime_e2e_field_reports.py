"""Field reports B09, B11, B13, B14, B15 end to end through SessionRuntime (asyncio and trio)."""

from __future__ import annotations

import pytest
from tests.runtime._runtime_helpers import FlushRecorder, make_runtime, reply, tool_call, tool_result

from sessionkeeper.compaction import CompactionPreparation, CompactionSettings
from sessionkeeper.exceptions import ContextOverflowError
from sessionkeeper.hooks import (
    CompactHookResult,
    CompactionHookOverride,
    HookRegistry,
    SessionBeforeCompactEvent,
)
from sessionkeeper.runtime import (
    MemoryFlushRequest,
    MemoryFlushSettings,
    ModelInfo,
    RuntimeSettings,
    SessionRuntime,
    is_context_overflow,
)
from sessionkeeper.store import SessionStore
from sessionkeeper.testing import FakeClock, ScriptedModelClient, capture_events
from sessionkeeper.transcript import (
    CompactionEntry,
    CompactionSummaryMessage,
    ToolResultMessage,
    UserMessage,
)


pytestmark = pytest.mark.anyio

KEY = "agent:main:main"

P1 = (
    "This model's maximum context length is 100000 tokens. However, you requested 107000 tokens "
    "(75000 in the messages, 32000 in the completion)."
)
P2 = "prompt is too long: 101234 tokens > 100000 maximum"
P3 = (
    "Your input exceeds the context window of this model. Please adjust your input and try again. "
    "(code=context_length_exceeded)"
)
P4 = "request_too_large"
N1 = "429 Too Many Requests: rate limit of 30000 input tokens per minute exceeded"
N2 = "500 Internal Server Error"
N3 = "overloaded_error: Overloaded"


async def _history(runtime: SessionRuntime, session: object, turns: int, *, size: int = 2000) -> None:
    for index in range(turns):
        await runtime.before_model_call(session, prompt=f"step {index} " + "q" * size)  # type: ignore[arg-type]
        await runtime.after_turn(session, messages=[reply("did it " + "a" * size)])  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------- B09


def _b09_runtime(**kwargs: object) -> tuple[SessionRuntime, SessionStore]:
    compaction = CompactionSettings(
        reserve_tokens=16_384, reserve_tokens_floor=20_000, keep_recent_tokens=200
    )
    runtime, store, _ = make_runtime(
        model=ModelInfo(provider="openai", model_id="m", context_window=100_000, max_output_tokens=32_000),
        compaction=compaction,
        **kwargs,  # type: ignore[arg-type]
    )
    return runtime, store


async def test_b09_threshold_counts_the_output_budget() -> None:
    runtime, store = _b09_runtime()
    assert runtime.compaction_threshold == 68_000
    session = await runtime.open(KEY)
    await _history(runtime, session, 3)
    await runtime.before_model_call(session, prompt="go on")
    outcome = await runtime.after_turn(
        session, messages=[reply("ok", input_tokens=74_990, output_tokens=10, provider="openai")]
    )
    assert outcome.compaction is not None and outcome.compaction.tokens_before == 75_000
    assert outcome.compaction.compacted and outcome.compaction.trigger == "threshold"
    assert (await store.require(KEY)).compaction_count == 1


async def test_b09_without_output_budget_falls_back_to_reserve_and_floor() -> None:
    compaction = CompactionSettings(reserve_tokens=16_384, reserve_tokens_floor=20_000)
    runtime, _, _ = make_runtime(model=ModelInfo(context_window=100_000), compaction=compaction)
    assert runtime.compaction_threshold == 80_000


@pytest.mark.parametrize("error", [P1, P2, P3, P4])
async def test_b09_provider_overflow_gives_exactly_one_compact_and_retry(error: str) -> None:
    runtime, store = _b09_runtime()
    session = await runtime.open(KEY)
    await _history(runtime, session, 3)
    await runtime.before_model_call(session, prompt="go on")
    first = await runtime.on_model_error(session, RuntimeError(error))
    assert first.action == "compacted" and first.attempt == 1
    expected = {P1: 107_000, P2: 101_234}.get(error)
    assert first.observed_tokens == expected
    await runtime.before_model_call(session)  # the retry
    with pytest.raises(ContextOverflowError) as caught:
        await runtime.on_model_error(session, RuntimeError(error))
    assert "retry_overflowed" in str(caught.value)
    entry = await store.require(KEY)
    assert entry.compaction_count == 1 and entry.session_id == session.session_id


@pytest.mark.parametrize("error", [N1, N2, N3])
async def test_b09_rate_limits_and_server_errors_are_not_overflows(error: str) -> None:
    runtime, _ = _b09_runtime()
    session = await runtime.open(KEY)
    await _history(runtime, session, 2)
    assert not is_context_overflow(error)
    with pytest.raises(RuntimeError, match=error[:10]):
        await runtime.on_model_error(session, RuntimeError(error))
    assert not any(isinstance(e, CompactionEntry) for e in session.transcript.entries())


# ------------------------------------------------------------------------------------------- B11


def _two_thousand_token_summary(event: SessionBeforeCompactEvent) -> CompactHookResult:
    plan = event.preparation
    assert isinstance(plan, CompactionPreparation) and plan.first_kept_entry_id is not None
    return CompactHookResult(
        compaction=CompactionHookOverride(
            summary="S" * 8000, first_kept_entry_id=plan.first_kept_entry_id, tokens_before=plan.tokens_before
        )
    )


async def test_b11_an_ineffective_compaction_is_not_repeated_for_the_turn() -> None:
    hooks = HookRegistry()
    hooks.on(SessionBeforeCompactEvent, _two_thousand_token_summary)
    compaction = CompactionSettings(reserve_tokens=4000, reserve_tokens_floor=0, keep_recent_tokens=15_010)
    runtime, store, _ = make_runtime(
        model=ModelInfo(provider="openai", model_id="m", context_window=20_000),
        compaction=compaction,
        hooks=hooks,
    )
    assert runtime.compaction_threshold == 16_000
    session = await runtime.open(KEY)
    transcript = session.transcript
    for index in range(6):  # 30000 tokens of history before the tail
        await transcript.append_message(UserMessage(content="h" * 10_000, timestamp=index))
        await transcript.append_message(reply("a" * 10_000, provider="openai"))
    # the last turn: a user ask and its tool block, ~16000 tokens that the cut point keeps whole (no cut
    # point after the tool result, so even D9's smaller keep budget keeps the whole turn: B05)
    await transcript.append_message(UserMessage(content="run the big tool " + "u" * 4000, timestamp=9))
    outcome = await runtime.after_turn(session, messages=[tool_call("c1"), tool_result("c1", "T" * 60_000)])
    first = outcome.compaction
    assert first is not None and first.compacted and first.trigger == "threshold"
    assert first.tokens_after > 16_000 and not first.effective  # ~2000 summary + ~15000 tail
    assert first.tokens_after < first.tokens_before  # it freed tokens: committed
    assert (await store.require(KEY)).compaction_count == 1

    plan = await runtime.before_model_call(session, prompt="and now?")
    assert plan.compaction is not None and plan.compaction.status == "compaction_ineffective"
    assert plan.compaction.tokens_before > plan.compaction.threshold == 16_000
    again = await runtime.after_turn(session, messages=[reply("still big", provider="openai")])
    assert again.compaction is not None and again.compaction.status == "compaction_ineffective"
    assert (await store.require(KEY)).compaction_count == 1
    assert sum(isinstance(e, CompactionEntry) for e in session.transcript.entries()) == 1

    manual = await runtime.compact(session, keep_recent_tokens=10)  # manual compaction is still allowed
    assert manual.compacted and (await store.require(KEY)).compaction_count == 2


async def test_b11_a_summary_that_frees_nothing_is_not_committed() -> None:
    client = ScriptedModelClient(handler=lambda request: "X" * 200_000)
    compaction = CompactionSettings(mode="default", keep_recent_tokens=100)
    runtime, store, _ = make_runtime(
        model=ModelInfo(provider="openai", model_id="m", context_window=20_000),
        compaction=compaction,
        model_client=client,
        host_supports_flush=False,
    )
    session = await runtime.open(KEY)
    await _history(runtime, session, 3, size=400)
    outcome = await runtime.compact(session, keep_recent_tokens=100)
    assert outcome.status == "ineffective" and not outcome.compacted
    assert not any(isinstance(e, CompactionEntry) for e in session.transcript.entries())
    assert (await store.require(KEY)).compaction_count == 0


# ------------------------------------------------------------------------------------------- B13


def _b13_settings() -> RuntimeSettings:
    return RuntimeSettings(
        compaction=CompactionSettings(
            reserve_tokens=62_500, reserve_tokens_floor=20_000, keep_recent_tokens=200
        ),
        memory_flush=MemoryFlushSettings(soft_threshold_tokens=4000),
    )


async def test_b13_flush_threshold_sits_below_compaction_and_counts_the_cycle_before_the_flush() -> None:
    clock = FakeClock()
    store = SessionStore.in_memory(clock=clock)
    model = ModelInfo(provider="openai", model_id="m", context_window=200_000)
    runtime: SessionRuntime
    nested: list[object] = []

    async def flush(request: MemoryFlushRequest) -> str:
        # during the flush turn a compaction completes, and the turn's own model call is prepared
        nested.append(await runtime.before_model_call(session))
        await runtime.compact(session)
        return "NO_REPLY"

    runtime, _, _ = make_runtime(
        store=store, clock=clock, model=model, settings=_b13_settings(), memory_flush_runner=flush
    )
    assert runtime.flush_policy.thresholds(context_window=200_000) == (133_500, 137_500)
    session = await runtime.open(KEY)
    await _history(runtime, session, 3)
    await runtime.before_model_call(session, prompt="x")
    await runtime.after_turn(session, messages=[reply("y", input_tokens=130_000, provider="openai")])
    await store.patch(KEY, compactionCount=2)
    session = await runtime.open(KEY)

    below = await runtime.before_model_call(session, prompt="p" * 4)  # 130001 + 1: under 133500
    assert below.memory_flush is None
    await runtime.after_turn(session, messages=[reply("y", input_tokens=130_000, provider="openai")])
    plan = await runtime.before_model_call(session, prompt="p" * 16_000)  # + 4000 tokens: 134000
    assert plan.memory_flush is not None and plan.memory_flush.ok and plan.memory_flush.reply_silent
    assert nested and getattr(nested[0], "memory_flush", "x") is None  # no nested flush
    entry = await store.require(KEY)
    assert entry.compaction_count == 3
    assert entry.memory_flush_compaction_count == 2
    assert entry.memory_flush_at == clock.now_ms()


async def test_b13_at_most_one_flush_per_cycle() -> None:
    flush = FlushRecorder()
    runtime, store, _ = make_runtime(
        model=ModelInfo(provider="openai", model_id="m", context_window=200_000),
        settings=_b13_settings(),
        memory_flush_runner=flush,
    )
    session = await runtime.open(KEY)
    for _ in range(3):
        await runtime.before_model_call(session, prompt="x")
        await runtime.after_turn(session, messages=[reply("y", input_tokens=134_000, provider="openai")])
    assert len(flush.requests) == 1
    assert (await store.require(KEY)).memory_flush_compaction_count == 0


# ------------------------------------------------------------------------------------------- B14


async def _b14_session(runtime: SessionRuntime) -> object:
    session = await runtime.open(KEY)
    await _history(runtime, session, 3)
    await runtime.before_model_call(session, prompt="x")
    await runtime.after_turn(session, messages=[reply("y", input_tokens=120_000, provider="openai")])
    plan = await runtime.before_model_call(session, prompt="run the tool")
    assert plan.memory_flush is None  # 120000: under the flush threshold at turn start
    await runtime.after_turn(
        session,
        messages=[tool_call("big"), tool_result("big", "R" * 360_000)],  # +90000 tokens: 210000
        turn_complete=False,
    )
    return session


async def test_b14_overflow_recovery_flushes_first_on_the_full_history() -> None:
    hooks = HookRegistry()
    flush = FlushRecorder()
    runtime, store, _ = make_runtime(
        model=ModelInfo(provider="openai", model_id="m", context_window=200_000),
        settings=_b13_settings(),
        memory_flush_runner=flush,
        hooks=hooks,
    )
    session = await _b14_session(runtime)
    assert runtime.context_tokens(session) >= 210_000  # type: ignore[arg-type]
    with capture_events(hooks) as events:
        outcome = await runtime.on_model_error(session, RuntimeError(P1))  # type: ignore[arg-type]
    assert outcome.action == "compacted"
    names = events.names
    assert (
        names.index("memory_flush_start") < names.index("memory_flush_end") < names.index("compaction_start")
    )
    received = flush.requests[0].messages
    assert any(isinstance(m, ToolResultMessage) and m.tool_call_id == "big" for m in received)
    assert not any(isinstance(m, CompactionSummaryMessage) for m in received)
    assert flush.requests[0].trigger == "overflow"
    entry = await store.require(KEY)
    assert entry.memory_flush_compaction_count == 0 and entry.compaction_count == 1


async def test_b14_a_failing_flush_does_not_stop_the_compaction_nor_rerun_on_the_summary() -> None:
    flush = FlushRecorder(fail=True)
    runtime, store, _ = make_runtime(
        model=ModelInfo(provider="openai", model_id="m", context_window=200_000),
        settings=_b13_settings(),
        memory_flush_runner=flush,
    )
    session = await _b14_session(runtime)
    outcome = await runtime.on_model_error(session, RuntimeError(P1))  # type: ignore[arg-type]
    assert outcome.action == "compacted"
    assert outcome.memory_flush is not None and not outcome.memory_flush.ok
    assert outcome.memory_flush.diagnostic == "memoryFlushSkipped"
    entry = await store.require(KEY)
    assert entry.compaction_count == 1 and entry.memory_flush_compaction_count == 0
    assert entry.memory_flush_failure_count == 1
    retry = await runtime.before_model_call(session)  # type: ignore[arg-type]
    assert retry.memory_flush is None and len(flush.requests) == 1


# ------------------------------------------------------------------------------------------- B15


@pytest.mark.parametrize(
    ("text", "delivered"),
    [
        ("NO_REPLY", None),
        ("no_reply", None),
        ("  NO_REPLY  ", None),
        ("No problem, done.", "No problem, done."),
        ("NOTE: build passed", "NOTE: build passed"),
        ("NO_REPLY Hello", "NO_REPLY Hello"),  # OpenClaw 2026.7.35 delivers real content after the token
    ],
)
async def test_b15_silent_replies_are_never_delivered(text: str, delivered: str | None) -> None:
    runtime, _, _ = make_runtime()
    session = await runtime.open(KEY)
    await runtime.before_model_call(session, prompt="status?")
    outcome = await runtime.after_turn(session, messages=[reply(text)])
    assert outcome.delivered_text == delivered
    assert outcome.silent is (delivered is None)
    plan = await runtime.before_model_call(session, prompt="next")
    replayed = [m for m in plan.messages if getattr(m, "content", None) and m is not plan.messages[-1]]
    replayed_texts = ["".join(getattr(b, "text", "") for b in m.content) for m in replayed]  # type: ignore[union-attr]
    assert (text in replayed_texts) is (delivered is not None)


async def test_b15_flush_turn_output_is_never_delivered_nor_stored() -> None:
    flush = FlushRecorder(reply_text="Stored two notes in memory/2026-01-01.md")
    runtime, _, _ = make_runtime(
        model=ModelInfo(provider="openai", model_id="m", context_window=16_000), memory_flush_runner=flush
    )
    session = await runtime.open(KEY)
    await runtime.before_model_call(session, prompt="x")
    await runtime.after_turn(session, messages=[reply("y", input_tokens=4500, provider="openai")])
    plan = await runtime.before_model_call(session, prompt="more")
    assert plan.memory_flush is not None and plan.memory_flush.ok and not plan.memory_flush.reply_silent
    lines = b"".join(session.transcript.index.line_bytes(p) for p in range(len(session.transcript.index)))
    assert b"Stored two notes" not in lines and b"pre-compaction memory flush" not in lines
    assert len(plan.messages) == 3  # x, y, more: neither the flush prompt nor its reply
