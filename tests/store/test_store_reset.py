"""Reset policy, freshness and resolve_session (OpenClaw spec §4.2, §4.3; field report B24)."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import warnings
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionkeeper._config import load_config
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.store import (
    EffectiveResetPolicy,
    ResetContext,
    ResetPolicy,
    ResetRule,
    SessionEntry,
    daily_reset_at_ms,
    evaluate_freshness,
    has_provider_owned_session,
    match_reset_trigger,
    resolve_reset_type,
    resolve_session,
    session_entry_to_dict,
)


ORACLE = Path(__file__).resolve().parent.parent / "data" / "oracle" / "reset"
UTC = ZoneInfo("UTC")
MIN = 60_000
HOUR = 3_600_000
DAY = 86_400_000


def _ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def _load(name: str) -> list[Any]:
    return json.loads(gzip.decompress((ORACLE / name).read_bytes()))


def _oracle_cases() -> list[Any]:
    cases = _load("cases.json.gz")
    results = _load("results.json.gz")
    assert len(cases) == len(results) > 900
    return [pytest.param(case, result, id=case["name"]) for case, result in zip(cases, results, strict=True)]


@pytest.mark.parametrize(("case", "expected"), _oracle_cases())
def test_freshness_matches_openclaw(case, expected):
    """951 cases from OpenClaw's own reset code: DST days in 6 zones, every policy rule (reset.mjs)."""
    config = case.get("config") or {}
    with warnings.catch_warnings():  # the legacy session.idleMinutes cases warn: legacy-key test elsewhere
        warnings.simplefilter("ignore", DeprecationWarning)
        policy = ResetPolicy.from_mapping({**config, "timeZone": case["tz"]})
    context = case.get("context") or {}
    resolution = resolve_session(
        case["entry"],
        session_key=case.get("key") or "agent:main:main",
        now_ms=case["nowMs"],
        policy=policy,
        body="hello",
        context=ResetContext(
            channel=context.get("channel"),
            chat_type=context.get("chatType"),
            message_thread_id=context.get("messageThreadId"),
        ),
        new_session_id=lambda: "fresh-id",
    )
    p = resolution.policy
    assert (p.mode, p.at_hour, p.idle_minutes, p.configured) == (
        expected["policy"]["mode"],
        expected["policy"]["atHour"],
        expected["policy"].get("idleMinutes"),
        expected["policy"]["configured"],
    )
    if case["entry"] is None:
        assert resolution.reason == "new-key"
        return
    if expected["reason"] == "provider-owned-session":
        assert resolution.reason == "provider-owned"
        assert not resolution.is_new
        return
    verdict = resolution.freshness
    assert verdict is not None
    expected = _d12(expected, case, p.at_hour)
    assert verdict.fresh == expected["fresh"]
    assert verdict.stale_reason == expected["staleReason"]
    assert verdict.daily_reset_at == expected["dailyResetAt"]
    assert verdict.idle_expires_at == expected["idleExpiresAt"]
    assert resolution.is_new == (not expected["fresh"])


def _d12(expected: dict[str, Any], case: dict[str, Any], at_hour: int) -> dict[str, Any]:
    """
    The oracle's verdict under deviation D12: when OpenClaw's previous daily boundary is the DST-gap-shifted
    hour moved back a day (``at_hour`` exists on that day), ours is ``at_hour`` on that calendar day.
    """
    at = expected.get("dailyResetAt")
    if at is None:
        return expected
    zone = ZoneInfo(case["tz"])
    local = dt.datetime.fromtimestamp(at / 1000, tz=zone)
    wall = dt.datetime(local.year, local.month, local.day, at_hour, tzinfo=zone)
    calendar = round(wall.timestamp() * 1000)
    if local.hour == at_hour or dt.datetime.fromtimestamp(calendar / 1000, tz=zone).hour != at_hour:
        return expected
    assert expected.get("idleExpiresAt") is None  # the D12 cases of the set are daily-only
    started = case["entry"].get("sessionStartedAt")
    fresh = started >= calendar
    return {**expected, "dailyResetAt": calendar, "fresh": fresh, "staleReason": None if fresh else "daily"}


