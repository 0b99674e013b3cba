"""
OpenAI Chat Completions (and OpenAI-compatible servers): transcript messages <-> request bodies, replies and
stream chunks.

Wire facts: tool calls are ``{"id", "type": "function", "function": {"name", "arguments": <JSON string>}}``
on the assistant message; each result is a ``{"role": "tool", "tool_call_id", "content"}`` message;
tool messages carry text only, so a result's images follow in a user message (what pi-ai does); ids are
kept to ``[a-zA-Z0-9_-]{1,40}`` (pi-ai's rule for this wire; a Responses ``call|item`` id keeps its call
part). Reasoning is not part of OpenAI's own Chat Completions messages; OpenAI-compatible servers
(DeepSeek, vLLM, llama.cpp) use a ``reasoning_content`` field, which the converters read and, on request,
write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from sessionkeeper.adapters._common import (
    OPENAI_EFFORT,
    JsonDict,
    MessageSource,
    ToolCallIdMap,
    as_dict,
    dump_arguments,
    finish_body,
    finish_reply,
    get_int,
    openai_messages,
    stop_reason_for,
    wire_tool_call,
)
from sessionkeeper.records import (
    AssistantContent,
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)


__all__ = (
    "CHAT_COMPLETIONS_API",
    "ChatCompletionsStream",
    "from_chat_completion",
    "to_chat_completions_request",
)

CHAT_COMPLETIONS_API: Final = "openai-completions"
"""The ``api`` value of replies converted here (pi's name for this wire)."""

_FINISH: Final[Mapping[str, str]] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
    "content_filter": "error",
}


def _image_part(block: ImageContent) -> JsonDict:
    return {"type": "image_url", "image_url": {"url": f"data:{block.mime_type};base64,{block.data}"}}


def _call_part(original: str) -> str:
    """The call part of a Responses ``call_id|item_id`` tool-call id (pi-ai stores both)."""
    return original.split("|", 1)[0] or original


def _assistant(message: AssistantMessage, ids: ToolCallIdMap, reasoning_field: str | None) -> list[JsonDict]:
    """The reply as one assistant message (none when it has no text, calls or replayed reasoning)."""
    texts = [b.text for b in message.content if isinstance(b, TextContent) and b.text]
    thinking = [b.thinking for b in message.content if isinstance(b, ThinkingContent) and b.thinking]
    calls = [
        {
            "id": ids(b.id, part=_call_part(b.id)),
            "type": "function",
            "function": {"name": b.name, "arguments": dump_arguments(b.arguments)},
        }
        for b in message.content
        if isinstance(b, ToolCall)
    ]
    if not texts and not calls and not (reasoning_field and thinking):
        return []
    out: JsonDict = {"role": "assistant", "content": "".join(texts) if texts else None}
    if reasoning_field and thinking:
        out[reasoning_field] = "\n\n".join(thinking)
    if calls:
        out["tool_calls"] = calls
    return [out]


