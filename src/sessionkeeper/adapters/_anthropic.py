"""
Anthropic Messages API: transcript messages <-> request bodies, replies and stream events.

Wire facts (Anthropic Messages API): ``tool_use`` ids match ``^[a-zA-Z0-9_-]+$`` (at most 64 characters
here, what pi-ai enforces); the results of one assistant turn's calls go in one user message of
``tool_result`` blocks; ``thinking`` blocks carry a ``signature`` and ``redacted_thinking`` an opaque
``data`` which must be sent back unchanged, and only to the API that produced them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from sessionkeeper.adapters._common import (
    JsonDict,
    MessageSource,
    ToolCallIdMap,
    as_dict,
    finish_body,
    finish_reply,
    get_int,
    parse_arguments,
    prepare_messages,
    wire_tool_call,
)
from sessionkeeper.records import (
    AssistantContent,
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
    Usage,
    UserMessage,
)


__all__ = (
    "ANTHROPIC_API",
    "THINKING_BUDGETS",
    "AnthropicStream",
    "from_anthropic_message",
    "to_anthropic_request",
)

ANTHROPIC_API: Final = "anthropic-messages"
"""The ``api`` value of replies converted here (pi's name for this wire)."""

THINKING_BUDGETS: Final[Mapping[str, int]] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
    "xhigh": 32768,
}
"""``budget_tokens`` per thinking level (pi-ai's defaults); Anthropic's minimum budget is 1024."""

_STOP_REASONS: Final[Mapping[str, str]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "tool_use": "toolUse",
    "refusal": "error",
    "model_context_window_exceeded": "error",
}


def _image(block: ImageContent) -> JsonDict:
    return {"type": "image", "source": {"type": "base64", "media_type": block.mime_type, "data": block.data}}


def _user_content(content: str | Sequence[TextContent | ImageContent]) -> str | list[JsonDict]:
    if isinstance(content, str):
        return content
    out: list[JsonDict] = []
    for block in content:
        if isinstance(block, TextContent):
            out.append({"type": "text", "text": block.text})
        else:
            out.append(_image(block))
    return out


def _assistant_blocks(message: AssistantMessage, ids: ToolCallIdMap) -> list[JsonDict]:
    native = message.api == ANTHROPIC_API
    out: list[JsonDict] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text:
                out.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingContent):
            signature = block.thinking_signature if isinstance(block.thinking_signature, str) else ""
            if native and block.redacted is True and signature:
                out.append({"type": "redacted_thinking", "data": signature})
            elif native and signature:
                out.append({"type": "thinking", "thinking": block.thinking, "signature": signature})
            elif block.thinking.strip() and block.redacted is not True:
                out.append({"type": "text", "text": block.thinking})  # pi: unsigned thinking replays as text
        else:
            out.append(
                {"type": "tool_use", "id": ids(block.id), "name": block.name, "input": block.arguments}
            )
    return out


def _tool_result(message: ToolResultMessage, ids: ToolCallIdMap) -> JsonDict:
    content: list[JsonDict] = []
    for block in message.content:
        if isinstance(block, TextContent):
            content.append({"type": "text", "text": block.text})
        else:
            content.append(_image(block))
    result: JsonDict = {"type": "tool_result", "tool_use_id": ids(message.tool_call_id), "content": content}
    if message.is_error:
        result["is_error"] = True
    return result


