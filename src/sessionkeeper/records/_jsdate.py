"""
The grammar of JavaScript's ``Date.parse`` as V8 (Node 20, pi's and OpenClaw's runtime) reads a string:
the ECMAScript date-time string format first, then V8's legacy rules for whatever stops short of it.
Written from V8's documented behaviour (``src/date/dateparser*``) and checked against ``node``
(``tests/records/test_records_js_dates.py``); :func:`~sessionkeeper.records.parse_iso_ms` turns the
fields into ms.

Tokens: a run of ASCII digits is a number (its first 9 digits count), ``: - + . )`` are symbols,
JavaScript whitespace and ASCII line ends are spaces, a run of other characters at or above ``"A"``
(every other non-ASCII character, full-width digits too) is a word (a month name by its first three
letters; ``am pm ut utc z gmt`` and the US zones; ``t``), a parenthesised run is a comment, anything
else is ignored; a NUL character ends the text.
"""

from __future__ import annotations

from typing import Final, NamedTuple


__all__ = ("DateFields", "parse_date_fields")

_UNSET: Final = -(2**31)  # an unset slot
_NUMBER, _SYMBOL, _WORD, _SPACE, _OTHER, _END = range(6)
_JUNK, _MONTH, _ZONE, _TIME_MARK, _AM_PM = range(5)
_MONTHS: Final = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_KEYWORDS: Final[dict[str, tuple[int, int]]] = {
    **{name: (_MONTH, number) for number, name in enumerate(_MONTHS, 1)},
    "am": (_AM_PM, 0),
    "pm": (_AM_PM, 12),
    **dict.fromkeys(("ut", "utc", "z", "gmt"), (_ZONE, 0)),
    "cdt": (_ZONE, -5),
    "cst": (_ZONE, -6),
    "edt": (_ZONE, -4),
    "est": (_ZONE, -5),
    "mdt": (_ZONE, -6),
    "mst": (_ZONE, -7),
    "pdt": (_ZONE, -7),
    "pst": (_ZONE, -8),
    "t": (_TIME_MARK, 0),
}
_SPACES: Final = frozenset(  # JavaScript whitespace, ASCII line ends (U+2028/9 are letters here)
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u202f\u205f\u3000\ufeff"
)
_PLUS, _MINUS = ord("+"), ord("-")


class _Token(NamedTuple):
    kind: int
    value: int = 0  # a number's value, a symbol's code point, a word's keyword value
    length: int = 0  # characters (a number's digits)
    word: int = _JUNK  # a word's keyword kind


class DateFields(NamedTuple):
    """A parsed date: the calendar fields as written (``day`` may pass the month's end) and the offset."""

    year: int
    month: int  # 1-12
    day: int  # 1-31
    hour: int  # 0-24 (24 only at 24:00:00.000)
    minute: int
    second: int
    millisecond: int
    offset_seconds: int  # east of UTC; 0 when the text names none (read as UTC)


def _word(text: str) -> _Token:
    prefix = "".join(chr(ord(c) | 0x20) if "A" <= c <= "Z" else c for c in text[:3])
    kind, value = _KEYWORDS.get(prefix, (_JUNK, 0))
    if kind != _MONTH and len(text) > 3:  # only a month name may be longer than its keyword
        kind, value = _JUNK, 0
    return _Token(_WORD, value, len(text), kind)


def _tokens(text: str) -> list[_Token]:
    nul = text.find("\0")
    end = len(text) if nul < 0 else nul
    out: list[_Token] = []
    i = 0
    while i < end:
        c = text[i]
        j = i + 1
        if "0" <= c <= "9":
            while j < end and "0" <= text[j] <= "9":
                j += 1
            out.append(_Token(_NUMBER, int(text[i : min(j, i + 9)]), j - i))
        elif c in ":-+.)":
            out.append(_Token(_SYMBOL, ord(c), 1))
        elif c in _SPACES:
            out.append(_Token(_SPACE, 0, 1))
        elif c >= "A":
            while j < end and text[j] >= "A" and text[j] not in _SPACES:
                j += 1
            out.append(_word(text[i:j]))
        else:
            if c == "(":  # a comment, nested, to its closing parenthesis (or the end)
                depth = 1
                while j < end and depth > 0:
                    depth += (text[j] == "(") - (text[j] == ")")
                    j += 1
            out.append(_Token(_OTHER))
        i = j
    out.append(_Token(_END))
    return out


