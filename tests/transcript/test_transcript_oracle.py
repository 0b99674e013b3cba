"""Interop with the real pi 0.73.1: files we write load in pi's SessionManager with the same context."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from tests import _pi_oracle
from tests._pi_oracle import PiOracle

from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import (
    AssistantMessage,
    BashExecutionMessage,
    Cost,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    TranscriptManager,
    Usage,
    UserMessage,
    convert_to_llm,
    estimate_context_tokens,
    estimate_tokens,
    message_to_builtins,
)


pytestmark = pytest.mark.oracle
pi_oracle = _pi_oracle.pi_oracle  # the session-scoped fixture, made visible to this module

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def _usage(total: int) -> Usage:
    return Usage(
        input=total - 100,
        output=60,
        cache_read=30,
        cache_write=10,
        total_tokens=total,
        cost=Cost(input=0.000024, output=0.0006450000000000001, cache_read=0, cache_write=1e-7, total=0.5),
    )


def _assistant(ts: int, *blocks, stop: str = "stop", total: int = 1000, **extra) -> AssistantMessage:
    return AssistantMessage(
        content=list(blocks),
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
        usage=_usage(total),
        stop_reason=stop,
        timestamp=ts,
        **extra,
    )


def _user(ts: int, text: str, *images: ImageContent) -> UserMessage:
    return UserMessage(content=[TextContent(text=text), *images], timestamp=ts)


async def _write_rich_session(path: Path) -> TranscriptManager:
    clock = FakeClock(now_ms=1_767_607_200_000)

    def tick() -> None:
        clock.advance(1)

    m = await TranscriptManager.create(path, cwd="/home/dev/projet-été", clock=clock, durability="none")
    await m.append_model_change("anthropic", model_id="claude-sonnet-4-5")
    tick()
    await m.append_thinking_level_change("medium")
    tick()
    img = ImageContent(data=PNG, mime_type="image/png")
    u1 = await m.append_message(_user(1, "Fix the bug 😀 in «naïve» code 𝄞 — ok?", img))
    tick()
    call = ToolCall(id="toolu_01", name="read", arguments={"path": "src/é.ts", "limit": 1.5, "tiny": 1e-7})
    a1 = await m.append_message(
        _assistant(
            2,
            ThinkingContent(thinking="Let me look 🤔", thinking_signature="sig=="),
            TextContent(text="Reading."),
            call,
            stop="toolUse",
            total=3000,
        )
    )
    tick()
    r1 = await m.append_message(
        ToolResultMessage(
            tool_call_id="toolu_01",
            tool_name="read",
            content=[TextContent(text="export const 😀 = 1;\n"), img],
            details={"truncation": None},
            is_error=False,
            timestamp=3,
        )
    )
    tick()
    await m.append_message(
        BashExecutionMessage(
            command="npm test",
            output="FAIL 𝄞\n",
            exit_code=1,
            cancelled=False,
            truncated=True,
            full_output_path="/tmp/out.log",
            timestamp=4,
        )
    )
    tick()
    await m.append_message(
        BashExecutionMessage(command="ls", output="", exit_code=0, exclude_from_context=True, timestamp=5)
    )
    tick()
    await m.append_custom("my-ext", data={"state": [1, "two", None]})
    tick()
    await m.append_custom_message("my-ext", content="visible note", display=True, details={"k": "v"})
    tick()
    await m.append_custom_message("my-ext", content=[TextContent(text="hidden 😀"), img], display=False)
    tick()
    await m.append_label(u1.id, "start ⭐")
    tick()
    await m.append_session_info("  Débogage  ")
    tick()
    a2 = await m.append_message(
        _assistant(6, TextContent(text="Found it."), total=5000, response_id="resp_1")
    )
    tick()
    await m.append_message(_assistant(7, stop="error", total=0, error_message="429 rate limit"))
    tick()
    c1 = await m.append_compaction(
        summary="## Goal\nFix 😀",
        first_kept_entry_id=r1.id,
        tokens_before=5123,
        details={"readFiles": ["src/é.ts"], "modifiedFiles": []},
        from_hook=False,
    )
    tick()
    u2 = await m.append_message(_user(8, "continue"))
    tick()
    await m.append_message(_assistant(9, TextContent(text="Continuing."), total=2000))
    tick()
    await m.append_compaction(summary="second", first_kept_entry_id=a1.id, tokens_before=2500, from_hook=True)
    tick()
    await m.append_message(_user(10, "after second compaction"))
    tick()
    await m.append_label(u1.id, None)
    tick()
    await m.append_label(c1.id, "compacted")
    # navigate back and branch, with and without summaries
    m.branch(a2.id)
    tick()
    await m.append_message(_assistant(11, TextContent(text="aborted reply"), stop="aborted", total=1))
    tick()
    await m.branch_with_summary(
        a1.id,
        "Explored the other branch\n\n<read-files>\na.ts\n</read-files>",
        details={"readFiles": ["a.ts"], "modifiedFiles": []},
        from_hook=False,
    )
    tick()
    await m.append_message(_user(12, "on the summarised branch"))
    tick()
    await m.branch_with_summary(u2.id, "")
    tick()
    await m.branch_with_summary(None, "root level summary")
    tick()
    await m.append_message(_user(13, "new root conversation \ud83d broken surrogate"))
    tick()
    await m.append_thinking_level_change("high")
    tick()
    await m.append_session_info("")
    return m


def test_pi_loads_our_files_with_the_same_context(pi_oracle: PiOracle, tmp_path: Path) -> None:
    path = tmp_path / "rich.jsonl"
    m = anyio.run(_write_rich_session, path)
    ours = {e.id: m.build_session_context(e.id).to_json() for e in m.entries()}
    theirs = pi_oracle.context(path, all_leaves=True)
    assert set(theirs) == set(ours)
    for leaf_id, context in theirs.items():
        assert ours[leaf_id] == context, leaf_id

    meta_run = pi_oracle.context(path, meta=True, llm=True)
    meta = meta_run["meta"]
    ctx = m.build_session_context()
    assert meta["migratedOnLoad"] is False
    assert meta["leafId"] == m.leaf_id
    assert meta["labels"] == m.labels
    assert meta["sessionName"] == m.session_name
    assert meta["branchEntryIds"] == [e.id for e in m.get_branch()]
    assert meta["messageTokenEstimates"] == [estimate_tokens(x) for x in ctx.messages]
    assert meta["contextTokens"] == estimate_context_tokens(ctx.messages).to_json()
    assert meta_run["llmMessages"] == [message_to_builtins(x) for x in convert_to_llm(ctx.messages)]
    assert meta["header"] == json.loads(path.read_bytes().split(b"\n", 1)[0])


def test_pi_loads_our_migrated_and_repaired_file(
    pi_oracle: PiOracle, tmp_path: Path, pi_samples: Path
) -> None:
    path = tmp_path / "legacy.jsonl"
    path.write_bytes((pi_samples / "v1-legacy.jsonl").read_bytes() + b'{"type":"message","id":"tor')

    async def migrate() -> TranscriptManager:
        m = await TranscriptManager.open(path, durability="none")
        await m.append_message(_user(99, "after migration 😀"))
        return m

    m = anyio.run(migrate)
    theirs = pi_oracle.context(path, all_leaves=True)
    ours = {e.id: m.build_session_context(e.id).to_json() for e in m.entries()}
    assert theirs == ours