def to_chat_completions_request(
    source: MessageSource,
    *,
    model: str,
    system_prompt: str | None = None,
    max_tokens: int | None = None,
    max_tokens_field: str = "max_completion_tokens",
    system_role: str = "system",
    thinking_level: str | None = None,
    reasoning_field: str | None = None,
    tools: Sequence[Mapping[str, Any]] = (),
    stream: bool = False,
    extra: Mapping[str, Any] | None = None,
) -> JsonDict:
    """
    Build a Chat Completions request body (``client.chat.completions.create(**body)``).

    After :func:`~sessionkeeper.adapters.prepare_messages`: the system prompt is the first message (role
    ``system_role``); user text/image blocks become ``text`` / ``image_url`` (data URL) parts (a string
    stays a string); an assistant reply becomes one message whose ``content`` is its text blocks joined
    (``null`` when it has none) and whose ``tool_calls`` are its calls (arguments as a compact JSON
    string); each tool result a ``tool`` message (text joined; its images in a following user message
    starting with ``"Attached image(s) from tool result:"``). Thinking is dropped unless
    ``reasoning_field`` names the field to carry it (``"reasoning_content"`` for DeepSeek-style
    servers), as OpenClaw's replay policy drops reasoning on this wire. Ids outside
    ``[a-zA-Z0-9_-]{1,40}`` are rewritten, calls and results alike.

    Args:
        source: A ``ModelCallPlan``, a ``SessionContext`` or the messages.
        model: The model id.
        system_prompt: The system prompt, when any.
        max_tokens: Output token limit, sent as ``max_tokens_field`` when given.
        max_tokens_field: ``"max_completion_tokens"`` (OpenAI, default) or ``"max_tokens"`` (older servers).
        system_role: ``"system"`` (default) or ``"developer"`` (OpenAI reasoning models).
        thinking_level: A pi level other than ``"off"`` sends ``reasoning_effort`` (``xhigh`` as ``high``).
        reasoning_field: Field that carries thinking on replayed assistant messages; ``None`` drops it.
        tools: Tool definitions in the Chat Completions shape.
        stream: Adds ``"stream": true`` and ``stream_options.include_usage``.
        extra: Further top-level fields, merged last.
    """
    ids = ToolCallIdMap(allowed="a-zA-Z0-9_-", max_length=40)
    messages: list[JsonDict] = []
    if system_prompt:
        messages.append({"role": system_role, "content": system_prompt})
    openai_messages(
        source,
        messages,
        text_type="text",
        image_part=_image_part,
        tool_result=lambda result, text: {
            "role": "tool",
            "tool_call_id": ids(result.tool_call_id, part=_call_part(result.tool_call_id)),
            "content": text,
        },
        assistant=lambda message: _assistant(message, ids, reasoning_field),
    )
    body: JsonDict = {"model": model, "messages": messages}
    if max_tokens is not None:
        body[max_tokens_field] = max_tokens
    if thinking_level and thinking_level in OPENAI_EFFORT:
        body["reasoning_effort"] = OPENAI_EFFORT[thinking_level]
    return finish_body(
        body,
        tools=tools,
        stream_fields={"stream": True, "stream_options": {"include_usage": True}} if stream else None,
        extra=extra,
    )


def chat_usage(raw: object) -> Usage:
    """pi's usage from Chat Completions': ``input`` = prompt minus cached tokens, ``cacheRead`` = cached."""
    prompt = get_int(raw, "prompt_tokens")
    cached = get_int(raw, "prompt_tokens_details", "cached_tokens")
    output = get_int(raw, "completion_tokens")
    return Usage(
        input=max(prompt - cached, 0),
        output=output,
        cache_read=cached,
        total_tokens=max(prompt - cached, 0) + output + cached,
    )


def _message_content(raw: Mapping[str, Any], reasoning_fields: Sequence[str]) -> list[AssistantContent]:
    content: list[AssistantContent] = []
    for field in reasoning_fields:
        value = raw.get(field)
        if isinstance(value, str) and value:
            content.append(ThinkingContent(thinking=value, thinking_signature=field))
            break
    text = raw.get("content")
    if isinstance(text, str) and text:
        content.append(TextContent(text=text))
    elif isinstance(text, list):  # some compatible servers send parts
        joined = "".join(str(p.get("text") or "") for p in text if isinstance(p, Mapping))
        if joined:
            content.append(TextContent(text=joined))
    for call in raw.get("tool_calls") or []:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        if not isinstance(function, Mapping):
            function = {}
        content.append(wire_tool_call(call.get("id"), function.get("name"), function.get("arguments")))
    return content


_REASONING_FIELDS: Final = ("reasoning_content", "reasoning", "reasoning_text")


