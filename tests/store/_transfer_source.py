"""
A sessions directory to copy (``tests/store/test_store_transfer*.py``): five sessions written by the
library (a plain transcript with a line that is not JSON and one that is not UTF-8, an absolute
``sessionFile``, a topic and a fork file, one without a transcript), a file no entry names and an archive.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
from tests._helpers import header_obj, json_line, user_entry

from sessionkeeper.store import CopyReport, PostgresStoreBackend, PostgresTranscriptStorage, SessionStore


SID = (f"0190a1b2-0000-7000-8000-00000000000{i}" for i in range(10))
PLAIN, ABSOLUTE, TOPIC, FORK, NO_FILE = (next(SID) for _ in range(5))
FORK_NAME = f"2026-09-20T14-13-48-902Z_{FORK}.jsonl"


def transcript_bytes(sid: str, *extra: bytes) -> bytes:
    lines = [
        json_line(header_obj(sid)),
        json_line(user_entry("e1", None, "hello é ✓")),
        json_line(user_entry("e2", "e1", "x" * 300), ensure_ascii=False),
        *extra,
    ]
    return b"".join(line + b"\n" for line in lines)


def files_of(directory: Path) -> dict[str, bytes]:
    """The files of ``directory`` (lock files aside) and their bytes."""
    return {
        path.name: path.read_bytes()
        for path in sorted(directory.iterdir())
        if path.is_file() and not path.name.endswith(".lock")
    }


def snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {
        path.name: (path.read_bytes(), path.stat().st_mtime_ns)
        for path in sorted(directory.iterdir())
        if path.is_file()
    }


def lay_out(directory: Path) -> None:
    """The transcripts of :func:`_source`, an unnamed one and an archive."""
    directory.mkdir()
    files = {
        f"{PLAIN}.jsonl": transcript_bytes(PLAIN, b"not json at all {", b"", "ünïcode ✓".encode()),
        f"{ABSOLUTE}.jsonl": transcript_bytes(ABSOLUTE, b"\xff\xfe raw bytes"),
        f"{TOPIC}-topic-42.jsonl": transcript_bytes(TOPIC),
        FORK_NAME: transcript_bytes(FORK),
        "0190a1b2-ffff-7000-8000-000000000000.jsonl": transcript_bytes("orphan"),
        f"{PLAIN}.jsonl.reset.2026-01-01T00-00-00.000Z": b"archived\n",
    }
    for name, data in files.items():
        (directory / name).write_bytes(data)


async def make_source(directory: Path, *, absolute: bool = False) -> Path:
    """A sessions directory written by the library: five sessions, one file no entry names."""
    lay_out(directory)
    async with SessionStore.open(directory) as store:
        await store.patch("agent:main:main", session_id=PLAIN, label="Main")
        absolute_file = str(directory / f"{ABSOLUTE}.jsonl") if absolute else f"{ABSOLUTE}.jsonl"
        await store.patch("agent:main:abs", session_id=ABSOLUTE, session_file=absolute_file)
        await store.patch(
            "agent:main:telegram:group:1:topic:42",
            {"extraFieldKept": {"nested": [1, 2.5, "x"]}},
            session_id=TOPIC,
            session_file=f"{TOPIC}-topic-42.jsonl",
        )
        await store.patch("agent:main:fork", session_id=FORK, session_file=FORK_NAME)
        await store.patch("agent:main:empty", session_id=NO_FILE)
    return directory


def sessions_json(directory: Path) -> dict[str, bytes]:
    """Each entry of the directory's ``sessions.json`` as its exact JSON text."""
    raw = msgspec.json.decode((directory / "sessions.json").read_bytes(), type=dict[str, msgspec.Raw])
    return {key: bytes(value) for key, value in raw.items()}


def outcomes(report: CopyReport) -> dict[str, str]:
    return {session.session_key: session.outcome for session in report.sessions}


def pg_store(dsn: str, schema: str) -> SessionStore:
    """
    Entries and transcripts in one PostgreSQL schema, from one URL (a new store object each time: opened,
    closed).
    """
    store = SessionStore.open(f"{dsn}?schema={schema}&store=moved")
    assert isinstance(store.backend, PostgresStoreBackend)
    assert isinstance(store.transcript_storage(), PostgresTranscriptStorage)
    return store
