"""
The PostgreSQL store's schema and connection set-up: the queries on ``sk_sessions``, the
row values a write stores (the maintenance columns are the planner's own rules), and the probe of a URL
before the pool opens. :class:`~sessionkeeper.store.PostgresStoreBackend` runs them on its pool.

Schema (created and migrated by ``_postgres_migrations`` in ``schema``, default ``sessionkeeper``)::

    CREATE TABLE sk_migrations (               -- one row per applied migration, forward-only
        version    integer PRIMARY KEY,
        name       text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now());
    CREATE TABLE sk_sessions (                 -- the sessions.json equivalent
        store_id    text   NOT NULL,           -- one store per agent / tenant; many share the table
        session_key text   NOT NULL,
        seq         bigint GENERATED ALWAYS AS IDENTITY,   -- insertion order
        revision    bigint NOT NULL DEFAULT 1, -- compare-and-swap counter, never a timestamp
        entry_text  text   NOT NULL,           -- the exact JSON object text (byte-exact round trip)
        entry       jsonb,                     -- the same object for queries (NULL if jsonb cannot hold it)
        session_id  text,                      -- the entry's sessionId, written by the library (migration
                                               -- 6; was GENERATED from entry ->> 'sessionId': NULL
                                               -- when entry is NULL)
        created_at  timestamptz NOT NULL DEFAULT now(),
        modified_at timestamptz NOT NULL DEFAULT now(),
        key_folded   text,                     -- migration 2: the maintenance planner's verdicts,
        updated_at   numeric,                  -- written with every row (RowValues), backfilled once;
        is_main      boolean,                  -- read by the set-based maintenance
        is_protected boolean,                  -- (maintenance/_postgres.py)
        is_model_run boolean,
        PRIMARY KEY (store_id, session_key));
    CREATE INDEX sk_sessions_order ON sk_sessions (store_id, seq);
    CREATE INDEX sk_sessions_session_id ON sk_sessions (store_id, session_id);
    CREATE INDEX sk_sessions_updated ON sk_sessions (store_id, updated_at);
    -- migration 3: transcripts (PostgresTranscriptStorage, _postgres_transcripts)
    CREATE TABLE sk_transcripts (              -- one head row per transcript: its mark
        store_id    text   NOT NULL,
        session_id  text   NOT NULL,
        generation  bigint GENERATED ALWAYS AS IDENTITY,  -- tells a re-created transcript apart
        line_count  bigint NOT NULL,           -- complete lines (the header is line 0)
        byte_size   bigint NOT NULL,           -- their bytes, each with its newline
        created_at  timestamptz NOT NULL DEFAULT now(),
        updated_at  timestamptz NOT NULL DEFAULT now(),
        expires_at  timestamptz,               -- retention: swept once past (NULL: kept)
        PRIMARY KEY (store_id, session_id));
    CREATE TABLE sk_transcript_lines (         -- the lines, exact bytes, in file order
        store_id text, session_id text, seq bigint,        -- seq: 0-based line number
        line bytea NOT NULL,
        entry_type text, entry_id text, parent_id text,    -- read from the line's JSON (NULL if none)
        PRIMARY KEY (store_id, session_id, seq),
        FOREIGN KEY (store_id, session_id) REFERENCES sk_transcripts ON DELETE CASCADE);
    CREATE INDEX sk_transcript_lines_entry ON sk_transcript_lines (store_id, session_id, entry_id);
    CREATE INDEX sk_transcript_lines_parent ON sk_transcript_lines (store_id, session_id, parent_id);
    CREATE INDEX sk_transcript_lines_compaction ON sk_transcript_lines (store_id, session_id, seq)
        WHERE entry_type = 'compaction';
    CREATE TABLE sk_transcript_keys (          -- idempotency keys: key -> the mark after its append
        store_id text, session_id text, idem_key bytea,
        line_count bigint, byte_size bigint, generation bigint,
        PRIMARY KEY (store_id, session_id, idem_key), FOREIGN KEY ... ON DELETE CASCADE);
    -- migration 5: ALTER TABLE sk_sessions ADD COLUMN expires_at timestamptz (ttl_s; NULL: kept),
    --   CREATE INDEX sk_sessions_expires ON sk_sessions (store_id, expires_at) WHERE expires_at IS NOT NULL
    -- migration 4: archives (_postgres_transcript_archives); both foreign keys gain ON UPDATE CASCADE
    ALTER TABLE sk_transcripts ADD COLUMN archived_at timestamptz,  -- NULL: live
        ADD COLUMN archive_reason text,        -- "reset" or "deleted"
        ADD COLUMN archived_from text;         -- the session id (session_id is now <id>/<reason>/<stamp>)
    CREATE INDEX sk_transcripts_archived ON sk_transcripts (store_id, archived_at)
        WHERE archived_at IS NOT NULL;
    -- migration 6: ALTER TABLE sk_sessions ALTER COLUMN session_id DROP EXPRESSION (values kept), then
    --   the rows whose entry is NULL get their id decoded from entry_text (backfill_session_ids); two
    --   BEFORE triggers fill it from jsonb for a version-5 writer that leaves it NULL / unchanged
"""

