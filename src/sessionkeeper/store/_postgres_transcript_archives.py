"""
Archived transcripts in PostgreSQL (issue 13): a mixin of
:class:`~sessionkeeper.store.PostgresTranscriptStorage` that makes it an
:class:`~sessionkeeper.abc.ArchivingTranscriptStorage`.

The storage equivalent of OpenClaw's ``<file>.reset.<stamp>`` / ``<file>.deleted.<stamp>`` renames (spec
§1.5, §2.4): archiving renames the head row's ``session_id`` to ``<session id>/<reason>/<stamp>`` (a name
no live transcript can have: a session id holds no ``/``) and sets ``archived_at``, ``archive_reason`` and
``archived_from`` (migration 4); the lines and idempotency keys follow through ``ON UPDATE CASCADE``. So
every read of the seam finds no transcript under the id, a new one may be created under it, and
``list_sessions()`` (``archived_at IS NULL``) leaves it out, while its lines stay until retention deletes
the row (:meth:`~PostgresTranscriptArchives.delete_archive`, or store maintenance's set-based retention,
``maintenance/_postgres_transcripts.py``). Archiving rewrites the primary key of each line row: O(lines)
in one statement, once per reset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, TypeVar

from sessionkeeper.exceptions import TranscriptNotFoundError
from sessionkeeper.store._entry import SessionEntry
from sessionkeeper.store._postgres_transcript_parts import StorageHost
from sessionkeeper.store._remote import decode_entry_text, storable_key
from sessionkeeper.transcript import ArchiveReason, TranscriptArchive, archive_stamp


if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from sessionkeeper.store._postgres import PostgresStoreBackend


__all__ = ("PostgresTranscriptArchives", "archive_name", "delete_returning", "entry_using")

R = TypeVar("R")

_ARCHIVES: Final[dict[str, str]] = {
    "archive": (
        "UPDATE {h} SET session_id = %(name)s, archived_at = to_timestamp(%(ms)s / 1000.0),"
        " archive_reason = %(reason)s, archived_from = session_id"
        " WHERE store_id = %(store)s AND session_id = %(session)s AND archived_at IS NULL"
        " RETURNING byte_size"
    ),
    "list": (
        "SELECT session_id, archived_from, archive_reason,"
        " round(extract(epoch FROM archived_at) * 1000)::bigint, byte_size FROM {h}"
        ' WHERE store_id = %s AND archived_at IS NOT NULL ORDER BY archived_at, session_id COLLATE "C"'
    ),
    "delete": "DELETE FROM {h} WHERE store_id = %s AND session_id = %s AND archived_at IS NOT NULL",
}


_USER: Final = "SELECT session_key FROM {t} WHERE store_id = %s AND session_id = %s ORDER BY seq LIMIT 1"


async def entry_using(backend: PostgresStoreBackend, session_id: str) -> str | None:
    """
    The key of an entry of ``backend``'s store whose ``sessionId`` is ``session_id`` (the first in
    insertion order), or ``None``: one probe of the ``(store_id, session_id)`` index, so a reset
    checks whether its old transcript is still used without reading the store.
    """

    async def body(conn: AsyncConnection[Any]) -> str | None:
        sql = backend._sql_module
        query = sql.SQL(_USER).format(t=sql.Identifier(backend.schema, "sk_sessions"))
        cur = await conn.execute(query, (backend.store_id, session_id))
        row = await cur.fetchone()
        return None if row is None else str(row[0])

    return await backend._run(body, write=False, turn=None)


_DELETE: Final = "DELETE FROM {t} WHERE store_id = %s AND session_key = %s RETURNING entry_text"


async def delete_returning(backend: PostgresStoreBackend, session_key: str) -> SessionEntry | None:
    """
    Delete ``session_key``'s row and return the entry it held (``None``: there was none), one
    statement on the primary key, so ``SessionStore.delete`` neither reads nor locks the other rows.
    """
    if not storable_key(session_key, nul_ok=False):
        return None

    async def body(conn: AsyncConnection[Any]) -> SessionEntry | None:
        sql = backend._sql_module
        query = sql.SQL(_DELETE).format(t=sql.Identifier(backend.schema, "sk_sessions"))
        async with conn.transaction():  # a row that does not decode is not deleted (StoreCorruptError)
            cur = await conn.execute(query, (backend.store_id, session_key))
            row = await cur.fetchone()
            return None if row is None else decode_entry_text(session_key, row[0], where=backend.where)

    return await backend._run(body, write=True, turn=session_key)


def archive_name(session_id: str, reason: ArchiveReason, now_ms: int) -> str:
    """``<session id>/<reason>/<stamp>``: an archive's ``session_id`` (and :attr:`TranscriptArchive.name`)."""
    return f"{session_id}/{reason}/{archive_stamp(now_ms)}"


class PostgresTranscriptArchives(StorageHost):
    """The archives of :class:`~sessionkeeper.store.PostgresTranscriptStorage` (module docstring)."""

    def _archive_sql(self, name: str) -> Any:
        from psycopg import sql as psycopg_sql  # noqa: PLC0415 - the optional extra, imported on first use

        sql: Any = psycopg_sql  # the statements are this module's constants (not LiteralString-typed)
        return sql.SQL(_ARCHIVES[name]).format(h=sql.Identifier(self.schema, "sk_transcripts"))

    async def archive(
        self, session_id: str, *, reason: ArchiveReason, now_ms: int
    ) -> TranscriptArchive | None:
        """
        Archive the transcript as ``<session id>/<reason>/<stamp>`` (module docstring; one statement).

        Returns:
            The archive, or ``None`` when there is no such transcript.

        Raises:
            FileExistsError: An archive of that name exists (same id, reason and millisecond).
            UnsafePathError: ``session_id`` is not a safe name.
        """
        self._check_id(session_id)
        name = archive_name(session_id, reason, now_ms)
        from psycopg import errors  # noqa: PLC0415 - the optional extra

        async def body(conn: AsyncConnection[Any]) -> int | None:
            params = {"name": name, "ms": int(now_ms), "reason": reason, "store": self.store_id}
            try:
                cur = await conn.execute(self._archive_sql("archive"), {**params, "session": session_id})
            except errors.UniqueViolation as err:
                raise FileExistsError(f"archive exists: {self.location(name)}") from err
            row = await cur.fetchone()
            return None if row is None else int(row[0])

        size = await self._run(session_id, body, write=True)
        if size is None:
            return None
        return TranscriptArchive(
            name=name, session_id=session_id, reason=reason, archived_at_ms=int(now_ms), size=size
        )

    async def list_archives(self) -> list[TranscriptArchive]:
        """This store's archives, oldest first (then by name); head rows only, no line."""

        async def body(conn: AsyncConnection[Any]) -> list[Any]:
            cur = await conn.execute(self._archive_sql("list"), (self.store_id,))
            return await cur.fetchall()

        try:
            rows = await self._run("*", body, write=False)
        except TranscriptNotFoundError:  # a read-only open before the tables exist: none
            return []
        return [
            TranscriptArchive(
                name=name,
                session_id=origin,
                reason="reset" if reason == "reset" else "deleted",
                archived_at_ms=int(at),
                size=int(size),
            )
            for name, origin, reason, at, size in rows
        ]

    async def delete_archive(self, name: str) -> bool:
        """Remove the archive ``name`` and its lines (cascade); ``False`` when there is none."""
        if not storable_key(name, nul_ok=False):
            return False

        async def body(conn: AsyncConnection[Any]) -> bool:
            cur = await conn.execute(self._archive_sql("delete"), (self.store_id, name))
            return cur.rowcount > 0

        return await self._run(name, body, write=True)
