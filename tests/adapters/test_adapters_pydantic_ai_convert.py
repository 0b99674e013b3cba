"""
pydantic-ai <-> transcript converters: round-trip properties (hypothesis) and the documented edge cases.

Property: pydantic-ai messages -> transcript messages -> pydantic-ai messages gives the same parts (kinds,
texts, ids, signatures, arguments, outcomes, usage, timestamps to the millisecond), every tool result stays
paired with its call, and the transcript side is a fixed point (converting back and forth again changes
nothing).
"""

from __future__ import annotations

import base64
import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic_ai import messages as pai
from pydantic_ai.usage import RequestUsage

from sessionkeeper.adapters.pydantic_ai import (
    RETRY_CUSTOM_TYPE,
    SYSTEM_PROMPT_CUSTOM_TYPE,
    from_pydantic_ai_messages,
    to_pydantic_ai_messages,
)
from sessionkeeper.transcript import (
    COMPACTION_SUMMARY_PREFIX,
    COMPACTION_SUMMARY_SUFFIX,
    AssistantMessage,
    BashExecutionMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)


HAS_OUTCOME = "outcome" in {f.name for f in dataclasses.fields(pai.ToolReturnPart)}
RetryFeedbackPart: Any = getattr(pai, "RetryFeedbackPart", None)
RetryInfo: Any = getattr(pai, "RetryInfo", None)
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(16))

texts = st.text(max_size=30)
names = st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True)
stamps = st.integers(min_value=1_600_000_000_000, max_value=1_900_000_000_000).map(
    lambda ms: datetime.fromtimestamp(ms / 1000, tz=UTC)
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=6,
)
arguments = st.dictionaries(names, json_values, max_size=4)


@st.composite
def user_part(draw: st.DrawFn) -> pai.UserPromptPart:
    content: Any = draw(
        texts.filter(lambda t: not t.startswith(COMPACTION_SUMMARY_PREFIX[:10]))
        | st.lists(
            texts | st.just(pai.BinaryContent(data=PNG, media_type="image/png")), min_size=1, max_size=3
        )
    )
    return pai.UserPromptPart(content=content, timestamp=draw(stamps))


@st.composite
def tool_return(draw: st.DrawFn, call: pai.ToolCallPart) -> Any:
    content = draw(texts | st.dictionaries(names, json_values, min_size=1, max_size=3))
    fields: dict[str, Any] = {}
    if HAS_OUTCOME:
        fields["outcome"] = draw(st.sampled_from(["success", "success", "failed", "denied", "retried"]))
    return pai.ToolReturnPart(
        tool_name=call.tool_name,
        content=content,
        tool_call_id=call.tool_call_id,
        timestamp=draw(stamps),
        **fields,
    )


@st.composite
def response(draw: st.DrawFn, turn: int) -> pai.ModelResponse:
    parts: list[Any] = []
    for index, kind in enumerate(draw(st.lists(st.sampled_from(["text", "thinking", "call"]), max_size=4))):
        if kind == "text":
            parts.append(
                pai.TextPart(content=draw(texts), **draw(st.sampled_from([{}, {"id": f"msg_{turn}"}])))
            )
        elif kind == "thinking":
            parts.append(pai.ThinkingPart(content=draw(texts), signature=draw(st.none() | names)))
        else:
            call_id = draw(
                st.sampled_from([f"call_{turn}_{index}", f"toolu.{turn}|{index}", f"c{turn}-{index}"])
            )
            parts.append(pai.ToolCallPart(tool_name=draw(names), args=draw(arguments), tool_call_id=call_id))
    cache_read, cache_write, uncached, output = draw(st.tuples(*[st.integers(0, 10_000)] * 4))
    return pai.ModelResponse(
        parts=parts,
        usage=RequestUsage(
            input_tokens=uncached + cache_read + cache_write,
            output_tokens=output,
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
        ),
        model_name=draw(st.none() | names),
        provider_name=draw(st.none() | names),
        timestamp=draw(stamps),
        finish_reason=draw(st.sampled_from(["stop", "length", "tool_call", "content_filter", "error"])),
        provider_response_id=draw(st.none() | names),
    )


