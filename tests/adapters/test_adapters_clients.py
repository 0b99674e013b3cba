"""
The SDK-backed model clients against a loopback server speaking each protocol from recorded fixtures.

The real ``openai`` and ``anthropic`` SDKs send real HTTP to a real socket (no mock of the SDK): the
requests they send are compared with the fixtures' ``request`` (path and JSON body), their replies
(JSON, SSE streams, real context-overflow error bodies) come from the fixtures.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import anyio
import openai
import pytest
from tests.adapters._fixture_server import FixtureServer, check_request, load_fixture, running_server

from sessionkeeper import is_context_overflow
from sessionkeeper._model_client import ModelRequest
from sessionkeeper.adapters.anthropic import AnthropicModelClient
from sessionkeeper.adapters.openai import OpenAIChatModelClient, OpenAIResponsesModelClient
from sessionkeeper.exceptions import ModelClientError, ModelProviderError
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


pytestmark = pytest.mark.anyio

_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


@pytest.fixture
def server() -> Iterator[FixtureServer]:
    with running_server() as srv:
        yield srv


def _tool_turn(api: str, call: ToolCall, blocks: list[Any]) -> list[Any]:
    return [
        AssistantMessage(
            content=[*blocks, call], api=api, provider="p", model="m", stop_reason="toolUse", timestamp=2
        ),
        ToolResultMessage(
            tool_call_id=call.id, tool_name="read", content=[TextContent(text="a\nb\nc")], timestamp=3
        ),
    ]


def _history(api: str, call: ToolCall, blocks: list[Any]) -> list[Any]:
    return [
        CompactionSummaryMessage(
            summary="Earlier: the user set up notes.md.", tokens_before=9000, timestamp=0
        ),
        UserMessage(
            content=[
                TextContent(text="Read notes.md; this is its icon."),
                ImageContent(data=_PNG, mime_type="image/png"),
            ],
            timestamp=1,
        ),
        *_tool_turn(api, call, blocks),
        UserMessage(content="Read it again and count the lines.", timestamp=4),
    ]


def _request(messages: list[Any], **kw: Any) -> ModelRequest:
    return ModelRequest(
        system_prompt="You are a careful assistant.", messages=messages, max_tokens=2048, **kw
    )


# ------------------------------------------------------------------ OpenAI Chat Completions


def _chat(server: FixtureServer, **kw: Any) -> OpenAIChatModelClient:
    client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="sk-test", max_retries=0)
    return OpenAIChatModelClient("gpt-4o", client=client, **kw)


_CHAT_HISTORY = _history(
    "openai-completions",
    ToolCall(id="call_Q1w2E3r4T5y6U7i8", name="read", arguments={"path": "notes.md"}),
    [],
)


async def test_chat_stream_request_and_reply(server: FixtureServer) -> None:
    server.script(load_fixture("openai_chat_stream"))
    delivered: list[str] = []
    client = _chat(server, on_text=delivered.append)
    response = await client.complete(_request(_CHAT_HISTORY))
    sent = check_request(server, "openai_chat_stream")
    assert sent["headers"]["authorization"] == "Bearer sk-test"
    assert response.text == "notes.md has three lines."
    assert "".join(delivered) == response.text
    assert response.stop_reason == "stop"
    assert response.model == "gpt-4o-2024-08-06"
    assert response.usage == Usage(input=156, output=7, cache_read=256, total_tokens=419)


async def test_chat_silent_reply_streams_nothing_to_the_user(server: FixtureServer) -> None:
    server.script(load_fixture("openai_chat_silent"))
    delivered: list[str] = []
    response = await _chat(server, on_text=delivered.append).complete(_request(_CHAT_HISTORY))
    check_request(server, "openai_chat_silent")
    assert response.text == "NO_REPLY"
    assert delivered == []


async def test_chat_tool_call_reply_without_streaming(server: FixtureServer) -> None:
    server.script(load_fixture("openai_chat_tool_call"))
    client = _chat(server, stream=False)
    message = await client.create_message(
        _request([UserMessage(content="What is in notes.md?", timestamp=1)], model="openai/gpt-4o"),
        tools=[{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}],
    )
    check_request(server, "openai_chat_tool_call")
    assert message.content == [
        ToolCall(id="call_Q1w2E3r4T5y6U7i8", name="read", arguments={"path": "notes.md"})
    ]
    assert message.stop_reason == "toolUse"
    assert (message.api, message.provider, message.model) == ("openai-completions", "openai", "gpt-4o")
    assert message.response_model == "gpt-4o-2024-08-06"


async def test_chat_context_overflow_is_recognised(server: FixtureServer) -> None:
    server.script(load_fixture("openai_chat_overflow"))
    with pytest.raises(ModelProviderError) as caught:
        await _chat(server).complete(_request(_CHAT_HISTORY))
    err = caught.value
    assert isinstance(err, ModelClientError)
    assert err.status_code == 400 and err.code == "context_length_exceeded"
    assert err.type == "invalid_request_error"
    assert err.message.startswith("This model's maximum context length is 128000 tokens.")
    assert is_context_overflow(err)
    assert isinstance(err.__cause__, openai.BadRequestError)


# ------------------------------------------------------------------ OpenAI Responses


_REASONING = {
    "id": "rs_prev0001",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Read the file first."}],
    "encrypted_content": "gAAAAABprev==",
}
_RESPONSES_HISTORY = _history(
    "openai-responses",
    ToolCall(id="call_prev0001|fc_prev0001", name="read", arguments={"path": "notes.md"}),
    [
        ThinkingContent(thinking="Read the file first.", thinking_signature=json.dumps(_REASONING)),
        TextContent(text="Reading notes.md.", text_signature='{"v":1,"id":"msg_prev0001"}'),
    ],
)


def _responses(server: FixtureServer, **kw: Any) -> OpenAIResponsesModelClient:
    client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="sk-test", max_retries=0)
    return OpenAIResponsesModelClient("gpt-5", client=client, **kw)


async def test_responses_stream_request_and_reply(server: FixtureServer) -> None:
    server.script(load_fixture("openai_responses_stream"))
    message = await _responses(server).create_message(
        _request(_RESPONSES_HISTORY, thinking_level="medium"),
        tools=[{"type": "function", "name": "read", "parameters": {"type": "object"}}],
    )
    check_request(server, "openai_responses_stream")
    reasoning = json.loads(message.content[0].thinking_signature)  # type: ignore[union-attr,arg-type]
    assert reasoning["encrypted_content"] == "gAAAAABo5KGy-encrypted-reasoning-payload=="
    assert message.content[1:] == [
        TextContent(text="Reading it again.", text_signature='{"v":1,"id":"msg_68e4a1b2c3d4e5f8"}'),
        ToolCall(id="call_Hk2nP7sQ1|fc_68e4a1b2c3d4e5f9", name="read", arguments={"path": "notes.md"}),
    ]
    assert message.stop_reason == "toolUse"
    assert message.usage == Usage(input=284, output=96, cache_read=1536, total_tokens=1916)
    assert message.response_id == "resp_68e4a1b2c3d4e5f6"


async def test_responses_context_overflow_is_recognised(server: FixtureServer) -> None:
    server.script(load_fixture("openai_responses_overflow"))
    with pytest.raises(ModelProviderError) as caught:
        await _responses(server, stream=False).complete(_request(_RESPONSES_HISTORY))
    assert caught.value.status_code == 400
    assert is_context_overflow(caught.value)
    assert server.requests[-1]["path"] == "/v1/responses"


# ------------------------------------------------------------------ Anthropic Messages


_ANTHROPIC_HISTORY = _history(
    "anthropic-messages",
    ToolCall(id="toolu_01Prev0000000000000000", name="read", arguments={"path": "notes.md"}),
    [
        ThinkingContent(thinking="The user wants notes.md.", thinking_signature="EqQBCgIYAhIMprevsig"),
        ThinkingContent(thinking="", thinking_signature="EmwKAhgBEgyprevredacted", redacted=True),
        TextContent(text="Reading notes.md."),
    ],
)


def _anthropic(server: FixtureServer, **kw: Any) -> AnthropicModelClient:
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="sk-ant-test", max_retries=0)
    return AnthropicModelClient("claude-sonnet-4-5", client=client, **kw)


async def test_anthropic_stream_request_and_reply(server: FixtureServer) -> None:
    server.script(load_fixture("anthropic_stream"))
    delivered: list[str] = []
    message = await _anthropic(server, on_text=delivered.append).create_message(
        _request(_ANTHROPIC_HISTORY, thinking_level="low"),
        tools=[{"name": "read", "input_schema": {"type": "object"}}],
    )
    sent = check_request(server, "anthropic_stream")
    headers = sent["headers"]
    assert "sk-ant-test" in headers.get(
        "x-api-key", headers.get("authorization", "")
    )  # key header by version
    assert headers["anthropic-version"]
    assert message.content == [
        ThinkingContent(
            thinking="The user wants the file read again.",
            thinking_signature="EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
        ),
        ThinkingContent(
            thinking="",
            thinking_signature="EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj",
            redacted=True,
        ),
        TextContent(text="Let me read it again."),
        ToolCall(id="toolu_01T1x1fJ34qAmk2tNTrN7Up6", name="read", arguments={"path": "notes.md"}),
    ]
    assert "".join(delivered) == "Let me read it again."
    assert message.stop_reason == "toolUse"
    assert message.usage == Usage(input=472, output=89, cache_read=1024, total_tokens=1585)


async def test_anthropic_context_overflow_is_recognised(server: FixtureServer) -> None:
    server.script(load_fixture("anthropic_overflow"))
    with pytest.raises(ModelProviderError) as caught:
        await _anthropic(server).complete(_request(_ANTHROPIC_HISTORY))
    err = caught.value
    assert (err.status_code, err.type) == (400, "invalid_request_error")
    assert err.message == "prompt is too long: 208310 tokens > 200000 maximum"
    assert is_context_overflow(err)


async def test_anthropic_rate_limit_is_not_an_overflow(server: FixtureServer) -> None:
    server.script(load_fixture("anthropic_rate_limit"))
    with pytest.raises(ModelProviderError) as caught:
        await _anthropic(server).complete(_request(_ANTHROPIC_HISTORY))
    assert caught.value.status_code == 429
    assert not is_context_overflow(caught.value)


async def test_abort_mid_stream_returns_the_partial_reply(server: FixtureServer) -> None:
    server.script(load_fixture("anthropic_abort"), hold_after=3)  # after the first text delta
    abort = anyio.Event()
    delivered: list[str] = []

    async def abort_when_held() -> None:
        await anyio.to_thread.run_sync(server.holding.wait, 30)
        abort.set()

    async with anyio.create_task_group() as group:
        group.start_soon(abort_when_held)
        message = await _anthropic(server, on_text=delivered.append).create_message(
            _request(_ANTHROPIC_HISTORY, abort=abort)
        )
    server.release()
    assert message.stop_reason == "aborted"
    assert message.content == [TextContent(text="Here is the first half")]
    assert message.error_message == "Request was aborted"
    assert message.usage.input == 210


async def test_abort_before_the_call_sends_nothing(server: FixtureServer) -> None:
    abort = anyio.Event()
    abort.set()
    response = await _anthropic(server).complete(_request(_ANTHROPIC_HISTORY, abort=abort))
    assert response.stop_reason == "aborted" and response.text == ""
    assert server.requests == []


async def test_task_cancellation_propagates(server: FixtureServer) -> None:
    server.script(load_fixture("anthropic_abort"), hold_after=3)
    finished = False

    async def call() -> None:
        nonlocal finished
        await _anthropic(server).complete(_request(_ANTHROPIC_HISTORY))
        finished = True

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        await anyio.to_thread.run_sync(server.holding.wait, 30)
        group.cancel_scope.cancel()
    server.release()
    assert not finished
    assert group.cancel_scope.cancelled_caught


async def test_anthropic_stream_error_event_raises_provider_error(server: FixtureServer) -> None:
    server.script(load_fixture("anthropic_stream_error"))
    with pytest.raises(ModelProviderError) as caught:
        await _anthropic(server).complete(_request(_ANTHROPIC_HISTORY))
    check_request(server, "anthropic_stream_error")
    err = caught.value
    assert (err.status_code, err.type, err.message) == (None, "overloaded_error", "Overloaded")
    assert not is_context_overflow(err)
