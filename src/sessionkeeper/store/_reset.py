"""
Reset policy and session resolution (OpenClaw spec §4.2, §4.3; field report B24).

A session key keeps its session id until the session goes *stale*: at the daily boundary (``atHour``,
default 04:00, in a configurable IANA time zone, DST-correct with :mod:`zoneinfo`) and/or after
``idleMinutes`` without a real interaction; when both apply, the earlier expiry wins. Freshness is judged
from ``sessionStartedAt`` (daily) and ``lastInteractionAt`` (idle), never from ``updatedAt``: system events
(heartbeat, cron, exec) bump ``updatedAt`` but never extend freshness, and never roll a session either.

:func:`evaluate_freshness` is OpenClaw's ``evaluateSessionFreshness``; :func:`resolve_session` is the
freshness part of ``initSessionState``: it returns the entry to use (the same session, or a new one that
carries over the safe preferences) and why.
"""

from __future__ import annotations

import datetime as _dt
import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal

import attrs

from sessionkeeper.exceptions import SessionArchivedError
from sessionkeeper.store._entry import SessionEntry, session_entry_from_dict, session_entry_to_dict
from sessionkeeper.store._keys import parse_thread_suffix
from sessionkeeper.store._reset_policy import (
    EffectiveResetPolicy,
    ResetPolicy,
    ResetType,
    normalize_at_hour,
    number_or_none,
)


__all__ = (
    "Freshness",
    "ResetContext",
    "SessionEvent",
    "SessionResolution",
    "daily_reset_at_ms",
    "evaluate_freshness",
    "has_provider_owned_session",
    "match_reset_trigger",
    "resolve_reset_type",
    "resolve_session",
)

SessionEvent = Literal["message", "heartbeat", "cron-event", "exec-event"]
"""What woke the session: a real message, or a system event (which never refreshes or rolls it)."""

_SYSTEM_EVENTS: Final = frozenset({"heartbeat", "cron-event", "exec-event"})
_CARRIED_TOGGLES: Final = (
    "thinkingLevel",
    "fastMode",
    "verboseLevel",
    "traceLevel",
    "reasoningLevel",
    "ttsAuto",
    "responseUsage",
    "label",
    "displayName",
)
_CARRIED_ROUTING: Final = (
    "chatType",
    "channel",
    "groupId",
    "subject",
    "groupChannel",
    "space",
    "origin",
    "deliveryContext",
    "route",
    "lastChannel",
    "lastTo",
    "lastAccountId",
    "lastThreadId",
)
_LINEAGE: Final = (
    "spawnedBy",
    "spawnedWorkspaceDir",
    "spawnedCwd",
    "parentSessionKey",
    "forkedFromParent",
    "spawnDepth",
    "subagentRole",
    "subagentControlScope",
)


def _js_local_ms(zone: _dt.tzinfo, day: _dt.date, hour: int, minute: int = 0) -> int:
    """Epoch ms of a local wall time as JavaScript resolves it (in a gap: later; in an overlap: earlier)."""
    when = _dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone, fold=0)
    return round(when.timestamp() * 1000)


def daily_reset_at_ms(now_ms: int, at_hour: float, *, zone: _dt.tzinfo) -> int:
    """
    The most recent daily boundary at or before ``now_ms`` (``resolveDailyResetAtMs``, spec §4.2).

    Today at ``at_hour``:00 local time, or yesterday's when ``now_ms`` is earlier, each computed on its own
    calendar day. Local times are resolved as JavaScript does (a non-existent hour moves forward, an
    ambiguous one takes the first occurrence). Deviation D12 (``docs/decisions.md``): on a day whose
    ``at_hour`` falls in a DST gap, OpenClaw 2026.7.35 takes the previous boundary as the shifted one
    moved back a day (an hour late); here it is ``at_hour`` on the previous calendar day.

    Args:
        now_ms: Current time, ms since epoch.
        at_hour: Reset hour (floored, clamped 0-23).
        zone: Time zone of the boundary.

    Returns:
        Epoch ms of the boundary.
    """
    hour = normalize_at_hour(at_hour)
    local = _dt.datetime.fromtimestamp(now_ms / 1000, tz=zone)
    boundary = _js_local_ms(zone, local.date(), hour)
    if now_ms < boundary:
        # D12: yesterday's boundary is computed on yesterday's calendar day. OpenClaw 2026.7.35 moves
        # the Date of today's (gap-shifted) boundary back a day, so when ``at_hour`` falls in today's DST
        # gap it lands an hour late and sessions of that hour are reset early.
        boundary = _js_local_ms(zone, local.date() - _dt.timedelta(days=1), hour)
    return boundary


