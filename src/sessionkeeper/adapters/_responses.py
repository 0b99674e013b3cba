"""
OpenAI Responses API: transcript messages <-> ``input`` items, replies and stream events.

Wire facts: a reply's ``output`` is a list of items: ``reasoning`` (``id``, ``summary``, optional
``encrypted_content``), ``message`` (``output_text`` parts) and ``function_call`` (``call_id``, item ``id``
``fc_...``, JSON-string ``arguments``); a tool result is a ``function_call_output`` input item. pi-ai
stores a reasoning item as JSON in ``thinkingSignature``, a message item id as ``textSignature``
(``{"v":1,"id":...,"phase"?}``) and a call as ``"<call_id>|<item id>"``; those are read and written here
the same way, so a reply replays to the Responses API byte for byte where it matters (reasoning items).
"""

from __future__ import annotations

import json
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
    AgentMessage,
    AssistantContent,
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)


__all__ = (
    "RESPONSES_API",
    "ResponsesStream",
    "from_openai_response",
    "messages_from_responses_items",
    "to_responses_request",
)
# _assistant_items is shared with the openai-agents session (same package)

RESPONSES_API: Final = "openai-responses"
"""The ``api`` value of replies converted here (pi's name for this wire)."""

_NATIVE_APIS: Final = frozenset({"openai-responses", "azure-openai-responses", "openai-codex-responses"})


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _image_part(block: ImageContent) -> JsonDict:
    return {
        "type": "input_image",
        "detail": "auto",
        "image_url": f"data:{block.mime_type};base64,{block.data}",
    }


def _reasoning_item(signature: object) -> JsonDict | None:
    if not isinstance(signature, str) or not signature.startswith("{"):
        return None
    try:
        item = json.loads(signature)
    except ValueError:
        return None
    return item if isinstance(item, dict) and item.get("type") == "reasoning" else None


def _message_id(signature: object) -> tuple[str | None, str | None]:
    """``(id, phase)`` from a ``textSignature``: a bare id (older pi) or ``{"v":1,"id","phase"?}``."""
    if not isinstance(signature, str) or not signature:
        return None, None
    if signature.startswith("{"):
        try:
            value = json.loads(signature)
        except ValueError:
            return None, None
        if isinstance(value, dict) and isinstance(value.get("id"), str):
            phase = value.get("phase")
            return value["id"], phase if isinstance(phase, str) else None
        return None, None
    return signature, None


def _split_call_id(original: str) -> tuple[str, str | None]:
    call_id, _, item_id = original.partition("|")
    return call_id or original, item_id or None


def _assistant_items(message: AssistantMessage, ids: ToolCallIdMap) -> list[JsonDict]:
    native = message.api in _NATIVE_APIS
    items: list[JsonDict] = []
    for block in message.content:
        if isinstance(block, ThinkingContent):
            reasoning = _reasoning_item(block.thinking_signature) if native else None
            if reasoning is not None:
                items.append(reasoning)
            elif block.thinking.strip() and block.redacted is not True:
                items.append({"type": "message", "role": "assistant", "content": block.thinking})
        elif isinstance(block, TextContent):
            if not block.text:
                continue
            msg_id, phase = _message_id(block.text_signature) if native else (None, None)
            if msg_id is not None and msg_id.startswith("msg"):
                item: JsonDict = {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": block.text, "annotations": []}],
                    "status": "completed",
                    "id": msg_id,
                }
                if phase is not None:
                    item["phase"] = phase
                items.append(item)
            else:
                items.append({"type": "message", "role": "assistant", "content": block.text})
        elif isinstance(block, ToolCall):
            call_id, item_id = _split_call_id(block.id)
            call: JsonDict = {
                "type": "function_call",
                "call_id": ids(block.id, part=call_id),
                "name": block.name,
                "arguments": dump_arguments(block.arguments),
            }
            if native and item_id is not None and item_id.startswith("fc") and ids.is_valid(item_id):
                call["id"] = item_id
            items.append(call)
    return items


