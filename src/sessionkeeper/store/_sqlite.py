"""
``SqliteStoreBackend``: the session store in one SQLite file (stdlib ``sqlite3``, WAL; DESIGN
"Storage backends").

One row per session key holding the entry's JSON object (the same object ``sessions.json`` would hold,
unknown fields included), so an update touches one row: O(1) whatever the store size, where a JSON store
rewrites the whole file. OpenClaw itself moved its store to SQLite in 2026.8.

Schema (``PRAGMA user_version = 1``)::

    CREATE TABLE session_entries (
        seq         INTEGER PRIMARY KEY AUTOINCREMENT,   -- insertion order
        session_key TEXT NOT NULL UNIQUE,
        entry       TEXT NOT NULL                        -- the SessionEntry JSON object
    )

Concurrency: every write is one ``BEGIN IMMEDIATE`` transaction, so writers in other threads and
processes are serialised by SQLite itself (``busy_timeout``); readers never block writers (WAL).

A SQLite file holding other tables and no schema version is not a session store: it is refused
(:class:`~sessionkeeper.exceptions.StoreCorruptError`), never given our table. ``read_only=True`` (the CLI's
``sessions list`` and ``status``, dry runs) opens the file with ``mode=ro``: a missing or 0-byte file, or a
SQLite file without any table, reads as an empty store, and nothing is created or written (SQLite itself
may add the ``-wal``/``-shm`` index files it needs to read a database in WAL mode).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

import msgspec

from sessionkeeper._fs import FILE_MODE, backup_file, ensure_dir, refuse_symlink
from sessionkeeper.exceptions import (
    InvalidSessionEntryError,
    SessionBusyError,
    StoreCorruptError,
    StoreError,
)
from sessionkeeper.store._backend import (
    EntryUpdater,
    RowsAlwaysLoad,
    StoreTransaction,
    check_entry,
    diff_entries,
)
from sessionkeeper.store._entry import (
    SessionEntry,
    encode_session_entry,
    session_entry_from_dict,
    session_entry_to_dict,
)
from sessionkeeper.store._jsontext import dump_js, parse_store_json
from sessionkeeper.store._remote import storable_key  # SQLite text is UTF-8: no lone surrogate
from sessionkeeper.store._turns import FifoTurns


__all__ = ("SQLITE_FILE_NAME", "SqliteStoreBackend", "SqliteSynchronous")

T = TypeVar("T")

SQLITE_FILE_NAME: Final = "sessions.sqlite"
"""The SQLite store file in a sessions directory (DESIGN "Files")."""

SqliteSynchronous = Literal["FULL", "NORMAL", "OFF", "EXTRA"]

_SCHEMA_VERSION: Final = 1
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS session_entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session_key TEXT NOT NULL UNIQUE,
    entry TEXT NOT NULL
)
"""
_UPSERT: Final = (
    "INSERT INTO session_entries (session_key, entry) VALUES (?, ?) "
    "ON CONFLICT(session_key) DO UPDATE SET entry = excluded.entry"
)


