"""
What the SDK-backed model clients share: abort handling, streaming through the silent-reply filter, the
reply as an ``AssistantMessage`` and a ``ModelResponse``. No SDK is imported here.
"""

from __future__ import annotations

import abc
import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, aclosing
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import anyio

from sessionkeeper import ModelRequest, ModelResponse, SilentReplyStreamFilter
from sessionkeeper.adapters._common import JsonDict, MessageSource, text_of
from sessionkeeper.exceptions import ModelProviderError
from sessionkeeper.records import (
    AssistantMessage,
)


__all__ = (
    "FromReply",
    "SdkModelClient",
    "SdkWire",
    "SseDecoder",
    "StreamAccumulator",
    "TextCallback",
    "ToRequest",
    "run_abortable",
)

_log = logging.getLogger("sessionkeeper.adapters")

TextCallback = Callable[[str], Awaitable[None] | None]
"""Receives each delivered piece of a streamed reply (after :class:`SilentReplyStreamFilter`)."""


class StreamAccumulator(Protocol):
    """A wire's stream accumulator: ``feed`` an event (its text delta), ``message`` the reply so far."""

    def feed(self, event: object, /) -> str: ...

    def message(
        self, *, provider: str, model: str | None, timestamp: float | None, aborted: bool
    ) -> AssistantMessage: ...


class FromReply(Protocol):
    """A wire's converter of a whole (non-streamed) reply into an ``AssistantMessage``."""

    def __call__(
        self, response: object, /, *, provider: str, model: str | None, timestamp: float | None
    ) -> AssistantMessage: ...


class _Translate(Protocol):
    def __call__(self, err: BaseException, /, *, provider: str) -> ModelProviderError | None: ...


class ToRequest(Protocol):
    """A wire's request-body converter (``to_anthropic_request``, ...): the fields every wire takes."""

    def __call__(
        self,
        source: MessageSource,
        /,
        *,
        model: str,
        max_tokens: int,
        system_prompt: str | None,
        thinking_level: str | None,
        tools: Sequence[Mapping[str, Any]],
        stream: bool,
        extra: Mapping[str, Any] | None,
    ) -> JsonDict: ...


ClientT = TypeVar("ClientT")
"""The vendor SDK's async client class (``anthropic.AsyncAnthropic``, ``openai.AsyncOpenAI``)."""


@dataclass(frozen=True)
class SdkWire:
    """
    What one SDK client class differs in: its SDK client, where the SDK sends a request, and the
    converters of that wire.

    Attributes:
        provider: The ``provider`` a client records on replies unless it is given another
            (``"anthropic"``, ``"openai"``).
        new_client: Builds the SDK client from ``base_url`` and ``api_key`` (the SDK's client class,
            ``anthropic.AsyncAnthropic``, ...).
        endpoint: Dotted path of the SDK resource under ``client`` whose ``create`` sends a request
            (``"messages"``, ``"chat.completions"``, ``"responses"``).
        to_request: Builds the request body (``to_anthropic_request``, ...).
        accumulator: Makes a fresh stream accumulator (``AnthropicStream``, ...).
        from_reply: Converts a non-streamed reply (``from_anthropic_message``, ...).
        translate: The ``ModelProviderError`` for an SDK error, ``None`` for anything else.
    """

    provider: str
    new_client: Callable[..., Any]
    endpoint: str
    to_request: ToRequest
    accumulator: Callable[[], StreamAccumulator]
    from_reply: FromReply
    translate: _Translate


async def run_abortable(abort: anyio.Event | None, body: Callable[[], Awaitable[None]]) -> bool:
    """
    Run ``body`` until it returns or ``abort`` is set; return whether the abort stopped it.

    The caller's own cancellation propagates unchanged; an exception of ``body`` is re-raised as it is
    (not wrapped in an exception group).
    """
    if abort is None:
        await body()
        return False
    aborted = False
    error: Exception | None = None
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            nonlocal aborted
            await abort.wait()
            aborted = True
            group.cancel_scope.cancel()

        group.start_soon(watch)
        try:
            await body()
        except Exception as err:  # re-raised below, outside the task group
            error = err
        group.cancel_scope.cancel()
    if error is not None:
        raise error
    return aborted


class SseDecoder:
    """
    Server-sent events, line by line: :meth:`feed_line` returns the JSON object of an event when its
    blank line arrives (``data:`` lines joined by newlines, ``event:`` kept as ``"_event"`` when the data
    has no ``type``), ``None`` otherwise. OpenAI's ``[DONE]`` sentinel and comments yield nothing.

    The clients read the raw stream (``with_streaming_response``) instead of the SDK's parsed stream, so
    they see the provider's JSON as sent and close everything they opened, under asyncio and trio alike.
    """

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event: str | None = None

    def feed_line(self, line: str) -> JsonDict | None:
        """Take one line (without its newline); return a completed event, if this line completed one."""
        if line:
            if line.startswith(":"):
                return None
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "data":
                self._data.append(value)
            elif field == "event":
                self._event = value
            return None
        data, event = "\n".join(self._data), self._event
        self._data, self._event = [], None
        if not data or data == "[DONE]":
            return None
        decoded = json.loads(data)
        if not isinstance(decoded, dict):
            return None
        if event is not None and "type" not in decoded:
            decoded["_event"] = event
        return decoded


