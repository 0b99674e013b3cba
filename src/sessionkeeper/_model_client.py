"""
The model seam (DESIGN "LLM independence", STYLE item 2): the one thing a host gives to get LLM summaries.

sessionkeeper never imports a vendor SDK. When it needs a model (the built-in compaction summariser,
branch summaries, the memory-flush turn), it builds one :class:`ModelRequest` and awaits
:meth:`ModelClient.complete`; the host's implementation talks to its provider and returns a
:class:`ModelResponse`. New request fields are added with defaults, so implementations never break.

Cancellation has two paths, and both must be honoured by an implementation:

- the caller cancels the task (anyio cancel scope, ``asyncio`` task cancellation, trio ``Cancelled``):
  the ``await`` is interrupted as any other; a client must let the cancellation propagate;
- ``request.abort`` (an :class:`anyio.Event`, pi's ``AbortSignal``) is set: a client that streams should
  stop at the next chunk and return what it has with ``stop_reason="aborted"`` (pi stores aborted replies
  the same way, pi spec §6.3); a client that cannot watch it may ignore it. sessionkeeper treats an
  ``"aborted"`` reply like a cancellation: it never falls back to another summariser (DESIGN D3).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Protocol, runtime_checkable

import anyio
import attrs

from sessionkeeper.records import AgentMessage, StopReason, Usage


__all__ = ("ModelClient", "ModelRequest", "ModelResponse")


def _frozen_metadata(value: Mapping[str, str]) -> Mapping[str, str]:
    """Copy the metadata into a read-only mapping, so a request cannot change after it is built."""
    return MappingProxyType(dict(value))


def _to_messages(messages: Iterable[AgentMessage]) -> tuple[AgentMessage, ...]:
    return tuple(messages)


def _check_max_tokens(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"max_tokens must be a positive int, got {value!r}")


@attrs.frozen(kw_only=True)
class ModelRequest:
    """
    One completion request, as sessionkeeper sends it to the host's :class:`ModelClient`.

    Attributes:
        system_prompt: The system prompt (the summarisation prompt for compaction, pi spec §13.4).
        messages: The conversation, as transcript message records (pi spec §6): ``UserMessage``,
            ``AssistantMessage``, ``ToolResultMessage``, and the coding-agent roles
            (``bashExecution``, ``custom``, ``branchSummary``, ``compactionSummary``) which a client
            converts to user messages the way pi's ``convertToLlm`` does (pi spec §10). Usually a single
            ``UserMessage`` holding the serialised conversation to summarise.
        max_tokens: Upper bound on output tokens for the reply (pi: ``0.8 * reserveTokens`` for a
            compaction summary).
        model: Model id to use (``"provider/model"`` or a bare id); ``None`` lets the client choose its
            default.
        thinking_level: ``"off" | "minimal" | "low" | "medium" | "high" | "xhigh"``, or ``None`` to use the
            client's default (pi spec §5.2 values).
        abort: Set by the caller to ask the client to stop (pi's ``AbortSignal``). ``None`` means no abort
            signal; task cancellation still applies. Create it inside a running event loop.
        metadata: Free-form string labels for the host (e.g. ``{"purpose": "compaction"}``,
            ``{"sessionKey": ...}``); copied into a read-only mapping. Default: empty.

    .. versionadded:: 0.1
    """

    system_prompt: str
    messages: tuple[AgentMessage, ...] = attrs.field(converter=_to_messages)
    max_tokens: int = attrs.field(validator=lambda _i, _a, v: _check_max_tokens(v))
    model: str | None = None
    thinking_level: str | None = None
    abort: anyio.Event | None = attrs.field(default=None, eq=False)
    metadata: Mapping[str, str] = attrs.field(
        factory=lambda: MappingProxyType({}), converter=_frozen_metadata, eq=False
    )

    @property
    def aborted(self) -> bool:
        """Whether :attr:`abort` has been set."""
        return self.abort is not None and self.abort.is_set()


@attrs.frozen(kw_only=True)
class ModelResponse:
    """
    The reply of a :class:`ModelClient`.

    Attributes:
        text: The reply text (the concatenated text blocks; thinking excluded). May be empty: callers
            decide what an empty reply means (compaction treats it as a failed summary, DESIGN D3).
        usage: Token usage reported by the provider, or ``None`` when unknown.
        stop_reason: ``"stop" | "length" | "toolUse" | "error" | "aborted"`` (pi's values), or another
            provider string. Default ``"stop"``.
        model: The model that actually answered, when known.

    .. versionadded:: 0.1
    """

    text: str
    usage: Usage | None = None
    stop_reason: StopReason | str = "stop"
    model: str | None = None


@runtime_checkable
class ModelClient(Protocol):
    """
    **Protocol:** the host's LLM, as sessionkeeper calls it (DESIGN "Public API").

    Implement one async method. Raise whatever your SDK raises on failure: sessionkeeper wraps it in
    :class:`~sessionkeeper.exceptions.ModelClientError` where it calls the client (the compaction
    summariser chain then falls back, DESIGN D3), and lets cancellation propagate unchanged.

    .. versionadded:: 0.1
    """

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """
        Run one completion.

        Args:
            request: The request; see :class:`ModelRequest`.

        Returns:
            The reply.
        """
        ...
