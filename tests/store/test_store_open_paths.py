"""``SessionStore.open`` on the paths users give it: ``~`` expanded, another file refused."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from sessionkeeper.exceptions import ConfigError
from sessionkeeper.store import SessionStore


def test_session_store_open_refuses_another_file(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("x")
    with pytest.raises(ConfigError, match="not a sessions directory"):
        SessionStore.open(other)


def test_open_expands_the_home_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # docs/runtime.md opens "~/.openclaw/agents/main/sessions": it must not create a "./~" directory
    home = tmp_path / "home"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)

    async def run() -> None:
        async with SessionStore.open("~/.openclaw/agents/main/sessions") as store:
            await store.patch("agent:main:main", label="x")

    anyio.run(run)
    assert (home / ".openclaw/agents/main/sessions/sessions.json").is_file()
    assert list(cwd.iterdir()) == []
