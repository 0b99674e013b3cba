"""
Opt-in (``--run-openclaw-live``): the committed parent-fork fixtures (``regen_fork_fixtures.py``) are still
what OpenClaw 2026.7.35 returns. Needs node and an installed oracle (``$OPENCLAW_ORACLE_DIR``, default
``/tmp/openclaw-oracle``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


HERE = Path(__file__).resolve().parent
ORACLE_DIR = Path(os.environ.get("OPENCLAW_ORACLE_DIR", "/tmp/openclaw-oracle"))
FIXTURES = HERE.parent / "data" / "oracle"

pytestmark = pytest.mark.oracle


@pytest.fixture
def live(request: pytest.FixtureRequest) -> Path:
    if not request.config.getoption("--run-openclaw-live"):
        pytest.skip("live OpenClaw oracle runs are opt-in: --run-openclaw-live")
    if shutil.which("node") is None or not (ORACLE_DIR / "node_modules" / "openclaw").is_dir():
        pytest.skip(f"node or the installed OpenClaw oracle ({ORACLE_DIR}) is absent")
    return ORACLE_DIR


def _run(oracle: Path, cases: list[dict[str, Any]], tmp_path: Path) -> list[dict[str, Any]]:
    file = tmp_path / "cases.json"
    file.write_text(json.dumps(cases))
    done = subprocess.run(
        ["node", str(HERE / "fork_oracle.mjs"), str(oracle), str(file)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return json.loads(done.stdout)


def test_committed_fork_fixtures_match_live_openclaw(live: Path, tmp_path: Path) -> None:
    sys.path.insert(0, str(HERE.parents[1]))
    from tests.store.regen_fork_fixtures import cases

    data = cases()
    assert data == json.loads((FIXTURES / "fork-cases.json").read_text())
    assert _run(live, data, tmp_path) == json.loads((FIXTURES / "fork-results.json").read_text())
