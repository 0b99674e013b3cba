"""
JavaScript compatibility: the one place where pi's and OpenClaw's JavaScript semantics are reproduced.

- Lengths in UTF-16 code units (``String.length``) and slices that never split a surrogate pair
  (OpenClaw's ``sliceUtf16Safe``).
- ``JSON.stringify`` and ``Number.prototype.toString`` (``1`` not ``1.0``, ``1e+21``, ``1e-7``).
- Timestamps as pi writes and reads them: ISO-8601 UTC strings with milliseconds (``Date.toISOString``)
  on entries, and ms since the epoch (``Date.parse``) on synthesised messages (pi-format spec §4, §6.5).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from typing import Any


__all__ = (
    "iso_from_ms",
    "js_date_ms",
    "js_json_stringify",
    "js_number_to_string",
    "parse_iso_ms",
    "slice_utf16_safe",
    "utf16_len",
)

_ISO = re.compile(
    r"^(?P<y>[+-]\d{6}|\d{4})(?:-(?P<mo>\d{2})(?:-(?P<d>\d{2}))?)?"
    r"(?:T(?P<h>\d{2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:[.,](?P<f>\d+))?)?"
    r"(?P<tz>Z|[+-]\d{2}:\d{2})?)?$"
)
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_MAX_TIME_MS = 8.64e15  # ECMAScript TimeClip: |t| above 100,000,000 days is an invalid date


def iso_from_ms(ms: int) -> str:
    """Return ``new Date(ms).toISOString()``: ``2026-05-07T10:11:12.345Z``."""
    when = _EPOCH + _dt.timedelta(milliseconds=ms)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def parse_iso_ms(text: str) -> float | int:
    """
    Return ``Date.parse(text)`` in ms since the epoch, for the ECMAScript date-time string format.

    Accepted: ``YYYY``, ``YYYY-MM``, ``YYYY-MM-DD``, optionally followed by ``THH:mm``, ``:ss``,
    ``.sss`` (extra digits truncated, as V8 does) and ``Z`` or ``±HH:mm``. A form without an offset
    is read as UTC (JavaScript reads a date-time without offset as local time; transcripts always carry
    ``Z``). Anything else gives NaN, which is written as ``null`` like ``JSON.stringify`` does.

    Returns:
        An ``int`` number of ms, or ``float("nan")`` when the text is not a valid date.
    """
    match = _ISO.match(text)
    if match is None:
        return float("nan")
    try:
        year = int(match["y"])
        month = int(match["mo"] or 1)
        day = int(match["d"] or 1)
        hour = int(match["h"] or 0)
        minute = int(match["mi"] or 0)
        second = int(match["s"] or 0)
        millis = int((match["f"] or "0")[:3].ljust(3, "0"))
        if hour == 24 and minute == 0 and second == 0 and millis == 0:
            base = _dt.datetime(year, month, day, tzinfo=_dt.UTC) + _dt.timedelta(days=1)
        else:
            base = _dt.datetime(year, month, day, hour, minute, second, tzinfo=_dt.UTC)
    except (ValueError, OverflowError):
        return float("nan")
    ms = (base - _EPOCH) // _dt.timedelta(milliseconds=1) + millis
    tz = match["tz"]
    if tz and tz != "Z":
        sign = 1 if tz[0] == "+" else -1
        ms -= sign * (int(tz[1:3]) * 60 + int(tz[4:6])) * 60_000
    return ms


def js_date_ms(value: Any) -> float | int:
    """
    Return ``new Date(value).getTime()`` for any JSON value, as pi 0.73.1 dates the summary and custom
    messages it builds from an entry's ``timestamp`` (issue 15 item 3: a foreign writer's ``null``,
    number of ms or array there must not fail a context rebuild).

    A string is :func:`parse_iso_ms`; ``null`` is ``0``; a boolean ``0``/``1``; a number is clipped as
    ECMAScript's TimeClip does (truncated toward zero, NaN beyond +-8.64e15 ms or when not finite); an
    array is read as the string its elements joined by ``,`` make (``[2020]`` -> ``"2020"``); an object
    is NaN. V8 also parses some non-ISO strings (``"1,2"``) with a legacy parser: those are NaN here,
    as for string timestamps (see :func:`parse_iso_ms`).

    Returns:
        ms since the epoch (``int``), or ``float("nan")`` for an invalid date.
    """
    if isinstance(value, str):
        return parse_iso_ms(value)
    if value is None:
        return 0
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # an integer beyond any double: Infinity, an invalid date
            return math.nan
        if not math.isfinite(number) or abs(number) > _MAX_TIME_MS:
            return math.nan
        return int(number)  # truncation toward zero; -0 becomes 0
    if isinstance(value, list):
        text = _js_join(value)
        return parse_iso_ms(text) if text is not None else math.nan
    return math.nan


def _js_join(values: list[Any], depth: int = 0) -> str | None:
    """``Array.prototype.join(",")`` of JSON values (``None`` for what no date string can come from)."""
    if depth > 100:
        return None
    parts: list[str] = []
    for item in values:
        if item is None:
            parts.append("")
        elif isinstance(item, str):
            parts.append(item)
        elif isinstance(item, list):
            joined = _js_join(item, depth + 1)
            if joined is None:
                return None
            parts.append(joined)
        elif isinstance(item, bool):
            parts.append("true" if item else "false")
        elif isinstance(item, int | float):
            number = float(item) if isinstance(item, float) or abs(item) < 10**21 else math.inf
            if not math.isfinite(number) or abs(number) >= 1e21 or number != int(number):
                return None  # "1.5", "1e+21", "NaN", "Infinity": no ISO date string contains them
            parts.append(str(int(number)))  # String(2020.0) is "2020" (below 1e21 no exponent form)
        else:
            return None  # objects ("[object Object]"), numbers in a list: no ISO date string
    return ",".join(parts)


def utf16_len(text: str) -> int:
    """
    Return the length of ``text`` in UTF-16 code units (JavaScript's ``string.length``).

    Astral characters (U+10000 and above) count 2; lone surrogates count 1.
    """
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def slice_utf16_safe(text: str, start: int, end: int | None = None) -> str:
    """
    Slice ``text`` by UTF-16 code-unit offsets without leaving half a surrogate pair at either edge.

    Mirrors OpenClaw's ``sliceUtf16Safe``: negative offsets count from the end; a start that falls
    inside a pair moves forward past it, an end that falls inside a pair moves back before it.

    Args:
        text: The string.
        start: First code unit (negative: from the end).
        end: One past the last code unit (negative: from the end; ``None``: the end).
    """
    length = utf16_len(text)
    lo = max(length + start, 0) if start < 0 else min(start, length)
    hi = length if end is None else (max(length + end, 0) if end < 0 else min(end, length))
    if hi <= lo:
        return ""
    if length == len(text):  # no astral characters: code units are code points
        return text[lo:hi]
    units = text.encode("utf-16-le", "surrogatepass")

    def unit(i: int) -> int:
        return units[2 * i] | (units[2 * i + 1] << 8)

    if 0 < lo < length and 0xDC00 <= unit(lo) <= 0xDFFF and 0xD800 <= unit(lo - 1) <= 0xDBFF:
        lo += 1
    if 0 < hi < length and 0xD800 <= unit(hi - 1) <= 0xDBFF and 0xDC00 <= unit(hi) <= 0xDFFF:
        hi -= 1
    if hi <= lo:
        return ""
    return units[2 * lo : 2 * hi].decode("utf-16-le", "surrogatepass")


def js_number_to_string(value: float) -> str:
    """
    Return JavaScript's ``Number.prototype.toString()`` of ``value`` (what ``JSON.stringify`` writes).

    Integral values print without a fraction (``1.0`` -> ``"1"``, ``-0.0`` -> ``"0"``, ``1e20`` ->
    ``"100000000000000000000"``), exponents start at 1e21 and below 1e-6 (``"1e+21"``, ``"1e-7"``,
    ``"1.5e-7"``), with the shortest round-trip digits (Python's ``repr``, which picks the same
    digits). Not finite: ``"null"`` (``JSON.stringify``'s rendering).
    """
    if not math.isfinite(value):
        return "null"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exp_text = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction  # value = 0.<digits> x 10^point
    point = len(whole) + int(exp_text or 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k = len(digits)
    if k <= point <= 21:
        text = digits + "0" * (point - k)
    elif 0 < point <= 21:
        text = f"{digits[:point]}.{digits[point:]}"
    elif -6 < point <= 0:
        text = "0." + "0" * -point + digits
    else:
        exponent = point - 1
        mark = "+" if exponent >= 0 else "-"
        head = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
        text = f"{head}e{mark}{abs(exponent)}"
    return sign + text


def js_json_stringify(value: Any) -> str:
    """
    Return ``JSON.stringify(value)`` for a JSON value: compact, key order kept, non-ASCII raw, numbers
    in JavaScript's form (``1`` not ``1.0``, ``1e-7``, ``1e+21``), lone surrogates as ``\\udXXX``.

    Used for the length of tool-call arguments in :func:`estimate_tokens` (spec §12).
    """
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
        if not text.isascii() and any("\ud800" <= ch <= "\udfff" for ch in text):
            text = "".join(f"\\u{ord(ch):04x}" if "\ud800" <= ch <= "\udfff" else ch for ch in text)
        return text
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return js_number_to_string(value)
    if isinstance(value, dict):
        return (
            "{"
            + ",".join(f"{js_json_stringify(str(k))}:{js_json_stringify(v)}" for k, v in value.items())
            + "}"
        )
    if isinstance(value, list | tuple):
        return "[" + ",".join(js_json_stringify(v) for v in value) + "]"
    return "null"
