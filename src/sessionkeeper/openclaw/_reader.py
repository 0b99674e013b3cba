"""
Read an OpenClaw 2026.8+ agent database (``agents/<agentId>/agent/openclaw-agent.sqlite``), read-only.

What is read, and why it equals OpenClaw 2026.9.6's own legacy bridge (``loadSessionStore`` +
``resolveSessionFilePath``, ``../shared/tools/openclaw9-oracle/export-legacy.mjs``):

- **Sessions**: ``session_nodes`` rows ordered by ``session_key`` (byte order); the entry is
  ``JSON.parse(entry_json)``; keys of internal run-effects sessions
  (``agent:<id>:internal-session-effects:…``, ``isInternalSessionEffectsKey``) are hidden, as OpenClaw's
  listing hides them.
- **Transcripts**: the ``transcript_events`` rows of the entry's *current* generation
  (``session_nodes.current_session_id``) in ``seq`` order. Schema 23 keeps a row either as ``event_json``
  text or as ``event_zstd`` (zstd, checked against ``event_utf8_bytes``), which is what OpenClaw's
  ``coalesce(event_json, openclaw_transcript_payload_decode(...))`` reads. Schemas 14-22 have text only.

The file is opened with SQLite's URI ``mode=ro``; when no ``-wal`` file lies beside it, also
``immutable=1``, so that not even ``-shm``/``-wal`` files are created next to it. With a ``-wal`` file
present the connection must read it, and SQLite may then create the ``-shm`` index (never the database).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import attrs

from sessionkeeper.exceptions import OpenClawDatabaseError, UnsupportedSchemaVersionError
from sessionkeeper.openclaw._zstd import ZstdUnavailableError, zstd_decompress


__all__ = (
    "SUPPORTED_SCHEMA_VERSIONS",
    "AgentDatabase",
    "AgentSession",
    "read_agent_database",
)

SUPPORTED_SCHEMA_VERSIONS: tuple[int, ...] = tuple(range(14, 24))
"""
Agent schema versions read: 14 (``session_nodes``/``session_windows`` replace ``sessions``, OpenClaw's
``SESSION_NODE_SCHEMA_VERSION``) to 23 (OpenClaw 2026.9.6's ``OPENCLAW_AGENT_SCHEMA_VERSION``, which adds
zstd rows). Older databases predate the session tables: OpenClaw's own ``doctor --fix`` migrates them.
"""

_INTERNAL_SEGMENT = "internal-session-effects:"


@attrs.frozen(kw_only=True)
class AgentSession:
    """
    One ``session_nodes`` row with its current transcript.

    Attributes:
        key: The session key (``agent:main:main``).
        session_id: ``current_session_id``: the current generation, whose rows are ``lines``.
        entry: The SessionEntry as stored (``JSON.parse(entry_json)``), key order kept.
        lines: The transcript records of the current generation in ``seq`` order, each the exact stored
            JSON text (decompressed when it was stored as zstd). Empty when there are no rows.
    """

    key: str
    session_id: str
    entry: dict[str, Any]
    lines: tuple[str, ...]


@attrs.frozen(kw_only=True)
class AgentDatabase:
    """
    What :func:`read_agent_database` read.

    Attributes:
        path: The database file.
        schema_version: ``PRAGMA user_version`` (one of :data:`SUPPORTED_SCHEMA_VERSIONS`).
        agent_id: ``schema_meta.agent_id`` of the ``primary`` row, or ``None`` when absent.
        app_version: ``schema_meta.app_version`` (the OpenClaw release that last migrated it), or ``None``.
        sessions: The visible sessions, ordered by key.
        compressed_rows: How many of the rows read were stored as zstd.
    """

    path: Path
    schema_version: int
    agent_id: str | None
    app_version: str | None
    sessions: tuple[AgentSession, ...]
    compressed_rows: int


def _uri(path: Path, *, immutable: bool) -> str:
    return f"file:{quote(str(path.resolve()))}?mode=ro" + ("&immutable=1" if immutable else "")


@contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    if not path.is_file():
        raise OpenClawDatabaseError("no such database file", path=path)
    immutable = not Path(f"{path}-wal").exists()
    try:
        connection = sqlite3.connect(_uri(path, immutable=immutable), uri=True)
    except sqlite3.Error as err:
        raise OpenClawDatabaseError(f"cannot open: {err}", path=path) from err
    try:
        connection.execute("PRAGMA query_only = ON")
        connection.text_factory = bytes
        yield connection
    finally:
        connection.close()


def _columns(connection: sqlite3.Connection, table: str) -> set[str]:
    return {row[1].decode() for row in connection.execute(f"PRAGMA table_info({table})")}


def _text(value: object, *, path: Path, where: str, column: str) -> str:
    if not isinstance(value, bytes):
        raise OpenClawDatabaseError(f"{column} is {type(value).__name__}, not text", path=path, where=where)
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as err:
        raise OpenClawDatabaseError(f"{column} is not UTF-8 ({err.reason})", path=path, where=where) from err


def _schema_meta(connection: sqlite3.Connection) -> tuple[str | None, str | None]:
    if not _columns(connection, "schema_meta") >= {"meta_key", "agent_id", "app_version"}:
        return None, None
    row = connection.execute(
        "SELECT agent_id, app_version FROM schema_meta WHERE meta_key = 'primary'"
    ).fetchone()
    if row is None:
        return None, None
    return tuple(v.decode("utf-8", "replace") if isinstance(v, bytes) else None for v in row)  # type: ignore[return-value]


def _decode_row(
    row: tuple[object, object, object, object], *, path: Path, where: str, has_zstd: bool
) -> tuple[str, bool]:
    """The stored JSON text of one ``transcript_events`` row, and whether it was compressed."""
    _seq, event_json, event_zstd, utf8_bytes = row
    if event_json is not None:
        if has_zstd and event_zstd is not None:
            raise OpenClawDatabaseError("both event_json and event_zstd are set", path=path, where=where)
        text = _text(event_json, path=path, where=where, column="event_json")
        compressed = False
    elif has_zstd and isinstance(event_zstd, bytes) and isinstance(utf8_bytes, int):
        try:
            raw = zstd_decompress(event_zstd, utf8_bytes)
        except ZstdUnavailableError as err:
            raise OpenClawDatabaseError(str(err), path=path, where=where) from err
        except ValueError as err:
            raise OpenClawDatabaseError(f"event_zstd does not decode: {err}", path=path, where=where) from err
        if len(raw) != utf8_bytes:
            raise OpenClawDatabaseError(
                f"event_zstd decodes to {len(raw)} bytes, event_utf8_bytes says {utf8_bytes}",
                path=path,
                where=where,
            )
        text = _text(raw, path=path, where=where, column="event_zstd")
        compressed = True
    else:
        raise OpenClawDatabaseError(
            "no event payload (event_json and event_zstd unusable)", path=path, where=where
        )
    try:
        json.loads(text)
    except ValueError as err:
        raise OpenClawDatabaseError(f"stored event is not JSON ({err})", path=path, where=where) from err
    return text, compressed


def _entry(value: object, *, path: Path, where: str) -> dict[str, Any]:
    text = _text(value, path=path, where=where, column="entry_json")
    try:
        entry = json.loads(text)
    except ValueError as err:
        raise OpenClawDatabaseError(f"entry_json is not JSON ({err})", path=path, where=where) from err
    if not isinstance(entry, dict):
        raise OpenClawDatabaseError("entry_json is not a JSON object", path=path, where=where)
    return entry


def _is_internal_key(key: str) -> bool:
    """OpenClaw's ``isInternalSessionEffectsKey`` (``src/config/sessions/internal-session-key.ts``)."""
    if not key.startswith("agent:"):
        return False
    agent_end = key.find(":", 6)
    return agent_end >= 0 and key.startswith(_INTERNAL_SEGMENT, agent_end + 1)


