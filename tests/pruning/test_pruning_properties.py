"""Hypothesis properties of pruning: only eligible tool results change, never larger, idempotent."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from tests.pruning._builders import assistant, bash, call, image, result, thinking, user

from sessionkeeper.pruning import PruningSettings, estimate_context_chars, prune_context_messages
from sessionkeeper.pruning._settings import (
    HardClearSettings,
    SoftTrimSettings,
    ToolMatchSettings,
    make_tool_predicate,
)
from sessionkeeper.pruning._thinking import message_role
from sessionkeeper.records._messages import AgentMessage, ToolResultMessage


ALPHABET = st.sampled_from([*"abc xyz\n", "日", "本", "한", "😀", "𠀀", "ｱ", "é"])
TEXT = st.text(ALPHABET, max_size=400).map(lambda s: s * 3)
TOOLS = st.sampled_from(["read", "Read", "bash", "exec_x", "web_fetch"])


@st.composite
def messages(draw: Any) -> list[AgentMessage]:
    out: list[AgentMessage] = []
    for n in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["user", "assistant", "call", "result", "bash"]))
        if kind == "user":
            out.append(user(draw(TEXT)))
        elif kind == "assistant":
            blocks: list[Any] = [draw(TEXT)]
            if draw(st.booleans()):
                blocks.insert(0, thinking(draw(TEXT), "sig"))
            out.append(assistant(*blocks))
        elif kind == "call":
            out.append(assistant(call(f"c{n}", draw(TOOLS), q=draw(TEXT)), stop="toolUse"))
        elif kind == "result":
            blocks = [draw(TEXT) for _ in range(draw(st.integers(0, 3)))]
            blocks += [image() for _ in range(draw(st.integers(0, 2)))]
            out.append(result(f"c{n}", *draw(st.permutations(blocks)), name=draw(TOOLS)))
        else:
            out.append(bash(draw(TEXT)))
    return out


@st.composite
def settings(draw: Any, *, sane: bool = False) -> PruningSettings:
    head = draw(st.integers(0, 300))
    tail = draw(st.integers(0, 300))
    max_chars = draw(st.integers(head + tail + 128, 1500)) if sane else draw(st.integers(0, 1500))
    return PruningSettings(
        keep_last_assistants=draw(st.integers(0, 4)),
        soft_trim_ratio=draw(st.floats(0, 1)),
        hard_clear_ratio=draw(st.floats(0, 1)),
        min_prunable_tool_chars=draw(st.integers(0, 5000)),
        soft_trim=SoftTrimSettings(max_chars=max_chars, head_chars=head, tail_chars=tail),
        hard_clear=HardClearSettings(enabled=draw(st.booleans())),
        tools=ToolMatchSettings(deny=draw(st.sampled_from([(), ("bash",), ("exec*",)]))),
    )


def _eligible(msgs: list[AgentMessage], s: PruningSettings) -> set[int]:
    roles = [message_role(m) for m in msgs]
    if s.keep_last_assistants == 0:
        cutoff = len(msgs)
    else:
        assistants = [i for i, r in enumerate(roles) if r == "assistant"]
        if len(assistants) < s.keep_last_assistants:
            return set()
        cutoff = assistants[-s.keep_last_assistants]
    start = roles.index("user") if "user" in roles else len(msgs)
    allowed = make_tool_predicate(s.tools)
    return {
        i
        for i in range(start, cutoff)
        if isinstance(msgs[i], ToolResultMessage) and allowed(msgs[i].tool_name)  # type: ignore[union-attr]
    }


@given(messages(), settings(), st.integers(1, 20_000), st.booleans())
def test_only_eligible_tool_results_change_and_never_grow(
    msgs: list[AgentMessage], s: PruningSettings, window: int, drop_thinking: bool
) -> None:
    r = prune_context_messages(
        msgs, settings=s, context_window_tokens=window, drop_thinking_for_estimate=drop_thinking
    )
    assert len(r.messages) == len(msgs)
    eligible = _eligible(msgs, s)
    for index, (before, after) in enumerate(zip(msgs, r.messages, strict=True)):
        if after is before:
            continue
        assert index in eligible
        assert isinstance(after, ToolResultMessage) and isinstance(before, ToolResultMessage)
        assert (after.tool_call_id, after.tool_name, after.is_error, after.timestamp) == (
            before.tool_call_id,
            before.tool_name,
            before.is_error,
            before.timestamp,
        )
        assert len(after.content) == 1
    assert r.chars_after <= r.chars_before
    assert r.changed == any(a is not b for a, b in zip(msgs, r.messages, strict=True))
    if not drop_thinking:
        assert r.chars_after == estimate_context_chars(r.messages)
    assert set(r.soft_trimmed).isdisjoint(r.hard_cleared)


@given(messages(), settings(sane=True), st.integers(1, 20_000))
def test_pruning_is_idempotent(msgs: list[AgentMessage], s: PruningSettings, window: int) -> None:
    once = prune_context_messages(msgs, settings=s, context_window_tokens=window)
    twice = prune_context_messages(once.messages, settings=s, context_window_tokens=window)
    assert not twice.changed
    assert twice.messages == once.messages