def to_responses_request(
    source: MessageSource,
    *,
    model: str,
    system_prompt: str | None = None,
    max_tokens: int | None = None,
    thinking_level: str | None = None,
    tools: Sequence[Mapping[str, Any]] = (),
    stream: bool = False,
    extra: Mapping[str, Any] | None = None,
) -> JsonDict:
    """
    Build a Responses API request body (``client.responses.create(**body)``).

    After :func:`~sessionkeeper.adapters.prepare_messages`: the system prompt is ``instructions``; user
    text/image blocks become ``input_text`` / ``input_image`` parts; an assistant reply becomes its items
    in block order: a thinking block whose ``thinkingSignature`` is a reasoning item (from a Responses
    API) is sent back as that item, other thinking as assistant text (pi-ai), a text block a ``message``
    item (with its ``msg_`` id and ``phase`` from ``textSignature`` when it came from this API), a tool
    call a ``function_call`` (``call_id``; the ``fc_`` item id when known); a tool result a
    ``function_call_output`` (text joined; images in a following user item). ``call_id`` outside
    ``[a-zA-Z0-9_-]{1,64}`` is rewritten, calls and results alike. Deviation ADAPT-THINK (reasoning
    replayed by API, not by model), ``docs/decisions.md``.

    Args:
        source: A ``ModelCallPlan``, a ``SessionContext`` or the messages.
        model: The model id.
        system_prompt: Sent as ``instructions``.
        max_tokens: Sent as ``max_output_tokens``.
        thinking_level: A pi level other than ``"off"`` sends ``reasoning: {effort, summary: "auto"}``
            and asks for ``reasoning.encrypted_content`` (so reasoning replays without server state).
        tools: Tool definitions in the Responses shape.
        stream: Adds ``"stream": true``.
        extra: Further top-level fields, merged last (e.g. ``{"store": False}``).
    """
    ids = ToolCallIdMap(allowed="a-zA-Z0-9_-", max_length=64)
    items: list[JsonDict] = []
    openai_messages(
        source,
        items,
        text_type="input_text",
        image_part=_image_part,
        tool_result=lambda result, text: {
            "type": "function_call_output",
            "call_id": ids(result.tool_call_id, part=_split_call_id(result.tool_call_id)[0]),
            "output": text,
        },
        assistant=lambda message: _assistant_items(message, ids),
    )
    body: JsonDict = {"model": model, "input": items}
    if system_prompt:
        body["instructions"] = system_prompt
    if max_tokens is not None:
        body["max_output_tokens"] = max_tokens
    if thinking_level and thinking_level in OPENAI_EFFORT:
        body["reasoning"] = {"effort": OPENAI_EFFORT[thinking_level], "summary": "auto"}
        body["include"] = ["reasoning.encrypted_content"]
    return finish_body(body, tools=tools, stream_fields={"stream": True} if stream else None, extra=extra)


def responses_usage(raw: object) -> Usage:
    """pi's usage from the Responses API's: ``input`` minus cached, ``cacheRead`` = cached, total as sent."""
    input_tokens = get_int(raw, "input_tokens")
    cached = get_int(raw, "input_tokens_details", "cached_tokens")
    output = get_int(raw, "output_tokens")
    total = get_int(raw, "total_tokens") or input_tokens + output
    return Usage(input=max(input_tokens - cached, 0), output=output, cache_read=cached, total_tokens=total)


def _content_from(output: Sequence[object]) -> list[AssistantContent]:
    content: list[AssistantContent] = []
    for item in output:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "reasoning":
            summary = item.get("summary") or []
            text = "\n\n".join(str(part.get("text") or "") for part in summary if isinstance(part, Mapping))
            content.append(ThinkingContent(thinking=text, thinking_signature=_compact(dict(item))))
        elif kind == "message":
            signature: JsonDict = {"v": 1, "id": str(item.get("id") or "")}
            if isinstance(item.get("phase"), str):
                signature["phase"] = item["phase"]
            parts = item.get("content") or []
            if isinstance(parts, str):
                parts = [{"type": "output_text", "text": parts}]
            for part in parts:
                if not isinstance(part, Mapping):
                    continue
                value = part.get("text") if part.get("type") == "output_text" else part.get("refusal")
                if isinstance(value, str):
                    if signature["id"]:
                        content.append(TextContent(text=value, text_signature=_compact(signature)))
                    else:
                        content.append(TextContent(text=value))
        elif kind == "function_call":
            call_id = str(item.get("call_id") or "")
            item_id = item.get("id")
            full_id = f"{call_id}|{item_id}" if isinstance(item_id, str) and item_id else call_id
            content.append(wire_tool_call(full_id, item.get("name"), item.get("arguments")))
    return content


