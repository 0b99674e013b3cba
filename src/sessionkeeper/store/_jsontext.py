"""
``sessions.json`` values JavaScript's ``JSON.parse`` accepts but Python cannot hold exactly (issue 15).

OpenClaw reads its store with ``JSON.parse``, which accepts numbers out of double range (``1e400`` is
``Infinity``; ``1e-400`` is ``0``, as msgspec reads it), integers of any length and nesting of any depth,
and refuses
``NaN``, ``Infinity`` and anything else outside the JSON grammar. msgspec refuses the first group (and
Python ints stop at 4 300 digits), so one such value made the whole store unreadable.

:func:`parse_store_json` is the exact, iterative fallback parser: it accepts what ``JSON.parse``
accepts and refuses what it refuses. A value of an entry's field that holds such a number or nesting
deeper than :data:`MAX_BUILT_DEPTH` is kept as a :class:`RawJsonValue`: its source text, written back
byte for byte when the entry is rewritten (deviation from OpenClaw, which would write ``null`` for
``Infinity`` and round long numbers; DESIGN "bad input never loses data").
"""

from __future__ import annotations

import json.decoder
import math
import re
from collections.abc import Callable
from typing import Any, Final


__all__ = ("MAX_BUILT_DEPTH", "RawJsonValue", "dump_js", "parse_store_json")

MAX_BUILT_DEPTH: Final = 200
"""Containers nested deeper than this (the store object is depth 0) are kept as raw text."""

_NUMBER_STR_RE: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_LONE_SURROGATE_RE: Final = re.compile(r"[\ud800-\udfff]")


class RawJsonValue:
    """
    A stored value kept as its JSON source text (an entry field holding ``1e400``, a 5 000-digit integer,
    or nesting deeper than 200 levels): read-only, written back unchanged.

    It appears in :attr:`SessionEntry.extra <sessionkeeper.store.SessionEntry.extra>` (a known field
    holding one is moved there, as any value of the wrong type is). ``json.loads(value.text)`` gives
    Python's reading of it where Python can hold it. Equal when the texts are equal. (A plain class on
    purpose: msgspec would encode an attrs or dataclass instance as an object.)

    Attributes:
        text: The value's JSON text, exactly as it was in ``sessions.json``.
    """

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text: str = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawJsonValue) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        shown = self.text if len(self.text) <= 40 else self.text[:37] + "..."
        return f"RawJsonValue({shown!r})"


def _number(literal: str) -> tuple[bool, Any]:
    """``(special, value)`` of a number literal; special when Python cannot hold it exactly."""
    m = _NUMBER_STR_RE.fullmatch(literal)
    assert m is not None
    if m.group(1) is None and m.group(2) is None:
        try:
            return False, int(literal)
        except ValueError:  # more digits than Python's int limit
            return True, None
    value = float(literal)
    if math.isinf(value):
        return True, None
    return False, value  # an underflow (1e-400) reads as 0, as in JavaScript (and msgspec)


class _Frame:
    __slots__ = ("building", "container", "depth", "key", "special", "start")

    def __init__(self, container: Any, depth: int, start: int, *, building: bool) -> None:
        self.container = container
        self.depth = depth
        self.start = start
        self.building = building
        self.key: str | None = None
        self.special = False


def parse_store_json(data: bytes | str, *, field_depth: int = 2) -> Any:
    """
    Parse ``data`` as ``JSON.parse`` does, iteratively (no depth limit).

    A field value (depth 2: ``{"<key>": {"<field>": value}}``), or a row that is not an object (depth 1),
    holding a number Python cannot hold (``1e400``, an integer over 4 300 digits) or nesting deeper than
    :data:`MAX_BUILT_DEPTH` becomes a :class:`RawJsonValue` of its exact source text (``field_depth=1``
    when ``data`` is one entry, as in a SQLite row). Lone surrogate escapes (``"\\ud83d"``) are read as
    lone surrogates, as JavaScript does.

    Raises:
        ValueError: ``data`` is not JSON for ``JSON.parse`` (``NaN``, ``Infinity``, a trailing comma,
            invalid UTF-8, ...).
    """
    text = data if isinstance(data, str) else data.decode("utf-8")  # UnicodeDecodeError is a ValueError
    return _parse(text, field_depth)


