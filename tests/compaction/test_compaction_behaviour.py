"""Compactor semantics (budgets, D2, B11, default-mode split turn), chunking, branch summaries."""

from __future__ import annotations

import pytest
from tests.compaction._build import assistant, manager, result, user

from sessionkeeper.compaction import (
    CompactionSettings,
    Compactor,
    adaptive_chunk_ratio,
    chunk_messages_by_max_tokens,
    collect_entries_for_branch_summary,
    generate_branch_summary,
    prepare_branch_entries,
    split_messages_by_token_share,
)
from sessionkeeper.compaction._chunking import max_chunk_tokens, oversized_plan
from sessionkeeper.compaction._prompts import BRANCH_SUMMARY_PREAMBLE, BRANCH_SUMMARY_PROMPT
from sessionkeeper.testing import ScriptedModelClient
from sessionkeeper.transcript import CompactionEntry, CompactionSummaryMessage, UserMessage


pytestmark = pytest.mark.anyio


async def _long_session() -> tuple[object, list[str]]:
    return await manager(
        user("Please audit module one " + "a" * 2000),
        assistant("Audited module one and fixed two bugs. " + "b" * 2000),
        user("Now module two " + "c" * 2000),
        assistant("Module two done. " + "d" * 2000),
        user("Last: module three."),
    )


async def test_manual_without_budget_is_a_strict_checkpoint() -> None:
    transcript, _ = await _long_session()
    outcome = await Compactor().compact(transcript)  # type: ignore[arg-type]
    assert outcome.status == "compacted" and outcome.entry is not None
    entry = outcome.entry
    assert entry.first_kept_entry_id == entry.id  # hardened boundary: nothing before it is kept
    context = transcript.build_session_context().messages  # type: ignore[attr-defined]
    assert len(context) == 1 and isinstance(context[0], CompactionSummaryMessage)
    assert outcome.preparation is not None and len(outcome.preparation.messages_to_summarize) == 5


async def test_configured_keep_budget_applies_to_manual_runs() -> None:
    transcript, ids = await _long_session()
    compactor = Compactor(settings=CompactionSettings(keep_recent_tokens=5))
    outcome = await compactor.compact(transcript)  # type: ignore[arg-type]
    assert outcome.entry is not None and outcome.entry.first_kept_entry_id == ids[4]


async def test_automatic_runs_default_to_20000_and_enabled_false_does_not_stop_them() -> None:
    compactor = Compactor(settings=CompactionSettings(enabled=False))
    assert compactor.keep_budget(reason="threshold", keep_recent_tokens=None) == 20000
    assert compactor.keep_budget(reason="overflow", keep_recent_tokens=None) == 20000
    assert compactor.keep_budget(reason="manual", keep_recent_tokens=None) is None
    transcript, _ = await _long_session()
    outcome = await compactor.compact(transcript, reason="overflow", keep_recent_tokens=5)  # type: ignore[arg-type]
    assert outcome.status == "compacted"


async def test_d2_nothing_to_summarize_calls_no_summariser_and_writes_nothing() -> None:
    transcript, _ = await manager(user("hi"), assistant("hello"))
    client = ScriptedModelClient(responses=[])
    outcome = await Compactor(model_client=client).compact(transcript, keep_recent_tokens=20000)  # type: ignore[arg-type]
    assert outcome.status == "nothing_to_summarize" and outcome.entry is None
    assert outcome.preparation is not None and outcome.preparation.to_json()["nothingToSummarize"] is True
    assert client.requests == [] and len(transcript.entries()) == 2  # type: ignore[attr-defined]


async def test_already_compacted_and_empty() -> None:
    transcript, _ = await _long_session()
    await Compactor().compact(transcript)  # type: ignore[arg-type]
    again = await Compactor().compact(transcript)  # type: ignore[arg-type]
    assert again.status == "already_compacted" and again.entry is None
    empty, _ = await manager()
    assert (await Compactor().compact(empty)).status == "empty"  # type: ignore[arg-type]


async def test_b11_summary_not_smaller_than_what_it_replaces_is_not_committed() -> None:
    transcript, _ = await manager(user("Fix it."), assistant("Done."), user("Thanks, next."))
    client = ScriptedModelClient(handler=lambda request: "long summary " * 200)
    settings = CompactionSettings(mode="default")
    outcome = await Compactor(settings=settings, model_client=client).compact(
        transcript, keep_recent_tokens=1
    )  # type: ignore[arg-type]
    assert outcome.status == "ineffective" and outcome.entry is None
    assert len(transcript.entries()) == 3  # type: ignore[attr-defined]


