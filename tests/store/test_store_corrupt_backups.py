"""A corrupt store is backed up once by a writer, never by a read-only open."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from sessionkeeper.exceptions import StoreCorruptError
from sessionkeeper.store import (
    SessionStore,
    run_maintenance,
)


NOW = 1_789_992_000_000


@pytest.mark.anyio
async def test_a_writer_still_backs_up_a_corrupt_store(tmp_path: Path) -> None:
    (tmp_path / "sessions.json").write_text("{not json")
    async with SessionStore.open(tmp_path, read_only=True) as reader:
        with pytest.raises(StoreCorruptError) as info:
            await reader.list()
        assert info.value.backup_path is None
    async with SessionStore.open(tmp_path) as writer:
        with pytest.raises(StoreCorruptError) as info:
            await writer.patch("agent:main:main", label="x")
        assert info.value.backup_path is not None and info.value.backup_path.read_text() == "{not json"
    assert (tmp_path / "sessions.json").read_text() == "{not json"


@pytest.mark.parametrize("backend", ["json", "sqlite"])
def test_each_reader_of_an_unchanged_corrupt_store_does_not_add_a_backup(
    tmp_path: Path, backend: str
) -> None:
    name = "sessions.json" if backend == "json" else "sessions.sqlite"
    target = tmp_path / name
    target.write_bytes(b"[not a store" * 1000)

    async def read() -> None:
        async with SessionStore.open(tmp_path, backend=backend) as opened:  # type: ignore[arg-type]
            await opened.get("k")

    for _ in range(3):  # three processes (cron runs of `sessions list`) each open the store once
        with pytest.raises(StoreCorruptError) as caught:
            anyio.run(read)
    backups = sorted(tmp_path.glob(f"{name}.bak.*"))
    assert len(backups) == 1 and caught.value.backup_path == backups[0]
    assert backups[0].read_bytes() == target.read_bytes()
    target.write_bytes(b"[other corrupt content")
    with pytest.raises(StoreCorruptError):
        anyio.run(read)
    assert len(sorted(tmp_path.glob(f"{name}.bak.*"))) == 2


@pytest.mark.anyio
@pytest.mark.parametrize("content", [b"  \n", b"{not json"])
async def test_run_maintenance_dry_run_and_warn_on_a_path_write_no_backup(
    tmp_path: Path, content: bytes
) -> None:
    store = tmp_path / "sessions"
    store.mkdir()
    (store / "sessions.json").write_bytes(content)
    for kwargs in ({"dry_run": True}, {"mode": "warn"}):
        with pytest.raises(StoreCorruptError) as info:
            await run_maintenance(store, now_ms=NOW, **kwargs)
        assert info.value.backup_path is None
        assert os.listdir(store) == ["sessions.json"]
    # the enforce run still backs the file up (0600) before refusing
    with pytest.raises(StoreCorruptError) as info:
        await run_maintenance(store, now_ms=NOW)
    assert info.value.backup_path is not None
    assert info.value.backup_path.stat().st_mode & 0o777 == 0o600
