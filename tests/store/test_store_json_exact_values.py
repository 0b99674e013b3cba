"""sessions.json values JSON.parse accepts but Python cannot hold exactly (issue 15, "Operational")."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionkeeper.exceptions import StoreCorruptError
from sessionkeeper.store import (
    JsonFileStoreBackend,
    RawJsonValue,
    SessionStore,
    encode_session_entry,
    run_maintenance,
)
from sessionkeeper.store._jsontext import dump_js, parse_store_json


NOW = 1_789_992_000_000
BIG = "9" * 5000
DEEP = "[" * 1500 + "]" * 1500
OUT_OF_RANGE = [
    "1e400",
    "-1e400",
    "1E+999",
    BIG,
    "-" + BIG,
    DEEP,
    "[" * 5000 + "]" * 5000,
]


def _file(value: str, *, field: str = "x") -> bytes:
    """A store as OpenClaw writes it: A holds ``value`` in ``field``, B is ordinary."""
    return (
        "{\n"
        '  "agent:main:a": {\n'
        '    "sessionId": "sa",\n'
        f'    "updatedAt": {NOW},\n'
        f'    "{field}": {value},\n'
        '    "after": [\n'
        "      1,\n"
        "      2.5\n"
        "    ]\n"
        "  },\n"
        '  "agent:main:b": {\n'
        '    "sessionId": "sb",\n'
        f'    "updatedAt": {NOW}\n'
        "  }\n"
        "}"
    ).encode()


def _store(tmp_path: Path, data: bytes) -> Path:
    directory = tmp_path / "sessions"
    directory.mkdir()
    (directory / "sessions.json").write_bytes(data)
    return directory


@pytest.mark.anyio
@pytest.mark.parametrize("value", OUT_OF_RANGE, ids=lambda v: v[:12])
async def test_an_out_of_range_value_is_read_and_kept_byte_exact(tmp_path: Path, value: str) -> None:
    directory = _store(tmp_path, _file(value))
    path = directory / "sessions.json"
    original = path.read_bytes()
    async with SessionStore.open(directory, backend="json", durable=False) as store:
        rows = dict(await store.list())
        assert set(rows) == {"agent:main:a", "agent:main:b"}
        assert rows["agent:main:a"].extra["x"] == RawJsonValue(value)
        assert rows["agent:main:a"].extra["after"] == [1, 2.5]
        # a write to another entry leaves A's bytes alone
        await store.patch("agent:main:b", label="B")
        text = path.read_bytes()
        assert text.startswith(original[: original.index(b'  "agent:main:b"')])
        # a write to A itself keeps the value's text
        await store.patch("agent:main:a", label="A")
    text = path.read_bytes()
    assert f'    "x": {value},\n'.encode() in text
    assert b'"label": "A"' in text and b'"label": "B"' in text
    assert list(directory.glob("sessions.json.bak.*")) == []
    reread = await JsonFileStoreBackend(path).get("agent:main:a")
    assert reread is not None and reread.extra["x"] == RawJsonValue(value)


@pytest.mark.anyio
@pytest.mark.parametrize("neighbour", ["1", "1e400"])
async def test_an_underflow_reads_as_zero_as_in_javascript(tmp_path: Path, neighbour: str) -> None:
    # JSON.parse("1e-400") is 0 and OpenClaw writes it back as 0; msgspec and the exact parser agree
    directory = _store(tmp_path, _file(f"[\n      1e-400,\n      {neighbour}\n    ]", field="tiny"))
    async with SessionStore.open(directory, backend="json", durable=False) as store:
        tiny = (await store.require("agent:main:a")).extra["tiny"]
    assert tiny == ([0.0, 1] if neighbour == "1" else RawJsonValue("[\n      1e-400,\n      1e400\n    ]"))


@pytest.mark.anyio
async def test_a_known_field_holding_an_out_of_range_number_is_kept_in_extra(tmp_path: Path) -> None:
    directory = _store(tmp_path, _file("1e400", field="totalTokens"))
    async with SessionStore.open(directory, backend="json", durable=False) as store:
        entry = await store.require("agent:main:a")
        assert entry.extra["totalTokens"] == RawJsonValue("1e400")
        await store.patch("agent:main:a", label="A")
    assert b'    "totalTokens": 1e400,\n' in (directory / "sessions.json").read_bytes()


@pytest.mark.anyio
async def test_nested_out_of_range_values_keep_their_whole_field(tmp_path: Path) -> None:
    nested = (
        '{\n      "cost": [\n        1e400,\n        3\n      ],\n      "n": 18446744073709551616999\n    }'
    )
    directory = _store(tmp_path, _file(nested, field="usage"))
    async with SessionStore.open(directory, backend="json", durable=False) as store:
        assert (await store.require("agent:main:a")).extra["usage"] == RawJsonValue(nested)
        await store.patch("agent:main:a", label="A")
    assert f'    "usage": {nested},\n'.encode() in (directory / "sessions.json").read_bytes()


@pytest.mark.anyio
@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "[1,]", "01", "1.", "+1", "0x10", "'a'"])
async def test_what_json_parse_refuses_stays_corrupt(tmp_path: Path, value: str) -> None:
    directory = _store(tmp_path, _file(value))
    with pytest.raises(StoreCorruptError):
        await JsonFileStoreBackend(directory / "sessions.json", read_only=True).load_all()


@pytest.mark.anyio
async def test_maintenance_and_encoding_handle_raw_values(tmp_path: Path) -> None:
    stale = (
        '{\n  "agent:main:a": {\n    "sessionId": "sa",\n    "updatedAt": 1,\n    "x": 1e400\n  },\n'
        f'  "agent:main:b": {{\n    "sessionId": "sb",\n    "updatedAt": {NOW},\n    "y": -1e400\n  }}\n}}'
    )
    directory = _store(tmp_path, stale.encode())
    dry = await run_maintenance(directory, now_ms=NOW, dry_run=True)
    assert dry.removed_keys == ("agent:main:a",)
    real = await run_maintenance(directory, now_ms=NOW)
    assert real.removed_keys == ("agent:main:a",)
    text = (directory / "sessions.json").read_bytes()
    assert b'"y": -1e400' in text and b"agent:main:a" not in text
    entry = await JsonFileStoreBackend(directory / "sessions.json").get("agent:main:b")
    assert entry is not None
    assert json.loads(encode_session_entry(entry).replace(b"-1e400", b"null"))["y"] is None
    assert b'"y":-1e400' in encode_session_entry(entry)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(_json_values, st.sampled_from([None, 0, 2]))
def test_the_exact_parser_reads_ordinary_json_as_json_loads(value: object, indent: int | None) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    document = json.dumps({"k": {"f": value}}, indent=indent)
    assert parse_store_json(text.encode("utf-8", "surrogatepass")) == json.loads(text) or text >= "\ud800"
    assert parse_store_json(document.encode()) == json.loads(document)
    # and writes as JSON.stringify(value, null, 2) does
    assert dump_js(value) == json.dumps(value, indent=2, ensure_ascii=False)


def test_dump_js_writes_any_depth_and_raw_text() -> None:
    deep: object = []
    for _ in range(3000):
        deep = [deep]
    out = dump_js({"a": deep, "b": RawJsonValue("1e400")})
    assert out.count("[") == 3001 and out.endswith('"b": 1e400\n}')
    assert anyio  # the module is used by the async tests above


@pytest.mark.anyio
async def test_an_entry_with_raw_values_moves_to_sqlite_and_back(tmp_path: Path) -> None:
    directory = _store(tmp_path, _file('{\n      "cost": 1e400,\n      "ok": 1\n    }', field="usage"))
    async with SessionStore.open(directory, backend="json") as source:
        entry = await source.require("agent:main:a")
    async with SessionStore.open(tmp_path / "db", backend="sqlite") as target:
        await target.backend.put("agent:main:a", entry)
    async with SessionStore.open(tmp_path / "db", backend="sqlite") as target:
        again = await target.require("agent:main:a")
    assert again.extra["usage"] == RawJsonValue('{\n      "cost": 1e400,\n      "ok": 1\n    }')
    assert again == entry


@pytest.mark.timeout(30)
@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_very_deep_nesting_parses_in_linear_time(opener: str) -> None:
    # Each unbuilt bracket used to re-mark the whole stack: 300 000 of them took minutes of CPU (the
    # hostile-input fuzz test's "deep" mutation); now each frame is marked once.
    depth = 300_000
    closer = "]" if opener == "[" else "}"
    inner = opener * depth + ("1" if opener != "[" else "") + closer * depth
    parsed = parse_store_json('{"agent:main:main": {"sessionId": "s", "deep": ' + inner + "}}")
    field = parsed["agent:main:main"]["deep"]
    assert isinstance(field, RawJsonValue)
    assert field.text == inner
    assert parsed["agent:main:main"]["sessionId"] == "s"


@pytest.mark.anyio
@pytest.mark.parametrize("field", ["totalTokens", "sessionStartedAt", "compactionCount"])
@pytest.mark.parametrize("unknown_key", [False, True], ids=["known-keys", "with-unknown-key"])
@pytest.mark.parametrize("text", ['"a\\ud800b"', '"\\udfff"'])
async def test_a_lone_surrogate_in_a_mistyped_field_is_kept_in_extra(
    tmp_path: Path, field: str, unknown_key: bool, text: str
) -> None:
    # msgspec raised UnicodeEncodeError (not a ValidationError) for a lone-surrogate string given to a
    # non-string field, and it escaped `sessions list` / `status` (the hostile-input fuzz test).
    other = '"note": 1, ' if unknown_key else ""
    data = f'{{"agent:main:a": {{"sessionId": "sa", {other}"updatedAt": {NOW}, "{field}": {text}}}}}'
    directory = _store(tmp_path, data.encode())
    async with SessionStore.open(directory, read_only=True) as store:
        entry = await store.require("agent:main:a")
        assert entry.session_id == "sa"
        assert entry.updated_at == NOW
        assert entry.extra[field] == json.loads(text)
    assert (directory / "sessions.json").read_bytes() == data.encode()