# ------------------------------------------------------------------------------------------ daily boundary


def test_daily_boundary_default_is_4am_local():
    now = _ms("2026-09-21T12:00:00Z")
    assert daily_reset_at_ms(now, 4, zone=UTC) == _ms("2026-09-21T04:00:00Z")
    early = _ms("2026-09-21T03:59:59Z")
    assert daily_reset_at_ms(early, 4, zone=UTC) == _ms("2026-09-20T04:00:00Z")
    paris = ZoneInfo("Europe/Paris")
    assert daily_reset_at_ms(now, 4, zone=paris) == _ms("2026-09-21T02:00:00Z")  # 04:00 CEST


def test_daily_boundary_on_dst_days():
    ny = ZoneInfo("America/New_York")
    # spring forward 2026-03-08: 02:00 does not exist and resolves to 03:00 EDT (07:00Z), like JavaScript
    assert daily_reset_at_ms(_ms("2026-03-08T12:00:00Z"), 2, zone=ny) == _ms("2026-03-08T07:00:00Z")
    # 04:00 EDT on the short day
    assert daily_reset_at_ms(_ms("2026-03-08T12:00:00Z"), 4, zone=ny) == _ms("2026-03-08T08:00:00Z")
    # fall back 2026-11-01: 01:xx happens twice; the first occurrence (EDT) is used
    assert daily_reset_at_ms(_ms("2026-11-01T12:00:00Z"), 1, zone=ny) == _ms("2026-11-01T05:00:00Z")
    assert daily_reset_at_ms(_ms("2026-11-01T12:00:00Z"), 4, zone=ny) == _ms("2026-11-01T09:00:00Z")


def test_previous_daily_boundary_is_computed_on_its_own_calendar_day_d12():
    ny = ZoneInfo("America/New_York")
    # 2026-03-08 01:30 EST, before the (gap-shifted) 03:00 EDT boundary of that day: the previous boundary
    # is 2026-03-07 02:00 EST (07:00Z); OpenClaw 2026.7.35 takes 03:00 EST (08:00Z), an hour late
    now = _ms("2026-03-08T06:30:00Z")
    assert daily_reset_at_ms(now, 2, zone=ny) == _ms("2026-03-07T07:00:00Z")
    started = _ms("2026-03-07T07:30:00Z")  # 02:30 EST, after that day's boundary: still fresh
    policy = ResetPolicy(time_zone=ny, reset=ResetRule(mode="daily", at_hour=2))
    entry = {
        "sessionId": "s",
        "updatedAt": started,
        "sessionStartedAt": started,
        "lastInteractionAt": started,
    }
    result = resolve_session(entry, session_key="agent:main:main", now_ms=now, policy=policy, body="hi")
    assert result.reason == "fresh"
    # a gap on the previous day resolves forward on that day, as JavaScript does
    assert daily_reset_at_ms(_ms("2026-03-09T05:30:00Z"), 2, zone=ny) == _ms("2026-03-08T07:00:00Z")


@given(st.integers(_ms("2020-01-01T00:00:00Z"), _ms("2035-01-01T00:00:00Z")), st.integers(0, 23))
def test_daily_boundary_is_the_latest_at_or_before_now(now, hour):
    zone = ZoneInfo("Europe/Paris")
    boundary = daily_reset_at_ms(now, hour, zone=zone)
    assert boundary <= now
    assert now - boundary < 26 * HOUR  # a DST day lasts at most 25 h
    local = dt.datetime.fromtimestamp(boundary / 1000, tz=zone)
    assert local.minute == 0
    assert local.hour in (hour, hour + 1)  # +1 only when the hour falls in a DST gap


