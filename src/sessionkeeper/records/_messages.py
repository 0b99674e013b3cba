"""
Message and content-block records of pi session transcripts (pi-format spec §6).

Every record is a frozen ``msgspec.Struct`` whose field names are the snake_case form of the on-disk
camelCase keys (``tool_call_id`` <-> ``toolCallId``); the field order is the order pi writes them, so
an encoded record matches pi's bytes for the same values. Optional fields default to
``msgspec.UNSET`` and are then absent from the JSON, as pi omits ``undefined`` properties.

A message whose role is unknown, or whose shape does not match its role, is kept as an
:class:`UnknownMessage` holding the decoded JSON object, so nothing is lost and it still counts in
the context like pi counts it.

The fields pi always writes (``stopReason``, ``isError``, the usage counts...) default through
:func:`msgspec.field` factories that count their calls (:func:`defaults_used`): a record decoded from
a line where one was absent would gain it when written back, and the count is how the codec tells,
without a second look at the line (see ``_codec.entry_from_line``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Literal, TypeAlias, TypeVar

import msgspec
from msgspec import UNSET, UnsetType


__all__ = (
    "AgentMessage",
    "AssistantContent",
    "AssistantMessage",
    "BashExecutionMessage",
    "BranchSummaryMessage",
    "CompactionSummaryMessage",
    "ContentBlock",
    "Cost",
    "CustomMessage",
    "ImageContent",
    "StopReason",
    "SystemMessage",
    "SystemSections",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "ToolDeclaration",
    "ToolReference",
    "ToolResultMessage",
    "UnknownMessage",
    "Usage",
    "UserContent",
    "UserMessage",
)

Number: TypeAlias = int | float
_T = TypeVar("_T")


class _DefaultsUsed(threading.local):
    """Per thread: how many defaults of written fields were filled in (see :func:`defaults_used`)."""

    count = 0


_DEFAULTS_USED = _DefaultsUsed()


def defaults_used() -> int:
    """
    How many times, in this thread, a record field that is always written got its default because
    it was not given: not passed to a constructor, or absent from the JSON a record was decoded from.

    The difference across a decode is ``0`` exactly when the JSON held every such field (used by the
    codec to keep a decoded record only when it writes back what was read, pi-format spec §5.10).
    """
    return _DEFAULTS_USED.count


def _written_default(value: _T) -> Callable[[], _T]:
    """A default factory for a field that is always written: returns ``value`` (immutable), counted."""

    def default() -> _T:
        _DEFAULTS_USED.count += 1
        return value

    return default


def _counted(factory: Callable[[], _T]) -> Callable[[], _T]:
    """``factory`` (a record type built with its defaults), counted like :func:`_written_default`."""

    def default() -> _T:
        _DEFAULTS_USED.count += 1
        return factory()

    return default


def _zero() -> int:
    """The default of a count or cost that is always written (``0``), counted."""
    _DEFAULTS_USED.count += 1
    return 0


StopReason: TypeAlias = Literal["stop", "length", "toolUse", "error", "aborted"]


class _Block(
    msgspec.Struct, frozen=True, kw_only=True, rename="camel", tag_field="type", forbid_unknown_fields=True
):
    """Base of content blocks: tagged on ``type``; a block with unknown fields does not decode."""

    @property
    def type(self) -> str:
        """The wire ``type`` (``"text"``, ``"thinking"``, ``"image"``, ``"toolCall"``); read-only."""
        return self.__struct_config__.tag  # type: ignore[return-value]


class TextContent(_Block, tag="text", frozen=True, kw_only=True):
    """
    A text block: ``{"type": "text", "text": ..., "textSignature"?: ...}`` (spec §6.1).

    Attributes:
        text: The text.
        text_signature: Provider message id or ``{v:1,id,phase?}`` JSON string (OpenAI Responses).
    """

    text: str
    text_signature: str | UnsetType = UNSET


class ThinkingContent(_Block, tag="thinking", frozen=True, kw_only=True):
    """
    A thinking (reasoning) block (spec §6.1).

    Attributes:
        thinking: The reasoning text (may be empty).
        thinking_signature: Anthropic signature or OpenAI reasoning item JSON.
        redacted: ``True`` when the opaque payload lives in ``thinking_signature``.
    """

    thinking: str
    thinking_signature: str | UnsetType = UNSET
    redacted: bool | UnsetType = UNSET


class ImageContent(_Block, tag="image", frozen=True, kw_only=True):
    """
    An image block: base64 ``data`` and its ``mime_type`` (spec §6.1).

    Attributes:
        data: Base64-encoded image bytes.
        mime_type: e.g. ``"image/png"``.
    """

    data: str
    mime_type: str


class ToolCall(_Block, tag="toolCall", frozen=True, kw_only=True):
    """
    A tool call inside an assistant message (spec §6.1).

    Attributes:
        id: The tool call id; the matching :class:`ToolResultMessage` carries it as ``tool_call_id``.
        name: The tool name.
        arguments: The JSON arguments object, key order preserved.
        thought_signature: Google's thought signature, when present.
    """

    id: str
    name: str
    arguments: dict[str, Any]
    thought_signature: str | UnsetType = UNSET


UserContent: TypeAlias = TextContent | ImageContent
AssistantContent: TypeAlias = TextContent | ThinkingContent | ToolCall
ContentBlock: TypeAlias = TextContent | ThinkingContent | ImageContent | ToolCall


class Cost(msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """
    Cost of one reply in USD, split like :class:`Usage` (spec §6.3); every amount defaults to ``0``.

    ``total_from_provider`` (pi 1.6): ``True`` when ``total`` is the billed cost the provider reported;
    absent in older files (means ``False``).
    """

    input: Number = msgspec.field(default_factory=_zero)
    output: Number = msgspec.field(default_factory=_zero)
    cache_read: Number = msgspec.field(default_factory=_zero)
    cache_write: Number = msgspec.field(default_factory=_zero)
    total: Number = msgspec.field(default_factory=_zero)
    total_from_provider: bool | UnsetType = UNSET


class Usage(msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """
    Token usage reported by the provider for one reply (spec §6.3); the counts default to ``0``, the
    cost to ``Cost()`` (all zero).

    Attributes:
        input: Input tokens (provider semantics; Anthropic excludes cache reads/writes).
        output: Output tokens.
        cache_read: Tokens read from the prompt cache.
        cache_write: Tokens written to the prompt cache.
        cache_write_1h: Subset of ``cache_write`` with 1h retention (pi 1.6, Anthropic only; wire
            ``cacheWrite1h``).
        reasoning: Reasoning tokens, a subset of ``output`` (pi 1.6, when the provider reports them).
        total_tokens: Total as reported or computed by pi; absent in old files.
        cost: Cost in USD.
    """

    input: int = msgspec.field(default_factory=_zero)
    output: int = msgspec.field(default_factory=_zero)
    cache_read: int = msgspec.field(default_factory=_zero)
    cache_write: int = msgspec.field(default_factory=_zero)
    cache_write_1h: int | UnsetType = msgspec.field(default=UNSET, name="cacheWrite1h")
    reasoning: int | UnsetType = UNSET
    total_tokens: int | UnsetType = UNSET
    cost: Cost = msgspec.field(default_factory=_counted(Cost))


class _Message(
    msgspec.Struct, frozen=True, kw_only=True, rename="camel", tag_field="role", forbid_unknown_fields=True
):
    """
    Base of messages: tagged on ``role``.

    Unknown fields are refused when decoding, so a message with fields this library does not know is
    kept as an :class:`UnknownMessage` (lossless) instead of losing them.
    """

    @property
    def role(self) -> str:
        """The wire ``role`` (``"user"``, ``"assistant"``, ``"toolResult"``, ...); read-only (issue 11)."""
        return self.__struct_config__.tag  # type: ignore[return-value]


class UserMessage(_Message, tag="user", frozen=True, kw_only=True):
    """
    A user turn (spec §6.2).

    Attributes:
        content: A plain string, or text/image blocks (pi's own prompts use blocks).
        timestamp: Unix time in ms.
    """

    content: str | list[UserContent]
    timestamp: Number


class AssistantMessage(_Message, tag="assistant", frozen=True, kw_only=True):
    """
    A model reply (spec §6.3). Error and aborted replies are stored too.

    Attributes:
        content: Text, thinking and tool-call blocks (may be empty).
        api: Wire API (``"anthropic-messages"``, ``"openai-responses"``, ...).
        provider: Provider id (``"anthropic"``, ``"openai"``, ...).
        model: Requested model id.
        usage: Token usage and cost (default: all zero).
        stop_reason: ``stop | length | toolUse | error | aborted`` (default ``"stop"``).
        timestamp: Unix time in ms (default ``0``).
        error_message: Set for ``error`` and usually ``aborted``.
        response_id: Provider response id (pi 0.73.1).
        response_model: Concrete model when it differs from ``model`` (pi 0.73.1).
        diagnostics: Provider diagnostics (pi 0.73.1), kept as JSON objects.
        provider_thinking_level: Provider-native effort level used (pi 1.6).
        raw_stop_reason: The provider's own stop reason (pi 1.6).
        end_turn: Whether the model explicitly ended its turn (pi 1.6).
        duration_ms: Milliseconds from ``timestamp`` until the response ended (pi 1.6).
        thinking_level: pi thinking level the agent loop requested (pi 1.6; written after
            ``durationMs``, as pi's agent loop adds it).
    """

    content: list[AssistantContent]
    api: str
    provider: str
    model: str
    usage: Usage = msgspec.field(default_factory=_counted(Usage))
    stop_reason: StopReason | str = msgspec.field(default_factory=_written_default("stop"))
    timestamp: Number = msgspec.field(default_factory=_zero)
    error_message: str | UnsetType = UNSET
    response_id: str | UnsetType = UNSET
    response_model: str | UnsetType = UNSET
    diagnostics: list[dict[str, Any]] | UnsetType = UNSET
    provider_thinking_level: str | UnsetType = UNSET
    raw_stop_reason: str | UnsetType = UNSET
    end_turn: bool | UnsetType = UNSET
    duration_ms: Number | UnsetType = UNSET
    thinking_level: str | UnsetType = UNSET


class ToolResultMessage(_Message, tag="toolResult", frozen=True, kw_only=True):
    """
    The result of one tool call (spec §6.4).

    Attributes:
        tool_call_id: Id of the :class:`ToolCall` this answers.
        tool_name: Name of the tool.
        content: Text and image blocks.
        details: Tool-specific JSON (never sent to the model).
        is_error: Whether the tool failed (default ``False``).
        timestamp: Unix time in ms (default ``0``).
        usage: Usage of the tool execution itself (pi 1.6; not context accounting).
        nested_calls: Calls this tool made to other tools (pi 1.6), kept as JSON.
        duration_ms: Milliseconds the tool's execution took (pi 1.6).
    """

    tool_call_id: str
    tool_name: str
    content: list[UserContent]
    is_error: bool = msgspec.field(default_factory=_written_default(False))
    timestamp: Number = msgspec.field(default_factory=_zero)
    details: Any | UnsetType = UNSET
    usage: Usage | UnsetType = UNSET
    nested_calls: Any | UnsetType = UNSET
    duration_ms: Number | UnsetType = UNSET


class ToolDeclaration(msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """
    A tool the model may call, as pi 1.6 declares it in a system message (pi-ai ``Tool``).

    Attributes:
        name: The tool name.
        description: What the tool does (sent to the model).
        parameters: JSON Schema of the arguments, key order preserved.
        constrained_sampling: ``False`` or a provider constrained-sampling config such as
            ``{"type": "json_schema", "strict": "prefer"}``; absent when not set.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    constrained_sampling: Literal[False] | dict[str, Any] | UnsetType = UNSET


class ToolReference(msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """A tool that stops being available (pi 1.6 ``ToolReference``: ``{"name": ...}``)."""

    name: str


SystemSections: TypeAlias = dict[str, str | None]
"""Named prompt sections of a system message: a text replaces the section, ``None`` removes it (pi 1.6)."""


class SystemMessage(_Message, tag="system", frozen=True, kw_only=True):
    """
    The system prompt and tool loadout, or a patch of them (pi 1.6 ``role: "system"``).

    The first system message on a branch declares the prompt; later ones replace sections by name
    (``None`` removes one) and add or remove tools. pi 1.6 drops system messages inside a compaction's
    kept range from the context (the compaction carries the complete state as its ``systemMessage``).
    pi 0.73.1 passes them through like any message.

    Attributes:
        content: Instruction text (pi writes ``""`` and puts the prompt in ``sections``); a
            ``None`` is projected as ``""`` by pi 1.6.
        sections: Named, ordered sections rendered after ``content``.
        timestamp: Unix time in ms.
        tools_added: Complete declarations of tools that become available here.
        tools_removed: Tools that stop being available here.
    """

    content: str | list[TextContent] | None
    sections: SystemSections | UnsetType = UNSET
    timestamp: Number
    tools_added: list[ToolDeclaration] | UnsetType = UNSET
    tools_removed: list[ToolReference] | UnsetType = UNSET


class BashExecutionMessage(_Message, tag="bashExecution", frozen=True, kw_only=True):
    """
    A user ``!cmd`` / ``!!cmd`` shell command and its output (spec §6.5).

    Attributes:
        command: The command line.
        output: Its output (possibly truncated).
        exit_code: Exit status, ``None``/absent when unknown.
        cancelled: Whether it was cancelled (default ``False``).
        truncated: Whether ``output`` was truncated (default ``False``).
        timestamp: Unix time in ms (default ``0``).
        full_output_path: Where the full output was saved, when truncated.
        exclude_from_context: ``True`` for ``!!cmd``: not sent to the model.
    """

    command: str
    output: str
    exit_code: int | UnsetType | None = UNSET
    cancelled: bool = msgspec.field(default_factory=_written_default(False))
    truncated: bool = msgspec.field(default_factory=_written_default(False))
    full_output_path: str | UnsetType = UNSET
    timestamp: Number = msgspec.field(default_factory=_zero)
    exclude_from_context: bool | UnsetType = UNSET


class CustomMessage(_Message, tag="custom", frozen=True, kw_only=True):
    """
    An extension-injected message (spec §6.5); built from a ``custom_message`` entry.

    Attributes:
        custom_type: The extension's identifier.
        content: String or text/image blocks; sent to the model as a user message.
        display: UI hint only (hidden messages are still sent).
        details: Extension metadata, never sent.
        timestamp: Unix time in ms (default ``0``).
    """

    custom_type: str
    content: str | list[UserContent]
    display: bool
    details: Any | UnsetType = UNSET
    timestamp: Number = msgspec.field(default_factory=_zero)


class BranchSummaryMessage(_Message, tag="branchSummary", frozen=True, kw_only=True):
    """
    Synthesised from a non-empty ``branch_summary`` entry (spec §9 item 4).

    Attributes:
        summary: The summary text.
        from_id: The entry id the summary was attached at, or ``"root"``.
        timestamp: ``Date.parse`` of the entry timestamp, in ms.
    """

    summary: str
    from_id: str
    timestamp: Number


class CompactionSummaryMessage(_Message, tag="compactionSummary", frozen=True, kw_only=True):
    """
    Synthesised from the latest ``compaction`` entry on the path (spec §9 item 6a).

    Attributes:
        summary: The summary text.
        tokens_before: Estimated context tokens before that compaction.
        timestamp: ``Date.parse`` of the entry timestamp, in ms.
    """

    summary: str
    tokens_before: Number
    timestamp: Number


class _RawJsonRecord:
    """
    A record kept as its decoded JSON object (:class:`UnknownMessage`, ``UnknownEntry``): equal to a record
    of its class with an equal ``raw``, unhashable (``raw`` is a dict), shown as ``Class({...})``.
    """

    __slots__ = ("raw",)

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw: dict[str, Any] = raw

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _RawJsonRecord) and type(other) is type(self) and other.raw == self.raw

    def __hash__(self) -> int:  # pragma: no cover - raw dicts are unhashable by design
        raise TypeError(f"{type(self).__name__} is unhashable")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.raw!r})"


class UnknownMessage(_RawJsonRecord):
    """
    A message with an unknown role, or whose fields do not fit its role's record.

    It is kept as the decoded JSON object and written back unchanged, so files from newer or other
    writers survive a round trip, and it takes part in the context like any message (spec §9 item 4).

    Attributes:
        raw: The JSON object as decoded.
    """

    __slots__ = ()

    @property
    def role(self) -> str | None:
        """The ``role`` value, if it is a string."""
        role = self.raw.get("role")
        return role if isinstance(role, str) else None


KnownMessage: TypeAlias = (
    SystemMessage
    | UserMessage
    | AssistantMessage
    | ToolResultMessage
    | BashExecutionMessage
    | CustomMessage
    | BranchSummaryMessage
    | CompactionSummaryMessage
)
AgentMessage: TypeAlias = KnownMessage | UnknownMessage