@st.composite
def histories(draw: st.DrawFn) -> list[pai.ModelMessage]:
    first: list[Any] = []
    if draw(st.booleans()):
        first.append(pai.SystemPromptPart(content=draw(texts), timestamp=draw(stamps)))
    first.append(draw(user_part()))
    out: list[pai.ModelMessage] = [pai.ModelRequest(parts=first)]
    for turn in range(draw(st.integers(0, 4))):
        reply = draw(response(turn))
        out.append(reply)
        parts: list[Any] = [draw(tool_return(p)) for p in reply.parts if isinstance(p, pai.ToolCallPart)]
        if RetryFeedbackPart is not None and draw(st.booleans()):
            content = draw(texts)
            parts.append(
                RetryFeedbackPart(
                    content=content, retry=RetryInfo(cause="model_retry"), timestamp=draw(stamps)
                )
            )
        if not parts or draw(st.booleans()):
            parts.append(draw(user_part()))
        out.append(pai.ModelRequest(parts=parts))
    return out


def _ms(value: datetime) -> int:
    return int(value.timestamp() * 1000)


def _user_content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    return [item if isinstance(item, str) else (bytes(item.data), item.media_type) for item in content]


def _part(part: Any) -> tuple[Any, ...]:
    kind = part.part_kind
    if isinstance(part, pai.SystemPromptPart):
        return (kind, part.content, part.dynamic_ref, _ms(part.timestamp))
    if isinstance(part, pai.UserPromptPart):
        return (kind, _user_content(part.content), _ms(part.timestamp))
    if isinstance(part, pai.ToolReturnPart):
        outcome = getattr(part, "outcome", "success")
        return (kind, part.tool_name, part.tool_call_id, part.content, outcome, _ms(part.timestamp))
    if RetryFeedbackPart is not None and isinstance(part, RetryFeedbackPart):
        return (kind, part.content, part.retry.cause, _ms(part.timestamp))
    if isinstance(part, pai.TextPart):
        return (kind, part.content, part.id)
    if isinstance(part, pai.ThinkingPart):
        return (kind, part.content, part.signature)
    assert isinstance(part, pai.ToolCallPart)
    return (kind, part.tool_name, part.tool_call_id, part.args_as_dict())


