"""
:class:`~sessionkeeper.ModelClient` implementations over the official ``openai`` async SDK (extra ``openai``).

Importing this module imports ``openai``; ``import sessionkeeper`` never does.

* :class:`OpenAIChatModelClient`: Chat Completions, for OpenAI and any OpenAI-compatible server (vLLM,
  llama.cpp, Ollama, LiteLLM, OpenRouter, DeepSeek: pass ``base_url``).
* :class:`OpenAIResponsesModelClient`: the Responses API (reasoning items replayed from the transcript).

Both stream by default, honour ``request.abort`` and task cancellation, and raise
:class:`~sessionkeeper.exceptions.ModelProviderError` for API errors (``is_context_overflow`` recognises
OpenAI's ``context_length_exceeded``). Besides :meth:`complete` (the ``ModelClient`` protocol, used for
summaries and the memory flush), :meth:`create_message` returns the whole reply as an ``AssistantMessage``
for an agent loop's ``after_turn``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import openai

from sessionkeeper.adapters._chat import (
    CHAT_COMPLETIONS_API,
    ChatCompletionsStream,
    from_chat_completion,
    to_chat_completions_request,
)
from sessionkeeper.adapters._client import (
    FromReply,
    SdkModelClient,
    SdkWire,
    StreamAccumulator,
    TextCallback,
    ToRequest,
)
from sessionkeeper.adapters._common import str_or_none
from sessionkeeper.adapters._responses import (
    RESPONSES_API,
    ResponsesStream,
    from_openai_response,
    to_responses_request,
)
from sessionkeeper.exceptions import ModelProviderError


__all__ = ("OpenAIChatModelClient", "OpenAIResponsesModelClient", "translate_openai_error")


def translate_openai_error(err: BaseException, *, provider: str = "openai") -> ModelProviderError | None:
    """
    The :class:`ModelProviderError` for an ``openai`` SDK error, ``None`` for any other exception.

    HTTP errors keep their status, the error object's ``message``, ``code``, ``type`` and the body; a
    connection failure or a stream ``error`` event has no status.
    """
    if isinstance(err, openai.APIStatusError):
        body = err.body
        inner = body.get("error", body) if isinstance(body, Mapping) else None
        message = str_or_none(inner.get("message")) if isinstance(inner, Mapping) else None
        return ModelProviderError(
            message or err.message,
            provider=provider,
            status_code=err.status_code,
            code=str_or_none(err.code),
            type=str_or_none(err.type),
            body=body,
        )
    if isinstance(err, openai.APIError):
        return ModelProviderError(
            err.message,
            provider=provider,
            code=str_or_none(getattr(err, "code", None)),
            type=str_or_none(getattr(err, "type", None)),
            body=err.body,
        )
    return None


def _openai_wire(
    endpoint: str,
    to_request: ToRequest,
    accumulator: Callable[[], StreamAccumulator],
    from_reply: FromReply,
) -> SdkWire:
    """The wire of an ``openai.AsyncOpenAI`` resource: provider ``"openai"``, its errors translated."""
    return SdkWire(
        provider="openai",
        new_client=openai.AsyncOpenAI,
        endpoint=endpoint,
        to_request=to_request,
        accumulator=accumulator,
        from_reply=from_reply,
        translate=translate_openai_error,
    )


class OpenAIChatModelClient(SdkModelClient[openai.AsyncOpenAI]):
    """
    A ``ModelClient`` over ``client.chat.completions.create`` (streamed by default).

    Args:
        model: Default model id (``request.model`` wins; a leading ``"<provider>/"`` is removed).
        client: An ``openai.AsyncOpenAI`` to use; default: one built from ``base_url`` and ``api_key``
            (``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` when ``None``).
        base_url: Server URL for OpenAI-compatible servers (``http://host:port/v1``).
        api_key: API key.
        provider: ``provider`` recorded on replies (default ``None``: ``"openai"``).
        stream: Stream the reply (``stream_options.include_usage``); ``False`` sends one request.
        on_text: Called with each delivered text piece of a streamed reply, after
            :class:`~sessionkeeper.SilentReplyStreamFilter` (a silent reply delivers nothing).
        max_tokens_field: ``"max_completion_tokens"`` (default) or ``"max_tokens"`` for older servers.
        system_role: ``"system"`` (default) or ``"developer"``.
        reasoning_field: Field that replays thinking to compatible servers (``"reasoning_content"``);
            ``None`` (default) leaves thinking out, as OpenAI's own API has no such field.
        extra_body: Extra top-level request fields (``temperature``, ``store``, ...).
    """

    api = CHAT_COMPLETIONS_API
    _wire = _openai_wire(
        "chat.completions", to_chat_completions_request, ChatCompletionsStream, from_chat_completion
    )

    def __init__(
        self,
        model: str,
        *,
        client: openai.AsyncOpenAI | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        provider: str | None = None,
        stream: bool = True,
        on_text: TextCallback | None = None,
        max_tokens_field: str = "max_completion_tokens",
        system_role: str = "system",
        reasoning_field: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            model,
            client=client,
            base_url=base_url,
            api_key=api_key,
            provider=provider,
            stream=stream,
            on_text=on_text,
            extra_body=extra_body,
        )
        self.max_tokens_field = max_tokens_field
        self.system_role = system_role
        self.reasoning_field = reasoning_field

    def _body_options(self) -> dict[str, Any]:
        return {
            "max_tokens_field": self.max_tokens_field,
            "system_role": self.system_role,
            "reasoning_field": self.reasoning_field,
        }


class OpenAIResponsesModelClient(SdkModelClient[openai.AsyncOpenAI]):
    """
    A ``ModelClient`` over ``client.responses.create`` (streamed by default).

    Args:
        model: Default model id (``request.model`` wins; a leading ``"<provider>/"`` is removed).
        client: An ``openai.AsyncOpenAI`` to use; default: one built from ``base_url`` and ``api_key``.
        base_url: Server URL.
        api_key: API key.
        provider: ``provider`` recorded on replies (default ``None``: ``"openai"``).
        stream: Stream the reply; ``False`` sends one request.
        on_text: Called with each delivered text piece of a streamed reply, after
            :class:`~sessionkeeper.SilentReplyStreamFilter`.
        extra_body: Extra top-level request fields (e.g. ``{"store": False}``).
    """

    api = RESPONSES_API
    _wire = _openai_wire("responses", to_responses_request, ResponsesStream, from_openai_response)
