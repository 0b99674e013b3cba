"""Cron session retention, fresh isolated runs and run-log trimming."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sessionkeeper._config import load_config
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.store import ResetPolicy, SessionStore
from sessionkeeper.store.maintenance._cron import (
    CronSettings,
    plan_cron_run_retention,
    resolve_cron_session,
    sanitize_fresh_cron_entry,
    sweep_cron_run_sessions,
    trim_cron_run_log,
)
from sessionkeeper.testing import FakeClock


NOW = 1_789_992_000_000
HOUR = 3_600_000


def test_settings_defaults_and_parsing():
    assert CronSettings() == CronSettings.from_config(load_config())
    assert CronSettings().session_retention_ms == 24 * HOUR
    assert CronSettings().run_log_keep_lines == 2000
    assert CronSettings().run_log_max_bytes == 2_000_000
    s = CronSettings.from_mapping(
        {"sessionRetention": "36", "runLog": {"keepLines": 10.7, "maxBytes": "1mb"}}
    )
    assert s.session_retention_ms == 36 * HOUR  # bare numbers are hours
    assert (s.run_log_keep_lines, s.run_log_max_bytes) == (10, 1024**2)
    assert CronSettings.from_mapping({"sessionRetention": False}).session_retention_ms is None
    assert CronSettings.from_mapping({"sessionRetention": "7d"}).session_retention_ms == 7 * 24 * HOUR
    for cron, key in (
        ({"sessionRetention": "soon"}, "cron.sessionRetention"),
        ({"runLog": {"keepLines": 0}}, "cron.runLog.keepLines"),
        ({"runLog": {"maxBytes": "lots"}}, "cron.runLog.maxBytes"),
        ({"runLog": []}, "cron.runLog"),
    ):
        with pytest.raises(ConfigError) as info:
            CronSettings.from_mapping(cron)
        assert info.value.key == key


def test_retention_selects_only_expired_run_sessions():
    entries = {
        "agent:main:cron:nightly": {"sessionId": "base", "updatedAt": NOW - 90 * HOUR},
        "agent:main:cron:nightly:run:r1": {"sessionId": "r1", "updatedAt": NOW - 25 * HOUR},
        "agent:main:cron:nightly:run:r2": {"sessionId": "r2", "updatedAt": NOW - 23 * HOUR},
        "agent:main:cron:nightly:run:r3": {"sessionId": "r3"},  # missing updatedAt counts as 0
        "cron:nightly": {"sessionId": "legacy", "updatedAt": 0},
        "agent:main:main": {"sessionId": "m", "updatedAt": 0},
    }
    assert plan_cron_run_retention(entries, now_ms=NOW, retention_ms=24 * HOUR) == [
        "agent:main:cron:nightly:run:r1",
        "agent:main:cron:nightly:run:r3",
    ]


@pytest.mark.anyio
async def test_sweep_prunes_archives_and_retires_old_archives(tmp_path: Path, anyio_backend):
    directory = tmp_path / "sessions"
    clock = FakeClock(now_ms=NOW - 30 * HOUR)
    async with SessionStore.open(directory, clock=clock) as store:
        await store.patch("agent:main:cron:job:run:old", {"sessionId": "old"})
        clock.advance(ms=29 * HOUR)
        await store.patch("agent:main:cron:job:run:new", {"sessionId": "new"})
        await store.patch("agent:main:cron:job", {"sessionId": "base"})
        for sid in ("old", "new", "base"):
            (directory / f"{sid}.jsonl").write_text("{}\n")
        stale_archive = directory / "x.jsonl.deleted.2026-09-19T00-00-00.000Z"
        stale_archive.write_text("x")
        fresh_archive = directory / "y.jsonl.deleted.2026-09-21T00-00-00.000Z"
        fresh_archive.write_text("y")
        preview = await sweep_cron_run_sessions(store, now_ms=NOW, dry_run=True)
        assert preview.pruned_keys == ("agent:main:cron:job:run:old",)
        assert (directory / "old.jsonl").exists()
        report = await sweep_cron_run_sessions(store, now_ms=NOW)
        assert report.pruned_keys == preview.pruned_keys
        assert report.archived == (("old.jsonl", "old.jsonl.deleted.2026-09-21T12-00-00.000Z"),)
        assert report.deleted_archives == (stale_archive.name,)
        assert await store.get("agent:main:cron:job:run:old") is None
        assert await store.get("agent:main:cron:job") is not None
    assert not stale_archive.exists()
    assert fresh_archive.exists()
    assert (directory / "old.jsonl.deleted.2026-09-21T12-00-00.000Z").exists()
    assert (directory / "new.jsonl").exists()


@pytest.mark.anyio
async def test_sweep_disabled_and_locked_transcripts(tmp_path: Path, anyio_backend):
    directory = tmp_path / "sessions"
    async with SessionStore.open(directory, clock=FakeClock(now_ms=NOW - 48 * HOUR)) as store:
        await store.patch("agent:main:cron:job:run:old", {"sessionId": "old"})
        (directory / "old.jsonl").write_text("{}\n")
        off = await sweep_cron_run_sessions(
            store, settings=CronSettings(session_retention_ms=None), now_ms=NOW
        )
        assert off.pruned_keys == ()
        # a live owner other than this process (our own pid without a held lock is an orphan, not a holder)
        (directory / "old.jsonl.lock").write_text(json.dumps({"pid": os.getppid()}))
        report = await sweep_cron_run_sessions(store, now_ms=NOW)
        assert report.pruned_keys == ("agent:main:cron:job:run:old",)
        assert report.archived == ()  # a live lock: the transcript is never moved
    assert (directory / "old.jsonl").exists()


PREVIOUS = {
    "sessionId": "old",
    "updatedAt": NOW - HOUR,
    "sessionStartedAt": NOW - 2 * HOUR,
    "thinkingLevel": "high",
    "label": "Nightly",
    "chatType": "group",
    "pinnedAt": 5,
    "modelOverride": "m1",
    "providerOverride": "p1",
    "modelOverrideSource": "user",
    "authProfileOverride": "work",
    "authProfileOverrideSource": "user",
    "channel": "telegram",
    "groupId": "g",
    "origin": {"provider": "telegram"},
    "deliveryContext": {"to": "123"},
    "lastTo": "123",
    "elevatedLevel": "full",
    "sendPolicy": "allow",
    "queueMode": "steer",
    "acp": {"runtime": "x"},
    "compactionCount": 4,
}


def test_forced_fresh_run_keeps_safe_preferences_and_drops_ambient_context():
    clean = sanitize_fresh_cron_entry(PREVIOUS, preserve_ambient_context=False)
    assert clean == {
        "chatType": "group",
        "thinkingLevel": "high",
        "pinnedAt": 5,
        "label": "Nightly",
        "modelOverride": "m1",
        "providerOverride": "p1",
        "modelOverrideSource": "user",
        "authProfileOverride": "work",
        "authProfileOverrideSource": "user",
    }
    ambient = sanitize_fresh_cron_entry(PREVIOUS, preserve_ambient_context=True)
    for field in ("channel", "groupId", "origin", "elevatedLevel", "sendPolicy", "queueMode", "acp"):
        assert field in ambient
    for field in ("deliveryContext", "lastTo", "compactionCount", "sessionId"):
        assert field not in ambient


def test_auto_selected_models_are_not_carried():
    auto = {**PREVIOUS, "modelOverrideSource": "auto"}
    assert "modelOverride" not in sanitize_fresh_cron_entry(auto, preserve_ambient_context=False)
    fallback = {k: v for k, v in PREVIOUS.items() if k != "modelOverrideSource"}
    fallback |= {"modelOverrideFallbackOriginProvider": "a", "modelOverrideFallbackOriginModel": "b"}
    assert "modelOverride" not in sanitize_fresh_cron_entry(fallback, preserve_ambient_context=False)
    not_user_auth = {**PREVIOUS, "authProfileOverrideSource": "auto"}
    assert "authProfileOverride" not in sanitize_fresh_cron_entry(
        not_user_auth, preserve_ambient_context=False
    )


def test_resolve_cron_session():
    policy = ResetPolicy.from_mapping({"timeZone": "UTC"})
    forced = resolve_cron_session(
        PREVIOUS, now_ms=NOW, force_new=True, policy=policy, new_session_id=lambda: "n"
    )
    assert forced.is_new
    assert forced.previous_session_id == "old"
    assert forced.entry.session_id == "n"
    assert forced.entry.get("channel") is None
    assert forced.entry.get("label") == "Nightly"
    assert forced.entry.get("sessionStartedAt") == NOW
    reused = resolve_cron_session(PREVIOUS, now_ms=NOW, force_new=False, policy=policy)
    assert not reused.is_new
    assert reused.entry.session_id == "old"
    assert reused.entry.get("deliveryContext") == {"to": "123"}
    stale = {**PREVIOUS, "sessionStartedAt": NOW - 30 * HOUR}
    rolled = resolve_cron_session(
        stale, now_ms=NOW, force_new=False, policy=policy, new_session_id=lambda: "r"
    )
    assert rolled.is_new
    assert rolled.entry.get("channel") == "telegram"  # a stale (not forced) rollover keeps ambient context
    first = resolve_cron_session(None, now_ms=NOW, force_new=False, new_session_id=lambda: "f")
    assert (first.is_new, first.previous_session_id, first.entry.session_id) == (True, None, "f")


def test_trim_run_log(tmp_path: Path):
    log = tmp_path / "runs" / "job.jsonl"
    assert trim_cron_run_log(log) == 0
    log.parent.mkdir()
    log.write_text("".join(json.dumps({"run": i}) + "\n" for i in range(10)))
    assert trim_cron_run_log(log, keep_lines=4) == 6
    assert [json.loads(line)["run"] for line in log.read_text().splitlines()] == [6, 7, 8, 9]
    assert log.stat().st_mode & 0o777 == 0o600
    assert trim_cron_run_log(log, keep_lines=4, max_bytes=25) == 2
    assert [json.loads(line)["run"] for line in log.read_text().splitlines()] == [8, 9]
    assert trim_cron_run_log(log, keep_lines=4, max_bytes=1) == 1  # the newest line always stays
    assert trim_cron_run_log(log) == 0
