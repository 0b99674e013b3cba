"""
``parse_iso_ms`` is ``Date.parse``, ``iso_from_ms`` is ``new Date(ms).toISOString()`` and ``js_date_ms`` is
``new Date(value).getTime()``, as Node 20 computes them (``TZ=UTC``: a form without offset is read as UTC).

The explicit cases hold node's answers; the property tests ask a ``node`` process for a batch of generated
values at once (skipped, with the reason, where ``node`` is not installed).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionkeeper.records import iso_from_ms, js_date_ms, parse_iso_ms


MAX_MS = 8_640_000_000_000_000

# Date.parse(text) in Node 20 (TZ=UTC); None is NaN
NODE_DATE_PARSE: dict[str, int | None] = {
    "2026-01-01T00:00:00.000Z": 1767225600000,
    # the ECMAScript form must end where the text ends
    "2026-01-01T00:00:00.000Z\n": None,
    "2026-01-01T00:00:00.000Z ": None,
    "2026-01-01T00:00:00.000Z\t": None,
    "2026-01-01T00:00:00.000\u00a0": None,
    "2026-01-01T00:00:00.000\ufeff": None,
    "2026-01-01T00:00:00.000Zjunk": None,
    # ... but a date-only form, or one stopping short, goes on through the legacy rules
    "2026-01-01\n": 1767225600000,
    "\n2026-01-01": 1767225600000,
    "2026-01-01 00:00:00Z": 1767225600000,
    "2026-01-01t00:00:00z": 1767225600000,
    "2026-1-1": 1767225600000,
    "1,2": 978393600000,
    "Jan 5": 978652800000,
    "Thu, 01 Jan 2026 00:00:00 GMT": 1767225600000,
    "2026-01-01 10:00 GMT-0800": 1767290400000,
    "2026-01-01 12 PM": None,
    # full-width digits are letters to V8
    "２０２６-01-01T00:00:00Z": None,
    "１": None,
    # fractions: any number of digits, the first three count; no comma
    "2026-01-01T00:00:00.1234567Z": 1767225600123,
    "2026-01-01T00:00:00,5Z": None,
    "2026-01-01T00:00:00.Z": None,
    # the limits of a time value: +-8.64e15 ms
    "+275760-09-13T00:00:00.000Z": MAX_MS,
    "+275760-09-13T00:00:00.001Z": None,
    "-271821-04-20T00:00:00.000Z": -MAX_MS,
    "-271821-04-19T23:59:59.999Z": None,
    "+010000-01-01T00:00:00Z": 253402300800000,
    "0000-01-01T00:00:00Z": -62167219200000,
    "-000001-01-01T00:00:00Z": -62198755200000,
    "-000000-01-01T00:00:00Z": None,
    "12026-01-01": 317336745600000,
    # days past the month's end roll over; other fields are range-checked
    "2026-02-30T00:00:00Z": 1772409600000,
    "2026-13-01": None,
    "2026-01-00": None,
    "2026-01-01T24:00:00Z": 1767312000000,
    "2026-01-01T24:00:01Z": None,
    "2026-01-01T23:59:60Z": None,
    "2026-01-01T00:00:00+23:59": 1767139260000,
    "2026-01-01T00:00:00+24:00": None,
    "2026-01-01T00:00:00+0100": 1767222000000,
    "2026-01-01T00:00:00+01": None,
    "2026-01-01T00Z": None,
    # a NUL character ends the text
    "2026-01-01T00:00:00Z\x00junk": 1767225600000,
    "": None,
}

# new Date(ms).toISOString() in Node 20; None is a RangeError
NODE_TO_ISO: dict[int | float, str | None] = {
    0: "1970-01-01T00:00:00.000Z",
    -1: "1969-12-31T23:59:59.999Z",
    253402300799999: "9999-12-31T23:59:59.999Z",
    253402300800000: "+010000-01-01T00:00:00.000Z",
    -62167219200000: "0000-01-01T00:00:00.000Z",
    -62167219200001: "-000001-12-31T23:59:59.999Z",
    MAX_MS: "+275760-09-13T00:00:00.000Z",
    -MAX_MS: "-271821-04-20T00:00:00.000Z",
    MAX_MS + 1: None,
    -MAX_MS - 1: None,
    1.9: "1970-01-01T00:00:00.001Z",
    -1.9: "1969-12-31T23:59:59.999Z",  # truncated toward zero: -1 ms
    math.nan: None,
    math.inf: None,
}


def _nan_to_none(value: float | int) -> int | None:
    return None if isinstance(value, float) and math.isnan(value) else int(value)


@pytest.mark.parametrize("text", list(NODE_DATE_PARSE))
def test_parse_iso_ms_is_node_date_parse(text: str) -> None:
    assert _nan_to_none(parse_iso_ms(text)) == NODE_DATE_PARSE[text]


@pytest.mark.parametrize("ms", list(NODE_TO_ISO))
def test_iso_from_ms_is_node_to_iso_string(ms: int) -> None:
    expected = NODE_TO_ISO[ms]
    if expected is None:
        with pytest.raises(ValueError, match="invalid time value"):
            iso_from_ms(ms)
    else:
        assert iso_from_ms(ms) == expected


def test_js_date_ms_joins_an_array_as_javascript_does() -> None:
    assert js_date_ms([1.5]) == 978652800000  # String([1.5]) is "1.5": Date.parse reads 2001-01-05
    assert js_date_ms([{"a": 1}, 2020]) == 1577836800000  # "[object Object],2020"
    assert math.isnan(js_date_ms([2**1024]))  # "Infinity"


# ------------------------------------------------------------------ against node


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not found on PATH: the JavaScript Date oracle cannot run")
    return node


_NODE_SCRIPT = """
const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
const out = input.items.map((item) => {
  if (input.op === "parse") { const v = Date.parse(item); return Number.isNaN(v) ? null : v; }
  if (input.op === "date") { const v = new Date(item).getTime(); return Number.isNaN(v) ? null : v; }
  try { return new Date(item).toISOString(); } catch (e) { return null; }
});
process.stdout.write(JSON.stringify(out));
"""


def _ask_node(op: str, items: list[Any]) -> list[Any]:
    """One node process answers a whole batch (``TZ=UTC``)."""
    done = subprocess.run(
        [_node(), "-e", _NODE_SCRIPT],
        input=json.dumps({"op": op, "items": items}),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**os.environ, "TZ": "UTC"},
    )
    answers: list[Any] = json.loads(done.stdout)
    return answers


_DIGITS = st.integers(0, 99).map(lambda n: f"{n:02d}")
_YEARS = st.one_of(
    st.integers(0, 9999).map(lambda y: f"{y:04d}"),
    st.sampled_from(["+275760", "-271821", "+275759", "-271820", "-000000", "+000000", "+010000", "-000001"]),
    st.builds(lambda sign, y: f"{sign}{y:06d}", st.sampled_from("+-"), st.integers(0, 999_999)),
    st.integers(0, 99_999).map(str),
)
_ZONES = st.sampled_from(
    ["", "Z", "z", "+00:00", "-00:00", "+05:30", "-23:59", "+24:00", "+0100", "+01", " GMT", " UTC+2", " PST"]
)
_TAILS = st.sampled_from(["", "", "", "\n", " ", "\t", "\x00junk", "\u00a0", "x", " 12", ")", "\r\n"])
_HEADS = st.sampled_from(["", "", "", " ", "\n", "(c) ", "Jan ", "x"])


@st.composite
def _date_texts(draw: st.DrawFn) -> str:
    """Strings in the shapes that matter: the ISO form with fields at and past their limits."""
    text = draw(_YEARS)
    if draw(st.booleans()):
        text += draw(st.sampled_from("-/")) + draw(_DIGITS)
        if draw(st.booleans()):
            text += "-" + draw(_DIGITS)
    if draw(st.booleans()):
        text += draw(st.sampled_from(["T", "t", " "])) + draw(_DIGITS) + ":" + draw(_DIGITS)
        if draw(st.booleans()):
            text += ":" + draw(_DIGITS)
            if draw(st.booleans()):
                text += draw(st.sampled_from(".,")) + draw(st.text("0123456789", max_size=12))
        text += draw(_ZONES)
    if draw(st.booleans()):
        text = text.translate(str.maketrans("0123456789", "０１２３４５６７８９"))
    return draw(_HEADS) + text + draw(_TAILS)


_FREE_TEXT = st.one_of(
    st.text("0123456789-+:.,/ TtZz()\n\t\x00JanFebPMAMGMTUTCESTx\u00a0\u3000\u2028１", max_size=24),
    st.text(max_size=12),
)


@settings(max_examples=4, deadline=None)
@given(st.lists(st.one_of(_date_texts(), _FREE_TEXT), min_size=100, max_size=150))
def test_parse_iso_ms_matches_node_on_generated_texts(texts: list[str]) -> None:
    expected = _ask_node("parse", texts)
    ours = [_nan_to_none(parse_iso_ms(text)) for text in texts]
    mismatches = [(t, e, o) for t, e, o in zip(texts, expected, ours, strict=True) if e != o]
    assert not mismatches, mismatches[:10]


_MS = st.one_of(
    st.integers(-MAX_MS - 10, MAX_MS + 10),
    st.integers(-10, 10).map(lambda d: MAX_MS + d),
    st.integers(-10, 10).map(lambda d: -MAX_MS + d),
    st.integers(-62_198_755_200_000, 253_402_300_800_000),
)


@settings(max_examples=3, deadline=None)
@given(st.lists(_MS, min_size=100, max_size=150))
def test_iso_from_ms_matches_node_on_generated_times(values: list[int]) -> None:
    expected = _ask_node("iso", values)
    ours: list[str | None] = []
    for ms in values:
        try:
            ours.append(iso_from_ms(ms))
        except ValueError:
            ours.append(None)
    assert ours == expected
    parsed = [_nan_to_none(parse_iso_ms(text)) for text in ours if text is not None]
    assert parsed == [ms for ms, text in zip(values, ours, strict=True) if text is not None]


_JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**22), 10**22),
    st.floats(allow_nan=False, allow_infinity=False),
    _date_texts(),
)


@settings(max_examples=3, deadline=None)
@given(st.lists(st.one_of(_JSON_SCALARS, st.lists(_JSON_SCALARS, max_size=3)), min_size=100, max_size=150))
def test_js_date_ms_matches_node_new_date(values: list[Any]) -> None:
    expected = _ask_node("date", values)
    assert [_nan_to_none(js_date_ms(value)) for value in values] == expected