async def test_default_mode_split_turn_merges_history_and_prefix() -> None:
    transcript, ids = await manager(
        user("Earlier question " + "e" * 800),
        assistant("Earlier answer " + "f" * 800),
        user("Big task"),
        assistant("step one", ("c1", "read", {"path": "x.py"})),
        result("c1", "x" * 4000),
        assistant("step two " + "g" * 400),
    )

    def reply(request: object) -> str:
        text = str(request.messages[0].content)  # type: ignore[attr-defined]
        return "PREFIX" if "PREFIX of a turn" in text else "HISTORY"

    client = ScriptedModelClient(handler=reply)
    settings = CompactionSettings(mode="default")
    outcome = await Compactor(settings=settings, model_client=client).compact(
        transcript, keep_recent_tokens=50
    )  # type: ignore[arg-type]
    assert outcome.entry is not None and outcome.entry.first_kept_entry_id == ids[5]
    assert outcome.summary == (
        "HISTORY\n\n---\n\n**Turn Context (split turn):**\n\nPREFIX\n\n<read-files>\nx.py\n</read-files>"
    )
    assert sorted(r.max_tokens for r in client.requests) == [8192, 13107]  # 0.5 and 0.8 x reserve


def test_split_by_token_share_waits_for_tool_results() -> None:
    def block(stop: str) -> list[object]:
        return [
            user("u" * 400),
            assistant("", ("a", "read", {"path": "p"}), stop=stop),
            result("a", "r" * 400),
            user("v" * 400),
        ]

    chunks = split_messages_by_token_share(block("toolUse"), parts=2)  # type: ignore[arg-type]
    assert [len(c) for c in chunks] == [1, 3]  # split moved back to the assistant: call + result together
    aborted = split_messages_by_token_share(block("aborted"), parts=2)  # type: ignore[arg-type]
    assert [len(c) for c in aborted] == [2, 2]  # an aborted call never holds the split open


def test_chunk_by_max_tokens_and_oversized() -> None:
    messages = [
        user("a" * 400),
        user("b" * 400),
        user("c" * 4000),
        user("d" * 40),
    ]  # 100, 100, 1000, 10 tokens
    chunks = chunk_messages_by_max_tokens(messages, max_tokens=300)  # effective 250
    assert [len(c) for c in chunks] == [2, 1, 1]
    plan = oversized_plan(messages, context_window=1000)
    assert len(plan.small_messages) == 3 and plan.oversized_notes == (
        "[Large user (~1K tokens) omitted from summary]",
    )
    assert adaptive_chunk_ratio(messages, context_window=200_000) == 0.4
    assert adaptive_chunk_ratio(messages, context_window=1000) == pytest.approx(0.15)
    assert max_chunk_tokens(messages, context_window=200_000) == 80_000 - 4096


async def test_branch_summary_pi_rules_and_llm_request() -> None:
    transcript, ids = await manager(
        user("Try approach A"),
        assistant("", ("c1", "edit", {"path": "src/a.py"})),
        result("c1", "ok", tool="edit"),
        assistant("Approach A failed."),
    )
    transcript.branch(ids[0])  # type: ignore[attr-defined]
    await transcript.append_message(assistant("Let's try B."))  # type: ignore[attr-defined]
    entries, common = collect_entries_for_branch_summary(
        transcript,  # type: ignore[arg-type]
        old_leaf_id=ids[3],
        target_id=transcript.leaf_id,  # type: ignore[attr-defined]
    )
    assert common == ids[0] and [e.id for e in entries] == ids[1:]
    prepared = prepare_branch_entries(entries)
    assert len(prepared.messages) == 2  # the tool result is skipped
    client = ScriptedModelClient(responses=["## Goal\nTry A"])
    summary = await generate_branch_summary(entries, model_client=client, custom_instructions="why it failed")
    assert (
        summary.summary
        == BRANCH_SUMMARY_PREAMBLE + "## Goal\nTry A\n\n<modified-files>\nsrc/a.py\n</modified-files>"
    )
    assert summary.details() == {"readFiles": [], "modifiedFiles": ["src/a.py"]}
    request = client.requests[0]
    assert request.max_tokens == 2048
    prompt = request.messages[0]
    assert isinstance(prompt, UserMessage)
    assert str(prompt.content).find(BRANCH_SUMMARY_PROMPT.split("\n")[0]) >= 0
    assert "Additional focus: why it failed" in str(prompt.content)
    assert (await generate_branch_summary([])).summary == "No content to summarize"
    offline = await generate_branch_summary(entries)
    assert offline.provider == "extractive" and offline.summary.startswith(BRANCH_SUMMARY_PREAMBLE)


def test_branch_budget_keeps_summary_entries_under_90_percent() -> None:
    big = CompactionEntry(
        id="c0",
        parent_id=None,
        timestamp="2026-01-05T10:00:00.000Z",
        summary="s" * 400,
        first_kept_entry_id="c0",
        tokens_before=1,
    )
    from tests.compaction._build import chain

    entries = [big, *chain(("e1", user("u" * 40)))]
    prepared = prepare_branch_entries(entries, token_budget=105)  # 10 tokens used, summary is 100
    assert len(prepared.messages) == 2 and isinstance(prepared.messages[0], CompactionSummaryMessage)
    assert len(prepare_branch_entries(entries, token_budget=11).messages) == 1  # 10 >= 90% of 11


GOOD_SECTIONS = (
    "## Decisions\n- d\n## Open TODOs\n- t\n## Constraints/Rules\n- c\n## Pending user asks\n- module three\n"
    "## Exact identifiers\n- none"
)


