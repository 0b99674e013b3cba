"""A fork's context at its leaf equals the source's at the fork point, always (issue 15 item 8)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.transcript.test_transcript_properties import OPS, _apply

from sessionkeeper.compaction._successor import build_successor_entries
from sessionkeeper.records._codec import encode_entry
from sessionkeeper.records._entries import CompactionEntry, MessageEntry
from sessionkeeper.records._messages import AssistantMessage, TextContent, UserMessage
from sessionkeeper.store._fork import fork_transcript_lines
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import TranscriptManager, load_transcript_bytes


pytestmark = pytest.mark.anyio
TS = "2026-01-01T00:00:00.000Z"


def _text(text: str) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)], timestamp=1)


async def _labelled_compacted() -> tuple[TranscriptManager, str, str]:
    """u1 <- label(u1) <- u2 <- a2 <- compaction(firstKept = the label) : pi 0.73.1's fork keeps nothing."""
    m = TranscriptManager.in_memory(cwd="/", clock=FakeClock())
    u1 = await m.append_message(_text("one"))
    label = await m.append_label(u1.id, "start")
    u2 = await m.append_message(_text("two"))
    await m.append_message(
        AssistantMessage(content=[TextContent(text="ok")], api="a", provider="p", model="m")
    )
    compaction = await m.append_compaction(summary="S", first_kept_entry_id=label.id, tokens_before=5)
    return m, u2.id, compaction.id


async def test_clone_keeps_the_messages_after_a_label() -> None:
    m, u2, leaf = await _labelled_compacted()
    expected = m.build_session_context(leaf)
    assert [type(x).__name__ for x in expected.messages] == [
        "CompactionSummaryMessage", "UserMessage", "AssistantMessage"
    ]  # fmt: skip
    for child in (await m.clone(leaf, path=None), await m.create_branched_session(leaf, path=None)):
        assert child.build_session_context() == expected
        entries = child.entries()
        compaction = next(e for e in entries if isinstance(e, CompactionEntry))
        assert compaction.first_kept_entry_id == u2  # the label was left out: the next copied entry
        assert entries[1].parent_id == entries[0].id  # u2 hangs off u1, no longer off the dropped label
        assert child.diagnostics.clean
        assert not any(e.parent_id and e.parent_id not in child.index.by_id for e in entries)


async def test_fork_file_is_byte_identical_where_nothing_was_relinked(tmp_path: Any) -> None:
    m = TranscriptManager.in_memory(cwd="/", clock=FakeClock())
    await m.append_message(_text("one"))
    two = await m.append_message(_text("two"))
    child = await m.create_branched_session(two.id, path=tmp_path / "c.jsonl")
    source_lines = [m.index.line_bytes(i) for i in range(len(m.index))]
    assert (tmp_path / "c.jsonl").read_bytes().split(b"\n")[1:3] == source_lines
    assert child.build_session_context() == m.build_session_context(two.id)


async def test_successor_remaps_a_first_kept_entry_it_drops() -> None:
    # firstKeptEntryId names a model_change the successor dedupes away (a later one exists)
    m = TranscriptManager.in_memory(cwd="/", clock=FakeClock())
    await m.append_message(_text("old"))
    first_state = await m.append_model_change("p", model_id="m1")
    await m.append_message(_text("kept"))
    await m.append_model_change("p", model_id="m2")
    await m.append_message(
        AssistantMessage(content=[TextContent(text="ok")], api="a", provider="p", model="m2")
    )
    await m.append_compaction(summary="S", first_kept_entry_id=first_state.id, tokens_before=5)
    expected = m.build_session_context()
    written = build_successor_entries(m.entries(), m.get_branch())
    header = {"type": "session", "version": 3, "id": "n", "timestamp": TS, "cwd": "/"}
    data = b"\n".join(json.dumps(x).encode() for x in [header]) + b"\n"
    data += b"".join(encode_entry(e) + b"\n" for e in written)
    successor = load_transcript_bytes(data)
    assert successor.build_context().messages == expected.messages
    assert successor.diagnostics.unreachable_first_kept == ()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS, st.data())
def test_every_copy_path_keeps_the_context_at_the_fork_point(ops: list[Any], data: st.DataObject) -> None:
    async def scenario() -> None:
        clock = FakeClock()
        m = TranscriptManager.in_memory(cwd="/", clock=clock)
        await _apply(m, ops, clock)
        ids = [e.id for e in m.entries()]
        if not ids:
            return
        for leaf in data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=3, unique=True)):
            expected = m.build_session_context(leaf)
            for child in (
                await m.create_branched_session(leaf, path=None),
                await m.clone(leaf, path=None),
            ):
                assert child.build_session_context() == expected
                copied = child.entries()
                assert all(not e.parent_id or e.parent_id in child.index.by_id for e in copied)
            entry = m.index.entry_at(m.index.by_id[leaf])
            if isinstance(entry, MessageEntry) and isinstance(entry.message, UserMessage):
                forked = await m.fork(leaf, path=None)
                parent = entry.parent_id
                want = m.build_session_context(parent) if parent else m.build_session_context(None)
                assert forked.build_session_context() == want
            # the store's parent fork copies the active branch (labels kept) under the same rule
            m.branch(leaf)
            lines = fork_transcript_lines(m, session_id="child", now_ms=0, parent_session="p.jsonl")
            if len(lines) > 1:
                child_index = load_transcript_bytes(b"".join(line + b"\n" for line in lines))
                assert child_index.build_context() == expected

    anyio.run(scenario)