# ------------------------------------------------------------------------------------------ policy


def test_policy_resolution_rules():
    assert ResetPolicy().resolve("direct") == EffectiveResetPolicy(
        mode="daily", at_hour=4, idle_minutes=None, configured=False
    )
    with pytest.warns(DeprecationWarning, match="use session.reset.idleMinutes"):
        legacy = ResetPolicy.from_mapping({"idleMinutes": 30})
    assert legacy.resolve("direct") == EffectiveResetPolicy(
        mode="idle", at_hour=4, idle_minutes=30, configured=True
    )
    both = ResetPolicy.from_mapping({"reset": {"mode": "daily", "atHour": 6, "idleMinutes": 90.7}})
    assert both.resolve("group") == EffectiveResetPolicy(
        mode="daily", at_hour=6, idle_minutes=90, configured=True
    )
    idle_only = ResetPolicy.from_mapping({"reset": {"mode": "idle"}})
    assert idle_only.resolve("direct").idle_minutes == 0  # idle without minutes: never expires
    typed = ResetPolicy.from_mapping(
        {
            "reset": {"mode": "daily"},
            "resetByType": {"dm": {"mode": "idle", "idleMinutes": 5}, "thread": {"atHour": 0}},
        }
    )
    assert typed.resolve("direct").mode == "idle"
    assert typed.resolve("thread").at_hour == 0
    assert typed.resolve("group").mode == "daily"
    channel = ResetPolicy.from_mapping(
        {"reset": {"mode": "idle", "idleMinutes": 5}, "resetByChannel": {"Discord": {"atHour": 9}}}
    )
    assert channel.resolve("direct", channel="discord") == EffectiveResetPolicy(
        mode="daily", at_hour=9, idle_minutes=None, configured=True
    )


def test_policy_from_config_and_errors():
    policy = ResetPolicy.from_config(load_config({"session": {"reset": {"mode": "idle", "idleMinutes": 10}}}))
    assert policy.resolve("direct").idle_minutes == 10
    for session, key in (
        ({"reset": {"mode": "weekly"}}, "session.reset.mode"),
        ({"reset": {"idleMinutes": "ten"}}, "session.reset.idleMinutes"),
        ({"timeZone": "Mars/Olympus"}, "session.timeZone"),
        ({"resetByType": []}, "session.resetByType"),
        ({"idleMinutes": "x"}, "session.idleMinutes"),
        ({"resetTriggers": "/new"}, "session.resetTriggers"),
    ):
        with pytest.raises(ConfigError) as info:
            ResetPolicy.from_mapping(session)
        assert info.value.key == key


def test_reset_type():
    assert resolve_reset_type("agent:main:main") == "direct"
    assert resolve_reset_type("agent:main:telegram:group:1") == "group"
    assert resolve_reset_type("agent:main:discord:channel:1") == "group"
    assert resolve_reset_type("agent:main:discord:channel:1:thread:2") == "thread"
    assert resolve_reset_type("agent:main:main", is_group=True) == "group"
    assert resolve_reset_type("agent:main:main", is_thread=True, is_group=True) == "thread"


def test_freshness_both_rules_earlier_expiry_wins():
    now = _ms("2026-09-21T12:00:00Z")
    policy = EffectiveResetPolicy(mode="daily", at_hour=4, idle_minutes=60, configured=True)
    verdict = evaluate_freshness(
        updated_at=now, session_started_at=now - 20 * HOUR, last_interaction_at=now - 2 * HOUR,
        now_ms=now, policy=policy, zone=UTC,
    )  # fmt: skip
    # daily boundary 04:00 (8 h ago) is earlier than the idle expiry (1 h ago)
    assert (verdict.fresh, verdict.stale_reason) == (False, "daily")
    verdict = evaluate_freshness(
        updated_at=now, session_started_at=now - HOUR * 7, last_interaction_at=now - 2 * HOUR,
        now_ms=now, policy=policy, zone=UTC,
    )  # fmt: skip
    assert (verdict.fresh, verdict.stale_reason) == (False, "idle")
    assert verdict.idle_expires_at == now - HOUR


