"""
Read-only opens of the stores (break-it #2): ``sessions list`` / ``status`` / ``cleanup --dry-run`` on an
empty or foreign ``sessions.sqlite`` wrote our schema into it. A read-only open creates and writes nothing;
a foreign SQLite file is refused (``StoreCorruptError``), by writers too.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path

import pytest
from tests._helpers import run_cli

from sessionkeeper.exceptions import StoreCorruptError, StoreError
from sessionkeeper.store import JsonFileStoreBackend, SessionEntry, SessionStore, SqliteStoreBackend


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _listing(directory: Path) -> dict[str, str]:
    return {p.name: _digest(p) for p in sorted(directory.iterdir())}


def _foreign(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.execute("INSERT INTO notes VALUES ('mine')")
        conn.commit()
    finally:
        conn.close()


def _blank_sqlite(path: Path) -> None:
    """A valid SQLite file with no table (a header only)."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA user_version=0")
        conn.execute("CREATE TABLE t (x)")
        conn.execute("DROP TABLE t")
        conn.commit()
    finally:
        conn.close()
    assert path.stat().st_size > 0


def _cli(*args: str) -> tuple[int, str, str]:
    result = run_cli(*args)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("kind", ["zero-bytes", "no-tables"])
def test_list_status_and_dry_run_on_an_empty_sqlite_store_write_nothing(tmp_path: Path, kind: str) -> None:
    store = tmp_path / "sessions"
    store.mkdir()
    db = store / "sessions.sqlite"
    if kind == "zero-bytes":
        db.touch()
    else:
        _blank_sqlite(db)
    before = _listing(store)
    code, out, _ = _cli("sessions", "list", "--store", str(store), "--json")
    assert code == 0
    data = json.loads(out)
    assert (data["backend"], data["count"], data["sessions"]) == ("sqlite", 0, [])
    code, _, err = _cli("status", "--store", str(store), "agent:main:main")
    assert code == 1 and "no session" in err
    code, out, _ = _cli("sessions", "cleanup", "--store", str(store), "--dry-run", "--json")
    assert code == 0
    assert json.loads(out)["beforeCount"] == 0
    assert _listing(store) == before  # no schema written, no sidecar, no lock file


def test_a_foreign_sqlite_file_is_a_clear_error_and_is_left_alone(tmp_path: Path) -> None:
    store = tmp_path / "sessions"
    store.mkdir()
    db = store / "sessions.sqlite"
    _foreign(db)
    before = _listing(store)
    for args in (
        ("sessions", "list", "--store", str(store)),
        ("status", "--store", str(store), "k"),
        ("sessions", "cleanup", "--store", str(store), "--dry-run"),
        ("sessions", "cleanup", "--store", str(store), "--enforce"),
    ):
        code, _, err = _cli(*args)
        assert code == 1, args
        assert "not a session store" in err and "notes" in err, args
        assert _listing(store) == before, args


@pytest.mark.anyio
async def test_a_writer_refuses_a_foreign_database_without_touching_it(tmp_path: Path) -> None:
    db = tmp_path / "other.sqlite"
    _foreign(db)
    digest = _digest(db)
    backend = SqliteStoreBackend(db)
    with pytest.raises(StoreCorruptError, match="not a session store") as info:
        await backend.put("k", SessionEntry(session_id="s", updated_at=1))
    assert info.value.backup_path is None  # nothing was repaired: no backup needed
    await backend.aclose()
    assert _digest(db) == digest
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # not switched to WAL
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    finally:
        conn.close()
    assert tables == ["notes"]


@pytest.mark.anyio
async def test_a_writer_still_creates_its_schema_in_an_empty_file(tmp_path: Path) -> None:
    db = tmp_path / "sessions.sqlite"
    db.touch()
    async with SessionStore(SqliteStoreBackend(db)) as store:
        await store.backend.put("k", SessionEntry(session_id="s", updated_at=1))
    async with SessionStore(SqliteStoreBackend(db, read_only=True)) as store:
        assert list(await store.backend.load_all()) == ["k"]


@pytest.mark.anyio
async def test_read_only_backend_reads_a_live_wal_store_and_refuses_writes(tmp_path: Path) -> None:
    writer = SqliteStoreBackend(tmp_path)
    await writer.put("a", SessionEntry(session_id="s1", updated_at=1))
    reader = SqliteStoreBackend(tmp_path, read_only=True)
    assert list(await reader.load_all()) == ["a"]
    await writer.put("b", SessionEntry(session_id="s2", updated_at=2))  # committed while the reader is open
    assert await reader.keys() == ["a", "b"]
    assert (await reader.get("b")) == SessionEntry(session_id="s2", updated_at=2)
    with pytest.raises(StoreError, match="read-only"):
        await reader.put("c", SessionEntry(session_id="s3"))
    with pytest.raises(StoreError, match="read-only"):
        await reader.update("a", lambda entry: None)
    with pytest.raises(StoreError, match="read-only"):
        await reader.delete("a")
    with pytest.raises(StoreError, match="read-only"):
        await reader.transaction(lambda working: None)
    await reader.aclose()
    await writer.aclose()
    assert "read_only=True" in repr(reader)


@pytest.mark.anyio
async def test_read_only_open_of_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    for backend in ("sqlite", "json"):
        directory = tmp_path / backend
        directory.mkdir()
        async with SessionStore.open(directory, backend=backend, read_only=True) as store:  # type: ignore[arg-type]
            assert await store.list() == []
            assert await store.get("k") is None
            with pytest.raises(StoreError, match="read-only"):
                await store.patch("k", {"sessionId": "s"})
        assert os.listdir(directory) == []


@pytest.mark.anyio
async def test_read_only_unreadable_file_is_reported_without_a_backup(tmp_path: Path) -> None:
    db = tmp_path / "sessions.sqlite"
    db.write_bytes(b"not a database at all" * 20)
    backend = SqliteStoreBackend(db, read_only=True)
    with pytest.raises(StoreCorruptError, match="left unchanged") as info:
        await backend.load_all()
    assert info.value.backup_path is None
    await backend.aclose()
    assert os.listdir(tmp_path) == ["sessions.sqlite"]


@pytest.mark.anyio
async def test_json_backend_read_only_refuses_writes_and_makes_no_lock_file(tmp_path: Path) -> None:
    path = tmp_path / "sessions.json"
    path.write_text(json.dumps({"k": {"sessionId": "s", "updatedAt": 1}}, indent=2))
    backend = JsonFileStoreBackend(path, read_only=True)
    assert list(await backend.load_all()) == ["k"]
    with pytest.raises(StoreError, match="read-only"):
        await backend.delete("k")
    await backend.aclose()
    assert os.listdir(tmp_path) == ["sessions.json"]
