"""Tail reads and the ancestry index on numeric and falsy entry ids, as the loader and pi read them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import assistant_entry, user_entry

from sessionkeeper.transcript import load_transcript
from sessionkeeper.transcript.file._tail import read_tail_context, try_read_tail_context
from sessionkeeper.transcript.file._tail_messages import read_last_messages


TS = "2026-01-01T00:00:00.000Z"


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("SESSIONKEEPER_CACHE_DIR", str(folder))
    return folder / "tail-index"


def _write(path: Path, objs: list[Any]) -> Path:
    header = {"type": "session", "version": 3, "id": "s", "timestamp": TS, "cwd": "/w"}
    path.write_bytes(b"".join(json.dumps(o).encode() + b"\n" for o in [header, *objs]))
    return path


@pytest.mark.parametrize("leaf", [0, False, ""])
@pytest.mark.parametrize("idless_last", [False, True])
def test_a_falsy_leaf_reads_as_in_the_loader_and_pi(tmp_path: Path, leaf: Any, idless_last: bool) -> None:
    # pi: a falsy leaf id (0, false, "") falls back to the file's last entry (with or without an id),
    # and getBranch of a falsy leaf (read_last_messages' history) is empty
    objs = [
        user_entry("a", None, text="u"),
        {
            "type": "compaction",
            "id": "c",
            "parentId": "a",
            "timestamp": TS,
            "summary": "S",
            "firstKeptEntryId": "a",
            "tokensBefore": 1,
        },
        user_entry(leaf, "c", text="u"),
    ]
    if idless_last:  # its falsy parent ends the walk at once: the context is empty
        objs.append({"type": "custom", "parentId": leaf, "timestamp": TS, "customType": "x"})
    path = _write(tmp_path / "t.jsonl", objs)
    index = load_transcript(path)
    expected = index.build_context()
    assert (expected.messages == ()) is idless_last
    assert read_tail_context(path) == expected
    assert read_tail_context(path, max_tail_bytes=10, chunk_bytes=16) == expected
    found = try_read_tail_context(path)
    assert found is None or (found.context == expected and found.leaf_id == index.leaf_id)
    assert read_last_messages(path, 5) == ()


def test_the_ancestry_index_of_a_file_ending_in_a_numeric_id_is_saved(
    tmp_path: Path, cache_dir: Path
) -> None:
    # the index records the last id it covered: a number id was not JSON-encodable (TypeError)
    objs: list[Any] = [{"type": "thinking_level_change", "id": "t", "parentId": None, "timestamp": TS,
                        "thinkingLevel": "high"}]  # fmt: skip
    parent: Any = "t"
    for i in range(1, 40):
        objs += [user_entry(f"u{i}", parent, "x" * 200), assistant_entry(i, f"u{i}")]
        parent = i
    objs.append({"type": "compaction", "id": 1000, "parentId": parent, "timestamp": TS, "summary": "S",
                 "firstKeptEntryId": parent, "tokensBefore": 1})  # fmt: skip
    objs.append(assistant_entry(1001, 1000))
    path = _write(tmp_path / "t.jsonl", objs)
    expected = load_transcript(path).build_context()
    assert expected.thinking_level == "high"
    assert read_tail_context(path, max_tail_bytes=2048, chunk_bytes=256) == expected
    assert list(cache_dir.glob("*.idx"))  # saved
    # the next read uses it, also after more numeric-id entries were appended
    assert read_tail_context(path, max_tail_bytes=2048, chunk_bytes=256) == expected
    with path.open("ab") as out:
        out.write(json.dumps(user_entry(1002, 1001, text="u")).encode() + b"\n")
        out.write(json.dumps(assistant_entry(1003, 1002)).encode() + b"\n")
    assert (
        read_tail_context(path, max_tail_bytes=2048, chunk_bytes=256) == load_transcript(path).build_context()
    )


# pi 0.73.1 (context.mjs) on a header with this "version" and two root entries a, b: "A B" when it
# migrates the file as v1 (entries chained in file order), "B" when it does not
_PI_VERSIONS = [
    ("3.0", ["B"]),
    ('"3"', ["B"]),
    ("2.5", ["B"]),  # v2 -> v3 only: the ids stay
    ("true", ["A", "B"]),
    ('"abc"', ["B"]),  # NaN: neither < 2 nor < 3
    ("[3]", ["B"]),
    ("{}", ["B"]),
    ("4", ["B"]),
    ("-1", ["A", "B"]),
    ("null", ["A", "B"]),
    ("1e400", ["B"]),
    ('" 0x3 "', ["B"]),
    ("[]", ["A", "B"]),
]


@pytest.mark.parametrize(("version", "texts"), _PI_VERSIONS)
def test_the_header_version_is_compared_as_pi_compares_it(
    tmp_path: Path, version: str, texts: list[str]
) -> None:
    # a version pi reads as 3 (3.0, "3") was migrated as v1 (fresh ids, entries chained), and null/true
    # headers were refused as invalid; the tail reader follows the same rule
    header = f'{{"type":"session","version":{version},"id":"s","timestamp":"{TS}","cwd":"/w"}}'
    lines = [header, json.dumps(user_entry("a", None, "A")), json.dumps(user_entry("b", None, "B"))]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    context = load_transcript(path).build_context()
    assert [m.content for m in context.messages] == texts  # type: ignore[union-attr]
    assert read_tail_context(path) == context
    assert read_tail_context(path, max_tail_bytes=10, chunk_bytes=16) == context


@pytest.mark.anyio
async def test_manager_context_of_a_file_without_entry_ids_is_the_last_entry_as_in_pi(tmp_path: Path) -> None:
    # pi's leafId is undefined there (not null): buildSessionContext starts from the last entry
    from sessionkeeper.transcript import TranscriptManager

    header = {"type": "session", "version": 3, "id": "s", "timestamp": TS, "cwd": "/w"}
    message = {"role": "user", "content": "A", "timestamp": 1}
    objs = [
        {"type": "message", "timestamp": TS, "message": message},
        {"type": "thinking_level_change", "timestamp": TS, "thinkingLevel": "high"},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in [header, *objs]))
    manager = await TranscriptManager.open(path)
    expected = load_transcript(path).build_context()
    assert expected.thinking_level == "high"  # pi 0.73.1: {"messages": [], "thinkingLevel": "high"}
    assert manager.build_session_context() == expected
    assert read_tail_context(path) == expected
    manager.reset_leaf()  # pi's resetLeaf: leafId null, the empty context
    assert manager.build_session_context().thinking_level == "off"
