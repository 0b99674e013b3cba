"""A scripted :class:`~sessionkeeper.ModelClient` for tests: the summariser and the agent's main model."""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeAlias

import anyio
import attrs
from msgspec import UNSET

from sessionkeeper._clock import Clock
from sessionkeeper._model_client import ModelRequest, ModelResponse
from sessionkeeper.records import (
    AgentMessage,
    AssistantContent,
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)


__all__ = (
    "ModelHandler",
    "ScriptedModelClient",
    "ScriptedProviderError",
    "ScriptedReply",
    "ScriptedTurn",
    "context_overflow_error",
)


class ScriptedProviderError(Exception):
    """
    A provider failure to script (raise it from a :class:`ScriptedModelClient` step).

    Attributes:
        status: The HTTP status the fake provider answered, if any (``400``, ``413``, ``429``...).
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


def context_overflow_error(tokens: int = 210_000, window: int = 200_000) -> ScriptedProviderError:
    """
    A provider error that :func:`sessionkeeper.runtime.is_context_overflow` recognises: Anthropic's
    ``prompt is too long: <tokens> tokens > <window> maximum`` (HTTP 400), to script an overflow.
    """
    return ScriptedProviderError(f"prompt is too long: {tokens} tokens > {window} maximum", status=400)


def _tool_calls(value: Iterable[ToolCall | tuple[str, dict[str, object]]]) -> tuple[ToolCall, ...]:
    calls: list[ToolCall] = []
    for item in value:
        if isinstance(item, ToolCall):
            calls.append(item)
        else:
            name, arguments = item
            calls.append(ToolCall(id=f"call_{len(calls) + 1}", name=name, arguments=dict(arguments)))
    return tuple(calls)


@attrs.frozen(kw_only=True)
class ScriptedTurn:
    """
    One scripted reply of the agent's main model: text, tool calls, usage, or a recorded error.

    Attributes:
        text: The reply text (a text block when non-empty). Default ``""``.
        tool_calls: Tool calls, as :class:`~sessionkeeper.transcript.ToolCall` blocks or ``(name,
            arguments)`` pairs (ids ``call_1``, ``call_2``... in order). Default none.
        thinking: A thinking block's text, first in the content, when given.
        usage: The provider's usage (tokens) for the reply; default all zeros.
        stop_reason: Default ``"toolUse"`` with tool calls, ``"error"`` with ``error_message``, else
            ``"stop"``.
        error_message: A provider error recorded as the reply (pi stores failed calls as assistant
            messages with ``stopReason: "error"``); pass the message to
            :meth:`~sessionkeeper.runtime.SessionRuntime.on_model_error`. Use
            :func:`context_overflow_error`'s text for an overflow.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_tool_calls)
    thinking: str | None = None
    usage: Usage | None = None
    stop_reason: str | None = None
    error_message: str | None = None

    def resolved_stop_reason(self) -> str:
        """The stop reason: the given one, else ``error`` / ``toolUse`` / ``stop`` as described above."""
        if self.stop_reason is not None:
            return self.stop_reason
        if self.error_message is not None:
            return "error"
        return "toolUse" if self.tool_calls else "stop"

    def to_message(self, *, provider: str, model: str, api: str, timestamp: int = 0) -> AssistantMessage:
        """
        The :class:`~sessionkeeper.transcript.AssistantMessage` of this turn (``timestamp`` 0 lets
        :meth:`SessionRuntime.after_turn <sessionkeeper.runtime.SessionRuntime.after_turn>` date it).
        """
        content: list[AssistantContent] = []
        if self.thinking is not None:
            content.append(ThinkingContent(thinking=self.thinking))
        if self.text:
            content.append(TextContent(text=self.text))
        content.extend(self.tool_calls)
        return AssistantMessage(
            content=content,
            api=api,
            provider=provider,
            model=model,
            usage=self.usage if self.usage is not None else Usage(),
            stop_reason=self.resolved_stop_reason(),
            timestamp=timestamp,
            error_message=self.error_message if self.error_message is not None else UNSET,
        )

    def to_response(self, model: str | None) -> ModelResponse:
        """The :class:`ModelResponse` of this turn for :meth:`ScriptedModelClient.complete` (text only)."""
        return ModelResponse(
            text=self.text, usage=self.usage, stop_reason=self.resolved_stop_reason(), model=model
        )


