"""Hypothesis properties: compaction never breaks tool-call pairing; chunking keeps tool blocks whole."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.compaction._build import T0, assistant, result, user

from sessionkeeper.compaction import prepare_compaction, split_messages_by_token_share
from sessionkeeper.transcript import (
    AgentMessage,
    AssistantMessage,
    CompactionEntry,
    CustomMessageEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    ToolCall,
    ToolResultMessage,
    TranscriptEntry,
    build_context_from_path,
)


def assert_pairing(messages: tuple[AgentMessage, ...] | list[AgentMessage]) -> None:
    """PAIRING INVARIANT (field reports): results follow their call; only the last call may be pending."""
    pending: set[str] = set()
    for index, message in enumerate(messages):
        if isinstance(message, ToolResultMessage):
            assert message.tool_call_id in pending, (
                f"result {message.tool_call_id} without its call at {index}"
            )
            pending.discard(message.tool_call_id)
            continue
        assert not pending, f"calls {sorted(pending)} lack results before message {index}"
        if isinstance(message, AssistantMessage):
            pending = {b.id for b in message.content if isinstance(b, ToolCall)}


@st.composite
def transcripts(draw: st.DrawFn) -> list[TranscriptEntry]:
    entries: list[TranscriptEntry] = []
    counter = iter(range(10**6))

    def add(kind: str, message: Any = None) -> None:
        entry_id = f"{next(counter):08x}"
        parent = entries[-1].id if entries else None
        if kind == "message":
            entries.append(MessageEntry(id=entry_id, parent_id=parent, timestamp=T0, message=message))
        elif kind == "label":
            entries.append(
                LabelEntry(id=entry_id, parent_id=parent, timestamp=T0, target_id=parent or entry_id)
            )
        elif kind == "model":
            entries.append(
                ModelChangeEntry(id=entry_id, parent_id=parent, timestamp=T0, provider="p", model_id="m")
            )
        else:
            entries.append(
                CustomMessageEntry(
                    custom_type="note",
                    content="n" * draw(st.integers(0, 400)),
                    display=True,
                    id=entry_id,
                    parent_id=parent,
                    timestamp=T0,
                )
            )

    sizes = st.integers(min_value=0, max_value=3000)
    call_ids = iter(range(10**6))
    for _turn in range(draw(st.integers(min_value=1, max_value=6))):
        if draw(st.booleans()):
            add(draw(st.sampled_from(["label", "model", "custom"])))
        add("message", user("u" * draw(sizes)))
        for _step in range(draw(st.integers(min_value=0, max_value=4))):
            calls = draw(st.integers(min_value=0, max_value=3))
            if calls == 0:
                add("message", assistant("a" * draw(sizes)))
                continue
            ids = [f"call{next(call_ids)}" for _ in range(calls)]
            stop = draw(st.sampled_from(["toolUse", "toolUse", "error", "aborted"]))
            add(
                "message",
                assistant(
                    "t" * draw(st.integers(0, 200)), *((i, "read", {"path": i}) for i in ids), stop=stop
                ),
            )
            for call_id in ids:
                add("message", result(call_id, "r" * draw(sizes)))
            if draw(st.booleans()):
                add("label")
    if draw(st.booleans()):  # a pending last call
        add("message", assistant("", ("pending1", "read", {"path": "p"})))
    return entries


def _compacted_context(branch: list[TranscriptEntry], keep: int | None) -> tuple[AgentMessage, ...] | None:
    plan = prepare_compaction(branch, keep_recent_tokens=keep)
    if plan is None or plan.nothing_to_summarize or plan.pending_tool_call_ids:
        return None  # the Compactor writes nothing then (D2, B06)
    entry_id = "ffffffff"
    compaction = CompactionEntry(
        id=entry_id,
        parent_id=branch[-1].id,
        timestamp=T0,
        summary="summary",
        first_kept_entry_id=plan.first_kept_entry_id or entry_id,
        tokens_before=plan.tokens_before,
    )
    branch.append(compaction)
    return build_context_from_path(branch).messages


@settings(max_examples=150, deadline=None)
@given(transcripts(), st.integers(min_value=0, max_value=12000))
def test_compaction_never_breaks_tool_pairing(branch: list[TranscriptEntry], keep: int) -> None:
    assert_pairing(build_context_from_path(branch).messages)
    context = _compacted_context(list(branch), keep)
    if context is not None:
        assert_pairing(context[1:])


@settings(max_examples=60, deadline=None)
@given(transcripts(), transcripts(), st.integers(min_value=0, max_value=8000))
def test_repeated_compaction_keeps_pairing(
    first: list[TranscriptEntry], more: list[TranscriptEntry], keep: int
) -> None:
    branch = list(first)
    last = branch[-1]
    if (
        isinstance(last, MessageEntry)
        and isinstance(last.message, AssistantMessage)
        and last.message.stop_reason == "toolUse"
    ):
        return  # a pending call is answered before the next turn; abandoning it is not this property's input
    if _compacted_context(branch, keep) is None:
        return
    parent = branch[-1].id
    for entry in more:  # re-link the second transcript after the compaction, with fresh ids
        new_id = "b" + entry.id[1:]
        if isinstance(entry, MessageEntry):
            branch.append(MessageEntry(id=new_id, parent_id=parent, timestamp=T0, message=entry.message))
            parent = new_id
    context = _compacted_context(branch, keep)
    if context is not None:
        assert_pairing(context[1:])


@settings(max_examples=150, deadline=None)
@given(transcripts(), st.integers(min_value=2, max_value=5))
def test_token_share_chunks_keep_tool_blocks_whole(branch: list[TranscriptEntry], parts: int) -> None:
    messages = [e.message for e in branch if isinstance(e, MessageEntry)]
    chunks = split_messages_by_token_share(messages, parts=parts)
    assert [m for chunk in chunks for m in chunk] == messages
    assert len(chunks) <= parts
    stop_of_call = {
        block.id: message.stop_reason
        for message in messages
        if isinstance(message, AssistantMessage)
        for block in message.content
        if isinstance(block, ToolCall)
    }
    for chunk in chunks[1:]:
        # A call and its results stay together, unless the call's turn errored or was aborted
        # (those never hold a split open, OpenClaw §5.5).
        head = chunk[0]
        if isinstance(head, ToolResultMessage):
            assert stop_of_call[head.tool_call_id] in ("error", "aborted")
