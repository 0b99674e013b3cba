"""
Opt-in (``--run-openclaw-live``): sessionkeeper's lock and OpenClaw 2026.7.35's lock on the same files.

Needs node and an installed oracle (``$OPENCLAW_ORACLE``, default ``/tmp/openclaw-oracle``). Checks that
we wait for a lock OpenClaw holds and take it once released, records the known hazard that OpenClaw
takes over a lock held by a live non-OpenClaw process (``non-openclaw-owner``) and that our handle
detects it before writing, and that the committed fixture still matches OpenClaw's answers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from sessionkeeper.exceptions import LockNotHeldError, SessionBusyError
from sessionkeeper.transcript import SessionWriteLock, WriteLockSettings


ORACLE_DIR = Path(
    os.environ.get("OPENCLAW_ORACLE", os.environ.get("OPENCLAW_ORACLE_DIR", "/tmp/openclaw-oracle"))
)
HERE = Path(__file__).resolve().parent
SETTINGS = WriteLockSettings(acquire_timeout_ms=800, watchdog_interval_ms=0)

pytestmark = [pytest.mark.oracle, pytest.mark.anyio]


@pytest.fixture
def live(request: pytest.FixtureRequest) -> Path:
    if not request.config.getoption("--run-openclaw-live"):
        pytest.skip("live OpenClaw oracle runs are opt-in: --run-openclaw-live")
    if shutil.which("node") is None or not (ORACLE_DIR / "node_modules" / "openclaw").is_dir():
        pytest.skip(f"node or the installed OpenClaw oracle ({ORACLE_DIR}) is absent")
    return ORACLE_DIR


def _openclaw(file: Path, timeout_ms: int, hold_ms: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["node", str(HERE / "openclaw_hold_lock.mjs"), str(file), str(timeout_ms), str(hold_ms)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "OPENCLAW_ORACLE": str(ORACLE_DIR)},
    )


def _line(proc: subprocess.Popen[str]) -> dict[str, object]:
    assert proc.stdout is not None
    return dict(json.loads(proc.stdout.readline()))


async def test_we_wait_for_openclaws_lock(tmp_path: Path, live: Path) -> None:
    transcript = tmp_path / "s.jsonl"
    proc = _openclaw(transcript, 2000, 1500)
    try:
        first = await anyio.to_thread.run_sync(_line, proc)
        assert first["acquired"] is True
        with pytest.raises(SessionBusyError) as info:
            await SessionWriteLock.acquire(transcript, settings=SETTINGS)
        assert info.value.owner_pid == first["pid"]
        async with SessionWriteLock.acquire(
            transcript, settings=WriteLockSettings(acquire_timeout_ms=10_000)
        ):
            assert json.loads((tmp_path / "s.jsonl.lock").read_text())["pid"] == os.getpid()
    finally:
        proc.wait(30)
        assert proc.stdout is not None
        proc.stdout.close()


async def test_openclaw_takes_over_our_lock_and_we_notice(tmp_path: Path, live: Path) -> None:
    transcript = tmp_path / "s.jsonl"
    async with SessionWriteLock.acquire(transcript, settings=SETTINGS) as lock:
        proc = _openclaw(transcript, 2000, 0)
        try:
            answer = await anyio.to_thread.run_sync(_line, proc)
        finally:
            proc.wait(30)
            assert proc.stdout is not None
            proc.stdout.close()
        # OpenClaw 2026.7.35 judges a live owner whose argv is not an OpenClaw process as stale
        # ("non-openclaw-owner") and removes the lock: the two do not exclude each other.
        assert answer["acquired"] is True
        with pytest.raises(LockNotHeldError) as info:
            lock.verify_file()
        assert info.value.reason == "lost"


def test_committed_fixture_matches_live_openclaw(tmp_path: Path, live: Path) -> None:
    fixture = tmp_path / "write_lock.json"
    env = {**os.environ, "OPENCLAW_ORACLE": str(live)}
    script = HERE / "regen_lock_fixtures.py"
    subprocess.run(
        [sys.executable, str(script), "--out", str(fixture)], check=True, env=env, capture_output=True
    )
    fresh = json.loads(fixture.read_text())
    committed = json.loads((HERE.parent / "data" / "oracle" / "write_lock.json").read_text())
    assert fresh["settings"] == committed["settings"]
    assert fresh["inspect"] == committed["inspect"]
    assert fresh["lockFile"]["raw"] == committed["lockFile"]["raw"]
