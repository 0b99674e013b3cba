"""The shared transcript index cache: hits, incremental extension on appends, invalidation, LRU."""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests._helpers import json_line, user_entry

from sessionkeeper.exceptions import TranscriptNotFoundError
from sessionkeeper.transcript import load_transcript
from sessionkeeper.transcript._index import TranscriptIndex
from sessionkeeper.transcript.file._index_cache import TranscriptIndexCache, shared_index_cache


TS = "2026-01-01T00:00:00.000Z"
HEADER = {"type": "session", "version": 3, "id": "s", "timestamp": TS, "cwd": "/w"}


def _view(index: TranscriptIndex) -> tuple[Any, ...]:
    """Everything a reader can observe."""
    return (
        index.diagnostics,
        index.build_context(),
        dict(index.labels),
        dict(index.label_timestamps),
        index.session_name,
        index.leaf_id,
        list(index.entries()),
        [index.path_positions(i) for i in index.by_id],
    )


def _bump_mtime(path: Path) -> None:
    st_ = path.stat()
    os.utime(path, ns=(st_.st_atime_ns, st_.st_mtime_ns + 1_000_000))


def test_unchanged_file_is_a_hit_and_appends_extend(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(
        json_line(HEADER, ensure_ascii=False, end=b"\n")
        + json_line(user_entry("a", None), ensure_ascii=False, end=b"\n")
        + json_line(user_entry("b", "a"), ensure_ascii=False, end=b"\n")
    )
    cache = TranscriptIndexCache()
    first = cache.get(path)
    assert cache.get(str(path)) is first
    with path.open("ab") as handle:
        handle.write(
            json_line(user_entry("c", "b", "new"), ensure_ascii=False, end=b"\n")
            + json_line(
                {"type": "session_info", "id": "d", "parentId": "c", "timestamp": TS, "name": " N "},
                ensure_ascii=False,
                end=b"\n",
            )
        )
    second = cache.get(path)
    assert second is not first
    assert len(first) == 2  # the published snapshot is never mutated
    assert _view(second) == _view(load_transcript(path))
    assert second.session_name == "N"
    assert cache.stats.hits == 1
    assert cache.stats.extensions == 1
    assert cache.stats.loads == 1


def test_rewrites_truncations_and_replacements_reload(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(
        json_line(HEADER, ensure_ascii=False, end=b"\n")
        + json_line(user_entry("a", None, "one"), ensure_ascii=False, end=b"\n")
    )
    cache = TranscriptIndexCache()
    cache.get(path)
    # same inode, grown, but the old end changed: not an append
    path.write_bytes(
        json_line(HEADER, ensure_ascii=False, end=b"\n")
        + json_line(user_entry("a", None, "two"), ensure_ascii=False, end=b"\n")
        + json_line(user_entry("b", "a"), ensure_ascii=False, end=b"\n")
    )
    assert _view(cache.get(path)) == _view(load_transcript(path))
    # truncated
    path.write_bytes(json_line(HEADER, ensure_ascii=False, end=b"\n"))
    _bump_mtime(path)
    assert len(cache.get(path)) == 0
    # replaced by rename (new inode), larger
    other = tmp_path / "new.jsonl"
    other.write_bytes(
        json_line(HEADER, ensure_ascii=False, end=b"\n")
        + json_line(user_entry("x", None), ensure_ascii=False, end=b"\n")
        + json_line(user_entry("y", "x"), ensure_ascii=False, end=b"\n")
    )
    other.replace(path)
    assert cache.get(path).leaf_id == "y"
    assert cache.stats.extensions == 0
    assert cache.stats.loads == 4


def test_torn_tail_is_not_extended_in_place(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(
        json_line(HEADER, ensure_ascii=False, end=b"\n")
        + json_line(user_entry("a", None), ensure_ascii=False, end=b"\n")
        + b'{"type":"mess'
    )
    cache = TranscriptIndexCache()
    assert cache.get(path).diagnostics.torn_tail is not None
    with path.open("ab") as handle:
        handle.write(b'age"}\n' + json_line(user_entry("b", "a"), ensure_ascii=False, end=b"\n"))
    assert _view(cache.get(path)) == _view(load_transcript(path))
    assert cache.stats.extensions == 0


def test_missing_file_raises_and_drops_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(
        json_line(HEADER, ensure_ascii=False, end=b"\n")
        + json_line(user_entry("a", None), ensure_ascii=False, end=b"\n")
    )
    cache = TranscriptIndexCache()
    cache.get(path)
    path.unlink()
    with pytest.raises(TranscriptNotFoundError):
        cache.get(path)
    assert len(cache) == 0


def test_lru_is_bounded(tmp_path: Path) -> None:
    cache = TranscriptIndexCache(max_entries=2)
    paths = []
    for n in range(3):
        path = tmp_path / f"{n}.jsonl"
        path.write_bytes(
            json_line(HEADER, ensure_ascii=False, end=b"\n")
            + json_line(user_entry(f"e{n}", None), ensure_ascii=False, end=b"\n")
        )
        paths.append(path)
    cache.get(paths[0])
    cache.get(paths[1])
    cache.get(paths[0])  # most recently used
    cache.get(paths[2])  # evicts paths[1]
    assert len(cache) == 2
    assert cache.stats.evictions == 1
    cache.get(paths[0])
    assert cache.stats.hits == 2
    cache.get(paths[1])
    assert cache.stats.loads == 4
    with pytest.raises(ValueError, match="max_entries"):
        TranscriptIndexCache(max_entries=0)


def test_concurrent_readers_share_one_load(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(
        json_line(HEADER, ensure_ascii=False, end=b"\n")
        + b"".join(
            json_line(user_entry(f"e{i}", f"e{i - 1}" if i else None), ensure_ascii=False, end=b"\n")
            for i in range(2000)
        )
    )
    cache = TranscriptIndexCache()
    results: list[TranscriptIndex] = []
    barrier = threading.Barrier(8)

    def read() -> None:
        barrier.wait()
        results.append(cache.get(path))

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(r) for r in results}) == 1
    assert cache.stats.loads == 1
    assert cache.stats.hits == 7


@pytest.mark.anyio
async def test_async_get_and_shared_instance(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(
        json_line(HEADER, ensure_ascii=False, end=b"\n")
        + json_line(user_entry("a", None), ensure_ascii=False, end=b"\n")
    )
    cache = TranscriptIndexCache()
    index = await cache.aget(path)
    assert index.leaf_id == "a"
    assert shared_index_cache() is shared_index_cache()
    cache.invalidate(path)
    cache.clear()
    assert len(cache) == 0


_PIECES = st.sampled_from(
    [
        b"user",
        b"label",
        b"name",
        b"junk",
        b"blank",
        b"array",
        b"header",
        b"noid",
        b"badutf8",
        b"lone",
        b"dup",
    ]
)


def _piece(kind: bytes, n: int, parent: str | None) -> tuple[bytes, str | None]:
    eid = f"e{n}"
    if kind == b"user":
        return json_line(user_entry(eid, parent, f"m{n}"), ensure_ascii=False, end=b"\n"), eid
    if kind == b"dup":
        return json_line(user_entry("e0", parent, f"dup{n}"), ensure_ascii=False, end=b"\n"), "e0"
    if kind == b"label":
        return json_line(
            {
                "type": "label",
                "id": eid,
                "parentId": parent,
                "timestamp": TS,
                "targetId": "e0",
                "label": f"L{n % 2}" if n % 3 else "",
            },
            ensure_ascii=False,
            end=b"\n",
        ), eid
    if kind == b"name":
        return json_line(
            {"type": "session_info", "id": eid, "parentId": parent, "timestamp": TS, "name": f"n{n}"},
            ensure_ascii=False,
            end=b"\n",
        ), eid
    if kind == b"junk":
        return b"{not json\n", parent
    if kind == b"blank":
        return b"  \n", parent
    if kind == b"array":
        return b"[1]\n", parent
    if kind == b"header":
        return json_line(HEADER, ensure_ascii=False, end=b"\n"), parent
    if kind == b"noid":
        return json_line(
            {"type": "custom", "parentId": parent, "timestamp": TS, "customType": "x"},
            ensure_ascii=False,
            end=b"\n",
        ), parent
    if kind == b"badutf8":
        return (
            b'{"type":"message","id":"'
            + eid.encode()
            + b'","parentId":null,"timestamp":"'
            + TS.encode()
            + b'","message":{"role":"user","content":"\xff","timestamp":1}}\n',
            eid,
        )
    return (
        b'{"type":"message","id":"'
        + eid.encode()
        + b'","parentId":null,"timestamp":"'
        + TS.encode()
        + b'","message":{"role":"user","content":"\\udc00","timestamp":1}}\n',
        eid,
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kinds=st.lists(_PIECES, max_size=30), cuts=st.lists(st.integers(0, 40), max_size=3), torn=st.booleans()
)
def test_extending_equals_loading_the_grown_file(kinds: list[bytes], cuts: list[int], torn: bool) -> None:
    parts = [json_line(HEADER, ensure_ascii=False, end=b"\n")]
    parent: str | None = None
    for n, kind in enumerate(kinds):
        data, parent = _piece(kind, n, parent)
        parts.append(data)
    if torn:
        parts.append(b'{"type":"message","id":"t')
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.jsonl"
        cache = TranscriptIndexCache()
        points = sorted({min(c, len(parts) - 1) for c in cuts} | {len(parts) - 1})
        written = 0
        for point in points:
            with path.open("ab") as handle:
                handle.write(b"".join(parts[written : point + 1]))
            written = point + 1
            assert _view(cache.get(path)) == _view(load_transcript(path))