from __future__ import annotations

import asyncio
import math
import re
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

import attrs

from sessionkeeper.exceptions import (
    ConfigError,
    SessionBusyError,
    StoreUnavailableError,
)
from sessionkeeper.store._entry import SessionEntry, session_entry_to_dict
from sessionkeeper.store._entry_shape import updated_at_of
from sessionkeeper.store._keys import (
    is_main_session_key,
    is_model_run_session_key,
    is_protected_session_entry,
)
from sessionkeeper.store._remote import check_key, encode_entry_text, redact_url


if TYPE_CHECKING:
    pass


__all__ = (
    "MAX_KEY_BYTES",
    "MAX_STORE_ID_BYTES",
    "QUERIES",
    "SCHEMA_NAME",
    "RowValues",
    "build_queries",
    "busy_or_unreachable",
    "check_pg_key",
    "one_line",
    "probe",
    "session_id_of",
)

SCHEMA_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
"""A schema name the backend accepts (an unquoted PostgreSQL identifier, at most 63 bytes)."""

QUERIES: Final[dict[str, str]] = {
    "all": "SELECT session_key, entry_text FROM {t} WHERE store_id = %s ORDER BY seq",
    "all_locked": (
        "SELECT session_key, entry_text, revision FROM {t} WHERE store_id = %s ORDER BY seq FOR UPDATE"
    ),
    "keys": "SELECT session_key FROM {t} WHERE store_id = %s ORDER BY seq",
    "get": "SELECT entry_text, revision FROM {t} WHERE store_id = %s AND session_key = %s",
    "get_locked": (
        "SELECT entry_text, revision FROM {t} WHERE store_id = %s AND session_key = %s FOR UPDATE"
    ),
    "insert": (
        "INSERT INTO {t} (store_id, session_key, entry_text, entry, updated_at, is_protected, session_id, "
        "key_folded, is_main, is_model_run, expires_at) VALUES (%s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, "
        "%s, now() + %s::interval) ON CONFLICT (store_id, session_key) DO NOTHING RETURNING revision"
    ),
    "cas": (
        "UPDATE {t} SET entry_text = %s, entry = %s::jsonb, updated_at = %s, is_protected = %s, "
        "session_id = %s, expires_at = now() + %s::interval, modified_at = now(), "
        "revision = revision + CASE WHEN entry_text = %s THEN 0 ELSE 1 END "
        "WHERE store_id = %s AND session_key = %s AND revision = %s RETURNING revision"
    ),
    "cas_lazy": (  # "cas" committing without waiting for its WAL flush (LazyStampBackend)
        "UPDATE {t} SET entry_text = %s, entry = %s::jsonb, updated_at = %s, is_protected = %s, "
        "session_id = %s, expires_at = now() + %s::interval, modified_at = now(), "
        "revision = revision + CASE WHEN entry_text = %s THEN 0 ELSE 1 END "
        "WHERE store_id = %s AND session_key = %s AND revision = %s "
        "RETURNING revision, set_config('synchronous_commit', 'off', true)"
    ),
    "delete": "DELETE FROM {t} WHERE store_id = %s AND session_key = %s",
    "delete_many": "DELETE FROM {t} WHERE store_id = %s AND session_key = ANY(%s)",
}
"""The statements on ``sk_sessions`` by name; ``{t}`` is the schema-qualified table."""


def build_queries(sql: Any, schema: str) -> dict[str, Any]:
    """:data:`QUERIES` composed for ``schema`` (``sql`` is ``psycopg.sql``)."""
    table = sql.Identifier(schema, "sk_sessions")
    return {name: sql.SQL(text).format(t=table) for name, text in QUERIES.items()}


@attrs.frozen
class RowValues:
    """
    What one row write stores: the text, its ``jsonb`` copy, the maintenance columns and the session id
    (never read from ``jsonb``, which is ``NULL`` for an entry it cannot hold: migration 6).
    """

    text: str
    jsonb: str | None
    entry_columns: tuple[Decimal | int | None, bool, str | None]  # updated_at, is_protected, session_id
    key_columns: tuple[str, bool, bool]  # key_folded, is_main, is_model_run (from the key)

    @classmethod
    def of(cls, session_key: str, entry: SessionEntry) -> RowValues:
        """
        The row of ``entry``. The maintenance columns are the planner's own rules (``updated_at_of``,
        ``is_protected_session_entry``, ``is_main_session_key``, ``is_model_run_session_key``, Python's
        ``str.lower``), so the set-based maintenance selects exactly what the Python plan would; the
        session id is the entry's ``session_id`` (``None`` when unset).
        """
        text, jsonb_ok = encode_entry_text(entry)
        raw = session_entry_to_dict(entry)
        updated = updated_at_of(raw)
        exact: Decimal | int | None = Decimal(updated) if isinstance(updated, float) else updated
        return cls(
            text=text,
            jsonb=text if jsonb_ok else None,
            entry_columns=(exact, is_protected_session_entry(session_key, raw), session_id_of(entry)),
            key_columns=(
                session_key.lower(),
                is_main_session_key(session_key),
                is_model_run_session_key(session_key),
            ),
        )


