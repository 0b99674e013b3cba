"""
JavaScript compatibility: the one place where pi's and OpenClaw's JavaScript semantics are reproduced.

- Lengths in UTF-16 code units (``String.length``) and slices that never split a surrogate pair
  (OpenClaw's ``sliceUtf16Safe``).
- ``JSON.stringify`` and ``Number.prototype.toString`` (``1`` not ``1.0``, ``1e+21``, ``1e-7``).
- Timestamps as pi writes and reads them: ISO-8601 UTC strings with milliseconds (``Date.toISOString``)
  on entries, and ms since the epoch (``Date.parse``) on synthesised messages (pi-format spec §4, §6.5).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from sessionkeeper.records._jsdate import parse_date_fields


__all__ = (
    "iso_from_ms",
    "js_date_ms",
    "js_json_stringify",
    "js_number_to_string",
    "parse_iso_ms",
    "slice_utf16_safe",
    "utf16_len",
)

_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_MAX_TIME_MS = 8.64e15  # ECMAScript TimeClip: |t| above 100,000,000 days is an invalid date
_DAY_MS = 86_400_000
_CANONICAL_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d{3})Z", re.ASCII)


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to ``year-month-day`` of the proleptic Gregorian calendar (any year)."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """The proleptic Gregorian ``(year, month, day)`` ``days`` after 1970-01-01 (the inverse of the above)."""
    days += 719_468
    era = days // 146_097
    doe = days - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + (3 if mp < 10 else -9)
    return yoe + era * 400 + (month <= 2), month, day


def iso_from_ms(ms: int) -> str:
    """
    Return ``new Date(ms).toISOString()``: ``2026-05-07T10:11:12.345Z``.

    Years 0-9999 have four digits; others the expanded form with a sign and six digits
    (``+275760-09-13T00:00:00.000Z``, ``-000001-12-31T00:00:00.000Z``). A fractional ``ms`` is
    truncated toward zero (TimeClip).

    Raises:
        ValueError: ``ms`` is not finite or beyond +-8.64e15 (JavaScript's ``RangeError: Invalid time
            value``).
    """
    if isinstance(ms, float):
        if not math.isfinite(ms):
            raise ValueError(f"invalid time value: {ms!r}")
        ms = int(ms)
    if abs(ms) > _MAX_TIME_MS:
        raise ValueError(f"invalid time value: {ms!r} ms is beyond +-8.64e15")
    days, rest = divmod(ms, _DAY_MS)
    year, month, day = _civil_from_days(days)
    seconds, millis = divmod(rest, 1000)
    text_year = f"{year:04d}" if 0 <= year <= 9999 else f"{'+' if year > 0 else '-'}{abs(year):06d}"
    return (
        f"{text_year}-{month:02d}-{day:02d}T{seconds // 3600:02d}:{seconds // 60 % 60:02d}:"
        f"{seconds % 60:02d}.{millis:03d}Z"
    )


def parse_iso_ms(text: str) -> float | int:
    """
    Return ``Date.parse(text)`` in ms since the epoch, as V8 (Node 20, pi's runtime) computes it.

    The ECMAScript date-time string format first: ``YYYY``, ``YYYY-MM``, ``YYYY-MM-DD`` (or a signed
    six-digit year, ``-000000`` excluded), optionally ``THH:mm``, ``:ss``, ``.s+`` (first three digits
    kept) and ``Z`` or ``+-HH:mm`` / ``+-HHmm``, nothing after (a trailing newline makes it invalid).
    What stops short of that form goes on through V8's legacy rules (``2026-01-01 10:00Z``,
    ``2026-1-1``, ``Jan 5 2026 10:00 PM GMT+2``, a date-only form followed by a newline). Digits are
    ASCII only (a full-width digit is a letter to V8); a NUL character ends the text. A form without an
    offset is read as UTC (JavaScript reads a date-time without offset as local time; transcripts always carry
    ``Z``). Days past a month's end roll over (``2026-02-30`` is March 2), as in V8. Beyond
    +-8.64e15 ms the date is invalid.

    Returns:
        An ``int`` number of ms, or ``float("nan")`` when the text is not a valid date (``JSON.stringify``
        writes NaN as ``null``).
    """
    canonical = _CANONICAL_ISO.fullmatch(text)  # what toISOString writes: the common case, fast
    if canonical is not None:
        year, month, day, hour, minute, second, millis = map(int, canonical.groups())
        if 1 <= month <= 12 and 1 <= day <= 31 and hour <= 23 and minute <= 59 and second <= 59:
            days = _days_from_civil(year, month, 1) + day - 1
            return days * _DAY_MS + ((hour * 60 + minute) * 60 + second) * 1000 + millis
    fields = parse_date_fields(text)
    if fields is None:
        return math.nan
    year, month, day, hour, minute, second, millis, offset_s = fields
    ms = (_days_from_civil(year, month, 1) + day - 1) * _DAY_MS
    ms += ((hour * 60 + minute) * 60 + second) * 1000 + millis - offset_s * 1000
    return ms if abs(ms) <= _MAX_TIME_MS else math.nan


def js_date_ms(value: Any) -> float | int:
    """
    Return ``new Date(value).getTime()`` for any JSON value, as pi 0.73.1 dates the summary and custom
    messages it builds from an entry's ``timestamp`` (issue 15 item 3: a foreign writer's ``null``,
    number of ms or array there must not fail a context rebuild).

    A string is :func:`parse_iso_ms`; ``null`` is ``0``; a boolean ``0``/``1``; a number is clipped as
    ECMAScript's TimeClip does (truncated toward zero, NaN beyond +-8.64e15 ms or when not finite); an
    array is read as the string its elements joined by ``,`` make (``[2020]`` -> ``"2020"``); an object
    is NaN (``"[object Object]"`` holds no date). Strings go through V8's whole grammar, legacy forms
    included (``"1,2"`` is 2001-01-02; see :func:`parse_iso_ms`).

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
    """``Array.prototype.join(",")`` of JSON values (``None`` past 100 nested arrays)."""
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
            parts.append(_js_string_of_number(item))
        else:
            parts.append("[object Object]")
    return ",".join(parts)


