"""
The pick-up rule's building blocks (transcript/file/_follow.py, issue #7): marks, reading other writers'
complete lines, re-linking pending entries, applying picked-up lines to an index.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionkeeper.exceptions import TranscriptChangedError
from sessionkeeper.records._codec import encode_header
from sessionkeeper.transcript import (
    CompactionEntry,
    LabelEntry,
    MessageEntry,
    UserMessage,
    encode_entry,
    load_transcript,
)
from sessionkeeper.transcript.file._follow import (
    CHECK_BYTES,
    FileMark,
    PendingWrite,
    append_following,
    apply_foreign,
    mark_after_load,
    mark_of_file,
    read_foreign_lines,
    rebase_entries,
)


HEADER = encode_header({"type": "session", "version": 3, "id": "s1", "timestamp": "t", "cwd": "/w"})


def _msg(entry_id: str, parent: str | None, text: str = "x") -> MessageEntry:
    return MessageEntry(
        id=entry_id,
        parent_id=parent,
        timestamp="2026-01-01T00:00:00.000Z",
        message=UserMessage(content=text, timestamp=1),
    )


def _line(entry_id: str, parent: str | None, text: str = "x") -> bytes:
    return encode_entry(_msg(entry_id, parent, text))


def _new_file(path: Path, *entries: tuple[str, str | None]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in [HEADER, *(_line(i, p) for i, p in entries)]))
    return path


def _append_raw(path: Path, data: bytes) -> None:
    with path.open("ab") as fh:
        fh.write(data)


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines()][1:]


def _pending(*entries: MessageEntry, follow: bool = True) -> PendingWrite:
    return PendingWrite(list(entries), [encode_entry(e) for e in entries], follow=follow)


# -- marks -------------------------------------------------------------------------------------------


def test_mark_of_a_written_file_is_its_size_and_last_bytes(tmp_path: Path) -> None:
    path = _new_file(tmp_path / "t.jsonl", ("a", None))
    mark = mark_of_file(path, lines=2)
    data = path.read_bytes()
    st = path.stat()
    assert (mark.dev, mark.ino, mark.end, mark.lines) == (st.st_dev, st.st_ino, len(data), 2)
    assert mark.tail == data[-CHECK_BYTES:]


def test_mark_after_load_of_an_unchanged_file_is_its_size(tmp_path: Path) -> None:
    path = _new_file(tmp_path / "t.jsonl", ("a", None), ("b", "a"))
    mark = mark_after_load(path, load_transcript(path))
    assert mark is not None
    assert mark.end == path.stat().st_size
    assert mark.lines == 3


def test_mark_after_load_stops_before_a_torn_or_unterminated_last_line(tmp_path: Path) -> None:
    path = _new_file(tmp_path / "t.jsonl", ("a", None))
    size = path.stat().st_size
    _append_raw(path, b'{"type":"message","id":"zz","par')
    mark = mark_after_load(path, load_transcript(path))
    assert mark is not None
    assert mark.end == size
    unterminated = _new_file(tmp_path / "u.jsonl", ("a", None))
    _append_raw(unterminated, _line("b", "a"))
    mark = mark_after_load(unterminated, load_transcript(unterminated))
    assert mark is not None
    assert mark.end == size  # the line without newline is read again once complete


def test_mark_after_load_counts_lines_when_the_file_grew_while_loading(tmp_path: Path) -> None:
    path = _new_file(tmp_path / "t.jsonl", ("a", None), ("b", "a"))
    index = load_transcript(path)
    # the loader's fstat came before the last line was written, its read after: it indexed "b"
    assert index.source_stat is not None
    dev, ino, size, mtime = index.source_stat
    index.source_stat = (dev, ino, size - len(_line("b", "a")) - 1, mtime)
    full = path.stat().st_size
    _append_raw(path, _line("c", "b") + b"\n")  # written after the load: not indexed
    mark = mark_after_load(path, index)
    assert mark is not None
    assert mark.end == full
    assert mark.lines == 3
    foreign, _ = read_foreign_lines(path, mark)
    assert foreign is not None
    assert foreign.ids == frozenset({"c"})


def test_mark_after_load_of_a_migrated_index_is_none(tmp_path: Path) -> None:
    path = tmp_path / "v1.jsonl"
    path.write_text(
        json.dumps({"type": "session", "id": "s", "timestamp": "t", "cwd": "/"})
        + "\n"
        + json.dumps({"type": "message", "timestamp": "t", "message": {"role": "user", "content": "hi"}})
        + "\n"
    )
    assert mark_after_load(path, load_transcript(path)) is None


# -- reading other writers' lines ----------------------------------------------------------------------


def test_nothing_new_reads_nothing(tmp_path: Path) -> None:
    path = _new_file(tmp_path / "t.jsonl", ("a", None))
    mark = mark_of_file(path, lines=2)
    assert read_foreign_lines(path, mark) == (None, mark)


def test_foreign_lines_are_read_from_the_known_end(tmp_path: Path) -> None:
    path = _new_file(tmp_path / "t.jsonl", ("a", None))
    mark = mark_of_file(path, lines=2)
    added = _line("b", "a") + b"\n" + _line("c", "b") + b"\n"
    _append_raw(path, added)
    foreign, new_mark = read_foreign_lines(path, mark)
    assert foreign is not None
    assert foreign.data == added
    assert foreign.offset == mark.end
    assert foreign.first_line == 2
    assert foreign.last_id == "c"
    assert foreign.ids == frozenset({"b", "c"})
    assert new_mark.end == path.stat().st_size
    assert new_mark.lines == 4
    assert new_mark.tail == path.read_bytes()[-CHECK_BYTES:]


def test_a_torn_foreign_last_line_is_not_read_until_complete(tmp_path: Path) -> None:
    path = _new_file(tmp_path / "t.jsonl", ("a", None))
    mark = mark_of_file(path, lines=2)
    line = _line("b", "a")
    _append_raw(path, line[:20])
    assert read_foreign_lines(path, mark) == (None, mark)
    _append_raw(path, line[20:] + b"\n" + _line("c", "b")[:10])
    foreign, new_mark = read_foreign_lines(path, mark)
    assert foreign is not None
    assert foreign.data == line + b"\n"
    assert foreign.last_id == "b"
    assert new_mark.end == mark.end + len(line) + 1


def test_a_shrunk_file_raises_and_nothing_is_written(tmp_path: Path) -> None:
    path = _new_file(tmp_path / "t.jsonl", ("a", None), ("b", "a"))
    mark = mark_of_file(path, lines=3)
    path.write_bytes(path.read_bytes()[: -len(_line("b", "a")) - 1])  # truncated by someone else
    before = path.read_bytes()
    with pytest.raises(TranscriptChangedError, match="shrank"):
        read_foreign_lines(path, mark)
    with pytest.raises(TranscriptChangedError, match="shrank"):
        append_following(path, _pending(_msg("n", "b")), mark=mark, fsync=False)
    assert path.read_bytes() == before


def test_a_replaced_file_raises_and_nothing_is_written(tmp_path: Path) -> None:
    path = _new_file(tmp_path / "t.jsonl", ("a", None))
    mark = mark_of_file(path, lines=2)
    other = _new_file(tmp_path / "other.jsonl", ("a", None), ("b", "a"))
    os.replace(other, path)  # same bytes up to the known end, another inode
    before = path.read_bytes()
    with pytest.raises(TranscriptChangedError, match="replaced"):
        append_following(path, _pending(_msg("n", "a")), mark=mark, fsync=False)
    assert path.read_bytes() == before


def test_a_rewritten_prefix_raises_and_nothing_is_written(tmp_path: Path) -> None:
    path = _new_file(tmp_path / "t.jsonl", ("a", None))
    mark = mark_of_file(path, lines=2)
    data = path.read_bytes()
    with path.open("r+b") as fh:  # same inode, the last known line rewritten, then grown
        fh.write(data[:-3] + b"Z}\n" + _line("b", "a") + b"\n")
    before = path.read_bytes()
    with pytest.raises(TranscriptChangedError, match="changed"):
        append_following(path, _pending(_msg("n", "a")), mark=mark, fsync=False)
    assert path.read_bytes() == before


# -- appending after others --------------------------------------------------------------------------


def test_append_without_other_writers_writes_as_is(tmp_path: Path) -> None:
    path = _new_file(tmp_path / "t.jsonl", ("a", None))
    mark = mark_of_file(path, lines=2)
    pending = _pending(_msg("n", "a"))
    line = pending.lines[0]
    assert append_following(path, pending, mark=mark, fsync=True)
    assert pending.foreign is None
    assert pending.lines == [line]
    assert pending.mark == FileMark(
        dev=mark.dev, ino=mark.ino, end=path.stat().st_size, tail=path.read_bytes()[-CHECK_BYTES:], lines=3
    )


def test_append_at_the_tip_follows_the_new_last_entry(tmp_path: Path) -> None:
    path = _new_file(tmp_path / "t.jsonl", ("a", None))
    mark = mark_of_file(path, lines=2)
    _append_raw(path, _line("b", "a") + b"\n")
    pending = _pending(_msg("n", "a"), _msg("m", "n"))
    assert append_following(path, pending, mark=mark, fsync=False)
    records = _records(path)
    assert [(r["id"], r["parentId"]) for r in records] == [("a", None), ("b", "a"), ("n", "b"), ("m", "n")]
    assert pending.entries[0].parent_id == "b"
    assert pending.foreign is not None
    assert pending.foreign.last_id == "b"
    assert pending.mark is not None
    assert pending.mark.end == path.stat().st_size


def test_append_away_from_the_tip_keeps_its_parent(tmp_path: Path) -> None:
    path = _new_file(tmp_path / "t.jsonl", ("a", None))
    mark = mark_of_file(path, lines=2)
    _append_raw(path, _line("b", "a") + b"\n")
    pending = _pending(_msg("n", "a"), follow=False)
    assert append_following(path, pending, mark=mark, fsync=False)
    assert [(r["id"], r["parentId"]) for r in _records(path)][-1] == ("n", "a")


def test_append_leaves_an_unclean_tail_to_the_repair(tmp_path: Path) -> None:
    path = _new_file(tmp_path / "t.jsonl", ("a", None))
    mark = mark_of_file(path, lines=2)
    _append_raw(path, b'{"type":"mess')
    before = path.read_bytes()
    assert not append_following(path, _pending(_msg("n", "a")), mark=mark, fsync=False)
    assert path.read_bytes() == before


def test_colliding_ids_are_redrawn_and_the_chain_follows() -> None:
    entries = [_msg("b", "a"), _msg("c", "b")]
    new_entries, lines = rebase_entries(
        entries, [encode_entry(e) for e in entries], parent="x", taken={"b"}, known={"a"}
    )
    first, second = new_entries
    assert first.id not in {"a", "b", "c", "x"}
    assert first.parent_id == "x"
    assert (second.id, second.parent_id) == ("c", first.id)
    assert [json.loads(line)["id"] for line in lines] == [first.id, "c"]


def test_a_strict_checkpoint_keeps_pointing_at_itself_when_its_id_is_redrawn() -> None:
    entry = CompactionEntry(
        id="k", parent_id="a", timestamp="t", summary="s", first_kept_entry_id="k", tokens_before=1
    )
    (moved,), (line,) = rebase_entries([entry], [encode_entry(entry)], parent="b", taken={"k"})
    assert isinstance(moved, CompactionEntry)
    assert moved.first_kept_entry_id == moved.id != "k"
    assert json.loads(line)["firstKeptEntryId"] == moved.id


def test_unchanged_entries_keep_their_lines_byte_for_byte() -> None:
    entries = [_msg("b", "a")]
    line = encode_entry(entries[0]) + b" "  # not what encode_entry would write again
    out, lines = rebase_entries(entries, [line], parent="a", taken=set())
    assert out == entries
    assert lines == [line]


# -- applying picked-up lines -----------------------------------------------------------------------


def test_apply_foreign_indexes_lines_with_the_loader_rules(tmp_path: Path) -> None:
    path = _new_file(tmp_path / "t.jsonl", ("a", None))
    index = load_transcript(path)
    mark = mark_after_load(path, index)
    assert mark is not None
    label = LabelEntry(id="l", parent_id="b", timestamp="t", target_id="a", label="start")
    _append_raw(path, _line("b", "a") + b"\nnot json\n" + encode_entry(label) + b"\n")
    foreign, _ = read_foreign_lines(path, mark)
    assert foreign is not None
    assert apply_foreign(index, foreign) == 2
    assert index.leaf_id == "l"
    assert [e.id for e in index.branch("l")] == ["a", "b", "l"]
    assert index.labels == {"a": "start"}
    assert index.line_numbers[-1] == 5
    assert load_transcript(path).diagnostics.invalid_lines == (4,)


def test_apply_foreign_does_not_add_the_unterminated_last_line_twice(tmp_path: Path) -> None:
    path = _new_file(tmp_path / "t.jsonl", ("a", None))
    _append_raw(path, _line("b", "a"))  # loaded without its newline
    index = load_transcript(path)
    mark = mark_after_load(path, index)
    assert mark is not None
    _append_raw(path, b"\n" + _line("c", "b") + b"\n")  # another writer completed it, then appended
    foreign, _ = read_foreign_lines(path, mark)
    assert foreign is not None
    assert apply_foreign(index, foreign) == 1
    assert index.ids == ["a", "b", "c"]


def test_apply_foreign_on_a_created_index_starts_its_scan(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(HEADER + b"\n")
    from sessionkeeper.records._codec import header_from_json
    from sessionkeeper.transcript._index import TranscriptIndex

    index = TranscriptIndex.empty(header_from_json(json.loads(HEADER)), path=path)
    mark = mark_of_file(path, lines=1)
    _append_raw(path, _line("a", None) + b"\n")
    foreign, _ = read_foreign_lines(path, mark)
    assert foreign is not None
    assert apply_foreign(index, foreign) == 1
    assert index.leaf_id == "a"
    assert index.line_numbers == [2]


# -- property: two writers that follow the tip build one chain --------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("AB"), st.integers(1, 3)), min_size=1, max_size=12))
def test_two_followers_interleaved_always_build_one_chain(tmp_path_factory, steps) -> None:
    path = tmp_path_factory.mktemp("follow") / "t.jsonl"
    path.write_bytes(HEADER + b"\n")
    writers = {}
    for name in "AB":
        index = load_transcript(path)
        writers[name] = [index, mark_after_load(path, index)]
    counter = 0
    for name, count in steps:
        index, mark = writers[name]
        parent = index.leaf_id
        entries = []
        for _ in range(count):
            counter += 1
            entries.append(_msg(f"e{counter:03d}", parent))
            parent = entries[-1].id
        pending = PendingWrite(entries, [encode_entry(e) for e in entries], follow=True, known=index.by_id)
        assert append_following(path, pending, mark=mark, fsync=False)
        if pending.foreign is not None:
            apply_foreign(index, pending.foreign)
        for entry, line in zip(pending.entries, pending.lines, strict=True):
            index.add(entry, line)
        writers[name][1] = pending.mark
    records = _records(path)
    assert len(records) == counter
    previous = None
    for record in records:
        assert record["parentId"] == previous
        previous = record["id"]
    for index, _ in writers.values():
        assert [e.id for e in index.branch(index.leaf_id)] == [r["id"] for r in records[: len(index)]]
