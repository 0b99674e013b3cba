"""
Opt-in (``--run-openclaw-live``): rerun OpenClaw's pruning and hygiene code and check the committed
fixtures are still what it returns. Needs node and an installed oracle (``$OPENCLAW_ORACLE_DIR``,
default ``/tmp/openclaw-oracle``).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest


ORACLE_DIR = Path(os.environ.get("OPENCLAW_ORACLE_DIR", "/tmp/openclaw-oracle"))
DATA = Path(__file__).resolve().parents[1] / "data"

pytestmark = pytest.mark.oracle


@pytest.fixture
def live(request: pytest.FixtureRequest) -> Path:
    if not request.config.getoption("--run-openclaw-live"):
        pytest.skip("live OpenClaw oracle runs are opt-in: --run-openclaw-live")
    if shutil.which("node") is None or not (ORACLE_DIR / "node_modules" / "openclaw").is_dir():
        pytest.skip(f"node or the installed OpenClaw oracle ({ORACLE_DIR}) is absent")
    return ORACLE_DIR


def test_prune_fixtures_match_live_openclaw(live: Path) -> None:
    cases = json.loads(gzip.decompress((DATA / "oracle" / "prune-cases.json.gz").read_bytes()))
    expected = json.loads(gzip.decompress((DATA / "oracle" / "prune-results.json.gz").read_bytes()))
    batch = []
    for case in cases[:8]:
        run = {k: v for k, v in case.items() if k != "sample"}
        if "sample" in case:
            context = json.loads((DATA / "pi" / f"{case['sample']}.context.json").read_text(encoding="utf-8"))
            run["messages"] = context["messages"]
        batch.append(run)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(batch, handle)
    proc = subprocess.run(
        ["node", str(live / "prune.mjs"), "--cases", handle.name], check=True, capture_output=True, text=True
    )
    for got, want in zip(json.loads(proc.stdout), expected[:8], strict=True):
        assert got["changedIndexes"] == want["changedIndexes"]
        for index in got["changedIndexes"]:
            assert got["messages"][index] == want["changedMessages"][str(index)]


def test_hygiene_fixtures_match_live_openclaw(live: Path) -> None:
    script = Path(__file__).with_name("hygiene_oracle.mjs")
    cases = json.loads((DATA / "oracle" / "hygiene-cases.json").read_text(encoding="utf-8"))
    for case in cases:
        if "sample" in case:
            context = json.loads((DATA / "pi" / f"{case['sample']}.context.json").read_text(encoding="utf-8"))
            case["messages"] = context["messages"]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(cases, handle)
    proc = subprocess.run(
        ["node", str(script), str(live), handle.name], check=True, capture_output=True, text=True
    )
    expected = json.loads(gzip.decompress((DATA / "oracle" / "hygiene-results.json.gz").read_bytes()))
    assert json.loads(proc.stdout) == expected
