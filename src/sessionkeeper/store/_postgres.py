"""
``PostgresStoreBackend``: the session store in PostgreSQL, shared by every worker and machine that
reaches the database (DESIGN "Storage backends"; ``spec/distributed.md`` §2.4; optional extra
``sessionkeeper[postgres]``: psycopg 3 async and ``psycopg_pool``, imported only here).

Schema: ``sk_migrations`` and ``sk_sessions`` in ``schema`` (default ``sessionkeeper``), drawn in
``_postgres_schema`` and migrated by ``_postgres_migrations``.

Concurrency (READ COMMITTED; every write is one transaction):

- :meth:`~PostgresStoreBackend.update` re-reads the row under ``SELECT ... FOR UPDATE``, runs the updater
  on it and writes with ``revision = revision + 1 WHERE revision = <read>``: concurrent updates of a key,
  from any process, are serialised by the row lock; none is lost or applied out of order. A key that
  does not exist yet is inserted with ``ON CONFLICT DO NOTHING``; when another writer created it first,
  the update starts again on the row it wrote (the updater then runs a second time).
- :meth:`~PostgresStoreBackend.compare_and_swap` is for writers that hold an entry across I/O (no lock
  held meanwhile): it writes only if the revision is still the one read, else raises
  :class:`~sessionkeeper.exceptions.StaleEntryError` (nothing written).
- :meth:`~PostgresStoreBackend.transaction` locks every row of the store (``FOR UPDATE``, in ``seq``
  order), runs the function on a snapshot and writes the difference; a key created meanwhile by another
  writer makes it start again.
- Migrations run under ``pg_advisory_xact_lock``, so workers starting together apply each one once.

Deviation (``docs/decisions.md`` ``PG-ASYNCIO``): psycopg's async API runs on asyncio only; under trio
every method raises :class:`~sessionkeeper.exceptions.StoreError`.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Self, TypeVar

from sessionkeeper.exceptions import (
    ConfigError,
    StaleEntryError,
    StoreError,
    StoreUnavailableError,
)
from sessionkeeper.store._backend import (
    EntryUpdater,
    RowsAlwaysLoad,
    StoreTransaction,
    check_entry,
    diff_entries,
)
from sessionkeeper.store._entry import SessionEntry
from sessionkeeper.store._postgres_expiry import sweep_expired_entries
from sessionkeeper.store._postgres_migrations import POSTGRES_SCHEMA_VERSION, migrate, schema_version
from sessionkeeper.store._postgres_pool import (
    CONFLICT_ATTEMPTS,
    Unit,
    check_idle_connection,
    run_unit,
)
from sessionkeeper.store._postgres_schema import (
    MAX_STORE_ID_BYTES,
    SCHEMA_NAME,
    RowValues,
    build_queries,
    check_pg_key,
    probe,
)
from sessionkeeper.store._remote import (
    CallOrder,
    RevisionedEntry,
    decode_entry_text,
    redact_url,
    require_asyncio,
    storable_key,
)


if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.rows import TupleRow
    from psycopg_pool import AsyncConnectionPool


__all__ = ("CONFLICT_ATTEMPTS", "POSTGRES_SCHEMA_VERSION", "PostgresStoreBackend")

T = TypeVar("T")
R = TypeVar("R")


class _Retry(Exception):  # noqa: N818 - control flow: roll the transaction back and start again
    pass


class PostgresStoreBackend(RowsAlwaysLoad):
    """
    A :class:`~sessionkeeper.store.StoreBackend` on PostgreSQL (psycopg 3 async, one connection pool).

    Several instances (threads, processes, machines) on the same database, schema and ``store_id`` share
    one store and lose no update (module docstring: the concurrency rules). asyncio only.

    Args:
        dsn: A libpq connection string or URL (``postgresql://user@host:5432/db``). Not needed with
            ``pool``.
        store_id: Which store in the table (one per agent or tenant; default ``"default"``).
        schema: The PostgreSQL schema holding the tables (default ``"sessionkeeper"``; letters, digits
            and ``_``, at most 63; created when missing unless ``read_only``).
        pool: A ``psycopg_pool.AsyncConnectionPool`` to use instead of opening one (its connections must
            be in autocommit mode). Not closed by :meth:`aclose`.
        min_size / max_size: The size of the pool opened from ``dsn`` (default 1 and 10 connections). Its
            connections are checked when taken (no round trip unless the server spoke while they were
            idle: ``_postgres_pool``), so a connection the server closed (a restart, an idle reaper) is
            replaced instead of failing the operation, and a read, or a write that had committed
            nothing, whose connection is found dead runs again on another; they carry
            ``application_name`` ``sessionkeeper:<schema>:<store_id>``.
        connect_timeout_s: How long the first use waits for the server (default 10 s).
        lock_timeout_s: How long a write waits for a row lock or a connection before raising
            :class:`~sessionkeeper.exceptions.SessionBusyError` (default 10 s).
        read_only: Never create or migrate anything: a schema without our tables reads as an empty store
            until another instance creates them (every read checks again while they are missing); writes
            raise :class:`~sessionkeeper.exceptions.StoreError`.
        ttl_s: Retention: every write that changes an entry sets its ``expires_at`` to now + ``ttl_s``
            seconds (the server's clock; ``None``, the default: never expires); :meth:`sweep_expired`
            removes expired entries (``_postgres_expiry``; until then they read as usual).

    Raises:
        ConfigError: Neither ``dsn`` nor ``pool``, an invalid ``schema`` / ``store_id``, or ``ttl_s`` not
            positive.

    The methods raise:

    - ``StoreUnavailableError``: the server cannot be reached (also after a pool wait), or it broke.
    - ``SessionBusyError``: a row lock or a pool connection was not obtained within ``lock_timeout_s``,
      or an operation still failed on a serialization failure or deadlock (SQLSTATE 40001 / 40P01)
      after :data:`CONFLICT_ATTEMPTS` attempts.
    - ``StoreCorruptError``: the schema is newer than this library, or a row is not a JSON object.
    - ``StoreError``: called outside asyncio, after :meth:`aclose`, or a write on a read-only backend.
    - ``InvalidSessionEntryError``: a key with a NUL or a lone surrogate (PostgreSQL text cannot hold it),
      or over 2048 UTF-8 bytes (an index entry cannot), or a row the server refuses (SQLSTATE 22 / 54).
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        store_id: str = "default",
        schema: str = "sessionkeeper",
        pool: AsyncConnectionPool[Any] | None = None,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout_s: float = 10.0,
        lock_timeout_s: float = 10.0,
        read_only: bool = False,
        ttl_s: float | None = None,
    ) -> None:
        if dsn is None and pool is None:
            raise ConfigError("PostgresStoreBackend needs dsn= or pool=")
        if ttl_s is not None and not ttl_s > 0:
            raise ConfigError(f"ttl_s must be a positive number of seconds, not {ttl_s!r}", key="ttl_s")
        if SCHEMA_NAME.fullmatch(schema) is None:
            raise ConfigError(
                f"invalid schema name {schema!r} (1-63 characters: letters, digits, _)", key="schema"
            )
        if not storable_key(store_id, nul_ok=False) or len(store_id.encode()) > MAX_STORE_ID_BYTES:
            raise ConfigError(f"invalid store id {store_id!r} (no NUL, no lone surrogate, <= 512 bytes)")
        self.dsn = dsn
        self.store_id = store_id
        self.schema = schema
        self.read_only = read_only
        self.ttl_s: float | None = ttl_s
        """Time to live of an entry after each write that changes it, in seconds (``None``: kept)."""
        self.ttl: datetime.timedelta | None = None if ttl_s is None else datetime.timedelta(seconds=ttl_s)
        self.connect_timeout_s = connect_timeout_s
        self.lock_timeout_s = lock_timeout_s
        self._min_size = min_size
        self._max_size = max_size
        self._pool = pool
        self._owns_pool = pool is None
        self._ready = False
        self._tables = True  # read-only: False when the schema has no tables yet (an empty store)
        self._closed = False
        self._order = CallOrder()  # calls on this instance apply in call order (docs/store.md, issue 11)
        self._init_lock: asyncio.Lock | None = None
        self._sql: dict[str, Any] = {}
        self._sql_module: Any = None
        self.where: str = f"postgresql:{schema}.sk_sessions[{store_id}]"
        self.application_name: str = f"sessionkeeper:{schema}:{store_id}"[:63]

    def __repr__(self) -> str:
        target = redact_url(self.dsn) if self.dsn is not None else "pool"
        ro = ", read_only=True" if self.read_only else ""
        return f"PostgresStoreBackend({target!r}, store_id={self.store_id!r}, schema={self.schema!r}{ro})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ connection and schema

    async def _ensure(self) -> AsyncConnectionPool[Any]:
        if self._closed:
            raise StoreError("the store backend is closed")
        require_asyncio("PostgresStoreBackend", "psycopg's async API")
        if self._ready and self._pool is not None:
            return self._pool
        if self._init_lock is None:
            self._init_lock = asyncio.Lock()
        async with self._init_lock:
            if not self._ready:
                await self._open()
        assert self._pool is not None
        return self._pool

    async def _open(self) -> None:
        try:
            from psycopg import sql  # noqa: PLC0415 - the optional extra, imported on first use
            from psycopg_pool import AsyncConnectionPool, PoolTimeout  # noqa: PLC0415 - the optional extra, imported on first use
        except ImportError as err:  # pragma: no cover - the extra is installed in tests
            raise StoreError(
                "PostgresStoreBackend needs the 'postgres' extra: pip install 'sessionkeeper[postgres]'"
            ) from err
        self._build_sql(sql)
        if self._pool is None:
            assert self.dsn is not None
            await probe(
                self.dsn, application_name=self.application_name, connect_timeout_s=self.connect_timeout_s
            )
            pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
                self.dsn,
                min_size=self._min_size,
                max_size=self._max_size,
                kwargs={"autocommit": True, "application_name": self.application_name},
                configure=self._configure,
                check=check_idle_connection,  # a connection the server dropped is replaced
                open=False,
                timeout=self.lock_timeout_s,
                name=f"sessionkeeper:{self.schema}:{self.store_id}",
            )
            try:
                await pool.open(wait=True, timeout=self.connect_timeout_s)
            except PoolTimeout as err:
                await pool.close()
                raise StoreUnavailableError(
                    f"cannot reach PostgreSQL at {redact_url(self.dsn)} within {self.connect_timeout_s} s"
                ) from err
            self._pool = pool
        try:
            if self.read_only:
                await self._check_schema_read_only()
            else:
                await self._migrate()
        except BaseException:
            if self._owns_pool:
                await self._pool.close()
                self._pool = None
            raise
        self._ready = True

    async def _configure(self, conn: AsyncConnection[Any]) -> None:
        """Per new pool connection: the row-lock wait limit (``SET lock_timeout``)."""
        # SET takes no bind parameters; the value is an int built here (pyright wants a LiteralString)
        await conn.execute(f"SET lock_timeout = {max(1, round(self.lock_timeout_s * 1000))}")  # pyright: ignore[reportCallIssue, reportArgumentType]

    def _build_sql(self, sql: Any) -> None:
        self._sql = build_queries(sql, self.schema)
        self._sql_module = sql

    async def _migrate(self) -> None:
        """Create or migrate the schema (forward-only; once per instance; safe under concurrent starts)."""
        async with self._connection() as conn:
            version = await self._schema_version(conn)
            if version == POSTGRES_SCHEMA_VERSION:
                return
            await migrate(conn, sql=self._sql_module, schema=self.schema, where=self.where)

    async def _schema_version(self, conn: AsyncConnection[Any]) -> int | None:
        """The applied schema version, or ``None`` when there is no migrations table."""
        return await schema_version(conn, sql=self._sql_module, schema=self.schema, where=self.where)

    async def _check_schema_read_only(self) -> None:
        async with self._connection() as conn:
            await self._check_tables(conn)

    async def _check_tables(self, conn: AsyncConnection[Any]) -> bool:
        """
        Read-only: whether the schema's tables exist now (``self._tables``). Asked again by every read
        while they do not (one ``to_regclass`` round trip), so a store another instance creates later is
        seen; once they exist, never asked again.

        Raises:
            StoreError: The schema is older than this library's (a read-only backend does not migrate).
        """
        version = await self._schema_version(conn)
        if version is None:
            self._tables = False
            return False
        if version < POSTGRES_SCHEMA_VERSION:
            raise StoreError(
                f"{self.where}: schema version {version} is older than this library's "
                f"({POSTGRES_SCHEMA_VERSION}); open it once without read_only to migrate it"
            )
        self._tables = True
        return True

    async def _has_tables(self, conn: AsyncConnection[Any]) -> bool:
        """Whether there is a store to read (read-only backends re-check a schema that was missing)."""
        return self._tables or await self._check_tables(conn)

    def _connection(self) -> Any:
        assert self._pool is not None
        return self._pool.connection()

    async def _run(
        self, body: Callable[[AsyncConnection[TupleRow]], Awaitable[R]], *, write: bool, turn: str | None
    ) -> R:
        """
        Run ``body`` on a pooled connection in its turn (``turn``: the session key, ``None``: the whole
        store; ``CallOrder``), mapping driver errors to ours. A read whose connection is found dead runs
        again on another; a write is taken as committing from its first statement (never run twice).
        """

        async def unit_body(conn: AsyncConnection[TupleRow], unit: Unit) -> R:
            unit.committing = write
            return await body(conn)

        return await self._run_unit(unit_body, write=write, turn=turn)

    async def _run_unit(
        self,
        body: Callable[[AsyncConnection[TupleRow], Unit], Awaitable[R]],
        *,
        write: bool,
        turn: str | None,
    ) -> R:
        """:meth:`_run` of a body that marks when it starts committing (``_postgres_pool.Unit``)."""
        if write and self.read_only:
            raise StoreError(f"session store {self.where} was opened read-only")
        require_asyncio("PostgresStoreBackend", "psycopg's async API")
        async with self._order.key(turn) if turn is not None else self._order.store():
            pool = await self._ensure()
            return await run_unit(
                pool, body, where=self.where, dsn=self.dsn, lock_timeout_s=self.lock_timeout_s
            )

    async def _rows(self, conn: AsyncConnection[TupleRow], name: str, *params: Any) -> list[TupleRow]:
        cur = await conn.execute(self._sql[name], params)
        return await cur.fetchall()

    # ------------------------------------------------------------------ reads

    async def load_all(self) -> dict[str, SessionEntry]:
        """Return every entry in insertion order (one query)."""

        async def body(conn: AsyncConnection[TupleRow]) -> dict[str, SessionEntry]:
            if not await self._has_tables(conn):
                return {}
            rows = await self._rows(conn, "all", self.store_id)
            return {key: decode_entry_text(key, text, where=self.where) for key, text in rows}

        return await self._run(body, write=False, turn=None)

    async def keys(self) -> list[str]:
        """Return every session key in insertion order (never reads the entries)."""

        async def body(conn: AsyncConnection[TupleRow]) -> list[str]:
            if not await self._has_tables(conn):
                return []
            return [row[0] for row in await self._rows(conn, "keys", self.store_id)]

        return await self._run(body, write=False, turn=None)

    async def get_with_revision(self, session_key: str) -> RevisionedEntry | None:
        """Return the entry under ``session_key`` with its revision (for :meth:`compare_and_swap`)."""
        if not storable_key(session_key, nul_ok=False):
            return None

        async def body(conn: AsyncConnection[TupleRow]) -> RevisionedEntry | None:
            if not await self._has_tables(conn):
                return None
            rows = await self._rows(conn, "get", self.store_id, session_key)
            if not rows:
                return None
            text, revision = rows[0]
            return RevisionedEntry(
                entry=decode_entry_text(session_key, text, where=self.where), revision=int(revision)
            )

        return await self._run(body, write=False, turn=session_key)

    async def get(self, session_key: str) -> SessionEntry | None:
        """Return the entry under ``session_key``, or ``None`` (one primary-key read)."""
        found = await self.get_with_revision(session_key)
        return None if found is None else found.entry

    # ------------------------------------------------------------------ writes

    async def put(self, session_key: str, entry: SessionEntry) -> None:
        """Store ``entry`` under ``session_key`` (row-locked upsert; the revision grows if it changed)."""
        check_entry(session_key, entry)
        await self.update(session_key, lambda _current: entry)

    async def update(self, session_key: str, fn: EntryUpdater) -> SessionEntry | None:
        """
        Atomically replace the entry under ``session_key`` with ``fn(current)`` (``None``: no change).

        The row is re-read under ``SELECT ... FOR UPDATE`` and written in the same transaction, so
        concurrent updates from any process are applied one after the other. ``fn`` runs while the row is
        locked: keep it quick and free of I/O. It may run again if another writer creates the key first
        (deviation ``DB-RETRY``).
        """
        return await self.update_lazily(session_key, fn, lazy=None)

    async def update_lazily(
        self, session_key: str, fn: EntryUpdater, *, lazy: Callable[[], bool] | None
    ) -> SessionEntry | None:
        """
        :meth:`update`; when ``lazy()`` (asked after ``fn`` ran, the row still locked) is true, the write
        commits with ``synchronous_commit`` off for its transaction (``LazyStampBackend``: visible at once,
        durable with the next durable commit on the server or its WAL writer's next flush).
        """
        check_pg_key(session_key)

        async def body(conn: AsyncConnection[TupleRow], unit: Unit) -> SessionEntry | None:
            while True:
                try:
                    # pipeline mode: BEGIN goes with the locking read, the write with COMMIT (two round
                    # trips, one transaction)
                    async with conn.pipeline(), conn.transaction():
                        return await self._update_locked(conn, session_key, fn, unit, lazy)
                except _Retry:
                    continue

        return await self._run_unit(body, write=True, turn=session_key)

    async def _update_locked(
        self,
        conn: AsyncConnection[TupleRow],
        session_key: str,
        fn: EntryUpdater,
        unit: Unit,
        lazy: Callable[[], bool] | None,
    ) -> SessionEntry | None:
        rows = await self._rows(conn, "get_locked", self.store_id, session_key)
        current = None if not rows else decode_entry_text(session_key, rows[0][0], where=self.where)
        new = fn(current)
        if new is None:
            return current
        check_entry(session_key, new)
        row = RowValues.of(session_key, new)
        unit.committing = True  # what follows is sent with the COMMIT
        if not rows:
            if not await self._insert(conn, session_key, row):
                unit.committing = False  # rolled back: nothing written
                raise _Retry  # created meanwhile by another writer: start again on its row
            return new
        old_text, revision = rows[0]
        if old_text != row.text:  # the row is locked: the swap cannot miss (its result is not read)
            # the lazy variant turns synchronous_commit off for this transaction in the same statement
            statement = self._sql["cas_lazy" if lazy is not None and lazy() else "cas"]
            await conn.execute(statement, self._cas_params(session_key, row, revision))
        return new

    async def _insert(
        self, conn: AsyncConnection[TupleRow], session_key: str, row: RowValues
    ) -> list[TupleRow]:
        return await self._rows(
            conn,
            "insert",
            self.store_id,
            session_key,
            row.text,
            row.jsonb,
            *row.entry_columns,
            *row.key_columns,
            self.ttl,
        )

    async def _cas(
        self, conn: AsyncConnection[TupleRow], session_key: str, row: RowValues, revision: int
    ) -> list[TupleRow]:
        return await self._rows(conn, "cas", *self._cas_params(session_key, row, revision))

    def _cas_params(self, session_key: str, row: RowValues, revision: int) -> tuple[Any, ...]:
        return (
            row.text,
            row.jsonb,
            *row.entry_columns,
            self.ttl,
            row.text,
            self.store_id,
            session_key,
            revision,
        )

    async def compare_and_swap(
        self, session_key: str, entry: SessionEntry, *, expected_revision: int | None
    ) -> int:
        """
        Store ``entry`` only if the stored revision is still ``expected_revision``.

        For writers that hold an entry across slow work (a model call) without holding a lock: read with
        :meth:`get_with_revision`, compute, then swap; a stale writer gets an error instead of overwriting
        a newer entry.

        Args:
            expected_revision: The revision read; ``None``: the key must not exist (create).

        Returns:
            The new revision (unchanged if the entry's JSON text is the same).

        Raises:
            StaleEntryError: The key's revision is another one (or it exists / no longer exists); nothing
                was written.
        """
        check_entry(session_key, entry)
        check_pg_key(session_key)
        row = RowValues.of(session_key, entry)

        async def body(conn: AsyncConnection[TupleRow]) -> int:
            if expected_revision is None:
                rows = await self._insert(conn, session_key, row)
            else:
                rows = await self._cas(conn, session_key, row, expected_revision)
            if rows:
                return int(rows[0][0])
            now = await self._rows(conn, "get", self.store_id, session_key)
            raise StaleEntryError(
                session_key,
                expected_revision=expected_revision,
                current_revision=int(now[0][1]) if now else None,
            )

        return await self._run(body, write=True, turn=session_key)

    async def delete(self, session_key: str) -> bool:
        """Remove ``session_key``; return whether it existed."""
        if not storable_key(session_key, nul_ok=False):
            return False

        async def body(conn: AsyncConnection[TupleRow]) -> bool:
            cur = await conn.execute(self._sql["delete"], (self.store_id, session_key))
            return cur.rowcount > 0

        return await self._run(body, write=True, turn=session_key)

    async def transaction(self, fn: StoreTransaction[T], *, purge_dropped: bool = False) -> T:
        """
        Run ``fn`` on a copy of the whole store and write its edits in one PostgreSQL transaction.

        Every row of the store is locked (``FOR UPDATE``) while ``fn`` runs; if another writer created a
        key that ``fn`` also creates, everything is rolled back and ``fn`` runs again on a fresh snapshot.

        ``purge_dropped`` is accepted and ignored: this backend never drops a row on load.
        """

        async def body(conn: AsyncConnection[TupleRow]) -> T:
            while True:
                try:
                    async with conn.transaction():
                        return await self._transaction_locked(conn, fn)
                except _Retry:
                    continue

        return await self._run(body, write=True, turn=None)

    async def _transaction_locked(self, conn: AsyncConnection[TupleRow], fn: StoreTransaction[T]) -> T:
        rows = await self._rows(conn, "all_locked", self.store_id)
        before: dict[str, SessionEntry] = {}
        revisions: dict[str, int] = {}
        for key, text, revision in rows:
            before[key] = decode_entry_text(key, text, where=self.where)
            revisions[key] = int(revision)
        working = dict(before)
        result = fn(working)
        upserts, removals = diff_entries(before, working)
        for key, entry in upserts.items():
            check_entry(key, entry)
            check_pg_key(key)
        if removals:
            await conn.execute(self._sql["delete_many"], (self.store_id, removals))
        for key, entry in upserts.items():
            row = RowValues.of(key, entry)
            if key in revisions:
                if not await self._cas(conn, key, row, revisions[key]):  # pragma: no cover - row locked
                    raise _Retry
            elif not await self._insert(conn, key, row):
                raise _Retry
        return result

    sweep_expired = sweep_expired_entries  # entry retention (ttl_s): _postgres_expiry

    async def aclose(self) -> None:
        """Close the connection pool (unless it was given); the backend is unusable afterwards."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None and self._owns_pool:
            await pool.close()
