"""
``import-openclaw``: OpenClaw 2026.9 agent databases read into a sessions directory equal to what
OpenClaw 2026.9.6's own legacy bridge exports (committed fixtures made by ``regen_openclaw9_fixtures.py``).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
import zstandard
from tests.openclaw._openclaw9 import DATA, SAMPLES, files, sample_db

from sessionkeeper.openclaw import SUPPORTED_SCHEMA_VERSIONS, import_openclaw_database, read_agent_database
from sessionkeeper.transcript import load_transcript, message_to_builtins


def _contexts(path: Path) -> dict[str | None, list[object]]:
    """pi's context at every leaf of a transcript (the empty file has none)."""
    if path.stat().st_size == 0:
        return {}
    index = load_transcript(path)
    leaves: list[str | None] = [None, *(entry.id for entry in index.entries() if entry.id is not None)]
    return {leaf: [message_to_builtins(m) for m in index.build_context(leaf).messages] for leaf in leaves}


@pytest.mark.parametrize("name", SAMPLES)
def test_import_equals_openclaw_export(name: str, tmp_path: Path) -> None:
    database = sample_db(name, tmp_path)
    report = import_openclaw_database(database, tmp_path / "out")
    expected = files(DATA / f"{name}.export")
    got = files(tmp_path / "out")
    assert sorted(got) == sorted(expected)
    assert json.loads(got["sessions.json"]) == json.loads(expected["sessions.json"])
    assert got == expected  # byte for byte, sessions.json's JSON.stringify layout included
    oracle = json.loads((DATA / f"{name}.export.json").read_text())
    assert report.sessions == oracle["entries"]
    assert report.transcripts == len({t["file"] for t in oracle["transcripts"]})
    assert report.events == sum(t["lines"] for t in oracle["transcripts"])
    assert report.schema_version == 23
    assert report.agent_id == "main"


@pytest.mark.parametrize("name", SAMPLES)
def test_transcript_contexts_equal_the_export(name: str, tmp_path: Path) -> None:
    import_openclaw_database(sample_db(name, tmp_path), tmp_path / "out")
    checked = 0
    for path in sorted((DATA / f"{name}.export").glob("*.jsonl")):
        ours = _contexts(tmp_path / "out" / path.name)
        assert ours == _contexts(path)
        checked += len(ours)
    assert checked > 20


def test_samples_hold_compressed_rows(tmp_path: Path) -> None:
    counts = {name: read_agent_database(sample_db(name, tmp_path)).compressed_rows for name in SAMPLES}
    assert counts == {"small": 5, "pi-store": 13, "runtime": 6}  # runtime: one row compressed on append


@pytest.mark.parametrize("name", SAMPLES)
def test_database_is_byte_identical_after_import(name: str, tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    database = sample_db(name, tmp_path / "db")
    before = hashlib.sha256(database.read_bytes()).hexdigest()
    mtime = database.stat().st_mtime_ns
    import_openclaw_database(database, tmp_path / "out")
    assert hashlib.sha256(database.read_bytes()).hexdigest() == before
    assert database.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in database.parent.iterdir()) == [database.name]  # no -wal/-shm made


def test_supported_versions_are_the_session_node_schemas() -> None:
    assert tuple(range(14, 24)) == SUPPORTED_SCHEMA_VERSIONS


# OpenClaw 2026.9.6's DDL for transcript rows before schema 23 (LEGACY_STORAGE_TABLES in
# dist/openclaw-agent-db-schema-helpers-*.mjs): text only, no zstd. Session tables are as in 23.
LEGACY_TRANSCRIPT_EVENTS = """CREATE TABLE transcript_events (
  session_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  event_json TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (session_id, seq),
  FOREIGN KEY (session_id) REFERENCES "session_windows"(session_id) ON DELETE CASCADE
) STRICT"""


def _to_legacy_storage(database: Path, version: int) -> None:
    """Rewrite the sample's rows in the pre-23 text-only layout (zstd rows decompressed), at ``version``."""
    connection = sqlite3.connect(database)
    connection.execute("PRAGMA foreign_keys = OFF")
    rows = connection.execute(
        "SELECT session_id, seq, event_json, event_zstd, event_utf8_bytes, created_at FROM transcript_events"
    ).fetchall()
    connection.execute("DROP TABLE transcript_events")
    connection.execute(LEGACY_TRANSCRIPT_EVENTS)
    for session_id, seq, text, packed, size, created_at in rows:
        if text is None:
            with zstandard.ZstdDecompressor().stream_reader(packed) as reader:
                text = reader.read(size + 1).decode()
        connection.execute(
            "INSERT INTO transcript_events VALUES (?, ?, ?, ?)", (session_id, seq, text, created_at)
        )
    connection.execute(f"PRAGMA user_version = {version}")
    connection.commit()
    connection.execute("PRAGMA journal_mode = DELETE")
    connection.close()


@pytest.mark.parametrize("version", [14, 17, 21, 22])
def test_text_only_schemas_read_the_same(version: int, tmp_path: Path) -> None:
    database = sample_db("small", tmp_path)
    _to_legacy_storage(database, version)
    report = import_openclaw_database(database, tmp_path / "out")
    assert (report.schema_version, report.compressed_rows, report.events) == (version, 0, 132)
    assert files(tmp_path / "out") == files(DATA / "small.export")


def test_runtime_sample_has_what_only_the_9_runtime_writes(tmp_path: Path) -> None:
    database = read_agent_database(sample_db("runtime", tmp_path))
    sessions = {session.key: session for session in database.sessions}
    fresh = [json.loads(line) for line in sessions["agent:main:telegram:direct:44130631"].lines]
    assert fresh[0]["type"] == "session"
    assert fresh[0]["version"] == 4
    assert all(len(record["id"]) == 36 for record in fresh[1:])
    reset = [json.loads(line) for line in sessions["agent:main:main"].lines]
    assert [record["type"] for record in reset[-2:]] == ["reset", "message"]
    assert reset[-2]["reason"] == "new"
