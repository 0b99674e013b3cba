"""
Store URLs: ``SessionStore.open("postgresql://...")`` and ``redis://...`` (DESIGN "Storage backends").

Query parameters of ours are taken out of the URL before it reaches the client library:

- PostgreSQL (``postgresql://`` or ``postgres://``): ``schema`` (default ``sessionkeeper``), ``store``
  (the store id, default ``default``) and ``ttl`` (the entries' and the transcripts' time to live:
  ``ttl_s`` of the backend and of its ``PostgresTranscriptStorage``; default none); every other parameter
  is libpq's (``postgresql://app@db:5432/agents?sslmode=require&schema=sk&store=agent-main&ttl=30d``).
- Redis (``redis://``, ``rediss://``, ``unix://``): ``prefix`` (the key prefix, default ``sessionkeeper:``),
  ``store`` and ``ttl`` (default none); every other parameter is redis-py's.

``ttl`` is a duration (``30d``, ``12h``, ``1h30m``, ``500ms``) or a bare number of seconds. Each of ours
may be given once and not empty; a ``schema`` PostgreSQL reserves (``pg_*``, ``information_schema``) and a
Redis database path that is not a number are refused before anything connects.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import SplitResult, parse_qsl, urlsplit

from sessionkeeper._config import parse_duration_ms
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.store._backend import StoreBackend
from sessionkeeper.store._postgres import PostgresStoreBackend
from sessionkeeper.store._redis import RedisStoreBackend
from sessionkeeper.store._remote import redact_url, split_url_options


__all__ = ("is_store_url", "open_store_url")

_POSTGRES_SCHEMES: Final = frozenset({"postgresql", "postgres"})
_REDIS_SCHEMES: Final = frozenset({"redis", "rediss", "unix"})
# ``scheme://`` (two letters at least: ``C://`` is a Windows drive), or one of our schemes and a colon
# (``postgresql:/host/db``, a slash short): meant as a URL, so never taken for a path.
_URL_LIKE: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+)://|(postgresql|postgres|redis|rediss|unix):", re.I)


def is_store_url(location: object) -> bool:
    """
    Whether ``location`` (a ``--store`` value) is meant as a URL rather than a path: ``scheme://...``
    (any scheme of two characters or more) or ``postgresql:``/``postgres:``/``redis:``/``rediss:``/
    ``unix:`` followed by anything. :func:`open_store_url` refuses those it cannot open with
    :class:`ConfigError` ("unsupported store URL"), rather than looking for a directory of that name.
    """
    return isinstance(location, str) and _URL_LIKE.match(location) is not None


def open_store_url(url: str, *, read_only: bool = False) -> StoreBackend:
    """
    The store backend a URL names (nothing is connected until its first use).

    Raises:
        ConfigError: Not a PostgreSQL or Redis URL (``mysql://``, ``sqlite://``, ``postgresql:/x``), a
            URL that does not parse (a bad IPv6 host, a port outside 0-65535), one of our parameters
            given twice or empty, a bad ``ttl``/``schema``/``store`` value, a schema PostgreSQL
            reserves (``pg_*``, ``information_schema``), a Redis database that is not a number.
    """
    parts = _parts(url)
    scheme = parts.scheme.lower()
    if scheme in _POSTGRES_SCHEMES and url[len(scheme) :].startswith("://"):
        dsn, ours = split_url_options(url, _options(parts, ("schema", "store", "ttl")))
        return PostgresStoreBackend(
            dsn,
            schema=_schema(ours.get("schema", "sessionkeeper")),
            store_id=ours.get("store", "default"),
            read_only=read_only,
            ttl_s=_ttl_s(ours),
        )
    if scheme in _REDIS_SCHEMES and url[len(scheme) :].startswith("://"):
        if scheme != "unix" and re.fullmatch(r"/?|/\d+", parts.path) is None:
            raise ConfigError(
                f"the database of {redact_url(url)!r} is {parts.path[1:]!r}: a Redis database is a number"
            )
        client_url, ours = split_url_options(url, _options(parts, ("prefix", "store", "ttl")))
        return RedisStoreBackend(
            client_url,
            key_prefix=ours.get("prefix", "sessionkeeper:"),
            store_id=ours.get("store", "default"),
            ttl_s=_ttl_s(ours),
            read_only=read_only,
        )
    raise ConfigError(
        f"unsupported store URL: {redact_url(url)!r} (postgresql://, postgres://, redis://, rediss://,"
        " unix://; a sessions directory is a path)"
    )


def _parts(url: str) -> SplitResult:
    """``url`` split, its port checked (urllib checks it only when asked), else :class:`ConfigError`."""
    try:
        parts = urlsplit(url)
        _ = parts.port
    except ValueError as err:  # "Invalid IPv6 URL", "Port out of range 0-65535", a non-numeric port
        raise ConfigError(f"bad store URL {redact_url(url)!r}: {err}") from err
    return parts


def _options(parts: SplitResult, names: tuple[str, ...]) -> tuple[str, ...]:
    """``names``, after checking each of them is given at most once and not empty (else ConfigError)."""
    seen: set[str] = set()
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name not in names:
            continue
        if name in seen:
            raise ConfigError("given twice in the store URL; give it once", key=name)
        if not value:
            raise ConfigError("is empty in the store URL; give a value or leave it out", key=name)
        seen.add(name)
    return names


def _schema(name: str) -> str:
    """
    ``name``, unless PostgreSQL reserves it (``pg_*``: "unacceptable schema name", or a system schema
    whose tables would be mixed with the catalog's): :class:`ConfigError` before anything connects.
    """
    if name.lower().startswith("pg_") or name.lower() == "information_schema":
        raise ConfigError(
            f"{name!r} is a PostgreSQL system schema name (pg_*, information_schema); choose another",
            key="schema",
        )
    return name


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
