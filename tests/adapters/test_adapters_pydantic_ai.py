"""
pydantic-ai glue: a real ``Agent`` (its own ``FunctionModel``) runs several turns with tool calls, persisted
through :class:`SessionHistory`; ``sessionkeeper context --json`` then reads the transcript.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from sessionkeeper import ModelInfo, RuntimeSettings, SessionRuntime, SessionStore
from sessionkeeper.adapters.pydantic_ai import (
    SYSTEM_PROMPT_CUSTOM_TYPE,
    HistoryProcessor,
    SessionHistory,
    from_pydantic_ai_messages,
)
from sessionkeeper.cli import cli
from sessionkeeper.compaction import CompactionSettings
from sessionkeeper.pruning import PRUNE_RECORD_CUSTOM_TYPE, PruningSettings
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import COMPACTION_SUMMARY_PREFIX


pytestmark = pytest.mark.anyio

FILES = {"notes.md": "a\nb\nc", "todo.md": "ship it"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _context(path: Path) -> list[dict[str, Any]]:
    result = CliRunner().invoke(cli, ["context", str(path), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["messages"]  # type: ignore[no-any-return]


def _last_user_text(messages: list[pai.ModelMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, pai.ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, pai.UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ""


class Scripted:
    """A model that reads a file when asked about one, then answers from the tool result."""

    def __init__(self) -> None:
        self.seen: list[list[pai.ModelMessage]] = []

    def reply(self, messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        self.seen.append(list(messages))
        last = messages[-1]
        returns = [p for p in last.parts if isinstance(p, pai.ToolReturnPart)]
        if returns:
            text = str(returns[0].content)
            return pai.ModelResponse(
                parts=[pai.TextPart(f"{returns[0].tool_call_id}: {len(text.splitlines())} lines.")],
                model_name="scripted",
            )
        prompt = _last_user_text(messages)
        name = next((n for n in FILES if n in prompt), None)
        if name is None:
            return pai.ModelResponse(parts=[pai.TextPart(f"You said: {prompt}")], model_name="scripted")
        return pai.ModelResponse(
            parts=[
                pai.ThinkingPart("I should read it.", signature="sig-1"),
                pai.ToolCallPart("read", {"path": name}, tool_call_id=f"call_{len(self.seen)}"),
            ],
            model_name="scripted",
        )


def _agent(model: Any, history: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(model, system_prompt="Be brief.", capabilities=[ProcessHistory(history)])

    @agent.tool_plain
    def read(path: str) -> str:
        """Read a file."""
        return FILES[path]

    return agent


async def test_agent_turns_are_kept_in_the_transcript_and_replayed(tmp_path: Path) -> None:
    scripted = Scripted()
    async with SessionStore.open(tmp_path / "sessions") as store:
        runtime = SessionRuntime(store, model=ModelInfo(provider="function", model_id="scripted"))
        history = SessionHistory(runtime, "agent:main:main")
        agent = _agent(FunctionModel(scripted.reply, model_name="scripted"), history)
        outputs = []
        for prompt in ("How many lines has notes.md?", "And todo.md?", "Thanks!"):
            result = await agent.run(prompt, message_history=await history.load())
            await history.save(result.all_messages())
            outputs.append(result.output)
        assert outputs == ["call_1: 3 lines.", "call_3: 1 lines.", "You said: Thanks!"]
        # the last request replayed both earlier turns from the transcript, system prompt first
        replayed = from_pydantic_ai_messages(scripted.seen[-1])
        assert [m.role for m in replayed] == [
            "custom",
            "user",
            "assistant",
            "toolResult",
            "assistant",
            "user",
            "assistant",
            "toolResult",
            "assistant",
            "user",
        ]
        entry = await store.get("agent:main:main")
        assert entry is not None
        path = store.transcript_file(entry)
    assert path is not None
    messages = _context(path)
    assert [m["role"] for m in messages] == [
        "custom",
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "user",
        "assistant",
    ]
    assert messages[0]["customType"] == SYSTEM_PROMPT_CUSTOM_TYPE and messages[0]["content"] == "Be brief."
    assert messages[1]["content"] == "How many lines has notes.md?"
    call = messages[2]["content"]
    assert call[0] == {"type": "thinking", "thinking": "I should read it.", "thinkingSignature": "sig-1"}
    assert call[1] == {"type": "toolCall", "id": "call_1", "name": "read", "arguments": {"path": "notes.md"}}
    assert messages[2]["api"] == "pydantic-ai" and messages[2]["model"] == "scripted"
    assert messages[2]["stopReason"] == "toolUse"
    assert messages[3]["toolCallId"] == "call_1" and messages[3]["toolName"] == "read"
    assert messages[3]["content"] == [{"type": "text", "text": "a\nb\nc"}]
    assert messages[7]["toolCallId"] == "call_3"
    assert messages[-1]["content"] == [{"type": "text", "text": "You said: Thanks!"}]


async def test_threshold_compaction_replaces_the_history_with_the_summary(tmp_path: Path) -> None:
    scripted = Scripted()
    settings = RuntimeSettings(compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=50))
    async with SessionStore.open(tmp_path / "sessions") as store:
        runtime = SessionRuntime(
            store,
            model=ModelInfo(provider="function", model_id="scripted", context_window=1400),
            settings=settings,
        )
        history = SessionHistory(runtime, "agent:main:main")
        agent = _agent(FunctionModel(scripted.reply, model_name="scripted"), history)
        compactions = []
        for turn in range(12):
            prompt = f"Turn {turn}: " + "please remember this sentence well. " * 12
            result = await agent.run(prompt, message_history=await history.load())
            outcome = await history.save(result.all_messages())
            if outcome.compaction is not None and outcome.compaction.compacted:
                compactions.append(turn)
        assert compactions, "the context never crossed the threshold"
        loaded = await history.load()
        first = loaded[0]
        assert isinstance(first, pai.ModelRequest)
        [part] = first.parts
        assert isinstance(part, pai.UserPromptPart) and str(part.content).startswith(
            COMPACTION_SUMMARY_PREFIX
        )
        # the model saw the summary, not the whole conversation
        assert str(scripted.seen[-1][0].parts[0].content).startswith(COMPACTION_SUMMARY_PREFIX)  # type: ignore[union-attr]
        entry = await store.get("agent:main:main")
        assert entry is not None and entry.compaction_count == len(compactions)
        path = store.transcript_file(entry)
    assert path is not None
    roles = [m["role"] for m in _context(path)]
    assert roles[0] == "compactionSummary" and roles[-1] == "assistant"


async def test_processor_prunes_old_tool_results_and_records_the_decision(tmp_path: Path) -> None:
    big = "x" * 6000
    files = {f"f{i}.txt": big for i in range(5)}

    def model(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        last = messages[-1]
        done = sum(isinstance(p, pai.ToolReturnPart) for m in messages for p in getattr(m, "parts", ()))
        if done < len(files) and isinstance(last, pai.ModelRequest):
            return pai.ModelResponse(
                parts=[pai.ToolCallPart("read", {"path": f"f{done}.txt"}, tool_call_id=f"c{done}")]
            )
        return pai.ModelResponse(parts=[pai.TextPart("done")])

    clock = FakeClock()
    settings = RuntimeSettings(pruning=PruningSettings(mode="cache-ttl"))
    async with SessionStore.open(tmp_path / "sessions") as store:
        runtime = SessionRuntime(
            store,
            model=ModelInfo(provider="anthropic", model_id="claude-sonnet-4-5", context_window=8000),
            settings=settings,
            clock=clock,
        )
        history = SessionHistory(runtime, "k")
        agent: Agent[None, str] = Agent(FunctionModel(model), capabilities=[ProcessHistory(history)])

        @agent.tool_plain
        def read(path: str) -> str:
            """Read a file."""
            return files[path]

        result = await agent.run("read them all", message_history=await history.load())
        await history.save(result.all_messages())
        report = history.last_report
        assert report is not None and report.pruning.skipped == "ttl-not-expired"  # the cache is warm
        clock.advance(10 * 60)  # the 5 minute TTL expired: old tool results are trimmed
        files.update({"f5.txt": "y", "f6.txt": "y"})
        result = await agent.run("and once more", message_history=await history.load())
        await history.save(result.all_messages())
        report = history.last_report
        # the first request of the run trimmed; pydantic-ai kept the trimmed list for the later ones
        assert report is not None and report.pruning.skipped == "ttl-not-expired"
        sent = {
            p.tool_call_id: p.content
            for m in result.all_messages()
            for p in getattr(m, "parts", ())
            if isinstance(p, pai.ToolReturnPart)
        }
        assert all("[Tool result trimmed" in str(sent[c]) for c in ("c0", "c1", "c2"))
        session = history.session
        assert session is not None
        records = [
            e
            for e in session.transcript.entries()
            if getattr(e, "custom_type", None) == PRUNE_RECORD_CUSTOM_TYPE
        ]
        assert [r.data["softTrimmed"] for r in records] == [["c0", "c1", "c2"]]  # type: ignore[attr-defined]
        path = store.transcript_file(await store.get("k"))  # type: ignore[arg-type]
    assert path is not None
    # the transcript keeps every result whole: pruning only shaped what was sent
    results = [m for m in _context(path) if m["role"] == "toolResult"]
    assert [len(m["content"][0]["text"]) for m in results] == [6000] * 5 + [1, 1]


async def test_standalone_processor_with_the_test_model() -> None:
    processor = HistoryProcessor()
    agent: Agent[None, str] = Agent(TestModel(), capabilities=[ProcessHistory(processor)])

    @agent.tool_plain
    def read(path: str) -> str:
        """Read a file."""
        return "a\nb"

    first = await agent.run("read something")
    second = await agent.run("again", message_history=first.all_messages())
    report = processor.last_report
    assert report is not None
    assert report.pruning.skipped == "mode-off"
    assert not report.over_threshold and report.context_tokens > 0
    kinds = [m.kind for m in second.all_messages()]
    assert kinds[:4] == ["request", "response", "request", "response"]
    pairs = from_pydantic_ai_messages(second.all_messages())
    calls = [b.id for m in pairs if m.role == "assistant" for b in m.content if b.type == "toolCall"]  # type: ignore[union-attr]
    results = [m.tool_call_id for m in pairs if m.role == "toolResult"]  # type: ignore[union-attr]
    assert calls and calls == results
