"""
Opt-in (``--run-openclaw-live``): OpenClaw 2026.7.35 itself reads the stores we write, we read the
stores it writes, and the committed merge/load fixtures are still what it returns. Needs node and an
installed oracle (``$OPENCLAW_ORACLE_DIR``, default ``/tmp/openclaw-oracle``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from sessionkeeper.store import (
    JsonFileStoreBackend,
    SessionEntry,
    session_entry_from_dict,
    session_entry_to_dict,
)


ORACLE_DIR = Path(os.environ.get("OPENCLAW_ORACLE_DIR", "/tmp/openclaw-oracle"))
DATA = Path(__file__).parent / "data"

pytestmark = pytest.mark.oracle


@pytest.fixture
def live(request: pytest.FixtureRequest) -> Path:
    if not request.config.getoption("--run-openclaw-live"):
        pytest.skip("live OpenClaw oracle runs are opt-in: --run-openclaw-live")
    if shutil.which("node") is None or not (ORACLE_DIR / "node_modules" / "openclaw").is_dir():
        pytest.skip(f"node or the installed OpenClaw oracle ({ORACLE_DIR}) is absent")
    return ORACLE_DIR


def _openclaw(*args: str) -> dict:
    proc = subprocess.run(
        ["node", str(DATA / "openclaw_load_store.mjs"), *args],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "OPENCLAW_ORACLE_DIR": str(ORACLE_DIR)},
        timeout=300,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_committed_fixtures_match_live_openclaw(live: Path, tmp_path: Path) -> None:
    out = tmp_path / "cases.json"
    subprocess.run(
        ["node", str(DATA / "regen_openclaw_store_cases.mjs"), str(out)],
        check=True,
        capture_output=True,
        env={**os.environ, "OPENCLAW_ORACLE_DIR": str(live)},
        timeout=300,
    )
    assert json.loads(out.read_text()) == json.loads((DATA / "openclaw_store_cases.json").read_text())


def test_openclaw_reads_what_we_write_and_we_read_what_it_writes(live: Path, tmp_path: Path) -> None:
    path = tmp_path / "sessions.json"

    async def write() -> dict[str, dict]:
        backend = JsonFileStoreBackend(path)
        await backend.put(
            "agent:main:main", SessionEntry(session_id="m1", updated_at=1_789_990_375_000, label="Main ✓")
        )
        await backend.put(
            "agent:main:telegram:group:42",
            session_entry_from_dict(
                {
                    "sessionId": "g1",
                    "updatedAt": 1_789_990_000_000,
                    "label": "cut \ud83d",
                    "future": {"x": [1, None]},
                }
            ),
        )
        result = {k: session_entry_to_dict(e) for k, e in (await backend.load_all()).items()}
        await backend.aclose()
        return result

    ours = anyio.run(write)
    assert _openclaw(str(path)) == ours
    theirs = _openclaw(
        str(path), "agent:main:main", json.dumps({"compactionCount": 3, "thinkingLevel": "high"})
    )

    async def read() -> dict[str, dict]:
        backend = JsonFileStoreBackend(path)
        result = {k: session_entry_to_dict(e) for k, e in (await backend.load_all()).items()}
        await backend.aclose()
        return result

    assert anyio.run(read) == theirs
    assert theirs["agent:main:main"]["compactionCount"] == 3
