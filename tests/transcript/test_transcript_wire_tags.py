"""Entries, messages and blocks expose their wire ``type`` / ``role`` read-only (issue 11)."""

from __future__ import annotations

import json

import msgspec
import pytest

from sessionkeeper.records._codec import encode_entry, entry_from_json, message_from_json
from sessionkeeper.records._entries import SessionHeader
from sessionkeeper.records._messages import TextContent, ToolCall, UnknownMessage
from sessionkeeper.transcript import load_transcript_bytes


SAMPLE = b"\n".join(
    json.dumps(line, separators=(",", ":")).encode()
    for line in [
        {"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"},
        {"type": "message", "id": "a", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
         "message": {"role": "user", "content": "hi", "timestamp": 1}},
        {"type": "model_change", "id": "b", "parentId": "a", "timestamp": "2026-01-01T00:00:00.000Z",
         "provider": "p", "modelId": "m"},
        {"type": "label", "id": "c", "parentId": "b", "timestamp": "2026-01-01T00:00:00.000Z",
         "targetId": "a",
         "label": "x"},
        {"type": "future_kind", "id": "d", "parentId": "c", "timestamp": "2026-01-01T00:00:00.000Z"},
    ]
) + b"\n"  # fmt: skip


def test_every_entry_has_its_wire_type() -> None:
    index = load_transcript_bytes(SAMPLE)
    assert [entry.type for entry in index.entries()] == ["message", "model_change", "label", "future_kind"]
    assert index.header.type == "session"
    for entry in index.entries():
        assert json.loads(encode_entry(entry))["type"] == entry.type


@pytest.mark.parametrize(
    ("raw", "role"),
    [
        ({"role": "user", "content": "x", "timestamp": 1}, "user"),
        ({"role": "toolResult", "toolCallId": "c", "toolName": "t", "content": [], "isError": False,
          "timestamp": 1}, "toolResult"),
        ({"role": "bashExecution", "command": "ls", "output": "", "cancelled": False, "truncated": False,
          "timestamp": 1}, "bashExecution"),
        ({"role": "hologram", "x": 1}, "hologram"),
    ],
)  # fmt: skip
def test_every_message_has_its_wire_role(raw: dict[str, object], role: str) -> None:
    message = message_from_json(raw)
    assert message.role == role
    assert isinstance(message, UnknownMessage) is (role == "hologram")


def test_tags_are_read_only_and_not_fields() -> None:
    entry = entry_from_json(json.loads(SAMPLE.split(b"\n")[2]))
    with pytest.raises(AttributeError):
        entry.type = "label"  # type: ignore[misc]
    message = message_from_json({"role": "user", "content": "x", "timestamp": 1})
    with pytest.raises(AttributeError):
        message.role = "assistant"  # type: ignore[misc]
    assert "type" not in SessionHeader.__struct_fields__
    assert TextContent(text="t").type == "text"
    assert ToolCall(id="1", name="n", arguments={}).type == "toolCall"
    assert msgspec.to_builtins(TextContent(text="t")) == {"type": "text", "text": "t"}
