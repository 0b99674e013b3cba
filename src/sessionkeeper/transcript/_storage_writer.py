"""
:class:`StorageWriter`: where one :class:`~sessionkeeper.transcript.TranscriptManager`'s lines go when
its transcript lives in a :class:`~sessionkeeper.abc.TranscriptStorage` other than a file (memory, a
database): each append is conditional on the mark the manager has seen; when others appended first
(:class:`~sessionkeeper.exceptions.StaleTranscriptError`) their lines are read, the pending entries
re-linked as for a file (ids they took redrawn; under their last entry when the manager was at the tip,
issue #7) and the append is tried again. Their lines are indexed once the append landed.
"""

from __future__ import annotations

from collections.abc import Sequence

from sessionkeeper.exceptions import StaleTranscriptError, TranscriptFormatError
from sessionkeeper.transcript._index import TranscriptIndex
from sessionkeeper.transcript._lines import parse_entry_line
from sessionkeeper.transcript._riders import AppendRider, RidingStorage
from sessionkeeper.transcript._storage import StorageMark, TranscriptStorage
from sessionkeeper.transcript.file._follow import ForeignLines, PendingWrite, apply_foreign


__all__ = ("StorageWriter", "foreign_lines")

MAX_RETRIES = 100
"""Conditional appends tried before giving up (each retry follows lines another writer landed)."""


def foreign_lines(lines: Sequence[bytes], *, since: StorageMark) -> ForeignLines | None:
    """
    Lines other writers appended after ``since``, in the shape the index takes them (``None``: none).
    """
    if not lines:
        return None
    ids: set[str] = set()
    last_id: str | None = None
    for line in lines:
        record = parse_entry_line(line)
        if record is not None and record.entry_id is not None:
            ids.add(record.entry_id)
            last_id = record.entry_id
    data = b"".join(line + b"\n" for line in lines)
    return ForeignLines(
        offset=since.size, data=data, first_line=since.lines, last_id=last_id, ids=frozenset(ids)
    )


def _joined(first: ForeignLines | None, more: ForeignLines | None) -> ForeignLines | None:
    if first is None or more is None:
        return first if more is None else more
    return ForeignLines(
        offset=first.offset,
        data=first.data + more.data,
        first_line=first.first_line,
        last_id=more.last_id if more.last_id is not None else first.last_id,
        ids=first.ids | more.ids,
    )


class StorageWriter:
    """
    The storage side of one manager (module docstring).

    Attributes:
        storage: The storage.
        session_id: The transcript's session id in it.
        mark: How much of the transcript the manager's index holds.
        legacy: The transcript was migrated from v1/v2 in memory; a storage cannot rewrite it, so
            appends are refused.
    """

    def __init__(
        self, storage: TranscriptStorage, session_id: str, mark: StorageMark, *, legacy: bool
    ) -> None:
        self.storage: TranscriptStorage = storage
        self.session_id: str = session_id
        self.mark: StorageMark = mark
        self.legacy: bool = legacy

    def take_foreign(self, index: TranscriptIndex, foreign: ForeignLines | None, mark: StorageMark) -> int:
        """Index other writers' lines read up to ``mark`` (on the thread that owns the index)."""
        self.mark = mark
        return apply_foreign(index, foreign) if foreign is not None else 0

    async def read_foreign(self) -> tuple[ForeignLines | None, StorageMark]:
        """What other writers appended since the mark, and the mark after it."""
        lines, mark = await self.storage.read_since(self.session_id, self.mark)
        return foreign_lines(lines, since=self.mark), mark

    async def write(
        self, index: TranscriptIndex, pending: PendingWrite, *, rider: AppendRider | None = None
    ) -> bool:
        """
        Append ``pending``'s lines at the manager's mark, following other writers (module docstring);
        with ``rider`` in the same transaction when the storage carries it (``_riders``). Returns
        whether it did (``False``: the caller runs the rider on its own).

        Raises:
            TranscriptFormatError: The transcript is a migrated v1/v2 one (rewrite it as a file first).
            StaleTranscriptError: Other writers kept appending through :data:`MAX_RETRIES` tries, or
                appended once before an ``exact`` write (:attr:`PendingWrite.exact`).
            TranscriptChangedError, TranscriptNotFoundError: As the storage's ``append``.
        """
        if self.legacy:
            raise TranscriptFormatError(
                "a v1/v2 transcript is migrated by rewriting it, which a storage does not do; nothing was"
                " written (migrate it as a file first)",
                path=self.storage.location(self.session_id),
            )
        mark = self.mark
        foreign: ForeignLines | None = None
        storage = self.storage
        carrier = storage if rider is not None and isinstance(storage, RidingStorage) else None
        carried = carrier is not None and rider is not None and carrier.carries(rider)
        for _ in range(MAX_RETRIES):
            try:
                if carried:
                    assert carrier is not None and rider is not None
                    after = await carrier.append_carrying(
                        self.session_id, pending.lines, mark=mark, rider=rider
                    )
                else:
                    after = await storage.append(self.session_id, pending.lines, mark=mark)
            except StaleTranscriptError:
                if pending.exact:
                    raise  # nothing written; the caller picks the lines up and builds again
                lines, newer = await self.storage.read_since(self.session_id, mark)
                foreign = _joined(foreign, foreign_lines(lines, since=mark))
                if foreign is not None:
                    pending.rebase(foreign)  # under the latest tip; ids any of them took redrawn
                mark = newer
                continue
            self.take_foreign(index, foreign, after)
            return carried
        raise StaleTranscriptError(
            f"other writers appended through {MAX_RETRIES} tries; nothing was written",
            path=self.storage.location(self.session_id),
        )