@attrs.frozen(kw_only=True)
class Freshness:
    """
    A freshness verdict (``evaluateSessionFreshness``).

    Attributes:
        fresh: The session may continue.
        stale_reason: ``daily`` or ``idle`` when stale (the earlier expiry when both apply).
        daily_reset_at: The daily boundary used (ms since epoch), for ``daily`` mode.
        idle_expires_at: When the idle window ends (ms since epoch), when ``idle_minutes`` > 0.
    """

    fresh: bool
    stale_reason: Literal["daily", "idle"] | None = None
    daily_reset_at: int | None = None
    idle_expires_at: int | None = None


def _timestamp(value: object, now_ms: int) -> float | None:
    number = number_or_none(value)
    if number is None or number < 0 or number > now_ms:
        return None
    return number


def evaluate_freshness(
    *,
    updated_at: object,
    session_started_at: object,
    last_interaction_at: object,
    now_ms: int,
    policy: EffectiveResetPolicy,
    zone: _dt.tzinfo,
) -> Freshness:
    """
    Is a session still fresh? (OpenClaw ``evaluateSessionFreshness``, spec §4.2.)

    Timestamps that are not finite numbers, negative or in the future are ignored; ``sessionStartedAt``
    falls back to ``updatedAt`` (then 0) and ``lastInteractionAt`` to ``sessionStartedAt``. Daily mode:
    stale when the session started before the latest boundary. Idle (any mode, ``idle_minutes`` > 0):
    stale when ``now > lastInteractionAt + idle_minutes x 60000``. Both: the earlier expiry is the reason.
    """
    updated = _timestamp(updated_at, now_ms) or 0.0
    started = _timestamp(session_started_at, now_ms)
    started = updated if started is None else started
    interacted = _timestamp(last_interaction_at, now_ms)
    interacted = started if interacted is None else interacted
    daily_at = daily_reset_at_ms(now_ms, policy.at_hour, zone=zone) if policy.mode == "daily" else None
    idle_at: int | None = None
    if policy.idle_minutes is not None and policy.idle_minutes > 0:
        expires = interacted + float(policy.idle_minutes) * 60_000
        # an absurd idleMinutes (1e308) expires at Infinity in JavaScript: never stale, no OverflowError
        idle_at = round(expires) if math.isfinite(expires) else None
    stale_daily = daily_at is not None and started < daily_at
    stale_idle = idle_at is not None and now_ms > idle_at
    reason: Literal["daily", "idle"] | None = None
    if stale_daily and stale_idle:
        assert daily_at is not None and idle_at is not None
        reason = "daily" if daily_at <= idle_at else "idle"
    elif stale_idle:
        reason = "idle"
    elif stale_daily:
        reason = "daily"
    return Freshness(
        fresh=reason is None, stale_reason=reason, daily_reset_at=daily_at, idle_expires_at=idle_at
    )


def resolve_reset_type(session_key: str, *, is_group: bool = False, is_thread: bool = False) -> ResetType:
    """``thread`` for thread contexts or ``:thread:`` keys, else ``group`` for group chats or ``:group:`` /
    ``:channel:`` keys, else ``direct`` (``resolveSessionResetType``, spec §4.2)."""
    if is_thread or parse_thread_suffix(session_key)[1] is not None:
        return "thread"
    lowered = session_key.strip().lower()
    if is_group or ":group:" in lowered or ":channel:" in lowered:
        return "group"
    return "direct"


