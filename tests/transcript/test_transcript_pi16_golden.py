"""Golden tests: our context equals pi 1.6.0's on the sessions it wrote (``tests/data/pi16``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessionkeeper.records import (
    CompactionEntry,
    ContextEditEntry,
    MessageEntry,
    SystemMessage,
    UnknownEntry,
    UnknownMessage,
    UsageEntry,
    encode_entry,
    entry_from_json,
)
from sessionkeeper.transcript import convert_to_llm, load_transcript, message_to_builtins


NAMES = ["basic", "full", "branchy", "modern", "large-2000"]
ALL_LEAVES = ["basic", "full", "branchy", "modern"]


def _golden(samples: Path, name: str, suffix: str) -> dict:
    return json.loads((samples / f"{name}.{suffix}.json").read_text("utf-8"))


@pytest.mark.parametrize("name", NAMES)
def test_default_leaf_context_equals_pi16_golden(pi16_samples: Path, name: str) -> None:
    index = load_transcript(pi16_samples / f"{name}.jsonl")
    golden = _golden(pi16_samples, name, "context")
    context = index.build_context()
    got = context.to_json()
    assert got["messages"] == golden["messages"]
    assert got["thinkingLevel"] == golden["thinkingLevel"]
    assert got["model"] == golden["model"]
    assert [message_to_builtins(m) for m in convert_to_llm(context.messages)] == golden["llmMessages"]
    assert index.leaf_id == _golden(pi16_samples, name, "meta")["meta"]["leafId"]
    assert index.diagnostics.clean


@pytest.mark.parametrize("name", ALL_LEAVES)
def test_every_leaf_equals_pi16_golden(pi16_samples: Path, name: str) -> None:
    index = load_transcript(pi16_samples / f"{name}.jsonl")
    golden = _golden(pi16_samples, name, "all-leaves")
    assert sorted(golden) == sorted(e.id for e in index.entries())
    differing = [leaf for leaf, expected in golden.items() if index.build_context(leaf).to_json() != expected]
    assert differing == []


def test_modern_context_has_what_pi16_adds(pi16_samples: Path) -> None:
    """After a compaction, the context starts with its system message, then its summary; context
    edits are applied (the trimmed read result, the omitted attempt)."""
    index = load_transcript(pi16_samples / "modern.jsonl")
    golden = _golden(pi16_samples, "modern", "all-leaves")
    compaction = next(e for e in index.entries() if isinstance(e, CompactionEntry))
    messages = index.build_context(compaction.id).messages
    assert isinstance(messages[0], SystemMessage)
    assert messages[1].role == "compactionSummary"
    assert [message_to_builtins(m) for m in messages] == golden[compaction.id]["messages"]
    edit = next(e for e in index.entries() if isinstance(e, ContextEditEntry) and e.replacement is not None)
    texts = json.dumps([message_to_builtins(m) for m in index.build_context(edit.id).messages])
    assert "[read output trimmed by extension" in texts


@pytest.mark.parametrize("name", NAMES)
def test_every_pi16_line_is_a_typed_record_written_back_equal(pi16_samples: Path, name: str) -> None:
    """Every entry type and field pi 1.6.0 writes decodes into a typed record (no Unknown*), and
    encodes back to the same JSON value (the line itself is kept byte for byte by the index)."""
    lines = (pi16_samples / f"{name}.jsonl").read_bytes().splitlines()[1:]
    kinds: set[type] = set()
    for line in lines:
        raw = json.loads(line)
        entry = entry_from_json(raw)
        assert not isinstance(entry, UnknownEntry), raw["type"]
        if isinstance(entry, MessageEntry):
            assert not isinstance(entry.message, UnknownMessage), raw["message"]["role"]
        assert json.loads(encode_entry(entry)) == raw
        kinds.add(type(entry))
    if name == "modern":
        assert {UsageEntry, ContextEditEntry, CompactionEntry} <= kinds


def test_pi16_records_carry_the_new_fields(pi16_samples: Path) -> None:
    index = load_transcript(pi16_samples / "modern.jsonl")
    compactions = [e for e in index.entries() if isinstance(e, CompactionEntry)]
    assert [c.retains_none for c in compactions] == [False, True]
    assert all(isinstance(c.system_message, SystemMessage) for c in compactions)
    edits = [e for e in index.entries() if isinstance(e, ContextEditEntry)]
    assert [e.replacement is None for e in edits] == [False, True, True]
    usage = next(e for e in index.entries() if isinstance(e, UsageEntry))
    assert (usage.kind, usage.note, usage.usage.total_tokens) == ("cache_warm", "idle keep-alive", 5201)
    roots = [e.id for e in index.entries() if e.parent_id is None]
    assert roots == _golden(pi16_samples, "modern", "meta")["meta"]["rootIds"]
    assert len(roots) == 3


@pytest.mark.parametrize("name", NAMES)
def test_lines_round_trip_byte_for_byte(pi16_samples: Path, name: str) -> None:
    path = pi16_samples / f"{name}.jsonl"
    index = load_transcript(path)
    lines = path.read_bytes().splitlines()
    assert [index.line_bytes(i) for i in range(len(index))] == lines[1:]
