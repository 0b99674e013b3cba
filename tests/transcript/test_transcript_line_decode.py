"""
Decoding a line once, straight into its typed record (``entry_from_line``), gives the record the path
through the decoded JSON object gives (``entry_from_json``) for every line: typed when the record writes
back what was read, unknown (kept as read) otherwise (pi-format spec §5.10, issue 16).
"""

from __future__ import annotations

import copy
import gzip
import json
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests._helpers import assistant_entry, json_line, user_entry

from sessionkeeper.records import (
    AssistantMessage,
    Cost,
    MessageEntry,
    ToolResultMessage,
    UnknownEntry,
    UnknownMessage,
    Usage,
    decode_json_line,
    entry_from_json,
    entry_from_line,
    typed_entry_from_line,
)
from sessionkeeper.records._messages import defaults_used
from sessionkeeper.transcript import load_transcript_bytes


DATA = Path(__file__).resolve().parent.parent / "data"


def _sample_lines() -> list[bytes]:
    lines: list[bytes] = []
    for path in sorted([*DATA.glob("pi/*.jsonl"), *DATA.glob("pi16/*.jsonl")]):
        index = load_transcript_bytes(path.read_bytes())
        lines += [index.line_bytes(pos) for pos in range(len(index))]
    with gzip.open(DATA / "pi" / "large-20k.jsonl.gz", "rb") as handle:
        lines += handle.read().split(b"\n")[1:3000]
    return [line for line in lines if line]


SAMPLE_LINES = _sample_lines()


def _by_object(line: bytes) -> Any:
    """The path through the decoded object, as the loader took it (repairs included)."""
    try:
        value = msgspec.json.decode(line)
    except msgspec.DecodeError:
        value = decode_json_line(line)[0]
    return entry_from_json(value)


def _same(line: bytes) -> Any:
    """Both paths give equal records of the same types (entry and message); the record."""
    once, via_object = entry_from_line(line), _by_object(line)
    assert type(once) is type(via_object)
    assert once == via_object
    typed = typed_entry_from_line(line)  # None exactly when the record is not a fully typed one
    unknown = isinstance(once, UnknownEntry) or isinstance(getattr(once, "message", None), UnknownMessage)
    assert (typed is None) if unknown else (typed is None or typed == once)
    if isinstance(once, MessageEntry):
        assert isinstance(via_object, MessageEntry)
        assert type(once.message) is type(via_object.message)
    return once


def test_every_sample_line_decodes_to_the_same_record() -> None:
    assert len(SAMPLE_LINES) > 3000
    kinds = {type(_same(line)).__name__ for line in SAMPLE_LINES}
    assert {"MessageEntry", "CompactionEntry", "LabelEntry", "BranchSummaryEntry"} <= kinds


def _assistant_obj() -> dict[str, Any]:
    entry = assistant_entry("a1", None)
    entry["message"]["usage"]["cost"]["totalFromProvider"] = True
    return entry


def _tool_result_obj() -> dict[str, Any]:
    message = {
        "role": "toolResult",
        "toolCallId": "c",
        "toolName": "read",
        "content": [{"type": "text", "text": "x"}],
        "isError": False,
        "timestamp": 3,
    }
    return {"type": "message", "id": "t1", "parentId": "a1", "timestamp": "T", "message": message}


def _bash_obj() -> dict[str, Any]:
    message = {
        "role": "bashExecution",
        "command": "ls",
        "output": "",
        "cancelled": False,
        "truncated": False,
        "timestamp": 4,
    }
    return {"type": "message", "id": "b1", "parentId": "t1", "timestamp": "T", "message": message}


def _usage_entry_obj() -> dict[str, Any]:
    usage = _assistant_obj()["message"]["usage"]
    return {
        "type": "usage",
        "id": "u1",
        "parentId": None,
        "timestamp": "T",
        "kind": "cache_warm",
        "provider": "p",
        "model": "m",
        "usage": usage,
    }