async def test_safeguard_chunks_large_history_and_merges() -> None:
    transcript, _ = await manager(
        *(user(f"part {i} " + "w" * 6000) for i in range(8)), user("Last: module three.")
    )
    client = ScriptedModelClient(handler=lambda request: GOOD_SECTIONS)
    compactor = Compactor(model_client=client, context_window=20_000)  # chunks of 20000*ratio - 4096 tokens
    outcome = await compactor.compact(transcript, keep_recent_tokens=5)  # type: ignore[arg-type]
    assert outcome.status == "compacted" and outcome.provider == "llm"
    texts = [str(r.messages[0].content) for r in client.requests]  # type: ignore[union-attr]
    assert len(texts) > 2  # several chunk requests, then the merge
    assert any("Merge these partial summaries into a single cohesive summary." in t for t in texts)
    assert any("[Chunk 1 — oldest messages]" in t for t in texts)
    assert outcome.summary is not None and outcome.summary.startswith(GOOD_SECTIONS)


async def test_safeguard_redistils_previous_summary() -> None:
    transcript, _ = await _long_session()
    await Compactor(settings=CompactionSettings(keep_recent_tokens=5)).compact(transcript)  # type: ignore[arg-type]
    await transcript.append_message(assistant("Module three done. " + "z" * 3000))  # type: ignore[attr-defined]
    await transcript.append_message(user("And module four?"))  # type: ignore[attr-defined]
    client = ScriptedModelClient(handler=lambda request: GOOD_SECTIONS)
    outcome = await Compactor(model_client=client).compact(transcript, keep_recent_tokens=1)  # type: ignore[arg-type]
    assert outcome.status == "compacted"
    first = str(client.requests[0].messages[0].content)  # type: ignore[union-attr]
    assert "<previous-compaction-summary>" in first and "re-distill" in first


async def test_safeguard_history_share_drops_oldest_chunk_and_summarises_it_first() -> None:
    history = [user(f"part {i} " + "h" * 3990) for i in range(8)]  # 8 x 1000 tokens
    tail = [user("tail " + "t" * 27990)]  # one kept message of 7000 tokens, over the keep budget
    transcript, _ = await manager(*history, *tail)
    client = ScriptedModelClient(handler=lambda request: GOOD_SECTIONS)
    compactor = Compactor(model_client=client, context_window=10_000)
    # 2000 = D9's keep cap in this window (0.4 x (10000 - 5000)); the kept 7000 exceed 0.5 x 1.2 x window
    outcome = await compactor.compact(transcript, keep_recent_tokens=2000)  # type: ignore[arg-type]
    assert outcome.status == "compacted" and outcome.preparation is not None
    assert len(outcome.preparation.messages_to_summarize) == 8
    texts = [str(r.messages[0].content) for r in client.requests]  # type: ignore[union-attr]
    assert "part 0 " in texts[0]  # the dropped oldest chunk is summarised first
    redistil = [t for t in texts if "<previous-compaction-summary>" in t]
    assert redistil and "part 0 " not in redistil[0] and "part 7 " in "".join(texts[-5:])


AGENTS_MD = """# Agent

## Session Startup
Read MEMORY.md first.
```md
## Not a heading inside code
```
### Detail
Check the inbox.

## Red Lines
Never push to main.

## Other
Ignored.
"""


def test_extract_sections_and_workspace_rules() -> None:
    from sessionkeeper.compaction._suffix import extract_sections, workspace_rules

    startup, red = extract_sections(AGENTS_MD, ["session startup", "Red Lines"])
    assert startup.startswith("## Session Startup\nRead MEMORY.md first.") and "### Detail" in startup
    assert "## Not a heading inside code" in startup and "Red Lines" not in startup
    assert red == "## Red Lines\nNever push to main."
    rules = workspace_rules(AGENTS_MD, ("Session Startup", "Red Lines"))
    assert rules.startswith("\n\n<workspace-critical-rules>\n## Session Startup") and rules.endswith(
        "</workspace-critical-rules>"
    )
    legacy = "## Every Session\nSay hi.\n\n## Safety\nBe careful.\n"
    assert "Say hi." in workspace_rules(legacy, ("Session Startup", "Red Lines"))
    assert workspace_rules(AGENTS_MD, None) == "" and workspace_rules(None, ("Red Lines",)) == ""


async def test_safeguard_summary_carries_workspace_rules(tmp_path: object) -> None:
    from pathlib import Path

    workspace = Path(str(tmp_path))
    (workspace / "AGENTS.md").write_text(AGENTS_MD, encoding="utf-8")
    transcript, _ = await _long_session()
    settings = CompactionSettings(post_compaction_sections=("Red Lines",))
    outcome = await Compactor(settings=settings, workspace_dir=workspace).compact(
        transcript, keep_recent_tokens=5
    )  # type: ignore[arg-type]
    assert outcome.summary is not None
    assert outcome.summary.endswith(
        "<workspace-critical-rules>\n## Red Lines\nNever push to main.\n</workspace-critical-rules>"
    )
