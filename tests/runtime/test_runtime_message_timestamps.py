"""
Messages given without a timestamp (README quickstart) are dated, and their usage counts; replies are dated by
the runtime clock, the one that dates compactions (pi's staleness rule compares the two).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests._helpers import assistant
from tests.runtime._runtime_helpers import make_runtime

from sessionkeeper import AssistantMessage, ModelInfo, SessionRuntime, SessionStore
from sessionkeeper.runtime import RuntimeSession
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import MessageEntry, TranscriptManager, Usage, estimate_context_usage


KEY = "agent:main:main"


@pytest.mark.anyio
async def test_a_reply_without_timestamp_is_dated_and_its_usage_counts_after_a_compaction(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    async with SessionStore.open(tmp_path / "sessions", clock=clock) as store:
        runtime = SessionRuntime(
            store,
            model=ModelInfo(
                provider="anthropic",
                model_id="claude-sonnet-4-5",
                api="anthropic-messages",
                context_window=200_000,
            ),
            clock=clock,
            host_supports_flush=False,
        )
        session = await runtime.open("agent:main:main", body="hi")
        for n in range(4):
            await runtime.before_model_call(session, prompt=f"question {n} " + "words " * 200)
            # a reply as in the README quickstart: no timestamp, so the record's default 0
            await runtime.after_turn(session, messages=[assistant(f"answer {n} " + "more " * 200)])
            clock.advance(60)
        written = [e for e in session.transcript.entries() if isinstance(e, MessageEntry)]
        assert all(e.message.timestamp > 0 for e in written)  # was 0 for every reply
        compacted = await runtime.compact(session)
        assert compacted.status == "compacted"
        clock.advance(60)
        await runtime.before_model_call(session, prompt="next")
        outcome = await runtime.after_turn(
            session, messages=[assistant("ok", usage=Usage(input=150_000, output=10))]
        )
        # The provider's usage is the context size; a reply dated 0 read as older than the compaction, so
        # its usage was skipped and the context estimated at a few tokens.
        assert outcome.context_tokens >= 150_010
        reopened = await TranscriptManager.open(session.transcript.path)
        last = [e for e in reopened.entries() if isinstance(e, MessageEntry)][-1]
        assert isinstance(last.message, AssistantMessage) and last.message.timestamp == clock.now_ms()


@pytest.mark.anyio
async def test_a_user_message_prompt_left_at_timestamp_zero_is_dated(tmp_path: Path) -> None:
    # after_turn dates messages left at timestamp 0 (pi stamps every message); a UserMessage prompt
    # given to before_model_call was written dated 1970.
    from sessionkeeper.transcript import MessageEntry, TextContent, UserMessage

    runtime, _, clock = make_runtime(tmp_path=tmp_path)
    session = await runtime.open(KEY)
    undated = UserMessage(content=[TextContent(text="hi")], timestamp=0)
    plan = await runtime.before_model_call(session, prompt=undated)
    entry = plan.prompt_entry
    assert isinstance(entry, MessageEntry) and isinstance(entry.message, UserMessage)
    assert entry.message.timestamp == clock.now_ms() != 0
    dated = await runtime.before_model_call(
        session, prompt=UserMessage(content=[TextContent(text="kept")], timestamp=1234)
    )
    assert isinstance(dated.prompt_entry, MessageEntry)
    assert dated.prompt_entry.message.timestamp == 1234


DAYS_30_MS = 30 * 86_400_000


async def _compacted_session_with_replies_dated(
    tmp_path: Path, *, skew_ms: int
) -> tuple[SessionRuntime, FakeClock, RuntimeSession, int, int]:
    """Four turns whose replies a model client dated ``skew_ms`` off the runtime clock, then a compaction."""
    runtime, _, clock = make_runtime(tmp_path=tmp_path, host_supports_flush=False)
    session = await runtime.open(KEY, body="hi")
    for n in range(4):
        await runtime.before_model_call(session, prompt=f"question {n} " + "words " * 200)
        wall = clock.now_ms() + skew_ms  # the SDK client's clock, not the runtime's
        usage = Usage(input=1_000 * (n + 1), output=10)
        await runtime.after_turn(
            session, messages=[assistant(f"answer {n} " + "more " * 200, usage=usage, ts=wall)]
        )
        clock.advance(60)
    compacted = await runtime.compact(session, keep_recent_tokens=400)  # keeps the last turn
    assert compacted.status == "compacted"
    return runtime, clock, session, compacted.tokens_before, compacted.tokens_after


@pytest.mark.anyio
async def test_replies_dated_by_a_clock_ahead_of_the_runtime_clock_do_not_hide_a_compaction(
    tmp_path: Path,
) -> None:
    # The model client dates replies by the wall clock, the runtime runs on a FakeClock behind it: the
    # compaction (dated by the runtime clock) looked older than every kept reply, so the last reply's
    # pre-compaction usage counted as the context after it, and tokens_after == tokens_before.
    _, _, session, before, after = await _compacted_session_with_replies_dated(tmp_path, skew_ms=DAYS_30_MS)
    assert after < before
    context = session.transcript.build_session_context().messages
    assert estimate_context_usage(context).source == "estimate"  # no stale usage anchors the count


@pytest.mark.anyio
async def test_a_reply_dated_by_a_clock_behind_the_runtime_clock_counts_after_a_compaction(
    tmp_path: Path,
) -> None:
    # The reverse skew: a reply after the compaction, dated before it by the client's clock, had its
    # fresh usage skipped as stale.
    runtime, clock, session, _, _ = await _compacted_session_with_replies_dated(tmp_path, skew_ms=-DAYS_30_MS)
    clock.advance(60)
    await runtime.before_model_call(session, prompt="next")
    late = assistant("ok", usage=Usage(input=150_000, output=10), ts=clock.now_ms() - DAYS_30_MS)
    outcome = await runtime.after_turn(session, messages=[late])
    assert outcome.context_tokens >= 150_010
    reply_entry = outcome.entries[-1]
    assert isinstance(reply_entry, MessageEntry) and reply_entry.message.timestamp == clock.now_ms()
