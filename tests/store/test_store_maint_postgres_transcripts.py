"""
Store maintenance of the transcript rows of a PostgreSQL store, as set-based SQL (issue 13; OpenClaw spec
§2.2 steps 4-7, §2.4, §2.5): removed entries' transcripts archived as ``deleted``, archive retention,
the disk budget in bytes of rows, unreferenced transcripts, dry runs changing nothing. The real server,
one schema per test.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from tests._servers import pg_schema

from sessionkeeper.store import (
    MaintenanceSettings,
    PostgresStoreBackend,
    PostgresTranscriptStorage,
    SessionEntry,
    SessionStore,
    run_maintenance,
)
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import archive_stamp


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema",)

DAY_MS = 86_400_000
NOW_MS = int(datetime.datetime.now(datetime.UTC).timestamp() * 1000)  # the server stamps last writes
HEADER = b'{"type":"session","version":3,"id":"x","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}'


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async API (decision PG-ASYNCIO)


@pytest.fixture
async def store(pg_schema: tuple[str, str]) -> AsyncIterator[SessionStore]:
    dsn, schema = pg_schema
    async with SessionStore.open(f"{dsn}?schema={schema}", clock=FakeClock(now_ms=NOW_MS)) as opened:
        yield opened


def _storage(store: SessionStore) -> PostgresTranscriptStorage:
    storage = store.transcript_storage()
    assert isinstance(storage, PostgresTranscriptStorage)
    return storage


def _execute(store: SessionStore, text: str, *params: object) -> list[tuple[object, ...]]:
    backend = store.backend
    assert isinstance(backend, PostgresStoreBackend) and backend.dsn is not None
    table = sql.Identifier(backend.schema, "sk_transcripts")
    with psycopg.connect(backend.dsn, autocommit=True) as conn:
        cur = conn.execute(sql.SQL(text).format(h=table), params)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


async def _session(store: SessionStore, key: str, sid: str, *, age_days: float, size: int = 0) -> None:
    """An entry updated ``age_days`` ago and its transcript (header and ``size`` bytes) last written then."""
    await _entry(store, key, sid, age_days=age_days)
    await _transcript(store, sid, age_days=age_days, size=size)


async def _entry(store: SessionStore, key: str, sid: str, *, age_days: float) -> None:
    await store.backend.put(key, SessionEntry(session_id=sid, updated_at=NOW_MS - int(age_days * DAY_MS)))


async def _transcript(store: SessionStore, sid: str, *, age_days: float, size: int = 0) -> None:
    lines = [HEADER] + ([b'{"pad":"' + b"x" * size + b'"}'] if size else [])
    await _storage(store).create(sid, lines)
    when = datetime.datetime.fromtimestamp((NOW_MS - age_days * DAY_MS) / 1000, datetime.UTC)
    _execute(store, "UPDATE {h} SET updated_at = %s WHERE session_id = %s", when, sid)


def _size(store: SessionStore, name: str) -> int:
    [(size,)] = _execute(store, "SELECT byte_size FROM {h} WHERE session_id = %s", name)
    assert isinstance(size, int)
    return size


async def test_removed_entries_transcripts_are_archived_as_deleted(store: SessionStore) -> None:
    await _session(store, "agent:main:direct:old", "s-old", age_days=40)
    await _session(store, "agent:main:direct:new", "s-new", age_days=1)
    await _entry(store, "agent:main:direct:twin", "s-shared", age_days=40)
    await _session(store, "agent:main:direct:keeper", "s-shared", age_days=1)
    report = await run_maintenance(store, settings=MaintenanceSettings(), now_ms=NOW_MS)
    assert set(report.removed_keys) == {"agent:main:direct:old", "agent:main:direct:twin"}
    [action] = report.file_actions
    assert (action.name, action.action, action.reason) == ("s-old", "archive", "archive-removed-transcript")
    assert action.archive_name == "s-old/deleted/" + _stamp(NOW_MS)
    storage = _storage(store)
    assert await storage.list_sessions() == ["s-new", "s-shared"]  # a transcript still used stays
    [archived] = await storage.list_archives()
    assert (archived.name, archived.session_id, archived.reason) == (action.archive_name, "s-old", "deleted")
    assert archived.size == action.size


async def test_a_dry_run_reports_the_transcript_actions_and_changes_nothing(store: SessionStore) -> None:
    await _session(store, "agent:main:direct:old", "s-old", age_days=40)
    report = await run_maintenance(store, settings=MaintenanceSettings(), now_ms=NOW_MS, dry_run=True)
    assert [a.name for a in report.file_actions] == ["s-old"] and not report.applied
    assert await _storage(store).list_sessions() == ["s-old"]
    assert await _storage(store).list_archives() == []
    assert await store.get("agent:main:direct:old") is not None


async def test_archive_retention_deletes_archives_past_their_rule(store: SessionStore) -> None:
    storage = _storage(store)
    for sid, reason, age in [("d-old", "deleted", 31), ("d-new", "deleted", 2), ("r-old", "reset", 11)]:
        await _transcript(store, sid, age_days=age)
        await storage.archive(sid, reason=reason, now_ms=NOW_MS - age * DAY_MS)  # type: ignore[arg-type]
    settings = MaintenanceSettings.from_mapping({"pruneAfter": "30d", "resetArchiveRetention": "10d"})
    report = await run_maintenance(store, settings=settings, now_ms=NOW_MS, on_save=True)
    assert sorted((a.reason, a.action) for a in report.file_actions) == [("archive-retention", "delete")] * 2
    assert [a.session_id for a in await storage.list_archives()] == ["d-new"]


async def test_reset_archives_stay_when_their_retention_is_off(store: SessionStore) -> None:
    storage = _storage(store)
    await _transcript(store, "r-old", age_days=400)
    await storage.archive("r-old", reason="reset", now_ms=NOW_MS - 400 * DAY_MS)
    settings = MaintenanceSettings.from_mapping({"pruneAfter": "30d", "resetArchiveRetention": False})
    report = await run_maintenance(store, settings=settings, now_ms=NOW_MS)
    assert report.file_actions == ()
    assert [a.session_id for a in await storage.list_archives()] == ["r-old"]


async def test_the_disk_budget_deletes_archives_and_unused_transcripts_oldest_first(
    store: SessionStore,
) -> None:
    storage = _storage(store)
    await _session(store, "agent:main:direct:a", "s-a", age_days=1, size=1000)
    await _transcript(store, "orphan-old", age_days=5, size=3000)
    await _transcript(store, "orphan-new", age_days=2, size=3000)
    await _transcript(store, "archived", age_days=9, size=3000)
    await storage.archive("archived", reason="reset", now_ms=NOW_MS - 3 * DAY_MS)
    total = sum(_size(store, n) for n in ["s-a", "orphan-old", "orphan-new"]) + _size(
        store, "archived/reset/" + _stamp(NOW_MS - 3 * DAY_MS)
    )
    settings = MaintenanceSettings(
        prune_after_ms=None, reset_archive_retention_ms=None, max_disk_bytes=total - 1, high_water_bytes=6000
    )
    report = await run_maintenance(store, settings=settings, now_ms=NOW_MS, on_save=True)
    budget = report.disk_budget
    assert budget is not None and budget.over_budget
    # the archive (last written 9 days ago), then the older orphan; the total is then under 6000 bytes
    assert [a.name for a in report.file_actions] == [
        "archived/reset/" + _stamp(NOW_MS - 3 * DAY_MS),
        "orphan-old",
    ]
    assert {a.reason for a in report.file_actions} == {"budget-artifact"}
    assert budget.total_bytes_after == budget.total_bytes_before - budget.freed_bytes <= 6000
    assert budget.removed_files == 2 and budget.removed_entries == 0
    assert await storage.list_sessions() == ["orphan-new", "s-a"]
    assert await storage.list_archives() == []


async def test_the_disk_budget_evicts_entries_oldest_first_with_their_transcripts(
    store: SessionStore,
) -> None:
    await _session(store, "agent:main:main", "s-main", age_days=9, size=2000)  # the main session stays
    await _session(store, "agent:main:direct:old", "s-old", age_days=8, size=2000)
    await _session(store, "agent:main:telegram:group:g", "s-group", age_days=7, size=2000)  # protected
    await _session(store, "agent:main:direct:mid", "s-mid", age_days=6, size=2000)
    await _session(store, "agent:main:direct:new", "s-new", age_days=1, size=2000)
    settings = MaintenanceSettings(prune_after_ms=None, max_disk_bytes=9000, high_water_bytes=7000)
    report = await run_maintenance(store, settings=settings, now_ms=NOW_MS, on_save=True)
    assert [(r.key, r.reason) for r in report.removals] == [
        ("agent:main:direct:old", "evict-budget"),
        ("agent:main:direct:mid", "evict-budget"),
    ]
    assert [(a.name, a.action, a.reason) for a in report.file_actions] == [
        ("s-old", "delete", "budget-entry-file"),
        ("s-mid", "delete", "budget-entry-file"),
    ]
    budget = report.disk_budget
    assert budget is not None and budget.removed_entries == 2 and budget.total_bytes_after <= 7000
    assert await _storage(store).list_sessions() == ["s-group", "s-main", "s-new"]
    assert await store.get("agent:main:direct:old") is None


async def test_the_budget_warns_when_protected_sessions_keep_it_above_the_mark(store: SessionStore) -> None:
    await _session(store, "agent:main:main", "s-main", age_days=9, size=5000)
    settings = MaintenanceSettings(prune_after_ms=None, max_disk_bytes=1000)
    report = await run_maintenance(store, settings=settings, now_ms=NOW_MS, on_save=True)
    assert report.removals == () and report.file_actions == ()
    assert any("still above high-water" in w for w in report.warnings)


async def test_cleanup_deletes_unreferenced_transcripts_older_than_prune_after(store: SessionStore) -> None:
    await _session(store, "agent:main:direct:a", "s-a", age_days=40)  # pruned: its transcript archived
    await _entry(store, "agent:main:main", "s-main", age_days=50)
    await _transcript(store, "s-main", age_days=50)  # used by the main session: kept
    await _transcript(store, "orphan-old", age_days=31)
    await _transcript(store, "orphan-new", age_days=29)
    report = await run_maintenance(store, settings=MaintenanceSettings(), now_ms=NOW_MS)
    unreferenced = [a.name for a in report.file_actions if a.reason == "unreferenced-artifact"]
    assert unreferenced == ["orphan-old"]
    assert report.unreferenced_artifacts is not None and report.unreferenced_artifacts.removed_files == 1
    # every row looked at, as a directory counts its files (was 0 beside removedFiles 1; break-it L6):
    # s-a's new archive, s-main and the two orphans
    assert report.unreferenced_artifacts.scanned_files == 4
    assert await _storage(store).list_sessions() == ["orphan-new", "s-main"]
    on_save = await run_maintenance(store, settings=MaintenanceSettings(), now_ms=NOW_MS, on_save=True)
    assert on_save.file_actions == ()


def _stamp(ms: int) -> str:
    return archive_stamp(ms)


_DAYS = {"fresh": 1, "stale": 40, "older": 80}


@pytest.mark.parametrize(
    "rules",
    [
        {"pruneAfter": "30d"},
        {"pruneAfter": "30d", "resetArchiveRetention": "10d"},
        {"pruneAfter": "60d", "resetArchiveRetention": False},
        {"pruneAfter": 0},
    ],
)
async def test_the_sql_passes_act_on_the_rows_the_planner_acts_on_as_files(
    store: SessionStore, tmp_path: Path, rules: dict[str, object]
) -> None:
    # the same sessions as a sessions directory (files, mtimes, archive names) and as rows (updated_at,
    # archived_at): the archive, retention and unreferenced passes pick the same transcripts
    directory = SessionStore.open(tmp_path / "sessions", clock=FakeClock(now_ms=NOW_MS), durable=False)
    files = tmp_path / "sessions"
    files.mkdir()
    entries = {
        "agent:main:direct:stale": ("s-stale", "stale"),
        "agent:main:direct:older": ("s-older", "older"),
        "agent:main:direct:fresh": ("s-fresh", "fresh"),
        "agent:main:direct:twin-old": ("s-shared", "older"),
        "agent:main:direct:twin-new": ("s-shared", "fresh"),
    }
    for key, (sid, age) in entries.items():
        for target in (store, directory):
            await _entry(target, key, sid, age_days=_DAYS[age])
    transcripts = {"s-stale": 40, "s-older": 80, "s-fresh": 1, "s-shared": 1, "orphan-a": 70, "orphan-b": 3}
    for sid, age in transcripts.items():
        await _transcript(store, sid, age_days=age)
        _file(files / f"{sid}.jsonl", age)
    archives = [("d-a", "deleted", 45), ("d-b", "deleted", 5), ("r-a", "reset", 20), ("r-b", "reset", 2)]
    for sid, reason, age in archives:
        when = NOW_MS - age * DAY_MS
        await _transcript(store, sid, age_days=age)
        await _storage(store).archive(sid, reason=reason, now_ms=when)  # type: ignore[arg-type]
        _file(files / f"{sid}.jsonl.{reason}.{_stamp(when)}", age)
    settings = MaintenanceSettings.from_mapping(rules)
    got = await run_maintenance(store, settings=settings, now_ms=NOW_MS)
    expected = await run_maintenance(directory, settings=settings, now_ms=NOW_MS)
    await directory.aclose()
    assert got.removed_keys == expected.removed_keys

    def acted(actions: object, *, rows: bool) -> set[tuple[str, str, str]]:
        out = set()
        for a in actions:  # type: ignore[attr-defined]
            sid = a.name.split("/")[0] if rows else a.name.split(".jsonl")[0]
            out.add((sid, a.action, a.reason))
        return out

    assert acted(got.file_actions, rows=True) == acted(expected.file_actions, rows=False)
    assert bool(got.file_actions) == (settings.prune_after_ms is not None)  # pruneAfter 0: none


def _file(path: Path, age_days: float) -> None:
    path.write_bytes(HEADER + b"\n")
    when = (NOW_MS - age_days * DAY_MS) / 1000
    os.utime(path, (when, when))