def _parse(s: str, field_depth: int) -> Any:
    scanstring: Callable[..., tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
    n = len(s)
    stack: list[_Frame] = []
    result: Any = None

    def skip_ws(pos: int) -> int:
        while pos < n and s[pos] in " \t\n\r":
            pos += 1
        return pos

    def key_at(pos: int) -> tuple[str, int]:
        """Read ``"name" :`` at ``pos``; return the name and the position after the colon."""
        if pos >= n or s[pos] != '"':
            raise ValueError(f"expected a property name at character {pos}")
        key, pos = scanstring(s, pos + 1, True)
        pos = skip_ws(pos)
        if pos >= n or s[pos] != ":":
            raise ValueError(f"expected ':' at character {pos}")
        return key, pos + 1

    def mark_special() -> None:
        # The special frames are always a prefix of the stack, so walk down from the top and stop at
        # the first one already marked: each frame is marked once, which keeps deep input linear (a
        # full walk per value made 100 000 unbuilt brackets quadratic, minutes of CPU).
        for frame in reversed(stack):
            if frame.special:
                return
            frame.special = True

    def complete(value: Any, start: int, end: int, special: bool, depth: int) -> None:
        nonlocal result
        if special:
            mark_special()
            if depth == field_depth or (0 < depth < field_depth and not isinstance(value, dict)):
                value = RawJsonValue(s[start:end])
        if not stack:
            result = value
            return
        parent = stack[-1]
        if not parent.building:
            return
        if isinstance(parent.container, dict):
            assert parent.key is not None
            parent.container[parent.key] = value
        else:
            parent.container.append(value)

    i = 0
    expect_value = True
    while True:
        i = skip_ws(i)
        if expect_value:
            if i >= n:
                raise ValueError(f"unexpected end of JSON at character {i}")
            c = s[i]
            depth = len(stack)
            if c in "{[":
                building = depth <= MAX_BUILT_DEPTH and (not stack or stack[-1].building)
                frame = _Frame(({} if c == "{" else []) if building else None, depth, i, building=building)
                if not building:
                    mark_special()  # keep the special frames a prefix of the stack
                    frame.special = True
                stack.append(frame)
                i = skip_ws(i + 1)
                if i < n and s[i] == ("}" if c == "{" else "]"):
                    stack.pop()
                    complete(frame.container, frame.start, i + 1, frame.special, depth)
                    i += 1
                    expect_value = False
                elif c == "{":
                    frame.key, i = key_at(i)
                continue
            start = i
            special = False
            value: Any
            if c == '"':
                value, i = scanstring(s, i + 1, True)
            elif s.startswith("true", i):
                value, i = True, i + 4
            elif s.startswith("false", i):
                value, i = False, i + 5
            elif s.startswith("null", i):
                value, i = None, i + 4
            else:
                m = _NUMBER_STR_RE.match(s, i)
                if m is None:
                    raise ValueError(f"unexpected token at character {i}")
                special, value = _number(m.group(0))
                i = m.end()
            complete(value, start, i, special, depth)
            expect_value = False
            continue
        if not stack:
            if i != n:
                raise ValueError(f"unexpected data after the JSON value at character {i}")
            return result
        if i >= n:
            raise ValueError(f"unexpected end of JSON at character {i}")
        frame = stack[-1]
        opener = s[frame.start]
        if s[i] == ",":
            i = skip_ws(i + 1)
            if opener == "{":
                frame.key, i = key_at(i)
            expect_value = True
            continue
        if s[i] == ("}" if opener == "{" else "]"):
            stack.pop()
            complete(frame.container, frame.start, i + 1, frame.special, frame.depth)
            i += 1
            continue
        raise ValueError(f"expected ',' or a closing bracket at character {i}")


def dump_js(value: Any, level: int = 0) -> str:
    """
    ``JSON.stringify(value, null, 2)`` as if ``value`` sat ``level`` levels deep, iteratively (any
    depth): JavaScript's number format, lone surrogates escaped, :class:`RawJsonValue` text verbatim.
    """
    from sessionkeeper.records import js_number_to_string as _js_number  # noqa: PLC0415

    out: list[str] = []
    # work items: ("v", value, level) to write a value; ("s", text) to write text
    work: list[tuple[str, Any, int]] = [("v", value, level)]
    while work:
        kind, item, lvl = work.pop()
        if kind == "s":
            out.append(item)
            continue
        if isinstance(item, RawJsonValue):
            out.append(item.text)
        elif item is None:
            out.append("null")
        elif item is True:
            out.append("true")
        elif item is False:
            out.append("false")
        elif isinstance(item, int):
            out.append(str(item))
        elif isinstance(item, float):
            out.append(_js_number(item) if math.isfinite(item) else "null")
        elif isinstance(item, str):
            out.append(_dump_string(item))
        elif isinstance(item, dict):
            if not item:
                out.append("{}")
                continue
            inner = "  " * (lvl + 1)
            pieces: list[tuple[str, Any, int]] = [("s", "{\n", 0)]
            for index, (key, val) in enumerate(item.items()):
                sep = "" if index == 0 else ",\n"
                pieces.append(("s", f"{sep}{inner}{_dump_string(str(key))}: ", 0))
                pieces.append(("v", val, lvl + 1))
            pieces.append(("s", "\n" + "  " * lvl + "}", 0))
            work.extend(reversed(pieces))
        elif isinstance(item, list | tuple):
            if not item:
                out.append("[]")
                continue
            inner = "  " * (lvl + 1)
            pieces = [("s", "[\n", 0)]
            for index, val in enumerate(item):
                pieces.append(("s", ("" if index == 0 else ",\n") + inner, 0))
                pieces.append(("v", val, lvl + 1))
            pieces.append(("s", "\n" + "  " * lvl + "]", 0))
            work.extend(reversed(pieces))
        else:
            raise TypeError(f"cannot write a {type(item).__name__} to sessions.json")
    return "".join(out)


def _dump_string(text: str) -> str:
    dumped = json.dumps(text, ensure_ascii=False)
    return _LONE_SURROGATE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", dumped)
