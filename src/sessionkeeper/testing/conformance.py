"""
The store-backend conformance suite: every contract of :class:`~sessionkeeper.store.StoreBackend`, as
checks runnable against any backend (DESIGN "Storage backends": one suite runs on all backends).

From pytest, one test per check::

    import pytest
    from sessionkeeper.testing.conformance import CONFORMANCE_CHECKS, ConformanceCheck

    @pytest.mark.anyio
    @pytest.mark.parametrize("check", CONFORMANCE_CHECKS, ids=lambda c: c.name)
    async def test_my_backend(check: ConformanceCheck, tmp_path):
        await check.run(lambda: MyBackend(tmp_path / "store"), reopen=lambda: MyBackend(tmp_path / "store"))

or everything at once: ``await run_backend_conformance(factory)`` (raises the first failure).

``factory`` returns a new, **empty** backend each call (it may be async). ``reopen``, when given,
returns another instance on the same storage as the last ``factory()`` result, to check persistence
and that two instances do not lose each other's updates. Failures raise :class:`ConformanceError`.

The rules checked are stated on :class:`~sessionkeeper.store.StoreBackend` and its methods, each
tagged with the check's name (``empty``, ``round_trip``, ``order``, ``update``, ``update_raises``:
``put`` of a non-:class:`~sessionkeeper.store.SessionEntry` raises ``TypeError``, ``unset_fields``,
``raw_values`` (:class:`~sessionkeeper.store.RawJsonValue` values and lone surrogates round-trip exactly),
``transaction``, ``maintenance``: what :func:`~sessionkeeper.store.run_maintenance` reads,
``concurrent_tasks``, ``persistence``), and tabled in ``docs/testing.md`` with a
20-line backend that passes. A backend author needs :func:`sessionkeeper.store.check_entry` and
:func:`sessionkeeper.store.diff_entries`.

The transcript-storage suite (:class:`~sessionkeeper.abc.TranscriptStorage`, issue 12) is used the same
way: :data:`TRANSCRIPT_STORAGE_CHECKS` of :class:`TranscriptStorageCheck` (``check.run(factory,
reopen=...)``, one test per check) or :func:`run_transcript_storage_conformance`; ``factory`` returns a
new, empty storage, ``reopen`` a second instance on the same place (the ``persistence`` check).
Failures raise :class:`TranscriptStorageConformanceError`.

Both kits share one runner: :class:`ContractCheck`, the generic base of :class:`ConformanceCheck` and
:class:`TranscriptStorageCheck` (``check.run(factory, reopen=...)``, the check's name first in every
failure, asyncio and trio alike).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar, Final

import anyio
import attrs
import msgspec
from msgspec import UNSET

from sessionkeeper._public import set_public_module
from sessionkeeper.exceptions import SessionKeeperError
from sessionkeeper.store import (
    RawJsonValue,
    SessionEntry,
    StoreBackend,
    session_entry_from_dict,
    session_entry_to_dict,
)
from sessionkeeper.testing._checks import ContractCheck, Expect, Factory, run_checks
from sessionkeeper.testing._transcript_conformance import (
    TRANSCRIPT_STORAGE_CHECKS,
    StorageFactory,
    TranscriptStorageCheck,
    TranscriptStorageConformanceError,
    run_transcript_storage_conformance,
)


__all__ = (
    "CONFORMANCE_CHECKS",
    "TRANSCRIPT_STORAGE_CHECKS",
    "BackendFactory",
    "ConformanceCheck",
    "ConformanceError",
    "ContractCheck",
    "StorageFactory",
    "TranscriptStorageCheck",
    "TranscriptStorageConformanceError",
    "run_backend_conformance",
    "run_transcript_storage_conformance",
)

BackendFactory = Factory[StoreBackend]
"""Returns a new empty backend (sync or async)."""


class ConformanceError(SessionKeeperError, AssertionError):
    """A backend broke a :class:`~sessionkeeper.store.StoreBackend` contract (names the check)."""


_expect = Expect(ConformanceError)


def _entry(session_id: str, updated_at: int, **fields: Any) -> SessionEntry:
    return SessionEntry(session_id=session_id, updated_at=updated_at, **fields)


_RICH: Final = session_entry_from_dict(
    {
        "sessionId": "3f1c2b9e-0000-4000-8000-000000000001",
        "updatedAt": 1789990375000,
        "sessionStartedAt": 1789989548000,
        "label": "Main ✓ — ünïcode",
        "chatType": "direct",
        "totalTokens": 88737,
        "totalTokensFresh": True,
        "estimatedCostUsd": 0.125,
        "deliveryContext": {"channel": "telegram", "to": "424242", "futureField": [1, {"x": None}]},
        "lastThreadId": 17,
        "pendingFinalDeliveryLastError": None,
        "heartbeatIsolated": True,
        "someFuturePluginState": {"nested": {"deep": ["a", 1, 2.5, False, None]}},
        "compactionCount": "not-a-number",
    }
)


@attrs.frozen(kw_only=True)
class ConformanceCheck(ContractCheck[StoreBackend]):
    """
    One contract check of :class:`~sessionkeeper.store.StoreBackend` (the runner is shared with the
    transcript-storage kit).

    Attributes:
        name: Short identifier (use as the pytest id).
        doc: The rule checked.
        body: The check: ``await body(factory, reopen)``.
        needs_reopen: The check is skipped by :func:`run_backend_conformance` without ``reopen``.

    ``await check.run(factory, reopen=None)`` runs it on backends from ``factory`` (and ``reopen``) and
    raises :class:`ConformanceError` when the contract does not hold, or the backend raised an exception
    the check did not expect (the original is the ``__cause__``); the message starts with the check's
    name. Also when ``reopen`` is missing where needed.
    """

    failure: ClassVar[type[SessionKeeperError]] = ConformanceError


@contextlib.asynccontextmanager
async def _opened(factory: BackendFactory | None) -> AsyncIterator[StoreBackend]:
    """A new backend from ``factory`` (:meth:`Expect.made`), closed when the block ends."""
    backend = await _expect.made(factory)
    try:
        yield backend
    finally:
        await backend.aclose()


async def _empty(factory: BackendFactory, _reopen: BackendFactory | None) -> None:
    async with _opened(factory) as b:
        _expect.that(await b.load_all() == {}, "a new backend must be empty")
        _expect.that(await b.keys() == [], "keys() of an empty backend must be []")
        _expect.that(await b.get("agent:main:main") is None, "get() of a missing key must be None")
        _expect.that(await b.delete("agent:main:main") is False, "delete() of a missing key must be False")


async def _round_trip(factory: BackendFactory, _reopen: BackendFactory | None) -> None:
    async with _opened(factory) as b:
        await b.put("agent:main:main", _RICH)
        got = await b.get("agent:main:main")
        _expect.that(got == _RICH, f"get() must return the stored entry, got {got!r}")
        assert got is not None
        _expect.that(
            session_entry_to_dict(got) == session_entry_to_dict(_RICH),
            "unknown fields and mistyped known fields must survive a round trip",
        )
        _expect.that((await b.load_all()) == {"agent:main:main": _RICH}, "load_all() must return the entry")


_RAW_TEXTS: Final = ("1e400", "-1E+999", "7" * 5000, "[" * 300 + "]" * 300)


def _raw_entries() -> dict[str, SessionEntry]:
    raw = {f"raw{i}": RawJsonValue(text) for i, text in enumerate(_RAW_TEXTS)}
    return {
        "k:raw": _entry("s1", 1, extra=dict(raw)),
        "k:raw+surrogate": _entry("s2", 2, label="lone \ud83d half", extra=dict(raw)),
    }


async def _raw_values(factory: BackendFactory, reopen: BackendFactory | None) -> None:
    async with _opened(factory) as b:
        entries = _raw_entries()
        for key, entry in entries.items():
            await b.put(key, entry)
        for key, entry in entries.items():
            got = await b.get(key)
            _expect.that(
                got == entry, f"values JSON.parse reads but Python cannot hold must round-trip ({key})"
            )
        if reopen is not None:
            async with _opened(reopen) as other:
                _expect.that(await other.load_all() == entries, "raw values must read back from storage")


async def _order(factory: BackendFactory, _reopen: BackendFactory | None) -> None:
    async with _opened(factory) as b:
        for i, key in enumerate(["k:c", "k:a", "k:b"]):
            await b.put(key, _entry(f"s{i}", 1000 + i))
        await b.put("k:a", _entry("s1", 5000))
        await b.update("k:c", lambda e: _entry("s0", 6000))
        _expect.that(
            await b.keys() == ["k:c", "k:a", "k:b"], "keys keep insertion order; updates keep places"
        )
        _expect.that(list(await b.load_all()) == ["k:c", "k:a", "k:b"], "load_all() keeps insertion order")
        await b.delete("k:a")
        await b.put("k:a", _entry("s9", 1))
        _expect.that(await b.keys() == ["k:c", "k:b", "k:a"], "a re-created key goes last")


async def _update(factory: BackendFactory, _reopen: BackendFactory | None) -> None:
    async with _opened(factory) as b:
        seen: list[SessionEntry | None] = []

        def create(current: SessionEntry | None) -> SessionEntry:
            seen.append(current)
            return _entry("s1", 10)

        stored = await b.update("k", create)
        _expect.that(seen == [None], "update() must pass None for a missing key")
        _expect.that(stored == _entry("s1", 10), "update() must return the stored entry")
        unchanged = await b.update("k", lambda cur: None)
        _expect.that(unchanged == _entry("s1", 10), "an updater returning None must change nothing")
        none = await b.update("missing", lambda cur: None)
        _expect.that(none is None, "returning None for a missing key must store nothing")
        _expect.that(await b.keys() == ["k"], "returning None must not create a key")
        await b.update("k", lambda cur: _entry("s1", 20, label="x") if cur is not None else None)
        _expect.that(await b.get("k") == _entry("s1", 20, label="x"), "update() must store the new entry")


async def _update_raises(factory: BackendFactory, _reopen: BackendFactory | None) -> None:
    async with _opened(factory) as b:
        await b.put("k", _entry("s1", 10))

        def boom(current: SessionEntry | None) -> SessionEntry:
            raise LookupError("updater failed")

        await _expect.raises(LookupError, "an update whose updater raises", lambda: b.update("k", boom))
        _expect.that(await b.get("k") == _entry("s1", 10), "a failed update must leave the entry unchanged")
        bad: Any = {"sessionId": "x"}
        await _expect.raises(TypeError, "put() of a non-SessionEntry", lambda: b.put("k", bad))


async def _unset_fields(factory: BackendFactory, _reopen: BackendFactory | None) -> None:
    async with _opened(factory) as b:
        legacy = session_entry_from_dict({"label": "no id, no updatedAt"})
        await b.put("legacy", legacy)
        got = await b.get("legacy")
        _expect.that(got == legacy, "an entry without sessionId/updatedAt must be stored as is")
        _expect.that(got is not None and got.updated_at is UNSET, "absent updatedAt must stay absent")


async def _transaction(factory: BackendFactory, _reopen: BackendFactory | None) -> None:
    async with _opened(factory) as b:
        for i in range(5):
            await b.put(f"k{i}", _entry(f"s{i}", i))

        def edit(entries: dict[str, SessionEntry]) -> int:
            del entries["k1"]
            entries.pop("k3")
            entries["k0"] = _entry("s0", 100)
            entries["k9"] = _entry("s9", 9)
            return len(entries)

        result = await b.transaction(edit)
        _expect.that(result == 4, "transaction() must return the function's result")
        _expect.that(await b.keys() == ["k0", "k2", "k4", "k9"], "transaction edits must all be committed")
        _expect.that(await b.get("k0") == _entry("s0", 100), "a modified entry must be stored")

        def failing(entries: dict[str, SessionEntry]) -> None:
            entries.clear()
            entries["new"] = _entry("n", 1)
            raise LookupError("abort")

        await _expect.raises(
            LookupError, "a transaction whose function raises", lambda: b.transaction(failing)
        )
        _expect.that(await b.keys() == ["k0", "k2", "k4", "k9"], "a failed transaction must commit nothing")
        snapshot = await b.load_all()
        snapshot.clear()
        _expect.that(len(await b.keys()) == 4, "load_all() must return a copy")


async def _maintenance(factory: BackendFactory, _reopen: BackendFactory | None) -> None:
    async with _opened(factory) as b:
        dropped: object = b.dropped_keys  # checked at run time: a user backend may return anything
        _expect.that(dropped == (), f"a new store has no dropped rows (an empty tuple), got {dropped!r}")
        store_file = b.store_file
        _expect.that(
            store_file is None or isinstance(store_file, Path),
            f"store_file is a Path or None: {store_file!r}",
        )
        for i in range(3):
            await b.put(f"k{i}", _entry(f"s{i}", i))

        def edit(entries: dict[str, SessionEntry]) -> str:
            del entries["k1"]
            entries["k5"] = _entry("s5", 5)
            return "done"

        result = await b.transaction(edit, purge_dropped=True)
        _expect.that(result == "done", "transaction(purge_dropped=True) must return the function's result")
        _expect.that(
            await b.keys() == ["k0", "k2", "k5"], "transaction(purge_dropped=True) must commit the edits"
        )
        unchanged = await b.transaction(len, purge_dropped=True)
        _expect.that(
            unchanged == 3 and await b.keys() == ["k0", "k2", "k5"], "an empty edit must change nothing"
        )

        def failing(entries: dict[str, SessionEntry]) -> None:
            entries.clear()
            raise LookupError("abort")

        await _expect.raises(
            LookupError,
            "a transaction(purge_dropped=True) whose function raises",
            lambda: b.transaction(failing, purge_dropped=True),
        )
        _expect.that(
            await b.keys() == ["k0", "k2", "k5"], "a failed transaction(purge_dropped=True) commits nothing"
        )
        _expect.that(b.dropped_keys == (), "rows the backend stored itself are never dropped")
        if store_file is not None:
            try:
                data = msgspec.json.decode(await anyio.Path(store_file).read_bytes())
            except (OSError, msgspec.DecodeError) as err:
                raise ConformanceError(f"store_file {store_file} must hold the store as JSON: {err}") from err
            _expect.that(
                isinstance(data, dict) and list(data) == ["k0", "k2", "k5"],
                f"store_file {store_file} must hold exactly the stored keys as one JSON object",
            )


async def _concurrent_tasks(factory: BackendFactory, _reopen: BackendFactory | None) -> None:
    tasks = 40
    async with _opened(factory) as b:
        await b.put("counter", _entry("s", 0, compaction_count=0))

        def bump(current: SessionEntry | None) -> SessionEntry:
            assert current is not None
            count = current.compaction_count if isinstance(current.compaction_count, int) else 0
            return _entry("s", count + 1, compaction_count=count + 1)

        async with anyio.create_task_group() as tg:
            for i in range(tasks):
                tg.start_soon(b.update, "counter", bump)
                tg.start_soon(b.put, f"other:{i}", _entry(f"o{i}", i))
        got = await b.get("counter")
        _expect.that(
            got is not None and got.compaction_count == tasks,
            f"{tasks} concurrent updates must all count, got {got!r}",
        )
        _expect.that(len(await b.keys()) == tasks + 1, "concurrent puts of distinct keys must all land")


async def _persistence(factory: BackendFactory, reopen: BackendFactory | None) -> None:
    async with _opened(factory) as b:
        await b.put("a", _RICH)
        await b.put("b", _entry("s2", 2))
        async with _opened(reopen) as other:
            _expect.that(await other.load_all() == {"a": _RICH, "b": _entry("s2", 2)}, "data must persist")
            await other.update("b", lambda cur: _entry("s2", 3))
            await b.update("a", lambda cur: _entry("s1", 4))
            _expect.that(
                await b.get("b") == _entry("s2", 3), "an instance must see another's committed update"
            )
            _expect.that(await other.get("a") == _entry("s1", 4), "updates from two instances must both land")
            await other.delete("b")
            _expect.that(await b.keys() == ["a"], "a delete by another instance must be visible")


CONFORMANCE_CHECKS: tuple[ConformanceCheck, ...] = (
    ConformanceCheck(name="empty", doc="a new backend is empty; missing keys read as None", body=_empty),
    ConformanceCheck(name="round_trip", doc="entries round-trip, unknown fields included", body=_round_trip),
    ConformanceCheck(name="order", doc="insertion order; updates keep places", body=_order),
    ConformanceCheck(name="update", doc="update() semantics (None = no change)", body=_update),
    ConformanceCheck(name="update_raises", doc="failed updates change nothing", body=_update_raises),
    ConformanceCheck(name="unset_fields", doc="rows without sessionId/updatedAt survive", body=_unset_fields),
    ConformanceCheck(
        name="raw_values",
        doc="1e400, huge integers, deep nesting, lone surrogates round-trip",
        body=_raw_values,
    ),
    ConformanceCheck(name="transaction", doc="transactions are atomic", body=_transaction),
    ConformanceCheck(
        name="maintenance",
        doc="store_file, dropped_keys and transaction(purge_dropped=True), as maintenance uses them",
        body=_maintenance,
    ),
    ConformanceCheck(name="concurrent_tasks", doc="no lost update across tasks", body=_concurrent_tasks),
    ConformanceCheck(
        name="persistence",
        doc="a second instance sees committed data; two instances lose no update",
        body=_persistence,
        needs_reopen=True,
    ),
)
"""Every check, in a stable order."""


async def run_backend_conformance(factory: BackendFactory, *, reopen: BackendFactory | None = None) -> None:
    """
    Run every check of :data:`CONFORMANCE_CHECKS` (persistence checks only with ``reopen``).

    Raises:
        ConformanceError: The first contract that does not hold, named.
    """
    await run_checks(CONFORMANCE_CHECKS, factory, reopen=reopen)


set_public_module(
    globals(), sources=("sessionkeeper.testing._checks", "sessionkeeper.testing._transcript_conformance")
)
