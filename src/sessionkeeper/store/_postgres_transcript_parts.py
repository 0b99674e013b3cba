"""
The parts of :class:`~sessionkeeper.store.PostgresTranscriptStorage` (``_postgres_transcripts``): its
writer claim, its marks' token, the indexed columns of a line, and the statements on the transcript
tables of migration 3 (``_postgres_schema``): ``{h}`` is ``sk_transcripts`` (head rows), ``{l}``
``sk_transcript_lines``, ``{k}`` ``sk_transcript_keys``, all schema-qualified.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs
import msgspec

from sessionkeeper.exceptions import LockNotHeldError, TranscriptChangedError, TranscriptNotFoundError
from sessionkeeper.store._remote import storable_key


if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

    from sessionkeeper.transcript import StorageMark


__all__ = (
    "FORWARD_PAGE_LINES",
    "SQL",
    "MarkToken",
    "PostgresClaim",
    "StorageHost",
    "build_transcript_sql",
    "forward_batches",
    "indexed_id",
    "line_columns",
)

R = TypeVar("R")


class StorageHost:
    """
    What :class:`~sessionkeeper.store.PostgresTranscriptStorage` gives the mixins that hold its reads and
    archives: declared once, for type checkers only (no attribute exists at run time).
    """

    if TYPE_CHECKING:
        schema: str
        store_id: str
        _sql: dict[str, Any]

        def _check_id(self, session_id: str) -> str: ...
        def location(self, session_id: str) -> str: ...
        def _mark(self, lines: int, size: int, generation: int) -> StorageMark: ...
        async def _run(
            self,
            session_id: str,
            body: Callable[[AsyncConnection[Any]], Awaitable[R]],
            *,
            write: bool,
            claim: Any = None,
            phase: list[str] | None = None,
        ) -> R: ...


FORWARD_PAGE_LINES: Final = 4096
"""The most lines one page of a forward read fetches."""

_LINES_FROM_ARRAYS: Final = (
    "SELECT %(store)s, %(session)s, %(first)s + u.ord - 1, u.line, u.kind, u.entry, u.parent "
    "FROM head, unnest(%(data)s::bytea[], %(types)s::text[], %(ids)s::text[], %(parents)s::text[]) "
    "WITH ORDINALITY AS u(line, kind, entry, parent, ord)"
)


def _append(*, locked: bool) -> str:
    """The append statement (``SQL["append"]``), under the advisory lock when ``locked``."""
    lock = "lock AS MATERIALIZED (SELECT pg_advisory_xact_lock(hashtextextended(%(lock)s, 0))),"
    lock = lock if locked else ""
    return (
        "WITH " + lock + " head AS ("
        " UPDATE {h} SET line_count = line_count + %(lines)s, byte_size = byte_size + %(size)s,"
        " updated_at = now(), expires_at = now() + %(ttl)s::interval"
        " WHERE store_id = %(store)s AND session_id = %(session)s AND generation = %(generation)s"
        " AND line_count = %(seen_lines)s AND byte_size = %(seen_size)s"
        + (" AND EXISTS (SELECT FROM lock)" if locked else "")
        + " AND NOT EXISTS (SELECT FROM {k} WHERE store_id = %(store)s AND session_id = %(session)s"
        " AND idem_key = %(key)s::bytea)"
        " RETURNING line_count, byte_size, generation),"
        " ins AS (INSERT INTO {l} (store_id, session_id, seq, line, entry_type, entry_id, parent_id) "
        + _LINES_FROM_ARRAYS
        + "), keyed AS (INSERT INTO {k} (store_id, session_id, idem_key, line_count, byte_size, generation)"
        " SELECT %(store)s, %(session)s, %(key)s::bytea, line_count, byte_size, generation FROM head"
        " WHERE %(key)s::bytea IS NOT NULL)"
        " SELECT line_count, byte_size, generation FROM head"
    )


SQL: Final[dict[str, str]] = {
    # one statement: the head row (a new generation) and every line; no row when it exists already
    "create": (
        "WITH head AS ("
        " INSERT INTO {h} (store_id, session_id, line_count, byte_size, expires_at)"
        " VALUES (%(store)s, %(session)s, %(lines)s, %(size)s, now() + %(ttl)s::interval)"
        " ON CONFLICT (store_id, session_id) DO NOTHING RETURNING generation),"
        " ins AS (INSERT INTO {l} (store_id, session_id, seq, line, entry_type, entry_id, parent_id) "
        + _LINES_FROM_ARRAYS
        + ") SELECT generation FROM head"
    ),
    # the compare-and-swap on the mark, then the lines and the idempotency key (only if it matched)
    "append": _append(locked=False),
    # the same, one statement in autocommit mode, after taking the transcript's advisory lock for its
    # transaction (a one-time filter the planner runs before it reads the head row; a head row another
    # writer changed while this one waited is re-checked on its latest version: READ COMMITTED's
    # re-check of an updated row)
    "append_locked": _append(locked=True),
    "head": "SELECT generation, line_count, byte_size FROM {h} WHERE store_id = %s AND session_id = %s",
    "key": (
        "SELECT line_count, byte_size, generation FROM {k}"
        " WHERE store_id = %s AND session_id = %s AND idem_key = %s"
    ),
    # lines seq >= %s of the current generation, with the head (one row with a NULL line when none)
    "read": (
        "SELECT h.generation, h.line_count, h.byte_size, l.line FROM {h} h"
        " LEFT JOIN {l} l ON l.store_id = h.store_id AND l.session_id = h.session_id"
        " AND l.seq >= %s AND l.seq < h.line_count"
        " WHERE h.store_id = %s AND h.session_id = %s ORDER BY l.seq"
    ),
    "tail_first": (
        "SELECT h.generation, h.line_count, t.seq, t.line FROM {h} h LEFT JOIN LATERAL ("
        " SELECT seq, line FROM {l} l WHERE l.store_id = h.store_id AND l.session_id = h.session_id"
        " AND l.seq < h.line_count ORDER BY l.seq DESC LIMIT %s) t ON true"
        " WHERE h.store_id = %s AND h.session_id = %s ORDER BY t.seq DESC"
    ),
    "tail_more": (
        "SELECT l.seq, l.line FROM {h} h"
        " JOIN {l} l ON l.store_id = h.store_id AND l.session_id = h.session_id"
        " WHERE h.store_id = %s AND h.session_id = %s AND h.generation = %s AND l.seq < %s"
        " ORDER BY l.seq DESC LIMIT %s"
    ),
    # lines seq >= %s of the current generation, first first: at most %s of them, as many as fit in %s
    # bytes with their newlines, the first one always (sizes from the values' headers), with the head
    "forward": (
        "SELECT h.generation, h.line_count, w.seq, w.line FROM {h} h LEFT JOIN LATERAL ("
        " SELECT seq, line FROM (SELECT seq, line, sum(octet_length(line) + 1) OVER (ORDER BY seq) AS upto"
        " FROM (SELECT seq, line FROM {l} l WHERE l.store_id = h.store_id AND l.session_id = h.session_id"
        " AND l.seq >= %s AND l.seq < h.line_count ORDER BY l.seq LIMIT %s) p) q"
        " WHERE q.upto <= %s OR q.upto = octet_length(q.line) + 1) w ON true"
        " WHERE h.store_id = %s AND h.session_id = %s ORDER BY w.seq"
    ),
    "list": (
        "SELECT session_id FROM {h} WHERE store_id = %s AND archived_at IS NULL"
        ' ORDER BY session_id COLLATE "C"'
    ),
    "delete": "DELETE FROM {h} WHERE store_id = %s AND session_id = %s",
    "sweep": (
        "WITH doomed AS (SELECT store_id, session_id FROM {h}"
        " WHERE store_id = %s AND expires_at <= now() ORDER BY expires_at LIMIT %s FOR UPDATE SKIP LOCKED)"
        " DELETE FROM {h} h USING doomed d WHERE h.store_id = d.store_id AND h.session_id = d.session_id"
        " RETURNING h.session_id"
    ),
    "lock": "SELECT pg_advisory_lock(hashtextextended(%s, 0))",
    "unlock": "SELECT pg_advisory_unlock(hashtextextended(%s, 0))",
    "set_lock_timeout": "SELECT set_config('lock_timeout', %s, true)",
}
"""The statements by name (``{h}``, ``{l}``, ``{k}``: the tables; module docstring)."""


def build_transcript_sql(sql: Any, schema: str) -> dict[str, Any]:
    """:data:`SQL` composed for ``schema`` (``sql`` is ``psycopg.sql``)."""
    tables = {
        "h": sql.Identifier(schema, "sk_transcripts"),
        "l": sql.Identifier(schema, "sk_transcript_lines"),
        "k": sql.Identifier(schema, "sk_transcript_keys"),
    }
    return {name: sql.SQL(text).format(**tables) for name, text in SQL.items()}


class _Head(msgspec.Struct, gc=False):
    type: Any = None
    id: Any = None
    parentId: Any = None  # noqa: N815 - the on-disk key


_HEAD: Final = msgspec.json.Decoder(_Head)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and storable_key(value, nul_ok=False) else None


MAX_INDEXED_ID_BYTES: Final = 256
"""The longest entry id (UTF-8 bytes) the indexed columns hold as itself (a pi id is 8 hex digits)."""

LONG_ID_PREFIX: Final = "\x01sk-sha256:"
"""What starts the indexed stand-in of a longer id (and of an id that itself starts with this)."""


def indexed_id(value: str | None) -> str | None:
    """
    What the ``entry_id`` / ``parent_id`` columns hold for an entry id: the id itself, or, when it is
    longer than :data:`MAX_INDEXED_ID_BYTES` bytes in UTF-8 (a btree entry holds at most 2704 bytes:
    PostgreSQL refuses the row otherwise) or starts with :data:`LONG_ID_PREFIX`, that prefix and the
    SHA-256 of its UTF-8 in hex. One-to-one (but for SHA-256 collisions), so an id and a parent id
    that are equal map to equal values and the live read's parent walk stays exact; the line's bytes
    are kept as they are. ``None`` stays ``None``.
    """
    if value is None:
        return None
    raw = value.encode("utf-8")
    if len(raw) <= MAX_INDEXED_ID_BYTES and not value.startswith(LONG_ID_PREFIX):
        return value
    return LONG_ID_PREFIX + hashlib.sha256(raw).hexdigest()


def line_columns(line: bytes) -> tuple[str | None, str | None, str | None]:
    """
    ``(type, id, parentId)`` of one line for the indexed columns: string values only (``None`` when the
    line is not a JSON object, or a value is absent, not a string, or holds a NUL / lone surrogate);
    the ids as :func:`indexed_id` maps them.
    """
    try:
        head = _HEAD.decode(line)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        return None, None, None
    return _text(head.type), indexed_id(_text(head.id)), indexed_id(_text(head.parentId))


@attrs.frozen
class MarkToken:
    """A mark's token: which transcript incarnation (``generation``) in which schema and store."""

    schema: str
    store_id: str
    generation: int