def session_id_of(entry: SessionEntry) -> str | None:
    """The ``session_id`` column of ``entry``: its ``sessionId`` (``None`` when unset)."""
    return entry.session_id if isinstance(entry.session_id, str) else None


async def probe(dsn: str, *, application_name: str, connect_timeout_s: float) -> None:
    """
    One direct connection before the pool opens, so a bad URL or an unreachable server fails at once
    with its real cause instead of the pool retrying (and logging each failure) for
    ``connect_timeout_s`` and then saying only "cannot reach" (issue 15, CLI tester).

    Raises:
        ConfigError: libpq refuses the connection string (an unknown parameter such as ``bogus=1``).
        ConfigError: The server refused us: authentication failed, no such role or database, no
            ``pg_hba.conf`` entry (a retry cannot help).
        StoreUnavailableError: The connection failed otherwise (refused, timed out), with libpq's
            message; bounded by ``connect_timeout_s`` (libpq's ``connect_timeout`` in the URL, when
            given, bounds each attempt too).
    """
    import psycopg  # noqa: PLC0415 - the optional extra, imported on first use
    from psycopg.conninfo import conninfo_to_dict  # noqa: PLC0415 - the optional extra

    where = redact_url(dsn)
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as err:
        raise ConfigError(f"invalid PostgreSQL URL {where}: {err}") from None
    options: dict[str, Any] = {"autocommit": True, "application_name": application_name}
    if "connect_timeout" not in params:
        options["connect_timeout"] = max(2, math.ceil(connect_timeout_s))
    try:
        async with asyncio.timeout(connect_timeout_s + 1):
            conn = await psycopg.AsyncConnection.connect(dsn, **options)
    except TimeoutError:
        raise StoreUnavailableError(
            f"cannot reach PostgreSQL at {where} within {connect_timeout_s} s"
        ) from None
    except psycopg.ProgrammingError as err:
        raise ConfigError(f"invalid PostgreSQL URL {where}: {one_line(err)}") from None
    except psycopg.Error as err:
        if _REFUSED.search(str(err)):  # the server answered: who or what we asked for is wrong
            raise ConfigError(f"PostgreSQL at {where} refused the connection: {one_line(err)}") from None
        raise StoreUnavailableError(f"cannot reach PostgreSQL at {where}: {one_line(err)}") from None
    await conn.close()


_REFUSED: Final = re.compile(
    r"FATAL:.*(authentication failed|role .* does not exist|database .* does not exist"
    r"|no pg_hba\.conf entry|permission denied|password)",
    re.DOTALL,
)
"""libpq's messages for a refusal a retry cannot cure (class 28 / 3D / 42501; libpq gives no SQLSTATE)."""

MAX_KEY_BYTES: Final = 2048
"""The longest session key (UTF-8 bytes): with the store id it must fit a btree entry (2704 bytes)."""

MAX_STORE_ID_BYTES: Final = 512
"""The longest store id (UTF-8 bytes), for the same reason."""


def check_pg_key(key: object) -> None:
    """
    Raises:
        InvalidSessionEntryError: ``key`` holds a NUL or a lone surrogate, or is over
            :data:`MAX_KEY_BYTES` bytes in UTF-8 (PostgreSQL cannot index it).
    """
    check_key(key, nul_ok=False, backend="PostgreSQL", max_bytes=MAX_KEY_BYTES)


async def busy_or_unreachable(dsn: str | None, *, where: str, waited_s: float, detail: str) -> Exception:
    """
    The error for a pool that gave no connection within ``waited_s`` seconds: one direct connection
    attempt (bounded by ``min(waited_s, 2)`` s; none when the pool was given without a URL) tells a
    server that cannot be reached (``StoreUnavailableError``) or refuses us (``ConfigError``, returned
    as is) from a pool whose connections are all busy (``SessionBusyError``, naming ``detail``).
    """
    if dsn is not None:
        try:
            await probe(dsn, application_name="sessionkeeper-probe", connect_timeout_s=min(waited_s, 2.0))
        except (StoreUnavailableError, ConfigError) as err:
            return err
    return SessionBusyError(detail, path=where, waited_ms=waited_s * 1000)


def one_line(err: BaseException) -> str:
    """libpq's message on one line (it adds a hint line after a tab: "Is the server running ...")."""
    return " ".join(str(err).split()) or type(err).__name__
