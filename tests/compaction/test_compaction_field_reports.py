"""Field reports B03, B05, B06, B08 (cases/field-reports.md) as tests, with their expected values."""

from __future__ import annotations

from typing import Any

import pytest
from tests.compaction._build import assistant, chain, manager, result, user

from sessionkeeper.compaction import CompactionSettings, Compactor, prepare_compaction
from sessionkeeper.compaction._prompts import IDENTIFIER_PRESERVATION_INSTRUCTIONS
from sessionkeeper.testing import ScriptedModelClient
from sessionkeeper.transcript import (
    AgentMessage,
    AssistantMessage,
    CompactionEntry,
    CompactionSummaryMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)


pytestmark = pytest.mark.anyio


def assert_pairing(messages: tuple[AgentMessage, ...] | list[AgentMessage]) -> None:
    """The PAIRING INVARIANT of the field reports, on a built context."""
    pending: set[str] = set()
    last_assistant_calls: set[str] = set()
    for index, message in enumerate(messages):
        if isinstance(message, ToolResultMessage):
            assert message.tool_call_id in last_assistant_calls, (
                f"orphan result {message.tool_call_id} at {index}"
            )
            assert message.tool_call_id in pending, f"result {message.tool_call_id} not right after its call"
            pending.discard(message.tool_call_id)
            continue
        assert not pending, f"calls {pending} have no results before message {index}"
        if isinstance(message, AssistantMessage):
            last_assistant_calls = {b.id for b in message.content if isinstance(b, ToolCall)}
            pending = set(last_assistant_calls)
        else:
            last_assistant_calls = set()


def b03_branch() -> list[Any]:
    return chain(
        ("e1", user("Read notes.txt and todo.txt, then summarize.")),
        ("e2", assistant("", ("call_a", "read", {"path": "notes.txt"}))),
        ("e3", result("call_a", "n" * 4000)),
        ("e4", assistant("", ("call_b", "read", {"path": "todo.txt"}))),
        ("e5", result("call_b", "t" * 4000)),
        ("e6", assistant("Both files are summarized above.")),
        ("e7", user("Thanks. Now count the words.")),
    )


def test_b03_tool_result_never_starts_the_kept_window() -> None:
    plan = prepare_compaction(b03_branch(), keep_recent_tokens=1010)
    assert plan is not None
    assert plan.first_kept_entry_id == "e6"
    assert plan.is_split_turn and plan.turn_start_entry_id == "e1"
    assert plan.deviation is None
    assert len(plan.turn_prefix_messages) == 5  # e1..e5: the call e4 and its result e5 go together
    assert plan.messages_to_summarize == ()


async def test_b03_compacted_context_satisfies_pairing() -> None:
    transcript, ids = await manager(*(e.message for e in b03_branch()))  # type: ignore[attr-defined]
    compactor = Compactor(settings=CompactionSettings(mode="default"))
    outcome = await compactor.compact(transcript, keep_recent_tokens=1010)
    assert outcome.status == "compacted" and outcome.entry is not None
    assert outcome.entry.first_kept_entry_id == ids[5]
    context = transcript.build_session_context().messages
    assert isinstance(context[0], CompactionSummaryMessage)
    assert len(context) == 3
    assert_pairing(context[1:])


def b05_branch() -> list[Any]:
    calls = [(f"l{i}", "read", {"path": f"{c}.log"}) for i, c in zip(range(1, 5), "abcd", strict=True)]
    return chain(
        ("e1", user("Audit the service logs.")),
        ("e2", assistant("Starting.")),
        ("e3", user("Extra context: " + "x" * 6000)),
        ("e4", assistant("Noted.")),
        ("e5", user("Read all four log files.")),
        ("e6", assistant("", *calls)),
        ("e7", result("l1", "1" * 3000)),
        ("e8", result("l2", "2" * 3000)),
        ("e9", result("l3", "3" * 3000)),
        ("e10", result("l4", "4" * 3000)),
    )


def test_b05_trailing_tool_block_steps_back_to_turn_start() -> None:
    plan = prepare_compaction(b05_branch(), keep_recent_tokens=2000)
    assert plan is not None
    assert plan.first_kept_entry_id == "e5"
    assert plan.deviation == "B05"
    assert plan.pi_first_kept_entry_id == "e1"  # pi keeps everything: nothing summarised
    assert [type(m).__name__ for m in plan.messages_to_summarize] == [
        "UserMessage",
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
    ]
    assert not plan.nothing_to_summarize
    assert plan.kept_tokens > 2000
    assert plan.to_json()["deviation"] == "B05"


def test_b05_single_turn_branch_splits_the_turn() -> None:
    branch = b05_branch()[4:]  # e5 (user) + the tool block: one turn only
    plan = prepare_compaction(branch, keep_recent_tokens=2000)
    assert plan is not None
    assert plan.first_kept_entry_id == "e6" and plan.is_split_turn and plan.deviation == "B05"
    assert plan.turn_start_entry_id == "e5" and len(plan.turn_prefix_messages) == 1


