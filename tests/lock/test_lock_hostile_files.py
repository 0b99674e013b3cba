"""The session write lock against hostile lock files (deeply nested payloads)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

from sessionkeeper._lockfile import parse_lock_payload
from sessionkeeper.exceptions import SessionBusyError
from sessionkeeper.transcript import SessionWriteLock, WriteLockSettings


_DEEP = "[" * 5000 + "]" * 5000  # past the JSON decoder's recursion limit


def test_deeply_nested_lock_payload_reads_as_unknown_owner() -> None:
    owner = parse_lock_payload(_DEEP)
    assert owner.pid is None
    assert owner.created_at_ms is None


def test_old_deeply_nested_lock_file_is_reclaimed(tmp_path: Path) -> None:
    transcript = tmp_path / "s.jsonl"
    lock = tmp_path / "s.jsonl.lock"
    lock.write_text(_DEEP)
    old = time.time() - 3 * 3600
    os.utime(lock, (old, old))

    async def take() -> None:
        async with SessionWriteLock.acquire(transcript, settings=WriteLockSettings(), timeout_ms=200):
            assert lock.exists()

    anyio.run(take)
    assert not lock.exists()


def test_fresh_deeply_nested_lock_file_is_busy_not_a_crash(tmp_path: Path) -> None:
    transcript = tmp_path / "s.jsonl"
    (tmp_path / "s.jsonl.lock").write_text(_DEEP)

    async def take() -> None:
        async with SessionWriteLock.acquire(transcript, settings=WriteLockSettings(), timeout_ms=100):
            pass

    with pytest.raises(SessionBusyError):
        anyio.run(take)
