"""Typing tests of the SDK model clients and the message converters (never run)."""

from __future__ import annotations

from typing import Any, assert_type

import anthropic
import openai

from sessionkeeper import ModelRequest, ModelResponse
from sessionkeeper.adapters import (
    AnthropicStream,
    ChatCompletionsStream,
    ResponsesStream,
    from_anthropic_message,
    from_chat_completion,
    from_openai_response,
    to_anthropic_request,
    to_chat_completions_request,
    to_responses_request,
)
from sessionkeeper.adapters.anthropic import AnthropicModelClient, translate_anthropic_error
from sessionkeeper.adapters.openai import (
    OpenAIChatModelClient,
    OpenAIResponsesModelClient,
    translate_openai_error,
)
from sessionkeeper.exceptions import ModelProviderError
from sessionkeeper.records import AssistantMessage


async def client_calls(request: ModelRequest, err: Exception) -> None:
    claude = AnthropicModelClient("claude-sonnet-4-5", api_key="k", extra_body={"temperature": 0})
    assert_type(claude.client, anthropic.AsyncAnthropic)
    assert_type(claude.provider, str)
    assert_type(await claude.complete(request), ModelResponse)
    assert_type(await claude.create_message(request, tools=[{"name": "t"}]), AssistantMessage)
    assert_type(claude.build_body(request, model="m", tools=(), stream=False), dict[str, Any])

    chat = OpenAIChatModelClient("gpt-5", base_url="http://localhost:8000/v1", reasoning_field="x")
    assert_type(chat.client, openai.AsyncOpenAI)
    assert_type(await chat.complete(request), ModelResponse)

    responses = OpenAIResponsesModelClient("gpt-5", client=openai.AsyncOpenAI(api_key="k"))
    assert_type(responses.client, openai.AsyncOpenAI)
    assert_type(await responses.create_message(request), AssistantMessage)

    assert_type(translate_anthropic_error(err), ModelProviderError | None)
    assert_type(translate_openai_error(err, provider="vllm"), ModelProviderError | None)


def converter_calls(request: ModelRequest, reply: object, event: object) -> None:
    assert_type(to_anthropic_request(request.messages, model="m", max_tokens=1024), dict[str, Any])
    assert_type(to_chat_completions_request(request.messages, model="m", stream=True), dict[str, Any])
    assert_type(to_responses_request(request.messages, model="m", thinking_level="high"), dict[str, Any])
    assert_type(from_anthropic_message(reply), AssistantMessage)
    assert_type(from_chat_completion(reply, provider="vllm"), AssistantMessage)
    assert_type(from_openai_response(reply, aborted=True), AssistantMessage)
    for stream in (AnthropicStream(), ChatCompletionsStream(), ResponsesStream()):
        assert_type(stream.feed(event), str)
        assert_type(stream.message(model="m"), AssistantMessage)
