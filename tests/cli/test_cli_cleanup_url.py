"""
``sessions cleanup --store URL``: maintenance of a PostgreSQL or Redis store (entries in the database,
transcripts in ``--transcripts-dir``) gives the report and the result the same store content gives in
SQLite (issue 13 follow-up; DESIGN D6: the main session, protected keys and the active set survive).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests._helpers import run_cli
from tests._servers import pg_schema, redis_prefix

from sessionkeeper.exceptions import ConfigError
from sessionkeeper.store import (
    PostgresStoreBackend,
    RedisStoreBackend,
    SessionStore,
    SqliteStoreBackend,
    StoreBackend,
    run_maintenance,
    session_entry_from_dict,
)


__all__ = ("pg_schema", "redis_prefix")

NOW_MS = 1_790_000_000_000
DAY_MS = 86_400_000
HOUR_MS = 3_600_000
MODEL_RUN = "agent:main:explicit:model-run-0b6f2c1e-8d3a-4c5b-9e7f-1a2b3c4d5e6f"


def _sid(i: int) -> str:
    return f"00000000-0000-4000-8000-{i:012d}"


def _entries() -> dict[str, dict[str, Any]]:
    """Stale, protected, active, main, a model-run probe, ties and an entry without ``updatedAt``."""
    out: dict[str, dict[str, Any]] = {
        "agent:main:main": {"sessionId": _sid(0), "updatedAt": NOW_MS - 90 * DAY_MS},
        "agent:main:telegram:group:g1": {"sessionId": _sid(1), "updatedAt": NOW_MS - 90 * DAY_MS},
        "agent:main:direct:Active": {"sessionId": _sid(2), "updatedAt": NOW_MS - 60 * DAY_MS},
        "agent:main:direct:old": {"sessionId": _sid(3), "updatedAt": NOW_MS - 60 * DAY_MS},
        "agent:main:direct:chat": {"sessionId": _sid(4), "chatType": "channel", "updatedAt": 5},
        MODEL_RUN: {"sessionId": _sid(5), "updatedAt": NOW_MS - 2 * DAY_MS},
        "agent:main:direct:noTime": {"sessionId": _sid(6)},
        "agent:main:direct:weird": {"sessionId": _sid(7), "updatedAt": "yesterday"},
    }
    for i in range(8):  # recent, with ties (two per hour)
        out[f"agent:main:direct:r{i}"] = {"sessionId": _sid(10 + i), "updatedAt": NOW_MS - (i // 2) * HOUR_MS}
    return out


def _write_transcripts(directory: Path) -> None:
    for raw in _entries().values():
        sid = raw["sessionId"]
        header = {"type": "session", "version": 3, "id": sid, "timestamp": "2026-01-01T00:00:00.000Z"}
        (directory / f"{sid}.jsonl").write_text(json.dumps(header) + "\n")


async def _fill(backend: StoreBackend) -> None:
    try:
        for key, raw in _entries().items():
            await backend.put(key, session_entry_from_dict(raw))
    finally:
        await backend.aclose()


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "openclaw.json"
    path.write_text(json.dumps({"session": {"maintenance": {"maxEntries": 5, "pruneAfter": "30d"}}}))
    return path


def _url(kind: str, pg_schema: tuple[str, str], redis_prefix: tuple[str, str]) -> tuple[str, StoreBackend]:
    if kind == "postgres":
        dsn, schema = pg_schema
        sep = "&" if "?" in dsn else "?"
        return f"{dsn}{sep}schema={schema}", PostgresStoreBackend(dsn, schema=schema)
    url, prefix = redis_prefix
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}prefix={prefix}", RedisStoreBackend(url, key_prefix=prefix)


def _cleanup(store: str, config: Path, *extra: str) -> dict[str, Any]:
    args = ["sessions", "cleanup", "--store", store, "--config", str(config), "--now", str(NOW_MS)]
    result = run_cli(
        *args, "--active-key", "AGENT:MAIN:DIRECT:ACTIVE", "--json", *extra, catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.stdout)
    for name in ("storePath", "backend", "agentId", "bytesBefore", "bytesAfter"):  # where, not what
        report.pop(name)
    if report["unreferencedArtifacts"] is not None:  # sessions.sqlite (and -wal, -shm) are scanned too
        report["unreferencedArtifacts"].pop("scannedFiles")
    return report


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_cleanup_of_a_store_url_reports_and_does_what_sqlite_does(
    kind: str, tmp_path: Path, pg_schema: tuple[str, str], redis_prefix: tuple[str, str]
) -> None:
    sessions = tmp_path / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    transcripts = tmp_path / "transcripts"
    transcripts.mkdir()
    _write_transcripts(sessions)
    _write_transcripts(transcripts)
    config = _config(tmp_path)
    url, backend = _url(kind, pg_schema, redis_prefix)
    anyio.run(_fill, SqliteStoreBackend(sessions / "sessions.sqlite"))
    anyio.run(_fill, backend)

    sqlite_dry = _cleanup(str(sessions), config, "--dry-run")
    url_dry = _cleanup(url, config, "--dry-run", "--transcripts-dir", str(transcripts))
    assert url_dry == sqlite_dry
    actions = sqlite_dry["actions"]
    assert actions["agent:main:main"] == "keep"  # D6: the main session
    assert actions["agent:main:telegram:group:g1"] == "keep"  # protected
    assert actions["agent:main:direct:chat"] == "keep"  # protected by its chatType
    assert actions["agent:main:direct:Active"] == "keep"  # the active set, case-insensitive
    assert actions["agent:main:direct:old"] == "prune-stale"
    assert actions[MODEL_RUN] == "prune-model-run"
    assert sqlite_dry["capped"] > 0 and sqlite_dry["files"]

    sqlite_run = _cleanup(str(sessions), config)
    url_run = _cleanup(url, config, "--transcripts-dir", str(transcripts))
    assert url_run == sqlite_run
    assert url_run["applied"] is True

    async def remaining() -> tuple[list[str], list[str]]:
        async with SessionStore.open(sessions) as lite, SessionStore.open(url) as remote:
            return await lite.backend.keys(), await remote.backend.keys()

    lite_keys, remote_keys = anyio.run(remaining)
    assert remote_keys == lite_keys
    assert len(lite_keys) == url_run["afterCount"]
    on_disk = sorted(p.name for p in sessions.iterdir() if not p.name.startswith("sessions.sqlite"))
    assert sorted(p.name for p in transcripts.iterdir()) == on_disk


def test_cleanup_of_a_store_url_without_transcripts_maintains_the_entries(
    tmp_path: Path, pg_schema: tuple[str, str], redis_prefix: tuple[str, str]
) -> None:
    url, backend = _url("postgres", pg_schema, redis_prefix)
    anyio.run(_fill, backend)
    config = _config(tmp_path)
    report = _cleanup(url, config)
    assert report["applied"] is True
    assert report["files"] == []
    assert report["actions"]["agent:main:direct:old"] == "prune-stale"
    removed = sum(v != "keep" for v in report["actions"].values())
    assert report["afterCount"] == report["beforeCount"] - removed
    result = run_cli("sessions", "cleanup", "--store", url, "--fix-missing")
    assert result.exit_code != 0
    assert "--transcripts-dir" in result.output


def test_run_maintenance_takes_a_bare_backend(
    pg_schema: tuple[str, str], redis_prefix: tuple[str, str]
) -> None:
    _, backend = _url("postgres", pg_schema, redis_prefix)
    anyio.run(_fill, backend)

    async def main() -> None:
        dsn, schema = pg_schema
        async with PostgresStoreBackend(dsn, schema=schema) as b:
            report = await run_maintenance(b, now_ms=NOW_MS, active_keys=["agent:main:direct:active"])
            assert report.actions["agent:main:direct:old"] == "prune-stale"
            assert "agent:main:direct:old" not in await b.keys()
            with pytest.raises(ConfigError):
                await run_maintenance(b, now_ms=NOW_MS, fix_missing=True)

    anyio.run(main)


def test_transcripts_dir_is_refused_with_a_sessions_directory(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    result = run_cli("sessions", "cleanup", "--store", str(sessions), "--transcripts-dir", str(tmp_path))
    assert result.exit_code != 0
    assert "--transcripts-dir is for store URLs" in result.output


def test_cleanup_of_a_postgres_url_in_sql_gives_the_sqlite_report(
    tmp_path: Path, pg_schema: tuple[str, str], redis_prefix: tuple[str, str]
) -> None:
    # no transcripts: the PostgreSQL entry passes run as set-based SQL (docs/postgres.md "Maintenance")
    sessions = tmp_path / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    config = _config(tmp_path)
    url, backend = _url("postgres", pg_schema, redis_prefix)
    anyio.run(_fill, SqliteStoreBackend(sessions / "sessions.sqlite"))
    anyio.run(_fill, backend)
    assert _cleanup(url, config, "--dry-run") == _cleanup(str(sessions), config, "--dry-run")
    assert _cleanup(url, config) == _cleanup(str(sessions), config)