def from_chat_completion(
    response: object,
    *,
    provider: str = "openai",
    model: str | None = None,
    timestamp: float | None = None,
    aborted: bool = False,
) -> AssistantMessage:
    """
    Turn a Chat Completions reply (JSON or the SDK's ``ChatCompletion``) into an ``AssistantMessage``.

    The first choice is read: ``reasoning_content`` / ``reasoning`` (compatible servers) -> a thinking
    block whose ``thinkingSignature`` names the field (pi-ai's convention), ``content`` -> a text block,
    ``tool_calls`` -> tool calls (arguments decoded). ``finish_reason``: ``stop`` -> ``stop`` (``toolUse``
    when calls are present), ``length`` -> ``length``, ``tool_calls`` -> ``toolUse``, ``content_filter``
    -> ``error``. Usage: see :func:`chat_usage`.

    Raises:
        TypeError: ``response`` is not a mapping or an SDK model.
    """
    raw = as_dict(response)
    choices = raw.get("choices") or []
    choice = choices[0] if choices and isinstance(choices[0], Mapping) else {}
    message = choice.get("message")
    content = _message_content(message if isinstance(message, Mapping) else {}, _REASONING_FIELDS)
    finish = choice.get("finish_reason")
    stop = stop_reason_for(content, _FINISH.get(finish, "stop") if isinstance(finish, str) else "stop")
    return finish_reply(
        raw,
        content=content,
        api=CHAT_COMPLETIONS_API,
        provider=provider,
        model=model,
        usage=chat_usage(raw.get("usage")),
        stop_reason=stop,
        error_message=f"finish_reason: {finish}" if stop == "error" else None,
        aborted=aborted,
        timestamp=timestamp,
    )


class ChatCompletionsStream:
    """
    Accumulate ``chat.completion.chunk`` events into the final reply.

    :meth:`feed` takes one chunk (dict or SDK object) and returns its text delta; tool-call fragments are
    joined by ``index``; the usage chunk (``stream_options.include_usage``) is kept. :meth:`message`
    builds the ``AssistantMessage`` from what arrived (``aborted=True`` after an abort).
    """

    def __init__(self) -> None:
        self._meta: JsonDict = {}
        self._text: list[str] = []
        self._reasoning: dict[str, list[str]] = {}
        self._calls: dict[int, JsonDict] = {}
        self._finish: str | None = None
        self._usage: object = None

    def feed(self, chunk: object) -> str:
        """Apply one chunk; return the text it added."""
        raw = as_dict(chunk)
        for key in ("id", "model"):
            if isinstance(raw.get(key), str) and key not in self._meta:
                self._meta[key] = raw[key]
        if raw.get("usage"):
            self._usage = raw["usage"]
        added = ""
        for choice in raw.get("choices") or []:
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            if choice.get("finish_reason"):
                self._finish = str(choice["finish_reason"])
            delta = choice.get("delta")
            if not isinstance(delta, Mapping):
                continue
            for field in _REASONING_FIELDS:
                if isinstance(delta.get(field), str) and delta[field]:
                    self._reasoning.setdefault(field, []).append(delta[field])
            if isinstance(delta.get("content"), str) and delta["content"]:
                added += delta["content"]
                self._text.append(delta["content"])
            for part in delta.get("tool_calls") or []:
                if not isinstance(part, Mapping):
                    continue
                call = self._calls.setdefault(int(part.get("index", len(self._calls))), {"arguments": ""})
                if part.get("id"):
                    call["id"] = str(part["id"])
                function = part.get("function")
                if isinstance(function, Mapping):
                    if function.get("name"):
                        call["name"] = str(function["name"])
                    if function.get("arguments"):
                        call["arguments"] += str(function["arguments"])
        return added

    def snapshot(self) -> JsonDict:
        """The reply so far in the shape of a ``ChatCompletion``."""
        message: JsonDict = {"role": "assistant", "content": "".join(self._text) or None}
        for field, parts in self._reasoning.items():
            message[field] = "".join(parts)
        if self._calls:
            message["tool_calls"] = [
                {
                    "id": call.get("id", ""),
                    "type": "function",
                    "function": {"name": call.get("name", ""), "arguments": call["arguments"]},
                }
                for _, call in sorted(self._calls.items())
            ]
        out: JsonDict = {
            **self._meta,
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish}],
        }
        if self._usage is not None:
            out["usage"] = self._usage
        return out

    def message(
        self,
        *,
        provider: str = "openai",
        model: str | None = None,
        timestamp: float | None = None,
        aborted: bool = False,
    ) -> AssistantMessage:
        """The reply so far as an ``AssistantMessage`` (see :func:`from_chat_completion`)."""
        return from_chat_completion(
            self.snapshot(), provider=provider, model=model, timestamp=timestamp, aborted=aborted
        )
