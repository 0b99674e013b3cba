"""
Opt-in (``--run-openclaw-live``): maintenance against OpenClaw 2026.7.35 itself on freshly generated stores
(``make-store.mjs`` with several seeds, sizes and configs), enforce and on-save, compared file by file.
Needs node and an installed oracle (``$OPENCLAW_ORACLE_DIR``, default ``/tmp/openclaw-oracle``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from sessionkeeper.store import MaintenanceSettings, run_maintenance


ORACLE_DIR = Path(os.environ.get("OPENCLAW_ORACLE_DIR", "/tmp/openclaw-oracle"))
NOW = 1_789_992_000_000
_OURS = re.compile(r"^sessions\.json(\.lock|\.bak\.\d{4}-.*)$")

pytestmark = pytest.mark.oracle


@pytest.fixture
def live(request: pytest.FixtureRequest) -> Path:
    if not request.config.getoption("--run-openclaw-live"):
        pytest.skip("live OpenClaw oracle runs are opt-in: --run-openclaw-live")
    if shutil.which("node") is None or not (ORACLE_DIR / "node_modules" / "openclaw").is_dir():
        pytest.skip(f"node or the installed OpenClaw oracle ({ORACLE_DIR}) is absent")
    return ORACLE_DIR


def _node(oracle: Path, *args: str) -> dict:
    proc = subprocess.run(
        ["node", *args], cwd=oracle, check=True, capture_output=True, text=True, timeout=600
    )
    return json.loads(proc.stdout)


def _apply_mtimes(directory: Path, manifest: Path) -> None:
    for name, ms in json.loads(manifest.read_text())["files"].items():
        if (directory / name).exists():
            os.utime(directory / name, ns=(int(ms * 1e6), int(ms * 1e6)))


@pytest.mark.parametrize(
    "case",
    [
        (1, 40, {}),
        (2, 120, {"pruneAfter": "10d", "maxEntries": 30}),
        (3, 80, {"maxEntries": 10, "resetArchiveRetention": False}),
        (4, 60, {"maxDiskBytes": "60kb", "highWaterBytes": "40kb"}),
        (5, 200, {"pruneAfter": "45d", "maxEntries": 60, "maxDiskBytes": "150kb"}),
    ],
)
@pytest.mark.parametrize("variant", ["enforce", "on-save"])
def test_maintenance_equals_live_openclaw(live, tmp_path, case, variant):
    seed, entries, config = case
    store = tmp_path / "store"
    now = str(NOW)
    _node(live, "make-store.mjs", str(store), "--now", now, "--entries", str(entries), "--seed", str(seed),
          "--kb-per-entry", "1")  # fmt: skip
    expected = _node(
        live, "maintenance.mjs", str(store), "--now", now, "--config", json.dumps(config), f"--{variant}",
        "--active-key", "agent:main:main",
    )  # fmt: skip
    ours = tmp_path / "ours"
    shutil.copytree(store, ours)
    _apply_mtimes(ours, tmp_path / "store.mtimes.json")
    before = set(os.listdir(ours))
    report = anyio.run(
        lambda: run_maintenance(
            ours,
            settings=MaintenanceSettings.from_mapping(config),
            now_ms=NOW,
            active_keys=["agent:main:main"],
            on_save=variant == "on-save",
            mode="enforce" if variant == "enforce" else None,
        )
    )
    after = {n for n in os.listdir(ours) if not _OURS.match(n)}
    assert list(json.loads((ours / "sessions.json").read_text())) == expected["entries"]["keysAfter"]
    assert sorted(before - after) == sorted(expected["files"]["removed"])
    assert sorted(after - before) == sorted(expected["files"]["added"])
    digest = hashlib.sha256((ours / "sessions.json").read_bytes()).hexdigest()
    assert digest == expected["files"]["storeSha256After"]
    data = report.to_json()
    for field in ("beforeCount", "afterCount", "modelRunPruned", "pruned", "capped", "diskBudget"):
        assert data[field] == expected["summary"][field], field
    if variant == "enforce":
        assert data["unreferencedArtifacts"] == expected["summary"]["unreferencedArtifacts"]