class SqliteStoreBackend(RowsAlwaysLoad):
    """
    A :class:`~sessionkeeper.store.StoreBackend` on a SQLite database in WAL mode.

    Args:
        path: The database file (``sessions.sqlite``), or the sessions directory to hold it. Created with
            mode 0600 (directory 0700) when missing.
        synchronous: SQLite's ``PRAGMA synchronous``. ``"FULL"`` (default) makes every committed update
            durable (an fsync of the WAL per commit). ``"NORMAL"`` is safe against application crashes
            and keeps the database consistent after a power loss, but may lose the last commits then;
            it is several times faster. ``"OFF"`` is for scratch stores only.
        busy_timeout_s: How long a writer waits for another connection's write transaction before
            raising :class:`~sessionkeeper.exceptions.SessionBusyError` (default 10 s).
        read_only: Open the database read-only (``mode=ro``): reads only; no schema, file or backup of
            ours is created (SQLite itself may add its ``-wal``/``-shm`` files to read a WAL database);
            a missing or 0-byte file, or a database without any table, is an empty store. Writes raise
            :class:`~sessionkeeper.exceptions.StoreError`.

    Raises:
        StoreCorruptError: The file is not a SQLite database of this schema (a foreign SQLite file: other
            tables, no schema version), or a row is not a JSON object. The file is left unchanged; a
            0600 backup is written for an unreadable file unless ``read_only``.
        SessionBusyError: The database stayed locked past ``busy_timeout_s``.
        StoreError: A write on a read-only backend.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        synchronous: SqliteSynchronous = "FULL",
        busy_timeout_s: float = 10.0,
        read_only: bool = False,
    ) -> None:
        target = Path(path)
        if target.is_dir() or (not target.suffix and not target.exists()):
            target = target / SQLITE_FILE_NAME
        if synchronous not in ("FULL", "NORMAL", "OFF", "EXTRA"):
            raise ValueError(f"synchronous must be FULL, NORMAL, OFF or EXTRA, got {synchronous!r}")
        self.path: Path = target
        self.synchronous: SqliteSynchronous = synchronous
        self.busy_timeout_s = busy_timeout_s
        self.read_only = read_only
        self._mutex = threading.Lock()
        self._turns = FifoTurns()  # calls apply in call order (issue 11)
        self._conn: sqlite3.Connection | None = None
        self._closed = False

    def __repr__(self) -> str:
        ro = ", read_only=True" if self.read_only else ""
        return f"SqliteStoreBackend({str(self.path)!r}, synchronous={self.synchronous!r}{ro})"

    # ------------------------------------------------------------------ connection

    def _connect(self) -> sqlite3.Connection:
        if self._closed:
            raise RuntimeError("the store backend is closed")
        if self._conn is not None:
            return self._conn
        if self.read_only:
            self._conn = self._connect_read_only()
            return self._conn
        ensure_dir(self.path.parent)
        # never through a symbolic link: a dangling one would make SQLite create its target anywhere, and
        # SQLite would put its -wal/-shm/-journal files next to the link (issue 15 item 7)
        refuse_symlink(self.path, what="SQLite store")
        if not self.path.exists():
            # create it 0600 before SQLite does (SQLite would use the umask)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            with contextlib.suppress(FileExistsError):  # another process created it meanwhile
                os.close(os.open(self.path, flags, FILE_MODE))
            refuse_symlink(self.path, what="SQLite store")
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout_s,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as err:
            raise self._corrupt(f"cannot open the database ({err})", err) from err
        with self._opening(conn):
            if conn.execute("PRAGMA user_version").fetchone()[0] == 0:
                _check_no_tables(conn, self.path)  # a foreign database: refused before WAL touches it
            self._enable_wal(conn)
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                # several connections may open a new store at once: decide under the write lock
                conn.execute("BEGIN IMMEDIATE")
                try:
                    version = conn.execute("PRAGMA user_version").fetchone()[0]
                    if version == 0:
                        _check_no_tables(conn, self.path)  # never add our table to a foreign database
                        conn.execute(_SCHEMA)
                        conn.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")
                        version = _SCHEMA_VERSION
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
            _check_version(conn, version, self.path)
        for suffix in ("-wal", "-shm"):
            side = self.path.with_name(self.path.name + suffix)
            if side.exists():
                side.chmod(FILE_MODE)
        self._conn = conn
        return conn

    def _connect_read_only(self) -> sqlite3.Connection:
        """
        Open the database with ``mode=ro`` (never created, never written by us; SQLite may add its
        ``-wal``/``-shm`` files). A missing or 0-byte file, or
        a database without any table, is an empty store: an in-memory database with the schema.
        """
        try:
            empty = self.path.stat().st_size == 0
        except FileNotFoundError:
            empty = True
        if empty:
            return _empty_database()
        uri = f"{self.path.absolute().as_uri()}?mode=ro"
        try:
            conn = sqlite3.connect(
                uri, uri=True, timeout=self.busy_timeout_s, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as err:
            raise self._corrupt(f"cannot open the database read-only ({err})", err) from err
        with self._opening(conn):
            conn.execute("PRAGMA query_only=1")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                _check_no_tables(conn, self.path)
                conn.close()
                return _empty_database()
            _check_version(conn, version, self.path)
        return conn

    @contextlib.contextmanager
    def _opening(self, conn: sqlite3.Connection) -> Iterator[None]:
        """Close ``conn`` when opening it fails: a refused store as is, a SQLite error as busy or corrupt."""
        try:
            yield
        except StoreCorruptError:
            conn.close()
            raise
        except sqlite3.DatabaseError as err:
            raise self._open_failed(conn, err) from err

    def _open_failed(
        self, conn: sqlite3.Connection, err: sqlite3.DatabaseError
    ) -> SessionBusyError | StoreCorruptError:
        """Close a connection that failed while opening; the error to raise (busy, or not a store)."""
        conn.close()
        if isinstance(err, sqlite3.OperationalError) and ("locked" in str(err) or "busy" in str(err)):
            return self._busy(err)
        return self._corrupt(f"not a usable SQLite store ({err})", err)

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        """
        Switch a new database to WAL. Changing the journal mode needs an exclusive lock and SQLite does not
        run the busy handler for it, so connections opening a new store together retry here, up to
        ``busy_timeout_s``; once the file is in WAL mode (persistent) this is a read.
        """
        deadline = time.monotonic() + self.busy_timeout_s
        delay = 0.001
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
                if str(mode).lower() == "wal":
                    return
                conn.execute("PRAGMA journal_mode=WAL")
            except sqlite3.OperationalError as err:
                if "locked" not in str(err) and "busy" not in str(err):
                    raise
                if time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.05)

    def _corrupt(self, message: str, cause: Exception) -> StoreCorruptError:
        """The error for an unusable file; backed up (0600) first unless read-only (which writes nothing)."""
        backup = None
        if not self.read_only and self.path.exists() and self.path.stat().st_size > 0:
            backup = backup_file(self.path, reuse_identical=True)  # other processes read it too
        return StoreCorruptError(
            f"{message}; the file was left unchanged" + (f", backup: {backup}" if backup else ""),
            path=self.path,
            backup_path=backup,
        )

    def _busy(self, err: Exception) -> SessionBusyError:
        return SessionBusyError(
            f"session store {self.path} stayed locked by another writer ({err})",
            path=self.path,
            waited_ms=self.busy_timeout_s * 1000,
        )

    def _decode(self, key: str, text: str) -> SessionEntry:
        try:
            raw = msgspec.json.decode(text)
        except (msgspec.DecodeError, RecursionError) as err:  # RecursionError: nested ~1000 deep
            try:  # lone surrogate escapes (see _encode_row), 1e400, huge integers, deep nesting (issue 15)
                raw = parse_store_json(text, field_depth=1)
            except ValueError:
                raise StoreCorruptError(f"entry {key!r} is not valid JSON ({err})", path=self.path) from err
        if not isinstance(raw, dict):
            raise StoreCorruptError(f"entry {key!r} is not a JSON object", path=self.path)
        return session_entry_from_dict(raw)

    def _read(self, fn: Any, *args: Any) -> Any:
        with self._mutex:
            conn = self._connect()
            try:
                return fn(conn, *args)
            except sqlite3.OperationalError as err:
                if "locked" in str(err) or "busy" in str(err):
                    raise self._busy(err) from err
                raise

    def _write(self, fn: Any, *args: Any) -> Any:
        if self.read_only:
            raise StoreError(f"session store {self.path} was opened read-only")
        with self._mutex:
            conn = self._connect()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as err:
                raise self._busy(err) from err
            try:
                result = fn(conn, *args)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.OperationalError as err:  # pragma: no cover - COMMIT after IMMEDIATE
                conn.execute("ROLLBACK")
                raise self._busy(err) from err
            return result

    # ------------------------------------------------------------------ sync bodies

    def _all(self, conn: sqlite3.Connection) -> dict[str, SessionEntry]:
        rows = conn.execute("SELECT session_key, entry FROM session_entries ORDER BY seq").fetchall()
        return {key: self._decode(key, text) for key, text in rows}

    def _get(self, conn: sqlite3.Connection, key: str) -> SessionEntry | None:
        row = conn.execute("SELECT entry FROM session_entries WHERE session_key = ?", (key,)).fetchone()
        return None if row is None else self._decode(key, row[0])

    def _keys(self, conn: sqlite3.Connection) -> list[str]:
        return [r[0] for r in conn.execute("SELECT session_key FROM session_entries ORDER BY seq")]

    def _update(self, conn: sqlite3.Connection, key: str, fn: EntryUpdater) -> SessionEntry | None:
        row = conn.execute("SELECT entry FROM session_entries WHERE session_key = ?", (key,)).fetchone()
        current = None if row is None else self._decode(key, row[0])
        new = fn(current)
        if new is None:
            return current
        check_entry(key, new)
        text = _encode_row(new)
        if row is None or row[0] != text:
            conn.execute(_UPSERT, (key, text))
        return new

    def _delete(self, conn: sqlite3.Connection, key: str) -> bool:
        return conn.execute("DELETE FROM session_entries WHERE session_key = ?", (key,)).rowcount > 0

    def _transaction(self, conn: sqlite3.Connection, fn: StoreTransaction[T]) -> T:
        before = self._all(conn)
        working = dict(before)
        result = fn(working)
        upserts, removals = diff_entries(before, working)
        for key, entry in upserts.items():
            check_entry(key, entry)
            _check_key(key)
        conn.executemany("DELETE FROM session_entries WHERE session_key = ?", [(k,) for k in removals])
        conn.executemany(_UPSERT, [(k, _encode_row(e)) for k, e in upserts.items()])
        return result

    # ------------------------------------------------------------------ public async API

    async def load_all(self) -> dict[str, SessionEntry]:
        """Return every entry in insertion order."""
        result: dict[str, SessionEntry] = await self._turns.run(self._read, self._all)
        return result

    async def get(self, session_key: str) -> SessionEntry | None:
        """Return the entry under ``session_key``, or ``None`` (one indexed row read)."""
        if not storable_key(session_key, nul_ok=True):
            return None
        result: SessionEntry | None = await self._turns.run(self._read, self._get, session_key)
        return result

    async def keys(self) -> list[str]:
        """Return every session key in insertion order."""
        result: list[str] = await self._turns.run(self._read, self._keys)
        return result

    async def put(self, session_key: str, entry: SessionEntry) -> None:
        """Store ``entry`` under ``session_key`` (one row upsert)."""
        check_entry(session_key, entry)
        _check_key(session_key)
        await self._turns.run(self._write, self._update, session_key, lambda _old: entry)

    async def update(self, session_key: str, fn: EntryUpdater) -> SessionEntry | None:
        """Atomically replace the entry under ``session_key`` with ``fn(current)`` (``None``: no change)."""
        _check_key(session_key)
        result: SessionEntry | None = await self._turns.run(self._write, self._update, session_key, fn)
        return result

    async def delete(self, session_key: str) -> bool:
        """Remove ``session_key``; return whether it existed."""
        if not storable_key(session_key, nul_ok=True):
            return False
        result: bool = await self._turns.run(self._write, self._delete, session_key)
        return result

    async def transaction(self, fn: StoreTransaction[T], *, purge_dropped: bool = False) -> T:
        """
        Run ``fn`` on a copy of the whole store and apply its edits in one SQLite transaction.

        ``purge_dropped`` is accepted and ignored: this backend never drops a row on load.
        """
        result: T = await self._turns.run(self._write, self._transaction, fn)
        return result

    async def aclose(self) -> None:
        """Close the connection."""
        with self._mutex:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _empty_database() -> sqlite3.Connection:
    """An in-memory database with the schema: what a read-only open of an empty store reads."""
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    conn.execute(_SCHEMA)
    return conn


def _check_no_tables(conn: sqlite3.Connection, path: Path) -> None:
    """
    A database without our schema version must hold no table: else it is another program's file. One
    statement reads both (a consistent snapshot: another connection may be creating the schema meanwhile).
    """
    query = (
        "SELECT name FROM sqlite_master WHERE type = 'table' "
        "AND (SELECT user_version FROM pragma_user_version) = 0"
    )
    names = [row[0] for row in conn.execute(query)]
    if names:
        shown = ", ".join(sorted(names)[:5]) + (", ..." if len(names) > 5 else "")
        raise StoreCorruptError(
            f"a SQLite database that is not a session store (no schema version; tables: {shown}); "
            "the file was left unchanged",
            path=path,
        )


def _check_version(conn: sqlite3.Connection, version: int, path: Path) -> None:
    if version != _SCHEMA_VERSION:
        raise StoreCorruptError(
            f"unknown store schema version {version} (this library reads {_SCHEMA_VERSION})", path=path
        )
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'session_entries'"
    ).fetchone()
    if found is None:
        raise StoreCorruptError(
            f"schema version {version} but no session_entries table; the file was left unchanged", path=path
        )


def _check_key(key: object) -> None:
    if not storable_key(key, nul_ok=True):
        raise InvalidSessionEntryError(
            f"session key {key!r} holds a lone surrogate: a SQLite store cannot hold it (a JSON store can)"
        )


def _encode_row(entry: SessionEntry) -> str:
    """The row text of ``entry``; lone surrogates (valid in JavaScript strings) are written escaped."""
    try:
        return encode_session_entry(entry).decode()
    except UnicodeEncodeError:  # escaped as JSON.stringify does; RawJsonValue text kept
        return dump_js(session_entry_to_dict(entry))
