"""
The transcript-size trigger measures the live window the next request carries (issue #15 item 11): on
the path to the leaf, the latest compaction, its kept range (from ``firstKeptEntryId``) and everything
after it. It used to count only the lines after the compaction entry.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests._helpers import user
from tests.runtime._runtime_helpers import FlushRecorder, make_runtime

from sessionkeeper.compaction import CompactionSettings
from sessionkeeper.runtime import MemoryFlushSettings, RuntimeSession, RuntimeSettings, SessionRuntime
from sessionkeeper.store import SessionEntry
from sessionkeeper.transcript import TranscriptManager


pytestmark = pytest.mark.anyio

KEY = "agent:main:main"


def _line_bytes(path: Path) -> dict[str, int]:
    """Entry id -> bytes of its line plus the newline, read from the file itself."""
    sizes: dict[str, int] = {}
    for raw in path.read_bytes().splitlines():
        record = json.loads(raw)
        if record.get("type") != "session":
            sizes[record["id"]] = len(raw) + 1
    return sizes


async def _session(tmp_path: Path, **kwargs: object) -> tuple[SessionRuntime, RuntimeSession, list[str]]:
    runtime, _, _ = make_runtime(tmp_path=tmp_path, **kwargs)  # type: ignore[arg-type]
    session = await runtime.open(KEY)
    ids = [
        (await session.transcript.append_message(user(f"m{i} " + "x" * 900, blocks=True))).id
        for i in range(6)
    ]
    return runtime, session, ids


async def test_the_kept_range_counts(tmp_path: Path) -> None:
    runtime, session, ids = await _session(tmp_path)
    compaction = await session.transcript.append_compaction(
        summary="s", first_kept_entry_id=ids[3], tokens_before=9
    )
    after = await session.transcript.append_message(user("small", blocks=True))
    assert session.transcript.path is not None
    sizes = _line_bytes(session.transcript.path)
    live = [ids[3], ids[4], ids[5], compaction.id, after.id]
    assert runtime.active_transcript_bytes(session) == sum(sizes[i] for i in live)
    assert runtime.active_transcript_bytes(session) > 3 * 900  # the kept range dominates


async def test_off_branch_lines_and_a_strict_checkpoint(tmp_path: Path) -> None:
    runtime, session, ids = await _session(tmp_path)
    transcript = session.transcript
    checkpoint = await transcript.append_compaction(summary="s", first_kept_entry_id=None, tokens_before=9)
    mine = await transcript.append_message(user("after the checkpoint", blocks=True))
    transcript.branch(ids[2])
    other = await transcript.append_message(user("another branch " + "y" * 5000, blocks=True))
    assert transcript.path is not None
    sizes = _line_bytes(transcript.path)
    # on the other branch: no compaction on its path, so the whole path (m0..m2 and itself)
    assert runtime.active_transcript_bytes(session) == sum(sizes[i] for i in (*ids[:3], other.id))
    transcript.branch(mine.id)
    # a strict checkpoint keeps nothing before itself; the 5 KB line off this branch is not counted
    assert runtime.active_transcript_bytes(session) == sizes[checkpoint.id] + sizes[mine.id]


async def test_a_first_kept_id_off_the_path_keeps_nothing(tmp_path: Path) -> None:
    runtime, session, _ = await _session(tmp_path)
    compaction = await session.transcript.append_compaction(
        summary="s", first_kept_entry_id="nowhere1", tokens_before=9
    )
    assert session.transcript.path is not None
    sizes = _line_bytes(session.transcript.path)
    assert runtime.active_transcript_bytes(session) == sizes[compaction.id]  # as pi: nothing is kept


async def test_a_large_kept_range_forces_the_memory_flush(tmp_path: Path) -> None:
    flush = FlushRecorder()
    settings = RuntimeSettings(
        compaction=CompactionSettings(), memory_flush=MemoryFlushSettings(force_flush_transcript_bytes=3000)
    )
    runtime, session, ids = await _session(tmp_path, settings=settings, memory_flush_runner=flush)
    await session.transcript.append_compaction(summary="s", first_kept_entry_id=ids[2], tokens_before=9)
    plan = await runtime.before_model_call(session, prompt="next")
    assert plan.memory_flush is not None and plan.memory_flush.reason == "transcript_size"
    assert len(flush.requests) == 1


def _reference(lines: list[bytes], leaf_id: str) -> int:
    """The rule, straight from the JSON lines: walk the path, keep compaction + kept range + after."""
    records = {json.loads(raw)["id"]: (json.loads(raw), len(raw) + 1) for raw in lines}
    path: list[str] = []
    current: str | None = leaf_id
    while current:
        path.append(current)
        current = records[current][0].get("parentId")
    path.reverse()
    last = max((i for i, e in enumerate(path) if records[e][0]["type"] == "compaction"), default=None)
    if last is None:
        return sum(records[e][1] for e in path)
    first = records[path[last]][0]["firstKeptEntryId"]
    start = path.index(first) if first in path[:last] else last
    return sum(records[e][1] for e in path[start:])


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(
        st.one_of(st.integers(1, 400), st.tuples(st.just("compact"), st.integers(0, 30))), max_size=25
    ),
    branch_back=st.integers(0, 5),
)
def test_the_count_follows_the_rule_on_chains_and_branches(
    steps: list[int | tuple[str, int]], branch_back: int
) -> None:
    async def run() -> None:
        transcript = TranscriptManager.in_memory(cwd="/", session_id="s1")
        session = RuntimeSession(
            session_key=KEY, entry=SessionEntry(), transcript=transcript, resolution=None
        )
        ids: list[str] = []
        for step in steps:
            if isinstance(step, int):
                ids.append((await transcript.append_message(user("x" * step, blocks=True))).id)
            else:
                back = step[1]
                first = ids[-1 - back] if back < len(ids) else (None if back % 2 else "dangling")
                ids.append(
                    (
                        await transcript.append_compaction(
                            summary="s", first_kept_entry_id=first, tokens_before=1
                        )
                    ).id
                )
        lines = list(transcript.index.lines)
        leaf = transcript.leaf_id
        expected = _reference(lines, leaf) if leaf else 0
        assert SessionRuntime.active_transcript_bytes(session) == expected  # one chain: the fast path
        if len(ids) > branch_back + 1:  # a sibling branch makes the file a tree: the walk
            transcript.branch(ids[-1 - branch_back])
            await transcript.append_message(user("sibling", blocks=True))
            transcript.branch(ids[-1])
            assert SessionRuntime.active_transcript_bytes(session) == expected

    anyio.run(run)
