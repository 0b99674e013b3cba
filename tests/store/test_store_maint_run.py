"""
``run_maintenance`` on real directories: field reports B18, B19, B21, transcript locks, backends.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from sessionkeeper.exceptions import StoreCorruptError
from sessionkeeper.store import SessionStore
from sessionkeeper.store.maintenance._plan import find_unreferenced_transcripts
from sessionkeeper.store.maintenance._run import list_store_files, run_maintenance
from sessionkeeper.store.maintenance._settings import MaintenanceSettings
from sessionkeeper.testing import FakeClock


NOW = 1_767_571_200_000  # 2026-01-05T00:00:00Z
DAY = 86_400_000
pytestmark = pytest.mark.anyio


def _write(path: Path, text: str, *, mtime_ms: int | None = None) -> None:
    path.write_text(text)
    if mtime_ms is not None:
        os.utime(path, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))


def _store(directory: Path, entries: dict[str, Any], *, transcripts: bool = True) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    _write(directory / "sessions.json", json.dumps(entries, indent=2))
    if transcripts:
        for entry in entries.values():
            header = {
                "type": "session",
                "version": 3,
                "id": entry["sessionId"],
                "timestamp": "2026-01-01T00:00:00Z",
            }
            _write(
                directory / f"{entry['sessionId']}.jsonl",
                json.dumps(header) + "\n",
                mtime_ms=entry["updatedAt"],
            )
    return directory


def _keys(directory: Path) -> list[str]:
    return list(json.loads((directory / "sessions.json").read_text()))


def _lock(directory: Path, transcript: str, pid: int) -> None:
    payload = {"pid": pid, "createdAt": "2026-01-05T00:00:00.000Z", "maxHoldMs": 300000}
    _write(directory / f"{transcript}.lock", json.dumps(payload, indent=2) + "\n")


def _dead_pid() -> int:
    pid = 4_000_000
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid += 1


# ------------------------------------------------------------------------------------------------ B18


def _b18(tmp_path: Path) -> Path:
    entries = {
        f"agent:main:direct:a{i + 1}": {"sessionId": f"a{i + 1}", "updatedAt": NOW - days * DAY}
        for i, days in enumerate((40, 35, 10, 1, 0))
    }
    store = _store(tmp_path / "sessions", entries)
    _write(store / "a1.jsonl.reset.2025-11-26T00-00-00.000Z", "x\n", mtime_ms=NOW - 40 * DAY)
    _write(store / "a2.jsonl.deleted.2026-01-03T00-00-00.000Z", "y\n", mtime_ms=NOW - 2 * DAY)
    return store


async def test_b18_prune_after_applies_under_max_entries_and_archives_are_retired(tmp_path, anyio_backend):
    store = _b18(tmp_path)
    settings = MaintenanceSettings.from_mapping({"maxEntries": 500, "pruneAfter": "30d", "mode": "enforce"})
    report = await run_maintenance(store, settings=settings, now_ms=NOW)
    assert _keys(store) == ["agent:main:direct:a3", "agent:main:direct:a4", "agent:main:direct:a5"]
    assert report.count("prune-stale") == 2
    names = set(os.listdir(store))
    assert "a1.jsonl.reset.2025-11-26T00-00-00.000Z" not in names  # resetArchiveRetention defaults to 30d
    assert "a2.jsonl.deleted.2026-01-03T00-00-00.000Z" in names  # 2 days old: kept
    assert {"a1.jsonl.deleted.2026-01-05T00-00-00.000Z", "a2.jsonl.deleted.2026-01-05T00-00-00.000Z"} <= names
    assert "a1.jsonl" not in names


async def test_b18_on_save_prunes_by_age_without_reaching_the_cap(tmp_path, anyio_backend):
    store = _b18(tmp_path)
    report = await run_maintenance(store, now_ms=NOW, on_save=True)
    assert report.count("prune-stale") == 2
    assert len(_keys(store)) == 3


@pytest.mark.parametrize("prune_after", [0, -1, "0d", False])
async def test_b18_zero_or_negative_prune_after_removes_nothing_and_warns(
    tmp_path, prune_after, anyio_backend
):
    store = _b18(tmp_path)
    before = sorted(os.listdir(store))
    settings = MaintenanceSettings.from_mapping({"pruneAfter": prune_after})
    report = await run_maintenance(store, settings=settings, now_ms=NOW)
    assert len(_keys(store)) == 5
    assert report.removals == ()
    assert any("disabled" in w for w in report.warnings)
    assert sorted(n for n in os.listdir(store) if n != "sessions.json.lock") == before


async def test_b18_warn_mode_changes_nothing_and_lists_removals(tmp_path, anyio_backend):
    store = _b18(tmp_path)
    snapshot = {n: (store / n).read_bytes() for n in os.listdir(store)}
    settings = MaintenanceSettings.from_mapping({"pruneAfter": "30d", "mode": "warn"})
    report = await run_maintenance(store, settings=settings, now_ms=NOW)
    assert {n: (store / n).read_bytes() for n in os.listdir(store) if n != "sessions.json.lock"} == snapshot
    assert report.mode == "warn"
    assert report.applied is False
    assert sorted(report.removed_keys) == ["agent:main:direct:a1", "agent:main:direct:a2"]
    assert any(a.name == "a1.jsonl.reset.2025-11-26T00-00-00.000Z" for a in report.file_actions)


# ------------------------------------------------------------------------------------------------ B19


def _b19(tmp_path: Path) -> Path:
    minute = 60_000
    entries = {
        "agent:main:main": {"sessionId": "m0", "updatedAt": NOW - 20 * DAY},
        "agent:main:subagent:a": {"sessionId": "s1", "updatedAt": NOW - 15 * minute},
        "cron:nightly": {"sessionId": "c1", "updatedAt": NOW - 10 * DAY},
        "hook:1": {"sessionId": "h1", "updatedAt": NOW - 5 * DAY},
        "hook:2": {"sessionId": "h2", "updatedAt": NOW - 60 * minute},
    }
    return _store(tmp_path / "sessions", entries)


async def test_b19_cap_spares_main_and_the_running_subagent(tmp_path, anyio_backend):
    store = _b19(tmp_path)
    settings = MaintenanceSettings(max_entries=3)
    report = await run_maintenance(
        store, settings=settings, now_ms=NOW, active_keys={"agent:main:subagent:a"}
    )
    assert sorted(report.removed_keys) == ["cron:nightly", "hook:1"]
    assert _keys(store) == ["agent:main:main", "agent:main:subagent:a", "hook:2"]


async def test_b19_a_held_transcript_lock_protects_the_entry_and_its_file(tmp_path, anyio_backend):
    store = _b19(tmp_path)
    _lock(store, "s1.jsonl", os.getppid())  # a live owner other than this process
    settings = MaintenanceSettings(max_entries=3)
    report = await run_maintenance(store, settings=settings, now_ms=NOW)  # no active set given
    assert "agent:main:subagent:a" in _keys(store)
    assert sorted(report.removed_keys) == ["cron:nightly", "hook:1"]
    assert (store / "s1.jsonl").exists()
    assert (store / "s1.jsonl.lock").exists()


async def test_b19_a_dead_owners_lock_does_not_protect(tmp_path, anyio_backend):
    store = _b19(tmp_path)
    _lock(store, "s1.jsonl", _dead_pid())
    report = await run_maintenance(store, settings=MaintenanceSettings(max_entries=1), now_ms=NOW)
    assert "agent:main:subagent:a" in report.removed_keys


async def test_b19_protected_entries_above_the_cap_stay_with_a_warning(tmp_path, anyio_backend):
    store = _b19(tmp_path)
    settings = MaintenanceSettings(max_entries=1)
    report = await run_maintenance(
        store, settings=settings, now_ms=NOW, active_keys={"agent:main:subagent:a"}
    )
    assert _keys(store) == ["agent:main:main", "agent:main:subagent:a"]
    assert any("exceed maxEntries=1" in w for w in report.warnings)


async def test_a_lock_taken_between_planning_and_execution_stops_the_move(
    tmp_path, anyio_backend, monkeypatch
):
    store = _b18(tmp_path)
    import sessionkeeper.store.maintenance._run as run_module

    original = run_module._execute_files

    def lock_then_execute(directory, actions):
        _lock(directory, "a1.jsonl", os.getppid())
        return original(directory, actions)

    monkeypatch.setattr(run_module, "_execute_files", lock_then_execute)
    report = await run_maintenance(store, now_ms=NOW)
    assert (store / "a1.jsonl").exists()
    assert any("lock was taken meanwhile" in w for w in report.warnings)
    assert all(a.name != "a1.jsonl" for a in report.file_actions)


# ------------------------------------------------------------------------------------------------ B21


async def test_b21_a_failed_store_write_leaves_sessions_json_and_transcripts_intact(
    tmp_path, anyio_backend, monkeypatch
):
    entries = {
        "agent:main:direct:a": {"sessionId": "s1", "updatedAt": NOW - 60 * DAY},
        "agent:main:direct:b": {"sessionId": "s2", "updatedAt": NOW},
        "agent:main:direct:c": {"sessionId": "s3", "updatedAt": NOW},
    }
    store = _store(tmp_path / "sessions", entries)
    before = (store / "sessions.json").read_bytes()
    real_write = os.write
    calls = {"n": 0}

    def torn_write(fd: int, data: Any) -> int:
        calls["n"] += 1
        real_write(fd, bytes(data)[: len(data) // 2])
        raise OSError(28, "No space left on device")

    def torn_writev(fd: int, buffers: Any) -> int:
        return torn_write(fd, b"".join(bytes(b) for b in buffers))

    monkeypatch.setattr(os, "write", torn_write)
    monkeypatch.setattr(os, "writev", torn_writev)
    with pytest.raises(OSError, match="No space"):
        await run_maintenance(store, now_ms=NOW)
    monkeypatch.undo()
    assert calls["n"] == 1
    assert (store / "sessions.json").read_bytes() == before
    assert not [n for n in os.listdir(store) if n.endswith(".tmp")]
    assert (store / "s1.jsonl").exists()  # nothing archived when the store could not be committed
    report = await run_maintenance(store, now_ms=NOW)  # a successful run leaves no temp file either
    assert report.removed_keys == ("agent:main:direct:a",)
    assert not [n for n in os.listdir(store) if n.endswith(".tmp")]


async def test_b21_an_empty_store_file_is_refused_not_read_as_empty(tmp_path, anyio_backend):
    store = tmp_path / "sessions"
    store.mkdir()
    (store / "sessions.json").write_bytes(b"")
    for sid in ("s1", "s2", "s3"):
        _write(store / f"{sid}.jsonl", "{}\n", mtime_ms=NOW - 90 * DAY)
    with pytest.raises(StoreCorruptError):
        await run_maintenance(store, now_ms=NOW)
    assert sorted(os.listdir(store)) == ["s1.jsonl", "s2.jsonl", "s3.jsonl", "sessions.json"]
    # the recovery helper lists the orphaned transcripts
    assert find_unreferenced_transcripts({}, files=list_store_files(store)) == [
        "s1.jsonl",
        "s2.jsonl",
        "s3.jsonl",
    ]


async def test_a_corrupt_store_is_backed_up_and_left_alone(tmp_path, anyio_backend):
    store = tmp_path / "sessions"
    store.mkdir()
    (store / "sessions.json").write_text("{not json")
    _write(store / "s1.jsonl", "{}\n", mtime_ms=NOW - 90 * DAY)
    with pytest.raises(StoreCorruptError) as info:
        await run_maintenance(store, now_ms=NOW)
    assert (store / "sessions.json").read_text() == "{not json"
    assert (store / "s1.jsonl").exists()
    backup = info.value.backup_path
    assert backup is not None
    assert backup.stat().st_mode & 0o777 == 0o600


async def test_dropping_unsafe_rows_backs_up_the_store_first(tmp_path, anyio_backend):
    entries = {
        "agent:main:direct:bad": {"sessionId": "../escape", "updatedAt": NOW},
        "agent:main:direct:ok": {"sessionId": "ok", "updatedAt": NOW},
    }
    store = tmp_path / "sessions"
    store.mkdir()
    original = json.dumps(entries, indent=2)
    (store / "sessions.json").write_text(original)
    report = await run_maintenance(store, now_ms=NOW)
    # nothing else to remove: the dropped row alone is a change, so the file holds what the report says
    assert report.actions["agent:main:direct:bad"] == "drop-unsafe"
    assert report.applied
    assert _keys(store) == ["agent:main:direct:ok"]
    backups = [n for n in os.listdir(store) if n.startswith("sessions.json.bak.")]
    assert [(store / b).read_text() for b in backups] == [original]
    assert (store / backups[0]).stat().st_mode & 0o777 == 0o600
    for backup in backups:
        (store / backup).unlink()
    entries["agent:main:direct:stale"] = {"sessionId": "st", "updatedAt": NOW - 90 * DAY}
    original = json.dumps(entries, indent=2)
    (store / "sessions.json").write_text(original)
    report = await run_maintenance(store, now_ms=NOW)
    assert report.actions["agent:main:direct:bad"] == "drop-unsafe"
    assert report.actions["agent:main:direct:stale"] == "prune-stale"
    assert _keys(store) == ["agent:main:direct:ok"]
    backups = [n for n in os.listdir(store) if n.startswith("sessions.json.bak.")]
    assert len(backups) == 1
    assert (store / backups[0]).read_text() == original
    assert not (tmp_path / "escape").exists()


async def test_a_dry_run_reports_the_unsafe_rows_the_enforce_run_drops(tmp_path, anyio_backend):
    entries = {
        "agent:main:direct:ok": {"sessionId": "ok", "updatedAt": NOW},
        "agent:main:direct:bad": {"sessionId": "../escape", "updatedAt": NOW},
        "agent:main:direct:junk": "not an object",
    }
    store = tmp_path / "sessions"
    store.mkdir()
    original = json.dumps(entries, indent=2)
    (store / "sessions.json").write_text(original)
    dry = await run_maintenance(store, now_ms=NOW, dry_run=True)
    assert (store / "sessions.json").read_text() == original  # a dry run writes nothing
    warn = await run_maintenance(store, now_ms=NOW, mode="warn")
    assert (store / "sessions.json").read_text() == original  # nor does warn mode
    real = await run_maintenance(store, now_ms=NOW)
    assert dry.removals == warn.removals == real.removals
    assert dry.to_json()["wouldMutate"] is True
    assert dry.bytes_after == real.bytes_after
    on_disk = sum((store / n).stat().st_size for n in os.listdir(store) if not n.startswith("sessions.json."))
    assert on_disk == real.bytes_after
    assert _keys(store) == ["agent:main:direct:ok"]
    again = await run_maintenance(store, now_ms=NOW)  # nothing left to drop: no rewrite, no backup
    assert again.removals == ()
    assert len([n for n in os.listdir(store) if n.startswith("sessions.json.bak.")]) == 1


# ------------------------------------------------------------------------------------------------ stores


async def test_runs_on_a_session_store_with_the_sqlite_backend(tmp_path, anyio_backend):
    directory = tmp_path / "sessions"
    clock = FakeClock(now_ms=NOW - 60 * DAY)
    async with SessionStore.open(directory, backend="sqlite", clock=clock) as store:
        await store.patch("agent:main:direct:old", {"sessionId": "s1"})
        clock.advance(ms=59 * DAY)
        await store.patch("agent:main:direct:new", {"sessionId": "s2"})
        _write(directory / "s1.jsonl", "{}\n")
        _write(directory / "s2.jsonl", "{}\n")
        report = await run_maintenance(store, now_ms=NOW)
        assert report.removed_keys == ("agent:main:direct:old",)
        assert await store.get("agent:main:direct:old") is None
        assert await store.get("agent:main:direct:new") is not None
    assert (directory / "s1.jsonl.deleted.2026-01-05T00-00-00.000Z").exists()


async def test_uses_the_clock_when_no_time_is_given(tmp_path, anyio_backend):
    store = _b18(tmp_path)
    report = await run_maintenance(store, clock=FakeClock(now_ms=NOW), dry_run=True)
    assert report.now_ms == NOW
    assert report.dry_run


async def test_rejects_unknown_store_objects():
    with pytest.raises(TypeError):
        await run_maintenance(object())


def test_transcripts_with_messages(tmp_path):
    from sessionkeeper.store.maintenance._run import transcripts_with_messages

    header = json.dumps({"type": "session", "version": 3, "id": "x"}) + "\n"
    cases = {
        "header.jsonl": header,
        "empty.jsonl": "",
        "msg.jsonl": header + json.dumps({"type": "message", "message": {"role": "user"}}) + "\n",
        "legacy.jsonl": json.dumps({"role": "assistant", "content": "hi"}) + "\n",
        "wrapped.jsonl": json.dumps({"message": {"role": "toolResult"}}) + "\n",
        "garbage.jsonl": header + "{not json\n",
        "big.jsonl": header + " " * 5000 + "\n",
        "notes.txt": "x",
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
    found = transcripts_with_messages(tmp_path, list_store_files(tmp_path))
    assert found == {"msg.jsonl", "legacy.jsonl", "wrapped.jsonl", "garbage.jsonl", "big.jsonl"}


def test_held_locks_use_the_write_lock_rules(tmp_path: Path) -> None:
    """D6 protects live owners only: a recycled pid (start time differs) or a dead one protects nothing."""
    from sessionkeeper.store.maintenance._plan import StoreFile
    from sessionkeeper.store.maintenance._run import held_transcript_locks

    live = {"pid": os.getppid(), "createdAt": "2026-01-05T00:00:00.000Z", "maxHoldMs": 300000}
    recycled = {**live, "starttime": 1}
    dead = {**live, "pid": _dead_pid()}
    for name, payload in (("live", live), ("recycled", recycled), ("dead", dead)):
        (tmp_path / f"{name}.jsonl.lock").write_text(json.dumps(payload))
    files = [StoreFile(name=f"{n}.jsonl.lock", size=1, mtime_ms=0) for n in ("live", "recycled", "dead")]
    assert held_transcript_locks(tmp_path, files) == frozenset({"live.jsonl"})
