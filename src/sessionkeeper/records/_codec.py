"""
JSON <-> record conversion for transcript lines (pi-format spec §2-6), lossless by construction.

A line becomes a typed record only when the record can write back exactly what was read. Otherwise it
is kept as :class:`UnknownEntry` / :class:`UnknownMessage` holding the decoded JSON object itself.
"Exactly" means:

- no field the record does not know (the records refuse unknown fields);
- every field the record would write with a default value is present in the JSON (an assistant message
  without ``usage`` would otherwise gain ``"usage": {...zeros}`` when written back or shown);
- the values have the record's types (a known ``type`` with an unexpected shape is not an error).

:func:`entry_from_line` decodes a line once, straight into the typed records (msgspec tagged unions on
``type`` and ``role``): the records refuse unknown fields and wrong types, and the fields they always
write default through counted factories (``_messages.defaults_used``), so a decode that filled none in
proves the second point; any other line takes the path through the decoded object
(:func:`entry_from_json`), so both give the same record for every line.

Encoding writes pi's ``JSON.stringify`` form: compact, non-ASCII raw, optional fields absent. Lone UTF-16
surrogates cannot be stored in UTF-8: they are replaced by U+FFFD before writing (field report B02), so
every line this library writes is valid UTF-8 JSON.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import msgspec

from sessionkeeper.records._entries import (
    BooleanId,
    BranchSummaryEntry,
    CompactionEntry,
    ContextEditEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    NumberId,
    SessionHeader,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    TranscriptEntry,
    UnknownEntry,
    UsageEntry,
)
from sessionkeeper.records._messages import (
    _DEFAULTS_USED,
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    KnownMessage,
    SystemMessage,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
)


__all__ = (
    "decode_json_line",
    "encode_entry",
    "encode_header",
    "encode_message",
    "entry_from_json",
    "entry_from_line",
    "entry_to_builtins",
    "has_lone_surrogate",
    "header_from_json",
    "message_from_json",
    "message_to_builtins",
    "scrub_surrogates",
    "typed_entries_from_lines",
    "typed_entry_from_line",
)

_ENTRY_TYPES: Final[dict[str, type[Any]]] = {
    "thinking_level_change": ThinkingLevelChangeEntry,
    "model_change": ModelChangeEntry,
    "compaction": CompactionEntry,
    "branch_summary": BranchSummaryEntry,
    "custom": CustomEntry,
    "custom_message": CustomMessageEntry,
    "label": LabelEntry,
    "session_info": SessionInfoEntry,
    "usage": UsageEntry,
    "context_edit": ContextEditEntry,
}

_MESSAGE_TYPES: Final[dict[str, type[Any]]] = {
    "user": UserMessage,
    "assistant": AssistantMessage,
    "toolResult": ToolResultMessage,
    "bashExecution": BashExecutionMessage,
    "custom": CustomMessage,
    "branchSummary": BranchSummaryMessage,
    "compactionSummary": CompactionSummaryMessage,
    "system": SystemMessage,
}

# Keys a record writes even when they were absent (their default is not UNSET): they must be present.
_REQUIRED_PRESENT: Final[dict[str, tuple[str, ...]]] = {
    "assistant": ("usage", "stopReason", "timestamp"),
    "toolResult": ("isError", "timestamp"),
    "bashExecution": ("cancelled", "truncated", "timestamp"),
    "custom": ("timestamp",),
}
_USAGE_KEYS: Final = ("input", "output", "cacheRead", "cacheWrite", "cost")
_COST_KEYS: Final = ("input", "output", "cacheRead", "cacheWrite", "total")
_MESSAGE_ENTRY_KEYS: Final = frozenset({"type", "id", "parentId", "timestamp", "message"})
_HEADER_KEYS: Final = ("version", "id", "timestamp", "cwd", "parentSession")

_LONE_SURROGATE = re.compile(r"[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")


def has_lone_surrogate(text: str) -> bool:
    """Return ``True`` when ``text`` holds a UTF-16 surrogate that is not part of a valid pair."""
    return not text.isascii() and _LONE_SURROGATE.search(text) is not None


def _scrub_text(value: str) -> str:
    if value.isascii():
        return value
    # Python strings never hold a *pair* of surrogate code points once joined by json/msgspec, but
    # strings built by callers may: join valid pairs first, then replace what is left.
    if any("\ud800" <= ch <= "\udfff" for ch in value):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return value


def scrub_surrogates(value: Any) -> Any:
    """
    Return ``value`` (any JSON value) with every lone surrogate replaced by U+FFFD (field report B02).

    Valid pairs (``"\\ud83d\\ude00"``) are joined into the astral character they encode. Containers
    are copied. Iterative: any nesting depth the JSON decoder accepted is walked (no recursion limit).
    """
    if isinstance(value, str):
        return _scrub_text(value)
    if not isinstance(value, dict | list):
        return value
    holder: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, holder, 0)]
    while stack:
        source, parent, slot = stack.pop()
        pending: list[tuple[Any, Any, Any]] = []
        if isinstance(source, dict):
            copy: dict[str, Any] = {}
            for key, item in source.items():
                new_key = _scrub_text(key)
                if isinstance(item, dict | list):
                    copy[new_key] = None
                    pending.append((item, copy, new_key))
                else:
                    copy[new_key] = _scrub_text(item) if isinstance(item, str) else item
            parent[slot] = copy
        else:
            items: list[Any] = list(source)
            for n, item in enumerate(items):
                if isinstance(item, dict | list):
                    pending.append((item, items, n))
                elif isinstance(item, str):
                    items[n] = _scrub_text(item)
            parent[slot] = items
        stack.extend(reversed(pending))  # filled in order: a later duplicate key still wins
    return holder[0]


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, UnknownMessage | UnknownEntry):
        return obj.raw
    if isinstance(obj, NumberId | BooleanId):  # a non-string id is written back as its JSON value, as pi
        return obj.to_json()
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


_ENCODER = msgspec.json.Encoder(enc_hook=_enc_hook)


def _encode(value: Any) -> bytes:
    try:
        return _ENCODER.encode(value)
    except UnicodeEncodeError:
        return _ENCODER.encode(scrub_surrogates(msgspec.to_builtins(value, enc_hook=_enc_hook)))


def encode_entry(entry: TranscriptEntry) -> bytes:
    """
    Encode one entry as its JSONL line, without the trailing newline (pi's ``JSON.stringify`` form).

    Lone surrogates become U+FFFD (see module docstring).
    """
    return _encode(entry)


def encode_header(header: SessionHeader | dict[str, Any]) -> bytes:
    """Encode the header line (a typed header, or the header JSON object as read), without newline."""
    return _encode(header)


def encode_message(message: AgentMessage) -> bytes:
    """Encode one message as compact JSON (the shape pi's ``SessionContext.messages`` items have)."""
    return _encode(message)


def message_to_builtins(message: AgentMessage) -> Any:
    """Return ``message`` as plain JSON values (dicts with pi's camelCase keys, in pi's order)."""
    if isinstance(message, UnknownMessage):
        return message.raw
    return msgspec.to_builtins(message, enc_hook=_enc_hook)


def entry_to_builtins(entry: TranscriptEntry | SessionHeader) -> Any:
    """Return an entry (or header) as plain JSON values, with pi's camelCase keys in pi's order."""
    if isinstance(entry, UnknownEntry):
        return entry.raw
    return msgspec.to_builtins(entry, enc_hook=_enc_hook)


def decode_json_line(line: bytes) -> tuple[Any, bool, bool]:
    """
    Decode one JSONL line the way pi's reader does (``JSON.parse`` on the UTF-8 decoded text).

    Returns:
        ``(value, bad_utf8, lone_surrogates)``: the decoded value with lone surrogates replaced by
        U+FFFD; whether invalid UTF-8 bytes were replaced by U+FFFD (as Node's UTF-8 decoder does);
        whether lone surrogate escapes were found.

    Numbers are read as ``JSON.parse`` reads them where Python cannot hold them exactly: an integer
    literal longer than Python's int-digits limit (4,300 digits) and a number beyond the double range
    (``1e400``) become ``float`` (``inf`` / ``-inf``, JavaScript's ``Infinity``), never an error
    (issue 15 item 2). Shorter integers stay exact ``int``; the line's bytes are what the index keeps.

    Raises:
        ValueError: The line is not valid JSON (``msgspec.DecodeError`` / ``json.JSONDecodeError``), or
            it is nested too deeply to decode (about 1000 levels: read as an invalid line).
    """
    try:
        return msgspec.json.decode(line), False, False
    except msgspec.DecodeError:
        pass
    except RecursionError as err:
        raise ValueError("JSON nested too deeply") from err
    bad_utf8 = False
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        text = line.decode("utf-8", "replace")
        bad_utf8 = True
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_int=_js_int)
    except RecursionError as err:
        raise ValueError("JSON nested too deeply") from err
    try:
        scrubbed = scrub_surrogates(value)
        lone = _contains_lone(value)
    except RecursionError as err:  # json's C decoder went deeper than these walks can
        raise ValueError("JSON nested too deeply") from err
    return scrubbed, bad_utf8, lone


_INT_DIGITS_LIMIT: Final = 4300  # Python's default int <-> str conversion limit (sys.int_info)


def _js_int(text: str) -> int | float:
    """An integer literal: exact when Python may convert it, else the double ``JSON.parse`` reads
    (``float(text)`` has no digits limit: ``inf`` / ``-inf`` beyond the double range)."""
    if len(text) <= _INT_DIGITS_LIMIT:
        return int(text)
    return float(text)


def _reject_constant(name: str) -> Any:
    """``NaN``, ``Infinity`` and ``-Infinity`` are not JSON: ``JSON.parse`` (pi) rejects the line."""
    raise ValueError(f"not JSON: {name}")


def _contains_lone(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if has_lone_surrogate(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _usage_complete(usage: Any) -> bool:
    """A usage object has every key :class:`Usage` writes with a default (else it would gain them)."""
    if not isinstance(usage, dict) or any(key not in usage for key in _USAGE_KEYS):
        return False
    cost = usage["cost"]
    return isinstance(cost, dict) and all(key in cost for key in _COST_KEYS)


def _complete(role: str, raw: dict[str, Any]) -> bool:
    if "usage" in raw and not _usage_complete(raw["usage"]):  # assistant, and pi 1.6 tool results
        return False
    required = _REQUIRED_PRESENT.get(role)
    if required is None:
        return True
    return all(key in raw for key in required)


def message_from_json(raw: dict[str, Any]) -> AgentMessage:
    """
    Turn a decoded message object into its typed record, or an :class:`UnknownMessage` (lossless).

    Args:
        raw: The ``message`` value of a ``message`` entry (normally a dict with a ``role``).

    Returns:
        The typed record when the object round-trips exactly through it (see module docstring),
        otherwise ``UnknownMessage(raw)``.
    """
    role = raw.get("role")
    if not isinstance(role, str):
        return UnknownMessage(raw)
    cls = _MESSAGE_TYPES.get(role)
    if cls is None or not _complete(role, raw):
        return UnknownMessage(raw)
    try:
        result: KnownMessage = msgspec.convert(raw, cls)
    except msgspec.ValidationError:
        return UnknownMessage(raw)
    return result


def entry_from_json(raw: dict[str, Any]) -> TranscriptEntry:
    """
    Turn a decoded entry object (not the header) into its typed record, or an :class:`UnknownEntry`.

    A ``message`` entry whose message has an unknown role or shape keeps the typed
    :class:`MessageEntry` with an :class:`UnknownMessage` inside; an entry of a known type whose own
    fields do not fit becomes an :class:`UnknownEntry` (pi-format spec §5.10, lossless).
    """
    kind = raw.get("type")
    if kind == "message":
        if (
            raw.keys() <= _MESSAGE_ENTRY_KEYS
            and isinstance(raw.get("id"), str)
            and "parentId" in raw
            and (raw["parentId"] is None or isinstance(raw["parentId"], str))
            and isinstance(raw.get("timestamp"), str)
            and isinstance(raw.get("message"), dict)
        ):
            return MessageEntry(
                id=raw["id"],
                parent_id=raw["parentId"],
                timestamp=raw["timestamp"],
                message=message_from_json(raw["message"]),
            )
        return UnknownEntry(raw)
    cls = _ENTRY_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None or "parentId" not in raw:
        return UnknownEntry(raw)
    if "usage" in raw and not _usage_complete(raw["usage"]):  # pi 1.6 usage / compaction / summary
        return UnknownEntry(raw)
    try:
        entry: TranscriptEntry = msgspec.convert(raw, cls)
    except msgspec.ValidationError:
        return UnknownEntry(raw)
    return entry


def header_from_json(raw: dict[str, Any]) -> SessionHeader:
    """
    Build the typed header from the header object (extra legacy keys are ignored, spec §3).

    The caller keeps ``raw`` to write the header back unchanged.

    Raises:
        msgspec.ValidationError: A known header field has the wrong type.
    """
    known: dict[str, Any] = {key: raw[key] for key in _HEADER_KEYS if key in raw}
    known["type"] = "session"
    if not isinstance(known.get("timestamp"), str):
        known["timestamp"] = ""
    if "version" in known and (not isinstance(known["version"], int) or isinstance(known["version"], bool)):
        known.pop("version")  # null, true, 3.0, "3"...: pi reads them (the loader decides the migrations)
    for key in ("cwd", "parentSession"):
        if key in known and not isinstance(known[key], str):
            known.pop(key)
    return msgspec.convert(known, SessionHeader)


class _WireMessageEntry(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    rename="camel",
    tag_field="type",
    tag="message",
    forbid_unknown_fields=True,
):
    """A ``message`` entry as decoded by :func:`entry_from_line`: only known messages (the typed
    decode cannot hold an :class:`UnknownMessage`); it becomes a :class:`MessageEntry`."""

    id: str
    parent_id: str | None
    timestamp: str
    message: KnownMessage


_LINE_DECODER: Final = msgspec.json.Decoder(
    _WireMessageEntry
    | ThinkingLevelChangeEntry
    | ModelChangeEntry
    | CompactionEntry
    | BranchSummaryEntry
    | CustomEntry
    | CustomMessageEntry
    | LabelEntry
    | SessionInfoEntry
    | UsageEntry
    | ContextEditEntry
)
_DEFAULTS: Final = _DEFAULTS_USED  # the per-thread count of defaulted written fields


def _object_of_line(line: bytes) -> Any:
    try:
        return msgspec.json.decode(line)
    except msgspec.DecodeError:
        return decode_json_line(line)[0]


def typed_entry_from_line(line: bytes) -> TranscriptEntry | None:
    """
    The typed record of an entry line when one decode proves it (see :func:`entry_from_line`), else
    ``None``: a line that is not JSON, not an object, of an unknown type, role or shape, or that lacks a
    field its record always writes (the caller reads such a line the careful way). Never an
    :class:`UnknownEntry`, nor a :class:`MessageEntry` holding an :class:`UnknownMessage`.
    """
    counter = _DEFAULTS
    before = counter.count
    try:
        value = _LINE_DECODER.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return None
    if counter.count != before:
        return None
    if type(value) is _WireMessageEntry:
        return MessageEntry(
            id=value.id, parent_id=value.parent_id, timestamp=value.timestamp, message=value.message
        )
    return value  # type: ignore[no-any-return]


def typed_entries_from_lines(lines: list[bytes]) -> tuple[list[TranscriptEntry | None], bool]:
    """
    :func:`typed_entry_from_line` of every line, in order, and whether none is ``None``: in one pass
    at C speed when every line is a typed record (one decoder call per line from C, one check of the
    defaults counter for the batch, one rebuild per message entry), for the loader and the readers.

    A batch where a line does not decode, or where some field was defaulted, is decoded again line by
    line, so each item is exactly :func:`typed_entry_from_line` of its line (``None`` for a line to
    read the careful way, :func:`entry_from_line`).
    """
    counter = _DEFAULTS
    before = counter.count
    try:
        values: list[Any] = list(map(_LINE_DECODER.decode, lines))
    except (msgspec.DecodeError, RecursionError):
        values = []
    else:
        if counter.count == before:
            wire = _WireMessageEntry
            return [
                MessageEntry(id=v.id, parent_id=v.parent_id, timestamp=v.timestamp, message=v.message)
                if type(v) is wire
                else v
                for v in values
            ], True
    del values
    entries = list(map(typed_entry_from_line, lines))
    return entries, all(entry is not None for entry in entries)


def entry_from_line(line: bytes) -> TranscriptEntry:
    """
    Decode one entry line (not the header; no newline) into its typed record, decoding it once.

    The same record as ``entry_from_json(json.loads(line))`` for every line (see the module docstring):
    the line is decoded straight into the typed records, which proves the types and that no field is
    unknown; the fields a record always writes default through counted factories
    (``_messages.defaults_used``), so an unchanged count proves none was absent. Any other line (an
    unknown type, role or field, such a field absent, invalid UTF-8, lone surrogates) takes the path
    through the decoded object, so unknown entries and messages are kept exactly as read.

    Args:
        line: The line's bytes; must hold a JSON object (the loader indexes only objects).

    Raises:
        ValueError: The line is not valid JSON (as :func:`decode_json_line`).
    """
    entry = typed_entry_from_line(line)
    return entry if entry is not None else entry_from_json(_object_of_line(line))