ScriptedReply: TypeAlias = ModelResponse | ScriptedTurn | AssistantMessage | str | BaseException
"""
One scripted step: a response, a :class:`ScriptedTurn` (tool calls, usage, a recorded error), an
:class:`~sessionkeeper.transcript.AssistantMessage`, a text (``ModelResponse(text=...)``), or an
exception to raise (e.g. :func:`context_overflow_error`).
"""

ModelHandler: TypeAlias = Callable[[ModelRequest], "ScriptedReply | Awaitable[ScriptedReply]"]
"""A handler computing the reply from the request; sync or async; may raise."""


class ScriptedModelClient:
    """
    A :class:`~sessionkeeper.ModelClient` that replays a script or calls a handler, and records requests;
    it also fakes the agent's **main** model (:meth:`next_turn`: tool calls, usage, errors).

    Give either ``responses`` (consumed in order, see :data:`ScriptedReply`: a :class:`ModelResponse`, a
    :class:`ScriptedTurn`, an :class:`~sessionkeeper.transcript.AssistantMessage`, a ``str`` meaning
    ``ModelResponse(text=...)``, or an exception instance, which is raised) or ``handler`` (a sync or
    async callable ``(request) -> ScriptedReply``; it may raise). :meth:`complete` (the summariser and
    flush seam) and :meth:`next_turn` (the agent loop) consume the same script.

    A request whose ``abort`` event is already set gets ``ModelResponse(text="", stop_reason="aborted")``
    without consuming a scripted step, as a streaming client stops at once.

    Args:
        responses: The script.
        handler: The handler, instead of a script.
        delay: Seconds to wait before answering (through ``clock.sleep`` when a clock is given, else
            :func:`anyio.sleep`); lets tests exercise timeouts and cancellation. Default 0.
        clock: A clock (e.g. :class:`FakeClock`) for the delay.
        provider: ``provider`` of the assistant messages :meth:`next_turn` builds. Default ``"anthropic"``.
        model: Their ``model`` (also the :class:`ModelResponse` model when the request names none).
            Default ``"claude-sonnet-4-5"``.
        api: Their ``api``. Default ``"anthropic-messages"``.

    Attributes:
        requests: Every request received, in order (also the aborted ones; :meth:`next_turn`'s too).

    Raises:
        ValueError: Both or neither of ``responses`` and ``handler`` were given.

    .. versionadded:: 0.1
    """

    def __init__(
        self,
        responses: Iterable[ScriptedReply] | None = None,
        *,
        handler: ModelHandler | None = None,
        delay: float = 0.0,
        clock: Clock | None = None,
        provider: str = "anthropic",
        model: str = "claude-sonnet-4-5",
        api: str = "anthropic-messages",
    ) -> None:
        if (responses is None) == (handler is None):
            raise ValueError("give exactly one of responses and handler")
        self._script: deque[ScriptedReply] = deque(responses or ())
        self._handler = handler
        self._delay = delay
        self._clock = clock
        self.provider = provider
        self.model = model
        self.api = api
        self.requests: list[ModelRequest] = []

    @property
    def remaining(self) -> int:
        """Scripted steps not consumed yet (0 with a handler)."""
        return len(self._script)

    async def _next(
        self, request: ModelRequest
    ) -> ModelResponse | ScriptedTurn | AssistantMessage | str | None:
        """Record ``request`` and return the next step (``None``: the request was aborted)."""
        self.requests.append(request)
        if self._delay > 0:
            await (self._clock.sleep(self._delay) if self._clock is not None else anyio.sleep(self._delay))
        if request.aborted:
            return None
        if self._handler is not None:
            produced = self._handler(request)
            reply: ScriptedReply = await produced if inspect.isawaitable(produced) else produced
        else:
            if not self._script:
                raise AssertionError(
                    f"ScriptedModelClient: no scripted response left for request #{len(self.requests)}"
                )
            reply = self._script.popleft()
        if isinstance(reply, BaseException):
            raise reply
        if not isinstance(reply, ModelResponse | ScriptedTurn | AssistantMessage | str):
            raise TypeError(
                "scripted reply must be a ModelResponse, ScriptedTurn, AssistantMessage, str or exception, "
                f"got {reply!r}"
            )
        return reply

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """
        Answer ``request`` from the script or the handler.

        A :class:`ScriptedTurn` or an assistant message answers with its text, usage and stop reason
        (tool calls are not part of a :class:`ModelResponse`).

        Raises:
            AssertionError: The script is exhausted (the test made more calls than it scripted).
            BaseException: A scripted exception, or whatever the handler raised.
        """
        reply = await self._next(request)
        if reply is None:
            return ModelResponse(text="", stop_reason="aborted", model=request.model)
        if isinstance(reply, str):
            return ModelResponse(text=reply, model=request.model)
        if isinstance(reply, ScriptedTurn):
            return reply.to_response(request.model)
        if isinstance(reply, AssistantMessage):
            text = "".join(b.text for b in reply.content if isinstance(b, TextContent))
            return ModelResponse(
                text=text, usage=reply.usage, stop_reason=reply.stop_reason, model=reply.model
            )
        return reply

    async def next_turn(
        self,
        messages: Sequence[AgentMessage] = (),
        *,
        system_prompt: str = "",
        max_tokens: int = 32_000,
    ) -> AssistantMessage:
        """
        Fake one call of the agent's main model: return the next scripted reply as an assistant message.

        Use it where the agent loop calls its model (``reply = await client.next_turn(plan.messages)``),
        then hand the reply and your tool results to
        :meth:`~sessionkeeper.runtime.SessionRuntime.after_turn`. The call is recorded in
        :attr:`requests` as a :class:`ModelRequest` (``metadata={"purpose": "agent"}``), which a handler
        receives too.

        Args:
            messages: What the loop sends (``plan.messages``).
            system_prompt: The loop's system prompt, recorded. Default ``""``.
            max_tokens: Recorded output cap, in tokens. Default 32 000.

        Returns:
            The reply (``timestamp`` 0, so the runtime dates it): a ``str`` or a :class:`ModelResponse` as
            a text reply with its usage and stop reason, a :class:`ScriptedTurn` with its tool calls and
            error, an :class:`AssistantMessage` as scripted. An aborted request gives an empty reply with
            ``stop_reason="aborted"``.

        Raises:
            AssertionError: The script is exhausted.
            BaseException: A scripted exception (e.g. :func:`context_overflow_error`), or the handler's.
        """
        request = ModelRequest(
            system_prompt=system_prompt,
            messages=messages,
            max_tokens=max_tokens,
            model=self.model,
            metadata={"purpose": "agent"},
        )
        reply = await self._next(request)
        if reply is None:
            reply = ScriptedTurn(stop_reason="aborted")
        elif isinstance(reply, str):
            reply = ScriptedTurn(text=reply)
        elif isinstance(reply, ModelResponse):
            reply = ScriptedTurn(text=reply.text, usage=reply.usage, stop_reason=reply.stop_reason)
        if isinstance(reply, AssistantMessage):
            return reply
        return reply.to_message(provider=self.provider, model=self.model, api=self.api)

    def __repr__(self) -> str:
        return f"ScriptedModelClient(requests={len(self.requests)}, remaining={self.remaining})"
