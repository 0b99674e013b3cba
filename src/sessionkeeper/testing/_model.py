"""A scripted :class:`~sessionkeeper.ModelClient` for tests."""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeAlias

import anyio

from sessionkeeper._clock import Clock
from sessionkeeper._model_client import ModelRequest, ModelResponse


__all__ = ("ModelHandler", "ScriptedModelClient", "ScriptedReply")

ScriptedReply: TypeAlias = ModelResponse | str | BaseException
"""One scripted step: a response, a text (``ModelResponse(text=...)``), or an exception to raise."""

ModelHandler: TypeAlias = Callable[[ModelRequest], "ModelResponse | str | Awaitable[ModelResponse | str]"]
"""A handler computing the reply from the request; sync or async; may raise."""


class ScriptedModelClient:
    """
    A :class:`~sessionkeeper.ModelClient` that replays a script or calls a handler, and records requests.

    Give either ``responses`` (consumed in order: a :class:`ModelResponse`, a ``str`` meaning
    ``ModelResponse(text=...)``, or an exception instance, which is raised) or ``handler`` (a sync or
    async callable ``(request) -> ModelResponse | str``).

    A request whose ``abort`` event is already set gets ``ModelResponse(text="", stop_reason="aborted")``
    without consuming a scripted step, as a streaming client stops at once.

    Args:
        responses: The script.
        handler: The handler, instead of a script.
        delay: Seconds to wait before answering (through ``clock.sleep`` when a clock is given, else
            :func:`anyio.sleep`); lets tests exercise timeouts and cancellation. Default 0.
        clock: A clock (e.g. :class:`FakeClock`) for the delay.

    Attributes:
        requests: Every request received, in order (also the aborted ones).

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
    ) -> None:
        if (responses is None) == (handler is None):
            raise ValueError("give exactly one of responses and handler")
        self._script: deque[ScriptedReply] = deque(responses or ())
        self._handler = handler
        self._delay = delay
        self._clock = clock
        self.requests: list[ModelRequest] = []

    @property
    def remaining(self) -> int:
        """Scripted steps not consumed yet (0 with a handler)."""
        return len(self._script)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """
        Answer ``request`` from the script or the handler.

        Raises:
            AssertionError: The script is exhausted (the test made more calls than it scripted).
            BaseException: A scripted exception, or whatever the handler raised.
        """
        self.requests.append(request)
        if self._delay > 0:
            await (self._clock.sleep(self._delay) if self._clock is not None else anyio.sleep(self._delay))
        if request.aborted:
            return ModelResponse(text="", stop_reason="aborted", model=request.model)
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
        if isinstance(reply, str):
            return ModelResponse(text=reply, model=request.model)
        if not isinstance(reply, ModelResponse):
            raise TypeError(f"scripted reply must be a ModelResponse, str or exception, got {reply!r}")
        return reply

    def __repr__(self) -> str:
        return f"ScriptedModelClient(requests={len(self.requests)}, remaining={self.remaining})"
