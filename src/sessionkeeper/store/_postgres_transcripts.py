"""
``PostgresTranscriptStorage``: transcripts' lines in PostgreSQL, the third implementation of the
transcript storage seam (``transcript._storage``; issue 13; ``spec/distributed.md`` §2.4), beside
:class:`~sessionkeeper.store.PostgresStoreBackend` in the same schema, on the same pool.

Tables (migration 3, drawn in ``_postgres_schema``): ``sk_transcripts`` (one head row per transcript:
its mark, line count, byte size and generation), ``sk_transcript_lines`` (``(store_id, session_id, seq)``,
the exact line bytes, the entry's ``type``, id and parent id read from its JSON), ``sk_transcript_keys``
(idempotency key -> the mark after the first append).

How the contract is met (READ COMMITTED):

- **Conditional append.** One statement: ``UPDATE sk_transcripts ... WHERE generation = $token AND
  line_count = $lines AND byte_size = $size RETURNING`` (the compare-and-swap on the mark), whose result
  feeds the ``INSERT`` of the lines and of the idempotency key. No row: nothing was written; a second
  read of the head tells a stale mark (``StaleTranscriptError``) from a replaced or missing transcript.
- **Writer claims.** A session-level advisory lock (``pg_advisory_lock`` on a 64-bit hash of schema,
  store id and session id) held by one pool connection the claim keeps until released. Appends with the
  claim run on that connection, so the fence is the lock-holding session itself: if the connection died,
  the lock is gone and so is the claim (``held`` is ``False``; an append raises ``LockNotHeldError``).
  An append without a claim is one statement in autocommit mode that first takes
  ``pg_advisory_xact_lock`` on the same key for its transaction: it waits while another writer holds the
  claim (up to the backend's ``lock_timeout_s``: ``SessionBusyError``), then swaps on the head row's
  latest version (a stale mark is refused as above).
- **Idempotency.** Keys are rows, so a retry through any instance, process or machine is answered.
"""

from __future__ import annotations

import asyncio
import datetime
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from sessionkeeper.exceptions import (
    ConfigError,
    LockNotHeldError,
    SessionBusyError,
    StaleTranscriptError,
    StoreError,
    StoreUnavailableError,
    TranscriptChangedError,
    TranscriptFormatError,
    TranscriptNotFoundError,
    UnsafePathError,
)
from sessionkeeper.store._postgres import CONFLICT_ATTEMPTS, PostgresStoreBackend
from sessionkeeper.store._postgres_compaction_claims import claim_compaction
from sessionkeeper.store._postgres_schema import busy_or_unreachable, one_line
from sessionkeeper.store._postgres_transcript_archives import PostgresTranscriptArchives
from sessionkeeper.store._postgres_transcript_parts import (
    MarkToken,
    PostgresClaim,
    build_transcript_sql,
    line_columns,
)
from sessionkeeper.store._postgres_transcript_reads import PostgresTranscriptReads
from sessionkeeper.store._postgres_transcript_riders import append_carrying, append_params, carries
from sessionkeeper.store._remote import require_asyncio, storable_key
from sessionkeeper.transcript import (
    StorageMark,
    WriterClaim,
    check_claim_timeout,
    check_lines,
    check_session_id,
)


if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool


__all__ = ("PostgresTranscriptStorage",)

R = TypeVar("R")


