"""``sessions cleanup`` progress bar: only on a large store, a terminal, and never with ``--json``."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest
from rich.console import Console
from tests._helpers import run_cli

from sessionkeeper.cli import _cleanup
from sessionkeeper.cli._cleanup import LARGE_STORE_FILES, progress_wanted
from sessionkeeper.store import run_maintenance


NOW_MS = 1_790_000_000_000
DAY_MS = 86_400_000
STALE = 12


def _store(tmp_path: Path, *, stale: int = STALE, fresh: int = 3) -> Path:
    """A sessions directory: ``stale`` entries older than 30 days (each with a transcript), ``fresh`` new."""
    sessions = tmp_path / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    entries: dict[str, Any] = {}
    for i in range(stale + fresh):
        session_id = f"00000000-0000-4000-8000-{i:012d}"
        age = 40 * DAY_MS if i < stale else DAY_MS
        entries[f"agent:main:direct:user{i}"] = {"sessionId": session_id, "updatedAt": NOW_MS - age}
        header = {"type": "session", "version": 3, "id": session_id, "timestamp": "2026-01-01T00:00:00.000Z"}
        (sessions / f"{session_id}.jsonl").write_text(json.dumps(header) + "\n")
    (sessions / "sessions.json").write_text(json.dumps(entries, indent=2))
    return sessions


def test_progress_wanted_truth_table() -> None:
    big = LARGE_STORE_FILES
    assert progress_wanted(as_json=False, is_terminal=True, store_files=big)
    assert not progress_wanted(as_json=True, is_terminal=True, store_files=big)
    assert not progress_wanted(as_json=False, is_terminal=False, store_files=big)
    assert not progress_wanted(as_json=False, is_terminal=True, store_files=big - 1)


@pytest.mark.anyio
async def test_run_maintenance_reports_file_progress(tmp_path: Path) -> None:
    sessions = _store(tmp_path)
    calls: list[tuple[int, int]] = []
    report = await run_maintenance(
        sessions, mode="enforce", now_ms=NOW_MS, progress=lambda d, t: calls.append((d, t))
    )
    total = len(report.file_actions)
    assert total == STALE  # one archive per pruned entry's transcript
    assert calls == [(n, total) for n in range(total + 1)]
    dry: list[tuple[int, int]] = []
    await run_maintenance(
        _store(tmp_path / "dry"), dry_run=True, now_ms=NOW_MS, progress=lambda d, t: dry.append((d, t))
    )
    assert dry == []  # a dry run carries nothing out


class _Spy:
    """Stands in for the rich bar: records that it was made and what it was fed."""

    made: ClassVar[list[_Spy]] = []

    def __init__(self, console: Console) -> None:
        self.calls: list[tuple[int, int]] = []
        self.entered = False
        _Spy.made.append(self)

    def __enter__(self) -> _Spy:
        self.entered = True
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __call__(self, done: int, total: int) -> None:
        self.calls.append((done, total))


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> type[_Spy]:
    """Pretend stdout is a terminal, make 10 files a large store, and spy on the bar."""
    _Spy.made = []
    monkeypatch.setattr(_cleanup, "_stdout_is_terminal", lambda console: True)
    monkeypatch.setattr(_cleanup, "LARGE_STORE_FILES", 10)
    monkeypatch.setattr(_cleanup, "_CleanupProgress", _Spy)
    return _Spy


def _cleanup_cli(*args: str) -> Any:
    return run_cli("sessions", "cleanup", *args, "--now", str(NOW_MS))


def test_json_output_stays_pure_json_on_a_large_store_in_a_terminal(
    tmp_path: Path, terminal: type[_Spy]
) -> None:
    result = _cleanup_cli("--store", str(_store(tmp_path)), "--enforce", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)  # the whole output is one JSON document
    assert data["afterCount"] == 3
    assert terminal.made == []


def test_text_output_gets_the_bar_on_a_large_store_in_a_terminal(
    tmp_path: Path, terminal: type[_Spy]
) -> None:
    result = _cleanup_cli("--store", str(_store(tmp_path)), "--enforce")
    assert result.exit_code == 0
    (bar,) = terminal.made
    assert bar.entered
    assert bar.calls[0] == (0, STALE) and bar.calls[-1] == (STALE, STALE)
    assert "entries 15 -> 3" in result.stdout


def test_no_bar_for_a_small_store_or_without_a_terminal(
    tmp_path: Path, terminal: type[_Spy], monkeypatch: pytest.MonkeyPatch
) -> None:
    small = _store(tmp_path / "small", stale=2, fresh=1)  # 4 files < 10
    assert _cleanup_cli("--store", str(small), "--enforce").exit_code == 0
    assert terminal.made == []
    monkeypatch.setattr(_cleanup, "_stdout_is_terminal", lambda console: False)
    assert _cleanup_cli("--store", str(_store(tmp_path / "big")), "--enforce").exit_code == 0
    assert terminal.made == []


def test_the_real_bar_runs_on_a_terminal_console(tmp_path: Path) -> None:
    """The rich bar itself, on a forced terminal console: it renders and is transient."""
    sessions = _store(tmp_path)
    console = Console(file=io.StringIO(), force_terminal=True, width=100, record=True)

    async def run() -> int:
        with _cleanup._CleanupProgress(console) as bar:
            report = await run_maintenance(sessions, mode="enforce", now_ms=NOW_MS, progress=bar)
        return len(report.file_actions)

    assert anyio.run(run) == STALE
    text = console.export_text()
    assert "planning maintenance" in text
    assert "archiving and deleting files" in text and f"{STALE}/{STALE}" in text
