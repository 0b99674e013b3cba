"""Values other writers put in a line that Python cannot hold as pi reads them (issue 15 items 2, 3)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from tests import _pi_oracle
from tests._helpers import json_line, run_cli
from tests._pi_oracle import PiOracle

from sessionkeeper.records._codec import decode_json_line, message_to_builtins
from sessionkeeper.records._jscompat import js_date_ms
from sessionkeeper.records._messages import UserMessage
from sessionkeeper.transcript import (
    TranscriptManager,
    calculate_context_tokens,
    estimate_context_tokens,
    list_transcripts,
    load_transcript,
    load_transcript_bytes,
)


pi_oracle = _pi_oracle.pi_oracle
TS = "2026-01-01T00:00:00.000Z"
HEADER = {"type": "session", "version": 3, "id": "s1", "timestamp": TS, "cwd": "/w"}
HUGE = "9" * 5000  # over Python's 4,300-digit int conversion limit


def _user(entry_id: str, parent: str | None, stamp: str = "1") -> bytes:
    return (
        f'{{"type":"message","id":"{entry_id}","parentId":{json.dumps(parent)},"timestamp":"{TS}",'
        f'"message":{{"role":"user","content":"hi","timestamp":{stamp}}}}}'
    ).encode()


def _file(*lines: bytes) -> bytes:
    return b"\n".join([json_line(HEADER), *lines]) + b"\n"


# --------------------------------------------------------------------------- item 2: huge integers


@pytest.mark.parametrize("where", ["timestamp", "details", "id", "parentId", "deep"])
def test_integer_over_the_digit_limit_loads_and_rebuilds(where: str) -> None:
    lines = [_user("a1", None)]
    if where == "timestamp":
        lines.append(_user("a2", "a1", HUGE))
    elif where == "details":
        lines.append(
            f'{{"type":"custom","customType":"x","data":{{"n":-{HUGE}}},"id":"a2","parentId":"a1",'
            f'"timestamp":"{TS}"}}'.encode()
        )
    elif where == "id":
        lines.append(f'{{"type":"label","id":{HUGE},"parentId":"a1","timestamp":"{TS}"}}'.encode())
    elif where == "parentId":
        lines.append(_user("a2", None).replace(b'"parentId":null', f'"parentId":{HUGE}'.encode()))
    else:
        lines.append(_user("a2", "a1", f'1,"x":[[[{HUGE}.5e3]]]'))
    index = load_transcript_bytes(_file(*lines))
    context = index.build_context()
    assert context.messages[0] == UserMessage(content="hi", timestamp=1)
    if where == "timestamp":
        assert context.messages[-1] == UserMessage(content="hi", timestamp=math.inf)
    # the line is kept byte for byte (a rewrite or copy writes what was read)
    assert index.line_bytes(len(index) - 1) == lines[-1]
    assert index.diagnostics.invalid_lines == ()


@pytest.mark.anyio
async def test_append_and_branch_keep_a_huge_number_line_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    big = _user("a2", "a1", HUGE)
    path.write_bytes(_file(_user("a1", None), big))
    manager = await TranscriptManager.open(path)
    await manager.append_message(UserMessage(content="next", timestamp=2))
    assert path.read_bytes().split(b"\n")[2] == big
    child = await manager.create_branched_session("a2", path=tmp_path / "child.jsonl")
    assert big in (tmp_path / "child.jsonl").read_bytes().split(b"\n")
    assert child.build_session_context().messages[-1] == UserMessage(content="hi", timestamp=math.inf)


def test_cli_context_on_a_huge_integer_prints_json(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(_file(_user("a1", None), _user("a2", "a1", HUGE)))
    result = run_cli("context", str(path), "--json", catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["messages"][-1]["timestamp"] is None  # JSON.stringify(Infinity) is null
    doctor = run_cli("doctor", str(path), "--json", catch_exceptions=False)
    assert doctor.exit_code in (0, 1), doctor.output
    assert load_transcript(path).diagnostics.invalid_lines == ()


# --------------------------------------------------------------------------- item 3: non-string timestamps

STAMPS: list[Any] = [None, 12345, [], [2020], ["2020-01-01T00:00:00Z"], {}, True, False, 1e300, "x", 8.64e15,
                     8.7e15, 1.7, -1.7, [["2020"]], [None], -0.0]  # fmt: skip


def _summaries(stamp: Any) -> bytes:
    ts = json.dumps(stamp)
    return _file(
        _user("a1", None),
        f'{{"type":"compaction","id":"c1","parentId":"a1","timestamp":{ts},"summary":"S",'
        f'"firstKeptEntryId":"a1","tokensBefore":5}}'.encode(),
        f'{{"type":"branch_summary","id":"b1","parentId":"c1","timestamp":{ts},"fromId":"c1",'
        f'"summary":"B"}}'.encode(),
        f'{{"type":"custom_message","id":"m1","parentId":"b1","timestamp":{ts},"customType":"x",'
        f'"content":"c","display":true}}'.encode(),
    )


def _same(got: Any, expected: float) -> bool:
    if math.isnan(expected):
        return isinstance(got, float) and math.isnan(got)
    return bool(got == expected)


@pytest.mark.parametrize("stamp", STAMPS, ids=[json.dumps(s) for s in STAMPS])
def test_non_string_timestamp_is_read_as_new_date_and_reported(stamp: Any) -> None:
    index = load_transcript_bytes(_summaries(stamp))
    messages = index.build_context().messages
    assert [type(m).__name__ for m in messages] == [
        "CompactionSummaryMessage", "UserMessage", "BranchSummaryMessage", "CustomMessage"
    ]  # fmt: skip
    expected = js_date_ms(stamp)
    for position in (0, 2, 3):
        assert _same(getattr(messages[position], "timestamp", None), expected), position
    reported = index.diagnostics.non_string_timestamps
    assert reported == (() if isinstance(stamp, str) else (3, 4, 5))
    assert index.diagnostics.clean is isinstance(stamp, str)


def test_js_date_ms_is_new_date_get_time() -> None:
    assert js_date_ms(None) == 0
    assert js_date_ms(12345.9) == 12345
    assert js_date_ms(-1.7) == -1
    assert js_date_ms(True) == 1
    assert js_date_ms([2020]) == 1577836800000
    assert js_date_ms([[["2020"]]]) == 1577836800000
    assert js_date_ms(8.64e15) == 8.64e15
    assert js_date_ms([1, 2]) == 978393600000  # "1,2": V8's legacy rules read 2001-01-02, as node does
    for nan in ([], {}, 8.64e15 + 1, math.inf, "x", [1, 2, 3, 4], 10**400):
        assert math.isnan(js_date_ms(nan))


@pytest.mark.oracle
def test_non_string_timestamps_equal_pis(pi_oracle: PiOracle, tmp_path: Path) -> None:
    for n, stamp in enumerate(STAMPS):
        path = tmp_path / f"t{n}.jsonl"
        path.write_bytes(_summaries(stamp))
        ours = [message_to_builtins(m)["timestamp"] for m in load_transcript(path).build_context().messages]
        ours = [None if isinstance(t, float) and math.isnan(t) else t for t in ours]
        theirs = [m.get("timestamp") for m in pi_oracle.context(path)["messages"]]
        assert ours == theirs, stamp


# --------------------------------------------------------------------------- found by the fuzz test


def test_listing_skips_a_message_timestamp_beyond_any_double(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(_file(_user("a1", None, "1" * 400), _user("a2", "a1", "1796043604614")))
    info = list_transcripts(tmp_path)[0]
    assert info.modified_ms == 1796043604614


@pytest.mark.parametrize("total", ["1e400", "-1e400", HUGE])
def test_usage_total_beyond_any_double_counts_as_absent(total: str) -> None:
    line = f'{{"input":3,"output":4,"cacheRead":0,"cacheWrite":1e400,"totalTokens":{total}}}'.encode()
    usage = decode_json_line(line)[0]
    assert calculate_context_tokens(usage) == 7
    reply = (
        f'{{"type":"message","id":"a2","parentId":"a1","timestamp":"{TS}","message":{{"role":"assistant",'
        f'"content":[],"api":"a","provider":"p","model":"m","usage":{{"input":3,"output":4,"cacheRead":0,'
        f'"cacheWrite":0,"totalTokens":{total},"cost":{{}}}},"stopReason":"stop","timestamp":2}}}}'
    ).encode()
    index = load_transcript_bytes(_file(_user("a1", None), reply))
    assert estimate_context_tokens(index.build_context().messages).tokens >= 7


@pytest.mark.parametrize("depth", [400, 700, 950])
def test_deep_line_with_a_lone_surrogate_loads_and_rebuilds(depth: int) -> None:
    nested = '{"a":' * depth + '"\\ud800"' + "}" * depth
    line = _user("a2", "a1").replace(b'"content":"hi"', f'"content":"x","extra":{nested}'.encode())
    index = load_transcript_bytes(_file(_user("a1", None), line))
    assert len(index.build_context().messages) == 2  # the unknown-shaped message is kept, as pi
    assert index.diagnostics.lone_surrogate_lines == (3,)