def test_provider_owned_sessions():
    assert has_provider_owned_session(
        {"modelProvider": "Claude-CLI", "cliSessionBindings": {"claude-cli": {"sessionId": "x"}}}
    )
    assert has_provider_owned_session({"providerOverride": "codex", "cliSessionIds": {"codex": "y"}})
    assert has_provider_owned_session({"modelProvider": "claude-cli", "claudeCliSessionId": "z"})
    assert not has_provider_owned_session({"modelProvider": "anthropic", "cliSessionIds": {"codex": "y"}})
    assert not has_provider_owned_session({})


def test_reset_triggers():
    triggers = ("/new", "/reset")
    assert match_reset_trigger(" /NEW ", triggers) == (True, False, "")
    assert match_reset_trigger("/reset plan the trip", triggers) == (True, False, "plan the trip")
    assert match_reset_trigger("/reset soft keep going", triggers) == (True, True, "keep going")
    assert match_reset_trigger("/newish", triggers) == (False, False, "/newish")
    assert match_reset_trigger(None, triggers) == (False, False, "")


# ------------------------------------------------------------------------------------------ resolve_session


def _policy(**session: Any) -> ResetPolicy:
    return ResetPolicy.from_mapping({**session, "timeZone": "UTC"})


def test_new_key_creates_a_session():
    now = _ms("2026-01-05T09:00:00Z")
    result = resolve_session(
        None, session_key="agent:main:main", now_ms=now, policy=_policy(), new_session_id=lambda: "s1"
    )
    assert result.is_new
    assert result.reason == "new-key"
    assert result.entry.session_id == "s1"
    data = (
        result.entry.get("sessionStartedAt"),
        result.entry.get("lastInteractionAt"),
        result.entry.get("updatedAt"),
    )
    assert data == (now, now, now)


def test_fresh_entry_is_reused_and_interaction_recorded():
    now = _ms("2026-01-05T10:00:00Z")
    entry = {"sessionId": "s1", "updatedAt": now - HOUR, "sessionStartedAt": now - 2 * HOUR, "label": "x"}
    result = resolve_session(entry, session_key="agent:main:main", now_ms=now, policy=_policy(), body="hi")
    assert not result.is_new
    assert result.reason == "fresh"
    assert result.entry.session_id == "s1"
    assert result.entry.get("lastInteractionAt") == now
    assert result.entry.get("sessionStartedAt") == now - 2 * HOUR
    assert result.body == "hi"


def test_stale_entry_rolls_over_carrying_safe_preferences_only():
    now = _ms("2026-01-06T08:00:00Z")
    entry = {
        "sessionId": "old",
        "updatedAt": now - DAY,
        "sessionStartedAt": now - DAY,
        "thinkingLevel": "high",
        "label": "Ops",
        "displayName": "Ops chat",
        "channel": "telegram",
        "modelOverride": "gpt-x",
        "providerOverride": "openai",
        "modelOverrideSource": "auto",
        "authProfileOverride": "work",
        "authProfileOverrideSource": "user",
        "compactionCount": 7,
        "totalTokens": 99_000,
        "memoryFlushAt": now - HOUR,
        "spawnedBy": "agent:main:main",
        "usageFamilyKey": "fam",
        "usageFamilySessionIds": ["older"],
    }
    result = resolve_session(
        entry, session_key="agent:main:main", now_ms=now, policy=_policy(), new_session_id=lambda: "new"
    )
    assert result.is_new
    assert result.reason == "stale-daily"
    assert result.previous_session_id == "old"
    e = result.entry
    assert e.session_id == "new"
    assert (e.get("thinkingLevel"), e.get("label"), e.get("displayName"), e.get("channel")) == (
        "high", "Ops", "Ops chat", "telegram",
    )  # fmt: skip
    assert e.get("modelOverride") is None  # auto-selected overrides are not carried over
    assert (e.get("authProfileOverride"), e.get("authProfileOverrideSource")) == ("work", "user")
    assert (e.get("compactionCount"), e.get("totalTokens"), e.get("totalTokensFresh")) == (0, 0, True)
    assert e.get("memoryFlushAt") is None
    assert e.get("spawnedBy") is None  # lineage carries over only on an explicit reset
    assert e.get("usageFamilyKey") == "fam"
    assert e.get("usageFamilySessionIds") == ["older", "old"]


