"""
Opt-in (``--run-openclaw-live``): OpenClaw 2026.9.6's legacy bridge, run now on the sample databases, still
writes the committed fixtures, and ``import-openclaw`` equals what it writes.
Needs node and an installed ``tools/openclaw9-oracle`` (``$OPENCLAW9_ORACLE``, default
``/tmp/openclaw9-oracle``; about 830 MB, with its own Node 24).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from tests.openclaw._openclaw9 import DATA, SAMPLES, files, sample_db
from tests.openclaw.regen_openclaw9_fixtures import export

from sessionkeeper.openclaw import import_openclaw_database


ORACLE_DIR = Path(os.environ.get("OPENCLAW9_ORACLE", "/tmp/openclaw9-oracle"))

pytestmark = pytest.mark.oracle


@pytest.fixture
def live(request: pytest.FixtureRequest) -> Path:
    if not request.config.getoption("--run-openclaw-live"):
        pytest.skip("live OpenClaw oracle runs are opt-in: --run-openclaw-live")
    if shutil.which("node") is None or not (ORACLE_DIR / "node_modules" / "openclaw").is_dir():
        pytest.skip(f"node or the installed OpenClaw 9 oracle ({ORACLE_DIR}) is absent")
    return ORACLE_DIR


@pytest.mark.parametrize("name", SAMPLES)
def test_live_export_equals_fixture_and_import(name: str, live: Path, tmp_path: Path) -> None:
    database = sample_db(name, tmp_path)
    report = export(live, database, tmp_path / "openclaw")
    assert report["entries"] == len(files(DATA / f"{name}.export")) - 1
    assert files(tmp_path / "openclaw") == files(DATA / f"{name}.export")
    import_openclaw_database(database, tmp_path / "ours")
    assert files(tmp_path / "ours") == files(tmp_path / "openclaw")
