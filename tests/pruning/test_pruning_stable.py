"""Deviation D11: recorded prune decisions are re-applied byte for byte (PruneLedger, Pruner(ledger=))."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.pruning._builders import assistant, call, image, result, user

from sessionkeeper.pruning import (
    PRUNE_RECORD_CUSTOM_TYPE,
    PruneLedger,
    Pruner,
    PruningSettings,
    SoftTrimSettings,
    apply_prune_ledger,
    prune_record_data,
    read_prune_ledger,
)
from sessionkeeper.transcript import (
    AgentMessage,
    CustomEntry,
    TextContent,
    ToolResultMessage,
    UnknownEntry,
    message_to_builtins,
)


NOW = 1_800_000_000_000
TTL = 300_000
SIZES = SoftTrimSettings(max_chars=400, head_chars=100, tail_chars=100)
ON = PruningSettings(mode="cache-ttl", keep_last_assistants=1, min_prunable_tool_chars=0, soft_trim=SIZES)


def _record(entry_id: str, **data: Any) -> CustomEntry:
    return CustomEntry(
        custom_type=PRUNE_RECORD_CUSTOM_TYPE,
        data=data,
        id=entry_id,
        parent_id=None,
        timestamp="2027-01-15T08:00:00Z",
    )


def _data(soft: list[str], hard: list[str], *, ts: int = NOW, placeholder: str = "[gone]") -> dict[str, Any]:
    return prune_record_data(
        timestamp_ms=ts,
        provider="anthropic",
        model_id="claude-sonnet-4-5",
        soft_trimmed=soft,
        hard_cleared=hard,
        soft_trim=SIZES,
        placeholder=placeholder,
    )


def test_the_ledger_reads_records_in_file_order_and_ignores_what_it_cannot_read() -> None:
    entries = [
        _record("a1", **_data(["c1", "c2"], [], ts=NOW - 10)),
        _record("a2", **_data(["c1"], ["c2"], ts=NOW)),  # c2: soft -> hard; c1 stays soft
        _record("a3", **_data(["c2"], [], ts=NOW - 5)),  # a hard clear is never undone
        _record("a4", softTrimmed="c9", softTrim={"maxChars": -1}, hardCleared=[7], placeholder=""),
        CustomEntry(custom_type="other", data=_data(["c5"], []), id="a5", parent_id=None, timestamp=""),
        UnknownEntry(
            {"type": "custom", "customType": PRUNE_RECORD_CUSTOM_TYPE, "id": "a6", "data": _data([], ["c3"])}
        ),
    ]
    ledger = read_prune_ledger(entries)
    assert {k: v.kind for k, v in ledger.decisions.items()} == {"c1": "soft", "c2": "hard", "c3": "hard"}
    assert ledger.decisions["c2"].placeholder == "[gone]" and ledger.decisions["c1"].soft_trim == SIZES
    assert ledger.touch_for("Anthropic", "CLAUDE-SONNET-4-5") == NOW
    assert ledger.touch_for("anthropic", "claude-opus-4-1") is None
    assert not PruneLedger() and bool(ledger)


def _context() -> list[AgentMessage]:
    return [
        user("go"),
        assistant(call("c1"), stop="toolUse"),
        result("c1", "A" * 2000),
        assistant(call("c2"), stop="toolUse"),
        result("c2", "B" * 50, image(10)),
        assistant("done"),
    ]


def test_recorded_decisions_are_applied_whatever_the_ttl_gate_says() -> None:
    ledger = read_prune_ledger([_record("a1", **_data(["c1", "c2"], []))])
    messages = _context()
    for touch in (NOW - 10, NOW - 10 * TTL, None):
        r = Pruner(settings=ON).prune(
            messages, context_window_tokens=100_000, last_cache_touch_at=touch, now_ms=NOW, ledger=ledger
        )
        assert r.reapplied == ("c1", "c2") and r.changed and not r.soft_trimmed
        assert r.messages[2] == apply_prune_ledger(messages, ledger).messages[2]
        text = r.messages[2].content[0].text  # type: ignore[union-attr]
        assert text.startswith("A" * 100 + "\n...\n") and "of 2000 chars" in text
        assert r.messages[4].content == [  # type: ignore[union-attr]
            TextContent(text="B" * 50 + "\n[image removed during context pruning]")
        ]
        assert r.chars_after < r.chars_before
    off = Pruner(settings=PruningSettings()).prune(
        messages, context_window_tokens=100_000, last_cache_touch_at=None, now_ms=NOW, ledger=ledger
    )
    assert off.skipped == "mode-off" and not off.changed and off.messages == tuple(messages)


def test_a_recorded_trim_is_not_trimmed_again_but_may_be_cleared() -> None:
    ledger = read_prune_ledger([_record("a1", **_data(["c1"], []))])
    small = PruningSettings(
        mode="cache-ttl",
        keep_last_assistants=1,
        min_prunable_tool_chars=0,
        soft_trim=SoftTrimSettings(max_chars=50, head_chars=10, tail_chars=10),
        soft_trim_ratio=0.0,
        hard_clear_ratio=1.0,
    )
    r = Pruner(settings=small).prune(
        _context(), context_window_tokens=100_000, last_cache_touch_at=None, now_ms=NOW, ledger=ledger
    )
    assert r.reapplied == ("c1",) and "c1" not in r.soft_trimmed  # kept with its recorded sizes
    assert "of 2000 chars" in r.messages[2].content[0].text  # type: ignore[union-attr]
    clear = PruningSettings(
        mode="cache-ttl", keep_last_assistants=1, min_prunable_tool_chars=0, hard_clear_ratio=0.0
    )
    cleared = Pruner(settings=clear).prune(
        _context(), context_window_tokens=100, last_cache_touch_at=None, now_ms=NOW, ledger=ledger
    )
    assert "c1" in cleared.hard_cleared and "c1" not in cleared.reapplied


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(10, 6000), st.sampled_from([0, 30_000, 400_000])),
        min_size=2,
        max_size=12,
    ),
    st.sampled_from([0.05, 0.1, 0.3]),
)
def test_a_pruned_result_never_changes_back(steps: list[tuple[int, int]], hard_ratio: float) -> None:
    """
    A host loop (one tool result per turn, clock jumps inside and past the TTL, each prune recorded):
    once a result is sent pruned, every later request sends the same bytes, except that a soft trim
    may become a hard clear (only when the TTL expired), and a hard clear is final.
    """
    pruner = Pruner(
        settings=PruningSettings(
            mode="cache-ttl",
            keep_last_assistants=1,
            min_prunable_tool_chars=0,
            soft_trim=SIZES,
            soft_trim_ratio=hard_ratio / 2,
            hard_clear_ratio=hard_ratio,
        )
    )
    records: list[CustomEntry] = []
    messages: list[AgentMessage] = [user("go")]
    sent: dict[str, tuple[str, bytes]] = {}
    now, touch = NOW, None
    for n, (size, advance) in enumerate(steps):
        call_id = f"c{n}"
        messages += [
            assistant(call(call_id), stop="toolUse"),
            result(call_id, chr(65 + n % 26) * size),
            assistant("ok"),
        ]
        now += advance
        r = pruner.prune(
            messages,
            context_window_tokens=4000,
            last_cache_touch_at=touch,
            now_ms=now,
            ledger=read_prune_ledger(records),
        )
        if r.soft_trimmed or r.hard_cleared:
            placeholder = pruner.settings.hard_clear.placeholder
            data = _data(list(r.soft_trimmed), list(r.hard_cleared), ts=now, placeholder=placeholder)
            records.append(_record(f"r{n}", **data))
        touch = r.last_cache_touch_at if r.soft_trimmed or r.hard_cleared else now  # a marker per turn
        for message, original in zip(r.messages, messages, strict=True):
            if not isinstance(original, ToolResultMessage):
                continue
            wire = repr(message_to_builtins(message)).encode()
            before = sent.get(original.tool_call_id)
            pruned = message is not original
            kind = "hard" if original.tool_call_id in r.hard_cleared else "pruned" if pruned else "whole"
            if before is not None:
                if before[0] == "hard":
                    assert wire == before[1] and kind != "whole"
                elif before[0] == "pruned":
                    assert wire == before[1] or original.tool_call_id in r.hard_cleared
            if pruned:
                known = before is not None and before[0] != "whole"
                sent[original.tool_call_id] = (
                    "hard" if kind == "hard" or (known and before[0] == "hard") else "pruned",
                    wire,
                )
            else:
                assert before is None or before[0] == "whole"
                sent[original.tool_call_id] = ("whole", wire)


def test_a_decision_is_not_reapplied_to_a_newer_result_reusing_its_id_in_the_protected_tail() -> None:
    # A model server that reuses tool call ids (the agent-loop tutorial's stand-in did): the decision
    # recorded for the old "c1" was applied to every result called "c1", the one just read too.
    ledger = read_prune_ledger([_record("a1", **_data(["c1"], []))])
    messages = [
        user("go"),
        assistant(call("c1"), stop="toolUse"),
        result("c1", "A" * 2000),
        assistant("read it"),
        user("again"),
        assistant(call("c1"), stop="toolUse"),
        result("c1", "Z" * 2000),  # from the last assistant on: protected (keep_last_assistants=1)
    ]
    r = Pruner(settings=ON).prune(
        messages, context_window_tokens=100_000, last_cache_touch_at=NOW, now_ms=NOW, ledger=ledger
    )
    assert r.reapplied == ("c1",)
    assert "of 2000 chars" in r.messages[2].content[0].text  # type: ignore[union-attr]
    assert r.messages[6] is messages[6]  # sent whole
    unique = [*messages[:6], result("c2", "Z" * 2000)]
    assert apply_prune_ledger(unique, ledger, protected_from=5).reapplied == ("c1",)
    # an id used once keeps its decision wherever it is (D11: bytes once sent never change back)
    only = [user("go"), assistant(call("c1"), stop="toolUse"), result("c1", "A" * 2000)]
    assert apply_prune_ledger(only, ledger, protected_from=0).reapplied == ("c1",)
