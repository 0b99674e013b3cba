"""The extractive summariser (DESIGN D3): sections, exact identifiers, size bound, recall on samples."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import anyio
import pytest
from tests.compaction._build import assistant, result, user

from sessionkeeper.compaction import Compactor, extract_identifiers, extractive_summary, prepare_compaction
from sessionkeeper.compaction._extractive import message_text
from sessionkeeper.compaction._prompts import has_required_sections
from sessionkeeper.transcript import AgentMessage, AssistantMessage, ToolCall
from sessionkeeper.transcript._load import load_transcript
from sessionkeeper.transcript._manager import TranscriptManager


def test_identifier_extraction() -> None:
    text = (
        "Saw 3f2a9c1e-77b0-4d2e-9a51-0c4be1f0d6a2 in /var/log/app.log "
        "(see https://ci.example.com/run/88?x=1), commit 9f1c2ab7d3e4, ticket 12345678, "
        "db at db.internal:5432, file src/payments/ledger.py and README.md; "
        "windows C:\\\\Users\\\\dev\\\\out.txt. Short: abc 42."
    )
    found = extract_identifiers(text)
    for expected in (
        "3f2a9c1e-77b0-4d2e-9a51-0c4be1f0d6a2",
        "/var/log/app.log",
        "https://ci.example.com/run/88?x=1",
        "9f1c2ab7d3e4",
        "12345678",
        "db.internal:5432",
        "src/payments/ledger.py",
        "README.md",
    ):
        assert expected in found, expected
    assert "abc" not in found and "42" not in found
    assert extract_identifiers("x" * 100_000) == []  # long tokens are skipped, the scan stays linear


def test_sections_goal_constraints_pending_errors() -> None:
    messages: list[AgentMessage] = [
        user("Migrate the billing job. You must never touch prod; always run tests first."),
        assistant(
            "I decided to use the staging queue because prod is off limits.",
            ("c1", "bash", {"command": "pytest"}),
        ),
        result("c1", "FAILED tests/test_bill.py::test_rate - AssertionError", tool="bash", is_error=True),
        assistant("Next I still need to fix test_rate."),
        user("Also rename the cron entry to billing-nightly."),
    ]
    text = extractive_summary(
        messages, read_files=["a.py"], modified_files=["b.py"], previous_summary="old notes"
    )
    assert has_required_sections(text)
    assert text.startswith("## Goal\nMigrate the billing job.")
    assert "Latest request: Also rename the cron entry to billing-nightly." in text
    assert "- You must never touch prod; always run tests first." in text
    assert "I decided to use the staging queue" in text
    assert "- Next I still need to fix test_rate." in text
    assert "## Pending user asks\n- Also rename the cron entry to billing-nightly." in text
    assert "bash: FAILED tests/test_bill.py::test_rate - AssertionError" in text
    assert "Read: a.py" in text and "Modified: b.py" in text
    assert "## Earlier summary\n> old notes" in text


def test_size_bound_keeps_recent_identifiers() -> None:
    messages: list[AgentMessage] = [
        user(f"check /srv/data/file{i:05d}.bin please " + "words " * 50) for i in range(400)
    ]
    text = extractive_summary(messages, previous_summary="p" * 20000, max_chars=4000)
    assert len(text) <= 4000
    assert "/srv/data/file00399.bin" in text  # the most recent identifiers survive
    assert has_required_sections(text)


def _recall(messages: tuple[AgentMessage, ...], summary: str) -> tuple[int, float]:
    sources: list[str] = []
    for message in messages:
        sources.append(message_text(message))
        if isinstance(message, AssistantMessage):
            sources += [
                str(v) for b in message.content if isinstance(b, ToolCall) for v in b.arguments.values()
            ]
    identifiers = set(extract_identifiers("\n".join(sources)))
    if not identifiers:
        return 0, 1.0
    return len(identifiers), sum(1 for i in identifiers if i in summary) / len(identifiers)


@pytest.mark.parametrize("name", ["basic", "full", "large-2000", "large-20k"])
def test_identifier_recall_on_samples(pi_samples: Path, tmp_path: Path, name: str) -> None:
    target = tmp_path / f"{name}.jsonl"
    if name == "large-20k":
        target.write_bytes(gzip.decompress((pi_samples / "large-20k.jsonl.gz").read_bytes()))
    else:
        shutil.copyfile(pi_samples / f"{name}.jsonl", target)
    index = load_transcript(target)
    plan = prepare_compaction(index.branch(index.leaf_id), keep_recent_tokens=None)
    assert plan is not None

    async def run() -> str:
        transcript = await TranscriptManager.open(target, durability="none")
        outcome = await Compactor().compact(transcript)  # manual, no budget: strict checkpoint
        assert outcome.provider == "extractive" and outcome.summary is not None
        return outcome.summary

    summary = anyio.run(run)
    count, recall = _recall((*plan.messages_to_summarize, *plan.turn_prefix_messages), summary)
    print(f"{name}: {count} identifiers, recall {recall:.3f}, summary {len(summary)} chars")
    assert recall >= 0.95
    assert len(summary) <= 16_000
