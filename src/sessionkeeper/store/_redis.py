"""
``RedisStoreBackend``: the session store in Redis, for hosts that keep session entries there (DESIGN
"Storage backends"; optional extra ``sessionkeeper[redis]``: redis-py's asyncio client, imported only
here). Transcripts are not kept in Redis.

Keys of one store (``<prefix>`` defaults to ``sessionkeeper:``; the store id in braces is a Redis Cluster
hash tag, so every key of a store is in one slot)::

    <prefix>{<store_id>}:e:<session key>   hash {text: exact JSON object text, rev: revision}
    <prefix>{<store_id>}:index             sorted set: session key -> insertion number (the order)
    <prefix>{<store_id>}:seq               counter of insertion numbers
    <prefix>{<store_id>}:version           counter bumped by every write (the store's own revision)

Concurrency: every write is one Lua script, atomic in Redis.

- An entry write is a compare-and-swap on its revision (:meth:`~RedisStoreBackend.compare_and_swap`);
  :meth:`~RedisStoreBackend.update` reads the entry, runs the updater, and swaps, starting again from the
  newer entry when another writer got in first: no update is lost, none applied on a stale copy (the
  updater may run more than once).
- :meth:`~RedisStoreBackend.transaction` reads the whole store with its version and writes the
  difference only if the version did not move (else it starts again).
- ``ttl_s``: every write of an entry sets its time to live (``PEXPIRE``); an expired entry is gone for
  every read, and its place in the order is dropped at the next full read.

Deviation (``docs/decisions.md`` ``PG-ASYNCIO``): redis-py's async client runs on asyncio only; under trio
every method raises :class:`~sessionkeeper.exceptions.StoreError`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, Self, TypeVar

from sessionkeeper.exceptions import ConfigError, StaleEntryError, StoreError, StoreUnavailableError
from sessionkeeper.store._backend import (
    EntryUpdater,
    RowsAlwaysLoad,
    StoreTransaction,
    check_entry,
    diff_entries,
)
from sessionkeeper.store._entry import SessionEntry
from sessionkeeper.store._remote import (
    CallOrder,
    RevisionedEntry,
    check_key,
    decode_entry_text,
    encode_entry_text,
    redact_url,
    require_asyncio,
    storable_key,
)


if TYPE_CHECKING:
    from redis.asyncio import Redis


__all__ = ("RedisStoreBackend",)

T = TypeVar("T")
R = TypeVar("R")

_log = logging.getLogger("sessionkeeper.store")

_ABSENT: Final = -1
_ATTEMPTS: Final = 3

# KEYS: entry, index, seq, version. ARGV: session key, expected revision (-1: absent, "*": any), text,
# ttl ms (0: none), write id. Returns {1, new revision} or {0, current revision (-1: absent)}. A write id
# already stored means this very write was applied (a retry after a lost reply): success, nothing redone.
_CAS: Final = """
if redis.call('HGET', KEYS[1], 'wid') == ARGV[5] then
  return {1, tonumber(redis.call('HGET', KEYS[1], 'rev'))}
end
local cur = redis.call('HGET', KEYS[1], 'rev')
local curn = -1
if cur then curn = tonumber(cur) end
if ARGV[2] ~= '*' and tonumber(ARGV[2]) ~= curn then return {0, curn} end
local newrev = curn
if cur then
  if redis.call('HGET', KEYS[1], 'text') ~= ARGV[3] then
    newrev = curn + 1
    redis.call('HSET', KEYS[1], 'text', ARGV[3], 'rev', newrev, 'wid', ARGV[5])
    redis.call('INCR', KEYS[4])
  end
else
  local seq = redis.call('INCR', KEYS[3])
  redis.call('ZADD', KEYS[2], seq, ARGV[1])
  newrev = 1
  redis.call('HSET', KEYS[1], 'text', ARGV[3], 'rev', 1, 'wid', ARGV[5])
  redis.call('INCR', KEYS[4])
