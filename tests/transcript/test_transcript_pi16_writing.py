"""
Writing pi 1.6 files: usage entries, context edits, system message entries with section patches,
compactions with the current ``systemMessage``, retain-none compactions, pi 1.6's branch summary
``fromId``; pi 1.6.0 loads what we write with our context on every leaf (live oracle), and the
generation a manager writes for follows the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from msgspec import UNSET
from tests import _pi16_oracle
from tests._helpers import assistant, tool_call, tool_result, user
from tests._pi16_oracle import Pi16Oracle

from sessionkeeper.exceptions import EntryNotFoundError
from sessionkeeper.records import (
    CompactionEntry,
    ContextEditEntry,
    Cost,
    SystemMessage,
    TextContent,
    ToolDeclaration,
    ToolReference,
    Usage,
)
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import TranscriptManager, current_system_message, load_transcript


pi16_oracle = _pi16_oracle.pi16_oracle
TOOL_READ = ToolDeclaration(
    name="read",
    description="Read the contents of a file.",
    parameters={"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}},
    constrained_sampling={"type": "json_schema", "strict": "prefer"},
)
TOOL_WRITE = ToolDeclaration(
    name="write", description="Create or overwrite files", parameters={"type": "object", "properties": {}}
)
TOOL_LS = ToolDeclaration(name="ls", description="List a directory", parameters={"type": "object"})
USAGE = Usage(
    input=0,
    output=1,
    cache_read=5200,
    cache_write=0,
    total_tokens=5201,
    cost=Cost(input=0, output=0.000015, cache_read=0.00156, cache_write=0, total=0.001575),
)


async def _write_pi16_session(path: Path) -> TranscriptManager:
    m = await TranscriptManager.create(
        path, cwd="/home/dev/project", clock=FakeClock(now_ms=1_796_161_287_000)
    )
    m.pi_generation = "1.6"
    await m.append_model_change("anthropic", model_id="claude-sonnet-4-5")
    await m.append_system_message(
        sections={"preamble": "You are a coding assistant.", "tools": "<tools>read, write</tools>"},
        tools_added=[TOOL_READ, TOOL_WRITE],
    )
    first = await m.append_message(user("Read the README", ts=1_796_161_287_100))
    await m.append_message(
        assistant("", tool_call("c1", "read", {"path": "README.md"}), stop="toolUse", ts=2)
    )
    big = await m.append_message(tool_result("c1", "line\n" * 400, ts=3))
    await m.append_message(assistant("It has 400 lines.", ts=4))
    await m.append_usage(
        "cache_warm", provider="anthropic", model="claude-sonnet-4-5", usage=USAGE, note="idle"
    )
    await m.append_system_message(
        sections={
            "project_context": "<project_context>Run tests.</project_context>",
            "tools": "<tools>read, ls</tools>",
        },
        tools_added=[TOOL_LS],
        tools_removed=[ToolReference(name="write")],
    )
    await m.append_context_edit(big.id, "[read output trimmed: 400 lines]")
    await m.append_message(user("Try again", ts=5))
    failed = await m.append_message(assistant("partial", stop="length", ts=6))
    await m.append_context_edit(failed.id, None)
    kept = await m.append_message(user("Summarise it", ts=7))
    await m.append_message(assistant("Summary: a README.", ts=8))
    await m.append_compaction(
        summary="## Goal\nRead the README.", first_kept_entry_id=kept.id, tokens_before=3200
    )
    await m.append_system_message(sections={"project_context": None})
    await m.append_message(user("Next", ts=9))
    await m.append_message(assistant("Done next.", ts=10))
    await m.append_compaction(
        summary="Checkpoint.", first_kept_entry_id=None, tokens_before=900, from_hook=True
    )
    await m.append_message(user("After the checkpoint", ts=11))
    await m.append_message(assistant("Fine.", ts=12))
    await m.append_label(first.id, "start")
    await m.branch_with_summary(first.id, "The user explored a branch.")
    await m.append_message(assistant("Back at the start.", ts=13))
    m.reset_leaf()
    await m.append_system_message(sections={"preamble": "Second root."}, tools_added=[TOOL_READ])
    await m.append_message(user("A second root", ts=14, blocks=True))
    return m


@pytest.mark.anyio
async def test_pi16_entries_are_written_as_pi16_writes_them(tmp_path: Path) -> None:
    m = await _write_pi16_session(tmp_path / "s.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "s.jsonl").read_bytes().splitlines()]
    usage = next(line for line in lines if line["type"] == "usage")
    assert list(usage) == [
        "type",
        "id",
        "parentId",
        "timestamp",
        "kind",
        "provider",
        "model",
        "usage",
        "note",
    ]
    edits = [line for line in lines if line["type"] == "context_edit"]
    # a string replacement of a tool result is written as one text block, as pi's appendContextEdit does
    assert edits[0]["replacement"] == {
        "content": [{"type": "text", "text": "[read output trimmed: 400 lines]"}]
    }
    assert edits[1]["replacement"] is None
    compactions = [line for line in lines if line["type"] == "compaction"]
    assert compactions[1]["firstKeptEntryId"] == compactions[1]["id"]
    first_system = compactions[0]["systemMessage"]
    assert list(first_system["sections"]) == ["preamble", "tools", "project_context"]
    assert [t["name"] for t in first_system["toolsAdded"]] == ["read", "ls"]
    assert "project_context" not in compactions[1]["systemMessage"]["sections"]
    summary = next(line for line in lines if line["type"] == "branch_summary")
    assert summary["fromId"] != summary["parentId"]  # pi 1.6: the abandoned leaf
    abandoned = lines[lines.index(summary) - 1]  # the leaf when navigating: the label entry
    assert (summary["fromId"], abandoned["type"]) == (abandoned["id"], "label")
    reopened = await TranscriptManager.open(tmp_path / "s.jsonl")
    assert reopened.pi_generation == "1.6"
    assert m.build_session_context().to_json() == reopened.build_session_context().to_json()


@pytest.mark.oracle
@pytest.mark.anyio
async def test_pi16_loads_what_we_write_with_our_context_on_every_leaf(
    pi16_oracle: Pi16Oracle, tmp_path: Path
) -> None:
    path = tmp_path / "ours.jsonl"
    await _write_pi16_session(path)
    expected = pi16_oracle.context(path, all_leaves=True)
    index = load_transcript(path)
    assert sorted(expected) == sorted(e.id for e in index.entries())
    assert len(expected) >= 25
    assert [leaf for leaf, ctx in expected.items() if index.build_context(leaf).to_json() != ctx] == []
    meta = pi16_oracle.context(path, meta=True)["meta"]
    assert meta["rootIds"] == [e.id for e in index.entries() if e.parent_id is None]
    system = current_system_message(index.build_context().messages)
    assert system is not None
    assert meta["systemSections"] == list(system.sections or {})
    assert meta["tools"] == [t.name for t in system.tools_added or ()]


@pytest.mark.anyio
async def test_context_edit_is_refused_as_pi_refuses_it(tmp_path: Path) -> None:
    m = await TranscriptManager.create(tmp_path / "s.jsonl", cwd="/w")
    system = await m.append_system_message(sections={"preamble": "x"})
    asked = await m.append_message(user("hi"))
    with pytest.raises(EntryNotFoundError):
        await m.append_context_edit("nope0000", None)
    with pytest.raises(ValueError, match="editable"):
        await m.append_context_edit(system.id, None)
    m.branch(system.id)
    with pytest.raises(ValueError, match="active branch"):
        await m.append_context_edit(asked.id, None)
    m.branch(asked.id)
    edit = await m.append_context_edit(asked.id, [TextContent(text="hello")])
    assert isinstance(edit, ContextEditEntry)
    assert m.build_session_context().to_json()["messages"][1]["content"] == [
        {"type": "text", "text": "hello"}
    ]


@pytest.mark.anyio
async def test_generation_defaults_to_what_the_file_contains(
    tmp_path: Path, pi16_samples: Path, pi_samples: Path
) -> None:
    for name in ("modern", "basic", "full"):
        assert (await TranscriptManager.open(pi16_samples / f"{name}.jsonl")).pi_generation == "1.6"
    for name in ("basic", "full", "branchy"):
        assert (await TranscriptManager.open(pi_samples / f"{name}.jsonl")).pi_generation == "0.73"
    fresh = await TranscriptManager.create(tmp_path / "new.jsonl", cwd="/w")
    assert fresh.pi_generation == "0.73"
    first = await fresh.append_message(user("hi"))
    await fresh.append_message(assistant("hello"))
    summary = await fresh.branch_with_summary(first.id, "explored")
    assert summary.from_id == first.id  # pi 0.73.1: the navigation target
    compaction = await fresh.append_compaction(summary="s", first_kept_entry_id=first.id, tokens_before=10)
    assert isinstance(compaction, CompactionEntry)
    assert compaction.system_message is UNSET
    await fresh.append_system_message(sections={"preamble": "p"})
    assert fresh.pi_generation == "1.6"  # the file now holds a pi 1.6 entry
    later = await fresh.append_compaction(summary="s2", first_kept_entry_id=None, tokens_before=5)
    assert isinstance(later.system_message, SystemMessage)
    assert later.system_message.sections == {"preamble": "p"}
