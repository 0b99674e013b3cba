"""
Conversion between pydantic-ai's ``ModelMessage`` lists and transcript messages, both directions.

Imports ``pydantic_ai`` (extra ``pydantic-ai``); only :mod:`sessionkeeper.adapters.pydantic_ai` imports this
module. One request part or one response becomes one transcript message; a run of user-side messages
becomes one ``ModelRequest`` on the way back. Tool-call ids are kept as they are, so calls and results stay
paired in both directions.
"""

from __future__ import annotations

import base64
import dataclasses
import inspect
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import pydantic_core
from msgspec import UNSET
from pydantic_ai import messages as pai
from pydantic_ai.usage import RequestUsage

from sessionkeeper.adapters._common import MessageSource, parse_arguments, source_messages, stop_reason_for
from sessionkeeper.records import (
    AgentMessage,
    AssistantContent,
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserContent,
    UserMessage,
)
from sessionkeeper.transcript import (
    BRANCH_SUMMARY_PREFIX,
    BRANCH_SUMMARY_SUFFIX,
    COMPACTION_SUMMARY_PREFIX,
    COMPACTION_SUMMARY_SUFFIX,
    convert_to_llm,
)


__all__ = (
    "PYDANTIC_AI_API",
    "RETRY_CUSTOM_TYPE",
    "SYSTEM_PROMPT_CUSTOM_TYPE",
    "from_pydantic_ai_messages",
    "to_pydantic_ai_messages",
)

PYDANTIC_AI_API: Final = "pydantic-ai"
"""``api`` of the assistant messages made from pydantic-ai responses (their wire API is the model's)."""

SYSTEM_PROMPT_CUSTOM_TYPE: Final = "pydantic-ai.system-prompt"
"""``customType`` of the custom message that keeps a ``SystemPromptPart`` (pi has no system role)."""

RETRY_CUSTOM_TYPE: Final = "pydantic-ai.retry"
"""``customType`` of the custom message that keeps a retry answering no tool call (``RetryPromptPart``
without ``tool_name``, or ``RetryFeedbackPart``): sent to the model as user text, as pydantic-ai does."""

_DETAILS_KEY: Final = "pydanticAi"
"""Key in a tool result's ``details`` (never sent to a model) holding what its text cannot say."""

_FINISH_TO_STOP: Final = {
    "stop": "stop",
    "length": "length",
    "tool_call": "toolUse",
    "content_filter": "error",
    "error": "error",
}
_STOP_TO_FINISH: Final = {"stop": "stop", "length": "length", "toolUse": "tool_call", "error": "error"}
_CONTENT_FILTER: Final = "content_filter"

# pydantic-ai 2.x split the deprecated RetryPromptPart into ToolReturnPart(outcome="retried") and
# RetryFeedbackPart; 1.x has only RetryPromptPart. Both shapes are read; the installed one is written.
_RetryFeedbackPart: Any = getattr(pai, "RetryFeedbackPart", None)
_RetryInfo: Any = getattr(pai, "RetryInfo", None)
_HAS_OUTCOME: Final = "outcome" in {f.name for f in dataclasses.fields(pai.ToolReturnPart)}
# the text the model is shown, without the {"error": ...} wrapper newer releases add for error outcomes
_UNWRAPPED: Final[dict[str, Any]] = (
    {"wrap_if_error": False}
    if "wrap_if_error" in inspect.signature(pai.ToolReturnPart.model_response_str).parameters
    else {}
)


def _ms(value: datetime | None) -> int:
    return int(value.timestamp() * 1000) if value is not None else 0


def _datetime(ms: float) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def _jsonable(value: object) -> Any:
    return pydantic_core.to_jsonable_python(value)


def _refuse(what: str) -> ValueError:
    return ValueError(f"a transcript cannot keep {what} without loss; nothing was converted")


def _is_file(value: object) -> bool:
    return isinstance(value, pai.BinaryContent | pai.FileUrl)


# ---------------------------------------------------------------------------------------- to transcript


