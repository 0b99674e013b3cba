"""
``JsonFileStoreBackend``: OpenClaw's ``sessions.json`` (spec openclaw.md §1.4, §1.5; DESIGN "Files").

File format: ``JSON.stringify(store, null, 2)`` byte for byte (two-space indent, no trailing newline),
``session key -> SessionEntry`` in insertion order. What we do better than OpenClaw 2026.7.35 (§11.11):

- a cross-process lock (``fcntl.flock`` on ``sessions.json.lock``) besides the per-instance writer lock,
  and every write re-reads the file under that lock when it changed, so no update from another process
  (or another instance in this one) is lost;
- writes are durable by default (temp file + fsync + rename + directory fsync; OpenClaw does not fsync);
- a file that cannot be parsed, or an existing file that is empty (field report B21), is backed up (0600)
  and raises :class:`StoreCorruptError`; OpenClaw reads it as an empty store and overwrites it at the next
  save.

Like OpenClaw: a read cache valid while the file's identity, size and mtime are unchanged; rows failing
the load-time shape check are dropped (and reported in :attr:`JsonFileStoreBackend.last_load`); a write
whose result equals the stored entry is skipped; one entry update re-encodes only that entry and splices
it into the cached text of the others (OpenClaw's single-entry fast path, here for every write).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Final, NoReturn, TypeVar

import msgspec

from sessionkeeper._fs import FILE_MODE, atomic_write_bytes, backup_file, ensure_dir
from sessionkeeper.exceptions import SessionBusyError, StoreCorruptError, StoreError, SymlinkRefusedError
from sessionkeeper.records import js_number_to_string as _js_number  # Number#toString
from sessionkeeper.store._backend import (
    EntryUpdater,
    LoadReport,
    StoreTransaction,
    check_entry,
    diff_entries,
)
from sessionkeeper.store._entry import (
    SessionEntry,
    session_entry_from_dict,
    session_entry_to_dict,
)
from sessionkeeper.store._entry_shape import normalize_persisted_entry
from sessionkeeper.store._jsontext import dump_js, parse_store_json
from sessionkeeper.store._turns import FifoTurns


__all__ = ("STORE_FILE_NAME", "JsonFileStoreBackend")

T = TypeVar("T")

STORE_FILE_NAME: Final = "sessions.json"
"""The store file in a sessions directory (OpenClaw spec §1.1)."""

_log = logging.getLogger("sessionkeeper.store")
_SPLIT: Final = b',\n  "'
_READ_ATTEMPTS: Final = 3
_RETRY_DELAY_S: Final = 0.05
_sleep = time.sleep  # the retry wait (a seam for tests)
_Signature = tuple[int, int, int, int]  # dev, ino, size, mtime_ns


def _open_store_lock(path: Path) -> int:
    """
    Open (or create, 0600) the store's lock file without following a symbolic link (issue 15 item 7:
    a dangling link at ``sessions.json.lock`` made the store create the link's target anywhere).

    Raises:
        SymlinkRefusedError: The lock path is a symbolic link.
    """
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags, FILE_MODE)
    except OSError as err:
        if err.errno == errno.ELOOP or path.is_symlink():
            raise SymlinkRefusedError(path, what="store lock file") from err
        raise


class JsonFileStoreBackend:
    """
    A :class:`~sessionkeeper.store.StoreBackend` on OpenClaw's ``sessions.json``.

    Args:
        path: The ``sessions.json`` file, or the sessions directory holding it. Created (0600, its
            directory 0700) at the first write; a missing file reads as an empty store.
        durable: fsync the file and its directory on every write (default ``True``). ``False`` matches
            OpenClaw (``durable:false``): a power loss may lose the last writes, never tear the file.
        lock_timeout_s: How long a writer waits for the cross-process lock before raising
            :class:`~sessionkeeper.exceptions.SessionBusyError` (default 10 s).
        read_only: Reads only (``sessions list``, ``status``, dry runs): writes raise
            :class:`~sessionkeeper.exceptions.StoreError` and no lock file is created.

    Raises:
        StoreCorruptError: The file is not a JSON object (an empty file included, B21); a 0600 backup
            ``sessions.json.bak.<stamp>`` was written once per distinct corrupt content (not by a read-only
            backend, which writes nothing), and the file is left as it is.
        SessionBusyError: The lock was not acquired within ``lock_timeout_s``.
        StoreError: A write on a read-only backend.
        OSError: The file system failed.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        durable: bool = True,
        lock_timeout_s: float = 10.0,
        read_only: bool = False,
    ) -> None:
        target = Path(path)
        if target.is_dir() or (not target.suffix and not target.exists()):
            target = target / STORE_FILE_NAME
        self.path: Path = target
        self.durable = durable
        self.lock_timeout_s = lock_timeout_s
        self.read_only = read_only
        self._lock_path = target.with_name(f"{target.name}.lock")
        self._mutex = threading.Lock()
        self._turns = FifoTurns()  # calls apply in call order (issue 11)
        self._lock_fd: int | None = None
        self._sig: _Signature | None = None
        self._loaded = False
        self._raw: dict[str, dict[str, Any]] = {}
        self._entries: dict[str, SessionEntry] = {}
        self._chunks: dict[str, bytes] = {}
        self._corrupt_backed_up: _Signature | None = None
        self._closed = False
        self.last_load: LoadReport = LoadReport()
        """What the last (re)load of the file found: entry count, dropped and normalised keys."""

    def __repr__(self) -> str:
        return f"JsonFileStoreBackend({str(self.path)!r})"

    # ------------------------------------------------------------------ public async API

    async def load_all(self) -> dict[str, SessionEntry]:
        """Return every entry in file order (re-reads the file only when it changed)."""
        return await self._turns.run(self._load_all_sync)

    async def get(self, session_key: str) -> SessionEntry | None:
        """Return the entry under ``session_key``, or ``None``."""
        return await self._turns.run(self._get_sync, session_key)

    async def keys(self) -> list[str]:
        """Return every session key in file order."""
        return await self._turns.run(self._keys_sync)

    async def put(self, session_key: str, entry: SessionEntry) -> None:
        """Store ``entry`` under ``session_key`` (locked read-modify-write of the file)."""
        check_entry(session_key, entry)
        await self._turns.run(self._update_sync, session_key, lambda _old: entry)

    async def update(self, session_key: str, fn: EntryUpdater) -> SessionEntry | None:
        """Atomically replace the entry under ``session_key`` with ``fn(current)`` (``None``: no change)."""
        return await self._turns.run(self._update_sync, session_key, fn)

    async def delete(self, session_key: str) -> bool:
        """Remove ``session_key``; return whether it existed."""
        return await self._turns.run(self._delete_sync, session_key)

    @property
    def store_file(self) -> Path:
        """The ``sessions.json`` file (:attr:`path`): the whole store as one JSON object."""
        return self.path

    @property
    def dropped_keys(self) -> tuple[str, ...]:
        """Keys of the rows the last load dropped (:attr:`last_load` ``.dropped_keys``)."""
        return self.last_load.dropped_keys

    async def transaction(self, fn: StoreTransaction[T], *, purge_dropped: bool = False) -> T:
        """
        Run ``fn`` on a copy of the whole store and write its edits in one atomic file replace.

        Args:
            fn: See :data:`~sessionkeeper.store.StoreTransaction`.
            purge_dropped: Also write the file when ``fn`` changed nothing but the file holds rows the
                load-time shape check dropped (:attr:`last_load` ``.dropped_keys``): the rewrite removes
                them, as OpenClaw's save of the loaded store does (``sessions cleanup --enforce``).
                Default ``False``: a transaction that changes nothing writes nothing.
        """
        return await self._turns.run(self._transaction_sync, fn, purge_dropped)

    async def aclose(self) -> None:
        """Close the lock file descriptor."""
        with self._mutex:
            self._closed = True
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    # ------------------------------------------------------------------ reading

    def _stat(self) -> _Signature | None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def _refresh(self) -> None:
        """Bring the cache up to date with the file (caller holds ``_mutex``)."""
        if self._closed:
            raise RuntimeError("the store backend is closed")
        sig = self._stat()
        if self._loaded and sig == self._sig:
            return
        if sig is None:
            self._set_content({}, None, b"")
            return
        for attempt in range(_READ_ATTEMPTS):
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                self._set_content({}, None, b"")
                return
            with os.fdopen(fd, "rb") as fh:
                st = os.fstat(fh.fileno())
                data = fh.read()
            sig = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            if not data.strip():
                # B21: a 0-byte (or blank) sessions.json is what a torn non-atomic write leaves; reading it as
                # an empty store would let the next save wipe the index. Retry (a writer may be mid-write),
                # then report it as corrupt after a backup.
                _sleep(_RETRY_DELAY_S)
                if attempt + 1 < _READ_ATTEMPTS and self._stat() != sig:
                    continue
                self._corrupt(sig, "the file is empty (a torn write?)", None)
            try:
                parsed = _decode(data)
            except ValueError as err:  # JSON.parse refuses it too
                # a writer that does not replace the file atomically may be mid-write (OpenClaw
                # retries 3 times, 50 ms apart): read again if the file changes meanwhile
                _sleep(_RETRY_DELAY_S)
                if attempt + 1 < _READ_ATTEMPTS and self._stat() != sig:
                    continue
                self._corrupt(sig, f"not valid JSON ({err})", err)
            if not isinstance(parsed, dict):
                self._corrupt(sig, f"the root is a JSON {type(parsed).__name__}, not an object", None)
            self._set_content(parsed, sig, data)
            return

    def _corrupt(self, sig: _Signature, message: str, cause: Exception | None) -> NoReturn:
        backup = None
        # a read-only open writes nothing, not even a backup (the first writer makes it)
        if not self.read_only and self._corrupt_backed_up != sig:
            backup = backup_file(self.path, reuse_identical=True)  # other processes read it too
            self._corrupt_backed_up = sig
            _log.error("session store %s is corrupt (%s); backup written to %s", self.path, message, backup)
        note = ", no backup written by a read-only open" if self.read_only else ""
        err = StoreCorruptError(
            f"{message}; the file was left unchanged" + (f", backup: {backup}" if backup else note),
            path=self.path,
            backup_path=backup,
        )
        raise err from cause

    def _set_content(self, parsed: dict[str, Any], sig: _Signature | None, data: bytes) -> None:
        raw: dict[str, dict[str, Any]] = {}
        dropped: list[str] = []
        normalized: list[str] = []
        for key, value in parsed.items():
            shaped = normalize_persisted_entry(value)
            if shaped is None:
                dropped.append(key)
                continue
            if shaped is not value:
                normalized.append(key)
            raw[key] = shaped
        self._raw = raw
        self._entries = {}
        self._chunks = {}
        if raw and not dropped and not normalized and data:
            self._chunks = self._split_chunks(data, list(raw))
        self._sig = sig
        self._loaded = True
        self.last_load = LoadReport(
            entry_count=len(raw), dropped_keys=tuple(dropped), normalized_keys=tuple(normalized)
        )
        if dropped:
            _log.warning(
                "session store %s: dropped %d entries failing the load-time shape check: %s",
                self.path,
                len(dropped),
                ", ".join(dropped),
            )

    @staticmethod
    def _split_chunks(data: bytes, keys: list[str]) -> dict[str, bytes]:
        """Cut the file's text into per-entry chunks when it is in canonical form (else: none)."""
        body = data
        if not (body.startswith(b"{\n") and body.endswith(b"\n}")):
            return {}
        parts = body[2:-2].split(_SPLIT)
        if len(parts) != len(keys):
            return {}
        chunks = {keys[0]: parts[0]}
        for key, part in zip(keys[1:], parts[1:], strict=True):
            chunks[key] = b'  "' + part
        return chunks

    def _entry(self, key: str) -> SessionEntry | None:
        entry = self._entries.get(key)
        if entry is None:
            raw = self._raw.get(key)
            if raw is None:
                return None
            entry = session_entry_from_dict(raw)
            self._entries[key] = entry
        return entry

    def _load_all_sync(self) -> dict[str, SessionEntry]:
        with self._mutex:
            self._refresh()
            result: dict[str, SessionEntry] = {}
            for key in self._raw:
                entry = self._entry(key)
                assert entry is not None
                result[key] = entry
            return result

    def _get_sync(self, key: str) -> SessionEntry | None:
        with self._mutex:
            self._refresh()
            return self._entry(key)

    def _keys_sync(self) -> list[str]:
        with self._mutex:
            self._refresh()
            return list(self._raw)

    # ------------------------------------------------------------------ writing

    @contextlib.contextmanager
    def _writer(self) -> Any:
        """Hold the instance mutex and the cross-process ``flock`` on ``<store>.lock``."""
        if self.read_only:
            raise StoreError(f"session store {self.path} was opened read-only")
        with self._mutex:
            if self._closed:
                raise RuntimeError("the store backend is closed")
            if self._lock_fd is None:
                ensure_dir(self._lock_path.parent)
                self._lock_fd = _open_store_lock(self._lock_path)
            fd = self._lock_fd
            start = time.monotonic()
            delay = 0.0005
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as err:
                    if err.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                        raise
                waited = time.monotonic() - start
                if waited >= self.lock_timeout_s:
                    raise SessionBusyError(
                        f"session store {self.path} is locked by another writer "
                        f"(waited {waited * 1000:.0f} ms)",
                        path=self.path,
                        waited_ms=waited * 1000,
                    )
                time.sleep(delay)
                delay = min(delay * 2, 0.02)
            try:
                self._refresh()
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _encode_chunk(self, key: str) -> bytes:
        try:
            encoded = msgspec.json.encode({key: _js_numbers(self._raw[key])})
            formatted = msgspec.json.format(encoded, indent=2)
        except (UnicodeEncodeError, TypeError, RecursionError):  # surrogates, RawJsonValue, deep nesting
            formatted = _encode_with_surrogates({key: self._raw[key]})
        return formatted[2:-2]

    def _serialize(self) -> list[bytes]:
        """
        The file text as pieces to write in order (no concatenation of a large store in memory).

        Per-entry chunks are cached in file order, so a write re-encodes only the changed entries.
        """
        if not self._raw:
            return [b"{}"]
        # invariant: the chunk keys are a subset of the entry keys, in the same order when complete
        if len(self._chunks) != len(self._raw):
            cached = self._chunks
            self._chunks = {key: cached.get(key) or self._encode_chunk(key) for key in self._raw}
        return [b"{\n", b",\n".join(self._chunks.values()), b"\n}"]

    def _commit(self) -> None:
        atomic_write_bytes(self.path, self._serialize(), fsync=self.durable)
        self._sig = self._stat()

    def _set(self, key: str, entry: SessionEntry) -> bool:
        raw = session_entry_to_dict(entry)
        previous = self._raw.get(key)
        if previous == raw:
            self._entries[key] = entry
            return False
        if previous is not None:
            # keep the stored key order, new keys last (JavaScript's {...existing, ...patch})
            ordered = {k: raw[k] for k in previous if k in raw}
            ordered.update(raw)
            raw = ordered
        self._raw[key] = raw
        self._entries[key] = entry
        if key in self._chunks or (previous is None and len(self._chunks) == len(self._raw) - 1):
            self._chunks[key] = self._encode_chunk(key)  # same place, or appended like the new key
        return True

    def _remove(self, key: str) -> bool:
        if key not in self._raw:
            return False
        del self._raw[key]
        self._entries.pop(key, None)
        self._chunks.pop(key, None)
        return True

    def _update_sync(self, key: str, fn: EntryUpdater) -> SessionEntry | None:
        with self._writer():
            current = self._entry(key)
            new = fn(current)
            if new is None:
                return current
            check_entry(key, new)
            if self._set(key, new):
                self._commit_or_reload()
            return new

    def _delete_sync(self, key: str) -> bool:
        with self._writer():
            if not self._remove(key):
                return False
            self._commit_or_reload()
            return True

    def _transaction_sync(self, fn: StoreTransaction[T], purge_dropped: bool = False) -> T:
        with self._writer():
            before: dict[str, SessionEntry] = {}
            for key in self._raw:
                entry = self._entry(key)
                assert entry is not None
                before[key] = entry
            working = dict(before)
            result = fn(working)
            upserts, removals = diff_entries(before, working)
            for key, entry in upserts.items():
                check_entry(key, entry)
            changed = False
            for key in removals:
                changed = self._remove(key) or changed
            for key, entry in upserts.items():
                changed = self._set(key, entry) or changed
            if changed or (purge_dropped and self.last_load.dropped_keys):
                self._commit_or_reload()
            return result

    def _commit_or_reload(self) -> None:
        try:
            self._commit()
        except BaseException:
            # the file was not replaced: forget the in-memory edit so the next call re-reads the file
            self._loaded = False
            raise