def has_provider_owned_session(entry: Mapping[str, Any]) -> bool:
    """
    True when the entry's provider is a CLI backend that owns the conversation (``hasProviderOwnedSession``).

    The provider is ``providerOverride`` or ``modelProvider``; ownership is a ``cliSessionBindings`` or
    ``cliSessionIds`` session id for it (or the legacy ``claudeCliSessionId`` for ``claude-cli``). Such a
    session never expires implicitly unless a reset policy is configured.
    """
    provider = entry.get("providerOverride") or entry.get("modelProvider")
    if not isinstance(provider, str) or not provider.strip():
        return False
    name = provider.strip().lower()
    for field in ("cliSessionBindings", "cliSessionIds"):
        table = entry.get(field)
        value = table.get(name) if isinstance(table, Mapping) else None
        if isinstance(value, Mapping):
            value = value.get("sessionId")
        if isinstance(value, str) and value.strip():
            return True
    legacy = entry.get("claudeCliSessionId")
    return name == "claude-cli" and isinstance(legacy, str) and bool(legacy.strip())


def match_reset_trigger(body: str | None, triggers: Sequence[str]) -> tuple[bool, bool, str]:
    """
    Match a message against the reset triggers (case-insensitive, spec §4.3).

    Returns:
        ``(matched, soft, rest)``: an exact trigger resets with an empty body; ``"<trigger> <rest>"``
        resets and continues with ``rest``; ``"/reset soft …"`` is a soft reset (the session is kept).
    """
    text = (body or "").strip()
    lowered = text.lower()
    for trigger in triggers:
        t = trigger.strip().lower()
        if not t:
            continue
        if lowered == t:
            return True, False, ""
        if lowered.startswith(t + " "):
            rest = text[len(t) :].strip()
            if t == "/reset" and (rest.lower() == "soft" or rest.lower().startswith("soft ")):
                return True, True, rest[4:].strip()
            return True, False, rest
    return False, False, text


@attrs.frozen(kw_only=True)
class ResetContext:
    """
    Facts about the incoming message that pick the reset type and channel override.

    Attributes:
        channel: Channel id (``telegram``, ``discord``…), for ``resetByChannel``.
        chat_type: ``direct``, ``group``, ``channel``, ``room`` or ``thread``.
        message_thread_id: A platform thread id: makes the session a thread.
        thread_label: A thread label: makes the session a thread.
        parent_session_key: The parent of a thread or subagent session: makes it a thread.
    """

    channel: str | None = None
    chat_type: str | None = None
    message_thread_id: str | int | None = None
    thread_label: str | None = None
    parent_session_key: str | None = None


ResolutionReason = Literal[
    "new-key",
    "fresh",
    "stale-daily",
    "stale-idle",
    "reset-trigger",
    "soft-reset",
    "system-event",
    "provider-owned",
]


@attrs.frozen(kw_only=True)
class SessionResolution:
    """
    The result of :func:`resolve_session`: the entry to use and why.

    Attributes:
        session_key: The session key.
        entry: The entry to store (same ``sessionId`` when reused; a new one otherwise) with updated
            lifecycle timestamps.
        is_new: A new session id was created (rollover, reset trigger or a new key).
        reason: ``new-key``, ``fresh``, ``stale-daily``, ``stale-idle``, ``reset-trigger``, ``soft-reset``,
            ``system-event`` (reused even when stale: system events never roll a session) or
            ``provider-owned`` (a CLI provider's session never expires implicitly).
        previous_session_id: The replaced session id on rollover (its transcript should be archived as
            ``*.reset.<stamp>``), else ``None``.
        freshness: The freshness verdict of the previous entry, when one existed.
        policy: The effective reset policy.
        body: The message body to process (trigger stripped), ``None`` for system events.
    """

    session_key: str
    entry: SessionEntry
    is_new: bool
    reason: ResolutionReason
    previous_session_id: str | None
    freshness: Freshness | None
    policy: EffectiveResetPolicy
    body: str | None


