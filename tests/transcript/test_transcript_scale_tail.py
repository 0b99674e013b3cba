"""Bounded tail reads: read_tail_context / read_last_messages equal the full loader, always."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests._helpers import assistant_entry, json_line, user_entry

from sessionkeeper.exceptions import TranscriptFormatError, TranscriptNotFoundError
from sessionkeeper.transcript import MessageEntry, load_transcript, message_to_builtins
from sessionkeeper.transcript.file._tail import aread_tail_context, read_tail_context
from sessionkeeper.transcript.file._tail_messages import aread_last_messages, read_last_messages


TS = "2026-01-01T00:00:00.000Z"
USER_TS = "2026-01-01T00:00:01.000Z"
ANTHROPIC_REPLY: dict[str, Any] = {
    "ts": "2026-01-01T00:00:02.000Z",
    "api": "anthropic-messages",
    "provider": "anthropic",
}
HEADER = {
    "type": "session",
    "version": 3,
    "id": "sess-1",
    "timestamp": TS,
    "cwd": "/w",
}


def _write(tmp: Path, objs: list[Any], *, raw_tail: bytes = b"") -> Path:
    path = tmp / "t.jsonl"
    path.write_bytes(
        b"".join(
            o if isinstance(o, bytes) else json_line(o, ensure_ascii=False) + b"\n" for o in [HEADER, *objs]
        )
        + raw_tail
    )
    return path


def _roles(messages: Any) -> list[str]:
    return [message_to_builtins(m)["role"] for m in messages]


def _no_full_load(*_: Any) -> Any:
    raise AssertionError("the full loader was used")


def _full_messages(path: Path, n: int) -> tuple[Any, ...]:
    index = load_transcript(path)
    found = [e.message for e in index.branch(index.leaf_id) if isinstance(e, MessageEntry)]
    return tuple(found[-n:]) if n > 0 else ()


# -- behaviour -----------------------------------------------------------------------------------


def test_context_after_a_recent_compaction_reads_only_the_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    objs: list[Any] = [
        {
            "type": "thinking_level_change",
            "id": "t0",
            "parentId": None,
            "timestamp": TS,
            "thinkingLevel": "low",
        }
    ]
    parent = "t0"
    for i in range(3000):
        objs.append(user_entry(f"u{i}", parent, "x" * 300, ts=USER_TS))
        parent = f"u{i}"
    objs.append(
        {
            "type": "compaction",
            "id": "c1",
            "parentId": parent,
            "timestamp": "2026-01-01T00:00:03.000Z",
            "summary": "S",
            "firstKeptEntryId": "u2998",
            "tokensBefore": 10,
        }
    )
    objs.append(
        {
            "type": "thinking_level_change",
            "id": "t1",
            "parentId": "c1",
            "timestamp": TS,
            "thinkingLevel": "high",
        }
    )
    objs.append(assistant_entry("a1", "t1", model="m-2", **ANTHROPIC_REPLY))
    path = _write(tmp_path, objs)
    expected = load_transcript(path).build_context()
    # a budget far below the file size: the answer comes from the tail alone, not from the fallback
    monkeypatch.setattr("sessionkeeper.transcript.file._tail.load_transcript", _no_full_load)
    context = read_tail_context(path, max_tail_bytes=64 << 10, chunk_bytes=16 << 10)
    assert context == expected
    assert context.thinking_level == "high"
    assert _roles(context.messages) == ["compactionSummary", "user", "user", "assistant"]
    assert path.stat().st_size > 900_000


def test_thinking_level_at_the_start_is_found_by_reading_further_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    objs: list[Any] = [
        {
            "type": "thinking_level_change",
            "id": "t0",
            "parentId": None,
            "timestamp": TS,
            "thinkingLevel": "medium",
        }
    ]
    parent = "t0"
    for i in range(200):
        objs.append(user_entry(f"u{i}", parent, "y" * 200, ts=USER_TS))
        parent = f"u{i}"
    objs.append(
        {
            "type": "compaction",
            "id": "c1",
            "parentId": parent,
            "timestamp": TS,
            "summary": "S",
            "firstKeptEntryId": "u199",
            "tokensBefore": 10,
        }
    )
    objs.append(assistant_entry("a1", "c1", model="m", **ANTHROPIC_REPLY))
    path = _write(tmp_path, objs)
    expected = load_transcript(path).build_context()
    monkeypatch.setattr("sessionkeeper.transcript.file._tail.load_transcript", _no_full_load)
    # past the 1 KiB budget only the thinking level is missing: the walk goes on without keeping lines
    for budget in (1 << 10, 1 << 30):
        context = read_tail_context(path, max_tail_bytes=budget, chunk_bytes=512)
        assert context.thinking_level == "medium"
        assert context == expected


def test_a_parent_seen_later_in_the_file_sends_the_lean_walk_to_the_full_loader(tmp_path: Path) -> None:
    thinking = {"type": "thinking_level_change", "id": "t0", "parentId": None, "timestamp": TS}
    objs: list[Any] = [{**thinking, "thinkingLevel": "low"}]
    parent = "t0"
    for i in range(100):
        objs.append(user_entry(f"u{i}", parent, "y" * 200, ts=USER_TS))
        parent = f"u{i}"
    objs.append({**thinking, "id": "u5", "parentId": "u4", "thinkingLevel": "high"})  # duplicate id, later
    for i in range(100, 140):
        objs.append(user_entry(f"u{i}", parent, "y" * 200, ts=USER_TS))
        parent = f"u{i}"
    objs.append({"type": "compaction", "id": "c1", "parentId": parent, "timestamp": TS, "summary": "S",
                 "firstKeptEntryId": "u139", "tokensBefore": 10})  # fmt: skip
    objs.append(assistant_entry("a1", "c1", model="m", **ANTHROPIC_REPLY))
    path = _write(tmp_path, objs)
    context = read_tail_context(path, max_tail_bytes=1 << 10, chunk_bytes=256)
    assert context == load_transcript(path).build_context()
    assert context.thinking_level == "high"  # u6's parent u5 is the later duplicate (a thinking change)


def test_leaf_is_the_last_entry_with_an_id_and_later_duplicates_win(tmp_path: Path) -> None:
    objs: list[Any] = [
        user_entry("a", None, "first a", ts=USER_TS),
        user_entry("b", "a", "b", ts=USER_TS),
        user_entry("a", None, "second a", ts=USER_TS),  # duplicate id: the later one wins in the index
        user_entry("c", "a", "c", ts=USER_TS),
        {"type": "custom", "parentId": "c", "timestamp": TS, "customType": "no-id"},
    ]
    path = _write(tmp_path, objs, raw_tail=b'{"type":"message","id":"torn"')
    context = read_tail_context(path, chunk_bytes=8)
    assert [message_to_builtins(m)["content"] for m in context.messages] == ["second a", "c"]
    assert context == load_transcript(path).build_context()


def test_cycles_stop_the_walk_like_the_loader(tmp_path: Path) -> None:
    objs: list[Any] = [
        user_entry("a", "c", "a", ts=USER_TS),
        user_entry("b", "a", "b", ts=USER_TS),
        user_entry("c", "b", "c", ts=USER_TS),
    ]
    path = _write(tmp_path, objs)
    assert read_tail_context(path) == load_transcript(path).build_context()
    assert len(read_tail_context(path).messages) == 3


def test_invalid_lines_bad_utf8_and_repeated_headers_are_read_like_the_loader(tmp_path: Path) -> None:
    objs: list[Any] = [
        user_entry("a", None, "a", ts=USER_TS),
        b"not json\n",
        b"\n",
        b"[1,2]\n",
        json_line(HEADER, ensure_ascii=False) + b"\n",
        b'{"type":"message","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"caf\xe9","timestamp":1}}\n',
        b'{"type":"message","id":"c","parentId":"b","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"\\ud800","timestamp":1}}\n',
    ]
    path = _write(tmp_path, objs)
    assert read_tail_context(path, chunk_bytes=16) == load_transcript(path).build_context()
    assert read_last_messages(path, 2, chunk_bytes=16) == _full_messages(path, 2)


def test_legacy_files_are_migrated_by_the_full_loader(pi_samples: Path) -> None:
    path = pi_samples / "v1-legacy.jsonl"
    assert read_tail_context(path) == load_transcript(path).build_context()
    assert read_last_messages(path, 5) == _full_messages(path, 5)


def test_errors_match_the_loader(tmp_path: Path) -> None:
    with pytest.raises(TranscriptNotFoundError):
        read_tail_context(tmp_path / "missing.jsonl")
    with pytest.raises(TranscriptNotFoundError):
        read_last_messages(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"type":"message","id":"a"}\n')
    with pytest.raises(TranscriptFormatError):
        read_tail_context(bad)
    with pytest.raises(TranscriptFormatError):
        read_last_messages(tmp_path)


def test_header_only_and_id_less_files(tmp_path: Path) -> None:
    path = _write(tmp_path, [])
    assert read_tail_context(path) == load_transcript(path).build_context()
    assert read_last_messages(path) == ()
    path = _write(
        tmp_path,
        [
            {
                "type": "message",
                "parentId": None,
                "timestamp": TS,
                "message": {"role": "user", "content": "no id", "timestamp": 1},
            }
        ],
    )
    assert read_tail_context(path) == load_transcript(path).build_context()


def test_last_messages_follow_the_branch_and_skip_non_messages(tmp_path: Path) -> None:
    objs: list[Any] = [
        user_entry("a", None, "a", ts=USER_TS),
        user_entry("dead", "a", "abandoned branch", ts=USER_TS),
        {
            "type": "model_change",
            "id": "m",
            "parentId": "a",
            "timestamp": TS,
            "provider": "p",
            "modelId": "q",
        },
        assistant_entry("b", "m", model="q", **ANTHROPIC_REPLY),
        {
            "type": "compaction",
            "id": "c",
            "parentId": "b",
            "timestamp": TS,
            "summary": "S",
            "firstKeptEntryId": "b",
            "tokensBefore": 1,
        },
        user_entry("d", "c", "d", ts=USER_TS),
    ]
    path = _write(tmp_path, objs)
    got = read_last_messages(path, 10)
    assert _roles(got) == ["user", "assistant", "user"]
    assert read_last_messages(path, 2) == got[1:]
    assert read_last_messages(path, 0) == ()


def test_every_sample_matches_the_full_loader(pi_samples: Path, openclaw_samples: Path) -> None:
    files = sorted(pi_samples.glob("*.jsonl")) + sorted(openclaw_samples.rglob("*.jsonl"))
    checked = 0
    for path in files:
        try:
            expected = load_transcript(path).build_context()
        except TranscriptFormatError:
            with pytest.raises(TranscriptFormatError):
                read_tail_context(path)
            continue
        assert read_tail_context(path, chunk_bytes=4096) == expected, path
        assert read_last_messages(path, 3, chunk_bytes=512) == _full_messages(path, 3), path
        checked += 1
    assert checked > 10


# -- property: random trees ------------------------------------------------------------------------

_KINDS = ("user", "assistant", "model", "thinking", "compaction", "custom", "branch", "noid", "junk", "label")


@st.composite
def transcripts(draw: st.DrawFn) -> list[Any]:
    ops = draw(st.lists(st.tuples(st.sampled_from(_KINDS), st.integers(0, 10**6)), max_size=40))
    ids: list[str] = []
    leaf: str | None = None
    out: list[Any] = []
    for n, (kind, r) in enumerate(ops):
        eid = f"e{n}" if r % 11 else (ids[r % len(ids)] if ids else f"e{n}")  # sometimes a duplicate id
        parent = leaf
        if kind == "branch":
            parent = ids[r % len(ids)] if ids and r % 3 else None
            kind = "user"
        if r % 17 == 0:
            parent = "missing"
        if kind == "user":
            obj: Any = user_entry(eid, parent, f"text {n}", ts=USER_TS)
        elif kind == "assistant":
            obj = assistant_entry(eid, parent, model=f"m{r % 3}", **ANTHROPIC_REPLY)
        elif kind == "model":
            obj = {
                "type": "model_change",
                "id": eid,
                "parentId": parent,
                "timestamp": TS,
                "provider": "p",
                "modelId": f"x{r % 4}",
            }
        elif kind == "thinking":
            obj = {
                "type": "thinking_level_change",
                "id": eid,
                "parentId": parent,
                "timestamp": TS,
                "thinkingLevel": ["low", "high", "off"][r % 3],
            }
        elif kind == "compaction":
            kept = ids[r % len(ids)] if ids and r % 5 else "nowhere"
            obj = {
                "type": "compaction",
                "id": eid,
                "parentId": parent,
                "timestamp": TS,
                "summary": f"sum {n}",
                "firstKeptEntryId": kept,
                "tokensBefore": r,
            }
        elif kind == "custom":
            obj = {
                "type": "custom_message",
                "id": eid,
                "parentId": parent,
                "timestamp": TS,
                "customType": "c",
                "content": "cm",
                "display": True,
            }
        elif kind == "label":
            obj = {
                "type": "label",
                "id": eid,
                "parentId": parent,
                "timestamp": TS,
                "targetId": leaf or "e0",
                "label": "L",
            }
        elif kind == "noid":
            out.append({"type": "custom", "parentId": parent, "timestamp": TS, "customType": "noid"})
            continue
        else:
            out.append(b"{broken\n" if r % 2 else b"   \n")
            continue
        out.append(obj)
        ids.append(eid)
        leaf = eid
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    objs=transcripts(),
    chunk=st.integers(1, 600),
    budget=st.sampled_from([200, 2000, 1 << 30]),
    n=st.integers(0, 8),
)
def test_tail_reads_equal_the_full_loader_on_random_trees(
    objs: list[Any], chunk: int, budget: int, n: int
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder), objs)
        expected = load_transcript(path).build_context()
        assert read_tail_context(path, max_tail_bytes=budget, chunk_bytes=chunk) == expected
        assert read_last_messages(path, n, max_tail_bytes=budget, chunk_bytes=chunk) == _full_messages(
            path, n
        )


@pytest.mark.anyio
async def test_async_variants_match(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        [user_entry("a", None, "a", ts=USER_TS), assistant_entry("b", "a", model="m", **ANTHROPIC_REPLY)],
    )
    assert await aread_tail_context(path) == load_transcript(path).build_context()
    assert await aread_last_messages(path, 1) == _full_messages(path, 1)


def test_lines_nested_too_deeply_are_invalid_lines_as_in_the_loader(tmp_path: Path) -> None:
    deep = b'{"type":"custom","id":"d","parentId":"a","timestamp":"' + TS.encode() + b'","x":'
    deep += b"[" * 5000 + b"]" * 5000 + b"}\n"
    path = _write(
        tmp_path, [user_entry("a", None, "a", ts=USER_TS), deep, user_entry("b", "a", "b", ts=USER_TS), deep]
    )
    assert read_tail_context(path, chunk_bytes=64) == load_transcript(path).build_context()
    assert read_tail_context(path, max_tail_bytes=10, chunk_bytes=64) == load_transcript(path).build_context()
    assert read_last_messages(path, 5) == _full_messages(path, 5)
