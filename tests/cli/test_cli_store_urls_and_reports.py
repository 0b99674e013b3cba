"""The CLI on hostile stores and database URLs: bad input is one error line, reports stay exact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests._helpers import run_cli
from tests._servers import new_name, require_postgres

from sessionkeeper.cli._main import _Entry
from sessionkeeper.cli._prune import prune_reason
from sessionkeeper.exceptions import ConfigError, StoreUnavailableError
from sessionkeeper.pruning import HardClearSettings, PruneResult, PruningSettings
from sessionkeeper.store import PostgresStoreBackend
from sessionkeeper.store._jsontext import RawJsonValue, parse_store_json
from sessionkeeper.store._remote import redact_url


_HUGE_INT = "9" * 5000


def _raw_store(tmp_path: Path) -> Path:
    # Values Python cannot hold as JSON numbers: 1e400 (a float overflow) and a 5000-digit integer
    # (beyond int-to-str's limit); the RAW-JSON decision keeps them as their text.
    (tmp_path / "sessions.json").write_text(
        '{"agent:main:main": {"sessionId": "00000000-0000-4000-8000-000000000001", "updatedAt": 1,'
        f' "big": 1e400, "huge": {_HUGE_INT}, "nested": {{"x": [1e400]}}}}}}'
    )
    return tmp_path


@pytest.mark.parametrize("as_json", [False, True])
def test_status_prints_raw_json_values_as_their_text(tmp_path: Path, as_json: bool) -> None:
    store = _raw_store(tmp_path)
    args = ["status", "--store", str(store), "agent:main:main", *(["--json"] if as_json else [])]
    result = run_cli(*args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    if as_json:
        text = result.stdout
        assert '"big": 1e400' in text
        assert f'"huge": {_HUGE_INT}' in text
        data = parse_store_json(text)  # still one JSON document
        assert data["found"] is True
        assert data["entry"]["huge"] == RawJsonValue(_HUGE_INT)
        assert data["entry"]["sessionId"] == "00000000-0000-4000-8000-000000000001"
    else:
        lines = result.stdout.splitlines()
        assert "big\t1e400" in lines
        assert f"huge\t{_HUGE_INT}" in lines
        assert 'nested\t{"x": [1e400]}' in lines


def test_status_piped_output_escapes_control_characters_as_the_doc_says(tmp_path: Path) -> None:
    # docs/cli.md: tabs, newlines and control characters inside a value are written as \t, \n, \x1b.
    (tmp_path / "sessions.json").write_text(
        json.dumps({"agent:main:main": {"sessionId": "s1", "updatedAt": 1, "label": "a\tb\nc\x1b[31m"}})
    )
    listed = run_cli("sessions", "list", "--store", str(tmp_path))
    assert "a\\tb\\nc\\x1b[31m" in listed.stdout
    assert "\\x09" not in listed.stdout and "\\x0a" not in listed.stdout


@pytest.mark.parametrize(
    ("url", "secrets"),
    [
        ("postgresql://127.0.0.1:5432/test?password=s3cr3t&schema=x", ["s3cr3t"]),
        ("postgresql://u:pw1@127.0.0.1/db?sslpassword=pw2&passfile=%2Fhome%2Fpw3", ["pw1", "pw2", "pw3"]),
        ("redis://:pw1@127.0.0.1:6379/0?password=pw2&prefix=p", ["pw1", "pw2"]),
        ("redis://127.0.0.1:6379/0?PASSWORD=pw1", ["pw1"]),
        ("host=db password=pw1 dbname=x", ["pw1"]),
        ("host=db password='p w1' dbname=x", ["p w1"]),
    ],
)
def test_redact_url_masks_every_credential_form(url: str, secrets: list[str]) -> None:
    shown = redact_url(url)
    for secret in secrets:
        assert secret not in shown
    assert "***" in shown
    assert ("schema=x" in shown) == ("schema=x" in url)


def test_redact_url_keeps_urls_without_credentials() -> None:
    for url in (
        "postgresql://app@db:5432/agents?sslmode=require&schema=sk",
        "redis://h:1/0?prefix=p",
        "/tmp/x",
    ):
        assert redact_url(url) == url


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://127.0.0.1:1/test?password=s3cr3t&schema=x&connect_timeout=1",
        "redis://127.0.0.1:1/0?password=s3cr3t&socket_connect_timeout=1",
    ],
)
def test_cli_never_prints_a_query_parameter_password(url: str) -> None:
    # Port 1: nothing listens; the error line names the URL, masked.
    for args in (["sessions", "list", "--store", url], ["status", "--store", url, "k"]):
        result = run_cli(*args)
        assert result.exit_code == 1, result.output
        assert "s3cr3t" not in result.output
        assert "password=***" in result.stderr or "://" not in result.stderr
        assert result.stderr.count("\n") == 1, result.stderr


@pytest.mark.parametrize("as_json", [False, True])
def test_doctor_reports_dropped_entries_once(tmp_path: Path, as_json: bool) -> None:
    # Two doctor checks read the store; each load logged "dropped 1 entries" (twice on stderr) beside the
    # store finding that already says it.
    (tmp_path / "sessions.json").write_text(
        json.dumps(
            {
                "agent:main:ok": {"sessionId": "s1", "updatedAt": 1},
                "agent:main:bad": {"sessionId": 12345, "updatedAt": "yesterday"},
            }
        )
    )
    (tmp_path / "s1.jsonl").write_text(
        '{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}\n'
    )
    args = ["doctor", str(tmp_path), *(["--json"] if as_json else [])]
    result = run_cli(*args, obj=_Entry())  # obj: logging set up as the script does
    assert "agent:main:bad" not in result.stderr, result.stderr
    assert result.stdout.count("1 entries fail the load-time shape check") == 1, result.stdout


@pytest.mark.parametrize(
    ("chars_after", "settings", "named"),
    [
        (3000, PruningSettings(), "minPrunableToolChars 50000"),
        (3000, PruningSettings(hard_clear=HardClearSettings(enabled=False)), "hardClear.enabled"),
        (1000, PruningSettings(), "< hardClearRatio 0.5"),
    ],
)
def test_prune_reason_names_the_setting_that_blocked_hard_clear(
    chars_after: int, settings: PruningSettings, named: str
) -> None:
    # "context at 1.471 of the window >= softTrimRatio 0.3: 2 tool results soft-trimmed, 0 hard-cleared"
    # did not say why nothing was hard-cleared.
    result = PruneResult(
        messages=(), changed=True, soft_trimmed=("a", "b"), chars_before=5884, chars_after=chars_after
    )
    reason = prune_reason(result, settings, context_window=1000)
    assert reason.startswith("context at 1.471 of the window")
    assert "0 hard-cleared" in reason
    assert named in reason


@pytest.mark.parametrize("as_json", [False, True])
def test_cleanup_reports_transcript_links_it_leaves(tmp_path: Path, as_json: bool) -> None:
    # The entries were removed, the links stayed, and the report said only "files: 0 actions".
    sessions, outside = tmp_path / "sessions", tmp_path / "outside"
    sessions.mkdir()
    outside.mkdir()
    ids = [f"0000000{i}-0000-4000-8000-000000000000" for i in (1, 2)]
    for sid in ids:
        target = outside / f"{sid}.jsonl"
        target.write_text(
            json.dumps({"type": "session", "version": 3, "id": sid, "timestamp": "2020-01-01T00:00:00.000Z"})
            + "\n"
        )
        (sessions / f"{sid}.jsonl").symlink_to(target)
    store = {f"agent:main:k{i}": {"sessionId": sid, "updatedAt": 1000 + i} for i, sid in enumerate(ids)}
    (sessions / "sessions.json").write_text(json.dumps(store))
    args = ["sessions", "cleanup", "--store", str(sessions), "--enforce", *(["--json"] if as_json else [])]
    result = run_cli(*args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads((sessions / "sessions.json").read_text()) == {}
    assert all((sessions / f"{sid}.jsonl").is_symlink() for sid in ids)  # never removed through a link
    if as_json:
        warnings = json.loads(result.stdout)["warnings"]
    else:
        warnings = [line for line in result.stdout.splitlines() if line.startswith("warning:")]
    for sid in ids:
        assert sum(f"{sid}.jsonl is a symbolic link: left in place" in w for w in warnings) == 1, warnings


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # psycopg's async API is asyncio-only (docs/decisions.md PG-ASYNCIO)


@pytest.mark.anyio
async def test_an_unreachable_postgres_fails_at_once_with_its_cause() -> None:
    # The pool retried for connect_timeout_s, then said only "cannot reach ... within 30 s".
    backend = PostgresStoreBackend("postgresql://127.0.0.1:1/test", connect_timeout_s=30)
    try:
        with pytest.raises(StoreUnavailableError, match="Connection refused") as caught:
            await backend.keys()
        assert "within" not in str(caught.value)
    finally:
        await backend.aclose()


@pytest.mark.anyio
async def test_an_unknown_libpq_parameter_is_a_config_error() -> None:
    backend = PostgresStoreBackend("postgresql://127.0.0.1:1/test?bogus=1", connect_timeout_s=30)
    try:
        with pytest.raises(ConfigError, match="bogus"):
            await backend.keys()
    finally:
        await backend.aclose()


@pytest.mark.parametrize(
    ("query", "code", "cause"), [("", 1, "Connection refused"), ("?bogus=1&password=s3cr3t", 2, '"bogus"')]
)
def test_cli_reports_a_postgres_connection_failure_in_one_line(query: str, code: int, cause: str) -> None:
    url = f"postgresql://127.0.0.1:1/test{query}"
    for args in (["sessions", "list", "--store", url], ["status", "--store", url, "k", "--json"]):
        result = run_cli(*args, obj=_Entry())  # obj: logging set up as the script does
        assert result.exit_code == code, result.output
        assert result.stderr.startswith("sessionkeeper: error: ")
        assert result.stderr.count("\n") == 1, result.stderr  # no psycopg_pool "error connecting" lines
        assert cause in result.stderr
        assert "s3cr3t" not in result.stderr


_ROOT = Path(__file__).resolve().parents[2]


def test_docs_await_every_runtime_coroutine_they_call() -> None:
    # docs/runtime.md told hosts to call `runtime.release_turn_lock(session)`: a coroutine, never awaited.
    import inspect
    import re

    from sessionkeeper.runtime import SessionRuntime

    coroutines = {
        name for name, member in inspect.getmembers(SessionRuntime) if inspect.iscoroutinefunction(member)
    }
    assert "release_turn_lock" in coroutines
    bare = [
        f"{doc.name}: {match.group(0)}"
        for doc in [*sorted((_ROOT / "docs").glob("*.md")), _ROOT / "README.md"]
        for match in re.finditer(r"(await\s+)?\bruntime\.(\w+)\(", doc.read_text(encoding="utf-8"))
        if match.group(2) in coroutines and match.group(1) is None
    ]
    assert bare == []


def test_readme_and_cli_doc_list_every_sessions_cleanup_option() -> None:
    from sessionkeeper.cli._cleanup import cleanup_command

    options = {opt for param in cleanup_command.params for opt in param.opts if opt.startswith("--")}
    assert "--transcripts-dir" in options
    for doc in (_ROOT / "README.md", _ROOT / "docs" / "cli.md"):
        described = doc.read_text(encoding="utf-8").split("sessions cleanup --store", 1)[1][:300]
        assert "DIR|URL" in described.replace("\\|", "|"), doc.name
        missing = sorted(opt for opt in options if opt not in described)
        assert missing == [], (doc.name, missing)


@pytest.mark.parametrize("as_json", [False, True])
def test_sessions_list_title_and_json_store_mask_a_query_password(as_json: bool) -> None:
    dsn = require_postgres()
    sep = "&" if "?" in dsn else "?"
    url = f"{dsn}{sep}password=s3cr3t&schema={new_name('skclih')}"  # read-only: nothing is created
    args = ["sessions", "list", "--store", url, *(["--json"] if as_json else [])]
    result = run_cli(*args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "s3cr3t" not in result.output
    shown = json.loads(result.stdout)["store"] if as_json else result.stdout.splitlines()[0]
    assert "password=***" in shown