def resolve_model(requested: str | None, default: str, provider: str) -> str:
    """``request.model`` (without a leading ``"<provider>/"`` of this client's provider), else ``default``."""
    if not requested:
        return default
    prefix = f"{provider}/"
    return requested[len(prefix) :] if requested.startswith(prefix) else requested


class SdkModelClient(abc.ABC, Generic[ClientT]):
    """
    Base of the bundled :class:`~sessionkeeper.ModelClient` implementations.

    Subclasses give an :class:`SdkWire` (default provider, SDK client class and endpoint, request
    converter, stream accumulator, final-reply converter, error translation) and, when their wire takes
    options of its own, :meth:`_body_options`.
    Behaviour (``_model_client.py``):

    * ``request.abort`` set before the call: no request is sent; set during it: the request or stream is
      stopped at once and the reply so far is returned with ``stop_reason="aborted"``;
    * cancelling the calling task cancels the request and propagates;
    * SDK errors become :class:`~sessionkeeper.exceptions.ModelProviderError` (status, message, body),
      which :func:`~sessionkeeper.is_context_overflow` understands;
    * a streamed reply's text goes through a :class:`~sessionkeeper.SilentReplyStreamFilter` to
      ``on_text``, so a ``NO_REPLY`` reply never reaches the user while it streams.
    """

    api: str = ""
    _wire: ClassVar[SdkWire]

    def __init__(
        self,
        model: str,
        *,
        client: ClientT | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        provider: str | None = None,
        stream: bool = True,
        on_text: TextCallback | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        """
        Args:
            model: Default model id (``request.model`` wins; a leading ``"<provider>/"`` is removed).
            client: The SDK's async client to use; default: one built from ``base_url`` and ``api_key``
                (the SDK reads its own environment variables for those left ``None``).
            base_url: Server URL.
            api_key: API key.
            provider: ``provider`` recorded on replies; default: the wire's (``"anthropic"``,
                ``"openai"``).
            stream: Stream the reply; ``False`` sends one request.
            on_text: Called with each delivered text piece of a streamed reply, after
                :class:`~sessionkeeper.SilentReplyStreamFilter` (a silent reply delivers nothing).
            extra_body: Extra top-level request fields, merged last (``temperature``, ...).
        """
        self.model = model
        self.provider: str = provider if provider is not None else self._wire.provider
        self.stream = stream
        self.on_text = on_text
        self.extra_body: dict[str, Any] = dict(extra_body or {})
        self.client: ClientT = (
            client if client is not None else self._wire.new_client(base_url=base_url, api_key=api_key)
        )
        """The vendor SDK's async client."""

    # ------------------------------------------------------------------ the request body

    def build_body(
        self, request: ModelRequest, *, model: str, tools: Sequence[Mapping[str, Any]], stream: bool
    ) -> dict[str, Any]:
        """
        The request body for ``request``: the wire's ``to_*_request`` converter given the request's
        messages, system prompt, ``max_tokens`` and thinking level, ``tools``, ``stream``, the client's
        wire options and ``extra_body``.
        """
        return self._wire.to_request(
            request.messages,
            model=model,
            max_tokens=request.max_tokens,
            system_prompt=request.system_prompt,
            thinking_level=request.thinking_level,
            tools=tools,
            stream=stream,
            extra=self.extra_body,
            **self._body_options(),
        )

    def _body_options(self) -> dict[str, Any]:
        """Keyword arguments of this wire's converter beyond the shared ones (none by default)."""
        return {}

    # ------------------------------------------------------------------ from the wire

    def _endpoint(self) -> Any:
        resource: Any = self.client
        for name in self._wire.endpoint.split("."):
            resource = getattr(resource, name)
        return resource

    async def _send(self, body: dict[str, Any]) -> Any:
        """Send ``body`` with the SDK: the reply object."""
        return await self._endpoint().create(**body)

    def _open_stream(self, body: dict[str, Any]) -> AbstractAsyncContextManager[Any]:
        """The SDK's raw streaming response for ``body`` (``with_streaming_response.create``)."""
        return self._endpoint().with_streaming_response.create(**body)  # type: ignore[no-any-return]

    def _accumulator(self) -> StreamAccumulator:
        """A fresh stream accumulator of this wire."""
        return self._wire.accumulator()

    def _from_final(self, response: object, *, model: str, timestamp: float) -> AssistantMessage:
        """Convert a non-streamed reply."""
        return self._wire.from_reply(response, provider=self.provider, model=model, timestamp=timestamp)

    def _translate(self, err: Exception) -> Exception | None:
        """The ``ModelProviderError`` for an SDK error, ``None`` for anything else."""
        return self._wire.translate(err, provider=self.provider)

    # ------------------------------------------------------------------ shared

    def _stream_error(self, event: JsonDict) -> ModelProviderError | None:
        """The :class:`ModelProviderError` of a stream ``error`` event or ``None``."""
        if event.get("type") != "error" and event.get("_event") != "error":
            return None
        error = event.get("error")
        detail = error if isinstance(error, Mapping) else event
        message = detail.get("message")
        code = detail.get("code")
        kind = detail.get("type")
        return ModelProviderError(
            message if isinstance(message, str) else json.dumps(event),
            provider=self.provider,
            code=code if isinstance(code, str) else None,
            type=kind if isinstance(kind, str) and kind != "error" else None,
            body=event,
        )

    async def _emit(self, text: str) -> None:
        if text and self.on_text is not None:
            result = self.on_text(text)
            if inspect.isawaitable(result):
                await result

    async def _consume_stream(
        self,
        body: dict[str, Any],
        accumulator: StreamAccumulator,
        silent_filter: SilentReplyStreamFilter | None,
    ) -> None:
        """Send ``body`` as a stream and feed every event to ``accumulator`` (text through the filter)."""
        async with self._open_stream(body) as response:
            stream_error: ModelProviderError | None = None
            try:
                decoder = SseDecoder()
                async with aclosing(response.iter_lines()) as lines:
                    # read to the end even after an error event (the provider closes the stream
                    # right after it): leaving the transport's generators half-read leaks them
                    async for line in lines:
                        event = decoder.feed_line(line)
                        if event is None or stream_error is not None:
                            continue
                        stream_error = self._stream_error(event)
                        if stream_error is not None:
                            continue
                        delta = accumulator.feed(event)
                        if delta and silent_filter is not None:
                            await self._emit(silent_filter.feed(delta))
            finally:
                with anyio.CancelScope(shield=True):
                    await response.close()
            if stream_error is not None:
                raise stream_error

    async def create_message(
        self, request: ModelRequest, *, tools: Sequence[Mapping[str, Any]] = ()
    ) -> AssistantMessage:
        """
        Run one request and return the reply as an ``AssistantMessage`` (for ``SessionRuntime.after_turn``).

        Args:
            request: The request (system prompt, messages, ``max_tokens``, model, thinking level, abort).
            tools: Tool definitions in the provider's shape, sent with the request.

        Raises:
            ModelProviderError: The provider refused or failed the request.
        """
        model = resolve_model(request.model, self.model, self.provider)
        timestamp = int(time.time() * 1000)
        accumulator = self._accumulator() if self.stream else None
        if request.aborted:
            empty = self._accumulator()
            return empty.message(provider=self.provider, model=model, timestamp=timestamp, aborted=True)
        body = self.build_body(request, model=model, tools=tools, stream=self.stream)
        final: list[object] = []
        silent_filter = SilentReplyStreamFilter() if self.on_text is not None else None

        async def run() -> None:
            try:
                if accumulator is None:
                    final.append(await self._send(body))
                    return
                await self._consume_stream(body, accumulator, silent_filter)
            except Exception as err:
                translated = self._translate(err)
                if translated is None:
                    raise
                raise translated from err

        aborted = await run_abortable(request.abort, run)
        if silent_filter is not None and not aborted:
            await self._emit(silent_filter.finish())
        if accumulator is not None:
            message = accumulator.message(
                provider=self.provider, model=model, timestamp=timestamp, aborted=aborted
            )
        elif final:
            message = self._from_final(final[0], model=model, timestamp=timestamp)
        else:
            message = self._accumulator().message(
                provider=self.provider, model=model, timestamp=timestamp, aborted=True
            )
        _log.debug(
            "model reply",
            extra={
                "provider": self.provider,
                "api": self.api,
                "model": model,
                "stop_reason": message.stop_reason,
                "input_tokens": message.usage.input,
                "output_tokens": message.usage.output,
            },
        )
        return message

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """
        :class:`~sessionkeeper.ModelClient` entry point: :meth:`create_message`, reduced to text and usage.

        Returns:
            ``ModelResponse`` with the reply's text blocks joined, its usage, pi's stop reason and the
            model that answered.

        Raises:
            ModelProviderError: The provider refused or failed the request.
        """
        message = await self.create_message(request)
        return ModelResponse(
            text=text_of(message.content),
            usage=message.usage,
            stop_reason=message.stop_reason,
            model=message.response_model if isinstance(message.response_model, str) else message.model,
        )
