"""
What the database-server store backends (PostgreSQL, Redis) share: the revisioned entry, the row text
codec and the session-key check (DESIGN "Storage backends"; ``spec/distributed.md`` §2.4).

An entry is stored as the exact JSON object text ``sessions.json`` would hold for it (unknown fields
included), so a row reads back byte for byte; every write of a changed text bumps an integer revision,
the compare-and-swap token of :meth:`compare_and_swap` (never a timestamp).
"""

from __future__ import annotations

import asyncio
from typing import Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import attrs
import msgspec

from sessionkeeper.exceptions import InvalidSessionEntryError, StoreCorruptError, StoreError
from sessionkeeper.store._entry import (
    SessionEntry,
    encode_session_entry,
    session_entry_from_dict,
    session_entry_to_dict,
)
from sessionkeeper.store._jsontext import RawJsonValue, dump_js, parse_store_json


__all__ = ("RevisionedEntry",)

_JSONB_UNSAFE: Final = "\\u0000"
_JSONB_MAX_BRACKETS: Final = 4000
"""A raw value with more ``[``/``{`` than this may nest deeper than ``jsonb``'s parser goes (its stack)."""


@attrs.frozen(kw_only=True)
class RevisionedEntry:
    """
    A session entry with its revision (PostgreSQL and Redis store backends).

    Attributes:
        entry: The stored entry.
        revision: Its revision: 1 when created, +1 at every committed change of its JSON text (an
            unchanged write keeps it). The token :meth:`PostgresStoreBackend.compare_and_swap` checks.
    """

    entry: SessionEntry
    revision: int


def encode_entry_text(entry: SessionEntry) -> tuple[str, bool]:
    """
    The row text of ``entry`` and whether PostgreSQL's ``jsonb`` can hold it too.

    The same codec as a SQLite row: lone surrogates (valid in JavaScript strings) are written escaped
    (``JSON.stringify``'s layout, :func:`~sessionkeeper.store._jsontext.dump_js`), and a
    :class:`~sessionkeeper.store.RawJsonValue` (``1e400``, a 5 000-digit integer, deep nesting; issue 15)
    is written as its text, byte for byte. ``jsonb`` refuses lone surrogates and ``\\u0000`` and overflows
    its parser's stack on very deep nesting, so such rows keep only their text (``False``).
    """
    try:
        text = encode_session_entry(entry).decode()
    except UnicodeEncodeError:
        return dump_js(session_entry_to_dict(entry)), False
    deep = any(
        isinstance(value, RawJsonValue)
        and value.text.count("[") + value.text.count("{") > _JSONB_MAX_BRACKETS
        for value in entry.extra.values()
    )
    return text, not deep and _JSONB_UNSAFE not in text


def decode_entry_text(session_key: str, text: str | bytes, *, where: str) -> SessionEntry:
    """
    Decode a stored row (as a SQLite row is decoded: what ``JSON.parse`` reads, values Python cannot hold
    kept as :class:`~sessionkeeper.store.RawJsonValue`).

    Raises:
        StoreCorruptError: The text is not a JSON object (``where`` names the store).
    """
    try:
        raw = msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError) as err:  # RecursionError: nested ~1000 deep
        try:  # lone surrogate escapes (see encode_entry_text), 1e400, huge integers, deep nesting
            raw = parse_store_json(text, field_depth=1)
        except ValueError:
            raise StoreCorruptError(f"entry {session_key!r} is not valid JSON ({err})", path=where) from err
    if not isinstance(raw, dict):
        raise StoreCorruptError(f"entry {session_key!r} is not a JSON object", path=where)
    return session_entry_from_dict(raw)


def storable_key(key: object, *, nul_ok: bool) -> bool:
    """
    Whether ``key`` can be a row key: UTF-8 text (no lone surrogate) and, for PostgreSQL (``nul_ok``
    false), no NUL character.
    """
    if not isinstance(key, str):
        return True  # check_entry reports the type
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return nul_ok or "\x00" not in key


