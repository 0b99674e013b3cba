"""
:class:`EntryRider`: a patch of a session's store entry that lands with a transcript append (issue 13: a
database turn's reply and its usage in one commit; ``transcript._riders``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sessionkeeper.exceptions import SessionNotFoundError
from sessionkeeper.store._backend import StoreBackend, check_entry
from sessionkeeper.store._entry import SessionEntry


if TYPE_CHECKING:
    from sessionkeeper.store._store import SessionStore


__all__ = ("EntryRider",)


class EntryRider:
    """
    ``store.patch(session_key, fields, create=False)`` made with a transcript append: an
    :class:`~sessionkeeper.transcript.AppendRider` for
    :meth:`TranscriptManager.append_messages <sessionkeeper.transcript.TranscriptManager.append_messages>`
    and :meth:`~sessionkeeper.transcript.TranscriptManager.append_chain`.

    A storage that carries it (:class:`~sessionkeeper.store.PostgresTranscriptStorage` on the store's own
    backend: ``SessionStore.open("postgresql://...")``) makes the append and the patch one transaction,
    one commit: both land or neither, and the entry update keeps its row lock and revision
    compare-and-swap. Any other storage appends, then the patch runs on its own
    (:meth:`run_alone`), as two writes did before. Either way the append is never refused for the
    patch's sake: a missing entry or a refused patch leaves the appended lines, and :meth:`result`
    raises afterwards.

    Args:
        store: The store holding the entry.
        session_key: Its key.
        fields: The patch (as :meth:`SessionStore.patch`: keys by Python or on-disk name, ``msgspec.UNSET``
            removes a field); ``updatedAt`` becomes now (activity), taken when the rider is made.
    """

    def __init__(self, store: SessionStore, session_key: str, fields: Mapping[str, Any]) -> None:
        self.store: SessionStore = store
        self.session_key: str = session_key
        self._fields = dict(fields)
        self._now = store.clock.now_ms()
        self._entry: SessionEntry | None = None
        self._error: Exception | None = None
        self._done = False

    @property
    def backend(self) -> StoreBackend:
        """The store's backend (a storage carries the rider only on this same backend)."""
        return self.store.backend

    def apply(self, current: SessionEntry | None) -> SessionEntry | None:
        """
        The backend updater: the merged entry, or ``None`` (nothing written) when the entry is missing or
        the patch is refused (kept for :meth:`result`). Pure but for that note; may run more than once.
        """
        self._error = None
        if current is None:
            self._error = SessionNotFoundError(self.session_key)
            return None
        try:
            merged = self.store._merge(current, self._fields, now_ms=self._now, preserve_activity=False)
            check_entry(self.session_key, merged)
        except Exception as err:
            self._error = err
            return None
        return merged

    def landed(self, entry: SessionEntry | None) -> None:
        """The write committed (with the append, or on its own); ``entry``: the stored entry after it."""
        self._entry = entry
        self._done = True

    async def run_alone(self) -> None:
        """The patch on its own, after the append (``AppendRider``): errors are kept for :meth:`result`."""
        try:
            self.landed(await self.store.backend.update(self.session_key, self.apply))
        except Exception as err:
            self._error = err
            self._done = True

    def result(self) -> SessionEntry:
        """
        The stored entry after the patch.

        Raises:
            SessionNotFoundError: The entry was gone; nothing was written to it.
            RuntimeError: The rider was never run (the append wrote nothing).
            Exception: What refused the patch (an invalid entry, the store unavailable), unchanged.
        """
        if self._error is not None:
            raise self._error
        if not self._done or self._entry is None:
            raise RuntimeError(f"the entry patch of {self.session_key!r} did not run")
        return self._entry
