"""Regressions found by checking the README's read-only promises as a new user (brkz)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from sessionkeeper.cli._main import cli
from sessionkeeper.exceptions import StoreCorruptError
from sessionkeeper.store import SessionStore


@pytest.mark.parametrize("content", ["", "{not json", "[]"])
@pytest.mark.parametrize(
    "args",
    [["sessions", "list"], ["status", "agent:main:main"], ["sessions", "cleanup", "--dry-run"]],
    ids=["list", "status", "cleanup-dry-run"],
)
def test_read_only_commands_write_no_backup_of_a_corrupt_store(
    tmp_path: Path, content: str, args: list[str]
) -> None:
    # README: `sessions list`, `status` and `sessions cleanup --dry-run` never modify the store; store.md:
    # a read-only open writes no backup. Each wrote sessions.json.bak.<stamp> beside a corrupt store.
    (tmp_path / "sessions.json").write_text(content)
    result = CliRunner().invoke(cli, [*args[:2], "--store", str(tmp_path), *args[2:]])
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("sessionkeeper: error: ") and result.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sessions.json"]
    assert (tmp_path / "sessions.json").read_text() == content


@pytest.mark.anyio
async def test_a_writer_still_backs_up_a_corrupt_store(tmp_path: Path) -> None:
    (tmp_path / "sessions.json").write_text("{not json")
    async with SessionStore.open(tmp_path, read_only=True) as reader:
        with pytest.raises(StoreCorruptError) as info:
            await reader.list()
        assert info.value.backup_path is None
    async with SessionStore.open(tmp_path) as writer:
        with pytest.raises(StoreCorruptError) as info:
            await writer.patch("agent:main:main", label="x")
        assert info.value.backup_path is not None and info.value.backup_path.read_text() == "{not json"
    assert (tmp_path / "sessions.json").read_text() == "{not json"
