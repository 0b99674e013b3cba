"""
Several writers on one transcript (issue #7): a TranscriptManager picks up what other writers appended
and, at the tip, appends after it; a manager that navigated away keeps its place; a file that shrank
or was replaced is a TranscriptChangedError with nothing written. Both anyio backends.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from tests._helpers import user

import sessionkeeper
from sessionkeeper.exceptions import TranscriptChangedError
from sessionkeeper.records._entries import MessageEntry
from sessionkeeper.transcript import TranscriptManager, encode_entry, load_transcript
from sessionkeeper.transcript.file import _follow as follow_module


pytestmark = pytest.mark.anyio
# the samples the installed package ships (the wheel run of .ci/run has no src/)
SAMPLES = Path(sessionkeeper.__file__).parent / "_samples"


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines()][1:]


def _chain(path: Path) -> list[tuple[str, str | None]]:
    return [(r["id"], r["parentId"]) for r in _records(path)]


async def _pair(tmp_path: Path) -> tuple[Path, TranscriptManager, TranscriptManager]:
    path = tmp_path / "t.jsonl"
    first = await TranscriptManager.create(path, cwd="/w")
    await first.append_message(user("hello"))
    second = await TranscriptManager.open(path)
    return path, first, second


def _raw_line(entry_id: str, parent: str | None, text: str) -> bytes:
    entry = MessageEntry(
        id=entry_id, parent_id=parent, timestamp="2026-01-01T00:00:00.000Z", message=user(text)
    )
    return encode_entry(entry)


async def test_an_append_at_the_tip_follows_another_writers_entries(tmp_path: Path) -> None:
    path, a, b = await _pair(tmp_path)
    a1 = await a.append_message(user("a1"))
    a2 = await a.append_message(user("a2"))
    b1 = await b.append_message(user("b1"))
    assert b1.parent_id == a2.id
    assert [e.id for e in b.get_branch()][-3:] == [a1.id, a2.id, b1.id]
    assert b.leaf_id == b1.id
    a3 = await a.append_message(user("a3"))
    assert a3.parent_id == b1.id
    reopened = load_transcript(path)
    texts = [m.content for m in reopened.build_context().messages]  # type: ignore[union-attr]
    assert texts == ["hello", "a1", "a2", "b1", "a3"]
    previous = None
    for entry_id, parent in _chain(path):
        assert parent == previous
        previous = entry_id


async def test_append_messages_at_the_tip_follows_as_one_chain(tmp_path: Path) -> None:
    path, a, b = await _pair(tmp_path)
    a1 = await a.append_message(user("a1"))
    turn = await b.append_messages([user("q"), user("r"), user("s")])
    assert [e.parent_id for e in turn] == [a1.id, turn[0].id, turn[1].id]
    assert b.leaf_id == turn[-1].id
    assert _chain(path)[-3:] == [(e.id, e.parent_id) for e in turn]


async def test_a_manager_that_navigated_keeps_its_place(tmp_path: Path) -> None:
    _, a, b = await _pair(tmp_path)
    root = b.leaf_id
    assert root is not None
    b.branch(root)  # the entry that is also its tip: still an explicit choice
    a1 = await a.append_message(user("a1"))
    side = await b.append_message(user("side"))
    assert side.parent_id == root
    a2 = await a.append_message(user("a2"))
    assert a2.parent_id == side.id  # a follows the file's last entry
    b2 = await b.append_message(user("b2"))  # after its own append b is at the tip again
    assert b2.parent_id == a2.id
    b.reset_leaf()
    await a.append_message(user("a3"))
    new_root = await b.append_message(user("b root"))
    assert new_root.parent_id is None
    b.branch(a1.id)
    await a.append_message(user("a4"))
    assert await b.refresh() == 1
    assert b.leaf_id == a1.id  # a refresh does not move a navigated leaf


async def test_branch_with_summary_hangs_where_it_was_asked(tmp_path: Path) -> None:
    _, a, b = await _pair(tmp_path)
    target = b.leaf_id
    assert target is not None
    await a.append_message(user("a1"))
    summary = await b.branch_with_summary(target, "left a branch")
    assert summary.parent_id == target
    assert summary.from_id == target
    assert b.leaf_id == summary.id


async def test_ids_stay_unique_when_another_writer_took_the_drawn_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sessionkeeper.transcript import _appends as manager_module

    path, a, b = await _pair(tmp_path)
    await a.append_message(user("a1"))
    taken = a.leaf_id
    assert taken is not None
    draws = iter([taken])
    monkeypatch.setattr(manager_module, "_draw_entry_id", lambda known: next(draws))
    entry = await b.append_message(user("b1"))  # drawn before the pick-up: collides, redrawn under the lock
    assert entry.id != taken
    assert entry.parent_id == taken
    ids = [entry_id for entry_id, _ in _chain(path)]
    assert len(ids) == len(set(ids))
    assert b.get_entry(entry.id) == entry


@pytest.mark.parametrize("mode", ["lock per write", "held lock", "no lock", "thread writes"])
async def test_every_write_path_follows(tmp_path: Path, mode: str) -> None:
    path, a, b = await _pair(tmp_path)
    if mode == "no lock":
        b.locking = False
    if mode == "thread writes":
        b.inline_write_budget_ms = 0
    a1 = await a.append_message(user("a1"))
    if mode == "held lock":
        async with b.hold_write_lock():
            b1 = await b.append_message(user("b1"))
    else:
        b1 = await b.append_message(user("b1"))
    assert b1.parent_id == a1.id
    assert _chain(path)[-1] == (b1.id, a1.id)


async def test_without_other_writers_the_append_reads_nothing_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.jsonl"
    created = await TranscriptManager.create(path, cwd="/w")
    await created.append_message(user("one"))
    reopened = await TranscriptManager.open(path)

    def no_pick_up(*args: object) -> object:
        raise AssertionError("read back lines nobody else wrote")

    monkeypatch.setattr(follow_module, "_pick_up", no_pick_up)
    for i in range(3):
        await reopened.append_message(user(f"n{i}"))
    await reopened.append_messages([user("q"), user("r")])
    assert await reopened.refresh() == 0
    assert len(reopened.entries()) == 6


async def test_refresh_picks_up_and_moves_a_leaf_at_the_tip(tmp_path: Path) -> None:
    _, a, b = await _pair(tmp_path)
    assert await b.refresh() == 0
    a1 = await a.append_message(user("a1"))
    await a.append_label(a1.id, "mark")
    assert await b.refresh() == 2
    assert b.get_entry(a1.id) is not None
    assert b.get_label(a1.id) == "mark"
    assert b.leaf_id == a.leaf_id
    assert await b.refresh() == 0


async def test_refresh_keeps_a_navigated_leaf(tmp_path: Path) -> None:
    _, a, b = await _pair(tmp_path)
    root = b.leaf_id
    assert root is not None
    await b.append_message(user("b1"))
    b.branch(root)
    await a.append_message(user("a1"))
    assert await b.refresh() == 1
    assert b.leaf_id == root


async def test_a_foreign_line_is_read_only_once_complete(tmp_path: Path) -> None:
    path, a, b = await _pair(tmp_path)
    tip = b.leaf_id
    line = _raw_line("f0000001", tip, "foreign")
    with path.open("ab") as fh:
        fh.write(line[:25])
    assert await b.refresh() == 0
    assert b.leaf_id == tip
    with path.open("ab") as fh:
        fh.write(line[25:] + b"\n")
    assert await b.refresh() == 1
    assert b.leaf_id == "f0000001"
    del a


async def test_an_append_after_a_torn_foreign_line_repairs_and_follows(tmp_path: Path) -> None:
    path, a, b = await _pair(tmp_path)
    a1 = await a.append_message(user("a1"))
    with path.open("ab") as fh:
        fh.write(b'{"type":"message","id":"dead","par')  # a writer died mid-line
    b1 = await b.append_message(user("b1"))
    assert b1.parent_id == a1.id
    assert b.last_repair is not None
    assert b.last_repair.kind == "torn"
    assert b.last_backup is not None
    assert b.last_backup.exists()
    assert _chain(path)[-1] == (b1.id, a1.id)
    assert b"dead" not in path.read_bytes()


async def test_an_unterminated_foreign_line_is_ended_and_followed(tmp_path: Path) -> None:
    path, _, b = await _pair(tmp_path)
    tip = b.leaf_id
    with path.open("ab") as fh:
        fh.write(_raw_line("f0000002", tip, "no newline"))
    b1 = await b.append_message(user("b1"))
    assert b.last_repair is not None
    assert b.last_repair.kind == "newline"
    assert b1.parent_id == "f0000002"
    assert [entry_id for entry_id, _ in _chain(path)][-2:] == ["f0000002", b1.id]


async def test_a_manager_that_loaded_an_unterminated_line_does_not_index_it_twice(tmp_path: Path) -> None:
    path, a, _ = await _pair(tmp_path)
    with path.open("ab") as fh:
        fh.write(_raw_line("f0000003", a.leaf_id, "loaded without newline"))
    c = await TranscriptManager.open(path)
    await a.append_message(user("a1"))  # ends that line, then appends
    c1 = await c.append_message(user("c1"))
    ids = [e.id for e in c.entries()]
    assert ids.count("f0000003") == 1
    assert c1.parent_id == a.leaf_id


async def test_a_shrunk_file_raises_and_nothing_is_written(tmp_path: Path) -> None:
    path, a, b = await _pair(tmp_path)
    await a.append_message(user("a1"))
    await b.refresh()
    data = path.read_bytes()
    path.write_bytes(data[: data.rindex(b"\n", 0, len(data) - 1) + 1])  # the last line cut by someone
    before = path.read_bytes()
    with pytest.raises(TranscriptChangedError, match="shrank"):
        await b.append_message(user("b1"))
    with pytest.raises(TranscriptChangedError, match="shrank"):
        await b.refresh()
    assert path.read_bytes() == before
    assert isinstance(TranscriptChangedError("x", path=path), Exception)


async def test_a_replaced_file_raises_and_nothing_is_written(tmp_path: Path) -> None:
    path, _, b = await _pair(tmp_path)
    copy = tmp_path / "copy.jsonl"
    shutil.copyfile(path, copy)
    with copy.open("ab") as fh:
        fh.write(_raw_line("f0000004", b.leaf_id, "other file") + b"\n")
    os.replace(copy, path)
    before = path.read_bytes()
    with pytest.raises(TranscriptChangedError, match="replaced"):
        await b.append_message(user("b1"))
    assert path.read_bytes() == before
    reopened = await TranscriptManager.open(path)  # the caller reopens, then appends
    entry = await reopened.append_message(user("b1"))
    assert entry.parent_id == "f0000004"


async def test_a_rewritten_file_of_the_same_inode_raises(tmp_path: Path) -> None:
    path, a, b = await _pair(tmp_path)
    await a.append_message(user("a1"))
    await b.refresh()
    data = bytearray(path.read_bytes())
    data[-5] = ord("Z") if data[-5] != ord("Z") else ord("Y")  # the known last line changed in place
    with path.open("r+b") as fh:
        fh.write(bytes(data) + _raw_line("f0000005", a.leaf_id, "more") + b"\n")
    before = path.read_bytes()
    with pytest.raises(TranscriptChangedError, match="changed"):
        await b.append_message(user("b1"))
    assert path.read_bytes() == before


async def test_a_legacy_file_migrated_by_another_writer_raises(tmp_path: Path) -> None:
    path = tmp_path / "v1.jsonl"
    shutil.copyfile(SAMPLES / "v1-legacy.jsonl", path)
    a = await TranscriptManager.open(path)
    b = await TranscriptManager.open(path)
    assert await b.refresh() == 0  # migrated in memory, not written yet: nothing to follow
    await a.append_message(user("a1"))  # the migration rewrite (another inode)
    before = path.read_bytes()
    with pytest.raises(TranscriptChangedError):
        await b.append_message(user("b1"))
    assert path.read_bytes() == before
    a2 = await a.append_message(user("a2"))  # the writer that migrated it goes on
    assert _chain(path)[-1] == (a2.id, a2.parent_id)


async def test_in_memory_refresh_is_a_no_op() -> None:
    manager = TranscriptManager.in_memory()
    await manager.append_message(user("x"))
    assert await manager.refresh() == 0
    assert manager.held_write_lock is None


async def test_held_write_lock_is_reported(tmp_path: Path) -> None:
    _, _, b = await _pair(tmp_path)
    assert b.held_write_lock is None
    async with b.hold_write_lock() as lock:
        assert b.held_write_lock is lock
    assert b.held_write_lock is None


async def test_forked_sessions_follow_their_own_file(tmp_path: Path) -> None:
    path, a, _ = await _pair(tmp_path)
    leaf = a.leaf_id
    assert leaf is not None
    fork = await a.create_branched_session(leaf, path=tmp_path / "fork.jsonl")
    other = await TranscriptManager.open(tmp_path / "fork.jsonl")
    o1 = await other.append_message(user("other"))
    f1 = await fork.append_message(user("fork"))
    assert f1.parent_id == o1.id
    assert path.read_bytes().count(b"fork") == 0


async def test_labelling_an_entry_another_writer_just_added_picks_it_up(tmp_path: Path) -> None:
    path, a, b = await _pair(tmp_path)
    a1 = await a.append_message(user("a1"))
    label = await b.append_label(a1.id, "checkpoint")  # b has not read a1 yet
    assert label.target_id == a1.id
    assert b.get_label(a1.id) == "checkpoint"
    assert load_transcript(path).labels[a1.id] == "checkpoint"


async def test_labelling_an_unknown_entry_still_fails(tmp_path: Path) -> None:
    from sessionkeeper.exceptions import EntryNotFoundError

    path, _, b = await _pair(tmp_path)
    before = path.read_bytes()
    with pytest.raises(EntryNotFoundError):
        await b.append_label("nope", "x")
    assert path.read_bytes() == before