end
local ttl = tonumber(ARGV[4])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) else redis.call('PERSIST', KEYS[1]) end
return {1, newrev}
"""

# KEYS: entry, index, version, done marker. ARGV: session key, write id. Returns 1 if the entry existed
# (also on a retry of a delete that removed it: the done marker keeps the answer for a minute).
_DELETE: Final = """
if redis.call('GET', KEYS[4]) == ARGV[2] then return 1 end
local n = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if n > 0 then
  redis.call('INCR', KEYS[3])
  redis.call('SET', KEYS[4], ARGV[2], 'PX', 60000)
end
return n
"""

# KEYS: index, version. ARGV: entry key prefix, "all" | "keys". Returns {version, {key, text, ...}} or
# {version, {key, ...}}, in insertion order; members whose entry expired leave the index.
_LOAD: Final = """
local members = redis.call('ZRANGE', KEYS[1], 0, -1)
local out = {}
for _, k in ipairs(members) do
  local ek = ARGV[1] .. k
  if ARGV[2] == 'keys' then
    if redis.call('EXISTS', ek) == 1 then table.insert(out, k) else redis.call('ZREM', KEYS[1], k) end
  else
    local t = redis.call('HGET', ek, 'text')
    if t then table.insert(out, k); table.insert(out, t) else redis.call('ZREM', KEYS[1], k) end
  end
end
return {redis.call('GET', KEYS[2]) or '0', out}
"""

# KEYS: index, seq, version, last apply id. ARGV: entry key prefix, expected version, ttl ms, write id,
# number of removals, the removed keys, then (key, text) pairs to write. Returns 1 (also on a retry of an
# apply that was done), or 0 when the version moved (nothing written).
_APPLY: Final = """
if redis.call('GET', KEYS[4]) == ARGV[4] then return 1 end
if (redis.call('GET', KEYS[3]) or '0') ~= ARGV[2] then return 0 end
local i = 6
for _ = 1, tonumber(ARGV[5]) do
  redis.call('DEL', ARGV[1] .. ARGV[i])
  redis.call('ZREM', KEYS[1], ARGV[i])
  i = i + 1
end
local ttl = tonumber(ARGV[3])
while i <= #ARGV do
  local k = ARGV[i]
  local t = ARGV[i + 1]
  local ek = ARGV[1] .. k
  local cur = redis.call('HGET', ek, 'rev')
  if cur then
    if redis.call('HGET', ek, 'text') ~= t then
      redis.call('HSET', ek, 'text', t, 'rev', tonumber(cur) + 1)
    end
  else
    redis.call('ZADD', KEYS[1], redis.call('INCR', KEYS[2]), k)
    redis.call('HSET', ek, 'text', t, 'rev', 1)
  end
  if ttl > 0 then redis.call('PEXPIRE', ek, ttl) else redis.call('PERSIST', ek) end
  i = i + 2
