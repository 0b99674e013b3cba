"""Fixtures for the lock tests: a fake clock, child processes (live, dead, lock holders)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sessionkeeper.testing import FakeClock


def spawn_sleeper() -> subprocess.Popen[bytes]:
    """A live process that is not ours (a plain sleeper)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


HOLDER_SCRIPT = r"""
import sys, anyio
from sessionkeeper.transcript.lock._lock import SessionWriteLock
from sessionkeeper.transcript.lock._settings import WriteLockSettings

async def main():
    async with SessionWriteLock.acquire(sys.argv[1], settings=WriteLockSettings(watchdog_interval_ms=0)):
        print("locked", flush=True)
        sys.stdin.readline()
    print("released", flush=True)

anyio.run(main)
"""


def spawn_holder(transcript: Path) -> subprocess.Popen[str]:
    """A child process that takes the lock with sessionkeeper and holds it until stdin gets a line."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER_SCRIPT, str(transcript)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == "locked", line
    return proc


@pytest.fixture
def clock() -> FakeClock:
    """A fake clock: ``sleep`` advances time at once, ``advance`` moves it by hand."""
    return FakeClock(now_ms=1_780_000_000_000, monotonic=1000.0)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = spawn_sleeper()
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def reaped_pid() -> int:
    return dead_pid()


@pytest.fixture
def holder() -> Iterator[Callable[[Path], subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []

    def start(transcript: Path) -> subprocess.Popen[str]:
        proc = spawn_holder(transcript)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
