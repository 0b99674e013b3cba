"""
A :class:`~sessionkeeper.ModelClient` over the official ``anthropic`` async SDK (extra ``anthropic``).

Importing this module imports ``anthropic``; ``import sessionkeeper`` never does.
:class:`AnthropicModelClient` streams by default, honours ``request.abort`` and task cancellation, maps
thinking levels to ``budget_tokens``, and raises :class:`~sessionkeeper.exceptions.ModelProviderError` for
API errors (``is_context_overflow`` recognises Anthropic's ``prompt is too long``). Besides
:meth:`complete` (the ``ModelClient`` protocol), :meth:`create_message` returns the whole reply as an
``AssistantMessage`` (thinking signatures and redacted thinking kept) for ``after_turn``.
"""

from __future__ import annotations

from collections.abc import Mapping

import anthropic

from sessionkeeper.adapters._anthropic import (
    ANTHROPIC_API,
    AnthropicStream,
    from_anthropic_message,
    to_anthropic_request,
)
from sessionkeeper.adapters._client import SdkModelClient, SdkWire
from sessionkeeper.adapters._common import str_or_none
from sessionkeeper.exceptions import ModelProviderError


__all__ = ("AnthropicModelClient", "translate_anthropic_error")


def translate_anthropic_error(
    err: BaseException, *, provider: str = "anthropic"
) -> ModelProviderError | None:
    """
    The :class:`ModelProviderError` for an ``anthropic`` SDK error, ``None`` for any other exception.

    HTTP errors keep their status, the body's ``error.message`` and ``error.type``
    (``invalid_request_error``, ``overloaded_error``, ...) and the body; a connection failure or a stream
    ``error`` event has no status.
    """
    if not isinstance(err, anthropic.APIError):
        return None
    body = err.body
    inner = body.get("error") if isinstance(body, Mapping) else None
    message = str_or_none(inner.get("message")) if isinstance(inner, Mapping) else None
    kind = str_or_none(inner.get("type")) if isinstance(inner, Mapping) else None
    status = err.status_code if isinstance(err, anthropic.APIStatusError) else None
    return ModelProviderError(
        message or err.message, provider=provider, status_code=status, type=kind, body=body
    )


class AnthropicModelClient(SdkModelClient[anthropic.AsyncAnthropic]):
    """
    A ``ModelClient`` over ``client.messages.create`` (streamed by default).

    Args:
        model: Default model id (``request.model`` wins; a leading ``"<provider>/"`` is removed).
        client: An ``anthropic.AsyncAnthropic`` to use; default: one built from ``base_url`` and
            ``api_key`` (``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL`` when ``None``).
        base_url: Server URL (``http://host:port``, without ``/v1``).
        api_key: API key.
        provider: ``provider`` recorded on replies (default ``None``: ``"anthropic"``).
        stream: Stream the reply; ``False`` sends one request.
        on_text: Called with each delivered text piece of a streamed reply, after
            :class:`~sessionkeeper.SilentReplyStreamFilter`.
        extra_body: Extra top-level request fields (``temperature``, ``metadata``, ...).
    """

    api = ANTHROPIC_API
    _wire = SdkWire(
        provider="anthropic",
        new_client=anthropic.AsyncAnthropic,
        endpoint="messages",
        to_request=to_anthropic_request,
        accumulator=AnthropicStream,
        from_reply=from_anthropic_message,
        translate=translate_anthropic_error,
    )
