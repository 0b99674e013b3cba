"""Loading rules and documented repairs (pi-format spec §2, §5.11, §7.4, §8; field reports B01, B02)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import json_line, user_entry

from sessionkeeper.exceptions import TranscriptFormatError, TranscriptNotFoundError
from sessionkeeper.transcript import (
    CustomMessage,
    MessageEntry,
    UnknownEntry,
    UnknownMessage,
    load_transcript,
    load_transcript_bytes,
    message_to_builtins,
    scan_transcript,
)


HEADER = {"type": "session", "version": 3, "id": "s-1", "timestamp": "2026-01-05T10:00:00.000Z", "cwd": "/p"}


def _file(*objs: Any, tail: bytes = b"") -> bytes:
    return b"".join(json_line(o, ensure_ascii=False) + b"\n" for o in objs) + tail


def _texts(index) -> list[str]:
    out = []
    for m in index.build_context().messages:
        raw = message_to_builtins(m)
        content = raw.get("content")
        out.append(content if isinstance(content, str) else content[0]["text"])
    return out


def test_first_parseable_line_must_be_header(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    original = _file(user_entry("a", None, "hi", ts="2026-01-05T10:00:01.000Z", blocks=True), HEADER)
    path.write_bytes(original)
    with pytest.raises(TranscriptFormatError) as err:
        load_transcript(path)
    assert err.value.path == path
    assert err.value.line == 1
    assert str(path) in str(err.value)
    assert path.read_bytes() == original  # never overwritten (pi would truncate it)


def test_header_needs_string_id_and_object() -> None:
    with pytest.raises(TranscriptFormatError):
        load_transcript_bytes(_file({**HEADER, "id": 5}))
    with pytest.raises(TranscriptFormatError):
        load_transcript_bytes(b"[1,2]\n" + _file(HEADER))
    with pytest.raises(TranscriptFormatError):
        load_transcript_bytes(b"")
    with pytest.raises(TranscriptFormatError):
        load_transcript_bytes(b"not json\n\n")


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(TranscriptNotFoundError):
        load_transcript(tmp_path / "nope.jsonl")
    with pytest.raises(TranscriptFormatError):
        load_transcript(tmp_path)


def test_corrupt_line_before_header_is_skipped_and_reported() -> None:
    index = load_transcript_bytes(
        b"{garbage\n" + _file(HEADER, user_entry("a", None, "hi", ts="2026-01-05T10:00:01.000Z", blocks=True))
    )
    assert index.diagnostics.invalid_lines == (1,)
    assert index.diagnostics.header_line == 2
    assert _texts(index) == ["hi"]


def test_torn_tail_b01() -> None:
    data = (
        _file(
            HEADER,
            user_entry("e1", None, "List the files.", ts="2026-01-05T10:00:01.000Z", blocks=True),
            user_entry("e2", "e1", "three", ts="2026-01-05T10:00:01.000Z", blocks=True),
        )
        + b'{"type":"message","id":"e3","parentId":"e2","timestamp":"2026-01-05T10:00:09.000Z","message":{"ro'
    )
    index = load_transcript_bytes(data)
    assert index.leaf_id == "e2"
    assert len(index) == 2
    torn = index.diagnostics.torn_tail
    assert torn is not None
    assert torn.line == 4
    assert data[torn.offset :].startswith(b'{"type":"message","id":"e3"')
    assert torn.offset + torn.length == len(data)
    assert index.diagnostics.invalid_lines == ()
    assert not index.diagnostics.clean


def test_invalid_middle_line_skipped_rest_kept_b01_variant() -> None:
    data = (
        _file(HEADER, user_entry("a", None, "one", ts="2026-01-05T10:00:01.000Z", blocks=True))
        + b'{"type":"mess\n'
        + _file(user_entry("b", "a", "two", ts="2026-01-05T10:00:01.000Z", blocks=True))
    )
    index = load_transcript_bytes(data)
    assert index.diagnostics.invalid_lines == (3,)
    assert index.diagnostics.torn_tail is None
    assert _texts(index) == ["one", "two"]


def test_missing_final_newline_on_valid_last_line() -> None:
    data = _file(HEADER) + json_line(
        user_entry("a", None, "x", ts="2026-01-05T10:00:01.000Z", blocks=True), ensure_ascii=False
    )
    index = load_transcript_bytes(data)
    assert index.leaf_id == "a"
    assert index.diagnostics.missing_final_newline
    assert index.diagnostics.torn_tail is None


def test_blank_lines_crlf_and_bom_are_tolerated() -> None:
    data = (
        b"\xef\xbb\xbf"
        + json_line(HEADER, ensure_ascii=False)
        + b"\r\n\n   \n"
        + json_line(
            user_entry("a", None, "x", ts="2026-01-05T10:00:01.000Z", blocks=True), ensure_ascii=False
        )
        + b"\r\n"
    )
    index = load_transcript_bytes(data)
    assert _texts(index) == ["x"]
    assert index.diagnostics.clean


def test_repeated_header_lines_are_ignored() -> None:
    index = load_transcript_bytes(
        _file(
            HEADER,
            user_entry("a", None, "x", ts="2026-01-05T10:00:01.000Z", blocks=True),
            {**HEADER, "id": "other"},
            user_entry("b", "a", "y", ts="2026-01-05T10:00:01.000Z", blocks=True),
        )
    )
    assert index.header.id == "s-1"
    assert index.diagnostics.repeated_header_lines == (3,)
    assert _texts(index) == ["x", "y"]


def test_duplicate_ids_later_wins_and_leaf_is_last_line() -> None:
    data = _file(
        HEADER,
        user_entry("a", None, "first", ts="2026-01-05T10:00:01.000Z", blocks=True),
        user_entry("b", "a", "b", ts="2026-01-05T10:00:01.000Z", blocks=True),
        user_entry("a", None, "again", ts="2026-01-05T10:00:01.000Z", blocks=True),
    )
    index = load_transcript_bytes(data)
    assert index.leaf_id == "a"
    assert len(index) == 3  # entries() keeps duplicates
    assert dict(index.diagnostics.duplicate_ids) == {"a": (2, 4)}
    assert _texts(index) == ["again"]
    assert _texts_for(index, "b") == ["again", "b"]


def _texts_for(index, leaf: str) -> list[str]:
    return [message_to_builtins(m)["content"][0]["text"] for m in index.build_context(leaf).messages]


def test_missing_parent_is_a_root_and_reported() -> None:
    index = load_transcript_bytes(
        _file(
            HEADER,
            user_entry("a", "ghost", "x", ts="2026-01-05T10:00:01.000Z", blocks=True),
            user_entry("b", "a", "y", ts="2026-01-05T10:00:01.000Z", blocks=True),
        )
    )
    assert index.diagnostics.missing_parents == ("a",)
    assert _texts(index) == ["x", "y"]


def test_parent_cycle_is_detected_and_walk_terminates() -> None:
    index = load_transcript_bytes(
        _file(
            HEADER,
            user_entry("a", "c", "a", ts="2026-01-05T10:00:01.000Z", blocks=True),
            user_entry("b", "a", "b", ts="2026-01-05T10:00:01.000Z", blocks=True),
            user_entry("c", "b", "c", ts="2026-01-05T10:00:01.000Z", blocks=True),
        )
    )
    assert set(index.diagnostics.cycles) == {"a", "b", "c"}
    assert _texts(index) == ["a", "b", "c"]
    assert [e.id for e in index.branch("b")] == ["c", "a", "b"]


def test_self_parent_is_a_cycle_of_one() -> None:
    index = load_transcript_bytes(
        _file(HEADER, user_entry("a", "a", "self", ts="2026-01-05T10:00:01.000Z", blocks=True))
    )
    assert index.diagnostics.cycles == ("a",)
    assert _texts(index) == ["self"]


def test_lone_surrogate_reads_as_replacement_char_b02() -> None:
    raw = (
        b'{"type":"message","id":"e2","parentId":null,"timestamp":"2026-01-05T10:00:02.000Z","message":'
        b'{"role":"toolResult","toolCallId":"call_1","toolName":"read","content":[{"type":"text",'
        b'"text":"status: ok \\ud83d"}],"isError":false,"timestamp":1}}\n'
    )
    index = load_transcript_bytes(
        _file(HEADER)
        + raw
        + _file(user_entry("p", "e2", "\U0001f600 pair", ts="2026-01-05T10:00:01.000Z", blocks=True))
    )
    assert index.diagnostics.lone_surrogate_lines == (2,)
    ctx = index.build_context().to_json()
    assert ctx["messages"][0]["content"][0]["text"] == "status: ok \ufffd"
    assert ctx["messages"][1]["content"][0]["text"] == "\U0001f600 pair"
    json.dumps(ctx, ensure_ascii=False).encode("utf-8")  # must not raise


def test_invalid_utf8_reads_as_replacement_char() -> None:
    line = json_line(
        user_entry("a", None, "XX", ts="2026-01-05T10:00:01.000Z", blocks=True), ensure_ascii=False
    ).replace(b"XX", b"\xff\xfe")
    index = load_transcript_bytes(_file(HEADER) + line + b"\n")
    assert index.diagnostics.bad_utf8_lines == (2,)
    assert _texts(index) == ["\ufffd\ufffd"]


def test_non_object_lines_are_skipped() -> None:
    index = load_transcript_bytes(
        _file(HEADER, 5, [1], "s", user_entry("a", None, "x", ts="2026-01-05T10:00:01.000Z", blocks=True))
    )
    assert index.diagnostics.non_object_lines == (2, 3, 4)
    assert _texts(index) == ["x"]


def test_huge_line_is_fine() -> None:
    big = "x" * 5_000_000
    index = load_transcript_bytes(
        _file(HEADER, user_entry("a", None, big, ts="2026-01-05T10:00:01.000Z", blocks=True))
    )
    assert _texts(index) == [big]


def test_entry_without_id_kept_but_not_in_tree() -> None:
    no_id = {"type": "custom", "customType": "x", "parentId": None, "timestamp": "t"}
    index = load_transcript_bytes(
        _file(HEADER, user_entry("a", None, "x", ts="2026-01-05T10:00:01.000Z", blocks=True), no_id)
    )
    assert index.diagnostics.entries_without_id == (3,)
    assert index.leaf_id == "a"
    assert len(list(index.entries())) == 2


def test_unknown_types_roles_fields_are_preserved() -> None:
    weird_entry = {"type": "future_thing", "id": "f", "parentId": "a", "timestamp": "t", "payload": [1]}
    weird_role = user_entry("b", "f", "x", ts="2026-01-05T10:00:01.000Z", blocks=True)
    weird_role["message"] = {"role": "robot", "beep": True}
    extra_field = user_entry("c", "b", "y", ts="2026-01-05T10:00:01.000Z", blocks=True)
    extra_field["message"]["newField"] = 1
    shape = {"type": "model_change", "id": "d", "parentId": "c", "timestamp": "t", "provider": 5}
    index = load_transcript_bytes(
        _file(
            HEADER,
            user_entry("a", None, "hi", ts="2026-01-05T10:00:01.000Z", blocks=True),
            weird_entry,
            weird_role,
            extra_field,
            shape,
        )
    )
    entries = list(index.entries())
    assert isinstance(entries[1], UnknownEntry)
    assert entries[1].raw == weird_entry
    assert isinstance(entries[2], MessageEntry)
    assert isinstance(entries[2].message, UnknownMessage)
    assert isinstance(entries[3].message, UnknownMessage)
    assert entries[3].message.raw["newField"] == 1
    assert isinstance(entries[4], UnknownEntry)
    msgs = index.build_context().to_json()["messages"]
    assert msgs[1] == {"role": "robot", "beep": True}
    assert msgs[2]["newField"] == 1


def test_assistant_missing_defaulted_fields_is_kept_verbatim() -> None:
    msg = {"role": "assistant", "content": [], "api": "x", "provider": "p", "model": "m", "timestamp": 1}
    entry = {"type": "message", "id": "a", "parentId": None, "timestamp": "t", "message": msg}
    index = load_transcript_bytes(_file(HEADER, entry))
    ctx = index.build_context()
    assert ctx.to_json()["messages"] == [msg]  # no invented usage / stopReason
    assert ctx.model is not None
    assert ctx.model.provider == "p"


def test_labels_replayed_in_file_order_with_timestamps() -> None:
    def label(eid, parent, target, text, ts):
        obj = {"type": "label", "id": eid, "parentId": parent, "timestamp": ts, "targetId": target}
        if text is not None:
            obj["label"] = text
        return obj

    data = _file(
        HEADER,
        user_entry("a", None, "x", ts="2026-01-05T10:00:01.000Z", blocks=True),
        label("l1", "a", "a", "one", "2026-01-01T00:00:01.000Z"),
        label("l2", "l1", "a", "", "2026-01-01T00:00:02.000Z"),
        label("l3", "l2", "a", "two", "2026-01-01T00:00:03.000Z"),
        label("l4", "l3", "l1", "other", "2026-01-01T00:00:04.000Z"),
        label("l5", "l4", "l1", None, "2026-01-01T00:00:05.000Z"),
    )
    index = load_transcript_bytes(data)
    assert index.labels == {"a": "two"}
    assert index.label_timestamps == {"a": "2026-01-01T00:00:03.000Z"}


def test_session_name_latest_wins_and_empty_clears() -> None:
    def info(eid, parent, name):
        obj = {"type": "session_info", "id": eid, "parentId": parent, "timestamp": "t"}
        if name is not None:
            obj["name"] = name
        return obj

    assert load_transcript_bytes(_file(HEADER, info("a", None, "  One  "))).session_name == "One"
    assert (
        load_transcript_bytes(_file(HEADER, info("a", None, "One"), info("b", "a", "  "))).session_name
        is None
    )
    assert (
        load_transcript_bytes(_file(HEADER, info("a", None, "One"), info("b", "a", None))).session_name
        is None
    )
    assert (
        load_transcript_bytes(_file(HEADER, info("a", None, ""), info("b", "a", "Two"))).session_name == "Two"
    )


def test_v1_migration_ids_parents_first_kept_index() -> None:
    v1_header = {
        "type": "session",
        "id": "old",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/p",
        "provider": "x",
    }
    u1 = {
        "type": "message",
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": "one", "timestamp": 1},
    }
    u2 = {
        "type": "message",
        "timestamp": "2026-01-01T00:00:02.000Z",
        "message": {"role": "user", "content": "two", "timestamp": 2},
    }
    hook = {
        "type": "message",
        "timestamp": "2026-01-01T00:00:02.500Z",
        "message": {
            "role": "hookMessage",
            "customType": "h",
            "content": "hooked",
            "display": True,
            "timestamp": 3,
        },
    }
    comp = {
        "type": "compaction",
        "timestamp": "2026-01-01T00:00:03.000Z",
        "summary": "S",
        "firstKeptEntryIndex": 2,
        "tokensBefore": 10,
    }
    comp_header = {
        "type": "compaction",
        "timestamp": "2026-01-01T00:00:04.000Z",
        "summary": "S2",
        "firstKeptEntryIndex": 0,
        "tokensBefore": 10,
    }
    index = load_transcript_bytes(_file(v1_header, u1, u2, hook, comp))
    entries = list(index.entries())
    ids = [e.id for e in entries]
    assert [e.parent_id for e in entries] == [None, *ids[:-1]]
    assert entries[3].first_kept_entry_id == ids[1]  # line 2 counting the header as 0 = u2
    assert "firstKeptEntryIndex" not in index.lines[3].decode()
    assert isinstance(entries[2].message, CustomMessage)
    assert index.header_raw["version"] == 3
    assert index.header_raw["provider"] == "x"  # legacy keys preserved
    assert list(index.header_raw)[-1] == "version"  # added at the end, like pi
    assert index.migrated
    index2 = load_transcript_bytes(_file(v1_header, u1, comp_header))
    assert isinstance(list(index2.entries())[1], UnknownEntry)  # no firstKeptEntryId: header target
    assert "firstKeptEntryId" not in list(index2.entries())[1].raw


def test_v2_migration_renames_hook_message() -> None:
    v2 = {**HEADER, "version": 2}
    hook = user_entry("a", None, "x", ts="2026-01-05T10:00:01.000Z", blocks=True)
    hook["message"] = {
        "role": "hookMessage",
        "customType": "h",
        "content": "c",
        "display": False,
        "timestamp": 1,
    }
    index = load_transcript_bytes(_file(v2, hook))
    (entry,) = index.entries()
    assert isinstance(entry.message, CustomMessage)
    assert index.header.version == 3
    assert index.diagnostics.legacy_version


def test_loading_never_writes(tmp_path: Path) -> None:
    path = tmp_path / "legacy.jsonl"
    data = (
        _file(
            {k: v for k, v in HEADER.items() if k != "version"},
            {
                "type": "message",
                "timestamp": "t",
                "message": {"role": "user", "content": "x", "timestamp": 1},
            },
        )
        + b'{"torn'
    )
    path.write_bytes(data)
    before = path.stat()
    load_transcript(path)
    scan_transcript(path)
    assert path.read_bytes() == data
    assert path.stat().st_mtime_ns == before.st_mtime_ns


def test_scan_reports_orphan_tool_results(tmp_path: Path) -> None:
    result = user_entry("r", "a", "x", ts="2026-01-05T10:00:01.000Z", blocks=True)
    result["message"] = {
        "role": "toolResult",
        "toolCallId": "call_9",
        "toolName": "read",
        "content": [],
        "isError": False,
        "timestamp": 1,
    }
    path = tmp_path / "o.jsonl"
    path.write_bytes(
        _file(HEADER, user_entry("a", None, "hi", ts="2026-01-05T10:00:01.000Z", blocks=True), result)
    )
    diag = scan_transcript(path)
    assert diag.orphan_tool_results == ("call_9",)
    assert diag.to_json()["orphanToolResults"] == ["call_9"]
    assert not diag.clean


def test_new_entry_id_redraws_on_collision(monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    from sessionkeeper.transcript._load import new_entry_id

    values = iter(["aaaaaaaa-0000-4000-8000-000000000000", "bbbbbbbb-0000-4000-8000-000000000000"])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(values))
    assert new_entry_id({"aaaaaaaa"}) == "bbbbbbbb"


def test_new_entry_id_falls_back_to_full_uuid_after_100_collisions(monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    from sessionkeeper.transcript._load import new_entry_id

    monkeypatch.setattr(uuid, "uuid4", lambda: "cccccccc-0000-4000-8000-000000000000")
    assert new_entry_id({"cccccccc"}) == "cccccccc-0000-4000-8000-000000000000"


def test_context_walk_stops_early_but_equals_full_rebuild(pi_samples: Path) -> None:
    index = load_transcript(pi_samples / "large-2000.jsonl")
    entries = list(index.entries())
    from sessionkeeper.transcript import build_session_context

    for entry in entries[::37]:
        assert index.build_context(entry.id) == build_session_context(entries, leaf_id=entry.id)
    assert len(index._context_path(index.by_id[index.leaf_id])) < len(index.path_positions(index.leaf_id))


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_chunked_file_reading_equals_bytes_loading(
    tmp_path: Path, pi_samples: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    from sessionkeeper.transcript import _load

    monkeypatch.setattr(_load, "_READ_CHUNK", chunk)
    for tail in (b"", b'{"type":"mess'):
        path = tmp_path / "f.jsonl"
        data = (pi_samples / "full.jsonl").read_bytes() + tail
        path.write_bytes(data)
        from_file, from_bytes = load_transcript(path), load_transcript_bytes(data, path=path)
        assert from_file.lines == from_bytes.lines
        assert from_file.diagnostics == from_bytes.diagnostics
        assert from_file.build_context() == from_bytes.build_context()


def test_out_of_range_numbers_read_as_infinity_like_json_parse() -> None:
    line = b'{"type":"custom","customType":"x","data":{"n":1e99999},"id":"a","parentId":null,"timestamp":"t"}'
    header = json_line(HEADER, ensure_ascii=False).replace(b'"cwd"', b'"big":1e99999,"cwd"')
    index = load_transcript_bytes(header + b"\n" + line + b"\n")
    (entry,) = index.entries()
    assert entry.data == {"n": float("inf")}  # type: ignore[union-attr]
    assert index.header_raw["big"] == float("inf")
