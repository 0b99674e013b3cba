"""
Message converters (issue 14): property tests over generated conversations for the three wire formats.

No block lost, tool calls and results kept paired, ids valid and unique for the target provider, and a
reply -> AssistantMessage round trip (final object and stream events) that keeps every block.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionkeeper.adapters import (
    ANTHROPIC_API,
    CHAT_COMPLETIONS_API,
    RESPONSES_API,
    AnthropicStream,
    ChatCompletionsStream,
    ResponsesStream,
    from_anthropic_message,
    from_chat_completion,
    from_openai_response,
    prepare_messages,
    to_anthropic_request,
    to_chat_completions_request,
    to_responses_request,
)
from sessionkeeper.records._messages import (
    AssistantMessage,
    CompactionSummaryMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from sessionkeeper.transcript import SessionContext


ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
CHAT_ID = re.compile(r"^[a-zA-Z0-9_-]{1,40}$")

_text = st.text(st.sampled_from('ab \n\u00e9\u4e2d\U0001f600"'), min_size=1, max_size=12)
_image = st.builds(
    ImageContent, data=st.sampled_from(["iVBORw0KGgo=", "R0lGODlh"]), mime_type=st.just("image/png")
)
# ids as real providers and pi write them, and hostile ones (| of Responses ids, dots, spaces, very long)
_raw_id = st.one_of(
    st.integers(0, 10**9).map(lambda n: f"toolu_{n:012d}"),
    st.integers(0, 10**9).map(lambda n: f"call_{n:x}|fc_{n:024x}"),
    st.integers(0, 99).map(lambda n: f"functions.read:{n}"),
    st.text(st.sampled_from("aZ9_-|.: /"), min_size=1, max_size=80),
)


@st.composite
def conversations(draw: st.DrawFn, api: str) -> list[Any]:
    messages: list[Any] = []
    used_ids: set[str] = set()
    for turn in range(draw(st.integers(1, 4))):
        content = draw(
            st.one_of(
                _text,
                st.lists(st.one_of(_text.map(lambda t: TextContent(text=t)), _image), min_size=1, max_size=3),
            )
        )
        messages.append(UserMessage(content=content, timestamp=turn))
        blocks: list[Any] = []
        if draw(st.booleans()):
            if api == ANTHROPIC_API:
                redacted = draw(st.booleans())
                blocks.append(
                    ThinkingContent(thinking="", thinking_signature="opaque==", redacted=True)
                    if redacted
                    else ThinkingContent(thinking=draw(_text), thinking_signature=draw(_text))
                )
            elif api == RESPONSES_API:
                item = {
                    "type": "reasoning",
                    "id": f"rs_{turn}",
                    "summary": [{"type": "summary_text", "text": draw(_text)}],
                    "encrypted_content": "enc",
                }
                blocks.append(
                    ThinkingContent(thinking=item["summary"][0]["text"], thinking_signature=json.dumps(item))
                )
            else:
                blocks.append(ThinkingContent(thinking=draw(_text), thinking_signature="reasoning_content"))
        if draw(st.booleans()):
            blocks.append(TextContent(text=draw(_text)))
        calls = []
        for _ in range(draw(st.integers(0, 3))):
            call_id = draw(_raw_id.filter(lambda i: i not in used_ids))
            used_ids.add(call_id)
            calls.append(
                ToolCall(
                    id=call_id,
                    name=draw(st.sampled_from(["read", "bash", "edit_file"])),
                    arguments=draw(
                        st.dictionaries(
                            st.sampled_from(["path", "n", "x"]), st.integers() | _text, max_size=3
                        )
                    ),
                )
            )
        blocks.extend(calls)
        if not blocks:
            blocks.append(TextContent(text="ok"))
        messages.append(
            AssistantMessage(
                content=blocks,
                api=api,
                provider="p",
                model="m",
                stop_reason="toolUse" if calls else "stop",
                timestamp=turn,
            )
        )
        for call in calls:
            result_content: list[Any] = [TextContent(text=draw(_text))]
            if draw(st.booleans()):
                result_content.append(draw(_image))
            messages.append(
                ToolResultMessage(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    content=result_content,
                    is_error=draw(st.booleans()),
                    timestamp=turn,
                )
            )
    return messages


def _counts(messages: list[Any]) -> dict[str, int]:
    counts = {"text": 0, "image": 0, "call": 0, "result": 0, "thinking": 0}
    for m in messages:
        if isinstance(m, UserMessage):
            if isinstance(m.content, str):
                counts["text"] += 1
            else:
                for b in m.content:
                    counts["image" if isinstance(b, ImageContent) else "text"] += 1
        elif isinstance(m, AssistantMessage):
            for b in m.content:
                key = {TextContent: "text", ThinkingContent: "thinking", ToolCall: "call"}[type(b)]
                counts[key] += 1
        elif isinstance(m, ToolResultMessage):
            counts["result"] += 1
            counts["image"] += sum(isinstance(b, ImageContent) for b in m.content)
    return counts


@settings(max_examples=40)
@given(conversations(ANTHROPIC_API))
def test_anthropic_request_keeps_every_block_and_pairs_tool_results(messages: list[Any]) -> None:
    body = to_anthropic_request(SessionContext(messages=tuple(messages)), model="claude", max_tokens=100)
    counts = {"text": 0, "image": 0, "call": 0, "result": 0, "thinking": 0}
    seen_ids: set[str] = set()
    previous_calls: list[str] = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            counts["text"] += 1
            continue
        results = [b["tool_use_id"] for b in content if b["type"] == "tool_result"]
        if results:
            assert message["role"] == "user"
            assert results == previous_calls  # every call answered, in order, in the next message
        calls = []
        for block in content:
            kind = block["type"]
            if kind == "text":
                counts["text"] += 1
            elif kind == "image":
                counts["image"] += 1
                assert block["source"]["type"] == "base64"
            elif kind in ("thinking", "redacted_thinking"):
                counts["thinking"] += 1
            elif kind == "tool_use":
                counts["call"] += 1
                assert ANTHROPIC_ID.match(block["id"]), block["id"]
                assert block["id"] not in seen_ids
                seen_ids.add(block["id"])
                calls.append(block["id"])
            elif kind == "tool_result":
                counts["result"] += 1
                counts["image"] += sum(b["type"] == "image" for b in block["content"])
        if message["role"] == "assistant":
            previous_calls = calls
    assert counts == _counts(messages)
    roles = [m["role"] for m in body["messages"]]
    assert all(a != b for a, b in itertools.pairwise(roles))  # strict alternation


@settings(max_examples=40)
@given(conversations(CHAT_COMPLETIONS_API))
def test_chat_request_keeps_every_block_and_pairs_tool_messages(messages: list[Any]) -> None:
    body = to_chat_completions_request(
        messages, model="gpt", system_prompt="sys", reasoning_field="reasoning_content"
    )
    assert body["messages"][0] == {"role": "system", "content": "sys"}
    counts = {"text": 0, "image": 0, "call": 0, "result": 0, "thinking": 0}
    open_calls: list[str] = []
    seen: set[str] = set()
    for message in body["messages"][1:]:
        role = message["role"]
        if role == "assistant":
            assert not open_calls
            counts["text"] += bool(message["content"])
            counts["thinking"] += bool(message.get("reasoning_content"))
            for call in message.get("tool_calls", []):
                counts["call"] += 1
                assert CHAT_ID.match(call["id"]) and call["id"] not in seen
                seen.add(call["id"])
                open_calls.append(call["id"])
                json.loads(call["function"]["arguments"])
        elif role == "tool":
            counts["result"] += 1
            assert message["tool_call_id"] == open_calls.pop(0)
        else:
            assert not open_calls
            content = message["content"]
            if isinstance(content, str):
                counts["text"] += 1
            elif content[0].get("text") == "Attached image(s) from tool result:":
                counts["image"] += len(content) - 1
            else:
                counts["text"] += sum(p["type"] == "text" for p in content)
                counts["image"] += sum(p["type"] == "image_url" for p in content)
    expected = _counts(messages)
    # one assistant message joins its text blocks; one thinking field joins its thinking blocks
    expected["text"] = expected["text"] - sum(
        max(sum(isinstance(b, TextContent) for b in m.content) - 1, 0)
        for m in messages
        if isinstance(m, AssistantMessage)
    )
    assert counts == expected


@settings(max_examples=40)
@given(conversations(RESPONSES_API))
def test_responses_request_keeps_every_item_and_pairs_outputs(messages: list[Any]) -> None:
    body = to_responses_request(messages, model="gpt", system_prompt="sys", max_tokens=50)
    assert body["instructions"] == "sys" and body["max_output_tokens"] == 50
    counts = {"text": 0, "image": 0, "call": 0, "result": 0, "thinking": 0}
    calls: set[str] = set()
    for item in body["input"]:
        kind = item.get("type", "message")
        if kind == "reasoning":
            counts["thinking"] += 1
            assert item["encrypted_content"] == "enc"
        elif kind == "function_call":
            counts["call"] += 1
            assert ANTHROPIC_ID.match(item["call_id"]) and item["call_id"] not in calls
            calls.add(item["call_id"])
            if "id" in item:
                assert item["id"].startswith("fc_")
        elif kind == "function_call_output":
            counts["result"] += 1
            assert item["call_id"] in calls
        elif isinstance(item["content"], str):
            counts["text"] += 1
        elif item["role"] == "assistant":
            counts["text"] += len(item["content"])
        elif item["content"][0].get("text") == "Attached image(s) from tool result:":
            counts["image"] += len(item["content"]) - 1
        else:
            counts["text"] += sum(p["type"] == "input_text" for p in item["content"])
            counts["image"] += sum(p["type"] == "input_image" for p in item["content"])
    assert counts == _counts(messages)


# ------------------------------------------------------------------ replies back to AssistantMessage


def _assistant_only(messages: list[Any]) -> list[AssistantMessage]:
    return [m for m in messages if isinstance(m, AssistantMessage)]


def _anthropic_events(reply: dict[str, Any]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                **reply,
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 7, "output_tokens": 1},
            },
        }
    ]
    for index, block in enumerate(reply["content"]):
        if block["type"] == "text":
            events.append(
                {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
            )
            events.extend(
                {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": ch}}
                for ch in block["text"]
            )
        elif block["type"] == "thinking":
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                }
            )
            events.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "thinking_delta", "thinking": block["thinking"]},
                }
            )
            events.append(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "signature_delta", "signature": block["signature"]},
                }
            )
        elif block["type"] == "redacted_thinking":
            events.append({"type": "content_block_start", "index": index, "content_block": block})
        else:
            events.append(
                {"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}}
            )
            raw = json.dumps(block["input"])
            events.extend(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": raw[i : i + 3]},
                }
                for i in range(0, len(raw), 3)
            )
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": reply["stop_reason"]},
            "usage": {"output_tokens": 5},
        }
    )
    events.append({"type": "message_stop"})
    return events


@settings(max_examples=40)
@given(conversations(ANTHROPIC_API))
def test_anthropic_reply_round_trip_final_and_streamed(messages: list[Any]) -> None:
    for original in _assistant_only(messages):
        # the first message is the reply; an orphan call's synthetic result follows it
        encoded = to_anthropic_request([original], model="m", max_tokens=9)["messages"][0]
        stop = "tool_use" if original.stop_reason == "toolUse" else "end_turn"
        reply = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": encoded["content"],
            "stop_reason": stop,
            "usage": {"input_tokens": 7, "output_tokens": 5},
        }
        final = from_anthropic_message(reply, timestamp=original.timestamp)
        expected = [
            msgspec.structs.replace(b, id=b.id if ANTHROPIC_ID.match(b.id) else final.content[i].id)
            if isinstance(b, ToolCall)
            else b
            for i, b in enumerate(original.content)
        ]
        assert final.content == expected
        assert final.stop_reason == original.stop_reason
        assert final.usage == Usage(input=7, output=5, total_tokens=12)
        stream = AnthropicStream()
        for event in _anthropic_events(reply):
            stream.feed(event)
        assert stream.message(timestamp=original.timestamp) == final


def _chat_chunks(reply: dict[str, Any]) -> list[dict[str, Any]]:
    message = reply["choices"][0]["message"]
    chunks = [{"id": reply["id"], "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
    if message.get("reasoning_content"):
        chunks.append(
            {
                "id": reply["id"],
                "choices": [{"index": 0, "delta": {"reasoning_content": message["reasoning_content"]}}],
            }
        )
    chunks.extend(
        {"id": reply["id"], "choices": [{"index": 0, "delta": {"content": ch}}]}
        for ch in message.get("content") or ""
    )
    for index, call in enumerate(message.get("tool_calls", [])):
        args = call["function"]["arguments"]
        chunks.append(
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": index,
                                    "id": call["id"],
                                    "type": "function",
                                    "function": {"name": call["function"]["name"], "arguments": ""},
                                }
                            ]
                        },
                    }
                ]
            }
        )
        chunks.extend(
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [{"index": index, "function": {"arguments": args[i : i + 4]}}]
                        },
                    }
                ]
            }
            for i in range(0, len(args), 4)
        )
    chunks.append(
        {"choices": [{"index": 0, "delta": {}, "finish_reason": reply["choices"][0]["finish_reason"]}]}
    )
    chunks.append({"choices": [], "usage": reply["usage"]})
    return chunks


@settings(max_examples=40)
@given(conversations(CHAT_COMPLETIONS_API))
def test_chat_reply_round_trip_final_and_streamed(messages: list[Any]) -> None:
    for original in _assistant_only(messages):
        body = to_chat_completions_request([original], model="m", reasoning_field="reasoning_content")
        message = body["messages"][0]
        reply = {
            "id": "chatcmpl-1",
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if original.stop_reason == "toolUse" else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": 10,
                "completion_tokens": 4,
                "prompt_tokens_details": {"cached_tokens": 3},
            },
        }
        final = from_chat_completion(reply, timestamp=0)
        texts = "".join(b.text for b in original.content if isinstance(b, TextContent))
        thinking = "\n\n".join(b.thinking for b in original.content if isinstance(b, ThinkingContent))
        calls = [b for b in original.content if isinstance(b, ToolCall)]
        assert [b.thinking for b in final.content if isinstance(b, ThinkingContent)] == (
            [thinking] if thinking else []
        )
        assert "".join(b.text for b in final.content if isinstance(b, TextContent)) == texts
        got_calls = [b for b in final.content if isinstance(b, ToolCall)]
        assert [(c.name, c.arguments) for c in got_calls] == [(c.name, c.arguments) for c in calls]
        assert all(CHAT_ID.match(c.id) for c in got_calls)
        assert final.stop_reason == original.stop_reason
        assert final.usage == Usage(input=7, output=4, cache_read=3, total_tokens=14)
        stream = ChatCompletionsStream()
        for chunk in _chat_chunks(reply):
            stream.feed(chunk)
        assert stream.message(timestamp=0) == final


def _responses_events(reply: dict[str, Any]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**reply, "status": "in_progress", "output": []}}
    ]
    for index, item in enumerate(reply["output"]):
        if item["type"] == "message":
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": {**item, "content": []}}
            )
            for part_index, part in enumerate(item["content"]):
                events.extend(
                    {
                        "type": "response.output_text.delta",
                        "output_index": index,
                        "content_index": part_index,
                        "delta": ch,
                    }
                    for ch in part["text"]
                )
        elif item["type"] == "function_call":
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "arguments": ""},
                }
            )
            events.append(
                {
                    "type": "response.function_call_arguments.delta",
                    "output_index": index,
                    "delta": item["arguments"],
                }
            )
        else:
            events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": reply})
    return events


@settings(max_examples=40)
@given(conversations(RESPONSES_API))
def test_responses_reply_round_trip_final_and_streamed(messages: list[Any]) -> None:
    for original in _assistant_only(messages):
        # a reply from the API carries message ids and fc_ item ids; give the generated blocks theirs
        blocks = []
        for i, block in enumerate(original.content):
            if isinstance(block, TextContent):
                block = msgspec.structs.replace(
                    block, text_signature=json.dumps({"v": 1, "id": f"msg_{i}"}, separators=(",", ":"))
                )
            elif isinstance(block, ToolCall):
                block = msgspec.structs.replace(block, id=f"call{i}|fc_{i}")
            blocks.append(block)
        original = msgspec.structs.replace(original, content=blocks)
        items = [
            item
            for item in to_responses_request([original], model="m")["input"]
            if item.get("type") != "function_call_output"
        ]
        reply = {
            "id": "resp_1",
            "object": "response",
            "model": "m",
            "status": "completed",
            "output": items,
            "usage": {
                "input_tokens": 10,
                "output_tokens": 4,
                "total_tokens": 14,
                "input_tokens_details": {"cached_tokens": 2},
            },
        }
        final = from_openai_response(reply, timestamp=original.timestamp)
        assert [
            json.loads(b.thinking_signature) for b in final.content if isinstance(b, ThinkingContent)
        ] == [  # type: ignore[arg-type]
            json.loads(b.thinking_signature)  # type: ignore[arg-type]
            for b in blocks
            if isinstance(b, ThinkingContent)
        ]
        assert [b for b in final.content if not isinstance(b, ThinkingContent)] == [
            b for b in blocks if not isinstance(b, ThinkingContent)
        ]
        assert final.stop_reason == original.stop_reason
        assert final.usage == Usage(input=8, output=4, cache_read=2, total_tokens=14)
        stream = ResponsesStream()
        for event in _responses_events(reply):
            stream.feed(event)
        assert stream.message(timestamp=original.timestamp) == final


# ------------------------------------------------------------------ specific rules


def test_prepare_drops_error_replies_with_their_results_and_answers_orphans() -> None:
    call = ToolCall(id="a", name="read", arguments={})
    failed = AssistantMessage(
        content=[ToolCall(id="x", name="read", arguments={})],
        api="a",
        provider="p",
        model="m",
        stop_reason="error",
    )
    messages = [
        UserMessage(content="hi", timestamp=1),
        failed,
        ToolResultMessage(tool_call_id="x", tool_name="read", content=[TextContent(text="late")]),
        AssistantMessage(
            content=[call], api="a", provider="p", model="m", stop_reason="toolUse", timestamp=5
        ),
        CompactionSummaryMessage(summary="S", tokens_before=1, timestamp=6),
    ]
    prepared = prepare_messages(messages)
    assert [type(m).__name__ for m in prepared] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "UserMessage",
    ]
    synthetic = prepared[2]
    assert isinstance(synthetic, ToolResultMessage)
    assert synthetic.tool_call_id == "a" and synthetic.is_error
    assert synthetic.content == [TextContent(text="No result provided")]


def test_thinking_from_another_api_replays_as_text_and_redacted_is_dropped() -> None:
    foreign = AssistantMessage(
        content=[
            ThinkingContent(thinking="plan", thinking_signature="sig"),
            ThinkingContent(thinking="", thinking_signature="opaque", redacted=True),
            TextContent(text="answer"),
        ],
        api=RESPONSES_API,
        provider="openai",
        model="gpt",
    )
    body = to_anthropic_request([UserMessage(content="q", timestamp=0), foreign], model="c", max_tokens=10)
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "plan"},
        {"type": "text", "text": "answer"},
    ]


@pytest.mark.parametrize(
    ("level", "max_tokens", "expected"),
    [("off", 4096, None), ("medium", 20000, 8192), ("high", 4096, 4095), ("low", 1000, None)],
)
def test_anthropic_thinking_budget_stays_below_max_tokens(
    level: str, max_tokens: int, expected: int | None
) -> None:
    body = to_anthropic_request([], model="c", max_tokens=max_tokens, thinking_level=level)
    assert body.get("thinking") == (
        None if expected is None else {"type": "enabled", "budget_tokens": expected}
    )


def test_context_window_stop_reason_is_an_overflow_error() -> None:
    from sessionkeeper import is_context_overflow

    reply = {
        "id": "msg_1",
        "model": "claude",
        "content": [],
        "stop_reason": "model_context_window_exceeded",
        "usage": {"input_tokens": 1, "output_tokens": 0},
    }
    message = from_anthropic_message(reply)
    assert message.stop_reason == "error"
    assert is_context_overflow(message)


def test_aborted_stream_keeps_partial_text_and_marks_aborted() -> None:
    stream = ChatCompletionsStream()
    assert (
        stream.feed({"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"content": "Hel"}}]})
        == "Hel"
    )
    message = stream.message(aborted=True)
    assert message.stop_reason == "aborted"
    assert message.content == [TextContent(text="Hel")]
    assert message.error_message == "Request was aborted"


def test_cut_off_tool_arguments_are_kept_raw() -> None:
    stream = AnthropicStream()
    stream.feed({"type": "message_start", "message": {"id": "m", "model": "c", "content": [], "usage": {}}})
    stream.feed(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
        }
    )
    stream.feed(
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"pa'},
        }
    )
    message = stream.message(aborted=True)
    assert message.content == [ToolCall(id="toolu_1", name="f", arguments={"_raw": '{"pa'})]


def test_responses_ids_with_one_call_part_stay_distinct_and_paired() -> None:
    # "9" and "9|" share the call part "9" (pi's Responses ids are call_id|item_id): two calls, two ids;
    # each result answers its own call (hypothesis found the ids sent as one call_id)
    from tests._helpers import assistant, tool_call, tool_result, user

    ids = ("9", "9|", "c1|fc_1")
    reply = assistant(*(tool_call(i) for i in ids), api="openai-responses", provider="openai", stop="toolUse")
    messages = [user("a"), reply, *(tool_result(i, f"r{n}") for n, i in enumerate(ids))]
    for body, kind, call_key, result_key in (
        (to_responses_request(messages, model="m")["input"], "function_call", "call_id", "call_id"),
        (to_chat_completions_request(messages, model="m")["messages"], None, "id", "tool_call_id"),
    ):
        if kind is None:  # chat: the calls are inside the assistant message
            (turn,) = [m for m in body if m["role"] == "assistant"]
            sent = [call[call_key] for call in turn["tool_calls"]]
            answered = [m[result_key] for m in body if m["role"] == "tool"]
        else:
            sent = [item[call_key] for item in body if item.get("type") == kind]
            answered = [item[result_key] for item in body if item.get("type") == "function_call_output"]
        assert len(set(sent)) == 3 and sent[0] == "9" and sent[2] == "c1"
        assert answered == sent  # results in order, each paired with its own call