def check_key(key: object, *, nul_ok: bool, backend: str) -> None:
    """
    Raises:
        InvalidSessionEntryError: ``key`` cannot be stored by ``backend`` (see :func:`storable_key`);
            a JSON store can hold it.
    """
    if not storable_key(key, nul_ok=nul_ok):
        raise InvalidSessionEntryError(
            f"session key {key!r} holds a lone surrogate or NUL: a {backend} store cannot hold it "
            "(a JSON store can)"
        )


def split_url_options(url: str, names: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    """
    Remove the query parameters ``names`` (ours, such as ``schema`` and ``store``) from a server URL.

    Returns:
        ``(url without them, {name: value})``; the other parameters stay for the client library.
    """
    parts = urlsplit(url)
    ours: dict[str, str] = {}
    rest: list[tuple[str, str]] = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in names:
            ours[name] = value
        else:
            rest.append((name, value))
    return urlunsplit(parts._replace(query=urlencode(rest))), ours


def redact_url(url: str) -> str:
    """``url`` without its password (for messages and ``repr``)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = (parts.username or "") + ":***"
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc[-1]}"))


class CallOrder:
    """
    Call order for one backend instance (docs/store.md: every built-in backend applies calls in call order;
    issue 11), keeping calls on different keys concurrent: a call on a session key waits for the earlier
    calls on that key, a whole-store call (``load_all``, ``keys``, ``transaction``) for every earlier call,
    and every later call for it. Turns are taken when the call starts, before its first ``await``.

    A call cancelled while it waits gives its turn up: the calls after it still wait for the ones before it.
    asyncio only (the database backends are).
    """

    def __init__(self) -> None:
        self._tails: dict[str, asyncio.Future[None]] = {}
        self._barrier: asyncio.Future[None] | None = None

    def key(self, session_key: str) -> _Turn:
        """The turn of a call on ``session_key`` (take it before the first ``await``)."""
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waits = [f for f in (self._tails.get(session_key), self._barrier) if f is not None and not f.done()]
        self._tails[session_key] = mine
        return _Turn(self, waits, mine, session_key)

    def store(self) -> _Turn:
        """The turn of a whole-store call (take it before the first ``await``)."""
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waits = [f for f in (*self._tails.values(), self._barrier) if f is not None and not f.done()]
        self._tails.clear()
        self._barrier = mine
        return _Turn(self, waits, mine, None)

    def _release(self, turn: _Turn) -> None:
        if not turn.mine.done():
            turn.mine.set_result(None)
        if turn.key is not None and self._tails.get(turn.key) is turn.mine:
            del self._tails[turn.key]
        if self._barrier is turn.mine:
            self._barrier = None


class _Turn:
    def __init__(
        self, order: CallOrder, waits: list[asyncio.Future[None]], mine: asyncio.Future[None], key: str | None
    ) -> None:
        self.order = order
        self.waits = waits
        self.mine = mine
        self.key = key

    async def __aenter__(self) -> None:
        try:
            for waited in self.waits:
                await asyncio.shield(waited)
        except BaseException:
            self._release_after_waits()  # cancelled while waiting: pass the turn on once ours comes
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        self.order._release(self)

    def _release_after_waits(self) -> None:
        pending = [f for f in self.waits if not f.done()]
        if not pending:
            self.order._release(self)
            return
        remaining = len(pending)

        def one_done(_: asyncio.Future[None]) -> None:
            nonlocal remaining
            remaining -= 1
            if remaining == 0:
                self.order._release(self)

        for waited in pending:
            waited.add_done_callback(one_done)


def require_asyncio(backend: str, client: str) -> None:
    """
    Raises:
        StoreError: Not called from asyncio (deviation ``PG-ASYNCIO``: the database clients are asyncio-only).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise StoreError(
            f"{backend} runs on asyncio only ({client}); use a SqliteStoreBackend or JsonFileStoreBackend "
            "under trio"
        ) from None
