"""
Shared pieces of the message converters: message preparation, tool-call id mapping, usage and dict access.

Pure functions over the transcript records; no vendor SDK is imported here.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Protocol, TypeAlias

from sessionkeeper.records import (
    AgentMessage,
    AssistantContent,
    AssistantMessage,
    ImageContent,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from sessionkeeper.transcript import (
    convert_to_llm,
)


__all__ = (
    "OPENAI_EFFORT",
    "MessageSource",
    "ToolCallIdMap",
    "ToolImages",
    "as_dict",
    "finish_body",
    "openai_messages",
    "prepare_messages",
    "source_messages",
    "wire_tool_call",
)

JsonDict: TypeAlias = dict[str, Any]

NO_RESULT_TEXT = "No result provided"
"""Text of the synthetic result pi-ai gives an orphaned tool call (pi spec §10)."""

TOOL_IMAGES_TEXT = "Attached image(s) from tool result:"
"""Lead text of the user message that carries a tool result's images on OpenAI wires (pi-ai's wording)."""

OPENAI_EFFORT: Final[Mapping[str, str]] = {
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",
}
"""OpenAI's reasoning effort per pi thinking level, on both OpenAI wires (``xhigh`` is sent as ``high``)."""


class ToolImages:
    """
    The images of consecutive tool results on the OpenAI wires (pi-ai's rule): a tool result carries its
    text only; its images follow the run of results as one user message led by :data:`TOOL_IMAGES_TEXT`.

    Args:
        out: The message/item list being built; :meth:`flush` appends to it.
        text_type: The wire's text-part type (``"text"`` for Chat Completions, ``"input_text"`` for
            Responses).
        image_part: The wire's image part for one :class:`ImageContent`.
    """

    def __init__(
        self, out: list[JsonDict], *, text_type: str, image_part: Callable[[ImageContent], JsonDict]
    ) -> None:
        self._out = out
        self._text_type = text_type
        self._image_part = image_part
        self._pending: list[ImageContent] = []

    def take(self, result: ToolResultMessage) -> str:
        """Hold ``result``'s images; its wire text (its text blocks joined, or a pointer to the images)."""
        text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
        self._pending.extend(b for b in result.content if isinstance(b, ImageContent))
        return text or ("(see attached image)" if self._pending else "")

    def flush(self) -> None:
        """Append the held images as one user message (nothing when none are held)."""
        if self._pending:
            parts: list[JsonDict] = [{"type": self._text_type, "text": TOOL_IMAGES_TEXT}]
            parts.extend(self._image_part(b) for b in self._pending)
            self._out.append({"role": "user", "content": parts})
            self._pending.clear()


def openai_messages(
    source: MessageSource,
    out: list[JsonDict],
    *,
    text_type: str,
    image_part: Callable[[ImageContent], JsonDict],
    tool_result: Callable[[ToolResultMessage, str], JsonDict],
    assistant: Callable[[AssistantMessage], Iterable[JsonDict]],
) -> None:
    """
    Append the messages of ``source`` (after :func:`prepare_messages`) to ``out`` as both OpenAI wires lay
    them out (pi-ai's rule).

    A user message is ``{"role": "user", "content"}``: a string stays a string, text blocks become
    ``{"type": text_type, "text"}`` parts and images ``image_part(block)``; a tool result is
    ``tool_result(result, text)`` with its text only (:class:`ToolImages`: its images follow the run of
    results as one user message); an assistant reply is the messages or items ``assistant`` returns.
    """
    images = ToolImages(out, text_type=text_type, image_part=image_part)
    for message in prepare_messages(source):
        if isinstance(message, ToolResultMessage):
            out.append(tool_result(message, images.take(message)))
            continue
        images.flush()
        if isinstance(message, UserMessage):
            content: str | list[JsonDict] = (
                message.content
                if isinstance(message.content, str)
                else [
                    {"type": text_type, "text": b.text} if isinstance(b, TextContent) else image_part(b)
                    for b in message.content
                ]
            )
            out.append({"role": "user", "content": content})
        elif isinstance(message, AssistantMessage):
            out.extend(assistant(message))
    images.flush()


def finish_body(
    body: JsonDict,
    *,
    tools: Sequence[Mapping[str, Any]],
    stream_fields: Mapping[str, Any] | None,
    extra: Mapping[str, Any] | None,
) -> JsonDict:
    """
    ``body`` with the fields every wire ends its request body with, in this order: ``tools`` (copied)
    when there are any, ``stream_fields`` (``{"stream": True}``, ...) when streaming, then ``extra``
    merged last (it may replace any field).
    """
    if tools:
        body["tools"] = [dict(t) for t in tools]
    if stream_fields:
        body.update(stream_fields)
    if extra:
        body.update(extra)
    return body


