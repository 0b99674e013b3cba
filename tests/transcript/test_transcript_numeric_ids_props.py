"""
Entry-id keys follow JavaScript ``Map`` and truthiness rules (pi's ``byId``): properties, behaviour on the
index, and random files checked against the real pi in one batched oracle call.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests import _pi_oracle
from tests._pi_oracle import PiOracle
from tests.transcript.test_transcript_numeric_ids_oracle import DATA, _exact, _header, _user, ours, run_probe

from sessionkeeper.records._entries import BooleanId, NumberId, entry_key, key_to_json
from sessionkeeper.transcript import TranscriptManager, UserMessage, load_transcript_bytes


pi_oracle = _pi_oracle.pi_oracle  # the session-scoped fixture, made visible to this module

_json_scalars = st.one_of(
    st.text(max_size=4),
    st.booleans(),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.floats(allow_nan=False, allow_infinity=False),
)


def _js_same_key(a: Any, b: Any) -> bool:
    """SameValueZero on the values ``JSON.parse`` would produce."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return float(a) == float(b)


def _js_truthy(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value != ""
    return float(value) != 0


@given(a=_json_scalars, b=_json_scalars)
def test_keys_are_equal_exactly_when_javascript_map_keys_are(a: Any, b: Any) -> None:
    ka, kb = entry_key(a), entry_key(b)
    assert ka is not None and kb is not None
    assert (ka == kb) is _js_same_key(a, b)
    if ka == kb:
        assert hash(ka) == hash(kb)
    assert len({ka: 1, kb: 2}) == (1 if _js_same_key(a, b) else 2)


@given(value=_json_scalars)
def test_key_truth_is_javascript_truthiness_and_round_trips(value: Any) -> None:
    key = entry_key(value)
    assert key is not None
    assert bool(key) is _js_truthy(value)
    back = key_to_json(key)
    assert type(back) is (type(value) if isinstance(value, str | bool) else type(back))
    assert _js_same_key(back, value)
    assert entry_key(back) == key


def test_key_kinds_and_what_has_no_key() -> None:
    assert isinstance(entry_key(1), NumberId) and isinstance(entry_key(True), BooleanId)
    assert entry_key(1) != "1" and entry_key(1) not in {"1"} and "1" not in {entry_key(1)}
    assert entry_key(True) != entry_key(1)  # Python's True == 1 does not leak in
    assert str(entry_key(1.0)) == "1" and str(entry_key(2.5)) == "2.5" and str(entry_key(-0.0)) == "0"
    assert entry_key(9007199254740993) == entry_key(9007199254740992)  # JSON.parse reads doubles
    for value in (None, {"a": 1}, [1], 10**400):
        assert entry_key(value) is None


def _file(*lines: str) -> bytes:
    return ("\n".join([_header("t"), *lines]) + "\n").encode()


def test_numeric_ids_are_not_entries_without_id() -> None:
    index = load_transcript_bytes(_file(_user("1", "null", 1, "one"), _user("2", "1", 2, "two")))
    assert index.diagnostics.entries_without_id == ()
    assert index.leaf_id == entry_key(2)
    assert [m.content for m in index.build_context().messages] == ["one", "two"]  # type: ignore[union-attr]
    assert index.get("2") is None and index.get(entry_key(2)) is not None  # type: ignore[arg-type]


def test_a_falsy_parent_ends_the_walk_and_a_falsy_leaf_has_no_branch() -> None:
    index = load_transcript_bytes(_file(_user("0", "null", 1, "zero"), _user('"z"', "0", 2, "z")))
    assert [m.content for m in index.build_context().messages] == ["z"]  # type: ignore[union-attr]
    assert index.path_positions(entry_key(0)) == []
    assert index.children(entry_key(0)) == [index.entry_at(1)]  # type: ignore[arg-type]


def test_duplicate_numeric_forms_are_one_id_the_later_wins() -> None:
    index = load_transcript_bytes(
        _file(_user("1", "null", 1, "first"), _user("1.0", "null", 2, "second"), _user('"c"', "1e0", 3, "c"))
    )
    assert [m.content for m in index.build_context().messages] == ["second", "c"]  # type: ignore[union-attr]
    assert index.diagnostics.duplicate_ids == ((entry_key(1), (2, 3)),)


# --------------------------------------------------------------------------- random files vs pi

_POOL = ["1", "1.0", "1e0", '"1"', "2", '"2"', "0", "-0", "true", "false", '""', '"a"', "2.5", "2.50"]
_POOL += ["100", "1e2", "9007199254740993", "9007199254740992"]


def _random_files(tmp: Path, count: int) -> list[Path]:
    """``count`` files whose ids are distinct JavaScript keys and whose parents point backwards or nowhere."""
    rng = random.Random(7321)
    files = []
    for number in range(count):
        lines: list[str] = []
        used: list[Any] = []
        literals: list[str] = []
        for n in range(rng.randint(1, 9)):
            fresh = [lit for lit in _POOL if not any(_js_same_key(json.loads(lit), u) for u in used)]
            if not fresh:
                break
            literal = rng.choice(fresh)
            used.append(json.loads(literal))
            choice = rng.random()
            if choice < 0.15 or not literals:
                parent = "null"
            elif choice < 0.3:
                parent = rng.choice(_POOL)  # may name no earlier entry, or one in another form
            else:
                parent = rng.choice(literals)
            lines.append(_user(literal, parent, n + 1, f"m{n}"))
            literals.append(literal)
        path = tmp / f"random-{number}.jsonl"
        path.write_text("\n".join([_header(f"r{number}"), *lines]) + "\n", encoding="utf-8")
        files.append(path)
    return files


def _no_cycle(file: Path) -> bool:
    """
    pi's walk loops forever on a cycle and its ``getTree`` drops one (ours shows it: a documented
    deviation): keep only files whose parent links, falsy ones included, all point backwards.
    """
    index = load_transcript_bytes(file.read_bytes())
    for pos, parent in enumerate(index.parents):
        target = index.by_id.get(parent) if parent is not None else None
        if target is not None and target >= pos:
            return False
    return True


@pytest.mark.oracle
def test_random_files_match_pi(pi_oracle: PiOracle, tmp_path: Path) -> None:
    files = [f for f in _random_files(tmp_path, 150) if _no_cycle(f)]
    expected = run_probe(pi_oracle.node, pi_oracle.root, files)
    for file in files:
        assert _exact(ours(file)) == _exact(expected[file.stem]), file.read_text()


# --------------------------------------------------------------------------- writing after numeric ids


async def _write_after_numeric_ids(tmp: Path) -> Path:
    """A copy of the numeric-chain fixture with a reply, a label and a branch summary appended."""
    path = tmp / "numeric-chain.jsonl"
    path.write_bytes((DATA / "numeric-chain.jsonl").read_bytes())
    manager = await TranscriptManager.open(path)
    await manager.append_message(UserMessage(content="five", timestamp=5))
    await manager.append_label(entry_key(2), "two")  # type: ignore[arg-type]
    await manager.branch_with_summary(entry_key(1), "went back to one")  # type: ignore[arg-type]
    return path


@pytest.mark.anyio
async def test_appends_after_a_numeric_leaf_write_the_number_as_pi_does(tmp_path: Path) -> None:
    path = await _write_after_numeric_ids(tmp_path)
    added = [json.loads(line) for line in path.read_text("utf-8").splitlines()[5:]]
    assert added[0]["parentId"] == 4 and type(added[0]["parentId"]) is int
    assert added[1]["targetId"] == 2 and type(added[1]["targetId"]) is int
    assert (added[2]["parentId"], added[2]["fromId"]) == (1, 1)
    index = load_transcript_bytes(path.read_bytes())
    assert index.labels == {entry_key(2): "two"}
    roles = [m["role"] for m in index.build_context().to_json()["messages"]]
    assert roles == ["user", "branchSummary"]


@pytest.mark.oracle
@pytest.mark.anyio
async def test_appends_after_numeric_ids_read_back_in_pi_as_in_ours(
    pi_oracle: PiOracle, tmp_path: Path
) -> None:
    path = await _write_after_numeric_ids(tmp_path)
    expected = run_probe(pi_oracle.node, pi_oracle.root, [path])[path.stem]
    assert _exact(ours(path)) == _exact(expected)
