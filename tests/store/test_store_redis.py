"""
``RedisStoreBackend`` on the real Redis server (DESIGN "Storage backends", Decision 8): the full store
conformance suite, revisions and compare-and-swap, TTL, transactions that restart when the store moved.
"""

from __future__ import annotations

import asyncio

import pytest
import redis
from tests._servers import redis_prefix

from sessionkeeper.exceptions import ConfigError, StaleEntryError, StoreError, StoreUnavailableError
from sessionkeeper.store import (
    SessionEntry,
    encode_session_entry,
    session_entry_from_dict,
    session_entry_to_dict,
)
from sessionkeeper.store._redis import RedisStoreBackend
from sessionkeeper.testing.conformance import CONFORMANCE_CHECKS, ConformanceCheck


pytestmark = pytest.mark.anyio
__all__ = ("redis_prefix",)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # redis-py's async client is asyncio-only (docs/decisions.md PG-ASYNCIO)


def _backend(url: str, prefix: str, **kwargs: object) -> RedisStoreBackend:
    return RedisStoreBackend(url, key_prefix=prefix, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("check", CONFORMANCE_CHECKS, ids=lambda c: c.name)
async def test_redis_backend_conformance(check: ConformanceCheck, redis_prefix: tuple[str, str]) -> None:
    url, prefix = redis_prefix
    counter = {"n": 0}

    def factory() -> RedisStoreBackend:
        counter["n"] += 1
        return _backend(url, prefix, store_id=f"store{counter['n']}")

    def reopen() -> RedisStoreBackend:
        return _backend(url, prefix, store_id=f"store{counter['n']}")

    await check.run(factory, reopen=reopen)


async def test_entries_keep_their_exact_json_text(redis_prefix: tuple[str, str]) -> None:
    url, prefix = redis_prefix
    entry = session_entry_from_dict(
        {"sessionId": "s1", "label": "ünïcode ✓ nul\x00", "futurePlugin": {"z": [1, 2.5, None]}}
    )
    odd = session_entry_from_dict({"sessionId": "s2", "label": "lone \ud800 surrogate"})
    async with _backend(url, prefix) as b:
        await b.put("agent:main:main", entry)
        await b.put("odd", odd)
        assert await b.load_all() == {"agent:main:main": entry, "odd": odd}
    client = redis.Redis.from_url(url)
    try:
        stored = client.hget(f"{prefix}{{default}}:e:agent:main:main", "text")
    finally:
        client.close()
    assert stored == encode_session_entry(entry)  # its compact JSON, as the SQLite store keeps it


async def test_revision_counts_changes_and_cas_rejects_a_stale_writer(redis_prefix: tuple[str, str]) -> None:
    url, prefix = redis_prefix
    async with _backend(url, prefix) as b:
        assert await b.get_with_revision("k") is None
        assert await b.compare_and_swap("k", SessionEntry(session_id="s1"), expected_revision=None) == 1
        with pytest.raises(StaleEntryError) as created_twice:
            await b.compare_and_swap("k", SessionEntry(session_id="s2"), expected_revision=None)
        assert created_twice.value.current_revision == 1
        assert (
            await b.compare_and_swap("k", SessionEntry(session_id="s1", label="a"), expected_revision=1) == 2
        )
        with pytest.raises(StaleEntryError) as stale:
            await b.compare_and_swap("k", SessionEntry(session_id="s1", label="b"), expected_revision=1)
        assert (stale.value.expected_revision, stale.value.current_revision) == (1, 2)
        assert await b.get("k") == SessionEntry(session_id="s1", label="a")
        await b.put("k", SessionEntry(session_id="s1", label="a"))
        await b.update("k", lambda cur: cur)
        assert (await b.get_with_revision("k")).revision == 2  # type: ignore[union-attr]
        await b.delete("k")
        with pytest.raises(StaleEntryError) as gone:
            await b.compare_and_swap("k", SessionEntry(session_id="s1"), expected_revision=2)
        assert gone.value.current_revision is None


async def test_concurrent_updates_from_many_clients_lose_nothing(redis_prefix: tuple[str, str]) -> None:
    url, prefix = redis_prefix
    backends = [_backend(url, prefix) for _ in range(4)]
    try:
        await backends[0].put("shared", session_entry_from_dict({"sessionId": "s", "marks": []}))

        def add(mark: str):  # type: ignore[no-untyped-def]
            def fn(current: SessionEntry | None) -> SessionEntry:
                assert current is not None
                raw = session_entry_to_dict(current)
                raw["marks"] = [*raw["marks"], mark]
                return session_entry_from_dict(raw)

            return fn

        marks = [f"{i}:{j}" for i in range(4) for j in range(15)]
        await asyncio.gather(*(backends[int(m.split(":")[0])].update("shared", add(m)) for m in marks))
        got = await backends[1].get_with_revision("shared")
        assert got is not None
        assert sorted(session_entry_to_dict(got.entry)["marks"]) == sorted(marks)
        assert got.revision == 1 + len(marks)
    finally:
        for b in backends:
            await b.aclose()


async def test_entries_expire_after_their_ttl_and_leave_the_order(redis_prefix: tuple[str, str]) -> None:
    url, prefix = redis_prefix
    async with _backend(url, prefix, ttl_s=0.3) as b, _backend(url, prefix) as keep:
        await keep.put("kept", SessionEntry(session_id="s0"))
        await b.put("short", SessionEntry(session_id="s1"))
        client = redis.Redis.from_url(url)
        try:
            entry_key = f"{prefix}{{default}}:e:short"
            assert 0 < client.pttl(entry_key) <= 300
            assert client.pttl(f"{prefix}{{default}}:e:kept") == -1  # no TTL without ttl_s
            for _ in range(400):  # wait for the server to expire it (a state, not a fixed sleep)
                if not client.exists(entry_key):
                    break
                await asyncio.sleep(0.01)
        finally:
            client.close()
        assert await b.get("short") is None
        assert await b.keys() == ["kept"]
        assert await b.load_all() == {"kept": SessionEntry(session_id="s0")}
        await b.put("short", SessionEntry(session_id="s2"))  # re-created after expiry: goes last
        assert await keep.keys() == ["kept", "short"]


async def test_transaction_restarts_when_the_store_moved(redis_prefix: tuple[str, str]) -> None:
    url, prefix = redis_prefix
    async with _backend(url, prefix) as b:
        await b.put("a", SessionEntry(session_id="s1"))
        calls: list[list[str]] = []
        sync_client = redis.Redis.from_url(url)

        def edit(entries: dict[str, SessionEntry]) -> int:
            calls.append(list(entries))
            if len(calls) == 1:  # another writer changes "a" while this transaction computes
                sync_client.hset(f"{prefix}{{default}}:e:a", mapping={"text": '{"sessionId":"s9"}', "rev": 2})
                sync_client.incr(f"{prefix}{{default}}:version")
            entries["b"] = SessionEntry(session_id="s2", label=entries["a"].session_id)  # type: ignore[arg-type]
            return len(calls)

        try:
            assert await b.transaction(edit) == 2
        finally:
            sync_client.close()
        assert await b.load_all() == {
            "a": SessionEntry(session_id="s9"),
            "b": SessionEntry(session_id="s2", label="s9"),
        }


async def test_an_unreachable_server_raises_store_unavailable() -> None:
    async with RedisStoreBackend("redis://127.0.0.1:1/0") as b:
        with pytest.raises(StoreUnavailableError):
            await b.keys()


async def test_read_only_refuses_writes(redis_prefix: tuple[str, str]) -> None:
    url, prefix = redis_prefix
    async with _backend(url, prefix, read_only=True) as b:
        assert await b.load_all() == {}
        with pytest.raises(StoreError, match="read-only"):
            await b.put("k", SessionEntry(session_id="s1"))


def test_bad_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        RedisStoreBackend()
    with pytest.raises(ConfigError):
        RedisStoreBackend("redis://127.0.0.1", ttl_s=0)


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_under_trio_a_clear_error(anyio_backend: str) -> None:
    b = RedisStoreBackend("redis://127.0.0.1")
    with pytest.raises(StoreError, match="asyncio only"):
        await b.keys()
    await b.aclose()


def test_no_server_skips_with_the_reason_but_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests import _servers

    monkeypatch.setattr(_servers, "REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no Redis server reachable"):
        _servers.require_redis()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must not skip the Redis tests"):
        _servers.require_redis()


async def test_connections_the_server_closed_are_reopened(redis_prefix: tuple[str, str]) -> None:
    # a Redis restart or CLIENT KILL closes the client's connections; the next operations must reconnect
    # instead of failing with StoreUnavailableError
    url, prefix = redis_prefix
    async with _backend(url, prefix, store_id="killed") as b:
        await b.put("k", SessionEntry(session_id="s1"))
        await b.put("gone", SessionEntry(session_id="s0"))
        admin = redis.Redis.from_url(url)
        try:
            for kind in ("get", "put", "delete", "transaction"):
                ids = [c["id"] for c in admin.client_list() if c["name"] == "sessionkeeper:killed"]
                assert ids
                for client_id in ids:
                    admin.client_kill_filter(_id=client_id)
                if kind == "get":
                    assert await b.get("k") == SessionEntry(session_id="s1")
                elif kind == "put":
                    await b.put("k", SessionEntry(session_id="s2"))
                elif kind == "delete":
                    assert await b.delete("gone") is True
                else:
                    assert await b.transaction(list) == ["k"]
        finally:
            admin.close()
        assert await b.load_all() == {"k": SessionEntry(session_id="s2")}


async def test_a_write_sent_again_after_a_lost_reply_is_applied_once(redis_prefix: tuple[str, str]) -> None:
    # the same script call (same write id) arriving twice, as when the reply to the first was lost
    url, prefix = redis_prefix
    async with _backend(url, prefix) as b:
        await b.put("k", SessionEntry(session_id="s1"))
        base = f"{prefix}{{default}}:"
        cas_keys = [base + "e:k", base + "index", base + "seq", base + "version"]
        cas_args = ["k", 1, '{"sessionId":"s1","label":"once"}', 0, "write-1"]
        first = await b._scripts["cas"](keys=cas_keys, args=cas_args)
        again = await b._scripts["cas"](keys=cas_keys, args=cas_args)
        assert first == again == [1, 2]  # not "stale" (revision 2 is not 1), not revision 3
        apply_keys = [base + "index", base + "seq", base + "version", base + "applied"]
        version = int(await b._client.get(base + "version"))  # type: ignore[union-attr]
        apply_args = [base + "e:", str(version), 0, "apply-1", 0, "new", '{"sessionId":"n1"}']
        assert await b._scripts["apply"](keys=apply_keys, args=apply_args) == 1
        assert await b._scripts["apply"](keys=apply_keys, args=apply_args) == 1  # done, not "moved"
        assert int(await b._client.get(base + "version")) == version + 1  # type: ignore[union-attr]
        delete_keys = [base + "e:new", base + "index", base + "version", base + "deleted"]
        assert await b._scripts["delete"](keys=delete_keys, args=["new", "delete-1"]) == 1
        assert await b._scripts["delete"](keys=delete_keys, args=["new", "delete-1"]) == 1
        assert await b._scripts["delete"](keys=delete_keys, args=["new", "delete-2"]) == 0
        assert await b.load_all() == {"k": SessionEntry(session_id="s1", label="once")}
        assert (await b.get_with_revision("k")).revision == 2  # type: ignore[union-attr]
