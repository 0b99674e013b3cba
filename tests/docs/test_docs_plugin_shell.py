"""
The plugin tutorial's last command as a reader's shell runs it: a new process, which finds the plugin the
page installed into ``site`` only with ``PYTHONPATH=site`` (the page says so). ``test_docs_pages`` runs the
command in-process, where ``site`` is already on ``sys.path``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.docs._pages import DOCS, run_page


def _compact(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = ["compact", "sessions/demo.jsonl", "--provider", "notes", "--keep-recent-tokens", "100", "--json"]
    return subprocess.run(
        [sys.executable, "-m", "sessionkeeper", *argv],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )


def test_the_shell_finds_the_plugin_with_pythonpath_site(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = DOCS / "tutorial_plugin.md"
    assert "export PYTHONPATH=site" in page.read_text(encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    run_page(page)
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    without = _compact(base)
    assert without.returncode == 2, without.stderr
    assert "no compaction provider 'notes' is installed" in without.stderr
    # found: the page's in-process run compacted last, so this one has nothing new to summarise
    with_site = _compact({**base, "PYTHONPATH": "site"})
    assert with_site.returncode == 0, with_site.stderr
    assert json.loads(with_site.stdout)["status"] == "already_compacted"