def from_openai_response(
    response: object,
    *,
    provider: str = "openai",
    model: str | None = None,
    timestamp: float | None = None,
    aborted: bool = False,
) -> AssistantMessage:
    """
    Turn a Responses API reply (JSON or the SDK's ``Response``) into an ``AssistantMessage``.

    Items in order: ``reasoning`` -> thinking (summary texts joined by a blank line; the whole item as
    compact JSON in ``thinkingSignature``), ``message`` -> one text block per ``output_text`` (or
    ``refusal``) part with ``textSignature`` ``{"v":1,"id":...,"phase"?}``, ``function_call`` -> tool call
    with id ``"<call_id>|<item id>"``. ``status``: ``completed`` -> ``stop`` (``toolUse`` with calls),
    ``incomplete`` -> ``length`` for ``max_output_tokens`` else ``error``, ``failed`` -> ``error`` with the
    reply's ``error.message``, ``cancelled`` -> ``aborted``. Usage: see :func:`responses_usage`.

    Raises:
        TypeError: ``response`` is not a mapping or an SDK model.
    """
    raw = as_dict(response)
    content = _content_from(raw.get("output") or [])
    status = raw.get("status")
    error_message: str | None = None
    stop = "stop"
    if status == "incomplete":
        details = raw.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, Mapping) else None
        stop = "length" if reason in (None, "max_output_tokens") else "error"
        if stop == "error":
            error_message = f"incomplete: {reason}"
    elif status == "failed":
        stop = "error"
        error = raw.get("error")
        message = error.get("message") if isinstance(error, Mapping) else None
        code = error.get("code") if isinstance(error, Mapping) else None
        error_message = str(message or code or "response failed")
    elif status == "cancelled":
        stop = "aborted"
    return finish_reply(
        raw,
        content=content,
        api=RESPONSES_API,
        provider=provider,
        model=model,
        usage=responses_usage(raw.get("usage")),
        stop_reason=stop_reason_for(content, stop),
        error_message=error_message,
        aborted=aborted,
        timestamp=timestamp,
    )


class ResponsesStream:
    """
    Accumulate Responses stream events into the final reply.

    Items are tracked by ``output_index`` (``response.output_item.added`` / ``.done``), with
    ``response.output_text.delta``, ``response.reasoning_summary_text.delta`` and
    ``response.function_call_arguments.delta`` applied in between; ``response.completed`` /
    ``.incomplete`` / ``.failed`` carry the final reply, which wins when present. :meth:`feed` returns
    the text delta of an event (for a :class:`~sessionkeeper.SilentReplyStreamFilter`).
    """

    def __init__(self) -> None:
        self._meta: JsonDict = {}
        self._items: dict[int, JsonDict] = {}
        self.final: JsonDict | None = None

    def _item(self, raw: Mapping[str, Any]) -> JsonDict:
        return self._items.setdefault(int(raw.get("output_index", 0)), {})

    def _add_text(self, raw: Mapping[str, Any], field: str, index_key: str, part_type: str) -> str:
        """Append a text delta event to part ``raw[index_key]`` of its item's ``field`` list; the delta."""
        parts = self._item(raw).setdefault(field, [])
        index = int(raw.get(index_key, 0))
        while len(parts) <= index:
            parts.append({"type": part_type, "text": ""})
        delta = str(raw.get("delta") or "")
        parts[index]["text"] = str(parts[index].get("text") or "") + delta
        return delta

    def feed(self, event: object) -> str:
        """Apply one event; return the text delta it carried (``""`` for none)."""
        raw = as_dict(event)
        kind = raw.get("type")
        if kind in ("response.created", "response.in_progress") and isinstance(raw.get("response"), Mapping):
            self._meta = {k: v for k, v in raw["response"].items() if k in ("id", "model", "status")}
        elif kind in ("response.output_item.added", "response.output_item.done") and isinstance(
            raw.get("item"), Mapping
        ):
            self._items[int(raw.get("output_index", len(self._items)))] = json.loads(json.dumps(raw["item"]))
        elif kind == "response.output_text.delta":
            return self._add_text(raw, "content", "content_index", "output_text")
        elif kind == "response.reasoning_summary_text.delta":
            self._add_text(raw, "summary", "summary_index", "summary_text")
        elif kind == "response.function_call_arguments.delta":
            item = self._item(raw)
            item["arguments"] = str(item.get("arguments") or "") + str(raw.get("delta") or "")
        elif kind in ("response.completed", "response.incomplete", "response.failed") and isinstance(
            raw.get("response"), Mapping
        ):
            self.final = dict(raw["response"])
        return ""

    def snapshot(self) -> JsonDict:
        """The reply so far in the shape of a ``Response``."""
        if self.final is not None:
            return self.final
        return {
            **self._meta,
            "status": "in_progress",
            "output": [item for _, item in sorted(self._items.items()) if item],
        }

    def message(
        self,
        *,
        provider: str = "openai",
        model: str | None = None,
        timestamp: float | None = None,
        aborted: bool = False,
    ) -> AssistantMessage:
        """The reply so far as an ``AssistantMessage`` (see :func:`from_openai_response`)."""
        return from_openai_response(
            self.snapshot(), provider=provider, model=model, timestamp=timestamp, aborted=aborted
        )


