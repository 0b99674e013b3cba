"""
Loading with every entry decoded at once (``load_transcript(decode_all=True)``, the batch decode of
``typed_entries_from_lines`` and ``TranscriptIndex.entries``) gives the index and the records the lazy
load gives, line for line, for well-formed files and for files the careful scan reads (issue 16).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from tests._helpers import assistant_entry, header_obj, json_line, user_entry

from sessionkeeper.records import (
    MessageEntry,
    UnknownEntry,
    UnknownMessage,
    encode_entry,
    typed_entries_from_lines,
    typed_entry_from_line,
)
from sessionkeeper.transcript import TranscriptIndex, load_transcript


DATA = Path(__file__).resolve().parent.parent / "data"
SAMPLES = [  # v1 files are migrated with fresh random ids: compared on their own below
    path for path in sorted([*DATA.glob("pi/*.jsonl"), *DATA.glob("pi16/*.jsonl")]) if "v1" not in path.name
]

_UNKNOWN_FIELD = json_line({**user_entry("x1", "u2"), "extra": {"kept": [1, 2.50, "é"]}})
_UNKNOWN_ROLE = json_line(
    {"type": "message", "id": "x2", "parentId": "x1", "timestamp": "T", "message": {"role": "robot", "n": 1}}
)
_UNKNOWN_TYPE = json_line({"type": "future", "id": "x3", "parentId": "x2", "what": 1})
_MISSING_USAGE = json_line(
    {**assistant_entry("x4", "x3"), "message": {**assistant_entry("x4", "x3")["message"], "usage": None}}
)
_BAD_UTF8 = b'{"type":"message","id":"x5","parentId":"x4","timestamp":"T","message":{"role":"user","content":"\xff","timestamp":1}}'  # noqa: E501
_NUMBER_ID = json_line(user_entry(7, "x5"))


def _same_index(lazy: TranscriptIndex, eager: TranscriptIndex) -> None:
    assert eager.lines == lazy.lines
    assert (eager.kinds, eager.ids, eager.parents) == (lazy.kinds, lazy.ids, lazy.parents)
    assert list(eager.line_numbers) == list(lazy.line_numbers)
    assert (eager.by_id, eager.leaf_id) == (lazy.by_id, lazy.leaf_id)
    assert eager.header_raw == lazy.header_raw
    assert eager.diagnostics == lazy.diagnostics
    lazy_entries, eager_entries = list(lazy.entries()), list(eager.entries())
    assert [type(e) for e in eager_entries] == [type(e) for e in lazy_entries]
    assert eager_entries == lazy_entries
    assert eager.labels == lazy.labels and eager.session_name == lazy.session_name
    assert eager.build_context() == lazy.build_context()


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_decode_all_loads_every_sample_as_the_lazy_load(path: Path) -> None:
    _same_index(load_transcript(path), load_transcript(path, decode_all=True))


def test_decode_all_loads_the_20k_sample_as_the_lazy_load(tmp_path: Path) -> None:
    path = tmp_path / "large.jsonl"
    path.write_bytes(gzip.decompress((DATA / "pi" / "large-20k.jsonl.gz").read_bytes()))
    eager = load_transcript(path, decode_all=True)
    assert len(eager._cache) == len(eager)  # every entry decoded by the load itself
    _same_index(load_transcript(path), eager)


def _file(tmp_path: Path, body: list[bytes], *, header: Any = None, tail: bytes = b"\n") -> Path:
    path = tmp_path / "t.jsonl"
    head = json_line(header if header is not None else header_obj())
    path.write_bytes(b"\n".join([head, *body]) + tail)
    return path


_WELL_FORMED = [json_line(user_entry("u1", None)), json_line(assistant_entry("u2", "u1"))]


@pytest.mark.parametrize(
    ("body", "fast"),
    [
        ([*_WELL_FORMED, _UNKNOWN_FIELD, _UNKNOWN_ROLE, _UNKNOWN_TYPE, _MISSING_USAGE, _BAD_UTF8], True),
        ([*_WELL_FORMED, json_line({"type": "message", "id": None, "parentId": "u2"})], True),  # no id
        ([*_WELL_FORMED, json_line(user_entry("u1", "u2"))], True),  # a repeated id: the later one wins
        ([*_WELL_FORMED, _NUMBER_ID], False),  # the careful scan
        ([*_WELL_FORMED, b"", b"not json", b"[1]", json_line(assistant_entry("u3", "u2"))], False),
        ([*_WELL_FORMED, json_line(header_obj("again"))], False),  # a repeated header
    ],
    ids=["unknown-and-odd-lines", "null-id", "repeated-id", "number-id", "invalid-lines", "repeated-header"],
)
def test_decode_all_reads_odd_files_as_the_lazy_load(tmp_path: Path, body: list[bytes], fast: bool) -> None:
    path = _file(tmp_path, body)
    eager = load_transcript(path, decode_all=True)
    assert eager._scan is not None and eager._scan.fast is fast
    if fast:  # the typed lines decoded by the load, the others left to the careful decode on access
        assert 0 < len(eager._cache) <= len(eager)
    _same_index(load_transcript(path), eager)


def test_decode_all_keeps_a_torn_tail_and_the_v1_migration(tmp_path: Path) -> None:
    torn = _file(tmp_path, [*_WELL_FORMED, b'{"type":"mess'], tail=b"")
    lazy, eager = load_transcript(torn), load_transcript(torn, decode_all=True)
    assert eager.diagnostics.torn_tail is not None
    _same_index(lazy, eager)
    v1 = DATA / "pi" / "v1-legacy.jsonl"
    lazy, eager = load_transcript(v1), load_transcript(v1, decode_all=True)
    assert eager.migrated and lazy.migrated
    assert eager.kinds == lazy.kinds
    assert eager.build_context().messages == lazy.build_context().messages


def test_decode_all_writes_unknown_fields_back_byte_for_byte(tmp_path: Path) -> None:
    path = _file(tmp_path, [*_WELL_FORMED, _UNKNOWN_FIELD, _UNKNOWN_ROLE, _UNKNOWN_TYPE])
    entries = list(load_transcript(path, decode_all=True).entries())
    assert isinstance(entries[2], UnknownEntry)
    assert isinstance(entries[3], MessageEntry) and isinstance(entries[3].message, UnknownMessage)
    assert [encode_entry(e) for e in entries[2:]] == [
        json.dumps(json.loads(line), separators=(",", ":"), ensure_ascii=False).encode()
        for line in (_UNKNOWN_FIELD, _UNKNOWN_ROLE, _UNKNOWN_TYPE)
    ]


def test_a_batch_decode_is_the_decode_of_each_line() -> None:
    typed = [json_line(user_entry(f"u{n}", None)) for n in range(5)]
    entries, complete = typed_entries_from_lines(typed)
    assert complete and entries == [typed_entry_from_line(line) for line in typed]
    mixed = [*typed, _UNKNOWN_FIELD, _MISSING_USAGE, _BAD_UTF8, b"not json", *typed]
    entries, complete = typed_entries_from_lines(mixed)
    assert not complete
    assert entries == [typed_entry_from_line(line) for line in mixed]
    assert entries[5:9] == [None, None, None, None]
    assert typed_entries_from_lines([]) == ([], True)