def test_reset_trigger_forces_a_new_session_and_keeps_lineage():
    now = _ms("2026-01-05T10:00:00Z")
    entry = {
        "sessionId": "s1",
        "updatedAt": now,
        "sessionStartedAt": now - HOUR,
        "spawnedBy": "agent:main:main",
    }
    result = resolve_session(
        entry, session_key="agent:main:subagent:x", now_ms=now, policy=_policy(), body="/new plan"
    )
    assert result.is_new
    assert result.reason == "reset-trigger"
    assert result.body == "plan"
    assert result.entry.get("spawnedBy") == "agent:main:main"
    soft = resolve_session(
        entry, session_key="agent:main:main", now_ms=now, policy=_policy(), body="/reset soft go"
    )
    assert (soft.is_new, soft.reason, soft.body) == (False, "soft-reset", "go")


def test_missing_started_at_falls_back_to_the_transcript_header():
    now = _ms("2026-01-05T10:00:00Z")
    entry = {"sessionId": "s1", "updatedAt": now - MIN}
    header = _ms("2026-01-04T23:00:00Z")  # before today's 04:00 boundary
    result = resolve_session(
        entry, session_key="agent:main:main", now_ms=now, policy=_policy(), transcript_started_at_ms=header
    )
    assert result.reason == "stale-daily"
    reused = resolve_session(entry, session_key="agent:main:main", now_ms=now, policy=_policy())
    assert reused.reason == "fresh"  # updatedAt (1 min ago) stands in for the start
    assert reused.entry.get("sessionStartedAt") == now - MIN


def test_accepts_session_entry_records():
    now = _ms("2026-01-05T10:00:00Z")
    entry = SessionEntry(session_id="s1", updated_at=now - MIN, session_started_at=now - HOUR)
    result = resolve_session(entry, session_key="agent:main:main", now_ms=now, policy=_policy())
    assert result.reason == "fresh"
    assert result.entry.session_id == "s1"


# ------------------------------------------------------------------------------------------ B24


def test_b24_heartbeats_never_extend_idle_freshness():
    policy = _policy(reset={"mode": "idle", "idleMinutes": 60})
    entry: Any = {
        "sessionId": "s1",
        "updatedAt": _ms("2026-01-05T09:05:00Z"),
        "sessionStartedAt": _ms("2026-01-05T09:00:00Z"),
        "lastInteractionAt": _ms("2026-01-05T09:05:00Z"),
    }
    beat = _ms("2026-01-05T09:30:00Z")
    while beat <= _ms("2026-01-05T18:00:00Z"):
        result = resolve_session(
            entry, session_key="agent:main:main", now_ms=beat, policy=policy, event="heartbeat"
        )
        assert (result.is_new, result.reason) == (False, "system-event")  # never rolls, even when stale
        entry = _as_dict(result.entry)
        assert entry["updatedAt"] == beat
        assert entry["lastInteractionAt"] == _ms("2026-01-05T09:05:00Z")
        assert entry["sessionStartedAt"] == _ms("2026-01-05T09:00:00Z")
        beat += 30 * MIN
    user = resolve_session(
        entry, session_key="agent:main:main", now_ms=_ms("2026-01-05T18:10:00Z"), policy=policy, body="back",
        new_session_id=lambda: "s2",
    )  # fmt: skip
    assert user.is_new
    assert user.reason == "stale-idle"
    assert user.previous_session_id == "s1"
    assert user.entry.session_id == "s2"


