"""
``sessionkeeper compact FILE`` while another process compacts the same file (issue 11, DESIGN D10): the
command waits for that process's compaction claim and shares its compaction (``"joined"``). The file is
compacted, so the operator gets success: exit 0, ``contextCompacted: true`` and a reason that says so.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from sessionkeeper.compaction import CompactionProviderRegistry, CompactionSettings, Compactor, SummaryRequest
from sessionkeeper.transcript import TranscriptManager, UserMessage


pytestmark = pytest.mark.anyio
PAD = " words to summarise" * 300
SUMMARY = "## Decisions\n- summarised by the other process"

# The CLI as a separate process, with the compaction logger's DEBUG records on stderr: the test waits on
# the record that says the command is waiting for the claim (a state, not a sleep).
_CLI = """
import logging, sys
handler = logging.StreamHandler(sys.stderr)
logger = logging.getLogger("sessionkeeper.compaction")
logger.setLevel(logging.DEBUG)
logger.addHandler(handler)
from sessionkeeper.cli import main
main(sys.argv[1:])
"""


class CliJoins:
    """
    The other writer's summariser: called while this process holds the compaction claim, it starts the
    CLI on the same file, waits until the CLI waits for the claim, then answers (so the compaction lands).
    """

    id = "cli-joins"
    label = "starts the CLI and answers once it waits"

    def __init__(self, path: Path, *cli_args: str) -> None:
        self.path = path
        self.cli_args = cli_args
        self.proc: subprocess.Popen[str] | None = None
        self.stderr: list[str] = []

    async def summarize(self, request: SummaryRequest) -> str:
        del request
        args = [sys.executable, "-c", _CLI, "compact", str(self.path), *self.cli_args]
        self.proc = await anyio.to_thread.run_sync(
            functools.partial(
                subprocess.Popen, args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
        stderr = self.proc.stderr
        assert stderr is not None
        with anyio.fail_after(120):
            while True:
                line = await anyio.to_thread.run_sync(stderr.readline)
                self.stderr.append(line)
                assert line, f"the CLI ended before waiting: {''.join(self.stderr)}"
                if "waiting for the compaction claim" in line:
                    return SUMMARY


async def _transcript(tmp_path: Path) -> Path:
    path = tmp_path / "t.jsonl"
    manager = await TranscriptManager.create(path, cwd="/w")
    for i in range(6):
        await manager.append_message(UserMessage(content=f"turn {i}{PAD}", timestamp=1))
    return path


async def _compact_while_the_cli_runs(tmp_path: Path, *cli_args: str) -> tuple[str, str, int, str]:
    path = await _transcript(tmp_path)
    provider = CliJoins(path, *cli_args)
    registry = CompactionProviderRegistry()
    registry.register(provider)
    compactor = Compactor(settings=CompactionSettings(provider=provider.id), providers=registry)
    result = await compactor.compact(await TranscriptManager.open(path), keep_recent_tokens=50)
    assert result.compacted and result.entry is not None
    proc = provider.proc
    assert proc is not None
    out, err = await anyio.to_thread.run_sync(functools.partial(proc.communicate, timeout=120))
    compactions = [r for r in map(json.loads, path.read_bytes().splitlines()) if r["type"] == "compaction"]
    assert [r["id"] for r in compactions] == [result.entry.id]  # the CLI wrote nothing of its own
    return out, err, proc.returncode, result.entry.id


async def test_a_joined_compaction_is_a_success_in_json(tmp_path: Path) -> None:
    out, err, code, entry_id = await _compact_while_the_cli_runs(tmp_path, "--json")
    data = json.loads(out)
    assert data["status"] == "joined", (data, err)
    assert code == 0, (data, err)
    assert data["contextCompacted"] is True
    assert data["entryId"] == entry_id  # the other process's entry
    assert data["reason"].startswith("the file is compacted")
    assert data["storeEntry"] is None  # counted by the run that wrote it


async def test_a_joined_compaction_is_a_success_in_text(tmp_path: Path) -> None:
    out, err, code, entry_id = await _compact_while_the_cli_runs(tmp_path)
    assert code == 0, (out, err)
    assert "joined" in out and entry_id in out
    assert "the file is compacted" in out
    assert "error" not in err
