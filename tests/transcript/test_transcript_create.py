"""create_transcript_lines: the one place a transcript's first lines are built outside the manager."""

from __future__ import annotations

import json

from sessionkeeper.records import header_from_json
from sessionkeeper.transcript import LabelEntry, create_transcript_lines


def test_header_only_transcript_is_pi_header_shape() -> None:
    lines = create_transcript_lines("s1", now_ms=1_700_000_000_123, cwd="/w")
    assert lines == [
        b'{"type":"session","version":3,"id":"s1","timestamp":"2023-11-14T22:13:20.123Z","cwd":"/w"}'
    ]
    header = header_from_json(json.loads(lines[0]))
    assert header.id == "s1"
    assert header.version == 3


def test_parent_session_and_entries_follow_the_header_in_order() -> None:
    copied = b'{"type":"message","id":"a1","parentId":null}'
    label = LabelEntry(
        id="b2", parent_id="a1", timestamp="2026-01-01T00:00:00.000Z", target_id="a1", label="x"
    )
    lines = create_transcript_lines(
        "s2", now_ms=0, cwd="/", parent_session="/p.jsonl", entries=[copied, label]
    )
    assert json.loads(lines[0])["parentSession"] == "/p.jsonl"
    assert lines[1] is copied  # bytes are copied as they are
    assert lines[2] == (
        b'{"type":"label","id":"b2","parentId":"a1","timestamp":"2026-01-01T00:00:00.000Z",'
        b'"targetId":"a1","label":"x"}'
    )