def _without(obj: dict[str, Any], *path: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    holder = out
    for key in path[:-1]:
        holder = holder[key]
    del holder[path[-1]]
    return out


@pytest.mark.parametrize(
    "path",
    [
        ("message", "usage"),
        ("message", "stopReason"),
        ("message", "timestamp"),
        ("message", "usage", "cacheRead"),
        ("message", "usage", "cost"),
        ("message", "usage", "cost", "total"),
    ],
)
def test_an_assistant_without_a_written_field_stays_unknown(path: tuple[str, ...]) -> None:
    record = _same(json_line(_without(_assistant_obj(), *path)))
    assert isinstance(record, MessageEntry)
    assert isinstance(record.message, UnknownMessage)


@pytest.mark.parametrize(
    ("build", "key"),
    [
        (_tool_result_obj, "isError"),
        (_tool_result_obj, "timestamp"),
        (_bash_obj, "cancelled"),
        (_bash_obj, "truncated"),
        (_bash_obj, "timestamp"),
    ],
)
def test_messages_without_a_written_field_stay_unknown(build: Any, key: str) -> None:
    record = _same(json_line(_without(build(), "message", key)))
    assert isinstance(record, MessageEntry)
    assert isinstance(record.message, UnknownMessage)


def test_an_incomplete_usage_entry_stays_unknown() -> None:
    assert isinstance(_same(json_line(_usage_entry_obj())), msgspec.Struct)
    for key in ("input", "cost"):
        assert isinstance(_same(json_line(_without(_usage_entry_obj(), "usage", key))), UnknownEntry)


def test_complete_lines_decode_typed() -> None:
    assert isinstance(_same(json_line(_assistant_obj())).message, AssistantMessage)  # type: ignore[union-attr]
    assert isinstance(_same(json_line(_tool_result_obj())).message, ToolResultMessage)  # type: ignore[union-attr]
    spaced = json.dumps(_tool_result_obj(), indent=1).encode()  # spacing and key order do not matter
    assert isinstance(_same(spaced).message, ToolResultMessage)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "line",
    [
        # unknown fields at every level
        json_line({**user_entry("u", None), "extra": 1}),
        json_line(user_entry("u", None) | {"message": {"role": "user", "x": 1, "content": "", "timestamp": 1}}),  # noqa: E501
        json_line(_without(_assistant_obj(), "message", "api")),
        # a repeated tag, a repeated key (the later one wins, as in the object)
        b'{"type":"message","id":"a","parentId":null,"timestamp":"T","message":{"role":"user","content":"x","timestamp":1,"role":"assistant"}}',
        b'{"type":"message","id":"a","parentId":null,"timestamp":"T","message":{"role":"user","content":"x","timestamp":1,"timestamp":2}}',
        b'{"type":"label","id":"a","parentId":null,"timestamp":"T","targetId":"x","type":"zzz"}',
        # ids that are not strings, a missing parentId, unknown types
        json_line(user_entry(1, None)),
        json_line(_without(user_entry("u", None), "parentId")),
        json_line({"type": "future", "id": "f", "parentId": None}),
        # lone surrogates and invalid UTF-8 (repaired by the object path)
        b'{"type":"message","id":"a","parentId":null,"timestamp":"T","message":{"role":"user","content":"\\ud800","timestamp":1}}',
        b'{"type":"message","id":"a","parentId":null,"timestamp":"T","message":{"role":"user","content":"\xff","timestamp":1}}',
        # numbers beyond 64 bits, and floats
        b'{"type":"message","id":"a","parentId":null,"timestamp":"T","message":{"role":"user","content":"x","timestamp":123456789012345678901234567890}}',
        b'{"type":"message","id":"a","parentId":null,"timestamp":"T","message":{"role":"user","content":"x","timestamp":1.5e3}}',
    ],
)  # fmt: skip
def test_odd_lines_decode_as_the_object_path_decodes_them(line: bytes) -> None:
    _same(line)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path in a JSON value (objects' keys and arrays' indexes)."""
    out: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            out.append((*prefix, key))
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for n, item in enumerate(value):
            out += _paths(item, (*prefix, n))
    return out


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_a_line_missing_any_key_decodes_as_the_object_path(data: st.DataObject) -> None:
    line = data.draw(
        st.sampled_from([*SAMPLE_LINES[:400], json_line(_assistant_obj()), json_line(_bash_obj())])
    )
    obj = json.loads(line)
    paths = [p for p in _paths(obj) if not isinstance(p[-1], int)]
    path = data.draw(st.sampled_from(paths))
    holder = obj
    for key in path[:-1]:
        holder = holder[key]
    del holder[path[-1]]
    if not isinstance(obj, dict):
        return
    _same(json_line(obj, ensure_ascii=False))


def test_defaults_are_counted_per_thread() -> None:
    before = defaults_used()
    assert Usage() == Usage(input=0, output=0, cache_read=0, cache_write=0, cost=Cost())
    assert defaults_used() > before
    line = json_line(_assistant_obj())

    def build_records() -> None:
        for _ in range(2000):
            Usage()

    other = threading.Thread(target=build_records)
    other.start()
    seen = [entry_from_line(line) for _ in range(200)]
    other.join()
    assert all(isinstance(entry.message, AssistantMessage) for entry in seen)  # not disturbed by the thread


def _struct_types(tp: Any, seen: set[type[Any]]) -> None:
    info = msgspec.inspect.type_info(tp)
    stack: list[Any] = [info]
    while stack:
        node = stack.pop()
        if isinstance(node, msgspec.inspect.StructType):
            if node.cls in seen:
                continue
            seen.add(node.cls)
            stack += [field.type for field in node.fields]
        elif isinstance(node, msgspec.inspect.UnionType):
            stack += node.types
        elif isinstance(node, msgspec.inspect.ListType | msgspec.inspect.DictType):
            stack += [getattr(node, "item_type", None) or node.value_type]  # type: ignore[attr-defined]


def test_every_written_default_of_a_decoded_record_is_counted() -> None:
    """A plain default (``= 0``) would let a line without that field decode typed and gain it on write."""
    from sessionkeeper.records import _codec

    seen: set[type[Any]] = set()
    _struct_types(_codec._LINE_DECODER.type, seen)
    assert AssistantMessage in seen and Cost in seen
    for cls in seen:
        for field in msgspec.structs.fields(cls):
            if field.required or field.default is msgspec.UNSET:
                continue
            assert field.default is msgspec.NODEFAULT, (cls.__name__, field.name)
            before = defaults_used()
            field.default_factory()
            assert defaults_used() > before, (cls.__name__, field.name)
