"""
Store URLs: ``SessionStore.open("postgresql://...")`` and ``redis://...`` (DESIGN "Storage backends").

Query parameters of ours are taken out of the URL before it reaches the client library:

- PostgreSQL (``postgresql://`` or ``postgres://``): ``schema`` (default ``sessionkeeper``) and ``store``
  (the store id, default ``default``); every other parameter is libpq's
  (``postgresql://app@db:5432/agents?sslmode=require&schema=sk&store=agent-main``).
- Redis (``redis://``, ``rediss://``, ``unix://``): ``prefix`` (the key prefix, default ``sessionkeeper:``),
  ``store`` and ``ttl`` (seconds; default none); every other parameter is redis-py's.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

from sessionkeeper.exceptions import ConfigError
from sessionkeeper.store._backend import StoreBackend
from sessionkeeper.store._postgres import PostgresStoreBackend
from sessionkeeper.store._redis import RedisStoreBackend
from sessionkeeper.store._remote import redact_url, split_url_options


__all__ = ("is_store_url", "open_store_url")

_POSTGRES_SCHEMES: Final = frozenset({"postgresql", "postgres"})
_REDIS_SCHEMES: Final = frozenset({"redis", "rediss", "unix"})


def is_store_url(location: object) -> bool:
    """Whether ``location`` (a ``--store`` value) is a database-server URL rather than a path."""
    if not isinstance(location, str) or "://" not in location:
        return False
    return urlsplit(location).scheme.lower() in _POSTGRES_SCHEMES | _REDIS_SCHEMES


def open_store_url(url: str, *, read_only: bool = False) -> StoreBackend:
    """
    The store backend a URL names (nothing is connected until its first use).

    Raises:
        ConfigError: Not a PostgreSQL or Redis URL, or a bad ``ttl``/``schema``/``store`` value.
    """
    scheme = urlsplit(url).scheme.lower()
    if scheme in _POSTGRES_SCHEMES:
        dsn, ours = split_url_options(url, ("schema", "store"))
        return PostgresStoreBackend(
            dsn,
            schema=ours.get("schema", "sessionkeeper"),
            store_id=ours.get("store", "default"),
            read_only=read_only,
        )
    if scheme in _REDIS_SCHEMES:
        client_url, ours = split_url_options(url, ("prefix", "store", "ttl"))
        ttl: float | None = None
        if "ttl" in ours:
            try:
                ttl = float(ours["ttl"])
            except ValueError:
                raise ConfigError(f"a number of seconds, not {ours['ttl']!r}", key="ttl") from None
        return RedisStoreBackend(
            client_url,
            key_prefix=ours.get("prefix", "sessionkeeper:"),
            store_id=ours.get("store", "default"),
            ttl_s=ttl,
            read_only=read_only,
        )
    raise ConfigError(
        f"not a store URL: {redact_url(url)!r} (postgresql://, postgres://, redis://, rediss://, unix://)"
    )
