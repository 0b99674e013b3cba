"""
Timestamps as pi writes and reads them: ISO-8601 UTC strings with milliseconds (``Date.toISOString``)
on entries, and ms since the epoch (``Date.parse``) on synthesised messages (pi-format spec §4, §6.5).
"""

from __future__ import annotations

import datetime as _dt
import re


__all__ = ("iso_from_ms", "parse_iso_ms")

_ISO = re.compile(
    r"^(?P<y>[+-]\d{6}|\d{4})(?:-(?P<mo>\d{2})(?:-(?P<d>\d{2}))?)?"
    r"(?:T(?P<h>\d{2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:[.,](?P<f>\d+))?)?"
    r"(?P<tz>Z|[+-]\d{2}:\d{2})?)?$"
)
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


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
