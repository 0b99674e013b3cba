"""``SessionStore.open`` on a ``postgresql://`` or ``redis://`` URL (issue 13): the store in the database,
transcripts as files in ``transcripts_dir``, or, on PostgreSQL without one, in the same database."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tests._helpers import cli_output
from tests._servers import pg_schema, redis_prefix

from sessionkeeper.exceptions import ConfigError
from sessionkeeper.store import (
    PostgresStoreBackend,
    PostgresTranscriptStorage,
    RedisStoreBackend,
    SessionStore,
)
from sessionkeeper.store._urls import is_store_url, open_store_url
from sessionkeeper.transcript import FileTranscriptStorage, MemoryTranscriptStorage, TranscriptManager


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema", "redis_prefix")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_postgres_url_opens_the_store_in_the_database(
    pg_schema: tuple[str, str], tmp_path: Path
) -> None:
    dsn, schema = pg_schema
    url = f"{dsn}?sslmode=disable&schema={schema}&store=agent-main"
    async with SessionStore.open(url, transcripts_dir=tmp_path) as store:
        assert isinstance(store.backend, PostgresStoreBackend)
        assert (store.backend.schema, store.backend.store_id) == (schema, "agent-main")
        assert store.backend.dsn == f"{dsn}?sslmode=disable"  # our parameters never reach libpq
        entry = await store.patch("agent:main:main", {"label": "Main"})
        assert store.transcript_file(entry) == tmp_path / f"{entry.session_id}.jsonl"
    async with SessionStore.open(f"{dsn}?schema={schema}&store=agent-main", read_only=True) as again:
        assert [key for key, _ in await again.list()] == ["agent:main:main"]
        assert again.sessions_dir is None
    async with SessionStore.open(f"{dsn}?schema={schema}&store=other") as other:
        assert await other.list() == []  # one store per store id


async def test_one_postgres_url_opens_the_store_and_its_transcripts(
    pg_schema: tuple[str, str], tmp_path: Path
) -> None:
    dsn, schema = pg_schema
    url = f"{dsn}?schema={schema}&store=agent-main"
    async with SessionStore.open(url) as store:
        storage = store.transcript_storage()
        assert isinstance(storage, PostgresTranscriptStorage)
        assert storage.backend is store.backend and store.transcript_storage() is storage  # one pool
        entry = await store.patch("agent:main:main", {"label": "Main"})
        assert store.transcript_file(entry) is None
        manager = await TranscriptManager.create_in(storage, cwd="/w", session_id=str(entry.session_id))
        await manager.append_custom("note", data={"n": 1})
    async with SessionStore.open(url) as again:  # another worker: the same transcripts
        assert await again.transcript_storage().list_sessions() == [entry.session_id]
    async with SessionStore.open(url, transcripts_dir=tmp_path) as files:
        assert isinstance(files.transcript_storage(), FileTranscriptStorage)
    async with SessionStore.open(f"{dsn}?schema={schema}", read_only=True) as ro:
        assert isinstance(ro.transcript_storage(), PostgresTranscriptStorage)


async def test_a_redis_url_without_transcripts_dir_keeps_them_in_memory(
    redis_prefix: tuple[str, str],
) -> None:
    url, prefix = redis_prefix
    async with SessionStore.open(f"{url}?prefix={prefix}") as store:
        assert isinstance(store.transcript_storage(), MemoryTranscriptStorage)


async def test_redis_url_opens_the_store_in_redis(redis_prefix: tuple[str, str], tmp_path: Path) -> None:
    url, prefix = redis_prefix
    async with SessionStore.open(
        f"{url}?prefix={prefix}&store=a1&ttl=3600", transcripts_dir=tmp_path
    ) as store:
        assert isinstance(store.backend, RedisStoreBackend)
        assert (store.backend.key_prefix, store.backend.store_id, store.backend.ttl_s) == (prefix, "a1", 3600)
        assert store.backend.url == url
        entry = await store.patch("agent:main:main", {"label": "Main"})
        assert store.transcript_file(entry) == tmp_path / f"{entry.session_id}.jsonl"
        assert (await store.require("agent:main:main")).label == "Main"


def test_store_urls_and_paths_are_told_apart() -> None:
    assert is_store_url("postgresql://127.0.0.1/test")
    assert is_store_url("postgres://u@h/db")
    assert is_store_url("REDIS://127.0.0.1:6379/0")
    assert not is_store_url("/srv/agents/main/sessions")
    assert not is_store_url("C:\\agents\\main\\sessions")
    assert not is_store_url(Path("postgresql:/x"))
    # meant as URLs (refused by open_store_url as unsupported), never looked up as directories
    assert is_store_url("file:///srv/sessions")
    assert is_store_url("postgresql:/127.0.0.1/db")


def test_bad_combinations_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="backend"):
        SessionStore.open("postgresql://127.0.0.1/test", backend="sqlite")
    with pytest.raises(ConfigError, match="transcripts_dir"):
        SessionStore.open(tmp_path, transcripts_dir=tmp_path)
    with pytest.raises(ConfigError, match="ttl"):
        open_store_url("redis://127.0.0.1:6379/0?ttl=soon")
    with pytest.raises(ConfigError, match="schema"):
        open_store_url("postgresql://127.0.0.1/test?schema=a-b")


BAD_URLS = {
    "an IPv6 host that does not parse": ("postgresql://u:p@[::1/x", "Invalid IPv6"),
    "a Redis IPv6 host that does not parse": ("redis://[::1/0", "Invalid IPv6"),
    "a port out of range": ("postgresql://127.0.0.1:99999/db", "out of range"),
    "a reserved pg_ schema": ("postgresql://127.0.0.1/test?schema=pg_foo", "system schema"),
    "pg_catalog": ("postgresql://127.0.0.1/test?schema=pg_catalog", "system schema"),
    "information_schema": ("postgresql://127.0.0.1/test?schema=information_schema", "system schema"),
    "store given twice": ("postgresql://127.0.0.1/test?store=a&store=b", "twice"),
    "ttl given twice": ("redis://127.0.0.1:6379/0?ttl=1s&ttl=2s", "twice"),
    "an empty store": ("redis://127.0.0.1:6379/0?store=", "empty"),
    "a Redis database that is not a number": ("redis://127.0.0.1:6379/abc", "number"),
    "mysql": ("mysql://x/y", "unsupported store URL"),
    "sqlite": ("sqlite:///tmp/x.db", "unsupported store URL"),
    "postgresql with one slash": ("postgresql:/127.0.0.1/db", "unsupported store URL"),
}


@pytest.mark.parametrize("case", list(BAD_URLS))
def test_a_bad_store_url_is_a_config_error_before_anything_connects(case: str) -> None:
    # these raised ValueError or psycopg's ReservedName, were used as given (information_schema got
    # our tables; of two values one silently won), or were looked up as a directory
    url, message = BAD_URLS[case]
    with pytest.raises(ConfigError, match=message):
        SessionStore.open(url)


@pytest.mark.parametrize("case", ["a port out of range", "mysql", "a reserved pg_ schema"])
def test_cli_bad_store_url_is_one_line_and_exit_2(case: str) -> None:
    code, out = cli_output("sessions", "cleanup", "--store", BAD_URLS[case][0], "--dry-run")
    assert code == 2 and out.startswith("sessionkeeper: error:") and "Traceback" not in out, out


def test_a_redis_database_the_server_refuses_is_a_config_error(redis_prefix: tuple[str, str]) -> None:
    base, prefix = redis_prefix
    url = base.rsplit("/", 1)[0] + f"/99?prefix={prefix}"  # the server has 16 databases

    async def listing() -> None:
        async with SessionStore.open(url) as store:
            await store.list()

    with pytest.raises(ConfigError, match="DB index"):  # was redis-py's ResponseError
        asyncio.run(listing())
    code, out = cli_output("sessions", "list", "--store", url)
    assert code == 2 and out.startswith("sessionkeeper: error:") and "Traceback" not in out, out


def _seed(url: str) -> None:
    async def run() -> None:
        async with SessionStore.open(url) as store:
            await store.patch("agent:main:main", {"label": "Main"})
            await store.patch("agent:main:cron:1", {"label": "Cron"})

    asyncio.run(run())


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_cli_sessions_list_and_status_on_a_store_url(kind: str, request: pytest.FixtureRequest) -> None:
    if kind == "postgres":
        dsn, schema = request.getfixturevalue("pg_schema")
        url = f"{dsn}?schema={schema}&store=cli"
    else:
        base, prefix = request.getfixturevalue("redis_prefix")
        url = f"{base}?prefix={prefix}&store=cli"
    _seed(url)
    code, out = cli_output("sessions", "list", "--store", url, "--json")
    assert code == 0, out
    listed = json.loads(out)
    assert listed["backend"] == kind and listed["store"] == url and listed["count"] == 2
    assert {row["key"] for row in listed["sessions"]} == {"agent:main:main", "agent:main:cron:1"}
    code, out = cli_output("status", "--store", url, "agent:main:main", "--json")
    assert code == 0, out
    status = json.loads(out)
    assert status["found"] is True and status["entry"]["label"] == "Main"
    assert status["backend"] == kind  # docs/cli.md: every --json of these says its backend
    code, out = cli_output("sessions", "cleanup", "--store", url, "--dry-run", "--json")
    assert code == 0 and json.loads(out)["backend"] == kind, out
    if kind == "postgres":  # the transcript in the database: none written here (test_cli_status_url.py)
        assert (status["transcript"]["exists"], status["transcript"]["lines"]) == (False, None)
    else:  # Redis keeps transcripts in this process's memory: nothing to show
        assert status["transcript"] is None
    code, out = cli_output("status", "--store", url, "agent:main:nope")
    assert code == 1 and "no session for key" in out
    code, out = cli_output("status", "--store", url, "agent:main:nope", "--json")
    assert code == 1 and json.loads(out) == {"key": "agent:main:nope", "found": False, "backend": kind}


def test_cli_store_url_never_shows_the_password(pg_schema: tuple[str, str]) -> None:
    dsn, schema = pg_schema
    url = dsn.replace("postgresql://", "postgresql://root:s3cret@") + f"?schema={schema}"
    code, out = cli_output("sessions", "list", "--store", url, "--json")
    assert code == 0, out
    assert "s3cret" not in out and json.loads(out)["store"].startswith("postgresql://root:***@")


def test_cli_store_path_that_is_not_a_url_must_exist(tmp_path: Path) -> None:
    code, out = cli_output("sessions", "list", "--store", str(tmp_path / "missing"))
    assert code == 2 and "does not exist" in out
