"""HookRegistry semantics (pi spec §15.6): order, unsubscribe, sync/async, cancel, chaining, errors."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests._helpers import user

from sessionkeeper.hooks import (
    CompactHookResult,
    CompactionEndEvent,
    CompactionHookOverride,
    CompactionStartEvent,
    ContextEvent,
    ContextHookResult,
    ForkHookResult,
    HookEvent,
    HookRegistry,
    MessageEndEvent,
    MessageEndHookResult,
    SessionBeforeCompactEvent,
    SessionBeforeForkEvent,
    SessionBeforeTreeEvent,
    SessionCompactEvent,
    SessionStartEvent,
    TreeHookResult,
    TreePreparation,
)
from sessionkeeper.records._entries import CompactionEntry
from sessionkeeper.records._messages import AssistantMessage, TextContent, UserMessage


pytestmark = pytest.mark.anyio


def _before_compact() -> SessionBeforeCompactEvent:
    return SessionBeforeCompactEvent(preparation=object(), branch_entries=[])


async def test_handlers_run_in_registration_order_sync_and_async() -> None:
    reg = HookRegistry()
    calls: list[str] = []

    def first(event: SessionStartEvent) -> None:
        calls.append(f"sync:{event.reason}")

    async def second(event: SessionStartEvent) -> None:
        await anyio.lowlevel.checkpoint()
        calls.append(f"async:{event.reason}")

    def third(event: SessionStartEvent) -> None:
        calls.append("third")

    reg.on(SessionStartEvent, first)
    reg.on(SessionStartEvent, second)
    reg.on(SessionStartEvent, third)
    assert await reg.emit(SessionStartEvent(reason="new")) == []
    assert calls == ["sync:new", "async:new", "third"]


async def test_async_handlers_are_awaited_one_after_another() -> None:
    reg = HookRegistry()
    log: list[str] = []

    async def slow(event: SessionStartEvent) -> None:
        log.append("slow-start")
        await anyio.sleep(0.01)
        log.append("slow-end")

    async def fast(event: SessionStartEvent) -> None:
        log.append("fast")

    reg.on(SessionStartEvent, slow)
    reg.on(SessionStartEvent, fast)
    await reg.emit(SessionStartEvent(reason="startup"))
    assert log == ["slow-start", "slow-end", "fast"]


async def test_unsubscribe_removes_only_that_handler_and_is_idempotent() -> None:
    reg = HookRegistry()
    calls: list[int] = []
    off1 = reg.on(SessionStartEvent, lambda e: calls.append(1))
    reg.on(SessionStartEvent, lambda e: calls.append(2))
    off1()
    off1()
    await reg.emit(SessionStartEvent(reason="new"))
    assert calls == [2]
    assert reg.has_handlers(SessionStartEvent)


async def test_handlers_only_receive_their_event_type() -> None:
    reg = HookRegistry()
    seen: list[str] = []
    reg.on(SessionStartEvent, lambda e: seen.append("start"))
    reg.on(CompactionStartEvent, lambda e: seen.append("compaction"))
    await reg.emit(CompactionStartEvent(reason="threshold"))
    assert seen == ["compaction"]
    assert not reg.has_handlers(SessionCompactEvent)


async def test_base_class_handler_receives_every_event_in_single_order() -> None:
    reg = HookRegistry()
    seen: list[str] = []
    reg.on(SessionStartEvent, lambda e: seen.append("specific-1"))
    reg.on(HookEvent, lambda e: seen.append(f"all:{e.name}"))
    reg.on(SessionStartEvent, lambda e: seen.append("specific-2"))
    await reg.emit(SessionStartEvent(reason="new"))
    await reg.emit(CompactionEndEvent(reason="manual"))
    assert seen == ["specific-1", "all:session_start", "specific-2", "all:compaction_end"]


async def test_cancel_stops_later_handlers_and_wins() -> None:
    reg = HookRegistry()
    ran: list[str] = []
    override = CompactionHookOverride(summary="s", first_kept_entry_id="abcd1234", tokens_before=10)

    def supply(event: SessionBeforeCompactEvent) -> CompactionHookOverride:
        ran.append("supply")
        return override

    def cancel(event: SessionBeforeCompactEvent) -> CompactHookResult:
        ran.append("cancel")
        return CompactHookResult(cancel=True, reason="not now")

    def later(event: SessionBeforeCompactEvent) -> None:
        ran.append("later")

    reg.on(SessionBeforeCompactEvent, supply)
    reg.on(SessionBeforeCompactEvent, cancel)
    reg.on(SessionBeforeCompactEvent, later)
    results = await reg.emit(_before_compact())
    assert ran == ["supply", "cancel"]
    assert results == [override, CompactHookResult(cancel=True, reason="not now")]
    last = await reg.emit_last(_before_compact())
    assert isinstance(last, CompactHookResult)
    assert last.cancel


async def test_last_non_none_result_wins_without_cancel() -> None:
    reg = HookRegistry()
    a = CompactionHookOverride(summary="a", first_kept_entry_id="x", tokens_before=1)
    b = CompactHookResult(
        compaction=CompactionHookOverride(summary="b", first_kept_entry_id="y", tokens_before=2)
    )
    reg.on(SessionBeforeCompactEvent, lambda e: a)
    reg.on(SessionBeforeCompactEvent, lambda e: b)
    reg.on(SessionBeforeCompactEvent, lambda e: None)
    assert await reg.emit_last(_before_compact()) == b
    assert await HookRegistry().emit_last(_before_compact()) is None


async def test_fork_and_tree_cancel() -> None:
    reg = HookRegistry()
    reg.on(SessionBeforeForkEvent, lambda e: ForkHookResult(cancel=e.entry_id == "deadbeef"))
    assert (await reg.emit_last(SessionBeforeForkEvent(entry_id="deadbeef"))) == ForkHookResult(cancel=True)
    assert (await reg.emit_last(SessionBeforeForkEvent(entry_id="00000000"))) == ForkHookResult()
    tree = HookRegistry()
    tree.on(SessionBeforeTreeEvent, lambda e: TreeHookResult(label=e.preparation.target_id))
    prep = TreePreparation(target_id="t1", old_leaf_id="l1", common_ancestor_id=None, entries_to_summarize=[])
    result = await tree.emit_last(SessionBeforeTreeEvent(preparation=prep))
    assert result is not None
    assert result.label == "t1"


async def test_context_event_is_chained() -> None:
    reg = HookRegistry()
    seen: list[int] = []

    def add(event: ContextEvent) -> ContextHookResult:
        seen.append(len(event.messages))
        return ContextHookResult(messages=[*event.messages, user("added", ts=0)])

    async def observe(event: ContextEvent) -> None:
        seen.append(len(event.messages))

    reg.on(ContextEvent, add)
    reg.on(ContextEvent, observe)
    reg.on(ContextEvent, add)
    final = await reg.emit_last(ContextEvent(messages=[user("a", ts=0)]))
    assert seen == [1, 2, 2]
    assert final is not None
    assert [m.content for m in final.messages if isinstance(m, UserMessage)] == ["a", "added", "added"]


async def test_message_end_replacement_must_keep_role() -> None:
    reg = HookRegistry()
    original = user("secret", ts=0)
    same_role = user("[redacted]", ts=0)
    other_role = AssistantMessage(content=[TextContent(text="x")], api="a", provider="p", model="m")
    seen: list[Any] = []
    reg.on(MessageEndEvent, lambda e: MessageEndHookResult(message=same_role))
    reg.on(MessageEndEvent, lambda e: seen.append(e.message))
    event = MessageEndEvent(message=original)
    last = await reg.emit_last(event)
    assert seen == [same_role]
    assert event.apply(last) == same_role
    assert event.apply(MessageEndHookResult(message=other_role)) == original
    assert event.apply(None) == original


async def test_handler_error_propagates_unchanged_by_default() -> None:
    reg = HookRegistry()
    ran: list[str] = []

    class BoomError(Exception):
        pass

    def bad(event: SessionStartEvent) -> None:
        raise BoomError("x")

    reg.on(SessionStartEvent, bad)
    reg.on(SessionStartEvent, lambda e: ran.append("after"))
    with pytest.raises(BoomError):
        await reg.emit(SessionStartEvent(reason="new"))
    assert ran == []


async def test_on_error_reports_and_continues_like_pi() -> None:
    errors: list[tuple[str, str]] = []
    reg = HookRegistry(on_error=lambda event, handler, err: errors.append((event.name, str(err))))

    async def bad(event: SessionBeforeCompactEvent) -> None:
        raise RuntimeError("handler broke")

    good = CompactHookResult(cancel=True)
    reg.on(SessionBeforeCompactEvent, bad)
    reg.on(SessionBeforeCompactEvent, lambda e: good)
    assert await reg.emit(_before_compact()) == [good]
    assert errors == [("session_before_compact", "handler broke")]


async def test_wrong_result_type_is_a_type_error() -> None:
    reg = HookRegistry()
    reg.on(SessionCompactEvent, lambda e: "oops")
    entry = CompactionEntry(
        id="aaaa0000", parent_id=None, timestamp="2026-01-01T00:00:00.000Z", summary="s",
        first_kept_entry_id="bbbb0000", tokens_before=1,
    )  # fmt: skip
    with pytest.raises(TypeError, match="session_compact"):
        await reg.emit(SessionCompactEvent(compaction_entry=entry))
    reg2 = HookRegistry()
    reg2.on(SessionBeforeForkEvent, lambda e: CompactHookResult(cancel=True))
    with pytest.raises(TypeError, match="ForkHookResult"):
        await reg2.emit(SessionBeforeForkEvent(entry_id="x"))


async def test_cancellation_is_never_reported_as_handler_error() -> None:
    errors: list[BaseException] = []
    reg = HookRegistry(on_error=lambda event, handler, err: errors.append(err))

    async def waits(event: SessionStartEvent) -> None:
        await anyio.sleep(10)

    reg.on(SessionStartEvent, waits)
    with anyio.move_on_after(0.01) as scope:
        await reg.emit(SessionStartEvent(reason="new"))
    assert scope.cancelled_caught
    assert errors == []


async def test_observer_sees_event_even_when_cancelled_first() -> None:
    reg = HookRegistry()
    seen: list[str] = []
    reg.on(SessionBeforeCompactEvent, lambda e: CompactHookResult(cancel=True))
    off = reg.observe(HookEvent, lambda e: seen.append(e.name))
    await reg.emit(_before_compact())
    off()
    await reg.emit(_before_compact())
    assert seen == ["session_before_compact"]
    assert not reg.has_handlers(SessionStartEvent)


async def test_handlers_registered_during_emit_run_next_time() -> None:
    reg = HookRegistry()
    calls: list[str] = []

    def adder(event: SessionStartEvent) -> None:
        calls.append("adder")
        reg.on(SessionStartEvent, lambda e: calls.append("new"))

    off = reg.on(SessionStartEvent, adder)
    await reg.emit(SessionStartEvent(reason="new"))
    off()
    await reg.emit(SessionStartEvent(reason="new"))
    assert calls == ["adder", "new"]


def test_on_rejects_non_event_types_and_non_callables() -> None:
    reg = HookRegistry()
    with pytest.raises(TypeError):
        reg.on(int, lambda e: None)  # type: ignore[type-var]
    with pytest.raises(TypeError):
        reg.on(SessionStartEvent, "nope")  # type: ignore[arg-type]
    assert reg.handlers() == {}
    reg.on(SessionStartEvent, lambda e: None)
    assert reg.handlers() == {"SessionStartEvent": 1}
    assert "SessionStartEvent" in repr(reg)


def test_event_names_match_pi() -> None:
    assert SessionBeforeCompactEvent.name == "session_before_compact"
    assert SessionCompactEvent.name == "session_compact"
    assert SessionBeforeTreeEvent.name == "session_before_tree"
    assert ContextEvent.name == "context"
    assert MessageEndEvent.name == "message_end"
    assert CompactionStartEvent.name == "compaction_start"


@given(st.lists(st.sampled_from(["none", "keep", "cancel"]), max_size=8))
def test_emit_results_property(plan: list[str]) -> None:
    """Results = non-None returns in order, truncated right after the first cancel."""

    async def run() -> tuple[list[object], int]:
        reg = HookRegistry()
        ran = 0
        for index, kind in enumerate(plan):

            def handler(event: SessionBeforeForkEvent, kind: str = kind, index: int = index) -> Any:
                nonlocal ran
                ran += 1
                if kind == "none":
                    return None
                return ForkHookResult(cancel=kind == "cancel", skip_conversation_restore=index % 2 == 0)

            reg.on(SessionBeforeForkEvent, handler)
        return list(await reg.emit(SessionBeforeForkEvent(entry_id="e"))), ran

    results, ran = anyio.run(run)
    stop = plan.index("cancel") + 1 if "cancel" in plan else len(plan)
    expected = [
        ForkHookResult(cancel=k == "cancel", skip_conversation_restore=i % 2 == 0)
        for i, k in enumerate(plan[:stop])
        if k != "none"
    ]
    assert results == expected
    assert ran == stop