async def test_b06_pending_tool_call_defers_compaction() -> None:
    transcript, ids = await manager(
        user("x" * 60000),
        user("Archive the old reports."),
        assistant("", ("call_z", "archive", {"dir": "reports/2025"})),
    )
    compactor = Compactor(settings=CompactionSettings(mode="default"))
    deferred = await compactor.compact(transcript, reason="threshold", keep_recent_tokens=10)
    assert deferred.status == "pending_tool_results" and deferred.entry is None
    assert deferred.preparation is not None and deferred.preparation.pending_tool_call_ids == ("call_z",)
    assert len(transcript.entries()) == 3  # nothing appended
    await transcript.append_message(result("call_z", "archived 12 files", tool="archive"))
    done = await compactor.compact(transcript, reason="threshold", keep_recent_tokens=10)
    assert done.status == "compacted" and done.entry is not None
    kept = done.entry.first_kept_entry_id
    context = transcript.build_session_context().messages
    assert_pairing(context[1:])
    assert kept in ids[:3] or kept == transcript.entries()[3].id
    parent = transcript.get_entry(done.entry.parent_id or "")
    assert parent is not None and isinstance(parent.message, ToolResultMessage)  # type: ignore[attr-defined]


async def test_b08_file_lists_and_identifier_instruction() -> None:
    transcript, ids = await manager(
        user("Fix the failing refund test."),
        assistant("", ("c1", "read", {"path": "docs/refunds.md"})),
        result("c1", "r" * 2000),
        assistant("", ("c2", "edit", {"path": "src/payments/ledger.py", "old": "a", "new": "b"})),
        result("c2", "ok", tool="edit"),
        assistant("Fixed; run id 3f2a9c1e-77b0-4d2e-9a51-0c4be1f0d6a2 recorded."),
        user("Continue with the next item."),
    )
    summary_text = (
        "## Decisions\nFixed ledger.\n## Open TODOs\nNone.\n## Constraints/Rules\nNone.\n"
        "## Pending user asks\nContinue with the next item.\n## Exact identifiers\n"
        "3f2a9c1e-77b0-4d2e-9a51-0c4be1f0d6a2 docs/refunds.md src/payments/ledger.py"
    )
    client = ScriptedModelClient(handler=lambda request: summary_text)
    compactor = Compactor(model_client=client)  # default settings: safeguard mode
    first = await compactor.compact(transcript, keep_recent_tokens=1)
    assert first.status == "compacted" and first.entry is not None
    assert first.entry.first_kept_entry_id == ids[6]
    assert first.entry.details == {
        "readFiles": ["docs/refunds.md"],
        "modifiedFiles": ["src/payments/ledger.py"],
    }
    assert first.entry.summary.endswith(
        "<read-files>\ndocs/refunds.md\n</read-files>\n\n<modified-files>\nsrc/payments/ledger.py\n</modified-files>"
    )
    prompt = client.requests[0].messages[0]
    assert isinstance(prompt, UserMessage)
    assert IDENTIFIER_PRESERVATION_INSTRUCTIONS in str(prompt.content)
    await transcript.append_message(assistant("", ("c3", "read", {"path": "README.md"})))
    await transcript.append_message(result("c3", "m" * 1000))
    await transcript.append_message(user("Next item, please."))
    second = await compactor.compact(transcript, keep_recent_tokens=1)
    assert second.status == "compacted" and second.entry is not None
    assert second.entry.details["readFiles"] == ["README.md", "docs/refunds.md"]
    assert second.entry.details["modifiedFiles"] == ["src/payments/ledger.py"]
    assert isinstance(transcript.entries()[-1], CompactionEntry)


async def test_b08_extractive_summary_keeps_exact_identifiers() -> None:
    transcript, _ = await manager(
        user("Fix the failing refund test."),
        assistant("", ("c1", "read", {"path": "docs/refunds.md"})),
        result(
            "c1", "see https://example.com/refunds?id=42 and host db.internal:5432\n" + "lorem ipsum " * 400
        ),
        assistant("Fixed; run id 3f2a9c1e-77b0-4d2e-9a51-0c4be1f0d6a2 recorded, commit 9f1c2ab7d3."),
        user("Continue with the next item."),
    )
    outcome = await Compactor().compact(transcript, keep_recent_tokens=1)
    assert outcome.provider == "extractive" and outcome.summary is not None
    for identifier in (
        "3f2a9c1e-77b0-4d2e-9a51-0c4be1f0d6a2",
        "9f1c2ab7d3",
        "https://example.com/refunds?id=42",
        "db.internal:5432",
        "docs/refunds.md",
    ):
        assert identifier in outcome.summary