def to_anthropic_request(
    source: MessageSource,
    *,
    model: str,
    max_tokens: int,
    system_prompt: str | None = None,
    thinking_level: str | None = None,
    tools: Sequence[Mapping[str, Any]] = (),
    stream: bool = False,
    extra: Mapping[str, Any] | None = None,
) -> JsonDict:
    """
    Build a Messages API request body (``client.messages.create(**body)``) from a plan or a context.

    The messages go through :func:`~sessionkeeper.adapters.prepare_messages` (pi's ``convertToLlm`` and
    its provider-neutral normalisation), then: user text/image blocks become ``text`` / base64 ``image``
    blocks; assistant text, ``thinking`` (with its ``signature``), ``redacted_thinking`` (``data`` =
    ``thinkingSignature``) and ``tool_use`` blocks; consecutive tool results one user message of
    ``tool_result`` blocks (``is_error`` when the tool failed); a user message right after another user
    message joins it, so roles alternate. Thinking from another API, or without a
    signature, is replayed as text (pi-ai); empty text blocks and empty assistant turns are left out.
    Tool-call ids outside ``[a-zA-Z0-9_-]{1,64}`` are rewritten, calls and results alike. Deviations
    ADAPT-THINK (thinking replayed by API, not by model) and ADAPT-ALT (user turns joined), see
    ``docs/decisions.md``.

    Args:
        source: A ``ModelCallPlan``, a ``SessionContext`` or the messages.
        model: The model id.
        max_tokens: Output token limit (required by the API).
        system_prompt: Sent as ``system`` when given.
        thinking_level: ``"off"``/``None`` sends no ``thinking``; other pi levels send
            ``{"type": "enabled", "budget_tokens": THINKING_BUDGETS[level]}``, the budget kept below
            ``max_tokens`` (no thinking when that leaves less than 1024).
        tools: Tool definitions in Anthropic's shape, sent as ``tools`` when non-empty.
        stream: Adds ``"stream": true``.
        extra: Further top-level fields, merged last.

    Returns:
        The body as plain JSON values.
    """
    ids = ToolCallIdMap(allowed="a-zA-Z0-9_-", max_length=64)
    messages: list[JsonDict] = []
    for message in prepare_messages(source):
        if isinstance(message, UserMessage):
            content = _user_content(message.content)
            if messages and messages[-1]["role"] == "user":  # keep user/assistant alternation
                last_content = messages[-1]["content"]
                if isinstance(last_content, str):
                    last_content = [{"type": "text", "text": last_content}]
                extra_blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
                messages[-1]["content"] = [*last_content, *extra_blocks]
            else:
                messages.append({"role": "user", "content": content})
        elif isinstance(message, AssistantMessage):
            blocks = _assistant_blocks(message, ids)
            if blocks:
                messages.append({"role": "assistant", "content": blocks})
        elif isinstance(message, ToolResultMessage):
            result = _tool_result(message, ids)
            last = messages[-1] if messages else None
            if (
                last is not None
                and last["role"] == "user"
                and isinstance(last["content"], list)
                and last["content"]
                and all(b.get("type") == "tool_result" for b in last["content"])
            ):
                last["content"].append(result)
            else:
                messages.append({"role": "user", "content": [result]})
    body: JsonDict = {"model": model, "max_tokens": max_tokens, "messages": messages}
    if system_prompt:
        body["system"] = system_prompt
    if thinking_level and thinking_level != "off" and thinking_level in THINKING_BUDGETS:
        budget = min(THINKING_BUDGETS[thinking_level], max_tokens - 1)
        if budget >= 1024:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    return finish_body(body, tools=tools, stream_fields={"stream": True} if stream else None, extra=extra)


def anthropic_usage(raw: object) -> Usage:
    """pi's usage from Anthropic's: ``input`` excludes cache reads/writes; total = the sum of all four."""
    input_tokens = get_int(raw, "input_tokens")
    output = get_int(raw, "output_tokens")
    cache_read = get_int(raw, "cache_read_input_tokens")
    cache_write = get_int(raw, "cache_creation_input_tokens")
    return Usage(
        input=input_tokens,
        output=output,
        cache_read=cache_read,
        cache_write=cache_write,
        total_tokens=input_tokens + output + cache_read + cache_write,
    )


def _content_from(blocks: Sequence[object]) -> list[AssistantContent]:
    content: list[AssistantContent] = []
    for raw in blocks:
        if not isinstance(raw, Mapping):
            continue
        kind = raw.get("type")
        if kind == "text":
            content.append(TextContent(text=str(raw.get("text") or "")))
        elif kind == "thinking":
            signature = raw.get("signature")
            content.append(
                ThinkingContent(thinking=str(raw.get("thinking") or ""), thinking_signature=signature)
                if isinstance(signature, str) and signature
                else ThinkingContent(thinking=str(raw.get("thinking") or ""))
            )
        elif kind == "redacted_thinking":
            content.append(
                ThinkingContent(thinking="", thinking_signature=str(raw.get("data") or ""), redacted=True)
            )
        elif kind in ("tool_use", "server_tool_use"):
            content.append(wire_tool_call(raw.get("id"), raw.get("name"), raw.get("input")))
    return content