class PostgresClaim:
    """
    A writer claim of :class:`~sessionkeeper.store.PostgresTranscriptStorage`: a session-level advisory
    lock held by one pool connection (``_postgres_transcripts``), for ``owner`` = (schema, store id,
    session id); ``where`` names it in errors, ``unlock`` is the statement that gives it up.
    """

    def __init__(
        self,
        *,
        owner: tuple[str, str, str],
        where: str,
        unlock: tuple[Any, str],
        pool: AsyncConnectionPool[Any],
        conn: AsyncConnection[Any],
    ) -> None:
        self.owner: tuple[str, str, str] = owner
        self._where = where
        self._unlock = unlock
        self._pool = pool
        self._conn: AsyncConnection[Any] | None = conn
        self._released = False
        self.use: asyncio.Lock = asyncio.Lock()  # one statement sequence at a time on the connection

    def _alive(self) -> bool:
        conn = self._conn
        return conn is not None and not conn.closed and not conn.broken

    @property
    def held(self) -> bool:
        """Whether the claim is still held (``False`` once released, or when its connection died)."""
        return not self._released and self._alive()

    def ensure_held(self) -> None:
        """Raise :class:`~sessionkeeper.exceptions.LockNotHeldError` unless held."""
        if not self.held:
            reason = "released" if self._released else "lost"
            where = self._where
            raise LockNotHeldError(f"the writer claim of {where} was {reason}", path=where, reason=reason)

    def connection(self) -> AsyncConnection[Any]:
        """The lock-holding connection (after :meth:`ensure_held`)."""
        assert self._conn is not None
        return self._conn

    async def release(self) -> None:
        """Unlock and give the connection back (a second call, or one after the claim was lost: nothing)."""
        if self._released:
            return
        self._released = True
        conn, self._conn = self._conn, None
        if conn is None:
            return
        async with self.use:
            try:
                if not conn.broken and not conn.closed:
                    await conn.execute(self._unlock[0], (self._unlock[1],))
            except Exception:  # a connection that cannot say it unlocked is closed: that unlocks it
                await conn.close()
            finally:
                await self._pool.putconn(conn)


async def forward_batches(
    page: Callable[[int], Awaitable[list[Any]]], *, location: str
) -> AsyncIterator[list[bytes]]:
    """
    A transcript's lines first to last, one page of the ``forward`` statement at a time (``page(start)``:
    its rows for lines ``seq >= start``), up to the line count the first page saw (lines appended later
    are not included, as a file read up to its size).

    Raises:
        TranscriptNotFoundError: No such transcript (on the first iteration).
        TranscriptChangedError: It was deleted or re-created while it was read.
    """
    start = 0
    generation: int | None = None
    end = 0
    while generation is None or start < end:
        rows = await page(start)
        if not rows:
            if generation is None:
                raise TranscriptNotFoundError(f"transcript not found: {location}")
            raise TranscriptChangedError("the transcript was deleted while it was read", path=location)
        if generation is None:
            generation, end = int(rows[0][0]), int(rows[0][1])
        elif int(rows[0][0]) != generation:
            raise TranscriptChangedError("the transcript was replaced while it was read", path=location)
        found = [(int(row[2]), bytes(row[3])) for row in rows if row[3] is not None and row[2] < end]
        if not found:
            break
        start = found[-1][0] + 1
        yield [line for _, line in found]
