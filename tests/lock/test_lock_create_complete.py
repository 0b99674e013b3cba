"""
A lock file appears complete or not at all (issue 15, operational).

Before the fix the lock was created with ``O_CREAT|O_EXCL`` and filled afterwards: a SIGKILL between the
two left an empty, owner-less lock, and the next writer waited the full 30 s orphan grace. Now the payload
is written to an unnamed (``O_TMPFILE``) or temp file first and hard-linked into place.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from sessionkeeper._lockfile import lock_path_for, parse_lock_payload
from sessionkeeper.transcript.lock import _registry as _lock_registry
from sessionkeeper.transcript.lock._lock import SessionWriteLock


pytestmark = pytest.mark.anyio


# The child kills itself with SIGKILL at the moment it writes the lock payload (fault injection).
_KILLED_WHILE_FILLING = """
import os, signal, sys
from pathlib import Path
import anyio
from sessionkeeper.transcript.lock._lock import SessionWriteLock

real_write = os.write

def write(fd, data):
    if b'"createdAt"' in bytes(data):
        os.kill(os.getpid(), signal.SIGKILL)
    return real_write(fd, data)

os.write = write

async def main():
    await SessionWriteLock.acquire(Path(sys.argv[1]))

anyio.run(main)
"""


def test_sigkill_while_filling_the_lock_leaves_no_lock(tmp_path: Path) -> None:
    transcript = tmp_path / "s.jsonl"
    transcript.write_text("")
    child = subprocess.run([sys.executable, "-c", _KILLED_WHILE_FILLING, str(transcript)], check=False)
    assert child.returncode == -signal.SIGKILL
    assert sorted(os.listdir(tmp_path)) == ["s.jsonl"]  # no empty lock, no temp file

    async def take() -> float:
        started = time.monotonic()
        async with SessionWriteLock.acquire(transcript, timeout_ms=2_000):
            return time.monotonic() - started

    assert anyio.run(take) < 2.0  # the next writer does not wait for an orphan grace


@pytest.mark.parametrize("unnamed", [True, False])
def test_created_lock_holds_the_whole_payload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unnamed: bool
) -> None:
    if not unnamed:  # the platforms without O_TMPFILE: a named temp file, linked, then removed
        monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    lock = tmp_path / "s.jsonl.lock"
    raw = b'{"pid": 1, "createdAt": "2026-01-01T00:00:00.000Z"}'
    st = _lock_registry.create_complete(lock, raw)
    assert lock.read_bytes() == raw
    assert (os.stat(lock).st_ino, os.stat(lock).st_mode & 0o777) == (st.st_ino, 0o600)
    assert sorted(os.listdir(tmp_path)) == ["s.jsonl.lock"]
    with pytest.raises(FileExistsError):
        _lock_registry.create_complete(lock, b"{}")
    assert lock.read_bytes() == raw
    assert sorted(os.listdir(tmp_path)) == ["s.jsonl.lock"]


@pytest.mark.parametrize("unnamed", [True, False])
def test_a_dangling_symlink_at_the_lock_path_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unnamed: bool
) -> None:
    if not unnamed:
        monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    outside = tmp_path / "outside"
    outside.mkdir()
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    (sessions / "s.jsonl.lock").symlink_to(outside / "planted")
    with pytest.raises(FileExistsError):
        _lock_registry.create_complete(sessions / "s.jsonl.lock", b"{}")
    assert list(outside.iterdir()) == []


async def test_acquired_lock_keeps_openclaws_payload(tmp_path: Path) -> None:
    transcript = tmp_path / "s.jsonl"
    async with SessionWriteLock.acquire(transcript):
        payload = parse_lock_payload(lock_path_for(transcript).read_bytes())
        raw = json.loads(lock_path_for(transcript).read_bytes())
    assert payload is not None and payload.pid == os.getpid()
    assert {"pid", "createdAt"} <= raw.keys()
    assert sorted(os.listdir(tmp_path)) == []
