"""
Timestamps as pi writes and reads them: ISO-8601 UTC strings with milliseconds (``Date.toISOString``)
on entries, and ms since the epoch (``Date.parse``) on synthesised messages (pi-format spec §4, §6.5).
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from typing import Any


__all__ = ("iso_from_ms", "js_date_ms", "parse_iso_ms")

_ISO = re.compile(
    r"^(?P<y>[+-]\d{6}|\d{4})(?:-(?P<mo>\d{2})(?:-(?P<d>\d{2}))?)?"
    r"(?:T(?P<h>\d{2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:[.,](?P<f>\d+))?)?"
    r"(?P<tz>Z|[+-]\d{2}:\d{2})?)?$"
)
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
