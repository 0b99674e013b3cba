"""
The real PostgreSQL and Redis servers the database-backend tests use (DESIGN Decision 8: never mocks).

``$SESSIONKEEPER_TEST_POSTGRES_DSN`` (default ``postgresql://127.0.0.1:5432/test``) and
``$SESSIONKEEPER_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``). Where no server answers the
tests skip with the reason, except under CI (``$CI`` set), where they fail: CI must not skip them.
Each test gets its own PostgreSQL schema / Redis key prefix and removes it afterwards.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest


POSTGRES_DSN = os.environ.get("SESSIONKEEPER_TEST_POSTGRES_DSN", "postgresql://127.0.0.1:5432/test")
REDIS_URL = os.environ.get("SESSIONKEEPER_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def _unreachable(what: str, url: str, err: BaseException) -> None:
    reason = f"no {what} server reachable at {url} ({err}); start it or set the URL env var"
    if os.environ.get("CI"):
        pytest.fail(f"CI must not skip the {what} tests: {reason}")
    pytest.skip(reason)


def _port_open(url: str, default_port: int) -> None:
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or default_port), timeout=2):
        pass


def require_postgres() -> str:
    """The test DSN, once the server answered a query (else skip, or fail under CI)."""
    try:
        import psycopg

        _port_open(POSTGRES_DSN, 5432)
        with psycopg.connect(POSTGRES_DSN, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except Exception as err:  # OSError, ImportError, psycopg.OperationalError
        _unreachable("PostgreSQL", POSTGRES_DSN, err)
    return POSTGRES_DSN


def require_redis() -> str:
    """The test URL, once the server answered PING (else skip, or fail under CI)."""
    try:
        import redis

        _port_open(REDIS_URL, 6379)
        client = redis.Redis.from_url(REDIS_URL, socket_timeout=5)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as err:
        _unreachable("Redis", REDIS_URL, err)
    return REDIS_URL


def new_name(prefix: str) -> str:
    """A fresh schema / key prefix name (letters, digits, ``_``)."""
    return f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:10]}"


def drop_schema(schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def drop_redis_prefix(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        batch = list(client.scan_iter(match=f"{prefix}*", count=1000))
        while batch:
            client.delete(*batch[:500])
            batch = batch[500:]
    finally:
        client.close()


@pytest.fixture
def pg_schema() -> Iterator[tuple[str, str]]:
    """``(dsn, schema)``: a schema of its own on the real server, dropped afterwards."""
    dsn = require_postgres()
    schema = new_name("sk_test")
    try:
        yield dsn, schema
    finally:
        drop_schema(schema)


@pytest.fixture
def redis_prefix() -> Iterator[tuple[str, str]]:
    """``(url, key prefix)``: a key prefix of its own on the real server, its keys deleted afterwards."""
    url = require_redis()
    prefix = new_name("sktest") + ":"
    try:
        yield url, prefix
    finally:
        drop_redis_prefix(prefix)
