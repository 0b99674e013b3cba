"""
Hook errors around a compaction (pi spec §15.6): ``session_before_compact`` may stop the run before
anything is written, so its errors propagate; ``session_compact``, ``compaction_start`` and
``compaction_end`` are notifications, so a raising handler is reported (logged with the hook name, passed
to ``on_error``, collected on ``CompactionResult.hook_errors``) and the compaction result is still returned.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.compaction._build import assistant, manager, result, user

from sessionkeeper.compaction import Compactor
from sessionkeeper.hooks import (
    CompactHookResult,
    CompactionEndEvent,
    CompactionHookOverride,
    CompactionStartEvent,
    HookError,
    HookEvent,
    HookRegistry,
    SessionBeforeCompactEvent,
    SessionCompactEvent,
    SessionStartEvent,
)
from sessionkeeper.transcript import CompactionEntry
from sessionkeeper.transcript._manager import TranscriptManager


pytestmark = pytest.mark.anyio


class HandlerBrokeError(Exception):
    pass


async def _session() -> TranscriptManager:
    transcript, _ = await manager(
        user("Read notes.txt please."),
        assistant("", ("c1", "read", {"path": "notes.txt"})),
        result("c1", "word " * 1500),
        assistant("Done reading notes.txt."),
        user("Now count the words."),
    )
    return transcript


def _compactions(transcript: TranscriptManager) -> list[CompactionEntry]:
    return [e for e in transcript.entries() if isinstance(e, CompactionEntry)]


def broken_session_compact(event: SessionCompactEvent) -> None:
    raise HandlerBrokeError("notify failed")


async def test_raising_session_compact_returns_the_result_and_reports_the_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    transcript = await _session()
    hooks = HookRegistry()
    later: list[str] = []
    hooks.on(SessionCompactEvent, broken_session_compact)
    hooks.on(SessionCompactEvent, lambda event: later.append(event.compaction_entry.id))
    with caplog.at_level(logging.WARNING, logger="sessionkeeper"):
        outcome = await Compactor(hooks=hooks).compact(transcript, keep_recent_tokens=1)
    assert outcome.status == "compacted" and outcome.entry is not None
    assert _compactions(transcript) == [outcome.entry]
    assert later == [outcome.entry.id]  # the handlers after the broken one still ran
    (error,) = outcome.hook_errors
    assert error.event == "session_compact"
    assert error.handler.endswith("broken_session_compact")
    assert isinstance(error.error, HandlerBrokeError)
    assert "session_compact" in caplog.text and "broken_session_compact" in caplog.text
    assert "notify failed" in caplog.text
    assert outcome.to_json()["hookErrors"] == [error.to_json()]


async def test_retrying_caller_does_not_compact_twice() -> None:
    transcript = await _session()
    hooks = HookRegistry()
    hooks.on(SessionCompactEvent, broken_session_compact)
    compactor = Compactor(hooks=hooks)
    first = await compactor.compact(transcript, keep_recent_tokens=1)
    again = await compactor.compact(transcript, keep_recent_tokens=1)
    assert first.compacted and again.status == "already_compacted"
    assert len(_compactions(transcript)) == 1


async def test_raising_session_compact_after_a_hook_supplied_summary() -> None:
    transcript = await _session()
    hooks = HookRegistry()

    def supply(event: SessionBeforeCompactEvent) -> CompactHookResult:
        first_kept = event.preparation.first_kept_entry_id  # type: ignore[attr-defined]
        override = CompactionHookOverride(
            summary="from the hook", first_kept_entry_id=first_kept, tokens_before=9
        )
        return CompactHookResult(compaction=override)

    hooks.on(SessionBeforeCompactEvent, supply)
    hooks.on(SessionCompactEvent, broken_session_compact)
    outcome = await Compactor(hooks=hooks).compact(transcript, keep_recent_tokens=1)
    assert outcome.provider == "hook" and outcome.entry is not None and outcome.entry.from_hook
    assert [e.event for e in outcome.hook_errors] == ["session_compact"]
    assert _compactions(transcript) == [outcome.entry]


async def test_raising_compaction_start_and_end_are_reported_too() -> None:
    transcript = await _session()
    hooks = HookRegistry()

    async def broken_start(event: CompactionStartEvent) -> None:
        raise HandlerBrokeError("start")

    def broken_end(event: CompactionEndEvent) -> None:
        raise HandlerBrokeError("end")

    hooks.on(CompactionStartEvent, broken_start)
    hooks.on(CompactionEndEvent, broken_end)
    outcome = await Compactor(hooks=hooks).compact(transcript, keep_recent_tokens=1)
    assert outcome.compacted
    assert [(e.event, str(e.error)) for e in outcome.hook_errors] == [
        ("compaction_start", "start"),
        ("compaction_end", "end"),
    ]


async def test_on_error_receives_notification_errors_and_they_are_still_collected() -> None:
    transcript = await _session()
    reported: list[tuple[str, str]] = []
    hooks = HookRegistry(on_error=lambda event, handler, err: reported.append((event.name, str(err))))
    hooks.on(SessionCompactEvent, broken_session_compact)
    outcome = await Compactor(hooks=hooks).compact(transcript, keep_recent_tokens=1)
    assert reported == [("session_compact", "notify failed")]
    assert [e.event for e in outcome.hook_errors] == ["session_compact"]


async def test_no_hook_errors_leave_the_result_unchanged() -> None:
    transcript = await _session()
    hooks = HookRegistry()
    ends: list[Any] = []
    hooks.on(CompactionEndEvent, lambda event: ends.append(event.result))
    outcome = await Compactor(hooks=hooks).compact(transcript, keep_recent_tokens=1)
    assert outcome.hook_errors == ()
    assert ends == [outcome]
    assert "hookErrors" not in outcome.to_json()


async def test_raising_session_before_compact_propagates_and_writes_nothing() -> None:
    transcript = await _session()
    before = list(transcript.entries())
    hooks = HookRegistry()
    ends: list[CompactionEndEvent] = []

    def broken_before(event: SessionBeforeCompactEvent) -> None:
        raise HandlerBrokeError("before failed")

    hooks.on(SessionBeforeCompactEvent, broken_before)
    hooks.on(CompactionEndEvent, ends.append)
    with pytest.raises(HandlerBrokeError, match="before failed"):
        await Compactor(hooks=hooks).compact(transcript, keep_recent_tokens=1)
    assert list(transcript.entries()) == before
    assert _compactions(transcript) == []
    assert len(ends) == 1 and ends[0].error_message == "before failed"


# --------------------------------------------------------------------------- HookRegistry.notify


async def test_notify_runs_every_handler_in_order_and_returns_the_errors() -> None:
    reg = HookRegistry()
    ran: list[str] = []

    def first(event: SessionStartEvent) -> None:
        ran.append("first")
        raise HandlerBrokeError("one")

    async def second(event: SessionStartEvent) -> None:
        ran.append("second")
        raise ValueError("two")

    reg.on(SessionStartEvent, first)
    reg.on(HookEvent, second)
    reg.on(SessionStartEvent, lambda event: ran.append("third"))
    errors = await reg.notify(SessionStartEvent(reason="new"))
    assert ran == ["first", "second", "third"]
    assert [(type(e.error), e.event) for e in errors] == [
        (HandlerBrokeError, "session_start"),
        (ValueError, "session_start"),
    ]
    assert all(isinstance(e, HookError) for e in errors)
    assert errors[1].to_json() == {
        "event": "session_start",
        "handler": errors[1].handler,
        "error": "ValueError: two",
    }


async def test_notify_reports_a_wrong_result_type_as_an_error() -> None:
    reg = HookRegistry()
    reg.on(SessionStartEvent, lambda event: "oops")
    (error,) = await reg.notify(SessionStartEvent(reason="new"))
    assert isinstance(error.error, TypeError) and "session_start" in str(error.error)


async def test_notify_refuses_events_whose_handlers_decide() -> None:
    reg = HookRegistry()
    with pytest.raises(TypeError, match="emit"):
        await reg.notify(SessionBeforeCompactEvent(preparation=None, branch_entries=[]))  # type: ignore[arg-type]


async def test_notify_lets_cancellation_through() -> None:
    reg = HookRegistry()

    async def waits(event: SessionStartEvent) -> None:
        await anyio.sleep(10)

    reg.on(SessionStartEvent, waits)
    with anyio.move_on_after(0.01) as scope:
        await reg.notify(SessionStartEvent(reason="new"))
    assert scope.cancelled_caught


@settings(max_examples=60, deadline=None)
@given(plan=st.lists(st.sampled_from(["ok", "raise", "async-raise", "wrong-result"]), max_size=8))
def test_notify_runs_all_handlers_and_reports_exactly_the_failures(plan: list[str]) -> None:
    reg = HookRegistry()
    ran: list[int] = []

    def make(n: int, kind: str) -> Any:
        if kind.startswith("async"):

            async def handler(event: SessionStartEvent) -> None:
                ran.append(n)
                raise HandlerBrokeError(str(n))

            return handler

        def sync_handler(event: SessionStartEvent) -> Any:
            ran.append(n)
            if kind == "raise":
                raise HandlerBrokeError(str(n))
            return "oops" if kind == "wrong-result" else None

        return sync_handler

    for n, kind in enumerate(plan):
        reg.on(SessionStartEvent, make(n, kind))
    errors = anyio.run(reg.notify, SessionStartEvent(reason="new"))
    assert ran == list(range(len(plan)))
    failing = [n for n, kind in enumerate(plan) if kind != "ok"]
    assert [e.event for e in errors] == ["session_start"] * len(failing)
    got = [(type(e.error), str(e.error) if isinstance(e.error, HandlerBrokeError) else None) for e in errors]
    expected = [
        (TypeError, None) if plan[n] == "wrong-result" else (HandlerBrokeError, str(n)) for n in failing
    ]
    assert got == expected
