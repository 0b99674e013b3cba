"""
openai-agents ``Session`` in a transcript: the SDK's own ``Runner`` drives several turns (its real
``OpenAIResponsesModel`` against the loopback fixture server), then ``sessionkeeper context`` reads them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
import pytest
from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, function_tool
from tests.adapters._fixture_server import check_request, load_fixture, running_server

from sessionkeeper.adapters.openai_agents import TranscriptSession
from sessionkeeper.transcript import TranscriptManager


pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@function_tool
def read(path: str) -> str:
    """Read a file."""
    return "a\nb\nc" if path == "notes.md" else ""


def _context(path: Path) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-m", "sessionkeeper", "context", str(path), "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["messages"]  # type: ignore[no-any-return]


async def test_runner_turns_are_kept_in_the_transcript(tmp_path: Path) -> None:
    path = tmp_path / "agents.jsonl"
    transcript = await TranscriptManager.create(path, cwd=str(tmp_path))
    session = TranscriptSession(transcript, model="gpt-5")
    with running_server() as server:
        for name in ("agents_turn1_call", "agents_turn1_answer", "agents_turn2_answer"):
            server.script(load_fixture(name))
        client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="sk-test", max_retries=0)
        agent = Agent(
            name="assistant",
            instructions="Be brief.",
            model=OpenAIResponsesModel(model="gpt-5", openai_client=client),
            tools=[read],
        )
        config = RunConfig(tracing_disabled=True)
        first = await Runner.run(agent, "How many lines has notes.md?", session=session, run_config=config)
        second = await Runner.run(agent, "And its first line?", session=session, run_config=config)
        check_request(server, "agents_turn1_call", 0)
        check_request(server, "agents_turn1_answer", 1)
        check_request(server, "agents_turn2_answer", 2)
    assert first.final_output == "notes.md has three lines."
    assert second.final_output == "The first line is a."
    # the second turn's request replayed the whole first turn from the transcript
    replayed = server.requests[2]["body"]["input"]
    assert [i.get("type", "message") for i in replayed] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
        "message",
    ]
    messages = _context(path)
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "user",
        "assistant",
    ]
    assert messages[1]["content"][0] == {
        "type": "toolCall",
        "id": "call_agents01|fc_agents01",
        "name": "read",
        "arguments": {"path": "notes.md"},
    }
    assert messages[2]["toolCallId"] == "call_agents01|fc_agents01"
    assert messages[2]["content"] == [{"type": "text", "text": "a\nb\nc"}]


async def test_pop_and_clear_move_the_leaf_and_survive_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = TranscriptSession(await TranscriptManager.create(path, cwd=str(tmp_path)))
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"}
    items = [
        {"role": "user", "content": "hi"},
        reasoning,
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "hello", "annotations": []}],
        },
    ]
    await session.add_items(items)
    assert await session.get_items() == items
    assert await session.get_items(limit=1) == items[-1:]
    assert await session.pop_item() == items[2]
    reopened = TranscriptSession(await TranscriptManager.open(path))
    assert await reopened.get_items() == items[:2]
    assert await reopened.pop_item() == reasoning
    assert await reopened.get_items() == items[:1]
    await reopened.clear_session()
    assert await TranscriptSession(await TranscriptManager.open(path)).get_items() == []
    assert len(path.read_text(encoding="utf-8").splitlines()) > 4  # nothing deleted: the branches stay


async def test_items_a_transcript_cannot_keep_are_refused(tmp_path: Path) -> None:
    session = TranscriptSession(await TranscriptManager.create(tmp_path / "s.jsonl", cwd=str(tmp_path)))
    with pytest.raises(ValueError, match="web_search_call"):
        await session.add_items([{"type": "web_search_call", "id": "ws_1", "status": "completed"}])
    assert await session.get_items() == []
