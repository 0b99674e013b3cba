"""
``sessionkeeper status --store postgresql://...`` shows the session's transcript held in the database
(issue 13) as it shows a sessions directory's file: where it is, its lines and bytes, or missing.
The real server, one schema per test.
"""

from __future__ import annotations

import json

import anyio
from tests._helpers import cli_output
from tests._servers import pg_schema

from sessionkeeper.store import SessionStore


__all__ = ("pg_schema",)

HEADER = b'{"type":"session","version":3,"id":"x","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}'
LINE = b'{"type":"custom","id":"e1","parentId":null,"customType":"note"}'


def _seed(url: str, *, transcript: bool) -> str:
    async def seed() -> str:
        async with SessionStore.open(url) as store:
            entry = await store.patch("agent:main:main", label="Main")
            session_id = str(entry.session_id)
            if transcript:
                await store.transcript_storage().create(session_id, [HEADER, LINE])
            return session_id

    return anyio.run(seed, backend="asyncio")


def test_status_shows_a_transcript_held_in_the_database(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    url = f"{dsn}?schema={schema}&store=agent-main"
    session_id = _seed(url, transcript=True)
    code, out = cli_output("status", "--store", url, "agent:main:main", "--json")
    assert code == 0, out
    transcript = json.loads(out)["transcript"]
    assert transcript == {
        "path": f"postgresql:{schema}.sk_transcripts[agent-main]/{session_id}",
        "exists": True,
        "bytes": len(HEADER) + len(LINE) + 2,
        "lines": 2,
    }
    code, out = cli_output("status", "--store", url, "agent:main:main")
    assert code == 0, out
    assert f"{session_id} (2 lines, {len(HEADER) + len(LINE) + 2} bytes)" in out.replace("\n", "")


def test_status_says_a_missing_database_transcript_is_missing(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    url = f"{dsn}?schema={schema}"
    _seed(url, transcript=False)
    code, out = cli_output("status", "--store", url, "agent:main:main", "--json")
    assert code == 0, out
    transcript = json.loads(out)["transcript"]
    assert (transcript["exists"], transcript["bytes"], transcript["lines"]) == (False, None, None)
    code, out = cli_output("status", "--store", url, "agent:main:main")
    assert "(missing)" in out
