"""SqliteStoreBackend: schema, WAL, durability setting, corrupt files, private modes."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest

from sessionkeeper.exceptions import StoreCorruptError
from sessionkeeper.store import SessionEntry, SqliteStoreBackend, session_entry_from_dict


pytestmark = pytest.mark.anyio


async def test_one_row_per_key_in_wal_mode(tmp_path: Path) -> None:
    backend = SqliteStoreBackend(tmp_path)
    entry = session_entry_from_dict({"sessionId": "s", "updatedAt": 1, "future": {"x": 1}})
    await backend.put("agent:main:main", entry)
    await backend.put("agent:main:other", SessionEntry(session_id="t", updated_at=2))
    await backend.update("agent:main:main", lambda e: SessionEntry(session_id="s", updated_at=3))
    assert backend.path == tmp_path / "sessions.sqlite"
    conn = sqlite3.connect(backend.path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
        rows = conn.execute("SELECT session_key, entry FROM session_entries ORDER BY seq").fetchall()
    finally:
        conn.close()
    assert rows == [
        ("agent:main:main", '{"sessionId":"s","updatedAt":3}'),
        ("agent:main:other", '{"sessionId":"t","updatedAt":2}'),
    ]
    assert stat.S_IMODE(backend.path.stat().st_mode) == 0o600
    await backend.aclose()


async def test_unknown_fields_are_stored_in_the_row(tmp_path: Path) -> None:
    backend = SqliteStoreBackend(tmp_path / "s.sqlite")
    entry = session_entry_from_dict({"sessionId": "s", "updatedAt": 1, "future": {"x": [1, None]}})
    await backend.put("k", entry)
    await backend.aclose()
    again = SqliteStoreBackend(tmp_path / "s.sqlite")
    got = await again.get("k")
    assert got is not None
    assert got.extra == {"future": {"x": [1, None]}}
    await again.aclose()


@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL", "OFF", "EXTRA"])
async def test_synchronous_setting_is_applied(tmp_path: Path, synchronous: str) -> None:
    backend = SqliteStoreBackend(tmp_path, synchronous=synchronous)  # type: ignore[arg-type]
    await backend.put("k", SessionEntry(session_id="s", updated_at=1))
    assert backend._conn is not None
    level = backend._conn.execute("PRAGMA synchronous").fetchone()[0]
    assert level == {"OFF": 0, "NORMAL": 1, "FULL": 2, "EXTRA": 3}[synchronous]
    await backend.aclose()


def test_bad_synchronous_value_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="synchronous"):
        SqliteStoreBackend(tmp_path, synchronous="SOMETIMES")  # type: ignore[arg-type]


async def test_garbage_file_is_backed_up_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite"
    content = b"this is not a database at all" * 200
    path.write_bytes(content)
    backend = SqliteStoreBackend(path)
    with pytest.raises(StoreCorruptError) as info:
        await backend.load_all()
    assert info.value.backup_path is not None
    assert info.value.backup_path.read_bytes() == content
    assert stat.S_IMODE(info.value.backup_path.stat().st_mode) == 0o600
    assert path.read_bytes() == content
    await backend.aclose()


async def test_unknown_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version=7")
    conn.commit()
    conn.close()
    backend = SqliteStoreBackend(path)
    with pytest.raises(StoreCorruptError, match="schema version 7"):
        await backend.keys()
    await backend.aclose()


async def test_a_row_that_is_not_an_object_is_reported(tmp_path: Path) -> None:
    backend = SqliteStoreBackend(tmp_path)
    await backend.put("k", SessionEntry(session_id="s", updated_at=1))
    assert backend._conn is not None
    backend._conn.execute("UPDATE session_entries SET entry = '[1]'")
    with pytest.raises(StoreCorruptError, match="'k' is not a JSON object"):
        await backend.get("k")
    backend._conn.execute("UPDATE session_entries SET entry = '{bad'")
    with pytest.raises(StoreCorruptError, match="not valid JSON"):
        await backend.load_all()
    await backend.aclose()


async def test_closed_backend_refuses_calls(tmp_path: Path) -> None:
    backend = SqliteStoreBackend(tmp_path)
    await backend.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await backend.keys()


async def test_wal_sidecars_are_private(tmp_path: Path) -> None:
    backend = SqliteStoreBackend(tmp_path)
    await backend.put("k", SessionEntry(session_id="s", updated_at=1))
    for suffix in ("-wal", "-shm"):
        side = tmp_path / f"sessions.sqlite{suffix}"
        assert side.exists()
        assert stat.S_IMODE(side.stat().st_mode) == 0o600
    await backend.aclose()
