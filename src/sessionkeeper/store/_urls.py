"""
Store URLs: ``SessionStore.open("postgresql://...")`` and ``redis://...`` (DESIGN "Storage backends").

Query parameters of ours are taken out of the URL before it reaches the client library:

- PostgreSQL (``postgresql://`` or ``postgres://``): ``schema`` (default ``sessionkeeper``), ``store``
  (the store id, default ``default``) and ``ttl`` (the entries' and the transcripts' time to live:
  ``ttl_s`` of the backend and of its ``PostgresTranscriptStorage``; default none); every other parameter
  is libpq's (``postgresql://app@db:5432/agents?sslmode=require&schema=sk&store=agent-main&ttl=30d``).
- Redis (``redis://``, ``rediss://``, ``unix://``): ``prefix`` (the key prefix, default ``sessionkeeper:``),
  ``store`` and ``ttl`` (default none); every other parameter is redis-py's.

``ttl`` is a duration (``30d``, ``12h``, ``1h30m``, ``500ms``) or a bare number of seconds.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit

from sessionkeeper._config import parse_duration_ms
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
        dsn, ours = split_url_options(url, ("schema", "store", "ttl"))
        return PostgresStoreBackend(
            dsn,
            schema=ours.get("schema", "sessionkeeper"),
            store_id=ours.get("store", "default"),
            read_only=read_only,
            ttl_s=_ttl_s(ours),
        )
    if scheme in _REDIS_SCHEMES:
        client_url, ours = split_url_options(url, ("prefix", "store", "ttl"))
        return RedisStoreBackend(
            client_url,
            key_prefix=ours.get("prefix", "sessionkeeper:"),
            store_id=ours.get("store", "default"),
            ttl_s=_ttl_s(ours),
            read_only=read_only,
        )
    raise ConfigError(
        f"not a store URL: {redact_url(url)!r} (postgresql://, postgres://, redis://, rediss://, unix://)"
    )


def _ttl_s(ours: dict[str, str]) -> float | None:
    """
    The ``ttl`` parameter in seconds (``None`` when absent): a duration as OpenClaw writes them
    (``30d``, ``12h``, ``1h30m``, ``500ms``; ``_config.parse_duration_ms``), a bare number in seconds.

    Raises:
        ConfigError: Not a duration, or zero.
    """
    if "ttl" not in ours:
        return None
    ttl_ms = parse_duration_ms(ours["ttl"], default_unit="s", key="ttl")
    if ttl_ms <= 0:
        raise ConfigError(f"a positive duration, not {ours['ttl']!r}", key="ttl")
    return ttl_ms / 1000
