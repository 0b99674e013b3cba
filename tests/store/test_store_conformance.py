"""The backend conformance suite on the three built-in backends (DESIGN "Storage backends")."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionkeeper.store import (
    InMemoryStoreBackend,
    JsonFileStoreBackend,
    SqliteStoreBackend,
    StoreBackend,
)
from sessionkeeper.testing.conformance import (
    CONFORMANCE_CHECKS,
    ConformanceCheck,
    ConformanceError,
    run_backend_conformance,
)


pytestmark = pytest.mark.anyio

BACKENDS = ("memory", "json", "json-nondurable", "sqlite", "sqlite-normal")


def _factories(kind: str, tmp_path: Path):
    counter = {"n": 0}
    shared: dict[str, StoreBackend] = {}

    def location() -> Path:
        return tmp_path / f"store{counter['n']}"

    def make_at(where: Path) -> StoreBackend:
        if kind == "json":
            return JsonFileStoreBackend(where / "sessions.json")
        if kind == "json-nondurable":
            return JsonFileStoreBackend(where / "sessions.json", durable=False)
        if kind == "sqlite":
            return SqliteStoreBackend(where / "sessions.sqlite")
        if kind == "sqlite-normal":
            return SqliteStoreBackend(where / "sessions.sqlite", synchronous="NORMAL")
        raise AssertionError(kind)

    def factory() -> StoreBackend:
        counter["n"] += 1
        if kind == "memory":
            shared["last"] = InMemoryStoreBackend()
            return shared["last"]
        return make_at(location())

    def reopen() -> StoreBackend:
        if kind == "memory":
            return shared["last"]
        return make_at(location())

    return factory, reopen


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("check", CONFORMANCE_CHECKS, ids=lambda c: c.name)
async def test_store_backend_conformance(check: ConformanceCheck, kind: str, tmp_path: Path) -> None:
    factory, reopen = _factories(kind, tmp_path)
    await check.run(factory, reopen=reopen)


async def test_run_backend_conformance_runs_all(tmp_path: Path) -> None:
    factory, reopen = _factories("json", tmp_path)
    await run_backend_conformance(factory, reopen=reopen)


async def test_conformance_detects_a_broken_backend() -> None:
    class LosesUpdates(InMemoryStoreBackend):
        async def update(self, session_key, fn):  # type: ignore[no-untyped-def]
            current = await self.get(session_key)
            import anyio

            await anyio.lowlevel.checkpoint()
            new = fn(current)
            if new is not None:
                await self.put(session_key, new)
            return new if new is not None else current

    with pytest.raises(ConformanceError, match="concurrent_tasks"):
        await run_backend_conformance(LosesUpdates)


async def test_conformance_check_needing_reopen_says_so() -> None:
    persistence = next(c for c in CONFORMANCE_CHECKS if c.needs_reopen)
    with pytest.raises(ConformanceError, match="needs reopen"):
        await persistence.run(InMemoryStoreBackend)


async def test_maintenance_check_catches_a_backend_reporting_dropped_rows_when_new() -> None:
    class Ghost(InMemoryStoreBackend):
        @property
        def dropped_keys(self) -> tuple[str, ...]:
            return ("ghost",)

    with pytest.raises(ConformanceError, match="maintenance: a new store has no dropped rows"):
        await run_backend_conformance(Ghost)


async def test_a_check_names_itself_when_the_backend_raises_something_unexpected() -> None:
    class Broken(InMemoryStoreBackend):
        async def load_all(self):  # type: ignore[no-untyped-def]
            raise RuntimeError("the database went away")

    check = next(c for c in CONFORMANCE_CHECKS if c.name == "empty")
    with pytest.raises(
        ConformanceError, match=r"^empty: unexpected RuntimeError: the database went away"
    ) as caught:
        await check.run(Broken)
    assert isinstance(caught.value.__cause__, RuntimeError)
