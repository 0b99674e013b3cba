"""
What the database-server store backends (PostgreSQL, Redis) share: the revisioned entry, the row text
codec and the session-key check (DESIGN "Storage backends"; ``spec/distributed.md`` §2.4).

An entry is stored as the exact JSON object text ``sessions.json`` would hold for it (unknown fields
included), so a row reads back byte for byte; every write of a changed text bumps an integer revision,
the compare-and-swap token of :meth:`compare_and_swap` (never a timestamp).
"""

from __future__ import annotations

import asyncio
import re
from typing import Final
from urllib.parse import parse_qsl, unquote_plus, urlencode, urlsplit, urlunsplit

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


def check_key(key: object, *, nul_ok: bool, backend: str, max_bytes: int | None = None) -> None:
    """
    Raises:
        InvalidSessionEntryError: ``key`` cannot be stored by ``backend`` (see :func:`storable_key`),
            or is longer than ``max_bytes`` bytes in UTF-8 (``None``: no limit); a JSON store can hold it.
    """
    if not storable_key(key, nul_ok=nul_ok):
        raise InvalidSessionEntryError(
            f"session key {key!r} holds a lone surrogate or NUL: a {backend} store cannot hold it "
            "(a JSON store can)"
        )
    if max_bytes is not None and isinstance(key, str) and len(size := key.encode("utf-8")) > max_bytes:
        raise InvalidSessionEntryError(
            f"session key {key[:40]!r}... is {len(size)} bytes in UTF-8: a {backend} store holds keys of"
            f" at most {max_bytes} bytes (a JSON store can hold it)"
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


# Query parameters that carry a secret (libpq's ``password``, ``sslpassword``; redis-py's ``password``;
# anything named like a token or secret). ``passfile`` / ``sslkey`` name files, masked too: cheap and safe.
_SECRET_PARAM = re.compile(r"pass|secret|token|key|auth|credential", re.IGNORECASE)
_CONNINFO_SECRET = re.compile(r"((?:^|(?<=\s))\w*pass\w*\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def redact_url(url: str) -> str:
    """
    ``url`` with every credential masked as ``***`` (for messages, ``repr`` and CLI output): the password of
    the userinfo (``postgresql://user:***@host``) and the value of every query parameter that carries one
    (``?password=***``, ``sslpassword``, ``passfile``, ``sslkey``, a ``token`` / ``secret``). The one function
    every printed store URL goes through (docs/cli.md: "the URL is shown without its password").
    A libpq ``key=value`` string gets its ``password=`` / ``sslpassword=`` values masked.
    """
    if "://" not in url:  # a libpq conninfo string (``host=db password=x``), or a path
        return _CONNINFO_SECRET.sub(r"\1***", url)
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # an unparseable netloc (a bad port): mask whatever follows a ':' before the '@'
        return re.sub(r"(//[^:/@]*:)[^@/]*@", r"\1***@", url)
    if password is not None:
        host = parts.netloc.rsplit("@", 1)[-1]
        user = parts.netloc.rsplit("@", 1)[0].split(":", 1)[0]
        parts = parts._replace(netloc=f"{user}:***@{host}")
    if parts.query:
        pieces = []
        for piece in parts.query.split("&"):
            name, sep, _value = piece.partition("=")
            secret = sep and _SECRET_PARAM.search(unquote_plus(name)) is not None
            pieces.append(f"{name}=***" if secret else piece)
        parts = parts._replace(query="&".join(pieces))
    return urlunsplit(parts)


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
