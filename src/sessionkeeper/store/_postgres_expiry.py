"""
Entry retention on PostgreSQL (issue 13): :meth:`PostgresStoreBackend.sweep_expired
<sessionkeeper.store.PostgresStoreBackend.sweep_expired>` deletes the entries whose ``expires_at``
(``ttl_s``, migration 5) has passed, in batches of short transactions, and with each entry the transcript
rows of the same store it was the last user of (as ``SessionStore.delete`` does).

Each batch is one statement: the expired keys, oldest expiry first, ``FOR UPDATE SKIP LOCKED`` (sweepers
on several workers, and writers holding a row, do not wait on each other), deleted, and then the live
transcripts (``sk_transcripts``, ``archived_at IS NULL``) whose session id no remaining entry uses. A
swept entry is gone for good; until it is swept an expired entry reads, and is written, as usual (a
write that changes it sets a new expiry).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final


if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.rows import TupleRow

    from sessionkeeper.store._postgres import PostgresStoreBackend


__all__ = ("sweep_expired_entries",)

_SWEEP: Final = (
    "WITH doomed AS (SELECT session_key FROM {t} WHERE store_id = %(store)s AND expires_at <= now()"
    "  ORDER BY expires_at LIMIT %(n)s FOR UPDATE SKIP LOCKED),"
    " gone AS (DELETE FROM {t} s USING doomed d WHERE s.store_id = %(store)s"
    "  AND s.session_key = d.session_key RETURNING s.session_key, s.session_id),"
    " unused AS (DELETE FROM {h} h WHERE h.store_id = %(store)s AND h.archived_at IS NULL"
    "  AND h.session_id IN (SELECT session_id FROM gone) AND NOT EXISTS (SELECT 1 FROM {t} s"
    "  WHERE s.store_id = %(store)s AND s.session_id = h.session_id"
    "  AND s.session_key NOT IN (SELECT session_key FROM gone)) RETURNING h.session_id)"
    " SELECT session_key, (SELECT count(*) FROM unused) FROM gone"
)
"""One batch; every CTE sees the snapshot before the deletes, hence ``NOT IN gone`` for the remaining."""


async def sweep_expired_entries(
    self: PostgresStoreBackend, *, batch_size: int = 500, max_batches: int | None = None
) -> list[str]:
    """
    Delete this store's entries whose ``expires_at`` has passed (``ttl_s``; the server's clock), with the
    transcript rows each was the last user of, ``batch_size`` entries per short transaction (rows
    another worker holds are skipped), until a batch comes back short or ``max_batches`` ran (``None``:
    no limit).

    Returns:
        The session keys removed, sorted.

    Raises:
        ValueError: ``batch_size`` or ``max_batches`` is not a positive integer.
        StoreError: The backend was opened read-only.
    """
    if batch_size < 1 or (max_batches is not None and max_batches < 1):
        raise ValueError(f"batch_size and max_batches must be positive, got {batch_size}, {max_batches}")
    statement: list[Any] = []

    async def body(conn: AsyncConnection[TupleRow]) -> list[str]:
        if not statement:  # the backend imports psycopg on its first use
            sql = self._sql_module
            tables = {"t": "sk_sessions", "h": "sk_transcripts"}
            names = {key: sql.Identifier(self.schema, table) for key, table in tables.items()}
            statement.append(sql.SQL(_SWEEP).format(**names))
        cur = await conn.execute(statement[0], {"store": self.store_id, "n": batch_size})
        return [str(row[0]) for row in await cur.fetchall()]

    removed: list[str] = []
    batches = 0
    while max_batches is None or batches < max_batches:
        batches += 1
        batch = await self._run(body, write=True, turn=None)
        removed += batch
        if len(batch) < batch_size:
            break
    return sorted(removed)
