"""
Every ``--json`` output is strict JSON with ``JSON.stringify``'s rules (issue 15): ``prune --json`` wrote
``"tokensBefore": Infinity`` for a compaction entry whose ``tokensBefore`` has 5000 digits.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests._helpers import run_cli

from sessionkeeper.cli._json import json_text
from sessionkeeper.store._jsontext import RawJsonValue


HUGE = "9" * 5000


def _strict(text: str) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def _hostile(tmp_path: Path) -> Path:
    lines = [
        '{"type":"session","version":3,"id":"h1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/x"}',
        '{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
        '"message":{"role":"user","content":"hi, read /src/a.py","timestamp":1767225601000}}',
        '{"type":"message","id":"a2","parentId":"a1","timestamp":"2026-01-01T00:00:02.000Z",'
        '"message":{"role":"assistant","content":[{"type":"text","text":"ok"}],"api":"anthropic-messages",'
        '"provider":"anthropic","model":"m","usage":{"input":1e400,"output":1,"cacheRead":0,"cacheWrite":0,'
        '"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},'
        '"stopReason":"stop","timestamp":1767225602000}}',
        '{"type":"compaction","id":"c1","parentId":"a2","timestamp":"2026-01-01T00:00:03.000Z",'
        f'"summary":"sum","firstKeptEntryId":"a2","tokensBefore":{HUGE}}}',
        '{"type":"message","id":"a3","parentId":"c1","timestamp":"2026-01-01T00:00:04.000Z",'
        '"message":{"role":"user","content":"next","timestamp":1767225604000}}',
    ]
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["prune", "{file}", "--json", "--context-window", "16000"],
        ["context", "{file}", "--json"],
        ["context", "{file}", "--json", "--llm"],
        ["compact", "{file}", "--json", "--dry-run"],
        ["doctor", "{file}", "--json"],
    ],
    ids=lambda args: " ".join(a for a in args if a != "{file}"),
)
def test_json_output_of_a_hostile_transcript_is_strict(tmp_path: Path, args: list[str]) -> None:
    file = _hostile(tmp_path)
    result = run_cli(*[str(file) if a == "{file}" else a for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    document = _strict(result.stdout)
    if args[0] in ("prune", "context"):
        summaries = [m for m in document["messages"] if m.get("role") == "compactionSummary"]
        assert summaries and summaries[0]["tokensBefore"] is None  # JSON.stringify(Infinity)


def test_json_text_writes_what_json_stringify_writes() -> None:
    value = {"a": math.inf, "b": -math.inf, "c": math.nan, "d": 10**400, "e": RawJsonValue("1e400")}
    assert json_text(value) == '{"a": null, "b": null, "c": null, "d": null, "e": 1e400}'
    assert json_text([2**1024 - 1, 2**1024]) == f"[{2**1024 - 1}, null]"  # a double's range
    assert json_text("x\ud800y") == '"x\\ud800y"'  # a lone surrogate escaped, as JSON.stringify does
    nested: list[Any] = []
    cursor = nested
    for _ in range(20_000):  # any depth, no RecursionError
        cursor.append([])
        cursor = cursor[0]
    assert json_text(nested) == "[" * 20_001 + "]" * 20_001


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(exclude_categories=["Cs"])),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)


@given(value=_json_values, indent=st.sampled_from([None, 2]))
def test_json_text_is_json_dumps_for_finite_values(value: Any, indent: int | None) -> None:
    assert json_text(value, indent=indent) == json.dumps(value, ensure_ascii=False, indent=indent)
    assert _strict(json_text(value, indent=indent)) == value
