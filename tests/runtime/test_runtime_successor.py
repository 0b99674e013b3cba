"""SessionRuntime end to end around successor transcripts: absolute paths, rotation, writers joining."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.runtime._runtime_helpers import make_runtime, reply

from sessionkeeper.compaction import CompactionSettings
from sessionkeeper.runtime import ModelInfo
from sessionkeeper.store import SessionStore
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import CompactionSummaryMessage


pytestmark = pytest.mark.anyio

KEY = "agent:main:main"


async def _fill(runtime: object, session: object, turns: int, *, size: int = 2000) -> None:
    from sessionkeeper.runtime import SessionRuntime

    assert isinstance(runtime, SessionRuntime)
    for index in range(turns):
        await runtime.before_model_call(session, prompt=f"question {index} " + "q" * size)  # type: ignore[arg-type]
        await runtime.after_turn(session, messages=[reply("answer " + "a" * size)])  # type: ignore[arg-type]


def _same_file(a: Path | str, b: Path | str) -> bool:
    return Path(a).resolve() == Path(b).resolve()


def _exists(path: Path) -> bool:
    return path.exists()


def _check_absolute_successor(session_file: str, *, tmp_path: Path, old_path: Path) -> None:
    assert Path(session_file).is_absolute()
    assert Path(session_file).resolve().parent == (tmp_path / "sessions").resolve()
    header = json.loads(Path(session_file).read_text().splitlines()[0])
    assert Path(header["parentSession"]).resolve() == old_path


async def test_successor_of_a_relative_sessions_dir_is_recorded_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A store opened on a relative path ("sessions", as a host or --store gives it): the successor's
    # sessionFile was written relative to the cwd ("sessions/<stamp>_<id>.jsonl"), which the store reads
    # from the sessions dir ("sessions/sessions/..."): reopening the key started an empty transcript there
    # and the compacted history was lost from the session. The header's parentSession was relative too.
    monkeypatch.chdir(tmp_path)
    clock = FakeClock()
    store = SessionStore.open(Path("sessions"), clock=clock, durable=False)
    runtime, store, _ = make_runtime(
        store=store,
        clock=clock,
        compaction=CompactionSettings(keep_recent_tokens=100, truncate_after_compaction=True),
    )
    session = await runtime.open(KEY)
    await _fill(runtime, session, 3)
    old_path = (tmp_path / "sessions" / f"{session.session_id}.jsonl").resolve()
    outcome = await runtime.compact(session)
    assert outcome.compacted and outcome.result is not None and outcome.result.successor is not None
    entry = await store.require(KEY)
    assert isinstance(entry.session_file, str)
    _check_absolute_successor(entry.session_file, tmp_path=tmp_path, old_path=old_path)
    again = await runtime.open(KEY)
    assert again.transcript.path is not None
    assert _same_file(again.transcript.path, entry.session_file)
    plan = await runtime.before_model_call(again, prompt="next")
    assert isinstance(plan.messages[0], CompactionSummaryMessage)
    assert not _exists(tmp_path / "sessions" / "sessions")


def _read(path: Path) -> str:
    return path.read_text()


async def test_preflight_compaction_rotation_appends_the_prompt_to_the_successor(tmp_path: Path) -> None:
    # A preflight compaction with truncateAfterCompaction switched session.transcript to the successor,
    # but before_model_call appended the new prompt to the old file it had in hand: the successor (the
    # file the store names) lacked the user's message, and the plan was built from the old file.
    runtime, store, _ = make_runtime(
        model=ModelInfo(provider="anthropic", model_id="m", context_window=40_000),
        compaction=CompactionSettings(keep_recent_tokens=100, truncate_after_compaction=True),
        tmp_path=tmp_path,
    )
    session = await runtime.open(KEY)
    await _fill(runtime, session, 3)
    old_path = session.transcript.path
    assert old_path is not None
    # a tool-loop step leaves the context over the threshold without a threshold compaction
    await runtime.after_turn(session, messages=[reply("big", input_tokens=30_000)], turn_complete=False)
    plan = await runtime.before_model_call(session, prompt="the prompt after the preflight")
    assert plan.compaction is not None and plan.compaction.compacted
    assert session.transcript.path is not None and session.transcript.path != old_path
    assert "the prompt after the preflight" not in _read(old_path)  # the old file ends at the compaction
    entry = await store.require(KEY)
    assert entry.session_file is not None
    assert "the prompt after the preflight" in _read(Path(entry.session_file))
    assert isinstance(plan.messages[0], CompactionSummaryMessage)
    assert _texts(plan.messages[-1:]) == ["the prompt after the preflight"]
    assert plan.prompt_entry is not None and session.transcript.leaf_id == plan.prompt_entry.id
    again = await runtime.open(KEY)
    context = again.transcript.build_session_context().messages
    assert _texts(context[-1:]) == ["the prompt after the preflight"]


def _texts(messages: object) -> list[str]:
    out = []
    for message in messages:  # type: ignore[attr-defined]
        content = getattr(message, "content", "")
        if isinstance(content, str):
            out.append(content)
        else:
            out.append("".join(getattr(block, "text", "") for block in content))
    return out


async def test_second_runtime_follows_another_writers_successor(tmp_path: Path) -> None:
    # Two runtimes on one key (two processes): after A's compaction rotated the transcript, B went on
    # writing to the old file, which the store no longer names (its turns were missing from the
    # session), and B's own compaction then rotated the old file and pointed the store away from A's
    # successor. B now follows the successor chain the store entry names at each call.
    clock = FakeClock()
    settings = CompactionSettings(keep_recent_tokens=100, truncate_after_compaction=True)
    runtime_a, store_a, _ = make_runtime(
        store=SessionStore.open(tmp_path / "sessions", clock=clock, durable=False),
        clock=clock,
        compaction=settings,
    )
    runtime_b, _, _ = make_runtime(
        store=SessionStore.open(tmp_path / "sessions", clock=clock, durable=False),
        clock=clock,
        compaction=settings,
    )
    a = await runtime_a.open(KEY)
    await _fill(runtime_a, a, 3)
    b = await runtime_b.open(KEY)
    assert b.transcript.path == a.transcript.path
    assert (await runtime_a.compact(a)).compacted
    plan = await runtime_b.before_model_call(b, prompt="B after the rotation")
    await runtime_b.after_turn(b, messages=[reply("B's reply")])
    assert b.transcript.path == a.transcript.path
    assert isinstance(plan.messages[0], CompactionSummaryMessage)
    await _fill(runtime_b, b, 3)
    assert (await runtime_b.compact(b)).compacted
    await runtime_a.before_model_call(a, prompt="A again")
    await runtime_a.after_turn(a, messages=[reply("A's reply")])
    entry = await store_a.require(KEY)
    assert entry.session_file is not None
    assert a.transcript.path == b.transcript.path == Path(entry.session_file)
    text = _read(Path(entry.session_file))
    assert "A again" in text and "A's reply" in text
    context = _texts(a.transcript.build_session_context().messages)
    assert context[-2:] == ["A again", "A's reply"]


async def test_stale_writer_rotation_never_takes_the_key_back_from_a_reset_session(tmp_path: Path) -> None:
    # B still held the pre-rotation file when A reset the key (/new: a new session id). B's next
    # compaction rotated that stale file and the store entry adopted B's successor: A's new session
    # was dropped from the store (its file unreferenced, later deleted by cleanup). The entry is now
    # only moved to a successor while it still names the rotated session.
    clock = FakeClock()
    settings = CompactionSettings(keep_recent_tokens=100, truncate_after_compaction=True)
    runtime_a, store, _ = make_runtime(
        store=SessionStore.open(tmp_path / "sessions", clock=clock, durable=False),
        clock=clock,
        compaction=settings,
    )
    runtime_b, _, _ = make_runtime(
        store=SessionStore.open(tmp_path / "sessions", clock=clock, durable=False),
        clock=clock,
        compaction=settings,
    )
    a = await runtime_a.open(KEY)
    await _fill(runtime_a, a, 3)
    b = await runtime_b.open(KEY)
    assert (await runtime_a.compact(a)).compacted
    a = await runtime_a.open(KEY, body="/new")
    await runtime_a.before_model_call(a, prompt="the new session")
    await runtime_a.after_turn(a, messages=[reply("new session reply")])
    reset_entry = await store.require(KEY)
    await _fill(runtime_b, b, 3)
    await runtime_b.compact(b)
    entry = await store.require(KEY)
    assert entry.session_id == reset_entry.session_id
    assert entry.session_file == reset_entry.session_file
    again = await runtime_a.open(KEY)
    assert _texts(again.transcript.build_session_context().messages)[-1] == "new session reply"


async def test_writer_on_a_sibling_successor_joins_the_one_the_store_adopted(tmp_path: Path) -> None:
    # Two writers rotated the same file: B is on its own successor of F (the store never adopted it),
    # the store names A's successor of F. B used to write on in its orphan file for good (it was no
    # successor of B's file); it now joins the lineage the store names.
    from sessionkeeper.compaction import rotate_after_compaction
    from sessionkeeper.transcript import TranscriptManager

    clock = FakeClock()
    settings = CompactionSettings(keep_recent_tokens=100, truncate_after_compaction=True)
    runtime_a, store, _ = make_runtime(
        store=SessionStore.open(tmp_path / "sessions", clock=clock, durable=False),
        clock=clock,
        compaction=settings,
    )
    runtime_b, _, _ = make_runtime(
        store=SessionStore.open(tmp_path / "sessions", clock=clock, durable=False),
        clock=clock,
        compaction=settings,
    )
    a = await runtime_a.open(KEY)
    await _fill(runtime_a, a, 3)
    b = await runtime_b.open(KEY)
    assert (await runtime_a.compact(a)).compacted  # F -> S_A, the store names S_A
    sibling = await rotate_after_compaction(b.transcript, clock=clock)  # F -> S_B, never adopted
    assert sibling is not None
    b.transcript = await TranscriptManager.open(sibling.path, clock=clock)
    await runtime_b.before_model_call(b, prompt="B joins")
    await runtime_b.after_turn(b, messages=[reply("B's reply")])
    entry = await store.require(KEY)
    assert entry.session_file is not None
    assert b.transcript.path == a.transcript.path == Path(entry.session_file)
    assert "B's reply" in _read(Path(entry.session_file))


def test_lineage_reads_headers_as_the_loader_does(tmp_path: Path) -> None:
    # A successor whose first line is damaged still names its parent in the first parseable line (the
    # loader's header rule, pi-format spec §2): the runtime must follow it like the file it loads.
    from sessionkeeper.runtime._transcripts import same_lineage as _same_lineage

    old = tmp_path / "old.jsonl"
    old.write_text(
        '{"type":"session","version":3,"id":"a","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}\n'
    )
    new = tmp_path / "new.jsonl"
    header = {
        "type": "session",
        "version": 3,
        "id": "b",
        "timestamp": "2026-01-01T00:00:01.000Z",
        "cwd": "/w",
    }
    header["parentSession"] = str(old)
    new.write_text("{not json\n" + json.dumps(header) + "\n")
    assert _same_lineage(new, old)
    assert not _same_lineage(tmp_path / "missing.jsonl", old)
