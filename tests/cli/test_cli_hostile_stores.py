"""Regressions found by attacking the store, its CLI and maintenance settings with hostile input."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from datetime import UTC
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from sessionkeeper._config import load_config
from sessionkeeper.cli._main import cli
from sessionkeeper.exceptions import ConfigError, InvalidSessionEntryError, StoreCorruptError
from sessionkeeper.store import MaintenanceSettings, SessionEntry, SessionStore
from sessionkeeper.store._reset import ResetPolicy, evaluate_freshness


DAY = 86_400_000


def _store(tmp_path: Path, text: str) -> Path:
    (tmp_path / "sessions.json").write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("args", [["sessions", "list"], ["sessions", "cleanup", "--dry-run"]])
def test_lone_surrogate_key_is_printed_escaped_not_a_traceback(tmp_path: Path, args: list[str]) -> None:
    # JavaScript writes lone surrogates as \udXXX escapes; the store reads them, the CLI must print them
    store = _store(tmp_path, '{\n  "k\\ud800": {\n    "sessionId": "abc",\n    "updatedAt": 1\n  }\n}')
    result = CliRunner().invoke(cli, [*args, "--store", str(store)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 0
    assert "k\\ud800" in result.output


def test_status_with_updated_at_beyond_datetime_range(tmp_path: Path) -> None:
    store = _store(tmp_path, json.dumps({"k": {"sessionId": "abc", "updatedAt": 1e300}}))
    result = CliRunner().invoke(cli, ["status", "k", "--store", str(store)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 0
    result = CliRunner().invoke(cli, ["sessions", "list", "--store", str(store)])
    assert result.exit_code == 0, result.output


def _run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sessionkeeper", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_corrupt_store_stderr_is_one_line(tmp_path: Path) -> None:
    store = _store(tmp_path, "[]")
    run = _run_cli("sessions", "list", "--store", str(store))
    assert run.returncode == 1
    assert run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.startswith("sessionkeeper: error: ")
    assert "backup" in run.stderr


def test_dropped_rows_warning_is_one_prefixed_line(tmp_path: Path) -> None:
    store = _store(
        tmp_path, json.dumps({"bad": {"sessionId": 5}, "ok": {"sessionId": "abc", "updatedAt": 1}})
    )
    run = _run_cli("sessions", "list", "--store", str(store), "--json")
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("\n") == 1, run.stderr
    assert run.stderr.startswith("sessionkeeper: warning: ")
    assert json.loads(run.stdout)["droppedKeys"] == ["bad"]


def test_null_prune_after_is_the_default_not_disabled() -> None:
    # OpenClaw: `maintenance?.pruneAfter ?? maintenance?.pruneDays`, then the 30 d default
    assert MaintenanceSettings.from_mapping({"pruneAfter": None}).prune_after_ms == 30 * DAY
    with pytest.warns(DeprecationWarning, match="pruneDays"):
        settings = MaintenanceSettings.from_mapping({"pruneAfter": None, "pruneDays": 3})
    assert settings.prune_after_ms == 3 * DAY
    settings = MaintenanceSettings.from_mapping(
        {"resetArchiveRetention": None, "maxEntries": None, "mode": None, "maxDiskBytes": None}
    )
    assert settings.reset_archive_retention_ms == 30 * DAY
    assert (settings.max_entries, settings.mode, settings.max_disk_bytes) == (500, "enforce", None)


_DEEP = "[" * 5000 + "]" * 5000  # past the JSON decoders' recursion limit


def test_deeply_nested_sessions_json_reads_as_json_parse_does(tmp_path: Path) -> None:
    # issue 15: JSON.parse reads any depth; a row that is not an object is dropped, as OpenClaw drops it
    store = _store(tmp_path, '{"k": ' + _DEEP + "}")

    async def read() -> list[object]:
        async with SessionStore.open(store, backend="json") as opened:
            return list(await opened.list())

    assert anyio.run(read) == []
    assert (store / "sessions.json").read_text() == '{"k": ' + _DEEP + "}"
    assert list(store.glob("sessions.json.bak.*")) == []


def test_deeply_nested_sqlite_row_is_corrupt_not_recursion_error(tmp_path: Path) -> None:
    async def seed_and_read() -> None:
        async with SessionStore.open(tmp_path, backend="sqlite") as opened:
            await opened.patch("k", label="x")
        with sqlite3.connect(tmp_path / "sessions.sqlite") as conn:
            conn.execute("UPDATE session_entries SET entry = ? WHERE session_key = 'k'", (_DEEP,))
        async with SessionStore.open(tmp_path, backend="sqlite") as opened:
            await opened.get("k")

    with pytest.raises(StoreCorruptError):
        anyio.run(seed_and_read)


def test_maintenance_reads_deeply_nested_lock_and_transcript(tmp_path: Path) -> None:
    (tmp_path / "abc.jsonl").write_text(_DEEP + "\n")
    (tmp_path / "abc.jsonl.lock").write_text(_DEEP)
    store = _store(tmp_path, json.dumps({"k": {"sessionId": "abc", "updatedAt": 1}}))
    for mode in ("--dry-run", "--enforce"):
        result = CliRunner().invoke(
            cli, ["sessions", "cleanup", mode, "--fix-missing", "--json", "--store", str(store)]
        )
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        assert result.exit_code == 0, result.output


@pytest.mark.parametrize("backend", ["json", "sqlite", "memory"])
@pytest.mark.parametrize("session_id", ["../../evil", "a/b", "x\x00y", "", "..", "A" * 256])
def test_unsafe_session_id_is_refused_at_write_not_dropped_at_next_load(
    tmp_path: Path, backend: str, session_id: str
) -> None:
    async def run() -> None:
        store = (
            SessionStore.in_memory() if backend == "memory" else SessionStore.open(tmp_path, backend=backend)  # type: ignore[arg-type]
        )
        async with store:
            await store.patch("keep", label="kept")
            with pytest.raises(InvalidSessionEntryError, match="sessionId"):
                await store.patch("k", session_id=session_id, label="lost on reload")
            assert await store.get("k") is None
        if backend != "memory":
            async with SessionStore.open(tmp_path, backend=backend) as reopened:  # type: ignore[arg-type]
                assert [key for key, _ in await reopened.list()] == ["keep"]

    anyio.run(run)


@pytest.mark.parametrize("backend", ["json", "sqlite"])
def test_each_reader_of_an_unchanged_corrupt_store_does_not_add_a_backup(
    tmp_path: Path, backend: str
) -> None:
    name = "sessions.json" if backend == "json" else "sessions.sqlite"
    target = tmp_path / name
    target.write_bytes(b"[not a store" * 1000)

    async def read() -> None:
        async with SessionStore.open(tmp_path, backend=backend) as opened:  # type: ignore[arg-type]
            await opened.get("k")

    for _ in range(3):  # three processes (cron runs of `sessions list`) each open the store once
        with pytest.raises(StoreCorruptError) as caught:
            anyio.run(read)
    backups = sorted(tmp_path.glob(f"{name}.bak.*"))
    assert len(backups) == 1 and caught.value.backup_path == backups[0]
    assert backups[0].read_bytes() == target.read_bytes()
    target.write_bytes(b"[other corrupt content")
    with pytest.raises(StoreCorruptError):
        anyio.run(read)
    assert len(sorted(tmp_path.glob(f"{name}.bak.*"))) == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [(b'{"session": "\xff\xfe"}', "not UTF-8"), (b'{"session": ' + _DEEP.encode() + b"}", "nested")],
)
def test_cleanup_config_file_undecodable_is_bad_input(tmp_path: Path, content: bytes, message: str) -> None:
    config = tmp_path / "openclaw.json"
    config.write_bytes(content)
    with pytest.raises(ConfigError, match=message):
        load_config(config)
    store = _store(tmp_path, "{}")
    result = CliRunner().invoke(
        cli, ["sessions", "cleanup", "--dry-run", "--store", str(store), "--config", str(config)]
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2


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


@pytest.mark.parametrize(
    "args",
    [
        ["sessions", "list"],
        ["status", "k[/bold]x"],
        ["sessions", "cleanup", "--dry-run", "--now", "1799992000000"],
    ],
)
def test_stored_text_is_not_rich_markup_nor_terminal_escapes(tmp_path: Path, args: list[str]) -> None:
    raw = {
        "k[/bold]x": {"sessionId": "abc", "updatedAt": 1789990000000, "label": "[/]close"},
        "esc\x1b[31mred": {"sessionId": "def", "updatedAt": 1789990000000},
    }
    store = _store(tmp_path, json.dumps(raw))
    result = CliRunner().invoke(cli, [*args, "--store", str(store)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 0
    assert "k[/bold]x" in result.output
    assert "\x1b" not in result.output


@pytest.mark.parametrize("idle_minutes", [1e308, 1e303])
def test_absurd_idle_minutes_never_expires_instead_of_overflow(idle_minutes: float) -> None:
    # JavaScript: lastInteractionAt + 1e308 * 60000 is Infinity, so the session never goes idle-stale
    policy = ResetPolicy.from_mapping({"reset": {"mode": "idle", "idleMinutes": idle_minutes}}).resolve(
        "direct"
    )
    verdict = evaluate_freshness(
        updated_at=1,
        session_started_at=1,
        last_interaction_at=1,
        now_ms=1_789_990_000_000,
        policy=policy,
        zone=UTC,
    )
    assert verdict.fresh and verdict.stale_reason is None


def test_rewritten_entry_keeps_javascript_number_forms(tmp_path: Path) -> None:
    # as OpenClaw writes them (JSON.stringify): msgspec would give 1.2345e-6, 1e21, 1e-7 -> 1e-7, 100.0
    text = (
        '{\n  "k": {\n    "sessionId": "abc",\n    "updatedAt": 1789990000000,\n    "x": {\n'
        '      "cost": 0.0000012345,\n      "big": 1e+21,\n      "tiny": 1e-7,\n      "half": 1.5,\n'
        '      "huge": 1.7976931348623157e+308\n    }\n  }\n}'
    )
    store = _store(tmp_path, text)

    async def run() -> None:
        async with SessionStore.open(store) as opened:
            await opened.patch("k", {"total": 100.0, "negzero": -0.0}, label="x", preserve_activity=True)

    anyio.run(run)
    written = (store / "sessions.json").read_text()
    expected_x = text[text.index('    "x"') : text.rindex("\n  }\n}")]
    assert expected_x in written
    assert '"total": 100,' in written and '"negzero": 0\n' in written


def test_cleanup_now_beyond_year_9999_is_bad_input(tmp_path: Path) -> None:
    store = _store(tmp_path, json.dumps({"k": {"sessionId": "abc", "updatedAt": 1}}))
    (tmp_path / "abc.jsonl").write_text("{}\n")
    for now in ("99999999999999999", "253402300800000"):
        result = CliRunner().invoke(
            cli, ["sessions", "cleanup", "--dry-run", "--store", str(store), "--now", now]
        )
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        assert result.exit_code == 2
    result = CliRunner().invoke(
        cli, ["sessions", "cleanup", "--dry-run", "--store", str(store), "--now", "253402300799999"]
    )
    assert result.exit_code == 0, result.output


def test_sqlite_key_with_lone_surrogate_is_a_typed_error(tmp_path: Path) -> None:
    key = "agent:main:k\ud800"

    async def run() -> None:
        async with SessionStore.open(tmp_path, backend="sqlite") as store:
            with pytest.raises(InvalidSessionEntryError, match="surrogate"):
                await store.patch(key, label="x")
            with pytest.raises(InvalidSessionEntryError, match="surrogate"):
                await store.backend.transaction(
                    lambda entries: entries.update({key: SessionEntry(session_id="a")})
                )
            assert await store.get(key) is None
            assert await store.delete(key) is False
            assert await store.list() == []

    anyio.run(run)


def test_cleanup_bytes_after_counts_numbers_as_written(tmp_path: Path) -> None:
    # Python's json.dumps wrote 1.2e-05 (7 bytes) where the store writes 0.000012 (8 bytes)
    text = (
        '{\n  "old": {\n    "sessionId": "old",\n    "updatedAt": 1\n  },\n'
        '  "keep": {\n    "sessionId": "keep",\n    "updatedAt": 1789990000000,\n'
        '    "estimatedCostUsd": 0.000012\n  }\n}'
    )
    store = _store(tmp_path, text)
    args = ["sessions", "cleanup", "--store", str(store), "--json", "--now", "1789992000000"]
    planned = json.loads(CliRunner().invoke(cli, [*args, "--dry-run"]).output)
    done = json.loads(CliRunner().invoke(cli, [*args, "--enforce"]).output)
    size = (store / "sessions.json").stat().st_size
    assert planned["bytesAfter"] == done["bytesAfter"] == size


def test_reset_with_session_file_outside_the_directory_starts_fresh_inside(tmp_path: Path) -> None:
    """
    A sessionFile escaping the sessions dir: never a half reset, and never stuck (issue 15, F1): the new
    session's transcript is ``<new id>.jsonl`` inside the directory, nothing is written outside it.
    """
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    outside = tmp_path / "elsewhere"
    row = {"k": {"sessionId": "old", "updatedAt": 1, "sessionFile": str(outside / "old.jsonl")}}
    (sessions / "sessions.json").write_text(json.dumps(row, indent=2))

    async def run() -> str:
        async with SessionStore.open(sessions) as store:
            fresh = await store.reset("k")
            assert store.transcript_file(fresh) == sessions / f"{fresh.session_id}.jsonl"
            assert (await store.require("k")).session_id == fresh.session_id
            return str(fresh.session_id)

    new_id = anyio.run(run)
    assert not outside.exists()
    names = sorted(p.name for p in sessions.iterdir() if not p.name.endswith(".lock"))
    assert names == sorted(["sessions.json", f"{new_id}.jsonl"])
    assert "sessionFile" not in json.loads((sessions / "sessions.json").read_text())["k"]


@pytest.mark.parametrize("command", ["sessions list --store {}", "status --store {} agent:main:main"])
def test_read_commands_on_a_missing_store_are_bad_input(tmp_path: Path, command: str) -> None:
    """Like `sessions cleanup`: a missing --store is a usage error (exit 2), never an empty store."""
    missing = tmp_path / "nope"
    result = CliRunner().invoke(cli, command.format(missing).split())
    assert result.exit_code == 2
    assert not missing.exists()
