"""
``sessions delete`` and ``status`` on a store URL whose transcripts are files (breakit M3): a Redis store, or
a PostgreSQL store imported with ``--transcripts-dir``. Given ``--transcripts-dir``, delete archives the file
as a sessions directory does (``<file>.deleted.<stamp>``) and status shows it; without it both say that the
store does not hold the transcript, and the file is left as it is (never silently orphaned).
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from tests._helpers import cli_output, run_cli
from tests._servers import pg_schema, redis_prefix

from sessionkeeper.store import SessionStore


__all__ = ("pg_schema", "redis_prefix")

KEY = "agent:main:direct:old"
HEADER = b'{"type":"session","version":3,"id":"x","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}'


def _url(kind: str, pg_schema: tuple[str, str], redis_prefix: tuple[str, str]) -> str:
    if kind == "postgres":
        dsn, schema = pg_schema
        return f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"
    url, prefix = redis_prefix
    return f"{url}{'&' if '?' in url else '?'}prefix={prefix}"


def _seed(url: str, transcripts: Path) -> Path:
    """An entry in the store ``url``; its transcript a file in ``transcripts`` (import --transcripts-dir)."""

    async def seed() -> Path:
        async with SessionStore.open(url, transcripts_dir=transcripts) as store:
            entry = await store.patch(KEY, label="old")
            await store.transcript_storage().create(str(entry.session_id), [HEADER])
            return transcripts / f"{entry.session_id}.jsonl"

    return anyio.run(seed, backend="asyncio")


def _keys(url: str) -> list[str]:
    async def read() -> list[str]:
        async with SessionStore.open(url) as store:
            return list(await store.backend.keys())

    return anyio.run(read, backend="asyncio")


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_delete_with_the_transcripts_dir_archives_the_file(
    kind: str, tmp_path: Path, pg_schema: tuple[str, str], redis_prefix: tuple[str, str]
) -> None:
    url = _url(kind, pg_schema, redis_prefix)
    transcript = _seed(url, tmp_path)
    code, out = cli_output("status", "--store", url, "--transcripts-dir", str(tmp_path), KEY, "--json")
    assert code == 0, out
    shown = json.loads(out)
    assert shown["transcript"] == {"path": str(transcript), "exists": True, "bytes": len(HEADER) + 1}
    assert "transcriptNote" not in shown
    given = ("--store", url, "--transcripts-dir", str(tmp_path))
    code, out = cli_output("sessions", "delete", *given, KEY, "--json")
    assert code == 0, out
    archives = list(tmp_path.glob(f"{transcript.name}.deleted.*"))
    assert len(archives) == 1 and archives[0].read_bytes() == HEADER + b"\n"
    assert not transcript.exists()
    assert json.loads(out) == {
        "key": KEY,
        "deleted": True,
        "backend": kind,
        "transcript": {"outcome": "archived", "path": str(archives[0])},
    }
    assert _keys(url) == []


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_without_the_transcripts_dir_delete_and_status_say_the_store_does_not_hold_it(
    kind: str, tmp_path: Path, pg_schema: tuple[str, str], redis_prefix: tuple[str, str]
) -> None:
    url = _url(kind, pg_schema, redis_prefix)
    transcript = _seed(url, tmp_path)
    session_id = transcript.name.removesuffix(".jsonl")
    code, out = cli_output("status", "--store", url, KEY, "--json")
    assert code == 0, out
    note = json.loads(out)["transcriptNote"]
    assert note.endswith("if its transcripts are files, give their directory with --transcripts-dir")
    code, out = cli_output("status", "--store", url, KEY)
    assert code == 0 and "not found: " in out and "--transcripts-dir" in out
    code, out = cli_output("sessions", "delete", "--store", url, KEY, "--json")
    assert code == 0, out
    assert json.loads(out)["transcript"] == {
        "outcome": "notFound",
        "path": None,
        "sessionId": session_id,
        "note": note,
    }
    assert transcript.read_bytes() == HEADER + b"\n"  # left as it is, and said so
    assert _keys(url) == []


def test_delete_says_in_text_which_transcript_it_left(tmp_path: Path, redis_prefix: tuple[str, str]) -> None:
    url = _url("redis", ("", ""), redis_prefix)
    transcript = _seed(url, tmp_path)
    code, out = cli_output("sessions", "delete", "--store", url, KEY)
    assert code == 0, out
    session_id = transcript.name.removesuffix(".jsonl")
    assert f"deleted {KEY}" in out
    assert f"transcript of session {session_id} left as it is: this store keeps no transcripts" in out


def test_the_transcripts_dir_is_refused_beside_a_sessions_directory(tmp_path: Path) -> None:
    for command in (("status",), ("sessions", "delete")):
        result = run_cli(*command, "--store", str(tmp_path), "--transcripts-dir", str(tmp_path), KEY)
        assert result.exit_code == 2
        assert "--transcripts-dir is for store URLs" in result.stderr
