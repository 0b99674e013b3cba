"""
The one JSON encoder of every ``--json`` output (issue 15): strict JSON with ``JSON.stringify``'s rules.

No rich import here: ``context --json`` does not pay for rich (issue 11).
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from typing import Any


__all__ = ("json_text",)

_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
_DOUBLE_LIMIT = 2**1024  # the first integer a JavaScript number cannot hold (it reads as Infinity)


def _json_string(text: str) -> str:
    dumped = json.dumps(text, ensure_ascii=False)
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", dumped)


def json_text(value: Any, *, indent: int | None = None, default: Callable[[Any], Any] | None = None) -> str:
    """
    ``value`` as strict JSON for every ``--json`` output, with ``JSON.stringify``'s rules (issue 15).

    ``NaN``, ``Infinity`` and integers beyond a double (a 5000-digit ``tokensBefore``) are written as
    ``null``, never as Python's ``Infinity`` (invalid JSON); a stored
    :class:`~sessionkeeper.store.RawJsonValue` as its raw JSON text; lone surrogates as ``\\uXXXX``
    escapes; any nesting depth (no recursion). The layout is ``json.dumps``'s (``", "``/``": "`` on
    one line; with ``indent``, one item a line), non-ASCII kept.

    Args:
        value: Dicts, lists/tuples, strings, numbers, booleans, ``None`` and ``RawJsonValue``.
        indent: Spaces per level; ``None`` writes one line.
        default: Turns any other object into one of those (``json.dumps``'s ``default``); ``None``
            raises :class:`TypeError` for it.
    """
    # a RawJsonValue exists only once the store's module is loaded: do not import it here (start-up)
    raw_type = getattr(sys.modules.get("sessionkeeper.store"), "RawJsonValue", None)
    out: list[str] = []
    item_sep = "," if indent is not None else ", "
    work: list[tuple[bool, Any, int]] = [(False, value, 0)]
    while work:
        is_text, item, level = work.pop()
        if is_text:
            out.append(item)
            continue
        if raw_type is not None and isinstance(item, raw_type):
            out.append(item.text)
        elif item is None:
            out.append("null")
        elif item is True or item is False:
            out.append("true" if item else "false")
        elif isinstance(item, int):
            out.append(str(item) if -_DOUBLE_LIMIT < item < _DOUBLE_LIMIT else "null")
        elif isinstance(item, float):
            out.append(float.__repr__(item) if math.isfinite(item) else "null")
        elif isinstance(item, str):
            out.append(_json_string(item))
        elif isinstance(item, dict | list | tuple):
            is_dict = isinstance(item, dict)
            opener, closer = ("{", "}") if is_dict else ("[", "]")
            if not item:
                out.append(opener + closer)
                continue
            inner = "" if indent is None else "\n" + " " * (indent * (level + 1))
            pieces: list[tuple[bool, Any, int]] = [(True, opener, 0)]
            pairs = item.items() if isinstance(item, dict) else ((None, val) for val in item)
            for index, (key, val) in enumerate(pairs):
                lead = ("" if index == 0 else item_sep) + inner
                if is_dict:
                    lead += _json_string(str(key)) + ": "
                pieces.append((True, lead, 0))
                pieces.append((False, val, level + 1))
            pieces.append((True, ("" if indent is None else "\n" + " " * (indent * level)) + closer, 0))
            work.extend(reversed(pieces))
        elif default is not None:
            work.append((False, default(item), level))
        else:
            raise TypeError(f"Object of type {type(item).__name__} is not JSON serializable")
    return "".join(out)