end
redis.call('INCR', KEYS[3])
redis.call('SET', KEYS[4], ARGV[4], 'PX', 60000)
return 1
"""


class RedisStoreBackend(RowsAlwaysLoad):
    """
    A :class:`~sessionkeeper.store.StoreBackend` on Redis (redis-py asyncio; Lua compare-and-swap).

    Several instances (processes, machines) on the same server, ``key_prefix`` and ``store_id`` share
    one store and lose no update (module docstring). asyncio only.

    Args:
        url: A redis-py URL (``redis://host:6379/0``, ``rediss://...``, ``unix://...``). Not needed with
            ``client``.
        store_id: Which store (one per agent or tenant; default ``"default"``).
        key_prefix: Prefix of every key (default ``"sessionkeeper:"``).
        ttl_s: Time to live of an entry, in seconds, set again at every write of it (default ``None``:
            entries never expire).
        client: A ``redis.asyncio.Redis`` to use instead of opening one from ``url`` (bytes replies, i.e.
            ``decode_responses=False``). Not closed by :meth:`aclose`. A client opened from ``url`` is
            named ``sessionkeeper:<store_id>`` (``CLIENT LIST``).
        read_only: Writes raise :class:`~sessionkeeper.exceptions.StoreError` (reads may still drop the
            expired members of the order index).

    Raises:
        ConfigError: Neither ``url`` nor ``client``; a ``ttl_s`` that is not positive.

    Raises (from the methods):
        StoreUnavailableError: The server cannot be reached, or the connection broke.
        ConfigError: The server refuses the URL's database (``redis://host/99``: DB index out of range).
        StoreCorruptError: A stored entry is not a JSON object.
        StoreError: Called outside asyncio, after :meth:`aclose`, or a write on a read-only backend.
        InvalidSessionEntryError: A key with a lone surrogate (not UTF-8).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        store_id: str = "default",
        key_prefix: str = "sessionkeeper:",
        ttl_s: float | None = None,
        client: Redis | None = None,
        read_only: bool = False,
    ) -> None:
        if url is None and client is None:
            raise ConfigError("RedisStoreBackend needs url= or client=")
        if ttl_s is not None and not ttl_s > 0:
            raise ConfigError(
                f"ttl_s must be a positive number of seconds or None, got {ttl_s!r}", key="ttl_s"
            )
        if not storable_key(store_id, nul_ok=True) or not storable_key(key_prefix, nul_ok=True):
            raise ConfigError(f"invalid store id {store_id!r} or key prefix {key_prefix!r}", key="store_id")
        self.url = url
        self.store_id = store_id
        self.key_prefix = key_prefix
        self.ttl_s = ttl_s
        self.read_only = read_only
        self._client = client
        self._owns_client = client is None
        self._closed = False
        self._order = CallOrder()  # calls on this instance apply in call order (docs/store.md, issue 11)
        base = f"{key_prefix}{{{store_id}}}:"
        self._entry_prefix = base + "e:"
        self._index = base + "index"
        self._seq = base + "seq"
        self._version = base + "version"
        self._deleted = base + "deleted"
        self._applied = base + "applied"
        self._ttl_ms = 0 if ttl_s is None else max(1, round(ttl_s * 1000))
        self._scripts: dict[str, Any] = {}
        self.where: str = f"redis:{base}"
        self.client_name: str = "sessionkeeper:" + "".join(
            c if c.isalnum() or c in "-_.:" else "_" for c in store_id
        )

    def __repr__(self) -> str:
        target = redact_url(self.url) if self.url is not None else "client"
        ro = ", read_only=True" if self.read_only else ""
        return (
            f"RedisStoreBackend({target!r}, store_id={self.store_id!r}, key_prefix={self.key_prefix!r}{ro})"
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ connection

    def _ensure(self) -> Redis:
        if self._closed:
            raise StoreError("the store backend is closed")
        require_asyncio("RedisStoreBackend", "redis-py's async client")
        if self._client is None or not self._scripts:
            try:
                from redis.asyncio import Redis  # noqa: PLC0415 - the optional extra, imported on first use
            except ImportError as err:  # pragma: no cover - the extra is installed in tests
                raise StoreError(
                    "RedisStoreBackend needs the 'redis' extra: pip install 'sessionkeeper[redis]'"
                ) from err
            if self._client is None:
                assert self.url is not None
                self._client = Redis.from_url(self.url, decode_responses=False, client_name=self.client_name)
            client = self._client
            self._scripts = {
                name: client.register_script(text)
                for name, text in (("cas", _CAS), ("delete", _DELETE), ("load", _LOAD), ("apply", _APPLY))
            }
        return self._client

    async def _run(self, body: Callable[[Redis], Awaitable[R]], *, write: bool, turn: str | None) -> R:
        """Run ``body`` in its turn (``turn``: the session key, ``None``: the whole store; ``CallOrder``)."""
        if write and self.read_only:
            raise StoreError(f"session store {self.where} was opened read-only")
        require_asyncio("RedisStoreBackend", "redis-py's async client")
        async with self._order.key(turn) if turn is not None else self._order.store():
            return await self._run_now(body)

    async def _run_now(self, body: Callable[[Redis], Awaitable[R]]) -> R:
        client = self._ensure()
        from redis import exceptions  # noqa: PLC0415 - the optional extra, imported on first use

        try:
            return await body(client)
        except (exceptions.ConnectionError, exceptions.TimeoutError) as err:
            raise StoreUnavailableError(f"{self.where}: {err}") from err
        except exceptions.ResponseError as err:
            if "DB index" in str(err):  # SELECT of a database the server does not have: configuration
                raise ConfigError(f"{self.where}: the server refuses the database: {err}") from err
            raise

    async def _call(self, make: Callable[[], Awaitable[R]]) -> R:
        """
        One server call, sent again (up to twice) when the connection broke: redis-py reconnects, and
        every write carries a write id, so a write whose reply was lost is not applied twice.
        """
        from redis import exceptions  # noqa: PLC0415 - the optional extra, imported on first use

        for attempt in range(_ATTEMPTS):
            try:
                return await make()
            except (exceptions.ConnectionError, exceptions.TimeoutError) as err:
                if attempt == _ATTEMPTS - 1:
                    raise
                _log.info(
                    "redis call retried after %s", err, extra={"store": self.where, "attempt": attempt + 1}
                )
        raise AssertionError("unreachable")  # pragma: no cover

    async def _apply(self, args: list[Any]) -> bool:
        keys = [self._index, self._seq, self._version, self._applied]
        return bool(await self._call(lambda: self._scripts["apply"](keys=keys, args=args)))

    def _entry_key(self, session_key: str) -> str:
        return self._entry_prefix + session_key

    async def _cas(self, session_key: str, text: str, expected: int | str) -> tuple[bool, int]:
        keys = [self._entry_key(session_key), self._index, self._seq, self._version]
        args = [session_key, expected, text, self._ttl_ms, uuid.uuid4().hex]
        ok, revision = await self._call(lambda: self._scripts["cas"](keys=keys, args=args))
        return bool(ok), int(revision)

    async def _read(self, client: Redis, session_key: str) -> RevisionedEntry | None:
        text, revision = await self._call(lambda: client.hmget(self._entry_key(session_key), ["text", "rev"]))
        if text is None or revision is None:
            return None
        entry = decode_entry_text(session_key, text, where=self.where)
        return RevisionedEntry(entry=entry, revision=int(revision))

    async def _load(self, mode: str) -> tuple[str, list[bytes]]:
        version, items = await self._call(
            lambda: self._scripts["load"](keys=[self._index, self._version], args=[self._entry_prefix, mode])
        )
        return version.decode() if isinstance(version, bytes) else str(version), list(items)

    # ------------------------------------------------------------------ reads

    async def load_all(self) -> dict[str, SessionEntry]:
        """Return every live entry in insertion order (one script call)."""

        async def body(_client: Redis) -> dict[str, SessionEntry]:
            return self._decode_all((await self._load("all"))[1])

        return await self._run(body, write=False, turn=None)

    def _decode_all(self, items: list[bytes]) -> dict[str, SessionEntry]:
        out: dict[str, SessionEntry] = {}
        for i in range(0, len(items), 2):
            key = items[i].decode()
            out[key] = decode_entry_text(key, items[i + 1], where=self.where)
        return out

    async def keys(self) -> list[str]:
        """Return every live session key in insertion order (never reads the entries)."""

        async def body(_client: Redis) -> list[str]:
            return [item.decode() for item in (await self._load("keys"))[1]]

        return await self._run(body, write=False, turn=None)

    async def get_with_revision(self, session_key: str) -> RevisionedEntry | None:
        """Return the entry under ``session_key`` with its revision (for :meth:`compare_and_swap`)."""
        if not storable_key(session_key, nul_ok=True):
            return None

        async def body(client: Redis) -> RevisionedEntry | None:
            return await self._read(client, session_key)

        return await self._run(body, write=False, turn=session_key)

    async def get(self, session_key: str) -> SessionEntry | None:
        """Return the entry under ``session_key``, or ``None``."""
        found = await self.get_with_revision(session_key)
        return None if found is None else found.entry

    # ------------------------------------------------------------------ writes

    async def put(self, session_key: str, entry: SessionEntry) -> None:
        """Store ``entry`` under ``session_key`` (its revision grows if the text changed)."""
        check_entry(session_key, entry)
        check_key(session_key, nul_ok=True, backend="Redis")
        text, _ = encode_entry_text(entry)

        async def body(_client: Redis) -> None:
            await self._cas(session_key, text, "*")

        await self._run(body, write=True, turn=session_key)

    async def update(self, session_key: str, fn: EntryUpdater) -> SessionEntry | None:
        """
        Atomically replace the entry under ``session_key`` with ``fn(current)`` (``None``: no change).

        Optimistic: read, run ``fn``, swap if the revision did not move; else run ``fn`` again on the newer
        entry (deviation ``DB-RETRY``). Keep ``fn`` quick, free of I/O and of side effects it cannot repeat.
        """
        check_key(session_key, nul_ok=True, backend="Redis")

        async def body(client: Redis) -> SessionEntry | None:
            while True:
                found = await self._read(client, session_key)
                current = None if found is None else found.entry
                new = fn(current)
                if new is None:
                    return current
                check_entry(session_key, new)
                text, _ = encode_entry_text(new)
                ok, _revision = await self._cas(
                    session_key, text, _ABSENT if found is None else found.revision
                )
                if ok:
                    return new

        return await self._run(body, write=True, turn=session_key)

    async def compare_and_swap(
        self, session_key: str, entry: SessionEntry, *, expected_revision: int | None
    ) -> int:
        """
        Store ``entry`` only if the stored revision is still ``expected_revision``.

        Args:
            expected_revision: The revision read with :meth:`get_with_revision`; ``None``: the key must not
                exist (create).

        Returns:
            The new revision (unchanged if the entry's JSON text is the same).

        Raises:
            StaleEntryError: The key's revision is another one; nothing was written.
        """
        check_entry(session_key, entry)
        check_key(session_key, nul_ok=True, backend="Redis")
        text, _ = encode_entry_text(entry)

        async def body(_client: Redis) -> int:
            expected = _ABSENT if expected_revision is None else expected_revision
            ok, revision = await self._cas(session_key, text, expected)
            if ok:
                return revision
            raise StaleEntryError(
                session_key,
                expected_revision=expected_revision,
                current_revision=None if revision == _ABSENT else revision,
            )

        return await self._run(body, write=True, turn=session_key)

    async def delete(self, session_key: str) -> bool:
        """Remove ``session_key``; return whether it existed."""
        if not storable_key(session_key, nul_ok=True):
            return False

        async def body(_client: Redis) -> bool:
            keys = [self._entry_key(session_key), self._index, self._version, self._deleted]
            args = [session_key, uuid.uuid4().hex]
            return bool(await self._call(lambda: self._scripts["delete"](keys=keys, args=args)))

        return await self._run(body, write=True, turn=session_key)

    async def transaction(self, fn: StoreTransaction[T], *, purge_dropped: bool = False) -> T:
        """
        Run ``fn`` on a copy of the whole store and write its edits in one script, only if no other write
        happened since the copy was read (the store's version); else ``fn`` runs again on a fresh copy
        (deviation ``DB-RETRY``).

        ``purge_dropped`` is accepted and ignored: this backend never drops a row on load.
        """

        async def body(_client: Redis) -> T:
            while True:
                version, items = await self._load("all")
                before = self._decode_all(items)
                working = dict(before)
                result = fn(working)
                upserts, removals = diff_entries(before, working)
                if not upserts and not removals:
                    return result
                for key, entry in upserts.items():
                    check_entry(key, entry)
                    check_key(key, nul_ok=True, backend="Redis")
                write_id = uuid.uuid4().hex
                args: list[Any] = [
                    self._entry_prefix,
                    version,
                    self._ttl_ms,
                    write_id,
                    len(removals),
                    *removals,
                ]
                for key, entry in upserts.items():
                    args += [key, encode_entry_text(entry)[0]]
                if await self._apply(args):
                    return result
                _log.debug(
                    "store transaction retried: the store changed meanwhile", extra={"store": self.where}
                )

        return await self._run(body, write=True, turn=None)

    async def aclose(self) -> None:
        """Close the client (unless it was given); the backend is unusable afterwards."""
        self._closed = True
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            await client.aclose()
