"""
Hostile and unsupported agent databases: every refusal is a typed error naming what is wrong, nothing is
written (no partial sessions directory) and the database keeps its bytes.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from tests._helpers import run_cli
from tests.openclaw._openclaw9 import sample_db

from sessionkeeper.exceptions import OpenClawDatabaseError, UnsafePathError, UnsupportedSchemaVersionError
from sessionkeeper.openclaw import import_openclaw_database, read_agent_database


ZSTD_ROW = ("a5b213c5-eee4-486c-b177-8a741bd9eed5", 3)  # a compressed row of the `small` sample
TEXT_ROW = ("a5b213c5-eee4-486c-b177-8a741bd9eed5", 1)


def _mutated(tmp_path: Path, sql: str, *params: object) -> Path:
    """A copy of the `small` sample with one statement applied (checks off: a hostile writer)."""
    database = sample_db("small", tmp_path)
    connection = sqlite3.connect(database)
    connection.execute("PRAGMA ignore_check_constraints = ON")
    cursor = connection.execute(sql, params)
    assert sql.startswith("PRAGMA") or cursor.rowcount == 1  # the statement hit its row
    connection.commit()
    connection.execute("PRAGMA journal_mode = DELETE")  # no -wal left beside it: read it immutable
    connection.close()
    return database


def _refused(database: Path, tmp_path: Path, error: type[Exception] = OpenClawDatabaseError) -> Exception:
    before = hashlib.sha256(database.read_bytes()).hexdigest()
    out = tmp_path / "out"
    with pytest.raises(error) as caught:
        import_openclaw_database(database, out)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")] == []  # no staging left
    assert hashlib.sha256(database.read_bytes()).hexdigest() == before
    return caught.value


@pytest.mark.parametrize("version", [0, 13, 24, 99])
def test_unknown_schema_version_is_refused_with_its_number(version: int, tmp_path: Path) -> None:
    database = _mutated(tmp_path, f"PRAGMA user_version = {version}")
    err = _refused(database, tmp_path, UnsupportedSchemaVersionError)
    assert isinstance(err, UnsupportedSchemaVersionError)
    assert err.version == version
    assert f"schema version {version} " in str(err)


def test_unknown_version_on_the_cli_exits_2_naming_it(tmp_path: Path) -> None:
    database = _mutated(tmp_path, "PRAGMA user_version = 24")
    result = run_cli("import-openclaw", str(database), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert "schema version 24 is not supported" in result.output
    assert not (tmp_path / "out").exists()


HOSTILE: dict[str, tuple[str, tuple[object, ...], str]] = {
    "entry not JSON": (
        "UPDATE session_nodes SET entry_json = '{\"sessionId\": ' WHERE session_key = 'agent:main:main'",
        (),
        "session_nodes 'agent:main:main': entry_json is not JSON",
    ),
    "entry an array": (
        "UPDATE session_nodes SET entry_json = '[1]' WHERE session_key = 'agent:main:main'",
        (),
        "entry_json is not a JSON object",
    ),
    "event text not JSON": (
        "UPDATE transcript_events SET event_json = '{\"type\":' WHERE session_id = ? AND seq = ?",
        TEXT_ROW,
        f"transcript_events {TEXT_ROW[0]!r} seq 1: stored event is not JSON",
    ),
    "event text a blob": (
        "UPDATE transcript_events SET event_json = CAST(X'FF00' AS TEXT) WHERE session_id = ? AND seq = ?",
        TEXT_ROW,
        "event_json is not UTF-8",
    ),
    "zstd garbage": (
        "UPDATE transcript_events SET event_zstd = X'00112233445566' WHERE session_id = ? AND seq = ?",
        ZSTD_ROW,
        "event_zstd does not decode",
    ),
    "zstd length lies": (
        "UPDATE transcript_events SET event_utf8_bytes = event_utf8_bytes + 1"
        " WHERE session_id = ? AND seq = ?",
        ZSTD_ROW,
        "event_utf8_bytes says 1761",
    ),
    "no payload": (
        "UPDATE transcript_events SET event_zstd = NULL WHERE session_id = ? AND seq = ?",
        ZSTD_ROW,
        "no event payload",
    ),
    "both payloads": (
        "UPDATE transcript_events SET event_json = '{}' WHERE session_id = ? AND seq = ?",
        ZSTD_ROW,
        "both event_json and event_zstd are set",
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_corrupt_rows_give_typed_errors_and_write_nothing(case: str, tmp_path: Path) -> None:
    sql, params, message = HOSTILE[case]
    database = _mutated(tmp_path, sql, *params)
    err = _refused(database, tmp_path)
    assert isinstance(err, OpenClawDatabaseError)
    assert message in str(err)
    assert err.path == database


def test_unsafe_session_id_is_refused_before_writing(tmp_path: Path) -> None:
    database = _mutated(
        tmp_path,
        "UPDATE session_nodes SET current_session_id = '../escape' WHERE session_key = 'agent:main:main'",
    )
    err = _refused(database, tmp_path, UnsafePathError)
    assert "'../escape'" in str(err)


def test_not_a_database_and_missing_file(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not sqlite at all" * 100)
    assert "not a readable SQLite database" in str(_refused(junk, tmp_path))
    with pytest.raises(OpenClawDatabaseError, match="no such database file"):
        read_agent_database(tmp_path / "absent.sqlite")
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()
    with pytest.raises(OpenClawDatabaseError, match="not an OpenClaw agent database"):
        read_agent_database(empty)


def test_deep_nesting_is_a_typed_error(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    database = _mutated(
        tmp_path,
        "UPDATE transcript_events SET event_json = ? WHERE session_id = ? AND seq = ?",
        deep,
        *TEXT_ROW,
    )
    _refused(database, tmp_path)


def test_internal_run_effect_sessions_stay_hidden(tmp_path: Path) -> None:
    database = _mutated(
        tmp_path,
        "INSERT INTO session_nodes (session_key, current_session_id, entry_json, updated_at)"
        " VALUES (?, ?, ?, 1)",
        "agent:main:internal-session-effects:run-1",
        "internal-session-effects-run-1",
        json.dumps({"sessionId": "internal-session-effects-run-1", "updatedAt": 1}),
    )
    keys = [session.key for session in read_agent_database(database).sessions]
    assert "agent:main:internal-session-effects:run-1" not in keys
    assert len(keys) == 21


def _cli_json(*args: str) -> dict[str, object]:
    result = run_cli(*args)
    assert result.exit_code == 0, result.output
    payload: dict[str, object] = json.loads(result.stdout)
    return payload


def test_cli_json_and_the_non_empty_refusal(tmp_path: Path) -> None:
    database = sample_db("pi-store", tmp_path)
    out = tmp_path / "out"
    payload = _cli_json("import-openclaw", str(database), "--out", str(out), "--json")
    assert payload == {
        "database": str(database),
        "out": str(out),
        "schemaVersion": 23,
        "agentId": "main",
        "sessions": 4,
        "transcripts": 4,
        "events": 144,
        "compressedRows": 13,
    }
    (out / "notes.txt").write_text("mine")
    (out / "sessions.json").write_text("{}")
    refused = run_cli("import-openclaw", str(database), "--out", str(out))
    assert refused.exit_code == 2
    assert "is not an empty directory (--force writes" in refused.output
    assert (out / "sessions.json").read_text() == "{}"
    forced = run_cli("import-openclaw", str(database), "--out", str(out), "--force")
    assert forced.exit_code == 0, forced.output
    assert "imported 4 sessions (4 transcripts, 144 events, 13 zstd) from agent schema 23" in forced.output
    assert len(json.loads((out / "sessions.json").read_text())) == 4
    assert (out / "notes.txt").read_text() == "mine"


def test_empty_out_dir_is_used(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    report = import_openclaw_database(sample_db("pi-store", tmp_path), out)
    assert report.sessions == 4
    assert (out / "sessions.json").is_file()


def _tree(root: Path) -> dict[str, bytes | str]:
    """Every entry under ``root``: file bytes, or ``"link -> target"`` / ``"dir"``."""
    tree: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            tree[rel] = f"link -> {path.readlink()}"
        elif path.is_dir():
            tree[rel] = "dir"
        else:
            tree[rel] = path.read_bytes()
    return tree


@pytest.mark.parametrize("name", ["sessions.json", "a5b213c5-eee4-486c-b177-8a741bd9eed5.jsonl"])
def test_force_never_replaces_the_input_database(name: str, tmp_path: Path) -> None:
    out = tmp_path / "self"
    out.mkdir()
    database = out / name
    database.write_bytes(sample_db("small", tmp_path).read_bytes())
    before = _tree(out)
    with pytest.raises(UnsafePathError, match="is the input database"):
        import_openclaw_database(database, out, overwrite=True)
    assert _tree(out) == before
    result = run_cli("import-openclaw", str(database), "--out", str(out), "--force")
    assert result.exit_code == 2, result.output
    assert "is the input database" in result.output
    assert _tree(out) == before


def test_force_into_a_hard_link_of_the_database_is_refused(tmp_path: Path) -> None:
    database = sample_db("small", tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "sessions.json").hardlink_to(database)
    before = _tree(out)
    with pytest.raises(UnsafePathError, match="is the input database"):
        import_openclaw_database(database, out, overwrite=True)
    assert _tree(out) == before


@pytest.mark.parametrize("blocker", ["link", "dir"])
def test_force_checks_every_target_before_writing(blocker: str, tmp_path: Path) -> None:
    database = sample_db("small", tmp_path)
    names = sorted(p.name for p in import_openclaw_database(database, tmp_path / "probe").out_dir.iterdir())
    last = [n for n in names if n.endswith(".jsonl")][-1]  # written late: earlier files would be written
    out = tmp_path / "tgt"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    victim = tmp_path / "outside" / "victim"
    victim.parent.mkdir()
    victim.write_text("victim")
    if blocker == "link":
        (out / last).symlink_to(victim)
    else:
        (out / last).mkdir()
    before = _tree(out)
    result = run_cli("import-openclaw", str(database), "--out", str(out), "--force")
    assert result.exit_code == 2, result.output
    assert ("symbolic link" if blocker == "link" else "a directory is in the way") in result.output
    assert _tree(out) == before
    assert victim.read_text() == "victim"


def test_out_symlink_to_a_directory_is_followed(tmp_path: Path) -> None:
    database = sample_db("small", tmp_path)
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "linkdir"
    link.symlink_to(real)
    payload = _cli_json("import-openclaw", str(database), "--out", str(link), "--json")
    assert payload["out"] == str(link)
    assert link.is_symlink()
    assert (real / "sessions.json").is_file()
    assert len(list(real.glob("*.jsonl"))) == payload["transcripts"]
    forced = run_cli("import-openclaw", str(database), "--out", str(link), "--force")
    assert forced.exit_code == 0, forced.output
    assert link.is_symlink()


def test_out_dangling_symlink_is_refused(tmp_path: Path) -> None:
    database = sample_db("small", tmp_path)
    link = tmp_path / "linkdir"
    link.symlink_to(tmp_path / "missing")
    result = run_cli("import-openclaw", str(database), "--out", str(link))
    assert result.exit_code == 2, result.output
    assert "symbolic link" in result.output
    assert link.is_symlink()
    assert not (tmp_path / "missing").exists()
