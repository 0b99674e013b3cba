"""
``sessionkeeper export`` / ``import`` (issue 13): a sessions directory into a database store and back out
into a new directory, byte for byte, on the real servers; refusals, hostile input and usage errors are
one error line and a documented exit code, with nothing partial written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import psycopg
import pytest
from tests._helpers import header_obj, json_line, run_cli, user_entry
from tests._servers import pg_schema, redis_prefix

from sessionkeeper.store import SessionStore, encode_session_entry


__all__ = ("pg_schema", "redis_prefix")

SID_A = "0190a1b2-0000-7000-8000-00000000000a"
SID_B = "0190a1b2-0000-7000-8000-00000000000b"
_HUGE = "9" * 5000


def _lines(sid: str, *extra: bytes) -> bytes:
    lines = [json_line(header_obj(sid)), json_line(user_entry("e1", None, "héllo")), *extra]
    return b"".join(line + b"\n" for line in lines)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A sessions directory: two sessions (one entry holding values Python cannot hold), a topic file."""
    directory = tmp_path / "src"
    directory.mkdir()
    (directory / f"{SID_A}.jsonl").write_bytes(_lines(SID_A, b"not json {", b""))
    (directory / f"{SID_B}-topic-7.jsonl").write_bytes(_lines(SID_B))
    (directory / "sessions.json").write_text(
        "{\n"
        f'  "agent:main:main": {{"sessionId": "{SID_A}", "updatedAt": 1, "big": 1e400, "huge": {_HUGE}}},\n'
        f'  "agent:main:topic": {{"sessionId": "{SID_B}", "updatedAt": 2,'
        f' "sessionFile": "{SID_B}-topic-7.jsonl"}}\n'
        "}"
    )
    return directory


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if not p.name.endswith(".lock")}


def _entries(directory: Path) -> dict[str, bytes]:
    """Each entry of the directory's store as the library encodes it, in the store's order."""

    async def read() -> dict[str, bytes]:
        async with SessionStore.open(directory, read_only=True) as store:
            return {k: encode_session_entry(v) for k, v in (await store.backend.load_all()).items()}

    return anyio.run(read)


@pytest.fixture
def pg_url(pg_schema: tuple[str, str]) -> Iterator[str]:
    dsn, schema = pg_schema
    yield f"{dsn}?schema={schema}&store=cli"


def test_a_directory_goes_into_postgres_and_back_byte_for_byte(
    source: Path, pg_url: str, tmp_path: Path
) -> None:
    before = _files(source)
    files = tmp_path / "db-files"
    result = run_cli("import", str(source), "--store", pg_url, "--transcripts-dir", str(files), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["copied"], report["unchanged"], report["failed"]) == (2, 0, 0)
    main = report["sessions"][0]
    assert main["sessionKey"] == "agent:main:main"
    assert main["transcript"] == str(files / f"{SID_A}.jsonl")
    assert (main["lines"], main["bytes"], main["error"]) == (4, len(before[f"{SID_A}.jsonl"]), None)
    assert _files(source) == before  # only read

    out = tmp_path / "back"
    result = run_cli("export", "--store", pg_url, "--transcripts-dir", str(files), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"exported 2 sessions from {pg_url} to {out}: 2 copied, 0 unchanged")
    back = _files(out)
    assert back[f"{SID_A}.jsonl"] == before[f"{SID_A}.jsonl"]
    assert back[f"{SID_B}-topic-7.jsonl"] == before[f"{SID_B}-topic-7.jsonl"]
    assert _entries(out) == _entries(source)  # 1e400 and the 5000-digit integer as their text
    assert f'"huge": {_HUGE}'.encode() in back["sessions.json"]

    again = run_cli("export", "--store", pg_url, "--transcripts-dir", str(files), "--out", str(out), "--json")
    assert again.exit_code == 0, again.output
    assert {s["outcome"] for s in json.loads(again.stdout)["sessions"]} == {"unchanged"}