def _js_number(value: int | float) -> float:
    """The JavaScript number a JSON number becomes: the nearest double (beyond the doubles: +-Infinity)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _js_string_of_number(value: int | float) -> str:
    """``String(n)`` of a JSON number: ``"NaN"`` and ``"Infinity"`` included."""
    number = _js_number(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    return js_number_to_string(number)


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


def _is_array_index(key: str) -> bool:
    """Whether JavaScript reads ``key`` as an array index (``"0"``, ``"42"``; not ``"01"``, ``"2**32-1"``)."""
    if not key.isascii() or not key.isdigit() or (key[0] == "0" and len(key) > 1) or len(key) > 10:
        return False
    return int(key) < 2**32 - 1


def js_json_stringify(value: Any) -> str:
    """
    Return ``JSON.stringify(value)`` for a JSON value: compact, key order kept (but for the keys that are
    array indexes, ``"0"`` to ``"4294967294"``, which a JavaScript object lists first, in ascending
    order), non-ASCII raw, numbers
    in JavaScript's form (``1`` not ``1.0``, ``1e-7``, ``1e+21``), lone surrogates as ``\\udXXX``.

    A Python ``int`` is written as JavaScript writes the number ``JSON.parse`` makes of it: the nearest
    double, so past 2**53 digits are lost (``2**53 + 1`` -> ``9007199254740992``), from 10**21 on the
    exponent form (``10**21`` -> ``1e+21``), and past the doubles ``null`` (Infinity).

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
        # JavaScript has doubles only: an integer read from JSON is the nearest double (beyond 2**53 it
        # loses digits, from 1e21 it prints with an exponent, past the doubles it is Infinity: "null")
        return str(value) if -(2**53) <= value <= 2**53 else js_number_to_string(_js_number(value))
    if isinstance(value, float):
        return js_number_to_string(value)
    if isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
        if any(_is_array_index(k) for k, _ in items):  # JavaScript lists those keys first, ascending
            indexes = sorted((item for item in items if _is_array_index(item[0])), key=lambda i: int(i[0]))
            items = indexes + [item for item in items if not _is_array_index(item[0])]
        return "{" + ",".join(f"{js_json_stringify(k)}:{js_json_stringify(v)}" for k, v in items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(js_json_stringify(v) for v in value) + "]"
    return "null"
