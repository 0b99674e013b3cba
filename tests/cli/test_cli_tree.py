"""
``sessionkeeper tree FILE``: pi's /tree layout (only branch points indent), every entry shown once at any
depth and width, lines fitted to the width with the entry id never cut.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from tests._helpers import run_cli


_HEADER = {
    "type": "session",
    "version": 3,
    "id": "sess",
    "timestamp": "2026-01-01T00:00:00.000Z",
    "cwd": "/",
}


def _eid(n: int) -> str:
    """Fixed-width ids that are never a substring of one another (nor of the other output)."""
    return f"q{n:04d}z"


def _write(path: Path, parents: list[int | None], *, labels: dict[int, str] | None = None) -> Path:
    """A v3 transcript; entry ``n`` is a user message whose parent is entry ``parents[n]``."""
    lines = [json.dumps(_HEADER)]
    for n, parent in enumerate(parents):
        entry = {
            "type": "message",
            "id": _eid(n),
            "parentId": None if parent is None else _eid(parent),
            "timestamp": f"2026-01-01T{n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}.000Z",
            "message": {"role": "user", "content": f"turn {n} " + "words " * 20, "timestamp": n},
        }
        lines.append(json.dumps(entry))
    for target, label in (labels or {}).items():
        lines.append(
            json.dumps(
                {
                    "type": "label",
                    "id": f"lab{target}",
                    "parentId": _eid(len(parents) - 1),
                    "timestamp": "2026-01-02T00:00:00.000Z",
                    "targetId": _eid(target),
                    "label": label,
                }
            )
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _chain(count: int) -> list[int | None]:
    return [None, *range(count - 1)]


def _comb(spine: int, tooth: int) -> list[int | None]:
    """A spine of ``spine`` entries, each with a side branch of ``tooth`` entries (a fork at every step)."""
    parents: list[int | None] = _chain(spine)
    for node in range(spine):
        prev = node
        for _ in range(tooth):
            parents.append(prev)
            prev = len(parents) - 1
    return parents


def _nested(depth: int) -> list[int | None]:
    """Forks inside forks: every branch forks again ``depth`` times (the deepest indentation possible)."""
    parents: list[int | None] = [None]
    tip = 0
    for _ in range(depth):
        parents.append(tip)  # short side branch
        parents.append(len(parents) - 1)
        parents.append(tip)  # the branch that forks again
        tip = len(parents) - 1
    return parents


def _tree(path: Path, width: int, *extra: str) -> list[str]:
    run = run_cli("tree", str(path), *extra, env={"COLUMNS": str(width)})
    assert run.exit_code == 0, run.output
    return run.stdout.splitlines()


def _assert_every_entry_once(lines: list[str], count: int, width: int) -> None:
    body = "\n".join(lines)
    for n in range(count):
        assert body.count(_eid(n)) == 1, (_eid(n), width)
    assert len(lines) == count + 1  # the header, then one line per entry
    assert all(cell_len(line) <= width for line in lines[1:]), width


@pytest.mark.parametrize("width", [80, 40])
def test_tree_long_chain_shows_every_entry_flat(tmp_path: Path, width: int) -> None:
    path = _write(tmp_path / "chain.jsonl", _chain(500))
    lines = _tree(path, width)
    _assert_every_entry_once(lines, 500, width)
    # a linear chain never drifts right: every entry starts in the same column, in chain order
    starts = {line.index("q") for line in lines[1:]}
    assert len(starts) == 1
    assert [line.split()[1] for line in lines[1:]] == [_eid(n) for n in range(500)]


@pytest.mark.parametrize("width", [80, 40])
@pytest.mark.parametrize("shape", ["comb", "nested"])
def test_tree_branchy_shows_every_entry_once(tmp_path: Path, width: int, shape: str) -> None:
    parents = _comb(60, 3) if shape == "comb" else _nested(40)
    path = _write(tmp_path / f"{shape}.jsonl", parents)
    lines = _tree(path, width)
    _assert_every_entry_once(lines, len(parents), width)


def test_tree_layout_matches_pi_tree_selector(tmp_path: Path) -> None:
    # 0 - 1 - 2 (fork) - 3 - 4      pi: a fork indents its children; the first generation after a
    #              \- 5 - 6          fork one more; an only child keeps its parent's indentation;
    #                                the branch holding the leaf (6, the last entry) is listed first.
    path = _write(tmp_path / "t.jsonl", [None, 0, 1, 2, 3, 2, 5])
    lines = _tree(path, 200)
    rows = [line.split("q", 1) for line in lines[1:]]
    assert ["q" + rest[:5] for _, rest in rows] == [_eid(n) for n in (0, 1, 2, 5, 6, 3, 4)]
    assert [prefix.replace("• ", "") for prefix, _ in rows] == ["", "", "", "├─ ", "│     ", "└─ ", "      "]


def test_tree_lists_the_leaf_branch_first_and_marks_its_path(tmp_path: Path) -> None:
    # the leaf (last entry, 4) sits on the later-timestamped branch: pi lists that branch first
    path = _write(tmp_path / "t.jsonl", [None, 0, 1, 0, 3])
    lines = _tree(path, 120)
    ids = [line.split("q", 1)[1][:5] for line in lines[1:]]
    assert ["q" + i for i in ids] == [_eid(n) for n in (0, 3, 4, 1, 2)]
    marked = {_eid(n) for n in range(5) if any(f"• {_eid(n)}" in line for line in lines)}
    assert marked == {_eid(0), _eid(3), _eid(4)}
    assert "◀ leaf" in next(line for line in lines if _eid(4) in line)


def test_tree_several_roots_like_a_virtual_root(tmp_path: Path) -> None:
    # two roots (pi: children of a virtual root, shown at column 0 without connectors); root 1 forks
    # into 2 and 3; the leaf (3) is listed first, its root too
    path = _write(tmp_path / "t.jsonl", [None, None, 1, 1])
    lines = _tree(path, 120)
    rows = [line.split("q", 1) for line in lines[1:]]
    assert ["q" + rest[:5] for _, rest in rows] == [_eid(n) for n in (1, 3, 2, 0)]
    assert [prefix.replace("• ", "") for prefix, _ in rows] == ["", "├─ ", "└─ ", ""]


def test_tree_labels_are_shown_after_the_id(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.jsonl", _chain(3), labels={1: "checkpoint"})
    lines = _tree(path, 40)
    line = next(line for line in lines if _eid(1) in line and "label" not in line)
    assert "⟨checkpoint⟩" in line


def test_tree_width_option_and_tiny_width_keep_ids_whole(tmp_path: Path) -> None:
    parents = _nested(10)
    path = _write(tmp_path / "t.jsonl", parents)
    lines = _tree(path, 200, "--width", "30")
    _assert_every_entry_once(lines, len(parents), 30)
    tiny = _tree(path, 200, "--width", "4")
    body = "\n".join(tiny)
    assert all(body.count(_eid(n)) == 1 for n in range(len(parents)))


def test_tree_width_zero_is_bad_input(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.jsonl", _chain(2))
    run = run_cli("tree", str(path), "--width", "0")
    assert run.exit_code == 2


@settings(max_examples=40, deadline=None)
@given(
    picks=st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=60),
    width=st.integers(min_value=24, max_value=100),
)
def test_tree_any_shape_any_width_every_entry_once(
    tmp_path_factory: pytest.TempPathFactory, picks: list[int], width: int
) -> None:
    parents: list[int | None] = [None]
    for n, pick in enumerate(picks, start=1):
        parents.append(None if pick % 17 == 0 else pick % n)
    path = _write(tmp_path_factory.mktemp("t") / "t.jsonl", parents)
    lines = _tree(path, width)
    _assert_every_entry_once(lines, len(parents), width)


def test_tree_styled_on_a_terminal_is_the_plain_text_with_colours(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.jsonl", _nested(6), labels={2: "mark"})
    args = ["tree", str(path), "--width", "50"]
    plain = run_cli(*args)
    styled = run_cli(*args, env={"FORCE_COLOR": "1"})
    assert styled.exit_code == plain.exit_code == 0
    assert "\x1b[" in styled.stdout and "\x1b[" not in plain.stdout
    assert re.sub(r"\x1b\[[0-9;]*m", "", styled.stdout) == plain.stdout