def _shape(messages: list[pai.ModelMessage]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for message in messages:
        parts = tuple(_part(p) for p in message.parts)
        if isinstance(message, pai.ModelResponse):
            usage = message.usage
            out.append(
                (
                    "response",
                    parts,
                    (
                        usage.input_tokens,
                        usage.output_tokens,
                        usage.cache_read_tokens,
                        usage.cache_write_tokens,
                    ),
                    message.model_name,
                    message.provider_name,
                    message.finish_reason,
                    message.provider_response_id,
                    _ms(message.timestamp),
                )
            )
        else:
            out.append(("request", parts))
    return out


@given(histories())
def test_pydantic_ai_round_trip_keeps_every_part(history: list[pai.ModelMessage]) -> None:
    transcript = from_pydantic_ai_messages(history)
    back = to_pydantic_ai_messages(transcript)
    assert _shape(back) == _shape(history)
    assert from_pydantic_ai_messages(back) == transcript  # the transcript side is a fixed point


@given(histories())
def test_every_tool_result_answers_an_earlier_call(history: list[pai.ModelMessage]) -> None:
    called: set[str] = set()
    for message in from_pydantic_ai_messages(history):
        if isinstance(message, AssistantMessage):
            called.update(b.id for b in message.content if isinstance(b, ToolCall))
        elif isinstance(message, ToolResultMessage):
            assert message.tool_call_id in called


def test_parts_map_to_pi_messages() -> None:
    stamp = datetime(2026, 1, 1, tzinfo=UTC)
    history: list[pai.ModelMessage] = [
        pai.ModelRequest(
            parts=[
                pai.SystemPromptPart(content="Be brief.", timestamp=stamp),
                pai.UserPromptPart(
                    content=["Look:", pai.BinaryContent(data=PNG, media_type="image/png")], timestamp=stamp
                ),
            ]
        ),
        pai.ModelResponse(
            parts=[
                pai.ThinkingPart(content="hm", signature="sig"),
                pai.ToolCallPart(tool_name="read", args='{"path": "a"}', tool_call_id="c1"),
            ],
            usage=RequestUsage(input_tokens=120, output_tokens=5, cache_read_tokens=100),
            model_name="claude-sonnet-4-5",
            provider_name="anthropic",
            timestamp=stamp,
        ),
        pai.ModelRequest(
            parts=[pai.ToolReturnPart(tool_name="read", content={"lines": 2}, tool_call_id="c1")]
        ),
    ]
    system, user, reply, result = from_pydantic_ai_messages(history)
    assert isinstance(system, CustomMessage) and system.custom_type == SYSTEM_PROMPT_CUSTOM_TYPE
    assert (system.content, system.display, system.timestamp) == ("Be brief.", False, 1_767_225_600_000)
    assert isinstance(user, UserMessage) and not isinstance(user.content, str)
    assert [b.type for b in user.content] == ["text", "image"]
    assert user.content[1].data == base64.b64encode(PNG).decode()  # type: ignore[union-attr]
    assert isinstance(reply, AssistantMessage)
    assert (reply.api, reply.provider, reply.model, reply.stop_reason) == (
        "pydantic-ai",
        "anthropic",
        "claude-sonnet-4-5",
        "toolUse",  # no finish_reason: a reply with tool calls stopped for them
    )
    assert (reply.usage.input, reply.usage.cache_read, reply.usage.total_tokens) == (20, 100, 125)
    assert reply.content[1] == ToolCall(id="c1", name="read", arguments={"path": "a"})
    assert isinstance(result, ToolResultMessage)
    assert (result.tool_call_id, result.is_error, result.content[0].text) == ("c1", False, '{"lines":2}')  # type: ignore[union-attr]


def test_summaries_and_bash_become_user_prompts_with_pi_texts() -> None:
    messages = [
        CompactionSummaryMessage(summary="We read a.", tokens_before=900, timestamp=1),
        BashExecutionMessage(command="ls", output="a", exit_code=0, timestamp=2),
        CustomMessage(custom_type="note", content="hello", display=True, timestamp=3),
    ]
    [request] = to_pydantic_ai_messages(messages)
    assert isinstance(request, pai.ModelRequest)
    contents = [p.content for p in request.parts]  # type: ignore[union-attr]
    assert contents[0] == COMPACTION_SUMMARY_PREFIX + "We read a." + COMPACTION_SUMMARY_SUFFIX
    assert contents[1] == ["Ran `ls`\n```\na\n```"]
    assert contents[2] == ["hello"]
    # the summary is recognised on the way back (replay hygiene needs it), tokens_before is not carried
    back = from_pydantic_ai_messages([request])
    assert back[0] == CompactionSummaryMessage(summary="We read a.", tokens_before=0, timestamp=1)


def test_a_retry_answering_no_call_is_kept_as_a_custom_message() -> None:
    # the part the installed pydantic-ai writes: RetryFeedbackPart, or RetryPromptPart before it existed
    part: Any = (
        RetryFeedbackPart(content="Say it in French.", retry=RetryInfo(cause="model_retry"))
        if RetryFeedbackPart is not None
        else pai.RetryPromptPart(content="Say it in French.")
    )
    [message] = from_pydantic_ai_messages([pai.ModelRequest(parts=[part])])
    assert isinstance(message, CustomMessage) and message.custom_type == RETRY_CUSTOM_TYPE
    assert "Say it in French." in str(message.content)
    [request] = to_pydantic_ai_messages([message])
    [back] = request.parts  # type: ignore[union-attr]
    assert (type(back), back.content) == (type(part), "Say it in French.")


def test_parts_a_transcript_cannot_keep_are_refused() -> None:
    url = pai.ModelRequest(
        parts=[pai.UserPromptPart(content=[pai.ImageUrl(url="https://example.com/a.png")])]
    )
    with pytest.raises(ValueError, match="image-url"):
        from_pydantic_ai_messages([url])
    pdf = pai.BinaryContent(data=b"%PDF", media_type="application/pdf")
    returned = pai.ModelRequest(parts=[pai.ToolReturnPart(tool_name="get", content=pdf, tool_call_id="c")])
    with pytest.raises(ValueError, match="files returned by tool 'get'"):
        from_pydantic_ai_messages([returned])
