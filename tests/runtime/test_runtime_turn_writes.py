"""
A turn's durable writes on a sessions directory (issue 16, "A turn costs one durable write").

``after_turn`` writes the reply and, when it is due and no compaction comes between, the
``openclaw.cache-ttl`` marker (OpenClaw §7) in one write and one fsync; the lines are those of two
appends (the marker last, a child of the reply's last entry). Counted with a spy around ``os.fsync``
that still syncs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from tests.runtime._runtime_helpers import OPENAI, make_runtime, reply, tool_call, tool_result

from sessionkeeper.pruning import CACHE_TTL_CUSTOM_TYPE
from sessionkeeper.store import SessionStore
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import CustomEntry, MessageEntry


pytestmark = pytest.mark.anyio

KEY = "agent:main:main"


class _FsyncSpy:
    """Counts the fsyncs of files whose name ends in ``.jsonl`` (the transcripts), then syncs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.transcript_fsyncs = 0
        real = os.fsync

        def spy(fd: Any) -> None:
            if os.readlink(f"/proc/self/fd/{fd}").endswith(".jsonl"):
                self.transcript_fsyncs += 1
            real(fd)

        monkeypatch.setattr(os, "fsync", spy)


def _turn(index: int) -> list[Any]:
    return [
        tool_call(f"c{index}", path="a.py"),
        tool_result(f"c{index}", "x = 1"),
        reply("done", input_tokens=10),
    ]


async def test_a_turn_writes_its_reply_and_ttl_marker_with_one_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    store = SessionStore.open(tmp_path / "sessions", clock=clock)
    runtime, _, _ = make_runtime(store=store, clock=clock)
    session = await runtime.open(KEY)
    spy = _FsyncSpy(monkeypatch)
    for index in range(3):
        clock.advance(1)
        await runtime.before_model_call(session, prompt=f"turn {index}")
        prompt_fsyncs = spy.transcript_fsyncs
        outcome = await runtime.after_turn(session, messages=_turn(index))
        assert spy.transcript_fsyncs == prompt_fsyncs + 1
        assert outcome.cache_ttl_marker is not None
    assert spy.transcript_fsyncs == 6  # prompt, then reply with marker, per turn


async def test_the_marker_written_with_the_reply_is_the_line_a_separate_append_writes(tmp_path: Path) -> None:
    clock = FakeClock()
    store = SessionStore.open(tmp_path / "sessions", clock=clock)
    runtime, _, _ = make_runtime(store=store, clock=clock)
    session = await runtime.open(KEY)
    await runtime.before_model_call(session, prompt="hi")
    clock.advance(5)
    outcome = await runtime.after_turn(session, messages=_turn(0))
    entries = session.transcript.entries()
    assert [type(e) for e in entries] == [MessageEntry] * 4 + [CustomEntry]
    marker = entries[-1]
    assert isinstance(marker, CustomEntry) and marker == outcome.cache_ttl_marker
    assert marker.parent_id == entries[-2].id and session.transcript.leaf_id == marker.id
    expected = CustomEntry(
        custom_type=CACHE_TTL_CUSTOM_TYPE,
        data={"timestamp": clock.now_ms(), "provider": "anthropic", "modelId": "claude-sonnet-4-5"},
        id=marker.id,
        parent_id=marker.parent_id,
        timestamp=entries[-2].timestamp,
    )
    path = session.transcript.path
    assert path is not None
    last_line = (await anyio.Path(path).read_bytes()).splitlines()[-1]
    assert msgspec.json.decode(last_line) == msgspec.json.decode(msgspec.json.encode(expected))
    reopened = await runtime.open(KEY)  # the context after the marker is the reply's
    assert len(reopened.transcript.build_session_context().messages) == 4


async def test_a_turn_without_a_due_marker_writes_the_reply_with_one_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    store = SessionStore.open(tmp_path / "sessions", clock=clock)
    runtime, _, _ = make_runtime(store=store, clock=clock, model=OPENAI)  # not cache-TTL eligible
    session = await runtime.open(KEY)
    spy = _FsyncSpy(monkeypatch)
    await runtime.before_model_call(session, prompt="hi")
    outcome = await runtime.after_turn(session, messages=_turn(0))
    assert outcome.cache_ttl_marker is None and spy.transcript_fsyncs == 2
    assert not any(isinstance(e, CustomEntry) for e in session.transcript.entries())
