"""
``SessionEntry``: one row of OpenClaw's ``sessions.json`` (spec openclaw.md §1.2), and its codec.

Its merge (§1.3) is in ``_entry_merge``, the load-time shape check (§1.1, §1.4) in ``_entry_shape``.

The record is a frozen ``msgspec.Struct`` with every field of OpenClaw 2026.7.35's ``SessionEntry`` type,
snake_case in Python and camelCase on disk. Optional fields default to ``msgspec.UNSET`` and are then
absent from the JSON. Keys this library does not know, and known keys whose value does not fit the
declared type, are kept verbatim in :attr:`SessionEntry.extra` and written back unchanged, so a round trip
through :func:`session_entry_from_dict` / :func:`session_entry_to_dict` loses nothing.

Encode entries with :func:`session_entry_to_dict` or :func:`encode_session_entry` (they flatten
``extra`` back into the object); a plain ``msgspec.json.encode(entry)`` would nest it under ``"~extra"``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, Literal, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

from sessionkeeper.exceptions import InvalidSessionEntryError
from sessionkeeper.store._jsontext import RawJsonValue


__all__ = (
    "ChatType",
    "SessionEntry",
    "SessionStatus",
    "codex_seconds_to_ms",
    "codex_thread_state",
    "encode_session_entry",
    "session_entry_from_dict",
    "session_entry_to_dict",
)

ChatType: TypeAlias = Literal["direct", "group", "channel"]
SessionStatus: TypeAlias = Literal["running", "done", "failed", "killed", "timeout"]

_EXTRA_WIRE_NAME: Final = "~extra"


class SessionEntry(
    msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True, repr_omit_defaults=True
):
    """
    One session's metadata in the store, keyed by session key (OpenClaw spec §1.2).

    Timestamps are integers in **milliseconds since the epoch**; token counts are tokens; costs are USD.
    Every field but :attr:`extra` maps to the camelCase key of the same name (``session_id`` ->
    ``sessionId``). Absent optional fields are ``msgspec.UNSET``.

    OpenClaw's type requires ``sessionId`` and ``updatedAt``, and every entry this library creates or
    merges (:func:`merge_session_entry`, :class:`~sessionkeeper.store.SessionStore`) has both. OpenClaw's
    loader nonetheless keeps rows without ``updatedAt`` (maintenance sorts them as oldest, §2.3) and
    removes a ``sessionId`` that is unsafe as a file name when no ``sessionFile`` is set (§1.1); such rows
    read from disk have ``UNSET`` there, so that they survive a rewrite unchanged.

    Nested objects (``origin``, ``deliveryContext``, ``route``, ``skillsSnapshot``, ...) are plain JSON
    values (``dict``/``list``), so their unknown sub-fields are preserved too.

    Attributes:
        extra: Unknown top-level keys, and known keys whose stored value did not match the declared type,
            as decoded JSON values keyed by their on-disk (camelCase) name. Written back unchanged.
    """

    # required by OpenClaw's type (see the class docstring for rows read from disk)
    session_id: str | UnsetType = UNSET
    updated_at: int | UnsetType = UNSET
    # lifecycle
    session_started_at: int | UnsetType = UNSET
    last_interaction_at: int | UnsetType = UNSET
    last_activity_at: int | UnsetType = UNSET
    archived_at: int | UnsetType = UNSET
    pinned_at: int | UnsetType = UNSET
    last_read_at: int | UnsetType = UNSET
    marked_unread_at: int | UnsetType = UNSET
    lifecycle_revision: str | UnsetType = UNSET
    started_at: int | UnsetType = UNSET
    ended_at: int | UnsetType = UNSET
    runtime_ms: int | UnsetType = UNSET
    status: SessionStatus | UnsetType = UNSET
    aborted_last_run: bool | UnsetType = UNSET
    system_sent: bool | UnsetType = UNSET
    abort_cutoff_message_sid: str | UnsetType = UNSET
    abort_cutoff_timestamp: int | UnsetType = UNSET
    restart_recovery_runs: list[Any] | UnsetType = UNSET
    # transcript
    session_file: str | UnsetType = UNSET
    usage_family_key: str | UnsetType = UNSET
    usage_family_session_ids: list[str] | UnsetType = UNSET
    # lineage
    spawned_by: str | UnsetType = UNSET
    spawned_workspace_dir: str | UnsetType = UNSET
    spawned_cwd: str | UnsetType = UNSET
    parent_session_key: str | UnsetType = UNSET
    forked_from_parent: bool | UnsetType = UNSET
    spawn_depth: int | UnsetType = UNSET
    subagent_role: Literal["orchestrator", "leaf"] | UnsetType = UNSET
    subagent_control_scope: Literal["children", "none"] | UnsetType = UNSET
    inherited_tool_deny: list[str] | UnsetType = UNSET
    inherited_tool_allow: list[str] | UnsetType = UNSET
    plugin_owner_id: str | UnsetType = UNSET
    # toggles
    chat_type: ChatType | UnsetType = UNSET
    thinking_level: str | UnsetType = UNSET
    fast_mode: bool | Literal["auto"] | UnsetType = UNSET
    verbose_level: str | UnsetType = UNSET
    trace_level: str | UnsetType = UNSET
    reasoning_level: str | UnsetType = UNSET
    elevated_level: str | UnsetType = UNSET
    tts_auto: Literal["off", "always", "inbound", "tagged"] | UnsetType = UNSET
    response_usage: Literal["on", "off", "tokens", "full"] | UnsetType = UNSET
    send_policy: Literal["allow", "deny"] | UnsetType = UNSET
    queue_mode: Literal["steer", "followup", "collect", "interrupt"] | UnsetType = UNSET
    queue_debounce_ms: int | UnsetType = UNSET
    queue_cap: int | UnsetType = UNSET
    queue_drop: Literal["old", "new", "summarize"] | UnsetType = UNSET
    group_activation: Literal["mention", "always"] | UnsetType = UNSET
    group_activation_needs_system_intro: bool | UnsetType = UNSET
    exec_host: str | UnsetType = UNSET
    exec_security: str | UnsetType = UNSET
    exec_ask: str | UnsetType = UNSET
    exec_node: str | UnsetType = UNSET
    # model selection
    provider_override: str | UnsetType = UNSET
    model_override: str | UnsetType = UNSET
    model_override_source: Literal["auto", "user"] | UnsetType = UNSET
    model_override_fallback_origin_provider: str | UnsetType = UNSET
    model_override_fallback_origin_model: str | UnsetType = UNSET
    auth_profile_override: str | UnsetType = UNSET
    auth_profile_override_source: Literal["auto", "user"] | UnsetType = UNSET
    auth_profile_override_compaction_count: int | UnsetType = UNSET
    agent_runtime_override: str | UnsetType = UNSET
    live_model_switch_pending: bool | UnsetType = UNSET
    model_provider: str | UnsetType = UNSET
    model: str | UnsetType = UNSET
    agent_harness_id: str | UnsetType = UNSET
    fallback_notice_selected_model: str | UnsetType = UNSET
    fallback_notice_active_model: str | UnsetType = UNSET
    fallback_notice_reason: str | UnsetType = UNSET
    # tokens and cost
    input_tokens: int | UnsetType = UNSET
    output_tokens: int | UnsetType = UNSET
    total_tokens: int | UnsetType = UNSET
    total_tokens_fresh: bool | UnsetType = UNSET
    cache_read: int | UnsetType = UNSET
    cache_write: int | UnsetType = UNSET
    estimated_cost_usd: float | UnsetType = UNSET
    context_tokens: int | UnsetType = UNSET
    context_budget_status: dict[str, Any] | UnsetType = UNSET
    # compaction and memory flush
    compaction_count: int | UnsetType = UNSET
    compaction_checkpoints: list[Any] | UnsetType = UNSET
    memory_flush_at: int | UnsetType = UNSET
    memory_flush_compaction_count: int | UnsetType = UNSET
    memory_flush_context_hash: str | UnsetType = UNSET
    memory_flush_failure_count: int | UnsetType = UNSET
    memory_flush_last_failed_at: int | UnsetType = UNSET
    memory_flush_last_failure_error: str | UnsetType = UNSET
    # routing and labels
    label: str | UnsetType = UNSET
    category: str | UnsetType = UNSET
    display_name: str | UnsetType = UNSET
    channel: str | UnsetType = UNSET
    group_id: str | UnsetType = UNSET
    subject: str | UnsetType = UNSET
    group_channel: str | UnsetType = UNSET
    space: str | UnsetType = UNSET
    origin: dict[str, Any] | UnsetType = UNSET
    route: dict[str, Any] | UnsetType = UNSET
    delivery_context: dict[str, Any] | UnsetType = UNSET
    last_channel: str | UnsetType = UNSET
    last_to: str | UnsetType = UNSET
    last_account_id: str | UnsetType = UNSET
    last_thread_id: str | int | UnsetType = UNSET
    ambient_transcript_watermarks: dict[str, Any] | UnsetType = UNSET
    # other
    cli_session_ids: dict[str, str] | UnsetType = UNSET
    cli_session_bindings: dict[str, Any] | UnsetType = UNSET
    claude_cli_session_id: str | UnsetType = UNSET
    skills_snapshot: dict[str, Any] | UnsetType = UNSET
    system_prompt_report: dict[str, Any] | UnsetType = UNSET
    plugin_extensions: dict[str, Any] | UnsetType = UNSET
    plugin_extension_slot_keys: dict[str, Any] | UnsetType = UNSET
    plugin_next_turn_injections: dict[str, Any] | UnsetType = UNSET
    plugin_debug_entries: list[Any] | UnsetType = UNSET
    goal: dict[str, Any] | UnsetType = UNSET
    pending_skill_suggestion: dict[str, Any] | UnsetType = UNSET
    quota_suspension: dict[str, Any] | UnsetType = UNSET
    subagent_recovery: dict[str, Any] | UnsetType = UNSET
    acp: dict[str, Any] | UnsetType = UNSET
    # everything else, verbatim
    extra: dict[str, Any] = msgspec.field(default_factory=dict, name=_EXTRA_WIRE_NAME)

    @property
    def is_archived(self) -> bool:
        """``True`` when :attr:`archived_at` is set (archived sessions are hidden from active lists)."""
        return self.archived_at is not UNSET

    @property
    def is_pinned(self) -> bool:
        """``True`` when :attr:`pinned_at` is set (pinned sessions list first)."""
        return self.pinned_at is not UNSET

    def get(self, wire_name: str, default: Any = None) -> Any:
        """
        Return a field by its on-disk camelCase name, typed or from :attr:`extra`.

        Args:
            wire_name: ``"updatedAt"``, ``"heartbeatTaskState"``, ...
            default: Returned when the key is absent.
        """
        attr = _WIRE_TO_ATTR.get(wire_name)
        if attr is not None:
            value = getattr(self, attr)
            if value is not UNSET:
                return value
        return self.extra.get(wire_name, default)


_FIELDS: Final = msgspec.structs.fields(SessionEntry)
_WIRE_TO_ATTR: Final[dict[str, str]] = {
    f.encode_name: f.name for f in _FIELDS if f.encode_name != _EXTRA_WIRE_NAME
}
ATTR_TO_WIRE: Final[dict[str, str]] = {attr: wire for wire, attr in _WIRE_TO_ATTR.items()}
_WIRE_KEYS: Final[frozenset[str]] = frozenset(_WIRE_TO_ATTR)
_PATH_RE: Final = re.compile(r"^\$\.(\w+)")


def _int_wire_fields() -> frozenset[str]:
    names: set[str] = set()
    for f in _FIELDS:
        args = getattr(f.type, "__args__", (f.type,))
        if int in args and float not in args:
            names.add(f.encode_name)
    return frozenset(names)


_INT_WIRE_FIELDS: Final = _int_wire_fields()


def _misfit_key(err: msgspec.ValidationError) -> str | None:
    """The top-level wire key a msgspec validation error names (``... - at `$.key```), if any."""
    match = _PATH_RE.match(str(err).rsplit(" - at `", 1)[-1].rstrip("`"))
    return match.group(1) if match else None


def _surrogate_misfit_key(typed: dict[str, Any]) -> str | None:
    """
    The key of ``typed`` that does not fit its field when msgspec raised ``UnicodeEncodeError``.

    msgspec fails that way on a string with a lone surrogate (``"\ud800"``, which ``JSON.parse`` reads)
    given to a non-string field, before it can name the field; so convert once more with such strings'
    surrogates replaced (same type, so the same misfit) and read the key from that validation error.
    """
    scrubbed = {
        key: value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        if isinstance(value, str)
        else value
        for key, value in typed.items()
    }
    try:
        msgspec.convert(scrubbed, SessionEntry)
    except msgspec.ValidationError as err:
        bad = _misfit_key(err)
        return bad if bad in typed else None
    except UnicodeEncodeError:
        return None
    return None


def session_entry_from_dict(raw: Mapping[str, Any]) -> SessionEntry:
    """
    Build a :class:`SessionEntry` from one decoded JSON object of ``sessions.json``, losing nothing.

    Known keys are typed; unknown keys, and known keys whose value does not fit the declared type (for
    example ``"compactionCount": "3"``), go to :attr:`SessionEntry.extra` unchanged. Integral floats in
    integer fields (``1.0``) are read as ints, as JavaScript makes no difference between them.

    Args:
        raw: The JSON object (camelCase keys).

    Returns:
        The entry. No validation beyond types is applied here: the store's load-time shape check (§1.4)
        is :func:`sessionkeeper.store.normalize_persisted_entry`.

    Raises:
        InvalidSessionEntryError: ``raw`` is not a mapping.
    """
    if type(raw) is dict and raw.keys() <= _WIRE_KEYS:
        # fast path: only known keys; falls through when a value does not fit its type
        try:
            return msgspec.convert(raw, SessionEntry)
        except (msgspec.ValidationError, UnicodeEncodeError):  # a lone surrogate in a mistyped field
            pass
    elif not isinstance(raw, Mapping):
        raise InvalidSessionEntryError(f"a session entry must be a JSON object, got {type(raw).__name__}")
    typed: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _WIRE_TO_ATTR:
            if key in _INT_WIRE_FIELDS and isinstance(value, float) and value.is_integer():
                value = int(value)
            typed[key] = value
        else:
            extra[key] = value
    for _ in range(len(typed) + 1):
        try:
            entry = msgspec.convert(typed, SessionEntry)
            break
        except msgspec.ValidationError as err:
            bad = _misfit_key(err)
            if bad is None or bad not in typed:
                raise InvalidSessionEntryError(f"session entry not readable: {err}") from err
            extra[bad] = typed.pop(bad)
        except UnicodeEncodeError as err:
            bad = _surrogate_misfit_key(typed)
            if bad is None:
                raise InvalidSessionEntryError(f"session entry not readable: {err}") from err
            extra[bad] = typed.pop(bad)
    else:  # pragma: no cover - each round removes one key
        raise InvalidSessionEntryError("session entry not readable")
    if extra:
        # keep the file's key order for the untyped keys
        ordered = {k: extra[k] for k in raw if k in extra}
        entry = msgspec.structs.replace(entry, extra=ordered)
    return entry


def session_entry_to_dict(entry: SessionEntry) -> dict[str, Any]:
    """
    Return the JSON object of ``entry`` (camelCase keys, absent fields omitted, :attr:`extra` flattened).

    A typed field that is set wins over a key of the same name left in ``extra``.
    """
    data: dict[str, Any] = msgspec.to_builtins(entry, enc_hook=_raw_placeholder)
    extra = data.pop(_EXTRA_WIRE_NAME, None)
    if extra:
        for key, value in entry.extra.items():
            if key not in data:
                data[key] = value
    return data


def _raw_placeholder(value: Any) -> Any:
    """``to_builtins`` hook: a ``RawJsonValue`` (only ever in ``extra``, replaced afterwards) as ``None``."""
    if isinstance(value, RawJsonValue):
        return None
    raise NotImplementedError(f"Encoding objects of type {type(value).__name__} is unsupported")


def _raw_json(value: Any) -> Any:
    """``json.encode`` hook: a ``RawJsonValue`` is written as its text."""
    if isinstance(value, RawJsonValue):
        return msgspec.Raw(value.text.encode("utf-8"))
    raise NotImplementedError(f"Encoding objects of type {type(value).__name__} is unsupported")


def encode_session_entry(entry: SessionEntry) -> bytes:
    """
    Return the compact JSON encoding of :func:`session_entry_to_dict` (UTF-8 bytes); a
    :class:`~sessionkeeper.store.RawJsonValue` is written as its text.
    """
    return msgspec.json.encode(session_entry_to_dict(entry), enc_hook=_raw_json)


# ------------------------------------------------------------------------------- Codex thread shape


def codex_thread_state(entry: SessionEntry) -> dict[str, Any]:
    """
    The archive/pin state of ``entry`` in Codex's thread shape (seeds, "Session store schema").

    Codex serialises ``archived``/``pinned`` booleans derived from the timestamps, camelCase, with times
    in **seconds** since the epoch (OpenClaw stores milliseconds; the conversion happens here, at the
    boundary, rounding down).

    Returns:
        ``{"archived": bool, "archivedAt": int | None, "pinned": bool, "pinnedAt": int | None}``.
    """
    archived = entry.archived_at if isinstance(entry.archived_at, int) else None
    pinned = entry.pinned_at if isinstance(entry.pinned_at, int) else None
    return {
        "archived": archived is not None,
        "archivedAt": archived // 1000 if archived is not None else None,
        "pinned": pinned is not None,
        "pinnedAt": pinned // 1000 if pinned is not None else None,
    }


def codex_seconds_to_ms(seconds: float | None) -> int | None:
    """Convert a Codex timestamp (seconds since the epoch) to OpenClaw's milliseconds; ``None`` stays."""
    return None if seconds is None else round(seconds * 1000)
