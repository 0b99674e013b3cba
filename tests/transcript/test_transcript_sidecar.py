"""The persisted ancestry index of tail reads (issue #7, scenario B): same answers as the full loader."""

from __future__ import annotations

import json
import os
import shutil
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests._helpers import assistant_entry, header_obj, json_line, user_entry

from sessionkeeper.transcript import load_transcript
from sessionkeeper.transcript.file import _sidecar as sidecar
from sessionkeeper.transcript.file._sidecar_build import build_index
from sessionkeeper.transcript.file._tail import aread_tail_context, read_tail_context


TS = "2026-01-01T00:00:00.000Z"
LONG = "y" * 120  # a user message of 120 characters
BUDGET = 2 << 10  # bytes read backwards before the walk builds the index


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("SESSIONKEEPER_CACHE_DIR", str(folder))
    return folder / "tail-index"


def _thinking(eid: str, parent: str | None, level: str) -> dict[str, Any]:
    return {"type": "thinking_level_change", "id": eid, "parentId": parent, "timestamp": TS,
            "thinkingLevel": level}  # fmt: skip


def _compaction(eid: str, parent: str, kept: str) -> dict[str, Any]:
    return {"type": "compaction", "id": eid, "parentId": parent, "timestamp": TS, "summary": "S",
            "firstKeptEntryId": kept, "tokensBefore": 10}  # fmt: skip


def _turns(prefix: str, parent: str, count: int) -> tuple[list[dict[str, Any]], str]:
    out = []
    for i in range(count):
        out.append(user_entry(f"{prefix}u{i}", parent, LONG))
        out.append(assistant_entry(f"{prefix}a{i}", f"{prefix}u{i}", model="m1"))
        parent = f"{prefix}a{i}"
    return out, parent


def _tail(prefix: str, parent: str) -> tuple[list[dict[str, Any]], str]:
    """A compaction keeping the last turn, then a reply: only the thinking level is still unknown."""
    kept, parent = _turns(prefix + "k", parent, 1)
    after = [
        _compaction(prefix + "c", parent, kept[0]["id"]),
        assistant_entry(prefix + "z", prefix + "c", model="m1"),
    ]
    return kept + after, prefix + "z"


def scenario_b(turns: int = 60, level: str = "medium") -> tuple[list[dict[str, Any]], str]:
    body, parent = _turns("", "t0", turns)
    tail, leaf = _tail("x", parent)
    return [_thinking("t0", None, level), *body, *tail], leaf


def _write(path: Path, objs: list[Any], header: dict[str, Any] | None = None) -> Path:
    path.write_bytes(
        b"".join(
            o if isinstance(o, bytes) else json_line(o, end=b"\n")
            for o in [header or header_obj(sid="sess-1"), *objs]
        )
    )
    return path


def _append(path: Path, objs: list[Any]) -> None:
    with path.open("ab") as out:
        out.write(b"".join(o if isinstance(o, bytes) else json_line(o, end=b"\n") for o in objs))


def _check(path: Path, **kwargs: Any) -> Any:
    context = read_tail_context(path, max_tail_bytes=BUDGET, chunk_bytes=512, **kwargs)
    assert context == load_transcript(path).build_context()
    return context


def _index_file(path: Path) -> Path:
    return sidecar.index_path(path)[0]