def _data_url(url: object) -> tuple[str, str] | None:
    """``(mime, base64)`` of a ``data:<mime>;base64,<data>`` URL."""
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        return None
    head, _, data = url.partition(";base64,")
    return head[5:], data


def messages_from_responses_items(
    items: Sequence[Mapping[str, Any]], *, provider: str = "openai", model: str = "", timestamp: float = 0
) -> list[AgentMessage]:
    """
    Turn Responses ``input`` items (what openai-agents keeps in a session) into transcript messages.

    The inverse of :func:`to_responses_request` for the item types it writes: a user ``message`` (string
    or ``input_text`` / ``input_image`` data-URL parts) -> ``UserMessage``; consecutive ``reasoning``,
    assistant ``message`` and ``function_call`` items -> one ``AssistantMessage`` (``api
    "openai-responses"``; reasoning items kept whole in ``thinkingSignature``, message ids in
    ``textSignature``, calls as ``"<call_id>|<item id>"``); ``function_call_output`` ->
    ``ToolResultMessage`` paired by ``call_id``.

    Raises:
        ValueError: An item this mapping cannot keep without loss (another item type or role, an image
            that is not a data URL, a non-text tool output); nothing is converted then.
    """
    out: list[AgentMessage] = []
    pending: list[Mapping[str, Any]] = []
    call_ids: dict[str, tuple[str, str]] = {}

    def flush() -> None:
        if not pending:
            return
        content = _content_from(pending)
        for block in content:
            if isinstance(block, ToolCall):
                call_ids[block.id.split("|", 1)[0]] = (block.id, block.name)
        stop = "toolUse" if any(isinstance(b, ToolCall) for b in content) else "stop"
        out.append(
            AssistantMessage(
                content=content,
                api=RESPONSES_API,
                provider=provider,
                model=model,
                stop_reason=stop,
                timestamp=timestamp,
            )
        )
        pending.clear()

    for item in items:
        kind = item.get("type", "message")
        role = item.get("role")
        if kind in ("reasoning", "function_call") or (kind == "message" and role == "assistant"):
            if kind == "message" and isinstance(item.get("content"), str):
                item = {**item, "content": [{"type": "output_text", "text": item["content"]}]}
            pending.append(item)
            continue
        flush()
        if kind == "message" and role == "user":
            raw = item.get("content")
            if isinstance(raw, str):
                out.append(UserMessage(content=raw, timestamp=timestamp))
                continue
            blocks: list[TextContent | ImageContent] = []
            for part in raw if isinstance(raw, list) else []:
                if part.get("type") == "input_text":
                    blocks.append(TextContent(text=str(part.get("text") or "")))
                elif part.get("type") == "input_image" and (image := _data_url(part.get("image_url"))):
                    blocks.append(ImageContent(data=image[1], mime_type=image[0]))
                else:
                    raise ValueError(f"cannot keep user content part {part.get('type')!r} in a transcript")
            out.append(UserMessage(content=blocks, timestamp=timestamp))
        elif kind == "function_call_output":
            call_id = str(item.get("call_id") or "")
            output = item.get("output")
            if not isinstance(output, str):
                raise ValueError("cannot keep a non-text function_call_output in a transcript")
            full_id, name = call_ids.get(call_id, (call_id, ""))
            out.append(
                ToolResultMessage(
                    tool_call_id=full_id,
                    tool_name=name,
                    content=[TextContent(text=output)],
                    timestamp=timestamp,
                )
            )
        else:
            raise ValueError(f"cannot keep a {kind!r} item (role {role!r}) in a transcript")
    flush()
    return out
