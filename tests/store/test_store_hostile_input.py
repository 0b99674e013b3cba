"""The store on hostile input: deep nesting, unsafe session ids, lone surrogates, absurd numbers."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC
from pathlib import Path

import anyio
import pytest

from sessionkeeper.exceptions import InvalidSessionEntryError, StoreCorruptError
from sessionkeeper.store import (
    MaintenanceSettings,
    ResetPolicy,
    SessionEntry,
    SessionStore,
    evaluate_freshness,
)


DAY = 86_400_000
_DEEP = "[" * 5000 + "]" * 5000  # past the JSON decoders' recursion limit


def _store(tmp_path: Path, text: str) -> Path:
    (tmp_path / "sessions.json").write_text(text, encoding="utf-8")
    return tmp_path


def test_null_prune_after_is_the_default_not_disabled() -> None:
    # OpenClaw: `maintenance?.pruneAfter ?? maintenance?.pruneDays`, then the 30 d default
    assert MaintenanceSettings.from_mapping({"pruneAfter": None}).prune_after_ms == 30 * DAY
    with pytest.warns(DeprecationWarning, match="pruneDays"):
        settings = MaintenanceSettings.from_mapping({"pruneAfter": None, "pruneDays": 3})
    assert settings.prune_after_ms == 3 * DAY
    settings = MaintenanceSettings.from_mapping(
        {"resetArchiveRetention": None, "maxEntries": None, "mode": None, "maxDiskBytes": None}
    )
    assert settings.reset_archive_retention_ms == 30 * DAY
    assert (settings.max_entries, settings.mode, settings.max_disk_bytes) == (500, "enforce", None)


def test_deeply_nested_sessions_json_reads_as_json_parse_does(tmp_path: Path) -> None:
    # issue 15: JSON.parse reads any depth; a row that is not an object is dropped, as OpenClaw drops it
    store = _store(tmp_path, '{"k": ' + _DEEP + "}")

    async def read() -> list[object]:
        async with SessionStore.open(store, backend="json") as opened:
            return list(await opened.list())

    assert anyio.run(read) == []
    assert (store / "sessions.json").read_text() == '{"k": ' + _DEEP + "}"
    assert list(store.glob("sessions.json.bak.*")) == []


def test_deeply_nested_sqlite_row_is_corrupt_not_recursion_error(tmp_path: Path) -> None:
    async def seed_and_read() -> None:
        async with SessionStore.open(tmp_path, backend="sqlite") as opened:
            await opened.patch("k", label="x")
        with sqlite3.connect(tmp_path / "sessions.sqlite") as conn:
            conn.execute("UPDATE session_entries SET entry = ? WHERE session_key = 'k'", (_DEEP,))
        async with SessionStore.open(tmp_path, backend="sqlite") as opened:
            await opened.get("k")

    with pytest.raises(StoreCorruptError):
        anyio.run(seed_and_read)


@pytest.mark.parametrize("backend", ["json", "sqlite", "memory"])
@pytest.mark.parametrize("session_id", ["../../evil", "a/b", "x\x00y", "", "..", "A" * 256])
def test_unsafe_session_id_is_refused_at_write_not_dropped_at_next_load(
    tmp_path: Path, backend: str, session_id: str
) -> None:
    async def run() -> None:
        store = (
            SessionStore.in_memory() if backend == "memory" else SessionStore.open(tmp_path, backend=backend)  # type: ignore[arg-type]
        )
        async with store:
            await store.patch("keep", label="kept")
            with pytest.raises(InvalidSessionEntryError, match="sessionId"):
                await store.patch("k", session_id=session_id, label="lost on reload")
            assert await store.get("k") is None
        if backend != "memory":
            async with SessionStore.open(tmp_path, backend=backend) as reopened:  # type: ignore[arg-type]
                assert [key for key, _ in await reopened.list()] == ["keep"]

    anyio.run(run)


@pytest.mark.parametrize("idle_minutes", [1e308, 1e303])
def test_absurd_idle_minutes_never_expires_instead_of_overflow(idle_minutes: float) -> None:
    # JavaScript: lastInteractionAt + 1e308 * 60000 is Infinity, so the session never goes idle-stale
    policy = ResetPolicy.from_mapping({"reset": {"mode": "idle", "idleMinutes": idle_minutes}}).resolve(
        "direct"
    )
    verdict = evaluate_freshness(
        updated_at=1,
        session_started_at=1,
        last_interaction_at=1,
        now_ms=1_789_990_000_000,
        policy=policy,
        zone=UTC,
    )
    assert verdict.fresh and verdict.stale_reason is None


def test_rewritten_entry_keeps_javascript_number_forms(tmp_path: Path) -> None:
    # as OpenClaw writes them (JSON.stringify): msgspec would give 1.2345e-6, 1e21, 1e-7 -> 1e-7, 100.0
    text = (
        '{\n  "k": {\n    "sessionId": "abc",\n    "updatedAt": 1789990000000,\n    "x": {\n'
        '      "cost": 0.0000012345,\n      "big": 1e+21,\n      "tiny": 1e-7,\n      "half": 1.5,\n'
        '      "huge": 1.7976931348623157e+308\n    }\n  }\n}'
    )
    store = _store(tmp_path, text)

    async def run() -> None:
        async with SessionStore.open(store) as opened:
            await opened.patch("k", {"total": 100.0, "negzero": -0.0}, label="x", preserve_activity=True)

    anyio.run(run)
    written = (store / "sessions.json").read_text()
    expected_x = text[text.index('    "x"') : text.rindex("\n  }\n}")]
    assert expected_x in written
    assert '"total": 100,' in written and '"negzero": 0\n' in written


def test_sqlite_key_with_lone_surrogate_is_a_typed_error(tmp_path: Path) -> None:
    key = "agent:main:k\ud800"

    async def run() -> None:
        async with SessionStore.open(tmp_path, backend="sqlite") as store:
            with pytest.raises(InvalidSessionEntryError, match="surrogate"):
                await store.patch(key, label="x")
            with pytest.raises(InvalidSessionEntryError, match="surrogate"):
                await store.backend.transaction(
                    lambda entries: entries.update({key: SessionEntry(session_id="a")})
                )
            assert await store.get(key) is None
            assert await store.delete(key) is False
            assert await store.list() == []

    anyio.run(run)


def test_reset_with_session_file_outside_the_directory_starts_fresh_inside(tmp_path: Path) -> None:
    """
    A sessionFile escaping the sessions dir: never a half reset, and never stuck (issue 15, F1): the new
    session's transcript is ``<new id>.jsonl`` inside the directory, nothing is written outside it.
    """
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    outside = tmp_path / "elsewhere"
    row = {"k": {"sessionId": "old", "updatedAt": 1, "sessionFile": str(outside / "old.jsonl")}}
    (sessions / "sessions.json").write_text(json.dumps(row, indent=2))

    async def run() -> str:
        async with SessionStore.open(sessions) as store:
            fresh = await store.reset("k")
            assert store.transcript_file(fresh) == sessions / f"{fresh.session_id}.jsonl"
            assert (await store.require("k")).session_id == fresh.session_id
            return str(fresh.session_id)

    new_id = anyio.run(run)
    assert not outside.exists()
    names = sorted(p.name for p in sessions.iterdir() if not p.name.endswith(".lock"))
    assert names == sorted(["sessions.json", f"{new_id}.jsonl"])
    assert "sessionFile" not in json.loads((sessions / "sessions.json").read_text())["k"]