def wire_tool_call(call_id: object, name: object, arguments: object) -> ToolCall:
    """A reply's tool call: ``call_id`` and ``name`` as strings (``""`` when absent), arguments decoded."""
    return ToolCall(id=str(call_id or ""), name=str(name or ""), arguments=parse_arguments(arguments))


class _HasMessages(Protocol):
    """Anything with ``.messages`` (a ``ModelCallPlan``, a ``SessionContext``)."""

    @property
    def messages(self) -> Sequence[AgentMessage]:
        """The messages, oldest first."""
        ...


MessageSource: TypeAlias = _HasMessages | Iterable[AgentMessage]
"""A ``ModelCallPlan``, a ``SessionContext`` (anything with ``.messages``) or the messages themselves."""


def source_messages(source: MessageSource) -> list[AgentMessage]:
    """The messages of a plan, a context, or an iterable of messages."""
    messages = getattr(source, "messages", None)
    if messages is not None:
        return list(messages)
    return list(source)  # type: ignore[arg-type]


def prepare_messages(source: MessageSource) -> list[AgentMessage]:
    """
    The provider-neutral steps pi-ai applies before any wire format (pi spec §10).

    ``convert_to_llm`` (coding-agent roles become user messages), then: assistant replies with
    ``stopReason`` ``error`` or ``aborted`` are dropped together with the tool results that answer their
    calls; an orphaned tool call (no result before the next user/assistant message or the end) gets pi's
    synthetic ``"No result provided"`` error result. Only user, assistant and toolResult remain.
    """
    out: list[AgentMessage] = []
    dropped_calls: set[str] = set()
    pending: list[ToolCall] = []

    def flush_pending(timestamp: float) -> None:
        out.extend(
            ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=[TextContent(text=NO_RESULT_TEXT)],
                is_error=True,
                timestamp=timestamp,
            )
            for call in pending
        )
        pending.clear()

    for message in convert_to_llm(source_messages(source)):
        if isinstance(message, AssistantMessage):
            flush_pending(message.timestamp)
            if message.stop_reason in ("error", "aborted"):
                dropped_calls.update(b.id for b in message.content if isinstance(b, ToolCall))
                continue
            out.append(message)
            pending.extend(b for b in message.content if isinstance(b, ToolCall))
        elif isinstance(message, ToolResultMessage):
            if message.tool_call_id in dropped_calls:
                continue
            pending[:] = [c for c in pending if c.id != message.tool_call_id]
            out.append(message)
        elif isinstance(message, UserMessage):
            flush_pending(message.timestamp)
            out.append(message)
    last = out[-1] if out else None
    flush_pending(
        last.timestamp if isinstance(last, UserMessage | AssistantMessage | ToolResultMessage) else 0
    )
    return out


class ToolCallIdMap:
    """
    Map transcript tool-call ids to ids the target provider accepts, one-to-one within a request.

    A valid id is kept; an invalid one has every character outside ``allowed`` replaced by ``_`` and is
    cut to ``max_length``; a clash with an id already given out gets a sha256 suffix. A tool result looks
    up the id its call received, so calls and results stay paired (the hygiene rule of OpenClaw's
    ``sanitizeToolCallIds``, with the provider's own character set and length instead of ``strict``).

    Args:
        allowed: Regex character class body of the allowed characters (e.g. ``"a-zA-Z0-9_-"``).
        max_length: Longest id the provider accepts.
    """

    def __init__(self, *, allowed: str = "a-zA-Z0-9_-", max_length: int = 64) -> None:
        self._bad = re.compile(f"[^{allowed}]")
        self._valid = re.compile(f"^[{allowed}]{{1,{max_length}}}$")
        self._max = max_length
        self._map: dict[str, str] = {}
        self._used: set[str] = set()

    def is_valid(self, value: str) -> bool:
        """Whether ``value`` is an id the provider accepts as it is."""
        return bool(self._valid.match(value))

    def __call__(self, original: str, *, part: str | None = None) -> str:
        """
        The id to send for ``original`` (the same answer on every call for one original).

        Args:
            original: The transcript's tool-call id (a call's ``id``, a result's ``toolCallId``); the map
                is one-to-one on it.
            part: The part of ``original`` the sent id is made from (default: all of it), such as the
                call id of a Responses ``call_id|item_id`` id. Two originals with the same part (``"9"``
                and ``"9|"``) still get two ids.
        """
        known = self._map.get(original)
        if known is not None:
            return known
        base = self._bad.sub("_", original if part is None else part)[: self._max] or "call"
        candidate = base
        counter = 0
        while candidate in self._used:
            counter += 1
            digest = hashlib.sha256(f"{original}:{counter}".encode()).hexdigest()[:10]
            candidate = f"{base[: self._max - len(digest) - 1]}_{digest}"
        self._map[original] = candidate
        self._used.add(candidate)
        return candidate