def test_import_into_redis_needs_a_transcripts_dir(
    source: Path, redis_prefix: tuple[str, str], tmp_path: Path
) -> None:
    url, prefix = redis_prefix
    full = f"{url}?prefix={prefix}"
    result = run_cli("import", str(source), "--store", full)
    assert result.exit_code == 2
    assert "memory only" in result.stderr
    files = tmp_path / "t"
    result = run_cli("import", str(source), "--store", full, "--transcripts-dir", str(files))
    assert result.exit_code == 0, result.output
    assert _files(files)[f"{SID_A}.jsonl"] == _files(source)[f"{SID_A}.jsonl"]


def test_a_session_in_the_way_is_refused_and_named(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / f"{SID_A}.jsonl").write_bytes(b'{"type":"session","id":"other"}\n')
    result = run_cli("export", "--store", str(source), "--out", str(out))
    assert result.exit_code == 1
    assert "1 copied, 0 unchanged, 0 replaced, 1 failed" in result.stdout
    assert "failed agent:main:main: another transcript is at" in result.stdout
    assert "(SessionExistsError)" in result.stdout
    assert result.stderr.startswith("sessionkeeper: error: 1 sessions were not copied")
    assert (out / f"{SID_A}.jsonl").read_bytes() == b'{"type":"session","id":"other"}\n'
    assert list(_entries(out)) == ["agent:main:topic"]

    result = run_cli("export", "--store", str(source), "--out", str(out), "--overwrite", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [s["outcome"] for s in report["sessions"]] == ["replaced", "unchanged"]
    assert (out / f"{SID_A}.jsonl").read_bytes() == (source / f"{SID_A}.jsonl").read_bytes()


def test_json_reports_each_failure_with_its_type(source: Path, tmp_path: Path) -> None:
    (source / f"{SID_B}-topic-7.jsonl").write_bytes(_lines(SID_B) + b'{"type":"mess')
    out = tmp_path / "out"
    result = run_cli("import", str(source), "--store", str(out), "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    failed = report["sessions"][1]
    assert failed["outcome"] == "failed"
    assert failed["error"]["type"] == "TranscriptFormatError"
    assert "unterminated" in failed["error"]["message"]
    assert f"{SID_B}-topic-7.jsonl" not in _files(out)
    assert report["failed"] == 1


def test_a_corrupt_source_exits_2_and_writes_nothing(source: Path, tmp_path: Path) -> None:
    (source / "sessions.json").write_bytes(b'{"agent:main:main": ')
    out = tmp_path / "out"
    result = run_cli("export", "--store", str(source), "--out", str(out))
    assert result.exit_code == 2
    assert result.stderr.startswith("sessionkeeper: error: ")
    assert "no backup written by a read-only open" in result.stderr
    assert not out.exists()
    assert sorted(p.name for p in source.iterdir()) == sorted(
        ["sessions.json", f"{SID_A}.jsonl", f"{SID_B}-topic-7.jsonl"]
    )


def test_only_the_keys_asked_for_and_unknown_keys(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_cli("export", "--store", str(source), "--out", str(out), "--key", "agent:main:topic")
    assert result.exit_code == 0, result.output
    assert list(_entries(out)) == ["agent:main:topic"]
    assert f"{SID_A}.jsonl" not in _files(out)
    result = run_cli(
        "export", "--store", str(source), "--out", str(tmp_path / "o2"), "--key", "agent:main:nope"
    )
    assert result.exit_code == 2
    assert "'agent:main:nope'" in result.stderr
    assert not (tmp_path / "o2").exists()


def test_unreferenced_transcripts_are_named(source: Path, tmp_path: Path) -> None:
    (source / "0190a1b2-0000-7000-8000-0000000000ff.jsonl").write_bytes(_lines("x"))
    result = run_cli("export", "--store", str(source), "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert "not copied: 1 transcripts no entry names: 0190a1b2-0000-7000-8000-0000000000ff" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["export", "--store", "{src}", "--transcripts-dir", "{tmp}", "--out", "{tmp}/o"],
            "is for store URLs",
        ),
        (["import", "{src}", "--store", "{tmp}/o", "--transcripts-dir", "{tmp}"], "is for store URLs"),
        (["export", "--store", "{tmp}/missing", "--out", "{tmp}/o"], "does not exist"),
        (["import", "{tmp}/missing", "--store", "{tmp}/o"], "does not exist"),
        (["export", "--store", "{src}"], "--out"),
    ],
)
def test_usage_errors_are_one_line(source: Path, tmp_path: Path, args: list[str], message: str) -> None:
    argv = [a.format(src=source, tmp=tmp_path) for a in args]
    result = run_cli(*argv)
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_help_shows_examples() -> None:
    for command in ("export", "import"):
        result = run_cli(command, "--help")
        assert result.exit_code == 0
        assert f"sessionkeeper {command} " in result.stdout
        assert "Examples:" in result.stdout


def test_a_dry_run_writes_nothing_and_says_so(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_cli("export", "--store", str(source), "--out", str(out), "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("dry run, nothing written: would have exported 2 sessions")
    assert "2 copied, 0 unchanged" in result.stdout
    assert not out.exists()
    result = run_cli("import", str(source), "--store", str(out), "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["dryRun"] is True
    assert [s["lines"] for s in report["sessions"]] == [4, 2]
    assert not out.exists()


def test_one_postgres_url_holds_entries_and_transcripts(source: Path, pg_url: str, tmp_path: Path) -> None:
    before = _files(source)
    result = run_cli("import", str(source), "--store", pg_url, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["copied"] == 2
    assert report["sessions"][0]["transcript"].startswith("postgresql:")  # a row set, not a file
    out = tmp_path / "back"
    result = run_cli("export", "--store", pg_url, "--out", str(out))
    assert result.exit_code == 0, result.output
    back = _files(out)
    assert back[f"{SID_A}.jsonl"] == before[f"{SID_A}.jsonl"]
    assert back[f"{SID_B}-topic-7.jsonl"] == before[f"{SID_B}-topic-7.jsonl"]
    assert _entries(out) == _entries(source)
    assert _files(source) == before


def test_a_dry_run_into_a_new_database_creates_nothing(source: Path, pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    url = f"{dsn}?schema={schema}"
    result = run_cli("import", str(source), "--store", url, "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [s["outcome"] for s in report["sessions"]] == ["copied", "copied"]
    with psycopg.connect(dsn) as conn:  # the schema was not even created
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchall()
    assert found == []


def test_export_of_a_store_holding_no_transcripts_is_refused(
    source: Path, pg_url: str, redis_prefix: tuple[str, str], tmp_path: Path
) -> None:
    files = tmp_path / "db-files"
    result = run_cli("import", str(source), "--store", pg_url, "--transcripts-dir", str(files))
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    result = run_cli("export", "--store", pg_url, "--out", str(out))  # the transcripts are files
    assert result.exit_code == 2
    assert "--transcripts-dir" in result.stderr
    assert "imported as files" in result.stderr
    assert not out.exists()
    url, prefix = redis_prefix
    full = f"{url}?prefix={prefix}"
    assert run_cli("import", str(source), "--store", full, "--transcripts-dir", str(files)).exit_code == 0
    result = run_cli("export", "--store", full, "--out", str(out))
    assert result.exit_code == 2
    assert "memory only" in result.stderr
    assert not out.exists()
    result = run_cli("export", "--store", full, "--transcripts-dir", str(files), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert _files(out)[f"{SID_A}.jsonl"] == _files(source)[f"{SID_A}.jsonl"]


def test_drops_are_reported_for_a_whole_export_only_and_an_empty_one_makes_its_dir(
    source: Path, tmp_path: Path
) -> None:
    data = (source / "sessions.json").read_text()
    (source / "sessions.json").write_text(data.replace("{\n", '{\n  "agent:main:bad": 7,\n', 1))
    whole = run_cli("export", "--store", str(source), "--out", str(tmp_path / "all"))
    assert whole.exit_code == 0, whole.output
    assert "not copied: 1 sessions.json rows its load drops: agent:main:bad" in whole.stdout
    one = run_cli(
        "export", "--store", str(source), "--out", str(tmp_path / "one"), "--key", "agent:main:topic"
    )
    assert one.exit_code == 0, one.output
    assert "load drops" not in one.stdout
    empty = tmp_path / "empty-src"
    empty.mkdir()
    out = tmp_path / "empty-out"
    result = run_cli("export", "--store", str(empty), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("exported 0 sessions")
    assert out.is_dir()
