"""
``js_json_stringify`` writes what JavaScript writes for the same JSON: ``JSON.stringify(JSON.parse(text))``
in Node 20, integers past 2**53 and 10**21 included (JavaScript numbers are doubles), and objects
with array-index keys.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionkeeper.records import js_json_stringify


# JSON.stringify(JSON.parse(text)) in Node 20
NODE_RESTRINGIFY: dict[str, str] = {
    "9007199254740991": "9007199254740991",
    "9007199254740992": "9007199254740992",
    "9007199254740993": "9007199254740992",  # 2**53 + 1: the nearest double
    "-9007199254740993": "-9007199254740992",
    "12345678901234567890": "12345678901234567000",
    "999999999999999999999": "1e+21",
    "1000000000000000000000": "1e+21",
    "123456789012345678901234": "1.2345678901234569e+23",
    "-1000000000000000000000": "-1e+21",
    "1" + "0" * 400: "null",  # Infinity
    '{"n":[100000000000000000000,1000000000000000000000]}': '{"n":[100000000000000000000,1e+21]}',
    # a JavaScript object lists its array-index keys first, ascending
    '{"b":1,"4294967295":2,"4294967294":3,"01":4,"1":5,"0":6}': (
        '{"0":6,"1":5,"4294967294":3,"b":1,"4294967295":2,"01":4}'
    ),
}


@pytest.mark.parametrize("text", list(NODE_RESTRINGIFY))
def test_big_integers_are_written_as_javascript_numbers(text: str) -> None:
    assert js_json_stringify(json.loads(text)) == NODE_RESTRINGIFY[text]


def _restringified_by_node(texts: list[str]) -> list[str]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not found on PATH: the JavaScript JSON oracle cannot run")
    script = (
        'const a = JSON.parse(require("fs").readFileSync(0, "utf8"));'
        "process.stdout.write(JSON.stringify(a.map((t) => JSON.stringify(JSON.parse(t)))));"
    )
    done = subprocess.run(
        [node, "-e", script],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=dict(os.environ),
    )
    answers: list[str] = json.loads(done.stdout)
    return answers


_INTEGERS = st.one_of(
    st.integers(-(2**64), 2**64),
    st.integers(-(10**25), 10**25),
    st.integers(-10, 10).map(lambda d: 2**53 + d),
    st.integers(-10, 10).map(lambda d: 10**21 + d),
    st.integers(0, 400).map(lambda e: -(10**e)),
)
_SCALARS = st.one_of(
    st.none(), st.booleans(), _INTEGERS, st.floats(allow_nan=False, allow_infinity=False), st.text()
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=3, deadline=None)
@given(st.lists(_VALUES, min_size=100, max_size=150))
def test_js_json_stringify_matches_node_on_generated_json(values: list[Any]) -> None:
    texts = [json.dumps(value) for value in values]
    expected = _restringified_by_node(texts)
    ours = [js_json_stringify(json.loads(text)) for text in texts]
    mismatches = [(t, e, o) for t, e, o in zip(texts, expected, ours, strict=True) if e != o]
    assert not mismatches, mismatches[:5]
