"""``InMemoryStoreBackend``: the store in a dict, for tests and ephemeral agents (DESIGN "Storage")."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TypeVar

from sessionkeeper.store._backend import (
    EntryUpdater,
    RowsAlwaysLoad,
    StoreTransaction,
    check_entry,
    diff_entries,
)
from sessionkeeper.store._entry import SessionEntry


__all__ = ("InMemoryStoreBackend",)

T = TypeVar("T")


class InMemoryStoreBackend(RowsAlwaysLoad):
    """
    A :class:`~sessionkeeper.store.StoreBackend` holding entries in memory; nothing is persisted.

    Same semantics as the file backends (one conformance suite runs on all): updates and transactions
    are atomic, also across threads sharing the instance (a ``threading.Lock`` guards the dict; the
    callbacks run under it, so they must not call back into the backend).

    Args:
        initial: Entries to start with (copied), in order.
    """

    def __init__(self, initial: Mapping[str, SessionEntry] | None = None) -> None:
        self._entries: dict[str, SessionEntry] = {}
        self._lock = threading.Lock()
        for key, entry in (initial or {}).items():
            check_entry(key, entry)
            self._entries[key] = entry

    def __repr__(self) -> str:
        return f"InMemoryStoreBackend({len(self._entries)} entries)"

    async def load_all(self) -> dict[str, SessionEntry]:
        """Return a copy of every entry, in insertion order."""
        with self._lock:
            return dict(self._entries)

    async def get(self, session_key: str) -> SessionEntry | None:
        """Return the entry under ``session_key``, or ``None``."""
        with self._lock:
            return self._entries.get(session_key)

    async def keys(self) -> list[str]:
        """Return every session key, in insertion order."""
        with self._lock:
            return list(self._entries)

    async def put(self, session_key: str, entry: SessionEntry) -> None:
        """Store ``entry`` under ``session_key``."""
        check_entry(session_key, entry)
        with self._lock:
            self._entries[session_key] = entry

    async def update(self, session_key: str, fn: EntryUpdater) -> SessionEntry | None:
        """Atomically replace the entry under ``session_key`` with ``fn(current)`` (``None``: no change)."""
        with self._lock:
            current = self._entries.get(session_key)
            new = fn(current)
            if new is None:
                return current
            check_entry(session_key, new)
            self._entries[session_key] = new
            return new

    async def delete(self, session_key: str) -> bool:
        """Remove ``session_key``; return whether it existed."""
        with self._lock:
            return self._entries.pop(session_key, None) is not None

    async def transaction(self, fn: StoreTransaction[T], *, purge_dropped: bool = False) -> T:
        """
        Run ``fn`` on a copy of the store; commit its edits atomically unless it raises.

        ``purge_dropped`` is accepted and ignored: this backend never drops a row on load.
        """
        with self._lock:
            working = dict(self._entries)
            result = fn(working)
            upserts, removals = diff_entries(self._entries, working)
            for key, entry in upserts.items():
                check_entry(key, entry)
            for key in removals:
                del self._entries[key]
            self._entries.update(upserts)
            return result

    async def aclose(self) -> None:
        """Nothing to release."""
