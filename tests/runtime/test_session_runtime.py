"""SessionRuntime: each rule it applies, end to end on a store and a transcript (asyncio and trio)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from msgspec import UNSET
from tests.runtime._runtime_helpers import (
    OPENAI,
    FlushRecorder,
    make_runtime,
    reply,
    tool_call,
    tool_result,
)

from sessionkeeper.compaction import CompactionSettings
from sessionkeeper.exceptions import ContextOverflowError
from sessionkeeper.hooks import (
    CompactionEndEvent,
    CompactionStartEvent,
    HookRegistry,
    MemoryFlushEndEvent,
    MemoryFlushStartEvent,
)
from sessionkeeper.pruning import CACHE_TTL_CUSTOM_TYPE, PruningSettings, SoftTrimSettings
from sessionkeeper.runtime import (
    ModelInfo,
    RuntimeSettings,
    max_tool_result_chars,
    truncate_oversized_tool_results,
)
from sessionkeeper.store import SessionStore
from sessionkeeper.testing import FakeClock, ScriptedModelClient, capture_events
from sessionkeeper.transcript import (
    AssistantMessage,
    CompactionEntry,
    CompactionSummaryMessage,
    CustomEntry,
    MessageEntry,
    ToolResultMessage,
    TranscriptManager,
    UserMessage,
)


pytestmark = pytest.mark.anyio

KEY = "agent:main:main"


def _texts(messages: tuple[object, ...]) -> list[str]:
    out = []
    for message in messages:
        content = getattr(message, "content", "")
        if isinstance(content, str):
            out.append(content)
        else:
            out.append("".join(getattr(block, "text", "") for block in content))
    return out


# ---------------------------------------------------------------------------------------------- open


async def test_open_creates_entry_and_transcript_file(tmp_path: Path) -> None:
    runtime, store, _ = make_runtime(tmp_path=tmp_path)
    session = await runtime.open(KEY, body="hello")
    assert session.resolution is not None and session.resolution.reason == "new-key"
    entry = await store.require(KEY)
    assert entry.session_id == session.session_id
    path = tmp_path / "sessions" / f"{session.session_id}.jsonl"
    assert session.transcript.path == path
    assert path.stat().st_mode & 0o777 == 0o600
    reopened = await runtime.open(KEY, body="again")
    assert reopened.session_id == session.session_id
    assert reopened.resolution is not None and reopened.resolution.reason == "fresh"


async def test_open_reset_trigger_rolls_the_session_and_archives_the_transcript(tmp_path: Path) -> None:
    runtime, store, _ = make_runtime(tmp_path=tmp_path)
    first = await runtime.open(KEY, body="hello")
    await runtime.before_model_call(first, prompt="hello")
    second = await runtime.open(KEY, body="/new")
    assert second.session_id != first.session_id
    assert (await store.require(KEY)).session_id == second.session_id
    archived = list((tmp_path / "sessions").glob(f"{first.session_id}.jsonl.reset.*"))
    assert len(archived) == 1


# -------------------------------------------------------------------------------- before_model_call


async def test_before_model_call_appends_the_prompt_and_returns_the_context() -> None:
    runtime, _, _ = make_runtime()
    session = await runtime.open(KEY)
    plan = await runtime.before_model_call(session, prompt="What is in README.md?")
    assert isinstance(plan.prompt_entry, MessageEntry)
    assert _texts(plan.messages) == ["What is in README.md?"]
    assert plan.context_window == 200_000
    entries = session.transcript.entries()
    assert [type(e) for e in entries] == [MessageEntry]
    again = await runtime.before_model_call(session)  # retry: nothing appended
    assert again.prompt_entry is None and len(session.transcript.entries()) == 1


async def test_context_window_is_capped_by_context_tokens() -> None:
    from sessionkeeper.runtime import ContextWindowSettings

    settings = RuntimeSettings(context_window=ContextWindowSettings(context_tokens=50_000))
    runtime, _, _ = make_runtime(model=ModelInfo(context_window=1_000_000), settings=settings)
    assert runtime.context_window == 50_000
    runtime2, _, _ = make_runtime(model=ModelInfo())
    assert runtime2.context_window == 200_000


async def test_pruning_runs_only_after_the_cache_ttl_expired() -> None:
    settings = RuntimeSettings(
        pruning=PruningSettings(
            mode="cache-ttl",
            keep_last_assistants=1,
            min_prunable_tool_chars=100,
            soft_trim=SoftTrimSettings(max_chars=200, head_chars=50, tail_chars=50),
        )
    )
    model = ModelInfo(
        provider="anthropic", model_id="claude-sonnet-4-5", api="anthropic-messages", context_window=4000
    )
    runtime, _, clock = make_runtime(model=model, settings=settings)
    session = await runtime.open(KEY)
    await runtime.before_model_call(session, prompt="read the log")
    await runtime.after_turn(
        session,
        messages=[tool_call("c1"), tool_result("c1", "L" * 6000), reply("the log is long", input_tokens=10)],
    )
    markers = [e for e in session.transcript.entries() if isinstance(e, CustomEntry)]
    assert [m.custom_type for m in markers] == [CACHE_TTL_CUSTOM_TYPE]
    clock.advance(60)  # TTL (5 min) not expired
    plan = await runtime.before_model_call(session, prompt="and now?")
    assert plan.pruning is not None and plan.pruning.skipped == "ttl-not-expired"
    await runtime.after_turn(session, messages=[reply("ok", input_tokens=10)])
    clock.advance(6 * 60)
    plan = await runtime.before_model_call(session, prompt="summarise it")
    assert plan.pruning is not None and plan.pruning.changed
    assert "c1" in plan.pruning.soft_trimmed
    stored = [e.message for e in session.transcript.entries() if isinstance(e, MessageEntry)]
    results = [m for m in stored if isinstance(m, ToolResultMessage)]
    assert _texts(tuple(results)) == ["L" * 6000]  # the transcript keeps the full result


# ------------------------------------------------------------------------------------- after_turn


async def test_after_turn_updates_store_counters_and_appends_the_ttl_marker(tmp_path: Path) -> None:
    runtime, store, _ = make_runtime(tmp_path=tmp_path)
    session = await runtime.open(KEY)
    await runtime.before_model_call(session, prompt="hi")
    outcome = await runtime.after_turn(
        session,
        messages=[
            tool_call("c1", path="a.py"),
            tool_result("c1", "print(1)"),
            reply("done", input_tokens=1200, output_tokens=30),
        ],
    )
    assert outcome.delivered_text == "done" and not outcome.silent
    assert outcome.cache_ttl_marker is not None
    entry = await store.require(KEY)
    assert entry.input_tokens == 1200 and entry.output_tokens == 30
    assert entry.total_tokens == outcome.context_tokens == 1230
    assert entry.total_tokens_fresh is True
    assert entry.context_tokens == 200_000
    assert entry.model_provider == "anthropic" and entry.model == "claude-sonnet-4-5"
    kinds = [type(e).__name__ for e in session.transcript.entries()]
    assert kinds == ["MessageEntry"] * 4 + ["CustomEntry"]


async def test_a_turn_under_a_held_write_lock_writes_once_per_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime, _, _ = make_runtime(tmp_path=tmp_path)
    session = await runtime.open(KEY)
    writes: list[int] = []
    real = TranscriptManager._write_lines

    async def counting(self: TranscriptManager, lines: Any, rider: Any = None) -> bool:
        writes.append(len(lines))
        return await real(self, lines, rider)  # the turn's entry update rides on its last write

    monkeypatch.setattr(TranscriptManager, "_write_lines", counting)
    path = session.transcript.path
    assert path is not None
    lock_file = path.with_name(path.name + ".lock")
    async with session.transcript.hold_write_lock():  # a host's run: every write reuses this lock
        await runtime.before_model_call(session, prompt="hi")
        assert lock_file.exists()
        await runtime.after_turn(
            session, messages=[tool_call("c1", path="a.py"), tool_result("c1", "print(1)"), reply("done")]
        )
    assert not lock_file.exists()
    assert writes == [1, 4]  # prompt; reply, tool result and cache-TTL marker in one write
    entries = session.transcript.entries()
    assert [e.parent_id for e in entries[1:]] == [e.id for e in entries[:-1]]
    reopened = await TranscriptManager.open(path)
    assert reopened.entries() == entries


async def test_reused_contexts_equal_rebuilt_ones_over_turns_and_tool_loops() -> None:
    runtime, _, _ = make_runtime()
    session = await runtime.open(KEY)
    for turn in range(3):
        plan = await runtime.before_model_call(session, prompt=f"q{turn}")
        rebuilt = session.transcript.build_session_context().messages
        assert plan.context_tokens == runtime.context_tokens(session)
        assert _texts(plan.messages) == _texts(rebuilt)
        partial = await runtime.after_turn(
            session, messages=[tool_call(f"c{turn}"), tool_result(f"c{turn}", "x")], turn_complete=False
        )
        assert partial.context_tokens == runtime.context_tokens(session)
        plan = await runtime.before_model_call(session)
        assert plan.context_tokens == runtime.context_tokens(session)
        assert _texts(plan.messages) == _texts(session.transcript.build_session_context().messages)
        outcome = await runtime.after_turn(session, messages=[reply(f"a{turn}", input_tokens=10 * turn + 5)])
        assert outcome.context_tokens == runtime.context_tokens(session)
    assert _texts(plan.messages)[-3:] == ["q2", "", "x"]
    assert len(plan.messages) == 11


async def test_no_ttl_marker_for_a_provider_without_cache_ttl() -> None:
    runtime, _, _ = make_runtime(model=OPENAI)
    session = await runtime.open(KEY)
    await runtime.before_model_call(session, prompt="hi")
    outcome = await runtime.after_turn(session, messages=[reply("done", provider="openai")])
    assert outcome.cache_ttl_marker is None
    assert not any(isinstance(e, CustomEntry) for e in session.transcript.entries())


async def test_tool_loop_records_without_maintenance_until_the_turn_completes() -> None:
    runtime, store, _ = make_runtime()
    session = await runtime.open(KEY)
    await runtime.before_model_call(session, prompt="hi")
    partial = await runtime.after_turn(
        session, messages=[tool_call("c1"), tool_result("c1", "x")], turn_complete=False
    )
    assert partial.delivered_text is None and partial.cache_ttl_marker is None
    plan = await runtime.before_model_call(session)
    assert len(plan.messages) == 3
    final = await runtime.after_turn(session, messages=[reply("done", input_tokens=50, output_tokens=5)])
    assert final.delivered_text == "done"
    assert (await store.require(KEY)).output_tokens == 5


async def test_silent_reply_is_kept_in_the_transcript_not_delivered_and_not_replayed() -> None:
    runtime, _, _ = make_runtime()
    session = await runtime.open(KEY)
    await runtime.before_model_call(session, prompt="anything to say?")
    outcome = await runtime.after_turn(session, messages=[reply("NO_REPLY")])
    assert outcome.silent and outcome.delivered_text is None
    stored = [e.message for e in session.transcript.entries() if isinstance(e, MessageEntry)]
    assert any(isinstance(m, AssistantMessage) for m in stored)
    plan = await runtime.before_model_call(session, prompt="next")
    assert "NO_REPLY" not in _texts(plan.messages)
    trailing = await runtime.after_turn(session, messages=[reply("Done. NO_REPLY")])
    assert trailing.delivered_text == "Done." and not trailing.silent


# ----------------------------------------------------------------------------- compaction + flush


def _small(keep: int = 100, **kwargs: object) -> CompactionSettings:
    return CompactionSettings(keep_recent_tokens=keep, **kwargs)  # type: ignore[arg-type]


async def _fill(runtime: object, session: object, turns: int, *, size: int = 2000) -> None:
    from sessionkeeper.runtime import SessionRuntime

    assert isinstance(runtime, SessionRuntime)
    for index in range(turns):
        await runtime.before_model_call(session, prompt=f"question {index} " + "q" * size)  # type: ignore[arg-type]
        await runtime.after_turn(session, messages=[reply("answer " + "a" * size)])  # type: ignore[arg-type]


async def test_threshold_compaction_after_a_turn_with_the_flush_first_and_events() -> None:
    hooks = HookRegistry()
    flush = FlushRecorder()
    runtime, store, _ = make_runtime(
        model=ModelInfo(provider="anthropic", model_id="m", context_window=16_000),
        compaction=_small(),
        hooks=hooks,
        memory_flush_runner=flush,
        host_supports_flush=True,
    )
    assert runtime.compaction_threshold == 8000
    session = await runtime.open(KEY)
    await _fill(runtime, session, 3)
    await runtime.before_model_call(session, prompt="last")
    with capture_events(hooks) as events:
        outcome = await runtime.after_turn(
            session, messages=[reply("big", input_tokens=8500, output_tokens=10)]
        )
    assert outcome.compaction is not None and outcome.compaction.compacted
    assert outcome.compaction.trigger == "threshold" and outcome.compaction.effective
    assert outcome.memory_flush is not None and outcome.memory_flush.reason == "pending_compaction"
    names = events.names
    assert names.index("memory_flush_start") < names.index("compaction_start")
    start = events.of_type(CompactionStartEvent)[0]
    assert start.reason == "threshold"
    assert events.of_type(CompactionEndEvent)[0].result is outcome.compaction.result
    assert outcome.cache_ttl_marker is None  # not a clean attempt: it compacted
    entry = await store.require(KEY)
    assert entry.compaction_count == 1
    assert entry.memory_flush_compaction_count == 0
    assert entry.total_tokens == outcome.context_tokens < 8000
    assert isinstance(session.transcript.entries()[-1], CompactionEntry)
    assert flush.requests[0].trigger == "threshold"
    flushed = flush.requests[0].messages
    assert len(flushed) == 8 and not any(isinstance(m, CompactionSummaryMessage) for m in flushed)


async def test_preflight_compaction_runs_before_the_prompt_is_appended() -> None:
    runtime, store, _ = make_runtime(
        model=ModelInfo(provider="openai", model_id="m", context_window=16_000), compaction=_small()
    )
    session = await runtime.open(KEY)
    await _fill(runtime, session, 3)
    await runtime.before_model_call(session, prompt="x")
    await runtime.after_turn(session, messages=[reply("y", input_tokens=7000, provider="openai")])
    plan = await runtime.before_model_call(session, prompt="p" * 8000)  # 7001 + 2000 > 8000
    assert plan.compaction is not None and plan.compaction.trigger == "preflight"
    assert plan.compaction.compacted
    entries = session.transcript.entries()
    assert isinstance(entries[-2], CompactionEntry) and entries[-1] is plan.prompt_entry
    assert (await store.require(KEY)).compaction_count == 1
    assert plan.memory_flush is None  # no runner and no model client: no flush support


async def test_manual_compact_emits_reason_manual_and_counts() -> None:
    hooks = HookRegistry()
    runtime, store, _ = make_runtime(hooks=hooks)
    session = await runtime.open(KEY)
    await _fill(runtime, session, 2, size=400)
    with capture_events(hooks) as events:
        outcome = await runtime.compact(session, instructions="focus on the answers")
    assert outcome.trigger == "manual" and outcome.compacted
    assert events.of_type(CompactionStartEvent)[0].reason == "manual"
    assert (await store.require(KEY)).compaction_count == 1


async def test_memory_flush_at_turn_start_once_per_cycle() -> None:
    flush = FlushRecorder()
    hooks = HookRegistry()
    runtime, store, _ = make_runtime(
        model=ModelInfo(provider="openai", model_id="m", context_window=16_000),
        memory_flush_runner=flush,
        hooks=hooks,
    )
    session = await runtime.open(KEY)
    await runtime.before_model_call(session, prompt="x")
    await runtime.after_turn(session, messages=[reply("y", input_tokens=4500, provider="openai")])
    with capture_events(hooks) as events:
        plan = await runtime.before_model_call(session, prompt="more")
    assert plan.memory_flush is not None and plan.memory_flush.ok and plan.memory_flush.reply_silent
    assert plan.memory_flush.threshold == 4000
    assert events.names[:2] == ["memory_flush_start", "memory_flush_end"]
    assert events.of_type(MemoryFlushStartEvent)[0].session_key == KEY
    assert events.of_type(MemoryFlushEndEvent)[0].ok
    entry = await store.require(KEY)
    assert entry.memory_flush_compaction_count == 0 and entry.memory_flush_at is not None
    await runtime.after_turn(session, messages=[reply("z", input_tokens=4600, provider="openai")])
    again = await runtime.before_model_call(session, prompt="more")
    assert again.memory_flush is None and len(flush.requests) == 1


async def test_raising_memory_flush_hooks_are_reported_not_raised() -> None:
    # Notifications never raise after the fact: the flush ran and was recorded; the failures ride on
    # the outcome (and are logged), as for session_compact.
    flush = FlushRecorder()
    hooks = HookRegistry()

    def broken(event: object) -> None:
        raise RuntimeError(f"handler broke on {type(event).__name__}")

    hooks.on(MemoryFlushStartEvent, broken)
    hooks.on(MemoryFlushEndEvent, broken)
    runtime, store, _ = make_runtime(
        model=ModelInfo(provider="openai", model_id="m", context_window=16_000),
        memory_flush_runner=flush,
        hooks=hooks,
    )
    session = await runtime.open(KEY)
    await runtime.before_model_call(session, prompt="x")
    await runtime.after_turn(session, messages=[reply("y", input_tokens=4500, provider="openai")])
    plan = await runtime.before_model_call(session, prompt="more")
    outcome = plan.memory_flush
    assert outcome is not None and outcome.ok
    assert [e.event for e in outcome.hook_errors] == ["memory_flush_start", "memory_flush_end"]
    assert all(isinstance(e.error, RuntimeError) for e in outcome.hook_errors)
    assert [e["event"] for e in outcome.to_json()["hookErrors"]] == ["memory_flush_start", "memory_flush_end"]
    assert isinstance((await store.require(KEY)).memory_flush_at, int)  # the flush was recorded


async def test_memory_flush_failure_is_counted() -> None:
    flush = FlushRecorder(fail=True)
    runtime, store, _ = make_runtime(
        model=ModelInfo(provider="openai", model_id="m", context_window=16_000), memory_flush_runner=flush
    )
    session = await runtime.open(KEY)
    await runtime.before_model_call(session, prompt="x")
    await runtime.after_turn(session, messages=[reply("y", input_tokens=4500, provider="openai")])
    plan = await runtime.before_model_call(session, prompt="more")
    assert plan.memory_flush is not None and not plan.memory_flush.ok
    assert plan.memory_flush.error == "memory tool crashed"
    entry = await store.require(KEY)
    assert entry.memory_flush_failure_count == 1
    assert entry.memory_flush_last_failure_error == "memory tool crashed"
    assert entry.memory_flush_compaction_count is UNSET  # the cycle stays open for a retry
    await runtime.after_turn(session, messages=[reply("y", input_tokens=4500, provider="openai")])
    await runtime.before_model_call(session, prompt="again")
    await runtime.after_turn(session, messages=[reply("y", input_tokens=4500, provider="openai")])
    third = await runtime.before_model_call(session, prompt="again")
    assert third.memory_flush is not None and third.memory_flush.exhausted
    assert (await store.require(KEY)).memory_flush_compaction_count == 0  # cycle closed
    fourth = await runtime.before_model_call(session)
    assert fourth.memory_flush is None


async def test_default_flush_runner_uses_the_model_client_and_writes_the_memory_file(tmp_path: Path) -> None:
    client = ScriptedModelClient(responses=["- user prefers tabs"])
    runtime, _, _ = make_runtime(
        model=ModelInfo(provider="openai", model_id="m", context_window=16_000),
        model_client=client,
        workspace_dir=tmp_path / "ws",
    )
    session = await runtime.open(KEY)
    await runtime.before_model_call(session, prompt="x")
    await runtime.after_turn(session, messages=[reply("y", input_tokens=4500, provider="openai")])
    plan = await runtime.before_model_call(session, prompt="more")
    assert plan.memory_flush is not None and not plan.memory_flush.reply_silent
    assert plan.memory_flush.memory_file is not None
    target = tmp_path / "ws" / plan.memory_flush.memory_file
    assert target.read_text() == "- user prefers tabs\n"
    assert target.stat().st_mode & 0o777 == 0o600
    request = client.requests[0]
    assert request.metadata["purpose"] == "memory-flush"
    last = request.messages[-1]
    assert isinstance(last, UserMessage) and "NO_REPLY" in _texts((last,))[0]
    assert "more" not in _texts(request.messages)  # the flush runs before the prompt is appended


# ------------------------------------------------------------------------------- overflow recovery


async def test_non_overflow_errors_pass_through() -> None:
    runtime, _, _ = make_runtime()
    session = await runtime.open(KEY)
    await runtime.before_model_call(session, prompt="hi")
    error = RuntimeError("500 Internal Server Error")
    with pytest.raises(RuntimeError) as caught:
        await runtime.on_model_error(session, error)
    assert caught.value is error
    outcome = await runtime.on_model_error(session, reply("overloaded_error: Overloaded", stop="error"))
    assert outcome.action == "not_overflow"
    assert not any(isinstance(e, CompactionEntry) for e in session.transcript.entries())


async def test_overflow_compacts_then_retry_overflow_gives_a_typed_error_and_keeps_the_session() -> None:
    hooks = HookRegistry()
    runtime, store, _ = make_runtime(compaction=_small(), hooks=hooks)
    session = await runtime.open(KEY)
    await _fill(runtime, session, 3)
    await runtime.before_model_call(session, prompt="go")
    error = RuntimeError("prompt is too long: 213462 tokens > 200000 maximum")
    with capture_events(hooks) as events:
        outcome = await runtime.on_model_error(session, error)
    assert outcome.action == "compacted" and outcome.attempt == 1
    assert outcome.observed_tokens == 213462
    assert outcome.compaction is not None and outcome.compaction.synthetic_tokens is not None
    assert outcome.compaction.synthetic_tokens.source == "observed"
    assert events.of_type(CompactionStartEvent)[0].reason == "overflow"
    retry = await runtime.before_model_call(session)
    assert isinstance(retry.messages[0], CompactionSummaryMessage)
    with pytest.raises(ContextOverflowError) as caught:
        await runtime.on_model_error(session, error)
    assert caught.value.attempts == 1
    entry = await store.require(KEY)
    assert entry.session_id == session.session_id and entry.compaction_count == 1
    assert sum(isinstance(e, CompactionEntry) for e in session.transcript.entries()) == 1


async def test_overflow_recovery_retries_when_another_writer_compacted_meanwhile() -> None:
    # While this compaction summarises, another writer's compaction lands on the branch: ours is
    # "superseded" (nothing written), but the context is compacted, so recovery retries the call.
    from sessionkeeper.hooks import SessionBeforeCompactEvent

    hooks = HookRegistry()
    runtime, store, _ = make_runtime(compaction=_small(), hooks=hooks)
    session = await runtime.open(KEY)
    await _fill(runtime, session, 3)
    await runtime.before_model_call(session, prompt="go")
    branch = session.transcript.get_branch()

    async def other_writer(event: SessionBeforeCompactEvent) -> None:
        await session.transcript.append_compaction(
            summary="summary written by another gateway",
            first_kept_entry_id=branch[-2].id,
            tokens_before=9000,
        )

    hooks.on(SessionBeforeCompactEvent, other_writer)
    outcome = await runtime.on_model_error(session, "context_length_exceeded")
    assert outcome.action == "compacted"
    assert outcome.compaction is not None and outcome.compaction.status == "superseded"
    assert outcome.compaction.context_compacted and not outcome.compaction.compacted
    assert outcome.compaction.tokens_after < outcome.compaction.tokens_before
    compactions = [e for e in session.transcript.entries() if isinstance(e, CompactionEntry)]
    assert [c.summary for c in compactions] == ["summary written by another gateway"]
    assert (await store.require(KEY)).compaction_count in (0, None)  # ours wrote nothing
    retry = await runtime.before_model_call(session)
    assert isinstance(retry.messages[0], CompactionSummaryMessage)


async def test_overflow_after_a_successful_reply_may_compact_again() -> None:
    runtime, store, _ = make_runtime(compaction=_small())
    session = await runtime.open(KEY)
    await _fill(runtime, session, 3)
    await runtime.before_model_call(session, prompt="go")
    error = "context_length_exceeded"
    assert (await runtime.on_model_error(session, error)).action == "compacted"
    await runtime.after_turn(session, messages=[reply("ok")], turn_complete=False)
    await _fill(runtime, session, 2)
    await runtime.before_model_call(session, prompt="again")
    assert (await runtime.on_model_error(session, error)).action == "compacted"
    assert (await store.require(KEY)).compaction_count == 2


async def test_oversized_tool_results_are_truncated_when_compaction_cannot_help() -> None:
    runtime, _, _ = make_runtime(model=ModelInfo(provider="openai", model_id="m", context_window=10_000))
    session = await runtime.open(KEY)
    await runtime.before_model_call(session, prompt="read it")
    big = "B" * 40_000
    await runtime.after_turn(session, messages=[tool_call("c1"), tool_result("c1", big)], turn_complete=False)
    outcome = await runtime.on_model_error(session, "request_too_large")
    # the only turn cannot be summarised: the compaction writes nothing, truncation comes second
    assert outcome.action == "truncated"
    assert outcome.compaction is not None and not outcome.compaction.compacted
    plan = await runtime.before_model_call(session)
    assert plan.truncated_tool_results == ("c1",)
    cut = next(m for m in plan.messages if isinstance(m, ToolResultMessage))
    assert len(_texts((cut,))[0]) < 40_000
    assert "more characters truncated" in _texts((cut,))[0]
    with pytest.raises(ContextOverflowError):
        await runtime.on_model_error(session, "request_too_large")


def test_truncation_cap_and_unchanged_small_results() -> None:
    assert max_tool_result_chars(10_000) == 12_000
    assert max_tool_result_chars(100) == 2_000
    assert max_tool_result_chars(10_000_000) == 400_000
    small = tool_result("a", "x" * 10)
    result = truncate_oversized_tool_results([small], context_window_tokens=10_000)
    assert result.messages[0] is small and result.truncated == ()


async def test_in_memory_store_keeps_one_transcript_per_session_id() -> None:
    store = SessionStore.in_memory(clock=FakeClock())
    runtime, _, _ = make_runtime(store=store)
    first = await runtime.open(KEY)
    await runtime.before_model_call(first, prompt="hi")
    await runtime.after_turn(first, messages=[reply("hello")])
    second = await runtime.open(KEY)
    # the store keeps it (SessionStore.transcript_storage()): a reopen reads what the first one wrote
    assert isinstance(second.transcript, TranscriptManager) and second.transcript.path is None
    assert second.transcript.session_id == first.transcript.session_id
    assert second.transcript.entries() == first.transcript.entries() != []
    stored = await TranscriptManager.open_in(store.transcript_storage(), first.transcript.session_id)
    assert stored.entries() == first.transcript.entries()


async def test_compaction_events_carry_the_session_key_and_will_retry() -> None:
    hooks = HookRegistry()
    runtime, _, _ = make_runtime(compaction=_small(), hooks=hooks)
    session = await runtime.open(KEY)
    await _fill(runtime, session, 3)
    await runtime.before_model_call(session, prompt="go")
    with capture_events(hooks) as events:
        await runtime.on_model_error(session, "context_length_exceeded")
    start = events.of_type(CompactionStartEvent)[0]
    end = events.of_type(CompactionEndEvent)[0]
    assert start.session_key == end.session_key == KEY
    assert end.will_retry and end.reason == "overflow"


async def test_timeout_compacts_only_when_the_prompt_used_most_of_the_window() -> None:
    runtime, store, _ = make_runtime(
        model=ModelInfo(provider="openai", model_id="m", context_window=100_000), compaction=_small()
    )
    assert runtime.compaction_threshold == 80_000
    session = await runtime.open(KEY)
    await _fill(runtime, session, 2)
    await runtime.before_model_call(session, prompt="small")
    with pytest.raises(TimeoutError):  # ~2000 tokens: 2 % of the window, not worth compacting
        await runtime.on_model_error(session, TimeoutError("model call timed out"))
    await runtime.after_turn(session, messages=[reply("y", input_tokens=70_000, provider="openai")])
    await runtime.before_model_call(session, prompt="big")  # 70001 + 1 > 0.65 x 100000, < threshold
    outcome = await runtime.on_model_error(session, "Request timed out after 600s")
    assert outcome.action == "compacted" and outcome.reason == "timeout_near_full"
    assert outcome.compaction is not None and outcome.compaction.trigger == "timeout"
    assert (await store.require(KEY)).compaction_count == 1
    retry = await runtime.before_model_call(session)
    assert isinstance(retry.messages[0], CompactionSummaryMessage)
    with pytest.raises(TimeoutError):  # the retry is small now: a second timeout is not compacted
        await runtime.on_model_error(session, TimeoutError())


async def test_truncate_after_compaction_adopts_the_successor_transcript(tmp_path: Path) -> None:
    # OpenClaw §5.8: after the rotation the store entry points at the successor (sessionId, sessionFile);
    # later turns go there, the old file stays as it was, and reopening the key finds the successor.
    runtime, store, _ = make_runtime(compaction=_small(truncate_after_compaction=True), tmp_path=tmp_path)
    session = await runtime.open(KEY)
    await _fill(runtime, session, 3)
    old_path = session.transcript.path
    assert old_path is not None
    outcome = await runtime.compact(session)
    assert outcome.compacted and outcome.result is not None
    successor = outcome.result.successor
    assert successor is not None and successor.path != old_path
    entry = await store.require(KEY)
    assert entry.session_id == successor.session_id == session.session_id
    assert entry.session_file == str(successor.path)
    assert session.transcript.path == successor.path
    old_bytes = old_path.read_bytes()
    await runtime.before_model_call(session, prompt="after the rotation")
    await runtime.after_turn(session, messages=[reply("still here")])
    assert old_path.read_bytes() == old_bytes
    assert b"still here" in successor.path.read_bytes()
    again = await runtime.open(KEY)
    assert again.transcript.path == successor.path
    plan = await runtime.before_model_call(again, prompt="next")
    assert isinstance(plan.messages[0], CompactionSummaryMessage)
