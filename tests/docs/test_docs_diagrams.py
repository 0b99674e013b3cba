"""
The concept diagrams (docs/concepts.md) show what the library does (issue #17: diagrams that stay true).

``docs/_diagrams/scenes.py`` runs the library; ``render.py`` draws the result. These tests check each
drawing against the scene it came from and the scene against the library's own answer, so neither can drift.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest


DOCS = Path(__file__).resolve().parents[2] / "docs"
SVG = "{http://www.w3.org/2000/svg}"


def _load(name: str) -> ModuleType:
    path = DOCS / "_diagrams" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # render.py imports scenes by this name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def diagrams() -> tuple[ModuleType, ModuleType]:
    scenes = _load("scenes")
    return scenes, _load("render")


def _classes(svg: str, cls: str) -> list[ET.Element]:
    root = ET.fromstring(svg)
    return [el for el in root.iter() if cls in (el.get("class") or "").split()]


def test_every_diagram_is_rendered_and_used(diagrams: tuple[ModuleType, ModuleType], tmp_path: Path) -> None:
    _, render = diagrams
    files = render.render_all(tmp_path)
    page = (DOCS / "concepts.md").read_text(encoding="utf-8")
    for file in files:
        root = ET.parse(file).getroot()
        assert root.tag == f"{SVG}svg" and root.find(f"{SVG}title") is not None
        assert f"_generated/{file.name}" in page, f"concepts.md does not show {file.name}"
    assert render.render_all(tmp_path) == files
    again = tmp_path / "again"
    render.render_all(again)
    for file in files:  # no entry id, time or random value leaks into a drawing
        assert (again / file.name).read_text(encoding="utf-8") == file.read_text(encoding="utf-8")


def test_tree_draws_every_entry_and_the_path_to_the_leaf(diagrams: tuple[ModuleType, ModuleType]) -> None:
    scenes, render = diagrams
    scene = scenes.tree_scene()
    svg = render.tree_svg(scene)
    on_path = [n for n in scene.nodes if n.on_path]
    assert len(_classes(svg, "entry")) == len(scene.nodes)
    assert len(_classes(svg, "on-path")) == len(on_path)
    assert len(_classes(svg, "off-path")) >= 4  # the abandoned branch: a user turn and its replies
    assert len(_classes(svg, "leaf")) == 1
    by_id = {n.id: n for n in scene.nodes}
    walk, cursor = [], scene.leaf
    while cursor is not None:  # the coloured entries are exactly the leaf's ancestors
        walk.append(cursor)
        cursor = by_id[cursor].parent
    assert {n.id for n in on_path} == set(walk)


def test_context_drawing_matches_the_library(diagrams: tuple[ModuleType, ModuleType]) -> None:
    scenes, render = diagrams
    scene = scenes.tree_scene()
    assert scene.context_kinds[0] == "compactionSummary"
    svg = render.context_svg(scene)  # asserts the drawn mapping equals the library's context
    texts = [el.text or "" for el in ET.fromstring(svg).iter(f"{SVG}text")]
    assert sum(
        t.startswith(("user:", "assistant:", "toolResult:", "compactionSummary:")) for t in texts
    ) >= len(scene.context_kinds)
    broken = scenes.TreeScene(**{**scene.__dict__, "context_kinds": scene.context_kinds[1:]})
    with pytest.raises(AssertionError, match="context"):
        render.context_svg(broken)


def test_cut_point_is_the_planners(diagrams: tuple[ModuleType, ModuleType]) -> None:
    scenes, render = diagrams
    scene = scenes.cut_scene()
    # the scene shows the point of the picture: the budget runs out on a tool result, the turn is split
    assert scene.is_split_turn and scene.nodes[scene.first_kept_index].kind == "assistant"
    assert scene.nodes[scene.first_kept_index - 1].kind == "toolResult"
    svg = render.cut_svg(scene)
    assert len(_classes(svg, "kept")) == len(scene.nodes) - scene.first_kept_index
    assert len(_classes(svg, "split-turn")) == scene.first_kept_index - scene.turn_start_index
    assert "budget reached (toolResult)" in svg


def test_pruning_drawing_marks_what_the_pruner_changed(diagrams: tuple[ModuleType, ModuleType]) -> None:
    scenes, render = diagrams
    scene = scenes.prune_scene()
    changed = {
        i for i, (a, b) in enumerate(zip(scene.chars_before, scene.chars_after, strict=True)) if a != b
    }
    assert changed == set(scene.soft_trimmed) | set(scene.hard_cleared) and scene.hard_cleared
    assert all(i < scene.protected_from for i in changed)
    assert len(_classes(render.prune_svg(scene), "pruned")) == len(changed)


def test_turns_drawing_shows_flush_before_compaction(diagrams: tuple[ModuleType, ModuleType]) -> None:
    scenes, render = diagrams
    scene = scenes.turn_scene()
    kinds = [what for _, what in scene.events]
    assert kinds.index("memory flush") < next(i for i, k in enumerate(kinds) if k.startswith("compaction"))
    flush_turn = next(i for i, what in scene.events if what == "memory flush")
    assert scene.calls[flush_turn] >= scene.flush_threshold > scene.calls[flush_turn - 1]
    svg = render.turns_svg(scene)
    assert len(_classes(svg, "event")) == len(scene.events)
    assert re.search(r"compaction_start → session_before_compact → session_compact → compaction_end", svg)
