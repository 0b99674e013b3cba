"""The conservative pre-prompt estimate and budget (OpenClaw §5.3), against OpenClaw's own code (fixture)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionkeeper.compaction import CompactionSettings
from sessionkeeper.runtime import estimate_prompt_pressure, plan_prompt_budget
from sessionkeeper.transcript import message_from_json


DATA = Path(__file__).resolve().parent.parent / "data"
FIXTURE = DATA / "oracle" / "pressure.json"

PROMPT_VARIANTS: list[tuple[str | None, str]] = [
    (None, ""),
    ("You are a careful coding agent.", "Please continue."),
    ("   ", "继续修复这个测试，然后运行全部测试。"),
]
BUDGETS: list[tuple[int, int]] = [(200000, 20000), (16000, 20000), (4000, 16384)]


def _u(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}


def _synthetic() -> dict[str, list[dict[str, Any]]]:
    assistant = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Let me look at the file first.", "thinkingSignature": "sig"},
            {"type": "text", "text": "Reading it now."},
            {
                "type": "toolCall",
                "id": "c1",
                "name": "read",
                "arguments": {"path": "src/ü.ts", "n": 1.5, "k": 2},
            },
        ],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "m",
        "usage": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 3},
        "stopReason": "toolUse",
        "timestamp": 2,
    }
    tool = {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "read",
        "content": [
            {"type": "text", "text": "export const x = 1;\n" * 40},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
        ],
        "isError": False,
        "timestamp": 3,
    }
    cjk_tool = {
        "role": "toolResult",
        "toolCallId": "c2",
        "toolName": "grep",
        "content": "日本語のテキスト、한국어 텍스트, 中文文本 𠀀𠀁 and emoji 😀",
        "isError": False,
        "timestamp": 4,
    }
    bash = {
        "role": "bashExecution",
        "command": "npm test",
        "output": "1 failing",
        "exitCode": 1,
        "cancelled": False,
        "truncated": True,
        "fullOutputPath": "/tmp/out.txt",
        "timestamp": 5,
    }
    hidden_bash = {**bash, "excludeFromContext": True}
    summaries = [
        {"role": "compactionSummary", "summary": "Goal: fix tests.", "tokensBefore": 50000, "timestamp": 6},
        {"role": "branchSummary", "summary": "Tried BigInt.", "fromId": "abcd1234", "timestamp": 7},
        {
            "role": "custom",
            "customType": "note",
            "content": [{"type": "text", "text": "remember"}],
            "display": True,
            "timestamp": 8,
        },
        _u("Ünïcödé ça va? 你好世界"),
        {"role": "user", "content": "plain string content", "timestamp": 9},
    ]
    return {
        "tool-loop": [_u("Fix the failing test."), assistant, tool],
        "cjk": [_u("修复失败的测试"), cjk_tool],
        "bash": [bash, hidden_bash],
        "summaries": summaries,
        "empty": [],
    }


def all_message_sets() -> dict[str, list[dict[str, Any]]]:
    """Every message set the fixture covers (the pi samples' contexts and the synthetic ones)."""
    sets = dict(_synthetic())
    for name in ("basic", "full", "branchy", "large-2000"):
        meta = json.loads((DATA / "pi" / f"{name}.meta.json").read_text(encoding="utf-8"))
        sets[f"pi-{name}"] = meta["messages"]
    return sets


def case_name(name: str, system: str | None, prompt: str, window: int, reserve: int) -> str:
    return f"{name}|sys={system is not None and bool(system.strip())}|prompt={len(prompt)}|{window}/{reserve}"


SETS = all_message_sets()
ROWS: dict[str, dict[str, Any]] = (
    {r["name"]: r for r in json.loads(FIXTURE.read_text(encoding="utf-8"))["rows"]}
    if FIXTURE.exists()
    else {}
)
CASES = [
    (name, system, prompt, window, reserve)
    for name in SETS
    for system, prompt in PROMPT_VARIANTS
    for window, reserve in BUDGETS
]


@pytest.mark.parametrize(
    ("name", "system", "prompt", "window", "reserve"), CASES, ids=[case_name(*c) for c in CASES]
)
def test_estimate_and_budget_match_openclaw(
    name: str, system: str | None, prompt: str, window: int, reserve: int
) -> None:
    row = ROWS[case_name(name, system, prompt, window, reserve)]
    raw = SETS[name]
    assert estimate_prompt_pressure(raw, system_prompt=system, prompt=prompt) == row["estimate"]
    typed = [message_from_json(m) for m in raw]
    estimate = estimate_prompt_pressure(typed, system_prompt=system, prompt=prompt)
    assert estimate == row["estimate"]
    budget = plan_prompt_budget(
        estimated_prompt_tokens=estimate,
        context_window=window,
        settings=CompactionSettings(reserve_tokens=reserve, reserve_tokens_floor=0),
    )
    assert budget.overflow_tokens == row["overflowTokens"]
    assert budget.budget == row["promptBudgetBeforeReserve"]
    assert budget.effective_reserve == row["effectiveReserveTokens"]
    if budget.overflow_tokens == 0:
        assert row["route"] == "fits"


def test_fixture_is_complete() -> None:
    assert len(ROWS) == len(CASES)


def test_rules_by_hand() -> None:
    # one user message "abcd" (4 chars): 12 + (6 + 1) ; prompt "": 12 ; total 31 * 1.2 = 37.2 -> 38
    assert estimate_prompt_pressure([_u("abcd")]) == 38
    # a CJK character counts 4 chars: "中" -> 1 token
    assert estimate_prompt_pressure([_u("中")]) == 38
    # an image is 2000 tokens, without the block overhead
    image = {
        "role": "user",
        "content": [{"type": "image", "data": "x", "mimeType": "image/png"}],
        "timestamp": 1,
    }
    assert estimate_prompt_pressure([image]) == 2429  # ceil((12 + 2000 + 12) * 1.2 = 2428.8)
    # tool results count len/2
    tool = {"role": "toolResult", "toolCallId": "a", "toolName": "", "content": "x" * 100, "isError": False}
    assert estimate_prompt_pressure([tool]) == 89  # (12 + 50 + 0 + 12) * 1.2 = 88.8


@given(text=st.text(max_size=200), extra=st.text(min_size=1, max_size=50))
def test_estimate_grows_with_content(text: str, extra: str) -> None:
    base = estimate_prompt_pressure([_u(text)])
    assert estimate_prompt_pressure([_u(text + extra)]) >= base
    assert estimate_prompt_pressure([_u(text), _u(extra)]) > base