class PostgresTranscriptStorage(PostgresTranscriptReads, PostgresTranscriptArchives):
    """
    Transcripts in PostgreSQL; a :class:`~sessionkeeper.abc.TranscriptStorage` (module docstring: the
    tables and how marks, claims and idempotency keys are kept) and a
    :class:`~sessionkeeper.abc.CompactionClaimStorage` (``_postgres_compaction_claims``), an
    :class:`~sessionkeeper.abc.ArchivingTranscriptStorage` (``_postgres_transcript_archives``) and a
    :class:`~sessionkeeper.transcript.RidingStorage` (``_postgres_transcript_riders``: an append that
    carries a store entry patch in its transaction).

    Every instance on the same database, schema and store id (threads, processes, machines) shares the
    transcripts, their marks, claims and idempotency keys. Lines are stored as their exact bytes (``bytea``:
    invalid UTF-8 included), so reading them in order gives the pi JSONL file byte for byte. asyncio only.

    Args:
        backend: The :class:`~sessionkeeper.store.PostgresStoreBackend` whose pool, schema and store id
            to use (opened, migrated and closed by its owner; :meth:`aclose` leaves it open).
        dsn, store_id, schema, pool, min_size, max_size, connect_timeout_s, lock_timeout_s: Without
            ``backend``: a backend of its own is made from these (as :class:`PostgresStoreBackend`), and
            closed by :meth:`aclose`.
        claim_timeout_ms: How long :meth:`claim` waits by default (``None``: the backend's
            ``lock_timeout_s``).
        ttl_s: Retention: every create and append sets the transcript's ``expires_at`` to now + ``ttl_s``
            seconds (``None``, the default: never expires); :meth:`sweep_expired` deletes expired ones.

    Raises:
        ConfigError: As :class:`PostgresStoreBackend` (no ``dsn`` nor ``pool`` nor ``backend``, a bad
            schema or store id), or ``ttl_s`` not positive.

    The methods raise, besides the contract's errors: ``StoreUnavailableError`` (the server cannot be
    reached or the connection broke: an append may or may not have committed; re-read), ``StoreError``
    (outside asyncio, closed, or a write through a ``read_only`` backend), ``SessionBusyError`` (no pool
    connection in time), ``UnsafePathError`` (a session id PostgreSQL text cannot hold: a lone surrogate),
    ``TranscriptFormatError`` (the server refuses the rows for good, SQLSTATE class 22 or 54; nothing
    written). Entry ids over 256 UTF-8 bytes are indexed by their SHA-256 (``indexed_id``).
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        backend: PostgresStoreBackend | None = None,
        store_id: str = "default",
        schema: str = "sessionkeeper",
        pool: AsyncConnectionPool[Any] | None = None,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout_s: float = 10.0,
        lock_timeout_s: float = 10.0,
        claim_timeout_ms: float | None = None,
        ttl_s: float | None = None,
    ) -> None:
        if ttl_s is not None and not ttl_s > 0:
            raise ConfigError(f"ttl_s must be a positive number of seconds, not {ttl_s!r}", key="ttl_s")
        check_claim_timeout(claim_timeout_ms)
        self._owns_backend = backend is None
        if backend is None:
            backend = PostgresStoreBackend(
                dsn,
                store_id=store_id,
                schema=schema,
                pool=pool,
                min_size=min_size,
                max_size=max_size,
                connect_timeout_s=connect_timeout_s,
                lock_timeout_s=lock_timeout_s,
            )
        self.backend: PostgresStoreBackend = backend
        """The store backend whose pool and schema this storage uses."""
        self.schema: str = backend.schema
        """The PostgreSQL schema of the tables."""
        self.store_id: str = backend.store_id
        """Which store's transcripts (many stores share the tables)."""
        self.claim_timeout_ms: float = (
            claim_timeout_ms if claim_timeout_ms is not None else backend.lock_timeout_s * 1000
        )
        """How long :meth:`claim` waits when given no ``timeout_ms``."""
        self.ttl: datetime.timedelta | None = None if ttl_s is None else datetime.timedelta(seconds=ttl_s)
        """Retention of a transcript after its last write (``None``: kept until deleted)."""
        self._sql: dict[str, Any] = {}
        self._sql_ready = False
        self._claims: weakref.WeakSet[PostgresClaim] = weakref.WeakSet()  # taken here, for error messages

    def __repr__(self) -> str:
        return f"PostgresTranscriptStorage(schema={self.schema!r}, store_id={self.store_id!r})"

    async def __aenter__(self) -> PostgresTranscriptStorage:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the backend made by this storage (a ``backend`` given stays open)."""
        if self._owns_backend:
            await self.backend.aclose()

    def location(self, session_id: str) -> str:
        """``postgresql:<schema>.sk_transcripts[<store_id>]/<session_id>`` (not checked)."""
        return f"postgresql:{self.schema}.sk_transcripts[{self.store_id}]/{session_id}"

    def lock_name(self, session_id: str) -> str:
        """The text hashed into the transcript's advisory-lock key (``hashtextextended(name, 0)``)."""
        return f"sessionkeeper.transcript:{self.schema}:{self.store_id}:{session_id}"

    def _check_id(self, session_id: str) -> str:
        check_session_id(session_id)
        if not storable_key(session_id, nul_ok=False):
            raise UnsafePathError(
                "unsafe session id: PostgreSQL text cannot hold a lone surrogate", value=session_id
            )
        return session_id

    def _token(self, session_id: str, mark: StorageMark) -> int:
        token = mark.token
        if not (
            isinstance(token, MarkToken) and (token.schema, token.store_id) == (self.schema, self.store_id)
        ):
            raise TranscriptChangedError(
                "the mark is not one of this storage's (another storage's?)", path=self.location(session_id)
            )
        return token.generation

    def _mark(self, lines: int, size: int, generation: int) -> StorageMark:
        return StorageMark(
            lines=int(lines), size=int(size), token=MarkToken(self.schema, self.store_id, int(generation))
        )

    # ------------------------------------------------------------------ running statements

    async def _pool(self, *, write: bool) -> AsyncConnectionPool[Any]:
        if write and self.backend.read_only:
            raise StoreError(f"{self.location('*')} was opened read-only")
        require_asyncio("PostgresTranscriptStorage", "psycopg's async API")
        pool = await self.backend._ensure()
        if not self._sql_ready:
            from psycopg import sql  # noqa: PLC0415 - the optional extra, imported on first use

            self._sql = build_transcript_sql(sql, self.schema)
            self._sql_ready = True
        return pool

    async def _run(
        self,
        session_id: str,
        body: Callable[[AsyncConnection[Any]], Awaitable[R]],
        *,
        write: bool,
        claim: PostgresClaim | None = None,
        phase: list[str] | None = None,
    ) -> R:
        """
        Run ``body`` in a pooled connection (or the claim's), mapping driver errors to ours. With a claim,
        a broken connection before ``phase`` says ``"commit"`` (nothing committed) is a lost claim;
        without one, a read, or a write before ``phase`` says ``"commit"``, whose pooled connection
        is found dead runs again on another.
        """
        pool = await self._pool(write=write)
        import psycopg  # noqa: PLC0415 - the optional extra, imported on first use
        from psycopg import errors  # noqa: PLC0415 - the optional extra
        from psycopg_pool import PoolTimeout  # noqa: PLC0415 - the optional extra

        where = self.location(session_id)
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            used: list[AsyncConnection[Any]] = []
            try:
                if claim is not None:
                    async with claim.use:
                        claim.ensure_held()
                        return await body(claim.connection())
                async with pool.connection() as conn:
                    used.append(conn)
                    return await body(conn)
            except (errors.SerializationFailure, errors.DeadlockDetected) as err:
                if attempt == CONFLICT_ATTEMPTS:
                    raise SessionBusyError(
                        f"{where}: still rolled back by the server after {attempt} attempts ({err})",
                        path=where,
                        waited_ms=0,
                    ) from err
                await asyncio.sleep(0.005 * 2**attempt)
            except PoolTimeout as err:  # all busy (SessionBusyError), or the server is gone
                raise await busy_or_unreachable(
                    self.backend.dsn,
                    where=where,
                    waited_s=self.backend.lock_timeout_s,
                    detail=f"no connection for {where}: {err}",
                ) from err
            except errors.LockNotAvailable as err:
                mine = any(c.held and c.owner[2] == session_id for c in self._claims)
                by = "a claim taken through this same storage (pass claim=)" if mine else "another writer"
                raise SessionBusyError(
                    f"the writer claim of {where} stayed held past {self.backend.lock_timeout_s} s by {by}",
                    path=where,
                    waited_ms=self.backend.lock_timeout_s * 1000,
                ) from err
            except (errors.ProgramLimitExceeded, errors.DataError) as err:
                # permanent: the server refuses these rows (class 54 / 22), a retry cannot help
                raise TranscriptFormatError(
                    f"PostgreSQL cannot hold these lines (SQLSTATE {err.sqlstate}: {one_line(err)});"
                    " nothing was written",
                    path=where,
                ) from err
            except errors.UndefinedTable as err:  # read-only, before the tables exist: reads as empty
                if not write:
                    raise TranscriptNotFoundError(f"transcript not found: {where} (no tables yet)") from err
                raise StoreError(f"{where}: the transcript tables do not exist ({self.schema!r})") from err
            except psycopg.OperationalError as err:
                if claim is not None and not claim.held and (phase is None or phase[0] != "commit"):
                    raise LockNotHeldError(
                        f"the writer claim of {where} was lost with its connection ({err});"
                        " nothing was written",
                        path=where,
                        reason="lost",
                    ) from err
                uncommitted = not write or (phase is not None and phase[0] != "commit")
                if not (used and used[0].broken and uncommitted and attempt < CONFLICT_ATTEMPTS):
                    raise StoreUnavailableError(f"{where}: {err}") from err
                # found dead before anything was committed (_postgres_pool): again on another connection
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------------ the seam

    async def create(self, session_id: str, lines: Sequence[bytes]) -> StorageMark:
        """Create the transcript holding ``lines`` (one statement). ``FileExistsError`` when it exists."""
        self._check_id(session_id)
        content = check_lines(lines, location=self.location(session_id))
        size = sum(len(line) + 1 for line in content)
        columns = [line_columns(line) for line in content]

        async def body(conn: AsyncConnection[Any]) -> StorageMark:
            cur = await conn.execute(
                self._sql["create"],
                {
                    "store": self.store_id,
                    "session": session_id,
                    "lines": len(content),
                    "size": size,
                    "ttl": self.ttl,
                    "first": 0,
                    "data": content,
                    "types": [c[0] for c in columns],
                    "ids": [c[1] for c in columns],
                    "parents": [c[2] for c in columns],
                },
            )
            row = await cur.fetchone()
            if row is None:
                raise FileExistsError(f"transcript exists: {self.location(session_id)}")
            return self._mark(len(content), size, row[0])

        return await self._run(session_id, body, write=True)

    async def read(self, session_id: str) -> tuple[list[bytes], StorageMark]:
        """Every line and their mark (one statement, one snapshot). Raises ``TranscriptNotFoundError``."""
        self._check_id(session_id)

        async def body(conn: AsyncConnection[Any]) -> tuple[list[bytes], StorageMark]:
            cur = await conn.execute(self._sql["read"], (0, self.store_id, session_id))
            return self._lines_and_mark(session_id, await cur.fetchall())

        return await self._run(session_id, body, write=False)

    def _lines_and_mark(self, session_id: str, rows: list[Any]) -> tuple[list[bytes], StorageMark]:
        if not rows:
            raise TranscriptNotFoundError(f"transcript not found: {self.location(session_id)}")
        generation, count, size = rows[0][:3]
        lines = [bytes(row[3]) for row in rows if row[3] is not None]
        return lines, self._mark(count, size, generation)

    async def read_since(self, session_id: str, mark: StorageMark) -> tuple[list[bytes], StorageMark]:
        """The lines appended after ``mark`` and the mark after them (reads only those rows)."""
        self._check_id(session_id)
        self._token(session_id, mark)

        async def body(conn: AsyncConnection[Any]) -> tuple[list[bytes], StorageMark]:
            cur = await conn.execute(self._sql["read"], (mark.lines, self.store_id, session_id))
            lines, now = self._lines_and_mark(session_id, await cur.fetchall())
            if now.token != mark.token or now.lines < mark.lines:
                raise TranscriptChangedError(
                    "the transcript was deleted or replaced since this mark; reopen it",
                    path=self.location(session_id),
                )
            return lines, now

        return await self._run(session_id, body, write=False)

    async def append(
        self,
        session_id: str,
        lines: Sequence[bytes],
        *,
        mark: StorageMark,
        claim: WriterClaim | None = None,
        idempotency_key: str | None = None,
    ) -> StorageMark:
        """
        Append ``lines`` if nothing was appended since ``mark`` (``TranscriptStorage.append``): one
        compare-and-swap statement on the head row, in the claim's connection or under the transcript's
        advisory lock (module docstring).
        """
        self._check_id(session_id)
        key = None if idempotency_key is None else idempotency_key.encode("utf-8", "surrogatepass")
        content = check_lines(lines, location=self.location(session_id))
        if key is not None and (claim is not None or not content or not self._mine(mark)):
            # a used key answers before the claim, an empty append or the mark is looked at (without
            # a claim, the append statement itself checks the key: no round trip before it)
            first = await self._used_key(session_id, key)
            if first is not None:
                return first
        if not content:
            return mark
        held: PostgresClaim | None = None
        if claim is not None:
            claim.ensure_held()
            if not (
                isinstance(claim, PostgresClaim) and claim.owner == (self.schema, self.store_id, session_id)
            ):
                raise LockNotHeldError(
                    "the claim given is not this transcript's",
                    path=self.location(session_id),
                    reason="foreign",
                )
            held = claim
        generation = self._token(session_id, mark)
        params = append_params(self, session_id, content, mark=mark, generation=generation, key=key)

        phase = ["statements"]

        async def claimed(conn: AsyncConnection[Any]) -> StorageMark:
            async with conn.transaction():  # a dead claim connection before COMMIT: nothing written
                row = await (await conn.execute(self._sql["append"], params)).fetchone()
                if row is None:
                    return await self._not_appended(conn, session_id, mark, generation, key)
                phase[0] = "commit"  # leaving the block commits: from here the outcome is unknown
            return self._mark(*row)

        async def unclaimed(conn: AsyncConnection[Any]) -> StorageMark:
            # one statement (autocommit): the advisory lock, the key check, the swap, the lines, the key
            phase[0] = "commit"
            row = await (await conn.execute(self._sql["append_locked"], params)).fetchone()
            if row is None:
                return await self._not_appended(conn, session_id, mark, generation, key)
            return self._mark(*row)

        if held is not None:
            return await self._run(session_id, claimed, write=True, claim=held, phase=phase)
        params["lock"] = self.lock_name(session_id)
        return await self._run(session_id, unclaimed, write=True, phase=phase)

    def _mine(self, mark: StorageMark) -> bool:
        token = mark.token
        return isinstance(token, MarkToken) and (token.schema, token.store_id) == (self.schema, self.store_id)

    async def _not_appended(
        self,
        conn: AsyncConnection[Any],
        session_id: str,
        mark: StorageMark,
        generation: int,
        key: bytes | None,
    ) -> StorageMark:
        """Nothing landed: the first append's mark when ``key`` was used, else the refusal."""
        if key is not None and (found := await self._key_row(conn, session_id, key)) is not None:
            return found
        cur = await conn.execute(self._sql["head"], (self.store_id, session_id))
        return self._refuse(session_id, mark, generation, await cur.fetchone())

    def _refuse(self, session_id: str, mark: StorageMark, generation: int, head: Any) -> NoReturn:
        where = self.location(session_id)
        if head is None:
            raise TranscriptNotFoundError(f"transcript not found: {where}")
        now_generation, now_lines, _size = head
        if now_generation != generation or now_lines < mark.lines:
            raise TranscriptChangedError(
                "the transcript was deleted or replaced since this mark; reopen it", path=where
            )
        raise StaleTranscriptError(
            f"{now_lines - mark.lines} line(s) were appended since the writer's mark; nothing was written"
            " (read them and append again)",
            path=where,
        )

    async def _key_row(self, conn: AsyncConnection[Any], session_id: str, key: bytes) -> StorageMark | None:
        cur = await conn.execute(self._sql["key"], (self.store_id, session_id, key))
        row = await cur.fetchone()
        return None if row is None else self._mark(*row)

    async def _used_key(self, session_id: str, key: bytes) -> StorageMark | None:
        async def body(conn: AsyncConnection[Any]) -> StorageMark | None:
            return await self._key_row(conn, session_id, key)

        return await self._run(session_id, body, write=False)

    async def claim(self, session_id: str, *, timeout_ms: float | None = None) -> WriterClaim:
        """
        Take the transcript's writer claim: its advisory lock, on a pool connection kept until
        :meth:`~WriterClaim.release` (``timeout_ms`` ``None``: :attr:`claim_timeout_ms`).

        Raises:
            SessionBusyError: Not taken within ``timeout_ms``.
            LockError: ``timeout_ms`` is not positive.
        """
        self._check_id(session_id)
        check_claim_timeout(timeout_ms)
        wait_ms = self.claim_timeout_ms if timeout_ms is None else timeout_ms
        pool = await self._pool(write=True)
        from psycopg import errors  # noqa: PLC0415 - the optional extra
        from psycopg_pool import PoolTimeout  # noqa: PLC0415 - the optional extra

        where = self.location(session_id)
        try:
            conn = await pool.getconn()
        except PoolTimeout as err:
            raise SessionBusyError(
                f"no connection for {where}: {err}", path=where, waited_ms=wait_ms
            ) from err
        try:
            async with conn.transaction():
                await conn.execute(self._sql["set_lock_timeout"], (f"{max(1, round(wait_ms))}ms",))
                await conn.execute(self._sql["lock"], (self.lock_name(session_id),))
        except errors.LockNotAvailable as err:
            await pool.putconn(conn)
            raise SessionBusyError(
                f"the writer claim of {where} is held by another writer", path=where, waited_ms=wait_ms
            ) from err
        except BaseException:
            await conn.close()  # whatever it holds dies with it
            await pool.putconn(conn)
            raise
        taken = PostgresClaim(
            owner=(self.schema, self.store_id, session_id),
            where=where,
            unlock=(self._sql["unlock"], self.lock_name(session_id)),
            pool=pool,
            conn=conn,
        )
        self._claims.add(taken)
        return taken

    claim_compaction = claim_compaction  # CompactionClaimStorage: _postgres_compaction_claims
    carries = carries  # RidingStorage: _postgres_transcript_riders
    append_carrying = append_carrying

    async def sweep_expired(self, *, batch_size: int = 500, max_batches: int | None = None) -> list[str]:
        """
        Delete this store's transcripts whose ``expires_at`` has passed (``ttl_s``; the server's clock),
        every row of each, in batches of ``batch_size`` transcripts, one short transaction per batch
        (rows another worker holds are skipped: ``FOR UPDATE SKIP LOCKED``), until a batch comes back
        short or ``max_batches`` batches ran (``None``: no limit).

        Returns:
            The session ids removed, sorted (their store entries are the caller's to remove); an expired
            archive is removed too and listed by its name, ``<id>/<reason>/<stamp>``.

        Raises:
            ValueError: ``batch_size`` or ``max_batches`` is not a positive integer.
        """
        if batch_size < 1 or (max_batches is not None and max_batches < 1):
            raise ValueError(f"batch_size and max_batches must be positive, got {batch_size}, {max_batches}")

        async def body(conn: AsyncConnection[Any]) -> list[str]:
            cur = await conn.execute(self._sql["sweep"], (self.store_id, batch_size))
            return [row[0] for row in await cur.fetchall()]

        removed: list[str] = []
        batches = 0
        while max_batches is None or batches < max_batches:
            batches += 1
            batch = await self._run("*", body, write=True)
            removed += batch
            if len(batch) < batch_size:
                break
        return sorted(removed)

    async def delete(self, session_id: str) -> bool:
        """Remove the transcript: its head row, lines and idempotency keys (cascade); ``False`` if none."""
        self._check_id(session_id)

        async def body(conn: AsyncConnection[Any]) -> bool:
            cur = await conn.execute(self._sql["delete"], (self.store_id, session_id))
            return cur.rowcount > 0

        return await self._run(session_id, body, write=True)
