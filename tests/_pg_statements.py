"""
Counting what our PostgreSQL code sends (issue 13: statements and commits per runtime turn), at psycopg's
boundary: every statement a cursor executes (the pool's connection checks included) and every
``BEGIN`` / ``COMMIT`` / ``ROLLBACK`` a ``conn.transaction()`` block sends. A statement sent in
autocommit mode outside a block is one transaction of its own; a block is one more.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import pytest


@attrs.define
class Sent:
    """
    What was sent: ``statements`` (their text, in order, empty ones included), ``commands`` (``BEGIN``,
    ``COMMIT``...), ``transactions`` (statements in autocommit mode outside a block, and ``COMMIT``s),
    ``lone_commands`` (commands sent outside pipeline mode: a round trip each; in a pipeline they go
    with a statement).
    """

    statements: list[str] = attrs.field(factory=list)
    commands: list[str] = attrs.field(factory=list)
    transactions: int = 0
    lone_commands: int = 0

    @property
    def lazy_commits(self) -> int:
        """Statements that turn ``synchronous_commit`` off for their transaction (a commit not waited on)."""
        return sum("set_config('synchronous_commit', 'off', true)" in s for s in self.statements)

    @property
    def round_trips(self) -> int:
        """Statements plus the commands sent outside a pipeline."""
        return len(self.statements) + self.lone_commands

    def clear(self) -> None:
        self.statements.clear()
        self.commands.clear()
        self.transactions = 0
        self.lone_commands = 0


@contextmanager
def count_statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sent]:
    """Count what every psycopg async connection sends while the block runs."""
    import psycopg
    from psycopg import pq
    from psycopg._connection_base import BaseConnection

    sent = Sent()
    execute = psycopg.AsyncCursor.execute
    exec_command = BaseConnection._exec_command

    async def counting_execute(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        text = query if isinstance(query, str) else query.as_string(self.connection)
        sent.statements.append(" ".join(str(text).split()))
        idle = self.connection.pgconn.transaction_status == pq.TransactionStatus.IDLE
        if idle and self.connection._pipeline is None and text:
            sent.transactions += 1  # autocommit: the statement is a transaction of its own
        return await execute(self, query, params, **kwargs)  # pyright: ignore[reportArgumentType]

    def counting_command(self: Any, command: Any, *args: Any, **kwargs: Any) -> Any:
        name = bytes(command).decode() if isinstance(command, bytes | bytearray) else str(command)
        sent.commands.append(name)
        if name.startswith("COMMIT"):
            sent.transactions += 1
        if self._pipeline is None:
            sent.lone_commands += 1
        return exec_command(self, command, *args, **kwargs)  # pyright: ignore[reportArgumentType]

    monkeypatch.setattr(psycopg.AsyncCursor, "execute", counting_execute)
    monkeypatch.setattr(BaseConnection, "_exec_command", counting_command)
    try:
        yield sent
    finally:
        monkeypatch.undo()