def _no_build(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the saved index should have answered")


def test_first_read_builds_the_index_in_the_cache_dir_and_the_next_read_uses_it(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    objs, _ = scenario_b()
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    path = _write(sessions / "s.jsonl", objs)
    assert _check(path).thinking_level == "medium"
    index = _index_file(path)
    assert index.parent == cache_dir
    assert stat.S_IMODE(index.stat().st_mode) == 0o600
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700
    assert sorted(p.name for p in sessions.iterdir()) == ["s.jsonl"]  # nothing next to the transcript
    monkeypatch.setattr("sessionkeeper.transcript.file._tail.build_index", _no_build)
    monkeypatch.setattr("sessionkeeper.transcript.file._tail.load_transcript", _no_build)
    # the index answers as soon as the live context was read: a small budget is not even reached
    assert read_tail_context(path, max_tail_bytes=1 << 30, chunk_bytes=512).thinking_level == "medium"


def test_the_index_maps_every_entry_to_its_nearest_thinking_change(tmp_path: Path) -> None:
    unusable = {"type": "thinking_level_change", "id": "t2", "parentId": "b1", "timestamp": TS}
    objs = [_thinking("t0", None, "low"), user_entry("u1", "t0", LONG), _thinking("t1", "u1", "high"),
            user_entry("u2", "t1", LONG), user_entry("b1", "u1", LONG), unusable,
            user_entry("b2", "t2", LONG), user_entry("r1", None, LONG),
            user_entry("o1", "nowhere", LONG)]  # fmt: skip
    path = _write(tmp_path / "t.jsonl", objs)
    st_ = path.stat()
    with path.open("rb") as handle:
        start = len(json_line(header_obj(sid="sess-1"), end=b"\n"))
        index = build_index(
            handle.fileno(), start=start, size=st_.st_size, real_path=str(path), session_id="sess-1", st=st_
        )
        assert index is not None and not index.unsupported
        # t2 has no usable level (no thinkingLevel): b2 inherits t0 through b1 -> u1
        assert list(index.thinking) == [0, 0, 2, 2, 0, 0, 0, -1, -1]
        assert index.find(handle.fileno(), "b1") == 4
        assert index.find(handle.fileno(), "nope") is None
        assert index.covered == st_.st_size
        assert index.last_id == "o1"
        assert len(index.unresolved) == 1  # o1's parent "nowhere"
        assert not index.accepts(handle.fileno(), ["nowhere"])  # would become o1's parent
        assert not index.accepts(handle.fileno(), ["u2"])  # would shadow u2
        assert index.accepts(handle.fileno(), ["new"])


@pytest.mark.parametrize("level", ["high", "off"])
def test_appends_after_the_index_was_written(tmp_path: Path, level: str) -> None:
    objs, leaf = scenario_b()
    path = _write(tmp_path / "t.jsonl", objs)
    _check(path)
    before = _index_file(path).read_bytes()
    more, leaf = _turns("n", leaf, 3)  # a small append: the walk reads it, the index still answers
    _append(path, more)
    assert _check(path).thinking_level == "medium"
    assert _index_file(path).read_bytes() == before
    # a thinking change on an early branch, then a new tail on that branch
    tail, _ = _tail("q", "bu3")
    _append(path, [_thinking("tb", "a2", level), user_entry("bu3", "tb", LONG), *tail])
    assert _check(path).thinking_level == level
    # a long append (more than the budget): the index is extended from its covered offset
    body, parent = _turns("g", leaf, 40)
    tail, _ = _tail("w", parent)
    _append(path, body + tail)
    assert _check(path).thinking_level == "medium"
    index_bytes = _index_file(path).read_bytes()
    assert len(index_bytes) > len(before)
    with path.open("rb") as handle:
        loaded = sidecar.load_index(
            _index_file(path), real_path=str(path.resolve()), session_id="sess-1", fd=handle.fileno(),
            st=os.fstat(handle.fileno()),
        )  # fmt: skip
        assert loaded is not None
        with loaded:
            assert loaded.covered == path.stat().st_size
            assert len(loaded.offsets) == len(load_transcript(path).ids)


def test_appended_duplicate_ids_and_found_parents_reject_the_index(tmp_path: Path) -> None:
    objs, leaf = scenario_b()
    objs.insert(5, user_entry("early", "lost", LONG))  # its parent "lost" is not in the file (yet)
    path = _write(tmp_path / "t.jsonl", objs)
    _check(path)
    # a later duplicate of a0 (a thinking change): a1's parent is now that duplicate (spec §9 item 2)
    tail, _ = _tail("d", leaf)
    _append(path, [_thinking("a0", "u0", "high"), *tail])
    assert _check(path).thinking_level == "high"
    # the missing parent appears: still the full loader's answer
    path2 = _write(tmp_path / "t2.jsonl", objs)
    _check(path2)
    tail, _ = _tail("e", "early")
    _append(path2, [_thinking("lost", None, "minimal"), *tail])
    assert _check(path2).thinking_level == "minimal"


def test_duplicate_ids_in_the_prefix_record_an_unsupported_index(tmp_path: Path) -> None:
    objs, _ = scenario_b()
    objs.insert(10, _thinking("u1", "a0", "high"))  # a duplicate id: a2's grand-parent u1 is the later one
    path = _write(tmp_path / "t.jsonl", objs)
    assert _check(path).thinking_level == "high"
    data = _index_file(path).read_bytes()
    assert len(data) < 300  # no arrays: the readers walk this file
    assert _check(path).thinking_level == "high"


def test_forward_references_record_an_unsupported_index(tmp_path: Path) -> None:
    objs, _ = scenario_b()
    objs[3]["parentId"] = "late"  # a1 -> late, written after it
    objs.insert(20, _thinking("late", "u0", "low"))
    path = _write(tmp_path / "t.jsonl", objs)
    assert _check(path).thinking_level == "low"
    assert len(_index_file(path).read_bytes()) < 300


def _replace(path: Path, objs: list[Any], *, same_inode: bool) -> None:
    data = b"".join(json_line(o, end=b"\n") for o in [header_obj(sid="sess-1"), *objs])
    if same_inode:
        with path.open("r+b") as out:
            out.truncate(0)
            out.write(data)
    else:
        tmp = path.with_suffix(".new")
        tmp.write_bytes(data)
        tmp.replace(path)


@pytest.mark.parametrize("same_inode", [True, False])
def test_a_rewritten_file_rejects_the_index(tmp_path: Path, same_inode: bool) -> None:
    objs, _ = scenario_b(level="low")
    path = _write(tmp_path / "t.jsonl", objs)
    assert _check(path).thinking_level == "low"
    # a repair or migration rewrite: same session, other bytes (longer, so not a truncation)
    objs2, _ = scenario_b(turns=70, level="high")
    _replace(path, objs2, same_inode=same_inode)
    assert _check(path).thinking_level == "high"
    # truncated to a shorter file
    objs3, _ = scenario_b(turns=30, level="minimal")
    _replace(path, objs3, same_inode=same_inode)
    assert _check(path).thinking_level == "minimal"


def test_another_session_at_the_same_path_rejects_the_index(tmp_path: Path) -> None:
    objs, _ = scenario_b(level="low")
    path = _write(tmp_path / "t.jsonl", objs)
    _check(path)
    objs2, _ = scenario_b(level="high")
    size = path.stat().st_size
    _write(path, objs2, header=header_obj("sess-2"))
    assert path.stat().st_size == size + 1  # one byte more: an index keyed by length alone would match
    assert _check(path).thinking_level == "high"


def _corruptions(data: bytes) -> list[bytes]:
    head = sidecar._HEAD.size
    flipped_head = bytearray(data)
    flipped_head[40] ^= 0xFF
    arrays_zeroed = data[: len(data) - 400] + b"\0" * 400  # the thinking array: every entry -> 0
    arrays_ones = data[: len(data) - 400] + b"\xff" * 400  # -> -1: wrong answer unless verified
    return [
        b"",
        b"garbage",
        data[: head - 1],
        data[:-1],
        data + b"\0" * 8,
        b"X" + data[1:],
        bytes(flipped_head),
        arrays_zeroed,
        arrays_ones,
        os.urandom(len(data)),
    ]


def test_a_corrupt_index_is_ignored(tmp_path: Path) -> None:
    objs, _ = scenario_b(turns=150, level="high")
    objs[0] = _thinking("t0", None, "low")
    objs.insert(2, _thinking("t9", "t0", "high"))
    objs[3]["parentId"] = "t9"
    path = _write(tmp_path / "t.jsonl", objs)
    assert _check(path).thinking_level == "high"
    good = _index_file(path).read_bytes()
    for bad in _corruptions(good):
        _index_file(path).write_bytes(bad)
        assert _check(path).thinking_level == "high"


def test_a_foreign_index_and_a_directory_in_its_place_are_ignored(tmp_path: Path) -> None:
    objs, _ = scenario_b(level="low")
    one = _write(tmp_path / "one.jsonl", objs)
    objs2, _ = scenario_b(level="high")
    two = _write(tmp_path / "two.jsonl", objs2)
    _check(one)
    shutil.copy(_index_file(one), _index_file(two))  # the other file's index under this one's name
    assert _check(two).thinking_level == "high"
    _index_file(two).unlink()
    _index_file(two).mkdir()
    assert _check(two).thinking_level == "high"


def test_an_unwritable_cache_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("SESSIONKEEPER_CACHE_DIR", str(blocker))
    objs, _ = scenario_b(level="high")
    path = _write(tmp_path / "t.jsonl", objs)
    assert _check(path).thinking_level == "high"
    assert _check(path).thinking_level == "high"


def test_ancestry_index_false_reads_and_writes_nothing(tmp_path: Path, cache_dir: Path) -> None:
    objs, _ = scenario_b(level="high")
    path = _write(tmp_path / "t.jsonl", objs)
    assert _check(path, ancestry_index=False).thinking_level == "high"
    assert not cache_dir.exists()


def test_cache_dir_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSIONKEEPER_CACHE_DIR", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "b"))
    assert sidecar.index_cache_dir() == tmp_path / "a" / "tail-index"
    monkeypatch.delenv("SESSIONKEEPER_CACHE_DIR")
    assert sidecar.index_cache_dir() == tmp_path / "b" / "sessionkeeper" / "tail-index"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert sidecar.index_cache_dir() == tmp_path / "h" / ".cache" / "sessionkeeper" / "tail-index"


def test_symlinked_paths_share_one_index(tmp_path: Path, cache_dir: Path) -> None:
    objs, _ = scenario_b(level="high")
    path = _write(tmp_path / "t.jsonl", objs)
    link = tmp_path / "link.jsonl"
    link.symlink_to(path)
    assert _check(link).thinking_level == "high"
    assert _index_file(link) == _index_file(path)
    assert len(list(cache_dir.iterdir())) == 1


def test_every_pi_sample_matches_with_the_index(pi_samples: Path) -> None:
    for sample in sorted(pi_samples.rglob("*.jsonl")):
        expected = load_transcript(sample).build_context()
        for budget in (256, 1 << 30):
            for _ in range(2):  # the second read may use the index the first one saved
                assert read_tail_context(sample, max_tail_bytes=budget, chunk_bytes=200) == expected


def test_samples_with_the_thinking_level_at_the_start_use_the_index(pi_samples: Path, tmp_path: Path) -> None:
    """Each sample, cut after its first thinking change and followed by turns and a compacted tail."""
    used = 0
    for sample in sorted(pi_samples.rglob("*.jsonl")):
        index = load_transcript(sample)
        if index.header_raw.get("version") != 3 or index.leaf_id is None:
            continue
        path = tmp_path / sample.name
        shutil.copy(sample, path)
        body, parent = _turns("s", index.leaf_id, 30)
        tail, _ = _tail("st", parent)
        _append(path, body + tail)
        first = _check(path)
        second = _check(path)
        assert first == second
        used += _index_file(path).exists()
    assert used >= 3


# --- random branchy trees -------------------------------------------------------------------------

_LEVELS = ["low", "high", "off", "minimal"]


@st.composite
def trees(draw: st.DrawFn) -> list[Any]:
    """Branchy transcripts: thinking changes anywhere, branches to any earlier entry, sometimes a
    duplicate id, a missing or forward parent; ending with a compacted tail."""
    ops = draw(st.lists(st.tuples(st.sampled_from("uatbdmfx"), st.integers(0, 10**6)), max_size=60))
    out: list[Any] = []
    ids: list[str] = []
    leaf: str | None = None
    for n, (kind, r) in enumerate(ops):
        eid = f"e{n}"
        parent = leaf
        if kind == "b" and ids:
            parent, kind = ids[r % len(ids)], "u"
        elif kind == "d" and ids:
            eid, kind = ids[r % len(ids)], "t"  # a duplicate id
        elif kind == "m":
            parent, kind = "missing", "u"
        elif kind == "f":
            parent, kind = f"e{n + 1 + r % 3}", "u"  # a forward reference
        elif kind == "x":
            out.append({"type": "thinking_level_change", "id": eid, "parentId": parent, "timestamp": TS})
            ids.append(eid)
            leaf = eid
            continue
        if kind == "t":
            out.append(_thinking(eid, parent, _LEVELS[r % 4]))
        elif kind == "a":
            out.append(assistant_entry(eid, parent, model="m1"))
        else:
            out.append(user_entry(eid, parent, "z" * (r % 300)))
        ids.append(eid)
        leaf = eid
    return out


@st.composite
def grown(draw: st.DrawFn) -> tuple[list[Any], list[Any]]:
    first = draw(trees())
    second = draw(trees())
    # rename the second part's ids so they do not all collide (some do, on purpose, via "d" ops)
    renamed = json.loads(json.dumps(second).replace('"e', '"g'))
    ids = [o["id"] for o in first if isinstance(o, dict) and "id" in o]
    if ids and renamed:
        renamed[0]["parentId"] = ids[draw(st.integers(0, len(ids) - 1))]
    return first, renamed


def _with_tail(objs: list[Any], prefix: str) -> list[Any]:
    leaf = next((o["id"] for o in reversed(objs) if isinstance(o, dict) and "id" in o), None)
    pad, parent = _turns(prefix + "p", leaf or "", 6)  # more than the budget before the compaction
    if leaf is None:
        pad[0]["parentId"] = None
    tail, _ = _tail(prefix, parent)
    return objs + pad + tail


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(parts=grown(), cut_tail=st.booleans())
def test_random_trees_and_appends_equal_the_full_loader(
    parts: tuple[list[Any], list[Any]], cut_tail: bool, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.mktemp("tree")
    first, second = parts
    path = _write(folder / "t.jsonl", _with_tail(first, "h"))
    _check(path)
    _check(path)
    rest = _with_tail(second, "k")
    if cut_tail:  # the last line is written without its newline
        data = b"".join(json_line(o, end=b"\n") for o in rest)[:-1]
        _append(path, [data])
    else:
        _append(path, rest)
    _check(path)
    _check(path)


def test_no_home_and_no_cache_variables_reads_without_an_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("SESSIONKEEPER_CACHE_DIR", "XDG_CACHE_HOME", "HOME"):
        monkeypatch.delenv(name, raising=False)

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", no_home)
    objs, _ = scenario_b(level="high")
    path = _write(tmp_path / "t.jsonl", objs)
    assert _check(path).thinking_level == "high"


def test_indexes_of_deleted_transcripts_and_stale_temp_files_are_pruned(
    tmp_path: Path, cache_dir: Path
) -> None:
    objs, _ = scenario_b(level="high")
    gone = _write(tmp_path / "gone.jsonl", objs)
    kept = _write(tmp_path / "kept.jsonl", objs)
    _check(gone)
    _check(kept)
    gone.unlink()
    stale, fresh, other = cache_dir / "x.idx.1.a.tmp", cache_dir / "y.idx.1.b.tmp", cache_dir / "notes.txt"
    for item in (stale, fresh, other):
        item.write_text("x")
    os.utime(stale, (1, 1))
    (cache_dir / "junk.idx").write_bytes(b"junk")
    assert sidecar.prune_index_dir(cache_dir) == 2
    assert sorted(p.name for p in cache_dir.iterdir()) == sorted(
        [_index_file(kept).name, fresh.name, other.name, "junk.idx"]
    )


def test_concurrent_first_reads_agree(tmp_path: Path, cache_dir: Path) -> None:
    objs, _ = scenario_b(turns=200, level="high")
    path = _write(tmp_path / "t.jsonl", objs)
    expected = load_transcript(path).build_context()
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(
            pool.map(lambda _: read_tail_context(path, max_tail_bytes=BUDGET, chunk_bytes=512), range(8))
        )
    assert all(result == expected for result in results)
    assert [p.suffix for p in cache_dir.iterdir()] == [".idx"]  # one index, no temp file left


@pytest.mark.anyio
async def test_async_variant_uses_the_index(tmp_path: Path, cache_dir: Path) -> None:
    objs, _ = scenario_b(turns=3000, level="minimal")  # 1.5 MB: more than the first 1 MiB read
    path = _write(tmp_path / "t.jsonl", objs)
    context = await aread_tail_context(path, max_tail_bytes=BUDGET)
    assert context == load_transcript(path).build_context()
    assert context.thinking_level == "minimal"
    assert await anyio.Path(_index_file(path)).exists()
    assert await aread_tail_context(path, max_tail_bytes=BUDGET, ancestry_index=False) == context
