"""SessionRuntime and cache-TTL pruning: one default (issue 11), stable across turns and reopens (D11)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests import _pi_oracle
from tests._pi_oracle import PiOracle
from tests.runtime._runtime_helpers import make_runtime, reply, tool_call, tool_result

from sessionkeeper._config import load_config
from sessionkeeper.pruning import PRUNE_RECORD_CUSTOM_TYPE, PruningSettings, SoftTrimSettings
from sessionkeeper.runtime import ModelCallPlan, ModelInfo, RuntimeSettings, SessionRuntime
from sessionkeeper.runtime._session_runtime import RuntimeSession
from sessionkeeper.transcript import (
    CustomEntry,
    CustomMessage,
    TextContent,
    ToolResultMessage,
    TranscriptManager,
    UnknownMessage,
    load_transcript,
    message_to_builtins,
)


pytestmark = pytest.mark.anyio
pi_oracle = _pi_oracle.pi_oracle

KEY = "agent:main:main"
MODEL = ModelInfo(
    provider="anthropic", model_id="claude-sonnet-4-5", api="anthropic-messages", context_window=4000
)


# ------------------------------------------------------------------------------ one default (issue 11)


def test_runtime_settings_have_one_pruning_default_whichever_way_they_are_built() -> None:
    assert RuntimeSettings().pruning == RuntimeSettings.from_config(load_config()).pruning
    assert RuntimeSettings().pruning.mode == "off"  # OpenClaw's default ("Default (disabled)")


@pytest.mark.parametrize("build", ["direct", "config"])
async def test_default_runtime_does_not_prune_by_either_construction(build: str) -> None:
    settings = RuntimeSettings() if build == "direct" else RuntimeSettings.from_config(load_config())
    runtime, _, clock = make_runtime(model=MODEL, settings=settings)
    session = await runtime.open(KEY)
    await runtime.before_model_call(session, prompt="read the log")
    await runtime.after_turn(
        session, messages=[tool_call("c1"), tool_result("c1", "L" * 12000), reply("long", input_tokens=10)]
    )
    for n in range(3):
        await runtime.before_model_call(session, prompt=f"turn {n}")
        await runtime.after_turn(session, messages=[reply("ok", input_tokens=10)])
    clock.advance(3600)
    plan = await runtime.before_model_call(session, prompt="summarise it")
    assert plan.pruning is not None and plan.pruning.skipped == "mode-off" and not plan.pruning.changed


# ------------------------------------------------------------------------- D11: stable pruning


def _pruning_settings(**overrides: object) -> RuntimeSettings:
    sizes = overrides.pop("soft_trim", SoftTrimSettings(max_chars=400, head_chars=100, tail_chars=100))
    return RuntimeSettings(
        pruning=PruningSettings(
            mode="cache-ttl",
            keep_last_assistants=1,
            min_prunable_tool_chars=100,
            soft_trim=sizes,  # type: ignore[arg-type]
            **overrides,  # type: ignore[arg-type]
        )
    )


def _sent(plan: ModelCallPlan, call_id: str) -> bytes:
    """The wire bytes of the tool result ``call_id`` in what the plan sends."""
    for message in plan.messages:
        if isinstance(message, ToolResultMessage | UnknownMessage):
            raw = message_to_builtins(message)
            if raw.get("toolCallId") == call_id:
                return json.dumps(raw, sort_keys=True).encode()
    raise AssertionError(f"{call_id} is not in the context")


async def _two_reads(runtime: SessionRuntime, session: RuntimeSession) -> None:
    await runtime.before_model_call(session, prompt="read both logs")
    await runtime.after_turn(
        session,
        messages=[
            tool_call("c1"),
            tool_result("c1", "A" * 3000),
            tool_call("c2"),
            tool_result("c2", "B" * 3000),
            reply("both are long", input_tokens=10),
        ],
    )


async def test_a_soft_trim_is_sent_the_same_way_on_every_later_request_and_after_a_reopen(
    tmp_path: Path,
) -> None:
    settings = _pruning_settings()
    runtime, store, clock = make_runtime(model=MODEL, settings=settings, tmp_path=tmp_path)
    session = await runtime.open(KEY)
    await _two_reads(runtime, session)
    clock.advance(6 * 60)  # the TTL (5 min) expired: this request prunes
    first = await runtime.before_model_call(session, prompt="summarise them")
    assert first.pruning is not None and set(first.pruning.soft_trimmed) == {"c1", "c2"}
    trimmed = _sent(first, "c1")
    assert b"[Tool result trimmed" in trimmed
    await runtime.after_turn(session, messages=[reply("summary", input_tokens=10)])  # new TTL marker
    for n in range(3):  # inside the TTL: OpenClaw would send the full results again here
        clock.advance(30)
        plan = await runtime.before_model_call(session, prompt=f"follow-up {n}")
        assert plan.pruning is not None and plan.pruning.skipped == "ttl-not-expired"
        assert _sent(plan, "c1") == trimmed
        assert set(plan.pruning.reapplied) == {"c1", "c2"} and not plan.pruning.soft_trimmed
        await runtime.after_turn(session, messages=[reply("ok", input_tokens=10)])

    # a restart: a new runtime (with other soft-trim sizes) over the same store and transcript
    changed = _pruning_settings(soft_trim=SoftTrimSettings(max_chars=300, head_chars=20, tail_chars=20))
    reopened_runtime, _, _ = make_runtime(model=MODEL, settings=changed, store=store, clock=clock)
    reopened = await reopened_runtime.open(KEY)
    assert reopened.session_id == session.session_id
    plan = await reopened_runtime.before_model_call(reopened, prompt="after the restart")
    assert _sent(plan, "c1") == trimmed
    # the transcript keeps the full results, and the record is a custom entry out of the context
    loaded = load_transcript(reopened.transcript.path)
    records = [e for e in loaded.entries() if isinstance(e, CustomEntry)]
    assert [r.custom_type for r in records].count(PRUNE_RECORD_CUSTOM_TYPE) == 1
    context = loaded.build_context().messages
    assert all(not isinstance(m, CustomMessage) for m in context)
    full = [m for m in context if isinstance(m, ToolResultMessage) and m.tool_call_id == "c1"]
    assert full[0].content == [TextContent(text="A" * 3000)]


async def test_a_hard_clear_stays_cleared_and_a_trim_can_only_become_a_clear(tmp_path: Path) -> None:
    # window 4000 tokens = 16000 chars: soft trim from 1600 chars on, hard clear from 800
    settings = _pruning_settings(soft_trim_ratio=0.1, hard_clear_ratio=0.05)
    runtime, _, clock = make_runtime(model=MODEL, settings=settings, tmp_path=tmp_path)
    session = await runtime.open(KEY)
    await _two_reads(runtime, session)
    clock.advance(6 * 60)
    first = await runtime.before_model_call(session, prompt="summarise them")
    assert first.pruning is not None and set(first.pruning.soft_trimmed) == {"c1", "c2"}
    assert not first.pruning.hard_cleared
    await runtime.after_turn(
        session,
        messages=[
            tool_call("c3"),
            tool_result("c3", "C" * 3000),
            tool_call("c4"),
            tool_result("c4", "D" * 3000),
            reply("two more", input_tokens=10),
        ],
    )
    clock.advance(6 * 60)
    second = await runtime.before_model_call(session, prompt="and all four?")
    assert second.pruning is not None and "c1" in second.pruning.hard_cleared
    sent = {call_id: _sent(second, call_id) for call_id in ("c1", "c2", "c3", "c4")}
    assert b"[Old tool result content cleared]" in sent["c1"]
    await runtime.after_turn(session, messages=[reply("all four", input_tokens=10)])
    for n in range(4):
        clock.advance(6 * 60 if n % 2 else 30)  # expired and not expired in turn
        plan = await runtime.before_model_call(session, prompt=f"follow-up {n}")
        assert {call_id: _sent(plan, call_id) for call_id in sent} == sent
        await runtime.after_turn(session, messages=[reply("ok", input_tokens=10)])


async def test_no_marker_for_the_current_model_counts_as_an_expired_ttl(tmp_path: Path) -> None:
    settings = _pruning_settings()
    runtime, store, clock = make_runtime(model=MODEL, settings=settings, tmp_path=tmp_path)
    session = await runtime.open(KEY)
    await _two_reads(runtime, session)  # a cache-ttl marker for claude-sonnet-4-5
    clock.advance(10)
    other = ModelInfo(
        provider="anthropic", model_id="claude-opus-4-1", api="anthropic-messages", context_window=4000
    )
    switched, _, _ = make_runtime(model=other, settings=settings, store=store, clock=clock)
    plan = await switched.before_model_call(await switched.open(KEY), prompt="and now?")
    assert plan.pruning is not None and plan.pruning.skipped is None
    assert set(plan.pruning.soft_trimmed) == {"c1", "c2"}
    # the same model 10 s after its marker: inside the TTL, nothing new is pruned
    same = await runtime.before_model_call(session)
    assert same.pruning is not None and same.pruning.skipped == "ttl-not-expired"


@pytest.mark.oracle
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_pi_loads_a_transcript_with_prune_records_unchanged(
    pi_oracle: PiOracle, tmp_path: Path
) -> None:
    """The record is a pi ``custom`` entry: pi 0.73.1 rebuilds the same context at every leaf."""
    runtime, _, clock = make_runtime(model=MODEL, settings=_pruning_settings(), tmp_path=tmp_path)
    session = await runtime.open(KEY)
    await _two_reads(runtime, session)
    clock.advance(6 * 60)
    plan = await runtime.before_model_call(session, prompt="summarise them")
    assert plan.pruning is not None and plan.pruning.soft_trimmed
    await runtime.after_turn(session, messages=[reply("summary", input_tokens=10)])
    path = session.transcript.path
    assert path is not None
    manager = await TranscriptManager.open(path)
    assert any(
        isinstance(e, CustomEntry) and e.custom_type == PRUNE_RECORD_CUSTOM_TYPE for e in manager.entries()
    )
    ours = {e.id: manager.build_session_context(e.id).to_json() for e in manager.entries()}
    assert pi_oracle.context(path, all_leaves=True) == ours