def _milliseconds(token: _Token) -> int:
    """A fraction's first three digits as ms (``5`` -> 500, ``05`` -> 50, ``1234567`` -> 123)."""
    if token.length < 3:
        return token.value * (100 if token.length == 1 else 10)
    divisor: int = 10 ** (min(token.length, 9) - 3)
    return token.value // divisor


class _Parser:
    """One run over the tokens, filling the day, time and zone slots."""

    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0
        self.day: list[int] = []
        self.named_month = _UNSET
        self.iso = False
        self.time: list[int] = []
        self.hour_offset = _UNSET
        self.zone_sign = _UNSET
        self.zone_hour = _UNSET
        self.zone_minute = _UNSET
        self.has_number = False

    def peek(self) -> _Token:
        return self.tokens[self.at]

    def take(self) -> _Token:
        token = self.tokens[self.at]
        self.at += token.kind != _END
        return token

    def skip(self, symbol: str) -> bool:
        if self.is_symbol(self.peek(), symbol):
            self.at += 1
            return True
        return False

    @staticmethod
    def is_symbol(token: _Token, symbol: str) -> bool:
        return token.kind == _SYMBOL and token.value == ord(symbol)

    @staticmethod
    def is_sign(token: _Token) -> bool:
        return token.kind == _SYMBOL and token.value in (_PLUS, _MINUS)

    @staticmethod
    def is_z(token: _Token) -> bool:
        return token.kind == _WORD and token.word == _ZONE and token.length == 1 and token.value == 0

    def number_next(self, length: int, low: int, high: int) -> bool:
        token = self.peek()
        return token.kind == _NUMBER and token.length == length and low <= token.value <= high

    def set_zone(self, hours: int) -> None:
        self.zone_sign = -1 if hours < 0 else 1
        self.zone_hour, self.zone_minute = abs(hours), 0

    def add_time(self, value: int, *, final: bool = False) -> bool:
        if len(self.time) >= 4:
            return False
        self.time.append(value)
        if final:
            self.time += [0] * (4 - len(self.time))
        return True

    def time_expects(self, value: int) -> bool:
        slot = len(self.time)
        return (slot in (1, 2) and 0 <= value <= 59) or (slot == 3 and 0 <= value <= 999)

    # ------------------------------------------------------------ the ECMAScript form

    def iso_form(self) -> _Token | None:
        """Read the ECMAScript form; the token the legacy rules go on with, ``None`` when invalid."""
        if self.is_sign(self.peek()):
            sign = self.take()
            if not self.number_next(6, 0, 999_999):
                return sign
            year = self.take().value
            if sign.value == _MINUS and year == 0:
                return sign  # -000000 is invalid; its digits are dropped, the sign goes on (V8)
            self.day.append(-year if sign.value == _MINUS else year)
        elif self.number_next(4, 0, 9999):
            self.day.append(self.take().value)
        else:
            return self.take()
        if self.skip("-"):
            if not self.number_next(2, 1, 12):
                return self.take()
            self.day.append(self.take().value)
            if self.skip("-"):
                if not self.number_next(2, 1, 31):
                    return self.take()
                self.day.append(self.take().value)
        mark = self.peek()
        if not (mark.kind == _WORD and mark.word == _TIME_MARK):
            if mark.kind != _END:
                return self.take()
        elif not self.iso_time():
            return None
        if self.zone_hour == _UNSET and not self.time:
            self.set_zone(0)  # a date-only form is UTC
        self.iso = True
        return self.peek()

    def iso_time(self) -> bool:
        """``THH:mm[:ss[.s+]][Z|+-HH:mm|+-HHmm]`` up to the end of the text."""
        self.take()
        if not self.number_next(2, 0, 24):
            return False
        midnight = self.peek().value == 24  # 24:00[:00[.000]] only
        self.time.append(self.take().value)
        if not self.skip(":") or not self.number_next(2, 0, 0 if midnight else 59):
            return False
        self.time.append(self.take().value)
        if self.skip(":"):
            if not self.number_next(2, 0, 0 if midnight else 59):
                return False
            self.time.append(self.take().value)
            if self.skip("."):
                if self.peek().kind != _NUMBER or (midnight and self.peek().value > 0):
                    return False
                self.time.append(_milliseconds(self.take()))
        if self.is_z(self.peek()):
            self.take()
            self.set_zone(0)
        elif self.is_sign(self.peek()):
            self.zone_sign = 1 if self.take().value == _PLUS else -1
            if self.peek().kind == _NUMBER and self.peek().length == 4:
                both = self.take().value
                self.zone_hour, self.zone_minute = both // 100, both % 100
                if self.zone_hour > 23 or self.zone_minute > 59:
                    return False
            else:
                if not self.number_next(2, 0, 23):
                    return False
                self.zone_hour = self.take().value
                if not self.skip(":") or not self.number_next(2, 0, 59):
                    return False
                self.zone_minute = self.take().value
        return self.peek().kind == _END

    # ------------------------------------------------------------ V8's legacy rules

    def legacy(self, token: _Token) -> bool:
        """Take one token by the legacy rules; ``False`` when the text is invalid."""
        if token.kind == _NUMBER:
            self.has_number = True
            return self.legacy_number(token.value)
        if token.kind == _WORD:
            if token.word == _AM_PM and self.time:
                self.hour_offset = token.value
            elif token.word == _MONTH:
                self.named_month = token.value
                self.skip("-")
            elif token.word == _ZONE and self.has_number:
                self.set_zone(token.value)
            elif self.has_number or self.peek().kind == _NUMBER:
                return False  # a stray word after a number, or glued to the first one
            return True
        if self.is_sign(token) and ((self.zone_hour == 0 and self.zone_minute == 0) or self.time):
            self.zone_sign = 1 if token.value == _PLUS else -1  # an offset after UTC or a time
            value = length = 0
            if self.peek().kind == _NUMBER:
                number = self.take()
                value, length = number.value, number.length
            self.has_number = True
            if self.is_symbol(self.peek(), ":"):
                self.zone_hour, self.zone_minute = value, _UNSET
            elif length in (1, 2):
                self.zone_hour, self.zone_minute = value, 0
            elif length in (3, 4):
                self.zone_hour, self.zone_minute = value // 100, value % 100
            else:
                return False
            return True
        return not ((self.is_sign(token) or self.is_symbol(token, ")")) and self.has_number)

    def legacy_number(self, value: int) -> bool:
        if self.skip(":"):
            if self.skip(":"):
                if self.time:
                    return False
                self.time += [value, 0]
                return True
            if not self.add_time(value):
                return False
            if self.is_symbol(self.peek(), "."):
                self.take()
        elif self.skip(".") and self.time_expects(value):
            self.add_time(value)
            if self.peek().kind != _NUMBER:
                return False
            self.add_time(_milliseconds(self.take()), final=True)
        elif self.zone_hour != _UNSET and self.zone_minute == _UNSET and 0 <= value <= 59:
            self.zone_minute = value
        elif self.time_expects(value):
            self.add_time(value, final=True)
            after = self.peek()
            return after.kind in (_END, _SPACE) or self.is_z(after) or self.is_sign(after)
        else:
            if len(self.day) >= 3:
                return False
            self.day.append(value)
            self.skip("-")
        return True

    # ------------------------------------------------------------ the fields

    def fields(self) -> DateFields | None:
        if not self.day:
            return None
        first, second, third = [*self.day, 1, 1][:3]
        is_day = 1 <= first <= 31
        if self.named_month != _UNSET:
            month = self.named_month
            year, day = (second, first) if is_day else (first, second)
        elif self.iso or not is_day:
            year, month, day = first, second, third
        else:
            month, day, year = first, second, third
        if not self.iso:
            year += 2000 if 0 <= year <= 49 else 1900 if 50 <= year <= 99 else 0
        if not (1 <= month <= 12 and 1 <= day <= 31):
            return None
        hour, minute, sec, milli = [*self.time, 0, 0, 0, 0][:4]
        if self.hour_offset != _UNSET:
            if not 0 <= hour <= 12:
                return None
            hour = hour % 12 + self.hour_offset
        valid = hour <= 23 and minute <= 59 and sec <= 59 and milli <= 999
        if not valid and (hour, minute, sec, milli) != (24, 0, 0, 0):
            return None
        offset = 0
        if self.zone_sign != _UNSET:
            hours = 0 if self.zone_hour == _UNSET else self.zone_hour
            minutes = 0 if self.zone_minute == _UNSET else self.zone_minute
            offset = (hours * 3600 + minutes * 60) % 2**32  # summed in 32 unsigned bits, as V8 does
            if offset >= 2**31:
                return None
            offset *= self.zone_sign
        return DateFields(year, month, day, hour, minute, sec, milli, offset)


def parse_date_fields(text: str) -> DateFields | None:
    """
    The fields ``Date.parse(text)`` reads, or ``None`` when it gives NaN for a malformed text (a date past
    +-8.64e15 ms is for the caller to reject).
    """
    parser = _Parser(text)
    token = parser.iso_form()
    if token is None:
        return None
    parser.has_number = bool(parser.day)
    while token.kind != _END:
        if not parser.legacy(token):
            return None
        token = parser.take()
    return parser.fields()
