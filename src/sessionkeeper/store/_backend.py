"""
The ``StoreBackend`` protocol: where session entries live (DESIGN "Storage backends").

Every backend stores ``session key -> SessionEntry`` with the same semantics, proved by the conformance
suite in :mod:`sessionkeeper.testing.conformance`:

- reads return what the last committed write stored (unknown fields included);
- :meth:`StoreBackend.update` and :meth:`StoreBackend.transaction` are atomic read-modify-write
  operations: concurrent callers (tasks, threads, processes where the backend is shared between them)
  never lose an update;
- a write either happens completely or not at all;
- iteration order is insertion order (a new key goes last; updating a key keeps its place).

All methods are async (anyio: asyncio and trio); blocking I/O runs in worker threads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol, TypeVar, runtime_checkable

import attrs
from msgspec import UNSET

from sessionkeeper.exceptions import InvalidSessionEntryError
from sessionkeeper.store._entry import SessionEntry
from sessionkeeper.store._entry_shape import is_safe_store_session_id


__all__ = (
    "EntryUpdater",
    "LazyStampBackend",
    "LoadReport",
    "RowsAlwaysLoad",
    "StoreBackend",
    "StoreTransaction",
    "check_entry",
    "diff_entries",
)

T = TypeVar("T")

EntryUpdater = Callable[[SessionEntry | None], SessionEntry | None]
"""
The function given to :meth:`StoreBackend.update`: receives the stored entry (``None`` when the key is
absent) and returns the entry to store, or ``None`` to leave the store unchanged (nothing is written).
It runs while the backend's writer lock is held: keep it quick and free of I/O.
"""

StoreTransaction = Callable[[dict[str, SessionEntry]], T]
"""
The function given to :meth:`StoreBackend.transaction`: receives a private, mutable ``dict`` copy of the
whole store (insertion-ordered) and edits it in place (assign, ``del``, ``pop``); its return value is
returned to the caller. The edits are committed atomically when it returns; if it raises, nothing is.
"""


@attrs.frozen(kw_only=True)
class LoadReport:
    """
    What the last load of a file-backed store found (OpenClaw's load-time normalisation, spec §1.4).

    Attributes:
        entry_count: Entries kept.
        dropped_keys: Keys whose rows failed OpenClaw's shape check and were dropped, as OpenClaw drops
            them (unsafe ``sessionId``, non-object row). They disappear from the file at the next write.
        normalized_keys: Keys whose rows were normalised on load (legacy field migration, a removed
            unsafe ``sessionId``, an invalid ``updatedAt`` set to 0, blank model fields, ...).
    """

    entry_count: int = 0
    dropped_keys: tuple[str, ...] = ()
    normalized_keys: tuple[str, ...] = ()


@runtime_checkable
class StoreBackend(Protocol):
    """
    **Protocol:** persistent ``session key -> SessionEntry`` storage used by
    :class:`~sessionkeeper.store.SessionStore`.

    Implementations: :class:`~sessionkeeper.store.InMemoryStoreBackend`,
    :class:`~sessionkeeper.store.JsonFileStoreBackend` (OpenClaw's ``sessions.json``),
    :class:`~sessionkeeper.store.SqliteStoreBackend`, and the PostgreSQL and Redis backends. To write
    one, implement the eight async methods and two properties below, validate written entries with
    :func:`~sessionkeeper.store.check_entry`, compute a transaction's edits with
    :func:`~sessionkeeper.store.diff_entries`, and run
    :func:`sessionkeeper.testing.conformance.run_backend_conformance` against it (``docs/testing.md``
    shows a 20-line backend passing it). Every rule stated on a method here is checked by that suite
    (the check's name in brackets), except where marked *not checked*.

    Rules for the whole backend:

    - A new instance from the factory (a new storage) is empty [``empty``].
    - Order: :meth:`keys` and :meth:`load_all` list keys in insertion order; replacing an entry
      (:meth:`put`, :meth:`update`, :meth:`transaction`) keeps its place; a key deleted and then
      stored again goes last [``order``].
    - Entries come back equal to what was stored, ``extra`` (unknown fields, and known fields whose
      value does not fit the declared type) included, and absent ``sessionId`` / ``updatedAt`` stay
      absent [``round_trip``, ``unset_fields``]; so do values ``JSON.parse`` reads but Python cannot
      hold (:class:`~sessionkeeper.store.RawJsonValue`) and lone surrogates [``raw_values``].
    - No lost update: 40 concurrent :meth:`update` calls from tasks of one event loop all count, and
      concurrent :meth:`put` calls of distinct keys all land [``concurrent_tasks``].
    - Persistence, when the storage outlives the instance (the suite's ``reopen``): a second instance
      sees committed data, updates from two instances both land, and a delete by one is seen by the
      other [``persistence``].
    - Call order (*not checked*; the built-in backends guarantee it, issue 11): calls on one instance
      apply in call order, as on an in-memory dict; a backend running blocking work in threads can
      queue them first in, first out.

    Errors: a store that cannot be parsed raises :class:`~sessionkeeper.exceptions.StoreCorruptError`
    (after a 0600 backup), a writer lock not acquired in time raises
    :class:`~sessionkeeper.exceptions.SessionBusyError`; ``OSError`` from the file system propagates.
    """

    async def load_all(self) -> dict[str, SessionEntry]:
        """
        Return every entry, in insertion order, as a new dict: mutating it must not change the store
        [``transaction``]. An empty store gives ``{}`` [``empty``].
        """
        ...

    async def get(self, session_key: str) -> SessionEntry | None:
        """Return the entry stored under ``session_key`` (exact key), or ``None`` [``empty``]."""
        ...

    async def keys(self) -> list[str]:
        """Return every session key, in insertion order; ``[]`` when empty [``empty``, ``order``]."""
        ...

    async def put(self, session_key: str, entry: SessionEntry) -> None:
        """
        Store ``entry`` under ``session_key``, replacing any previous entry (in its place).

        Raises:
            TypeError: ``entry`` is not a :class:`SessionEntry` (a dict included) or ``session_key`` not
                a ``str``; nothing is stored [``update_raises``]. :func:`check_entry` does both checks.
            InvalidSessionEntryError: The ``sessionId`` fails OpenClaw's load-time check
                (:func:`check_entry`; *not checked* by the suite).
        """
        ...

    async def update(self, session_key: str, fn: EntryUpdater) -> SessionEntry | None:
        """
        Atomically replace the entry under ``session_key`` with ``fn(current)`` [``update``].

        ``fn`` receives the stored entry, ``None`` when the key is absent; it returns the entry to store
        (validated like :meth:`put`), or ``None`` to change nothing (no key is created). Read, ``fn`` and
        write are one atomic step: no other write to the key may come between them
        [``concurrent_tasks``].

        Returns:
            The entry stored afterwards: ``fn``'s result, or the unchanged current entry (``None`` if
            absent) when ``fn`` returned ``None``.

        Raises:
            BaseException: Whatever ``fn`` raised, unchanged; the entry is left as it was
                [``update_raises``].
        """
        ...

    async def delete(self, session_key: str) -> bool:
        """Remove ``session_key``; return ``True`` if it existed, ``False`` if not [``empty``, ``order``]."""
        ...

    @property
    def store_file(self) -> Path | None:
        """
        The one file holding the whole store as OpenClaw's ``sessions.json`` object, or ``None`` when
        the store is not such a file (memory, SQLite, PostgreSQL, Redis) [``maintenance``].

        Maintenance (:func:`~sessionkeeper.store.run_maintenance`) reads it: its directory holds the
        transcripts when a bare backend is given, the disk budget counts it at the size the remaining
        entries serialise to, an empty one is refused (B21), and it is backed up before a repair.
        After a committed write it holds exactly the stored keys [``maintenance``].
        """
        ...

    @property
    def dropped_keys(self) -> tuple[str, ...]:
        """
        Keys of the rows the last load found but did not return, because they failed OpenClaw's
        load-time shape check (spec §1.4: a non-object row, an unsafe ``sessionId``); ``()`` for a
        storage that cannot hold such rows. A fresh, empty store has none [``maintenance``].
        Maintenance reports them as ``drop-unsafe`` and purges them (``transaction(purge_dropped=True)``).
        """
        ...

    async def transaction(self, fn: StoreTransaction[T], *, purge_dropped: bool = False) -> T:
        """
        Run ``fn`` on a mutable copy of the whole store and commit its edits atomically (maintenance)
        [``transaction``].

        ``fn`` gets a private ``dict`` (insertion-ordered) and edits it in place; deletions,
        replacements (kept in place) and new keys (last, in the dict's order) are committed together
        when it returns, and its return value is returned. If it raises, nothing is committed and the
        exception propagates unchanged.

        With ``purge_dropped=True`` the commit also removes the rows of :attr:`dropped_keys`, even
        when ``fn`` changed nothing (maintenance's repair, as OpenClaw's applied cleanup rewrites the
        loaded store); otherwise it behaves exactly as without it [``maintenance``]. Default ``False``:
        a transaction that changes nothing writes nothing.
        """
        ...

    async def aclose(self) -> None:
        """Release resources (connections, file handles). The backend is unusable afterwards."""
        ...


@runtime_checkable
class LazyStampBackend(Protocol):
    """
    A backend whose entry update can commit without waiting for its own durability when the write is
    only an activity stamp (issue 13: a commit's WAL flush is most of a database turn).

    :meth:`SessionStore.resolve <sessionkeeper.store.SessionStore.resolve>` uses it when the decision
    reuses the stored entry (no new key, no rollover): the write then changes ``updatedAt`` and
    ``lastInteractionAt`` (and a missing ``sessionStartedAt`` derived from stored facts), nothing a
    later step relies on being on disk before its own durable write. Such a commit is atomic and visible
    to every other writer at once, as any other (same row lock, same compare-and-swap); only its
    durability waits for the next durable commit on the same server, which writes the log up to and
    past it (or for the server's own log flush, a fraction of a second later). A server crash in
    between forgets the stamp, and with it nothing else. Backends without this capability write the
    stamp with :meth:`StoreBackend.update` (durably).
    """

    async def update_lazily(
        self, session_key: str, fn: EntryUpdater, *, lazy: Callable[[], bool]
    ) -> SessionEntry | None:
        """
        :meth:`StoreBackend.update`, except that when ``lazy()`` (asked after ``fn`` ran, under the same
        lock) is true, the commit does not wait for its durability (class docstring).
        """
        ...


class RowsAlwaysLoad:
    """
    The maintenance members of a backend whose store is not one ``sessions.json`` file and whose every
    stored row loads (a row that does not decode raises ``StoreCorruptError`` instead of being dropped):
    memory, SQLite, PostgreSQL and Redis inherit them.
    """

    @property
    def store_file(self) -> None:
        """``None``: the store is not one JSON file (:attr:`StoreBackend.store_file`)."""
        return None

    @property
    def dropped_keys(self) -> tuple[str, ...]:
        """``()``: no row is ever dropped on load (:attr:`StoreBackend.dropped_keys`)."""
        return ()


def diff_entries(
    before: Mapping[str, SessionEntry], after: Mapping[str, SessionEntry]
) -> tuple[dict[str, SessionEntry], list[str]]:
    """
    Return the upserts (changed or new keys, in ``after``'s order) and removals between two snapshots.

    Entries are compared by identity first, then by value.
    """
    upserts: dict[str, SessionEntry] = {}
    for key, entry in after.items():
        old = before.get(key)
        if old is None or (old is not entry and old != entry):
            upserts[key] = entry
    removals = [key for key in before if key not in after]
    return upserts, removals


def check_entry(session_key: object, entry: object) -> None:
    """
    Check an entry before it is written.

    Raises:
        TypeError: ``session_key`` is not a ``str`` or ``entry`` not a :class:`SessionEntry`.
        InvalidSessionEntryError: Its ``sessionId`` fails OpenClaw's load-time check
            (:func:`is_safe_store_session_id`): the next load (ours or OpenClaw's) would drop the whole
            entry, and the save after it erase the row.
    """
    if not isinstance(session_key, str):
        raise TypeError(f"session keys are strings, got {type(session_key).__name__}")
    if not isinstance(entry, SessionEntry):
        raise TypeError(f"expected a SessionEntry for {session_key!r}, got {type(entry).__name__}")
    session_id = entry.session_id
    if session_id is not UNSET and not is_safe_store_session_id(session_id):
        raise InvalidSessionEntryError(
            f"unsafe sessionId {session_id!r} for {session_key!r}: the store would drop the entry on load "
            "(1-255 characters matching [A-Za-z0-9][A-Za-z0-9._:@-]*)"
        )