def test_b24_daily_variant_heartbeat_after_the_boundary_does_not_reset_but_the_user_does():
    policy = _policy(reset={"mode": "daily", "atHour": 4})
    entry = {
        "sessionId": "s1",
        "updatedAt": _ms("2026-01-05T09:00:00Z"),
        "sessionStartedAt": _ms("2026-01-05T09:00:00Z"),
        "lastInteractionAt": _ms("2026-01-05T09:00:00Z"),
    }
    beat = resolve_session(
        entry,
        session_key="agent:main:main",
        now_ms=_ms("2026-01-06T04:30:00Z"),
        policy=policy,
        event="heartbeat",
    )
    assert (beat.is_new, beat.reason) == (False, "system-event")
    after = _as_dict(beat.entry)
    assert after["sessionStartedAt"] == entry["sessionStartedAt"]
    user = resolve_session(
        after, session_key="agent:main:main", now_ms=_ms("2026-01-06T08:00:00Z"), policy=policy
    )
    assert (user.is_new, user.reason) == (True, "stale-daily")


@pytest.mark.parametrize("event", ["heartbeat", "cron-event", "exec-event"])
def test_system_events_on_a_new_key_create_a_session(event):
    result = resolve_session(
        None, session_key="agent:main:main", now_ms=1000, event=event, new_session_id=lambda: "s"
    )
    assert result.is_new
    assert result.body is None


def _as_dict(entry: SessionEntry) -> dict[str, Any]:
    return session_entry_to_dict(entry)


# ------------------------------------------------------------------------------------------ zone (D12)


def test_reset_zone_falls_back_to_user_timezone_before_the_host_zone_d12(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    tokyo = ZoneInfo("Asia/Tokyo")
    config = load_config({"agents": {"defaults": {"userTimezone": "Asia/Tokyo"}}})
    policy = ResetPolicy.from_config(config)
    assert policy.time_zone == tokyo
    # 04:00 JST is 19:00Z the day before: a session started at 18:00Z is stale at 20:00Z
    now = _ms("2026-09-21T20:00:00Z")
    assert daily_reset_at_ms(now, 4, zone=policy.zone) == _ms("2026-09-21T19:00:00Z")
    started = _ms("2026-09-21T18:00:00Z")
    entry = {
        "sessionId": "s",
        "updatedAt": started,
        "sessionStartedAt": started,
        "lastInteractionAt": started,
    }
    result = resolve_session(entry, session_key="agent:main:main", now_ms=now, policy=policy, body="hi")
    assert result.reason == "stale-daily"
    # session.timeZone wins over userTimezone
    both = load_config(
        {"session": {"timeZone": "Europe/Paris"}, "agents": {"defaults": {"userTimezone": "Asia/Tokyo"}}}
    )
    assert ResetPolicy.from_config(both).time_zone == ZoneInfo("Europe/Paris")
    assert ResetPolicy.from_mapping({}, user_timezone="Asia/Tokyo").time_zone == tokyo


def test_an_unknown_user_timezone_falls_back_to_the_host_zone_with_a_warning(monkeypatch, caplog):
    monkeypatch.setenv("TZ", "UTC")
    config = load_config({"agents": {"defaults": {"userTimezone": "Mars/Olympus"}}})
    with caplog.at_level("WARNING", logger="sessionkeeper.store"):
        policy = ResetPolicy.from_config(config)
    assert policy.time_zone is None
    assert policy.zone == ZoneInfo("UTC")
    assert any("userTimezone" in r.getMessage() for r in caplog.records)
    assert ResetPolicy.from_config(load_config({})).time_zone is None
