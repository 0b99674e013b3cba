"""
The compaction claims of :class:`~sessionkeeper.store.PostgresTranscriptStorage`
(:class:`~sessionkeeper.abc.CompactionClaimStorage`; issue 13: single-flight summarising across workers).

A compaction claim is a session-level advisory lock on its own key (the transcript's lock name with
``:compaction``, so it never blocks the writer claim or an append), taken with ``pg_try_advisory_lock``
(never waiting) on a pool connection the claim keeps until it is released. The fence is that session:
a worker that is killed, or whose connection breaks, loses the claim with its connection (the server
ends the session and its locks as soon as it sees the socket close), so a crashed compaction never
blocks the next one. The claim only saves model calls; the landing's conditional append on the mark
guards the transcript (``compaction._landing``).

Each claim held occupies one pool connection for the length of a summarisation: size the pool
(``max_size``) for the compactions one worker may run at once, plus its other traffic. When no
connection comes in time the claim raises ``SessionBusyError`` and the compactor goes on without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from sessionkeeper.exceptions import SessionBusyError, StoreUnavailableError
from sessionkeeper.store._postgres_transcript_parts import PostgresClaim
from sessionkeeper.transcript import WriterClaim


if TYPE_CHECKING:
    from sessionkeeper.store._postgres_transcripts import PostgresTranscriptStorage


__all__ = ("claim_compaction", "compaction_lock_name")

_TRY_LOCK: Final = "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))"
_UNLOCK: Final = "SELECT pg_advisory_unlock(hashtextextended(%s, 0))"


def compaction_lock_name(storage: PostgresTranscriptStorage, session_id: str) -> str:
    """The text hashed into the compaction claim's advisory-lock key (``hashtextextended(name, 0)``)."""
    return storage.lock_name(session_id) + ":compaction"


async def claim_compaction(self: PostgresTranscriptStorage, session_id: str) -> WriterClaim | None:
    """
    Take the transcript's compaction claim if no worker holds it (``pg_try_advisory_lock``, never
    waiting), on a pool connection kept until :meth:`~WriterClaim.release`
    (:class:`~sessionkeeper.abc.CompactionClaimStorage`: it blocks no append and no writer claim, and
    is lost with a killed worker's connection; ``_postgres_compaction_claims``).

    Returns:
        The claim, or ``None`` when another worker (any instance, process or machine on the same
        schema and store id) holds it.

    Raises:
        UnsafePathError: ``session_id`` is not a safe name, or PostgreSQL text cannot hold it.
        SessionBusyError: No pool connection came in time.
        StoreUnavailableError: The server cannot be reached.
        StoreError: Outside asyncio, closed, or opened ``read_only``.
    """
    self._check_id(session_id)
    pool = await self._pool(write=True)
    import psycopg  # noqa: PLC0415 - the optional extra, imported on first use
    from psycopg import sql  # noqa: PLC0415 - the optional extra
    from psycopg_pool import PoolTimeout  # noqa: PLC0415 - the optional extra

    where = self.location(session_id)
    name = compaction_lock_name(self, session_id)
    try:
        conn = await pool.getconn()
    except PoolTimeout as err:
        raise SessionBusyError(
            f"no connection for the compaction claim of {where}: {err}",
            path=where,
            waited_ms=self.backend.lock_timeout_s * 1000,
        ) from err
    try:
        cur = await conn.execute(sql.SQL(_TRY_LOCK), (name,))
        row = await cur.fetchone()
    except BaseException as err:
        await conn.close()  # whatever it may hold dies with it
        await pool.putconn(conn)
        if isinstance(err, psycopg.OperationalError):
            raise StoreUnavailableError(f"{where}: {err}") from err
        raise
    if row is None or not row[0]:
        await pool.putconn(conn)
        return None
    unlock: tuple[Any, str] = (sql.SQL(_UNLOCK), name)
    return PostgresClaim(
        owner=(self.schema, self.store_id, session_id),
        where=f"{where} (compaction)",
        unlock=unlock,
        pool=pool,
        conn=conn,
    )
