"""
Riders: a write that lands together with a transcript append (issue 13: a database turn's reply and its
store entry update in one commit, when the transcripts and the store share one database).

A :class:`TranscriptManager <sessionkeeper.transcript.TranscriptManager>` append given a rider lands it
in the append's own transaction when its storage is a :class:`RidingStorage` that
:meth:`~RidingStorage.carries` the rider (both land, or neither); otherwise it runs the rider on its own
(:meth:`AppendRider.run_alone`) right after the append landed, as two separate writes did before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from sessionkeeper.transcript._storage import StorageMark


__all__ = ("AppendRider", "RidingStorage")


class AppendRider(Protocol):
    """
    **Protocol:** a write made with a transcript append (module docstring). Made by the layer that owns
    the write (the store's :class:`~sessionkeeper.store.EntryRider`); the storage that carries it knows
    its concrete type.
    """

    async def run_alone(self) -> None:
        """
        Make the write on its own (the append has landed). Errors are kept for the rider's owner to
        raise, never raised here, so an append is never reported failed for its rider's sake.
        """
        ...


@runtime_checkable
class RidingStorage(Protocol):
    """
    **Protocol:** a :class:`~sessionkeeper.abc.TranscriptStorage` that can land some riders in the
    transaction of an append (PostgreSQL, with an entry update of the store on the same database).
    """

    def carries(self, rider: AppendRider) -> bool:
        """Whether :meth:`append_carrying` can land ``rider`` atomically with an append."""
        ...

    async def append_carrying(
        self, session_id: str, lines: Sequence[bytes], *, mark: StorageMark, rider: AppendRider
    ) -> StorageMark:
        """
        :meth:`TranscriptStorage.append <sessionkeeper.abc.TranscriptStorage.append>` (no claim, no
        idempotency key) whose transaction also makes ``rider``'s write: both commit, or neither (a
        refused append, ``StaleTranscriptError`` included, leaves the rider's write unmade too).
        """
        ...