def _js_numbers(value: Any) -> Any:
    """
    ``value`` with every float as JavaScript's ``JSON.stringify`` writes it (``100`` not ``100.0``,
    ``0.00001``, ``1e+21``, ``0`` for ``-0``), so a rewritten entry keeps OpenClaw's bytes.
    """
    if isinstance(value, float):
        return msgspec.Raw(_js_number(value).encode("ascii"))
    if isinstance(value, dict):
        return {k: _js_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_js_numbers(v) for v in value]
    return value


def _decode(data: bytes) -> Any:
    """
    Read ``sessions.json`` as OpenClaw's ``JSON.parse`` does (issue 15): msgspec for speed, the exact
    parser when msgspec refuses the text (``1e400``, a 5 000-digit integer, nesting over ~1 000 levels,
    lone surrogate escapes). Values Python cannot hold are kept as :class:`RawJsonValue` text.

    Raises:
        ValueError: ``JSON.parse`` refuses the text too (``NaN``, a trailing comma, ...).
    """
    try:
        return msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError):  # RecursionError: nested ~1000 deep
        return parse_store_json(data)


def _encode_with_surrogates(value: Any) -> bytes:
    """
    ``JSON.stringify(value, null, 2)`` for what msgspec cannot write: lone surrogates (as ``\\udXXX``
    escapes), :class:`RawJsonValue` text (verbatim), nesting deeper than Python's recursion limit.
    """
    return dump_js(value).encode("utf-8")
