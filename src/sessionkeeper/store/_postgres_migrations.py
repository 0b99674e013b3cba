"""
The PostgreSQL store's migrations (forward-only; the schema they build is described in
``_postgres_schema``): the statements of each version, the Python backfills some of them need (the
maintenance columns of migration 2, the session ids of migration 6: the library's own rules, never
``jsonb``'s), and the version checks. :class:`~sessionkeeper.store.PostgresStoreBackend` runs
:func:`migrate` once per instance, under ``pg_advisory_xact_lock`` (workers starting together apply each
migration once, in one transaction).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final

from sessionkeeper.exceptions import StoreCorruptError
from sessionkeeper.store._postgres_schema import RowValues, session_id_of
from sessionkeeper.store._remote import decode_entry_text


if TYPE_CHECKING:
    from psycopg import AsyncConnection


__all__ = (
    "MIGRATIONS",
    "POSTGRES_SCHEMA_VERSION",
    "backfill_maintenance_columns",
    "backfill_session_ids",
    "check_not_newer",
    "migrate",
    "schema_version",
)

_log = logging.getLogger("sessionkeeper.store")

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
    (
        6,
        "session id from the library",
        (
            # an entry jsonb cannot hold (NUL, lone surrogate) has a NULL entry, so the generated id was
            # NULL and every "is this id still used?" pass took its live transcript as unused (data loss);
            # the library now writes the id it decoded; the rows with a NULL entry are filled in by
            # backfill_session_ids (Python: the entry's own decoder)
            "ALTER TABLE {schema}.sk_sessions ALTER COLUMN session_id DROP EXPRESSION",
            # a writer of version 5 still running (a rolling upgrade) sets no session_id: these triggers
            # fill it from jsonb as the generated column did, only when it left the column NULL (insert)
            # or unchanged although jsonb's id changed (update); on this library's writes they change nothing
            """
            CREATE FUNCTION {schema}.sk_sessions_unset_session_id() RETURNS trigger LANGUAGE plpgsql
                AS $$ BEGIN NEW.session_id := NEW.entry ->> 'sessionId'; RETURN NEW; END $$
            """,
            """
            CREATE TRIGGER sk_sessions_insert_without_session_id BEFORE INSERT ON {schema}.sk_sessions
                FOR EACH ROW WHEN (NEW.session_id IS NULL AND NEW.entry ->> 'sessionId' IS NOT NULL)
                EXECUTE FUNCTION {schema}.sk_sessions_unset_session_id()
            """,
            """
            CREATE TRIGGER sk_sessions_update_without_session_id BEFORE UPDATE ON {schema}.sk_sessions
                FOR EACH ROW WHEN (NEW.session_id IS NOT DISTINCT FROM OLD.session_id
                    AND NEW.entry ->> 'sessionId' IS DISTINCT FROM OLD.entry ->> 'sessionId'
                    AND NEW.entry ->> 'sessionId' IS NOT NULL)
                EXECUTE FUNCTION {schema}.sk_sessions_unset_session_id()
            """,
        ),
    ),
)

POSTGRES_SCHEMA_VERSION: Final = MIGRATIONS[-1][0]
"""The schema version this library writes (the highest ``sk_migrations.version``)."""


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
            if number == 6:
                await backfill_session_ids(conn, sql=sql, schema=schema, where=where)
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
                    columns = (*row.entry_columns[:2], *row.key_columns)
                except (StoreCorruptError, ValueError):  # kept by SQL maintenance; a load reports it
                    columns = (None, True, session_key.lower(), False, False)
                params.append((*columns, store_id, session_key))
            async with conn.cursor() as cursor:
                await cursor.executemany(update, params)


async def backfill_session_ids(conn: AsyncConnection[Any], *, sql: Any, schema: str, where: str) -> None:
    """
    Migration 6: set ``session_id`` of the rows whose ``entry`` is ``NULL`` (their generated id was
    ``NULL``) from their decoded text, in batches of 1 000 through a server-side cursor (inside the
    migration's transaction). A row that does not decode keeps ``NULL`` (a load reports it).
    """
    table = sql.Identifier(schema, "sk_sessions")
    select = sql.SQL("SELECT store_id, session_key, entry_text FROM {} WHERE entry IS NULL").format(table)
    update = sql.SQL("UPDATE {} SET session_id = %s WHERE store_id = %s AND session_key = %s").format(table)
    async with conn.cursor(name="sessionkeeper_backfill_ids") as rows:
        await rows.execute(select)
        while batch := await rows.fetchmany(1000):
            params = []
            for store_id, session_key, text in batch:
                try:
                    session_id = session_id_of(decode_entry_text(session_key, text, where=where))
                except (StoreCorruptError, ValueError):
                    session_id = None
                params.append((session_id, store_id, session_key))
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