def _new_entry(
    previous: Mapping[str, Any] | None, *, session_id: str, now_ms: int, explicit_reset: bool
) -> dict[str, Any]:
    entry: dict[str, Any] = {"sessionId": session_id, "updatedAt": now_ms}
    if previous is not None:
        for field in (*_CARRIED_TOGGLES, *_CARRIED_ROUTING):
            if field in previous:
                entry[field] = previous[field]
        if previous.get("modelOverrideSource") == "user":
            for field in ("providerOverride", "modelOverride", "modelOverrideSource"):
                if field in previous:
                    entry[field] = previous[field]
        if previous.get("authProfileOverrideSource") == "user":
            for field in ("authProfileOverride", "authProfileOverrideSource"):
                if field in previous:
                    entry[field] = previous[field]
        if explicit_reset:
            for field in _LINEAGE:
                if field in previous:
                    entry[field] = previous[field]
        family = previous.get("usageFamilyKey")
        if family is not None:
            entry["usageFamilyKey"] = family
        ids = previous.get("usageFamilySessionIds")
        old_id = previous.get("sessionId")
        merged = [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []
        if isinstance(old_id, str) and old_id not in merged:
            merged.append(old_id)
        if merged:
            entry["usageFamilySessionIds"] = merged
    entry.update(
        sessionStartedAt=now_ms,
        lastInteractionAt=now_ms,
        compactionCount=0,
        totalTokens=0,
        totalTokensFresh=True,
    )
    return entry


def resolve_session(
    entry: SessionEntry | Mapping[str, Any] | None,
    *,
    session_key: str,
    now_ms: int,
    policy: ResetPolicy | None = None,
    event: SessionEvent = "message",
    body: str | None = None,
    context: ResetContext | None = None,
    transcript_started_at_ms: int | None = None,
    new_session_id: Callable[[], str] | None = None,
) -> SessionResolution:
    """
    Decide which session a message (or system event) continues (``initSessionState``, spec §4.3).

    - A system event (``heartbeat``, ``cron-event``, ``exec-event``) reuses any existing entry, even a
      stale one, bumps ``updatedAt`` and keeps ``lastInteractionAt`` and ``sessionStartedAt``: it neither
      refreshes nor rolls the session (field report B24).
    - A reset trigger (``/new``, ``/reset``; ``/reset soft`` keeps the session) starts a new session.
    - Otherwise the entry is reused while :func:`evaluate_freshness` says fresh (a CLI-provider-owned
      session is fresh unless a reset policy is configured); a stale or missing entry gets a new
      ``sessionId``.

    A reused entry keeps everything and gets ``updatedAt = lastInteractionAt = now``. A new entry starts
    at ``now`` (``sessionStartedAt``, ``lastInteractionAt``, ``updatedAt``) with ``compactionCount`` 0 and
    ``totalTokens`` 0 (fresh), and carries over the toggles, label, display name, routing, the usage
    family, user-sourced model/auth overrides and, for an explicit reset, the spawn lineage.

    Args:
        entry: The current entry for the key, or ``None``.
        session_key: The session key.
        now_ms: Current time, ms since epoch.
        policy: Reset settings (default: daily at 04:00 in the host's zone).
        event: What arrived: ``message`` or a system event.
        body: The message text (reset triggers are matched on it).
        context: Thread / group / channel facts of the message.
        transcript_started_at_ms: The transcript header's timestamp, used when the entry has no
            ``sessionStartedAt`` (OpenClaw reads it from the JSONL header).
        new_session_id: Factory of new session ids (default: uuid4).

    Returns:
        The :class:`SessionResolution`.

    Raises:
        SessionArchivedError: The entry is archived (``archivedAt`` set, not null): OpenClaw refuses to
            start new work on it, for messages, reset triggers and system events alike (spec §4.3 step 3).
    """
    policy = policy or ResetPolicy()
    context = context or ResetContext()
    make_id = new_session_id or (lambda: str(uuid.uuid4()))
    current = session_entry_to_dict(entry) if isinstance(entry, SessionEntry) else dict(entry or {}) or None
    archived_at = current.get("archivedAt") if current is not None else None
    if archived_at is not None:  # spec §4.3 step 3: before triggers, freshness and system events
        stamp = archived_at if isinstance(archived_at, int) and not isinstance(archived_at, bool) else None
        raise SessionArchivedError(session_key, archived_at=stamp)
    chat = (context.chat_type or "").strip().lower()
    is_thread = (
        context.message_thread_id is not None
        or bool((context.thread_label or "").strip())
        or bool((context.parent_session_key or "").strip())
        or chat == "thread"
    )
    reset_type = resolve_reset_type(
        session_key, is_group=chat not in ("", "direct", "thread"), is_thread=is_thread
    )
    effective = policy.resolve(reset_type, channel=context.channel)

    def result(
        new: dict[str, Any],
        *,
        is_new: bool,
        reason: ResolutionReason,
        fresh: Freshness | None,
        text: str | None,
    ) -> SessionResolution:
        previous_id = current.get("sessionId") if current is not None and is_new else None
        return SessionResolution(
            session_key=session_key,
            entry=session_entry_from_dict(new),
            is_new=is_new,
            reason=reason,
            previous_session_id=previous_id if isinstance(previous_id, str) else None,
            freshness=fresh,
            policy=effective,
            body=text,
        )

    if event in _SYSTEM_EVENTS:
        if current is not None:
            reused = {**current, "updatedAt": max(now_ms, number_or_none(current.get("updatedAt")) or 0)}
            return result(reused, is_new=False, reason="system-event", fresh=None, text=None)
        created = _new_entry(None, session_id=make_id(), now_ms=now_ms, explicit_reset=False)
        return result(created, is_new=True, reason="new-key", fresh=None, text=None)

    matched, soft, rest = match_reset_trigger(body, policy.reset_triggers)
    if current is None:
        created = _new_entry(None, session_id=make_id(), now_ms=now_ms, explicit_reset=False)
        return result(created, is_new=True, reason="new-key", fresh=None, text=rest if matched else body)
    if matched and not soft:
        created = _new_entry(current, session_id=make_id(), now_ms=now_ms, explicit_reset=True)
        return result(created, is_new=True, reason="reset-trigger", fresh=None, text=rest)

    started = current.get("sessionStartedAt")
    if number_or_none(started) is None and transcript_started_at_ms is not None:
        started = transcript_started_at_ms
    owned = has_provider_owned_session(current) and not effective.configured
    verdict = (
        Freshness(fresh=True)
        if owned
        else evaluate_freshness(
            updated_at=current.get("updatedAt"),
            session_started_at=started,
            last_interaction_at=current.get("lastInteractionAt"),
            now_ms=now_ms,
            policy=effective,
            zone=policy.zone,
        )
    )
    text = rest if matched else body
    if verdict.fresh or soft:
        reused = {**current, "updatedAt": now_ms, "lastInteractionAt": now_ms}
        if number_or_none(current.get("sessionStartedAt")) is None:
            # record the start freshness was judged by (header timestamp, else updatedAt), never "now"
            started_ms = _timestamp(started, now_ms)
            if started_ms is None:
                started_ms = _timestamp(current.get("updatedAt"), now_ms)
            reused["sessionStartedAt"] = int(started_ms) if started_ms is not None else now_ms
        reason: ResolutionReason = "soft-reset" if soft else ("provider-owned" if owned else "fresh")
        return result(reused, is_new=False, reason=reason, fresh=verdict, text=text)
    created = _new_entry(current, session_id=make_id(), now_ms=now_ms, explicit_reset=False)
    stale: ResolutionReason = "stale-daily" if verdict.stale_reason == "daily" else "stale-idle"
    return result(created, is_new=True, reason=stale, fresh=verdict, text=text)