def _user_blocks(content: Sequence[object]) -> list[UserContent]:
    blocks: list[UserContent] = []
    for item in content:
        if isinstance(item, str):
            blocks.append(TextContent(text=item))
        elif isinstance(item, pai.BinaryContent) and item.is_image:
            blocks.append(
                ImageContent(data=base64.b64encode(item.data).decode("ascii"), mime_type=item.media_type)
            )
        else:
            raise _refuse(f"user content of kind {getattr(item, 'kind', type(item).__name__)!r}")
    return blocks


def _summary(text: str, timestamp: int) -> AgentMessage | None:
    """The summary message a user prompt of pi's summary wording came from (hygiene needs to know it)."""
    if text.startswith(COMPACTION_SUMMARY_PREFIX) and text.endswith(COMPACTION_SUMMARY_SUFFIX):
        summary = text[len(COMPACTION_SUMMARY_PREFIX) : len(text) - len(COMPACTION_SUMMARY_SUFFIX)]
        return CompactionSummaryMessage(summary=summary, tokens_before=0, timestamp=timestamp)
    if text.startswith(BRANCH_SUMMARY_PREFIX) and text.endswith(BRANCH_SUMMARY_SUFFIX):
        summary = text[len(BRANCH_SUMMARY_PREFIX) : len(text) - len(BRANCH_SUMMARY_SUFFIX)]
        return BranchSummaryMessage(summary=summary, from_id="root", timestamp=timestamp)
    return None


def _tool_result(
    *, tool_call_id: str, tool_name: str, content: object, outcome: str, text: str, timestamp: int
) -> ToolResultMessage:
    if _is_file(content) or (isinstance(content, list | tuple) and any(map(_is_file, content))):
        raise _refuse(f"the files returned by tool {tool_name!r}")
    extra: dict[str, Any] = {}
    if content is not None and not isinstance(content, str):
        extra["content"] = _jsonable(content)
    if outcome != "success":
        extra["outcome"] = outcome
    return ToolResultMessage(
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        content=[TextContent(text=text)],
        is_error=outcome != "success",
        timestamp=timestamp,
        details={_DETAILS_KEY: extra} if extra else UNSET,
    )


def _retry_text(part: Any) -> str:
    response = part.model_response()
    return response if isinstance(response, str) else str(response)


def _request_messages(request: pai.ModelRequest) -> list[AgentMessage]:
    out: list[AgentMessage] = []
    for part in request.parts:
        timestamp = _ms(getattr(part, "timestamp", None))
        if isinstance(part, pai.SystemPromptPart):
            details: dict[str, Any] = {}
            if part.dynamic_ref is not None:
                details["dynamicRef"] = part.dynamic_ref
            out.append(
                CustomMessage(
                    custom_type=SYSTEM_PROMPT_CUSTOM_TYPE,
                    content=part.content,
                    display=False,
                    details=details or UNSET,
                    timestamp=timestamp,
                )
            )
        elif isinstance(part, pai.UserPromptPart):
            if isinstance(part.content, str):
                out.append(
                    _summary(part.content, timestamp)
                    or UserMessage(content=part.content, timestamp=timestamp)
                )
            else:
                out.append(UserMessage(content=_user_blocks(part.content), timestamp=timestamp))
        elif isinstance(part, pai.ToolReturnPart):
            outcome = str(getattr(part, "outcome", "success"))
            out.append(
                _tool_result(
                    tool_call_id=part.tool_call_id,
                    tool_name=part.tool_name,
                    content=part.content,
                    outcome=outcome,
                    text=part.model_response_str(**_UNWRAPPED),
                    timestamp=timestamp,
                )
            )
        elif isinstance(part, pai.RetryPromptPart):  # pyright: ignore[reportDeprecated]
            if part.tool_name is not None:
                out.append(
                    ToolResultMessage(
                        tool_call_id=part.tool_call_id,
                        tool_name=part.tool_name,
                        content=[TextContent(text=_retry_text(part))],
                        is_error=True,
                        timestamp=timestamp,
                        details={_DETAILS_KEY: {"content": _jsonable(part.content), "outcome": "retried"}},
                    )
                )
            else:
                out.append(_retry_message(part, cause=None, timestamp=timestamp))
        elif _RetryFeedbackPart is not None and isinstance(part, _RetryFeedbackPart):
            feedback: Any = part
            out.append(_retry_message(feedback, cause=str(feedback.retry.cause), timestamp=timestamp))
        else:
            raise _refuse(f"a request part of kind {getattr(part, 'part_kind', type(part).__name__)!r}")
    return out


