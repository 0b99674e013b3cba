"""
The ``sessionkeeper`` script of a base install (no ``[cli]`` extra): one hint line and exit 1, no traceback.

click or rich is made unimportable in a fresh interpreter by a meta-path finder installed from a
``sitecustomize`` on ``PYTHONPATH`` (as if the package were not installed); the real entry point runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


_HINT = "sessionkeeper's command line needs the cli extra: pip install 'sessionkeeper[cli]'"

_BLOCKER = """
import os, sys

_BLOCKED = set(filter(None, os.environ.get("SK_TEST_BLOCK", "").split(",")))


class _Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in _BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _Blocker())
"""

_ENTRY = "from sessionkeeper.cli import main; main()"


def _run(tmp_path: Path, blocked: str, *argv: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "sitecustomize.py").write_text(_BLOCKER)
    env = {**os.environ, "SK_TEST_BLOCK": blocked}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, env=env, check=False, timeout=120
    )


@pytest.mark.parametrize("blocked", ["click", "rich", "click,rich"])
@pytest.mark.parametrize("argv", [["-c", _ENTRY, "--version"], ["-m", "sessionkeeper", "--version"]])
def test_missing_extra_is_one_hint_line_exit_1(tmp_path: Path, blocked: str, argv: list[str]) -> None:
    run = _run(tmp_path, blocked, *argv)
    assert run.returncode == 1, run.stderr
    assert run.stdout == ""
    first = blocked.split(",", maxsplit=1)[0]
    assert run.stderr == f"{_HINT} (no module named '{first}')\n"


def test_the_blocker_blocks_and_nothing_else(tmp_path: Path) -> None:
    blocked = _run(tmp_path, "click", "-c", "import click")
    assert blocked.returncode == 1 and "No module named 'click'" in blocked.stderr
    run = _run(tmp_path, "", "-c", _ENTRY, "--version")
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("sessionkeeper, version ")


def test_importing_the_package_does_not_need_click(tmp_path: Path) -> None:
    run = _run(tmp_path, "click,rich", "-c", "import sessionkeeper.cli as c; print(sorted(c.__all__))")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "['cli', 'main']"