def _version(connection: sqlite3.Connection, path: Path) -> int:
    try:
        version = int(connection.execute("PRAGMA user_version").fetchone()[0])
        tables = {
            row[0].decode()
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
    except sqlite3.DatabaseError as err:
        raise OpenClawDatabaseError(f"not a readable SQLite database ({err})", path=path) from err
    if version == 0 and not {"session_nodes", "sessions", "session_entries"} & tables:
        raise OpenClawDatabaseError("not an OpenClaw agent database (no session tables)", path=path)
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        raise UnsupportedSchemaVersionError(path=path, version=version, supported=SUPPORTED_SCHEMA_VERSIONS)
    missing = {"session_nodes", "transcript_events"} - tables
    if missing:
        raise OpenClawDatabaseError(
            f"schema {version} without table(s) {', '.join(sorted(missing))}", path=path
        )
    return version


def read_agent_database(path: Path | str) -> AgentDatabase:
    """
    Read every visible session of an OpenClaw agent database, with its current transcript rows.

    The database is opened read-only (see the module docstring) and never written.

    Args:
        path: ``openclaw-agent.sqlite`` (any schema in :data:`SUPPORTED_SCHEMA_VERSIONS`).

    Returns:
        The sessions ordered by key, each with its entry and its transcript lines.

    Raises:
        UnsupportedSchemaVersionError: ``PRAGMA user_version`` is not in :data:`SUPPORTED_SCHEMA_VERSIONS`
            (it names the version).
        OpenClawDatabaseError: Not a SQLite file or not an agent database; a row that does not decode
            (``where`` names it); zstd rows while neither ``zstandard`` nor ``compression.zstd`` is
            installed (``pip install 'sessionkeeper[openclaw]'``).
    """
    path = Path(path)
    with _connect(path) as connection:
        version = _version(connection, path)
        try:
            return _read(connection, path, version)
        except sqlite3.DatabaseError as err:
            raise OpenClawDatabaseError(f"SQLite refused a read ({err})", path=path) from err


def _read(connection: sqlite3.Connection, path: Path, version: int) -> AgentDatabase:
    agent_id, app_version = _schema_meta(connection)
    has_zstd = {"event_zstd", "event_utf8_bytes"} <= _columns(connection, "transcript_events")
    payload = "event_zstd, event_utf8_bytes" if has_zstd else "NULL, NULL"
    rows_sql = f"SELECT seq, event_json, {payload} FROM transcript_events WHERE session_id = ? ORDER BY seq"
    sessions: list[AgentSession] = []
    compressed_rows = 0
    nodes = connection.execute(
        "SELECT session_key, current_session_id, entry_json FROM session_nodes ORDER BY session_key"
    ).fetchall()
    for raw_key, raw_session_id, entry_json in nodes:
        key = _text(raw_key, path=path, where="session_nodes", column="session_key")
        where = f"session_nodes {key!r}"
        if _is_internal_key(key):
            continue
        session_id = _text(raw_session_id, path=path, where=where, column="current_session_id")
        entry = _entry(entry_json, path=path, where=where)
        lines: list[str] = []
        for row in connection.execute(rows_sql, (session_id,)):
            row_where = f"transcript_events {session_id!r} seq {row[0]}"
            text, compressed = _decode_row(row, path=path, where=row_where, has_zstd=has_zstd)
            compressed_rows += compressed
            lines.append(text)
        sessions.append(AgentSession(key=key, session_id=session_id, entry=entry, lines=tuple(lines)))
    return AgentDatabase(
        path=path,
        schema_version=version,
        agent_id=agent_id,
        app_version=app_version,
        sessions=tuple(sessions),
        compressed_rows=compressed_rows,
    )