def _retry_message(part: Any, *, cause: str | None, timestamp: int) -> CustomMessage:
    details: dict[str, Any] = {"content": _jsonable(part.content)}
    if cause is not None:
        details["cause"] = cause
    return CustomMessage(
        custom_type=RETRY_CUSTOM_TYPE,
        content=_retry_text(part),
        display=False,
        details=details,
        timestamp=timestamp,
    )


def _response_message(response: pai.ModelResponse) -> AssistantMessage:
    content: list[AssistantContent] = []
    for part in response.parts:
        if isinstance(part, pai.TextPart):
            part_id = getattr(part, "id", None)
            content.append(TextContent(text=part.content, text_signature=part_id if part_id else UNSET))
        elif isinstance(part, pai.ThinkingPart):
            content.append(ThinkingContent(thinking=part.content, thinking_signature=part.signature or UNSET))
        elif isinstance(part, pai.ToolCallPart):
            content.append(
                ToolCall(id=part.tool_call_id, name=part.tool_name, arguments=parse_arguments(part.args))
            )
        else:
            raise _refuse(f"a response part of kind {getattr(part, 'part_kind', type(part).__name__)!r}")
    usage = response.usage
    cache_read = int(getattr(usage, "cache_read_tokens", 0) or 0)
    cache_write = int(getattr(usage, "cache_write_tokens", 0) or 0)
    output = int(getattr(usage, "output_tokens", 0) or 0)
    # pydantic-ai counts cached tokens in input_tokens; pi records input without them
    uncached = max(0, int(getattr(usage, "input_tokens", 0) or 0) - cache_read - cache_write)
    finish = getattr(response, "finish_reason", None)
    stop_reason = _FINISH_TO_STOP.get(finish, "stop") if isinstance(finish, str) else "stop"
    fields: dict[str, Any] = {}
    if finish == _CONTENT_FILTER:
        fields["error_message"] = _CONTENT_FILTER
    response_id = getattr(response, "provider_response_id", None)
    if isinstance(response_id, str):
        fields["response_id"] = response_id
    return AssistantMessage(
        content=content,
        api=PYDANTIC_AI_API,
        provider=response.provider_name or "",
        model=response.model_name or "",
        usage=Usage(
            input=uncached,
            output=output,
            cache_read=cache_read,
            cache_write=cache_write,
            total_tokens=uncached + output + cache_read + cache_write,
        ),
        stop_reason=stop_reason_for(content, stop_reason) if finish is None else stop_reason,
        timestamp=_ms(response.timestamp),
        **fields,
    )


