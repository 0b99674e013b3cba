"""
The connection pool of the PostgreSQL backends (``_postgres``, ``_postgres_transcripts``) and how one
operation runs on it: the pool's connection check, and the retries of an operation the server rolled
back or whose connection was found dead before anything was committed.

A connection is checked when taken from the pool without a round trip (issue 13: the round-trip check
was 5 of the 14 statements of a runtime turn): an idle connection the server closed (a restart,
``pg_terminate_backend``, an idle reaper) has its socket readable (the server's goodbye message, then
end of file), so the check polls the socket (no wait) and only when it is readable asks the server
(one empty statement), which fails on a dead connection: the pool then drops it and takes or opens
another. A connection that dies between the check and its first statement (a server going away at that
instant) is caught by the operation's own retry: a unit that had committed nothing runs again on a fresh
connection (:func:`run_unit`).
"""

from __future__ import annotations

import asyncio
import logging
import random
import select
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from sessionkeeper.exceptions import (
    InvalidSessionEntryError,
    SessionBusyError,
    StoreUnavailableError,
)
from sessionkeeper.store._postgres_schema import busy_or_unreachable


if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool


__all__ = ("CONFLICT_ATTEMPTS", "Unit", "check_idle_connection", "run_unit")

R = TypeVar("R")

_log = logging.getLogger("sessionkeeper.store")

CONFLICT_ATTEMPTS: Final = 8
"""
How many times an operation runs when PostgreSQL rolls it back on a serialization failure (SQLSTATE
``40001``, under ``SERIALIZABLE`` or ``REPEATABLE READ``, e.g. a server whose
``default_transaction_isolation`` is ``serializable``) or a deadlock (``40P01``), or when its connection
was found dead before it committed anything. Every operation of the backends is one transaction (or one
statement) that such an error rolls back entirely, so each is safe to run again;
:meth:`~sessionkeeper.store.PostgresStoreBackend.update` and
:meth:`~sessionkeeper.store.PostgresStoreBackend.transaction` then call their function again on the
entries read anew (deviation ``DB-RETRY``).
"""

_CONFLICT_BACKOFF_S: Final = (0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.2)
"""The pause before attempt 2 ... 8, each scaled by a random factor in [0.5, 1.5) (about 0.5 s in all)."""


def _readable(fd: int) -> bool:
    """Whether ``fd`` has something to read now (never waits)."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(poller.poll(0))
    ready, _, _ = select.select([fd], [], [], 0)  # pragma: no cover - Windows
    return bool(ready)


async def check_idle_connection(conn: AsyncConnection[Any]) -> None:
    """
    The pool's check of a connection it hands out (module docstring): no round trip while the socket is
    quiet; when the server sent something while the connection was idle, one empty statement decides.

    Raises:
        psycopg.OperationalError: The connection is dead (the pool discards it and tries another).
    """
    import psycopg  # noqa: PLC0415 - the optional extra, imported on first use
    from psycopg import pq  # noqa: PLC0415 - the optional extra, imported on first use

    if conn.closed or conn.broken or conn.pgconn.status != pq.ConnStatus.OK:
        raise psycopg.OperationalError("the connection is closed")
    if _readable(conn.pgconn.socket):
        await conn.execute("")  # a notice, or the server's goodbye: this fails on a dead connection


class Unit:
    """
    What one operation tells :func:`run_unit` about its progress: :attr:`committing` is set just before
    the round trip that may commit (a single writing statement, or ``COMMIT``); until then a dead
    connection means nothing was written and the operation runs again on another one.
    """

    __slots__ = ("committing",)

    def __init__(self) -> None:
        self.committing = False


async def run_unit(
    pool: AsyncConnectionPool[Any],
    body: Callable[[AsyncConnection[Any], Unit], Awaitable[R]],
    *,
    where: str,
    dsn: str | None,
    lock_timeout_s: float,
) -> R:
    """
    Run ``body`` on a pooled connection, running it again (on another connection) after a serialization
    failure or deadlock (up to :data:`CONFLICT_ATTEMPTS` times, with a jittered back-off) or a dead
    connection before it was committing (:class:`Unit`), and mapping driver errors to ours.

    Raises:
        SessionBusyError: Still rolled back after :data:`CONFLICT_ATTEMPTS` attempts, no connection
            within ``lock_timeout_s`` while the server answers, or a row lock not obtained in that time.
        StoreUnavailableError: The server cannot be reached, or the connection broke while committing
            (the outcome is unknown) or on every attempt.
        InvalidSessionEntryError: The server refuses the values for good (SQLSTATE class 22 or 54).
    """
    import psycopg  # noqa: PLC0415 - the optional extra, imported on first use
    from psycopg import errors  # noqa: PLC0415 - the optional extra, imported on first use
    from psycopg_pool import PoolTimeout  # noqa: PLC0415 - the optional extra, imported on first use

    attempt = 0
    while True:
        attempt += 1
        unit = Unit()
        used: list[AsyncConnection[Any]] = []
        try:
            async with pool.connection() as conn:
                used.append(conn)
                return await body(conn, unit)
        except (errors.SerializationFailure, errors.DeadlockDetected) as err:
            # rolled back entirely (every body is one transaction or one statement): run it again
            sqlstate = err.sqlstate or "40001"
            if attempt >= CONFLICT_ATTEMPTS:
                raise SessionBusyError(
                    f"{where}: still rolled back by the server after {attempt} attempts "
                    f"(SQLSTATE {sqlstate}: {err})",
                    path=where,
                    waited_ms=0,
                ) from err
            _log.debug(
                "store operation rolled back (SQLSTATE %s), attempt %d of %d",
                sqlstate,
                attempt,
                CONFLICT_ATTEMPTS,
                extra={"where": where, "sqlstate": sqlstate, "attempt": attempt},
            )
            await asyncio.sleep(_CONFLICT_BACKOFF_S[attempt - 1] * (0.5 + random.random()))  # jitter
        except PoolTimeout as err:  # every connection busy (SessionBusyError), or the server gone
            busy = f"no connection to {where} within {lock_timeout_s} s: all busy ({err})"
            raise await busy_or_unreachable(dsn, where=where, waited_s=lock_timeout_s, detail=busy) from err
        except errors.LockNotAvailable as err:
            raise SessionBusyError(
                f"a row of {where} stayed locked by another writer past {lock_timeout_s} s",
                path=where,
                waited_ms=lock_timeout_s * 1000,
            ) from err
        except (errors.ProgramLimitExceeded, errors.DataError) as err:  # class 54 / 22: for good
            raise InvalidSessionEntryError(f"{where} refuses it ({err.sqlstate}): {err}") from err
        except psycopg.OperationalError as err:
            dead = bool(used) and used[0].broken
            if not dead or unit.committing or attempt >= CONFLICT_ATTEMPTS:
                raise StoreUnavailableError(f"{where}: {err}") from err
            _log.debug(
                "connection found dead before anything was committed, attempt %d of %d",
                attempt,
                CONFLICT_ATTEMPTS,
                extra={"where": where, "attempt": attempt},
            )
