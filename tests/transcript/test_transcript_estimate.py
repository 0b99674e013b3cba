"""Token estimation rules of pi-format spec §12, one test per rule."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from tests._helpers import assistant

from sessionkeeper.records import js_json_stringify
from sessionkeeper.transcript import (
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    Cost,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    Usage,
    UserMessage,
    calculate_context_tokens,
    estimate_context_tokens,
    estimate_tokens,
    utf16_len,
)


IMG = ImageContent(data="aGVsbG8=", mime_type="image/png")


REPLY: dict[str, Any] = {"api": "a", "provider": "p", "model": "m", "ts": 1}


def test_utf16_length_counts_astral_chars_twice():
    assert utf16_len("abc") == 3
    assert utf16_len("é") == 1
    assert utf16_len("😀") == 2
    assert utf16_len("a😀b") == 4


def test_user_string_and_text_blocks_images_count_zero():
    assert estimate_tokens(UserMessage(content="12345", timestamp=1)) == 2
    msg = UserMessage(content=[TextContent(text="abcd"), IMG, TextContent(text="e")], timestamp=1)
    assert estimate_tokens(msg) == 2  # 5 chars, image 0


def test_user_astral_text_counts_utf16_units():
    assert estimate_tokens(UserMessage(content="😀😀", timestamp=1)) == 1  # 4 units
    assert estimate_tokens(UserMessage(content="😀😀😀", timestamp=1)) == 2  # 6 units


def test_assistant_counts_text_thinking_and_tool_calls():
    call = ToolCall(id="c", name="read", arguments={"path": "a.txt", "n": 1.0})
    # JSON.stringify -> {"path":"a.txt","n":1} = 22 chars, name 4
    msg = assistant(TextContent(text="abcd"), ThinkingContent(thinking="xy"), call, **REPLY)
    assert estimate_tokens(msg) == math.ceil((4 + 2 + 4 + 22) / 4)


def test_tool_result_and_custom_count_images_4800():
    result = ToolResultMessage(
        tool_call_id="c", tool_name="read", content=[TextContent(text="ab"), IMG], timestamp=1
    )
    assert estimate_tokens(result) == math.ceil(4802 / 4)
    custom = CustomMessage(custom_type="x", content=[IMG, IMG], display=True, timestamp=1)
    assert estimate_tokens(custom) == 2400
    assert (
        estimate_tokens(CustomMessage(custom_type="x", content="abcdefghi", display=False, timestamp=1)) == 3
    )


def test_bash_execution_counts_command_and_output_even_when_excluded():
    msg = BashExecutionMessage(command="ls", output="a\nb", exclude_from_context=True, timestamp=1)
    assert estimate_tokens(msg) == 2


def test_summaries_count_summary_length():
    assert estimate_tokens(BranchSummaryMessage(summary="x" * 9, from_id="root", timestamp=1)) == 3
    assert estimate_tokens(CompactionSummaryMessage(summary="x" * 8, tokens_before=5, timestamp=1)) == 2


def test_unknown_role_counts_zero_and_unknown_known_role_uses_raw():
    assert estimate_tokens(UnknownMessage({"role": "weird", "content": "x" * 100})) == 0
    assert estimate_tokens(UnknownMessage({"role": "user", "content": "x" * 100, "extra": 1})) == 25
    raw_assistant = {
        "role": "assistant",
        "content": [{"type": "toolCall", "name": "ab", "arguments": {"k": "é"}}],
    }
    assert estimate_tokens(UnknownMessage(raw_assistant)) == math.ceil((2 + len('{"k":"é"}')) / 4)


def test_js_json_stringify_number_forms():
    assert js_json_stringify({"a": 1.0, "b": 1e-7, "c": 1e21, "d": 0.5, "e": [True, None]}) == (
        '{"a":1,"b":1e-7,"c":1e+21,"d":0.5,"e":[true,null]}'
    )
    assert js_json_stringify("\ud83d") == '"\\ud83d"'


def test_js_json_stringify_prints_large_floats_with_shortest_digits():
    # JavaScript: JSON.stringify(1.2345678901234568e20) === "123456789012345680000" (not the exact
    # binary value 123456789012345683968); the tool-call argument lengths of spec §12 depend on it.
    assert js_json_stringify(1.2345678901234568e20) == "123456789012345680000"
    assert js_json_stringify([-2.2447754998101578e18]) == "[-2244775499810157800]"
    assert js_json_stringify(2.0**53) == "9007199254740992"


def test_calculate_context_tokens_prefers_total_tokens():
    assert (
        calculate_context_tokens(Usage(input=1, output=2, cache_read=3, cache_write=4, total_tokens=50)) == 50
    )
    assert (
        calculate_context_tokens(Usage(input=1, output=2, cache_read=3, cache_write=4, total_tokens=0)) == 10
    )
    assert calculate_context_tokens(Usage(input=1, output=2, cache_read=3, cache_write=4)) == 10
    assert calculate_context_tokens({"input": 5, "output": 1}) == 6


def test_context_estimate_uses_last_valid_usage_plus_trailing():
    good = assistant(
        TextContent(text="x"), usage=Usage(input=100, output=10, total_tokens=110, cost=Cost()), **REPLY
    )
    errored = assistant(
        TextContent(text="x" * 40), usage=Usage(input=999, total_tokens=999), stop="error", **REPLY
    )
    trailing = UserMessage(content="x" * 8, timestamp=2)
    est = estimate_context_tokens([UserMessage(content="hi", timestamp=0), good, errored, trailing])
    assert est.last_usage_index == 1
    assert est.usage_tokens == 110
    assert est.trailing_tokens == estimate_tokens(errored) + 2
    assert est.tokens == 110 + est.trailing_tokens
    assert est.to_json()["lastUsageIndex"] == 1


def test_context_estimate_without_usage_sums_estimates():
    msgs = [
        UserMessage(content="x" * 8, timestamp=0),
        assistant(TextContent(text="abcd"), stop="aborted", **REPLY),
    ]
    est = estimate_context_tokens(msgs)
    assert (est.tokens, est.usage_tokens, est.trailing_tokens, est.last_usage_index) == (3, 0, 3, None)


@given(st.text())
def test_estimate_is_ceil_of_utf16_over_4(text):
    expected = math.ceil(len(text.encode("utf-16-le", "surrogatepass")) / 2 / 4)
    assert estimate_tokens(UserMessage(content=text, timestamp=0)) == expected