def from_pydantic_ai_messages(messages: Iterable[pai.ModelMessage]) -> list[AgentMessage]:
    """
    Transcript messages from pydantic-ai messages (``result.all_messages()``, a history processor's input).

    Per request part: ``UserPromptPart`` -> :class:`UserMessage` (a string stays a string; text and image
    ``BinaryContent`` become blocks; a prompt in pi's compaction or branch summary wording becomes the
    summary message again); ``SystemPromptPart`` -> a :class:`CustomMessage` of type
    :data:`SYSTEM_PROMPT_CUSTOM_TYPE` (pi has no system role; ``dynamic_ref`` in ``details``);
    ``ToolReturnPart`` -> :class:`ToolResultMessage` whose text is what the model was shown, with
    ``is_error`` for any outcome but ``success`` and the structured content and outcome in
    ``details["pydanticAi"]`` (never sent to a model); ``RetryPromptPart`` with a tool name -> an error
    tool result (outcome ``retried``), without one (and ``RetryFeedbackPart``) -> a custom message of type
    :data:`RETRY_CUSTOM_TYPE`. A ``ModelResponse`` -> one :class:`AssistantMessage` (``api``
    :data:`PYDANTIC_AI_API`): ``TextPart`` (its ``id`` as ``text_signature``), ``ThinkingPart`` (its
    ``signature`` as ``thinking_signature``), ``ToolCallPart`` (arguments decoded; a string that is no
    JSON object is kept under ``_raw``); ``provider_name``, ``model_name``, ``provider_response_id``,
    ``finish_reason`` as pi's stop reason, timestamps in ms; usage with cached tokens taken out of
    ``input`` (pi's convention). Tool-call ids are kept unchanged.

    Not kept (ids or values pydantic-ai fills in again): ``ModelRequest.instructions`` (the agent adds
    them on every run), part ``id`` / ``provider_details`` of thinking and tool-call parts, timestamps
    below the millisecond.

    Raises:
        ValueError: A part a transcript cannot keep without loss (files other than images, file URLs,
            native tool calls, file or compaction parts of a response...).
    """
    out: list[AgentMessage] = []
    for message in messages:
        if isinstance(message, pai.ModelResponse):
            out.append(_response_message(message))
        else:
            out.extend(_request_messages(message))
    return out


# ---------------------------------------------------------------------------------------- to pydantic-ai


def _user_part(content: str | list[UserContent], timestamp: float) -> pai.UserPromptPart:
    if isinstance(content, str):
        return pai.UserPromptPart(content=content, timestamp=_datetime(timestamp))
    items: list[Any] = [
        block.text
        if isinstance(block, TextContent)
        else pai.BinaryContent(data=base64.b64decode(block.data), media_type=block.mime_type)
        for block in content
    ]
    return pai.UserPromptPart(content=items, timestamp=_datetime(timestamp))


def _pai_details(details: object) -> dict[str, Any]:
    value = details.get(_DETAILS_KEY) if isinstance(details, dict) else None
    return value if isinstance(value, dict) else {}


def _tool_return_part(message: ToolResultMessage) -> Any:
    extra = _pai_details(message.details)
    text = "".join(b.text for b in message.content if isinstance(b, TextContent))
    images = [
        pai.BinaryContent(data=base64.b64decode(b.data), media_type=b.mime_type)
        for b in message.content
        if isinstance(b, ImageContent)
    ]
    content: Any = extra.get("content", text)
    if images:
        content = [*([content] if content else []), *images]
    outcome = extra.get("outcome", "error" if message.is_error else "success")
    timestamp = _datetime(message.timestamp)
    if outcome == "retried" and not _HAS_OUTCOME:
        return pai.RetryPromptPart(  # pyright: ignore[reportDeprecated]
            content=content,
            tool_name=message.tool_name,
            tool_call_id=message.tool_call_id,
            timestamp=timestamp,
        )
    fields: dict[str, Any] = {}
    if _HAS_OUTCOME and outcome != "success":
        fields["outcome"] = outcome if outcome in ("failed", "denied", "interrupted", "retried") else "failed"
    return pai.ToolReturnPart(
        tool_name=message.tool_name,
        content=content,
        tool_call_id=message.tool_call_id,
        timestamp=timestamp,
        **fields,
    )


def _retry_part(message: CustomMessage) -> Any:
    details = message.details if isinstance(message.details, dict) else {}
    content = details.get("content")
    if not isinstance(content, str | list):
        content = message.content if isinstance(message.content, str) else ""
    timestamp = _datetime(message.timestamp)
    if _RetryFeedbackPart is not None and _RetryInfo is not None:
        cause = details.get("cause") or ("model_retry" if isinstance(content, str) else "validation_error")
        return _RetryFeedbackPart(content=content, retry=_RetryInfo(cause=cause), timestamp=timestamp)
    return pai.RetryPromptPart(content=content, timestamp=timestamp)  # pyright: ignore[reportDeprecated]