def as_dict(value: object) -> JsonDict:
    """
    A provider object as a plain JSON dict: mappings are copied, SDK (pydantic) models dumped with only the
    fields the server sent (``exclude_unset``), so the converters see the wire shape.

    Raises:
        TypeError: ``value`` is neither a mapping nor an SDK model.
    """
    if isinstance(value, Mapping):
        return dict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        # warnings off: an SDK older than an item type constructs the wrong model class around the right
        # values, and pydantic would warn while dumping them unchanged
        dumped = dump(mode="json", exclude_unset=True, by_alias=True, warnings=False)
        if isinstance(dumped, dict):
            return dumped
    raise TypeError(f"expected a mapping or an SDK model, got {type(value).__name__}")


def str_or_none(value: object) -> str | None:
    """``value`` when it is a string, else ``None`` (for optional fields of an error body)."""
    return value if isinstance(value, str) else None


def get_int(mapping: object, *keys: str) -> int:
    """The int at ``mapping[k1][k2]...``, 0 when absent or not a number."""
    value: object = mapping
    for key in keys:
        if not isinstance(value, Mapping):
            return 0
        value = value.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return int(value)


def parse_arguments(raw: object) -> dict[str, Any]:
    """
    Tool-call arguments from a JSON string (or an object already decoded).

    An empty string is ``{}``; a string that is not a JSON object (a cut-off stream) is kept whole under
    ``{"_raw": raw}`` so nothing is lost.
    """
    if isinstance(raw, Mapping):
        return dict(raw)
    if not isinstance(raw, str) or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_raw": raw}


def dump_arguments(arguments: Mapping[str, Any]) -> str:
    """Tool-call arguments as the JSON string the OpenAI wires carry (compact, key order kept)."""
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))


def stop_reason_for(content: Sequence[AssistantContent], stop_reason: str) -> str:
    """``"toolUse"`` when a ``"stop"`` reply carries tool calls (what pi-ai reports), else ``stop_reason``."""
    if stop_reason == "stop" and any(isinstance(b, ToolCall) for b in content):
        return "toolUse"
    return stop_reason


def text_of(content: Iterable[object]) -> str:
    """The concatenated text blocks of an assistant reply (thinking and tool calls excluded)."""
    return "".join(b.text for b in content if isinstance(b, TextContent))


def finish_reply(
    raw: JsonDict,
    *,
    content: list[AssistantContent],
    api: str,
    provider: str,
    model: str | None,
    usage: Usage,
    stop_reason: str,
    error_message: str | None,
    aborted: bool,
    timestamp: float | None,
) -> AssistantMessage:
    """
    The ``AssistantMessage`` every converter's ``from_*`` ends with (one rule for the three APIs).

    ``stop_reason`` ``"aborted"`` or ``aborted=True`` gives ``aborted`` with pi's ``"Request was aborted"``;
    ``model`` is the requested model (else the reply's), ``response_model`` is set only when the reply names
    another; ``response_id`` is the reply's ``id``; ``timestamp`` is ms since the epoch (now when ``None``).
    """
    fields: dict[str, Any] = {}
    if error_message is not None:
        fields["error_message"] = error_message
    if aborted or stop_reason == "aborted":
        stop_reason = "aborted"
        fields["error_message"] = "Request was aborted"
    response_model = raw.get("model") if isinstance(raw.get("model"), str) else None
    requested = model or response_model or ""
    if isinstance(raw.get("id"), str):
        fields["response_id"] = raw["id"]
    if response_model and response_model != requested:
        fields["response_model"] = response_model
    return AssistantMessage(
        content=content,
        api=api,
        provider=provider,
        model=requested,
        usage=usage,
        stop_reason=stop_reason,
        timestamp=timestamp if timestamp is not None else int(time.time() * 1000),
        **fields,
    )
