"""
The PostgreSQL store's schema and connection set-up: the migrations, the queries on ``sk_sessions``, the
row values a write stores (the maintenance columns are the planner's own rules), and the probe of a URL
before the pool opens. :class:`~sessionkeeper.store.PostgresStoreBackend` runs them on its pool.

Schema (created and migrated by the library in ``schema``, default ``sessionkeeper``)::

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
        session_id  text GENERATED ALWAYS AS (entry ->> 'sessionId') STORED,
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
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

import attrs

from sessionkeeper.exceptions import (
    ConfigError,
    SessionBusyError,
    StoreCorruptError,
    StoreUnavailableError,
)
from sessionkeeper.store._entry import SessionEntry, session_entry_to_dict
from sessionkeeper.store._entry_shape import updated_at_of
from sessionkeeper.store._keys import (
    is_main_session_key,
    is_model_run_session_key,
    is_protected_session_entry,
)
from sessionkeeper.store._remote import check_key, decode_entry_text, encode_entry_text, redact_url


if TYPE_CHECKING:
    from psycopg import AsyncConnection


__all__ = (
    "MAX_KEY_BYTES",
    "MAX_STORE_ID_BYTES",
    "MIGRATIONS",
    "POSTGRES_SCHEMA_VERSION",
    "QUERIES",
    "SCHEMA_NAME",
    "RowValues",
    "backfill_maintenance_columns",
    "build_queries",
    "busy_or_unreachable",
    "check_not_newer",
    "check_pg_key",
    "migrate",
    "one_line",
    "probe",
    "schema_version",
)

_log = logging.getLogger("sessionkeeper.store")

SCHEMA_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
"""A schema name the backend accepts (an unquoted PostgreSQL identifier, at most 63 bytes)."""

MIGRATIONS: Final[tuple[tuple[int, str, tuple[str, ...]], ...]] = (
    (
        1,
        "session entries",
        (
            """
            CREATE TABLE {schema}.sk_sessions (
                store_id    text   NOT NULL,
                session_key text   NOT NULL,
                seq         bigint GENERATED ALWAYS AS IDENTITY,
                revision    bigint NOT NULL DEFAULT 1 CHECK (revision >= 1),
                entry_text  text   NOT NULL,
                entry       jsonb,
                session_id  text GENERATED ALWAYS AS (entry ->> 'sessionId') STORED,
                created_at  timestamptz NOT NULL DEFAULT now(),
                modified_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (store_id, session_key)
            )
            """,
            "CREATE INDEX sk_sessions_order ON {schema}.sk_sessions (store_id, seq)",
            "CREATE INDEX sk_sessions_session_id ON {schema}.sk_sessions (store_id, session_id)",
        ),
    ),
    (
        2,
        "maintenance columns",
        (
            """
            ALTER TABLE {schema}.sk_sessions
                ADD COLUMN key_folded   text,
                ADD COLUMN updated_at   numeric,
                ADD COLUMN is_main      boolean,
                ADD COLUMN is_protected boolean,
                ADD COLUMN is_model_run boolean
            """,
            "CREATE INDEX sk_sessions_updated ON {schema}.sk_sessions (store_id, updated_at)",
            # filled in by backfill_maintenance_columns (Python: the planner's own rules)
        ),
    ),
    (
        3,
        "transcripts",
        (
            """
            CREATE TABLE {schema}.sk_transcripts (
                store_id    text   NOT NULL,
                session_id  text   NOT NULL,
                generation  bigint GENERATED ALWAYS AS IDENTITY,
                line_count  bigint NOT NULL CHECK (line_count >= 0),
                byte_size   bigint NOT NULL CHECK (byte_size >= 0),
                created_at  timestamptz NOT NULL DEFAULT now(),
                updated_at  timestamptz NOT NULL DEFAULT now(),
                expires_at  timestamptz,
                PRIMARY KEY (store_id, session_id)
            )
            """,
            """
            CREATE INDEX sk_transcripts_expires ON {schema}.sk_transcripts (expires_at)
                WHERE expires_at IS NOT NULL
            """,
            """
            CREATE TABLE {schema}.sk_transcript_lines (
                store_id   text   NOT NULL,
                session_id text   NOT NULL,
                seq        bigint NOT NULL CHECK (seq >= 0),
                line       bytea  NOT NULL,
                entry_type text,
                entry_id   text,
                parent_id  text,
                PRIMARY KEY (store_id, session_id, seq),
                FOREIGN KEY (store_id, session_id) REFERENCES {schema}.sk_transcripts ON DELETE CASCADE
            )
            """,
            """
            CREATE INDEX sk_transcript_lines_entry ON {schema}.sk_transcript_lines
                (store_id, session_id, entry_id) WHERE entry_id IS NOT NULL
            """,
            """
            CREATE INDEX sk_transcript_lines_parent ON {schema}.sk_transcript_lines
                (store_id, session_id, parent_id) WHERE parent_id IS NOT NULL
            """,
            """
            CREATE INDEX sk_transcript_lines_compaction ON {schema}.sk_transcript_lines
                (store_id, session_id, seq) WHERE entry_type = 'compaction'
            """,
            """
            CREATE TABLE {schema}.sk_transcript_keys (
                store_id   text   NOT NULL,
                session_id text   NOT NULL,
                idem_key   bytea  NOT NULL,
                line_count bigint NOT NULL,
                byte_size  bigint NOT NULL,
                generation bigint NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (store_id, session_id, idem_key),
                FOREIGN KEY (store_id, session_id) REFERENCES {schema}.sk_transcripts ON DELETE CASCADE
            )
            """,
        ),
    ),
    (
        4,
        "transcript archives",
        (
            # an archive is its head row renamed <session id>/<reason>/<stamp> (no live id holds "/");
            # the lines and idempotency keys follow the rename (ON UPDATE CASCADE)
            """
            ALTER TABLE {schema}.sk_transcripts
                ADD COLUMN archived_at    timestamptz,
                ADD COLUMN archive_reason text,
                ADD COLUMN archived_from  text
            """,
            """
            CREATE INDEX sk_transcripts_archived ON {schema}.sk_transcripts (store_id, archived_at)
                WHERE archived_at IS NOT NULL
            """,
            """
            ALTER TABLE {schema}.sk_transcript_lines
                DROP CONSTRAINT sk_transcript_lines_store_id_session_id_fkey,
                ADD CONSTRAINT sk_transcript_lines_store_id_session_id_fkey FOREIGN KEY (store_id, session_id)
                    REFERENCES {schema}.sk_transcripts ON DELETE CASCADE ON UPDATE CASCADE
            """,
            """
            ALTER TABLE {schema}.sk_transcript_keys
                DROP CONSTRAINT sk_transcript_keys_store_id_session_id_fkey,
                ADD CONSTRAINT sk_transcript_keys_store_id_session_id_fkey FOREIGN KEY (store_id, session_id)
                    REFERENCES {schema}.sk_transcripts ON DELETE CASCADE ON UPDATE CASCADE
            """,
        ),
    ),
    (
        5,
        "entry expiry",
        (
            "ALTER TABLE {schema}.sk_sessions ADD COLUMN expires_at timestamptz",
            """
            CREATE INDEX sk_sessions_expires ON {schema}.sk_sessions (store_id, expires_at)
                WHERE expires_at IS NOT NULL
            """,
        ),
    ),
)

POSTGRES_SCHEMA_VERSION: Final = MIGRATIONS[-1][0]
"""The schema version this library writes (the highest ``sk_migrations.version``)."""

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
        "INSERT INTO {t} (store_id, session_key, entry_text, entry, updated_at, is_protected, "
        "key_folded, is_main, is_model_run, expires_at) VALUES (%s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, "
        "now() + %s::interval) ON CONFLICT (store_id, session_key) DO NOTHING RETURNING revision"
    ),
    "cas": (
        "UPDATE {t} SET entry_text = %s, entry = %s::jsonb, updated_at = %s, is_protected = %s, "
        "expires_at = now() + %s::interval, modified_at = now(), "
        "revision = revision + CASE WHEN entry_text = %s THEN 0 ELSE 1 END "
        "WHERE store_id = %s AND session_key = %s AND revision = %s RETURNING revision"
    ),
    "cas_lazy": (  # "cas" committing without waiting for its WAL flush (LazyStampBackend)
        "UPDATE {t} SET entry_text = %s, entry = %s::jsonb, updated_at = %s, is_protected = %s, "
        "expires_at = now() + %s::interval, modified_at = now(), "
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
    """What one row write stores: the text, its ``jsonb`` copy and the maintenance columns."""

    text: str
    jsonb: str | None
    entry_columns: tuple[Decimal | int | None, bool]  # updated_at, is_protected (from the entry)
    key_columns: tuple[str, bool, bool]  # key_folded, is_main, is_model_run (from the key)

    @classmethod
    def of(cls, session_key: str, entry: SessionEntry) -> RowValues:
        """
        The row of ``entry``. The maintenance columns are the planner's own rules (``updated_at_of``,
        ``is_protected_session_entry``, ``is_main_session_key``, ``is_model_run_session_key``, Python's
        ``str.lower``), so the set-based maintenance selects exactly what the Python plan would.
        """
        text, jsonb_ok = encode_entry_text(entry)
        raw = session_entry_to_dict(entry)
        updated = updated_at_of(raw)
        exact: Decimal | int | None = Decimal(updated) if isinstance(updated, float) else updated
        return cls(
            text=text,
            jsonb=text if jsonb_ok else None,
            entry_columns=(exact, is_protected_session_entry(session_key, raw)),
            key_columns=(
                session_key.lower(),
                is_main_session_key(session_key),
                is_model_run_session_key(session_key),
            ),
        )


async def migrate(conn: AsyncConnection[Any], *, sql: Any, schema: str, where: str) -> None:
    """
    Create or migrate ``schema`` on ``conn`` to :data:`POSTGRES_SCHEMA_VERSION` (forward-only, under
    ``pg_advisory_xact_lock``, so workers starting together apply each migration once). ``sql`` is
    ``psycopg.sql``; ``where`` names the store in errors.

    Raises:
        StoreCorruptError: The schema is newer than this library's.
    """
    name = sql.Identifier(schema)
    migrations = sql.Identifier(schema, "sk_migrations")
    async with conn.transaction():
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            (f"sessionkeeper.migrate:{schema}",),
        )
        await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(name))
        await conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (version integer PRIMARY KEY, name text NOT NULL, "
                "applied_at timestamptz NOT NULL DEFAULT now())"
            ).format(migrations)
        )
        cur = await conn.execute(sql.SQL("SELECT coalesce(max(version), 0) FROM {}").format(migrations))
        row = await cur.fetchone()
        version = int(row[0]) if row is not None else 0
        check_not_newer(version, where=where)
        for number, title, statements in MIGRATIONS:
            if number <= version:
                continue
            for statement in statements:
                await conn.execute(sql.SQL(statement).format(schema=name))
            if number == 2:
                await backfill_maintenance_columns(conn, sql=sql, schema=schema, where=where)
            await conn.execute(
                sql.SQL("INSERT INTO {} (version, name) VALUES (%s, %s)").format(migrations),
                (number, title),
            )
            _log.info(
                "applied store schema migration %d (%s)",
                number,
                title,
                extra={"schema": schema, "version": number},
            )


async def backfill_maintenance_columns(
    conn: AsyncConnection[Any], *, sql: Any, schema: str, where: str
) -> None:
    """
    Migration 2: fill the maintenance columns of the rows written before it (every store), reading
    them in batches of 1 000 through a server-side cursor (inside the migration's transaction).
    """
    table = sql.Identifier(schema, "sk_sessions")
    select = sql.SQL("SELECT store_id, session_key, entry_text FROM {}").format(table)
    update = sql.SQL(
        "UPDATE {} SET updated_at = %s, is_protected = %s, key_folded = %s, is_main = %s, "
        "is_model_run = %s WHERE store_id = %s AND session_key = %s"
    ).format(table)
    async with conn.cursor(name="sessionkeeper_backfill") as rows:
        await rows.execute(select)
        while batch := await rows.fetchmany(1000):
            params = []
            for store_id, session_key, text in batch:
                try:
                    entry = decode_entry_text(session_key, text, where=where)
                    row = RowValues.of(session_key, entry)
                    columns = (*row.entry_columns, *row.key_columns)
                except (StoreCorruptError, ValueError):  # kept by SQL maintenance; a load reports it
                    columns = (None, True, session_key.lower(), False, False)
                params.append((*columns, store_id, session_key))
            async with conn.cursor() as cursor:
                await cursor.executemany(update, params)


async def schema_version(conn: AsyncConnection[Any], *, sql: Any, schema: str, where: str) -> int | None:
    """The applied schema version, or ``None`` when there is no migrations table."""
    cur = await conn.execute("SELECT to_regclass(%s)", (f'"{schema}".sk_migrations',))
    row = await cur.fetchone()
    if row is None or row[0] is None:
        return None
    cur = await conn.execute(
        sql.SQL("SELECT coalesce(max(version), 0) FROM {}").format(sql.Identifier(schema, "sk_migrations"))
    )
    row = await cur.fetchone()
    version = int(row[0]) if row is not None else 0
    check_not_newer(version, where=where)
    return version


def check_not_newer(version: int, *, where: str) -> None:
    """Refuse a schema newer than this library's (migrations are forward-only)."""
    if version > POSTGRES_SCHEMA_VERSION:
        raise StoreCorruptError(
            f"store schema version {version} is newer than this library's ({POSTGRES_SCHEMA_VERSION}); "
            "upgrade sessionkeeper (migrations are forward-only)",
            path=where,
        )


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