def _system_part(message: CustomMessage) -> pai.SystemPromptPart:
    content = message.content
    text = (
        content
        if isinstance(content, str)
        else "".join(b.text for b in content if isinstance(b, TextContent))
    )
    details = message.details if isinstance(message.details, dict) else {}
    ref = details.get("dynamicRef")
    return pai.SystemPromptPart(
        content=text,
        timestamp=_datetime(message.timestamp),
        dynamic_ref=ref if isinstance(ref, str) else None,
    )


def _request_parts(message: AgentMessage) -> list[Any]:
    if isinstance(message, ToolResultMessage):
        return [_tool_return_part(message)]
    if isinstance(message, UserMessage):
        return [_user_part(message.content, message.timestamp)]
    if isinstance(message, CustomMessage) and message.custom_type == SYSTEM_PROMPT_CUSTOM_TYPE:
        return [_system_part(message)]
    if isinstance(message, CustomMessage) and message.custom_type == RETRY_CUSTOM_TYPE:
        return [_retry_part(message)]
    if isinstance(message, CompactionSummaryMessage | BranchSummaryMessage):
        [user] = convert_to_llm([message])
        assert isinstance(user, UserMessage) and not isinstance(user.content, str)
        text = "".join(b.text for b in user.content if isinstance(b, TextContent))
        return [pai.UserPromptPart(content=text, timestamp=_datetime(message.timestamp))]
    # bash executions and other custom messages: what pi sends for them (a user message), if anything
    return [
        _user_part(user.content, user.timestamp)
        for user in convert_to_llm([message])
        if isinstance(user, UserMessage)
    ]


def _response(message: AssistantMessage) -> pai.ModelResponse:
    parts: list[Any] = []
    for block in message.content:
        if isinstance(block, TextContent):
            signature = block.text_signature if isinstance(block.text_signature, str) else None
            parts.append(pai.TextPart(content=block.text, id=signature))
        elif isinstance(block, ThinkingContent):
            signature = block.thinking_signature if isinstance(block.thinking_signature, str) else None
            parts.append(pai.ThinkingPart(content=block.thinking, signature=signature))
        else:
            parts.append(
                pai.ToolCallPart(tool_name=block.name, args=dict(block.arguments), tool_call_id=block.id)
            )
    usage = message.usage
    finish: str | None = _STOP_TO_FINISH.get(message.stop_reason)
    if message.stop_reason == "error" and message.error_message == _CONTENT_FILTER:
        finish = _CONTENT_FILTER
    fields: dict[str, Any] = {"finish_reason": finish}
    if isinstance(message.response_id, str):
        fields["provider_response_id"] = message.response_id
    return pai.ModelResponse(
        parts=parts,
        usage=RequestUsage(
            input_tokens=usage.input + usage.cache_read + usage.cache_write,
            output_tokens=usage.output,
            cache_read_tokens=usage.cache_read,
            cache_write_tokens=usage.cache_write,
        ),
        model_name=message.model or None,
        provider_name=message.provider or None,
        timestamp=_datetime(message.timestamp),
        **fields,
    )


def to_pydantic_ai_messages(source: MessageSource) -> list[pai.ModelMessage]:
    """
    pydantic-ai messages from transcript messages (a ``SessionContext``, a ``ModelCallPlan`` or a list), for
    ``agent.run(..., message_history=...)`` or as a history processor's output.

    The inverse of :func:`from_pydantic_ai_messages`: each assistant message becomes a ``ModelResponse``;
    each run of other messages one ``ModelRequest`` (user prompts, tool returns, system prompts and
    retries kept as custom messages). Summaries (compaction, branch), bash executions and other custom
    messages become user prompts with pi's exact texts (pi spec §10). Tool-call ids are kept unchanged.
    """
    out: list[pai.ModelMessage] = []
    pending: list[Any] = []
    for message in source_messages(source):
        if isinstance(message, AssistantMessage):
            if pending:
                out.append(pai.ModelRequest(parts=pending))
                pending = []
            out.append(_response(message))
        else:
            pending.extend(_request_parts(message))
    if pending:
        out.append(pai.ModelRequest(parts=pending))
    return out
