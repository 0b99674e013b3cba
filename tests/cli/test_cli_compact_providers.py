"""
``sessionkeeper compact --provider``: a compaction provider installed as a package with an entry point in
``sessionkeeper.compaction_providers`` (a real distribution on ``sys.path``, found by importlib.metadata).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from tests._helpers import run_cli

from sessionkeeper.compaction import ENTRY_POINT_GROUP
from sessionkeeper.transcript import CompactionEntry, load_transcript


_PLUGIN = """
class Provider:
    id = "from-factory"
    label = "plugin from-factory"

    async def summarize(self, request):
        return f"## Goal\\nsummary by {self.id} of {len(request.messages)} messages"


def factory():
    return Provider()
"""


@pytest.fixture
def installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A distribution ``sk-cli-plugin`` in ``tmp_path/site`` whose entry point ``mine`` is a factory."""
    site = tmp_path / "site"
    info = site / "sk_cli_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (site / "sk_cli_plugin.py").write_text(_PLUGIN, encoding="utf-8")
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: sk-cli-plugin\nVersion: 1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nmine = sk_cli_plugin:factory\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "sk_cli_plugin", raising=False)


@pytest.fixture
def transcript(pi_samples: Path, tmp_path: Path) -> Path:
    file = tmp_path / "s.jsonl"
    shutil.copy(pi_samples / "large-2000.jsonl", file)
    return file


@pytest.mark.usefixtures("installed_plugin")
def test_compact_uses_an_installed_provider(transcript: Path) -> None:
    out = run_cli(
        "compact", str(transcript), "--json", "--keep-recent-tokens", "500", "--provider", "from-factory"
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["status"] == "compacted" and data["provider"] == "from-factory"
    written = [e for e in load_transcript(transcript).entries() if isinstance(e, CompactionEntry)]
    assert "summary by from-factory" in written[-1].summary


@pytest.mark.usefixtures("installed_plugin")
def test_compact_with_an_unknown_provider_is_bad_input_and_writes_nothing(transcript: Path) -> None:
    before = transcript.read_bytes()
    out = run_cli("compact", str(transcript), "--json", "--provider", "nope")
    assert out.exit_code == 2
    assert "no compaction provider 'nope' is installed (installed: from-factory)" in out.stderr
    assert transcript.read_bytes() == before
