"""
Appends that carry a store entry patch (:class:`~sessionkeeper.transcript.RidingStorage`; issue 13: a
database turn's reply and its usage in one commit) for
:class:`~sessionkeeper.store.PostgresTranscriptStorage`, and the append statement's parameters it shares
with the plain append.

The transaction, on one pool connection in pipeline mode: ``BEGIN``, the append statement (under the
transcript's advisory lock, its compare-and-swap on the head row) and the entry's ``SELECT ... FOR
UPDATE`` go in one round trip; the entry ``UPDATE`` (its revision compare-and-swap, the row locked)
goes with ``COMMIT``. When the append did not land (a stale mark, a replaced or missing transcript)
the whole transaction rolls back and the append's refusal is raised: the entry is untouched too. Lock
order: the transcript's advisory lock, then the entry's row (nothing takes them the other way round).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sessionkeeper.store._entry_rider import EntryRider
from sessionkeeper.store._postgres_pool import Unit
from sessionkeeper.store._postgres_transcript_parts import line_columns
from sessionkeeper.transcript import AppendRider, StorageMark, check_lines


if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from sessionkeeper.store._postgres_transcripts import PostgresTranscriptStorage


__all__ = ("append_carrying", "append_params", "carries")


def append_params(
    storage: PostgresTranscriptStorage,
    session_id: str,
    content: Sequence[bytes],
    *,
    mark: StorageMark,
    generation: int,
    key: bytes | None,
) -> dict[str, Any]:
    """The parameters of the ``append`` / ``append_locked`` statement for ``content`` at ``mark``."""
    columns = [line_columns(line) for line in content]
    return {
        "store": storage.store_id,
        "session": session_id,
        "generation": generation,
        "seen_lines": mark.lines,
        "seen_size": mark.size,
        "lines": len(content),
        "size": sum(len(line) + 1 for line in content),
        "ttl": storage.ttl,
        "first": mark.lines,
        "data": content,
        "types": [c[0] for c in columns],
        "ids": [c[1] for c in columns],
        "parents": [c[2] for c in columns],
        "key": key,
    }


def carries(self: PostgresTranscriptStorage, rider: AppendRider) -> bool:
    """
    Whether :meth:`append_carrying` lands ``rider`` with an append: an
    :class:`~sessionkeeper.store.EntryRider` of a store on this storage's own backend (one database,
    one pool: ``SessionStore.open("postgresql://...")``).
    """
    return isinstance(rider, EntryRider) and rider.backend is self.backend and not self.backend.read_only


async def append_carrying(
    self: PostgresTranscriptStorage,
    session_id: str,
    lines: Sequence[bytes],
    *,
    mark: StorageMark,
    rider: AppendRider,
) -> StorageMark:
    """
    Append ``lines`` at ``mark`` and make ``rider``'s entry patch in the same transaction
    (:class:`~sessionkeeper.transcript.RidingStorage`; module docstring): both commit, or neither.

    Raises:
        TypeError: ``rider`` is not one this storage :meth:`carries`.
        StaleTranscriptError, TranscriptChangedError, TranscriptNotFoundError: As ``append``; nothing
            was written (the entry neither).
    """
    if not (isinstance(rider, EntryRider) and self.carries(rider)):
        raise TypeError(f"{self!r} cannot carry {type(rider).__name__} (use append, then run_alone)")
    self._check_id(session_id)
    content = check_lines(lines, location=self.location(session_id))
    if not content:
        await rider.run_alone()
        return mark
    generation = self._token(session_id, mark)
    params = append_params(self, session_id, content, mark=mark, generation=generation, key=None)
    params["lock"] = self.lock_name(session_id)
    backend = self.backend
    phase = ["statements"]

    async def body(conn: AsyncConnection[Any]) -> StorageMark:
        async with conn.pipeline():
            async with conn.transaction():
                appended = await conn.execute(self._sql["append_locked"], params)
                # the locking read is sent with BEGIN and the append (one round trip), the update with
                # COMMIT; the entry is written only if the append landed (else all is rolled back)
                entry = await backend._update_locked(conn, rider.session_key, rider.apply, Unit(), None)
                row = await appended.fetchone()
                if row is None:  # without a key, a refusal raises (and rolls all of it back)
                    await self._not_appended(conn, session_id, mark, generation, None)
                    raise AssertionError("a refused append without a key raises")  # pragma: no cover
                phase[0] = "commit"  # leaving the block commits: from here the outcome is unknown
            rider.landed(entry)
            return self._mark(*row)

    async with backend._order.key(rider.session_key):  # the backend's call order on the key
        return await self._run(session_id, body, write=True, phase=phase)