def from_anthropic_message(
    response: object,
    *,
    provider: str = "anthropic",
    model: str | None = None,
    timestamp: float | None = None,
    aborted: bool = False,
) -> AssistantMessage:
    """
    Turn a Messages API reply (the JSON object or the SDK's ``Message``) into an ``AssistantMessage``.

    Blocks: ``text`` -> text, ``thinking`` -> thinking with ``thinkingSignature`` = ``signature``,
    ``redacted_thinking`` -> thinking ``""`` with ``redacted: true`` and the ``data`` as signature,
    ``tool_use`` -> tool call. Stop reasons: ``end_turn`` / ``stop_sequence`` / ``pause_turn`` -> ``stop``,
    ``max_tokens`` -> ``length``, ``tool_use`` -> ``toolUse``, ``refusal`` and
    ``model_context_window_exceeded`` -> ``error`` with that reason as ``errorMessage`` (the latter is
    recognised by ``is_context_overflow``). Usage: see :func:`anthropic_usage`.

    Args:
        response: The reply.
        provider: The ``provider`` to record.
        model: The requested model id; default: the reply's ``model``.
        timestamp: Unix ms; default: now.
        aborted: Record ``stopReason: "aborted"`` (a stream stopped by the caller's abort).

    Raises:
        TypeError: ``response`` is not a mapping or an SDK model.
    """
    raw = as_dict(response)
    content = _content_from(raw.get("content") or [])
    reason = raw.get("stop_reason")
    stop = _STOP_REASONS.get(reason, "stop") if isinstance(reason, str) else "stop"
    return finish_reply(
        raw,
        content=content,
        api=ANTHROPIC_API,
        provider=provider,
        model=model,
        usage=anthropic_usage(raw.get("usage")),
        stop_reason=stop,
        error_message=str(reason) if stop == "error" else None,
        aborted=aborted,
        timestamp=timestamp,
    )


class AnthropicStream:
    """
    Accumulate Messages API stream events (``message_start``, ``content_block_start`` / ``_delta`` /
    ``_stop``, ``message_delta``, ``message_stop``) into the final message.

    :meth:`feed` takes one event (a dict or the SDK's event object) and returns the text it added (for a
    :class:`~sessionkeeper.SilentReplyStreamFilter`); :meth:`message` builds the ``AssistantMessage`` from
    what arrived, complete or not (``aborted=True`` after an abort). Partial tool-call JSON that never
    completed is kept under ``{"_raw": ...}``.
    """

    def __init__(self) -> None:
        self.snapshot: JsonDict = {"content": []}
        self._partial_json: dict[int, str] = {}

    def feed(self, event: object) -> str:
        """Apply one event; return the text delta it carried (``""`` for none)."""
        raw = as_dict(event)
        kind = raw.get("type")
        blocks: list[JsonDict] = self.snapshot["content"]
        if kind == "message_start" and isinstance(raw.get("message"), Mapping):
            message = dict(raw["message"])
            message["content"] = list(message.get("content") or [])
            self.snapshot = message
        elif kind == "content_block_start" and isinstance(raw.get("content_block"), Mapping):
            index = int(raw.get("index", len(blocks)))
            while len(blocks) <= index:
                blocks.append({})
            blocks[index] = dict(raw["content_block"])
            if blocks[index].get("type") == "tool_use" and not blocks[index].get("input"):
                self._partial_json[index] = ""
        elif kind == "content_block_delta" and isinstance(raw.get("delta"), Mapping):
            index = int(raw.get("index", 0))
            if index >= len(blocks):
                return ""
            block = blocks[index]
            delta = raw["delta"]
            dtype = delta.get("type")
            if dtype == "text_delta":
                text = str(delta.get("text") or "")
                block["text"] = str(block.get("text") or "") + text
                return text
            if dtype == "thinking_delta":
                block["thinking"] = str(block.get("thinking") or "") + str(delta.get("thinking") or "")
            elif dtype == "signature_delta":
                block["signature"] = str(block.get("signature") or "") + str(delta.get("signature") or "")
            elif dtype == "input_json_delta":
                self._partial_json[index] = self._partial_json.get(index, "") + str(
                    delta.get("partial_json") or ""
                )
        elif kind == "message_delta":
            delta = raw.get("delta")
            if isinstance(delta, Mapping) and delta.get("stop_reason") is not None:
                self.snapshot["stop_reason"] = delta["stop_reason"]
            usage = raw.get("usage")
            if isinstance(usage, Mapping):
                merged = dict(self.snapshot.get("usage") or {})
                merged.update({k: v for k, v in usage.items() if v is not None})
                self.snapshot["usage"] = merged
        return ""

    def message(
        self,
        *,
        provider: str = "anthropic",
        model: str | None = None,
        timestamp: float | None = None,
        aborted: bool = False,
    ) -> AssistantMessage:
        """The reply so far as an ``AssistantMessage`` (see :func:`from_anthropic_message`)."""
        snapshot = dict(self.snapshot)
        blocks = [dict(b) for b in snapshot["content"]]
        for index, partial in self._partial_json.items():
            if index < len(blocks):
                blocks[index]["input"] = parse_arguments(partial)
        snapshot["content"] = [b for b in blocks if b]
        return from_anthropic_message(
            snapshot, provider=provider, model=model, timestamp=timestamp, aborted=aborted
        )
