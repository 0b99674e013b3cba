"""
The wire records: what one line of a pi session transcript holds, and how it is read and written.

The bottom layer of sessionkeeper: every other package imports these records, and this package imports
no other part of sessionkeeper. It holds

- the message and content-block records (:class:`UserMessage`, :class:`AssistantMessage`,
  :class:`ToolResultMessage`, ... pi-format spec §6),
- the transcript entry records and the session header (:class:`MessageEntry`, :class:`CompactionEntry`,
  :class:`SessionHeader`, ... spec §3-5),
- the codec between JSON lines and records (:func:`entry_from_line`, :func:`entry_from_json`,
  :func:`encode_entry`, ...), which keeps unknown entry types, roles and fields byte for byte,
- the JavaScript semantics the format is defined in (``utf16_len``, ``js_json_stringify``,
  ``js_number_to_string``, ``iso_from_ms``, ``parse_iso_ms``, ``js_date_ms``: importable from here for the
  other layers, internal).

On-disk keys are pi's camelCase; record fields are their snake_case form.
"""

from __future__ import annotations

from sessionkeeper.records._codec import decode_json_line as decode_json_line
from sessionkeeper.records._codec import (
    encode_entry,
    encode_message,
    entry_from_json,
    entry_from_line,
    entry_to_builtins,
    message_from_json,
    message_to_builtins,
)
from sessionkeeper.records._codec import encode_header as encode_header
from sessionkeeper.records._codec import has_lone_surrogate as has_lone_surrogate
from sessionkeeper.records._codec import header_from_json as header_from_json
from sessionkeeper.records._codec import scrub_surrogates as scrub_surrogates
from sessionkeeper.records._codec import typed_entries_from_lines as typed_entries_from_lines
from sessionkeeper.records._codec import typed_entry_from_line as typed_entry_from_line
from sessionkeeper.records._entries import (
    CURRENT_SESSION_VERSION,
    BooleanId,
    BranchSummaryEntry,
    CompactionEntry,
    ContextEditEntry,
    ContextEditReplacement,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    NonStringId,
    NumberId,
    SessionHeader,
    SessionInfoEntry,
    ThinkingLevel,
    ThinkingLevelChangeEntry,
    TranscriptEntry,
    UnknownEntry,
    UsageEntry,
    key_to_json,
)
from sessionkeeper.records._entries import entry_key as entry_key
from sessionkeeper.records._ids import uuid7 as uuid7
from sessionkeeper.records._jscompat import iso_from_ms as iso_from_ms
from sessionkeeper.records._jscompat import js_date_ms as js_date_ms
from sessionkeeper.records._jscompat import js_json_stringify as js_json_stringify
from sessionkeeper.records._jscompat import js_number_to_string as js_number_to_string
from sessionkeeper.records._jscompat import parse_iso_ms as parse_iso_ms
from sessionkeeper.records._jscompat import slice_utf16_safe as slice_utf16_safe
from sessionkeeper.records._jscompat import utf16_len as utf16_len
from sessionkeeper.records._messages import (
    AgentMessage,
    AssistantContent,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    ContentBlock,
    Cost,
    CustomMessage,
    ImageContent,
    StopReason,
    SystemMessage,
    SystemSections,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolDeclaration,
    ToolReference,
    ToolResultMessage,
    UnknownMessage,
    Usage,
    UserContent,
    UserMessage,
)
from sessionkeeper.records._messages import KnownMessage as KnownMessage


__all__ = (
    "CURRENT_SESSION_VERSION",
    "AgentMessage",
    "AssistantContent",
    "AssistantMessage",
    "BashExecutionMessage",
    "BooleanId",
    "BranchSummaryEntry",
    "BranchSummaryMessage",
    "CompactionEntry",
    "CompactionSummaryMessage",
    "ContentBlock",
    "ContextEditEntry",
    "ContextEditReplacement",
    "Cost",
    "CustomEntry",
    "CustomMessage",
    "CustomMessageEntry",
    "ImageContent",
    "LabelEntry",
    "MessageEntry",
    "ModelChangeEntry",
    "NonStringId",
    "NumberId",
    "SessionHeader",
    "SessionInfoEntry",
    "StopReason",
    "SystemMessage",
    "SystemSections",
    "TextContent",
    "ThinkingContent",
    "ThinkingLevel",
    "ThinkingLevelChangeEntry",
    "ToolCall",
    "ToolDeclaration",
    "ToolReference",
    "ToolResultMessage",
    "TranscriptEntry",
    "UnknownEntry",
    "UnknownMessage",
    "Usage",
    "UsageEntry",
    "UserContent",
    "UserMessage",
    "encode_entry",
    "encode_message",
    "entry_from_json",
    "entry_from_line",
    "entry_to_builtins",
    "key_to_json",
    "message_from_json",
    "message_to_builtins",
)


from sessionkeeper.records._public import set_public_module as set_public_module  # for every package


set_public_module(globals())
