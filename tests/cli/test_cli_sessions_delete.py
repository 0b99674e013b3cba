"""
``sessionkeeper sessions delete``: a session's entry removed, its transcript archived in a sessions
directory (``<file>.deleted.<stamp>``) or deleted for good from a database (issue 13), kept with
``--keep-transcript``; an unknown key exits 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from tests._helpers import cli_output, run_cli
from tests._servers import pg_schema

from sessionkeeper.abc import ArchivingTranscriptStorage
from sessionkeeper.store import SessionStore


__all__ = ("pg_schema",)

KEY = "agent:main:direct:old"
HEADER = b'{"type":"session","version":3,"id":"x","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}'


def _seed(location: str | Path) -> str:
    async def seed() -> str:
        async with SessionStore.open(location) as store:
            entry = await store.patch(KEY, label="old")
            await store.transcript_storage().create(str(entry.session_id), [HEADER])
            return str(entry.session_id)

    return anyio.run(seed, backend="asyncio")


def _sessions(location: str | Path) -> tuple[list[str], list[str]]:
    async def read() -> tuple[list[str], list[str]]:
        async with SessionStore.open(location) as store:
            return list(await store.backend.keys()), await store.transcript_storage().list_sessions()

    return anyio.run(read, backend="asyncio")


def test_delete_archives_a_directory_transcript(tmp_path: Path) -> None:
    session_id = _seed(tmp_path)
    code, out = cli_output("sessions", "delete", "--store", str(tmp_path), KEY, "--json")
    assert code == 0, out
    archives = list(tmp_path.glob(f"{session_id}.jsonl.deleted.*"))
    assert len(archives) == 1
    assert json.loads(out) == {
        "key": KEY,
        "deleted": True,
        "backend": "json",
        "transcript": {"outcome": "archived", "path": str(archives[0])},
    }
    assert _sessions(tmp_path) == ([], [])


def test_delete_removes_a_database_transcript(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    url = f"{dsn}?schema={schema}"
    _seed(url)
    code, out = cli_output("sessions", "delete", "--store", url, KEY, "--json")
    assert code == 0, out
    assert json.loads(out)["transcript"]["outcome"] == "removed"
    assert {k: v for k, v in json.loads(out).items() if k != "transcript"} == {
        "key": KEY,
        "deleted": True,
        "backend": "postgres",
    }
    assert _sessions(url) == ([], [])
    # deleted for good, as docs/postgres.md and the help say: no `deleted` archive to recover
    assert _archives(url) == []
    code, out = cli_output("sessions", "delete", "--help")
    assert "deleted for good" in " ".join(out.split())


def _archives(location: str) -> list[str]:
    async def read() -> list[str]:
        async with SessionStore.open(location) as store:
            storage = store.transcript_storage()
            assert isinstance(storage, ArchivingTranscriptStorage)
            return [archive.name for archive in await storage.list_archives()]

    return anyio.run(read, backend="asyncio")


def test_keep_transcript_leaves_it(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    url = f"{dsn}?schema={schema}"
    session_id = _seed(url)
    code, out = cli_output("sessions", "delete", "--store", url, KEY, "--keep-transcript", "--json")
    assert code == 0, out
    assert json.loads(out)["transcript"]["outcome"] == "kept"
    assert _sessions(url) == ([], [session_id])


def test_an_unknown_key_exits_1(tmp_path: Path) -> None:
    _seed(tmp_path)
    result = run_cli("sessions", "delete", "--store", str(tmp_path), "agent:main:nope")
    assert result.exit_code == 1
    assert result.stderr.startswith("sessionkeeper: error: no session for key 'agent:main:nope'")
    code, out = cli_output("sessions", "delete", "--store", str(tmp_path), "agent:main:nope", "--json")
    assert code == 1 and json.loads(out) == {"key": "agent:main:nope", "deleted": False, "backend": "json"}
    assert _sessions(tmp_path)[0] == [KEY]
