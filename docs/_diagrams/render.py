"""
Draws the concept diagrams of ``docs/concepts.md`` as SVG, from what ``scenes.py`` computes with the library.

Run by the docs build (``docs/conf.py`` calls :func:`render_all` when Sphinx starts) into
``docs/_generated/``, and by ``tests/docs/test_docs_diagrams.py``. Plain SVG written by hand: no graphviz,
no browser, no fonts to install; the files are the same from run to run (entry ids do not appear in them).

``python docs/_diagrams/render.py OUT_DIR`` writes them somewhere else.
"""

from __future__ import annotations

import sys
from html import escape
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))

import scenes  # the folder is put on the path just above


BLUE, GREY, ORANGE, GREEN, YELLOW, RED, INK = (
    "#3b6fd4",
    "#b8bec7",
    "#e08a1e",
    "#3f9b5a",
    "#e3b505",
    "#c8453a",
    "#222",
)
KIND_COLOURS = {
    "user": "#5b8def",
    "assistant": "#7a5bd6",
    "toolResult": "#8a9199",
    "compaction": ORANGE,
    "label": "#2c9aa8",
    "compactionSummary": ORANGE,
}


class Svg:
    """A small SVG writer: shapes in user units (px), text in a sans-serif font."""

    def __init__(self, width: int, height: int, title: str) -> None:
        self.width, self.height = width, height
        self.parts = [
            f"<title>{escape(title)}</title>",
            f'<rect width="{width}" height="{height}" fill="white"/>',
        ]

    def rect(
        self,
        x: float,
        y: float,
        w: float,
        h: float,
        fill: str,
        *,
        stroke: str = "none",
        opacity: float = 1.0,
        rx: float = 3,
        cls: str = "",
    ) -> None:
        extra = f' class="{cls}"' if cls else ""
        self.parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{h:.1f}" rx="{rx}" '
            f'fill="{fill}" stroke="{stroke}" fill-opacity="{opacity}"{extra}/>'
        )

    def circle(self, x: float, y: float, r: float, fill: str, *, stroke: str = "none", cls: str = "") -> None:
        extra = f' class="{cls}"' if cls else ""
        self.parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{fill}" stroke="{stroke}" '
            f'stroke-width="2"{extra}/>'
        )

    def line(
        self,
        x1: float,
        y1: float,
        x2: float,
        y2: float,
        colour: str = INK,
        *,
        width: float = 1.5,
        dash: str = "",
        arrow: bool = False,
    ) -> None:
        dashed = f' stroke-dasharray="{dash}"' if dash else ""
        head = ' marker-end="url(#arrow)"' if arrow else ""
        self.parts.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{colour}" '
            f'stroke-width="{width}"{dashed}{head}/>'
        )

    def polyline(self, points: list[tuple[float, float]], colour: str, *, width: float = 2) -> None:
        coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        self.parts.append(
            f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="{width}"/>'
        )

    def text(
        self,
        x: float,
        y: float,
        value: str,
        *,
        size: int = 12,
        colour: str = INK,
        anchor: str = "start",
        weight: str = "normal",
    ) -> None:
        self.parts.append(
            f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" fill="{colour}" '
            f'text-anchor="{anchor}" font-weight="{weight}">{escape(value)}</text>'
        )

    def render(self) -> str:
        marker = (
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/>'
            "</marker></defs>"
        )
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {self.height}" '
            f'width="{self.width}" height="{self.height}" font-family="DejaVu Sans, Helvetica, Arial, '
            f'sans-serif">{marker}{"".join(self.parts)}</svg>\n'
        )


def _short(text: str, limit: int = 38) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _layout(nodes: list[scenes.Node]) -> tuple[list[scenes.Node], dict[str, int]]:
    """Pre-order rows; the first child stays in its parent's lane, a later child opens a new lane."""
    children: dict[str | None, list[scenes.Node]] = {}
    for node in nodes:
        children.setdefault(node.parent, []).append(node)
    rows: list[scenes.Node] = []
    lanes: dict[str, int] = {}
    next_lane = [0]

    def visit(node: scenes.Node, lane: int) -> None:
        rows.append(node)
        lanes[node.id] = lane
        for position, child in enumerate(children.get(node.id, [])):
            if position == 0:
                visit(child, lane)
            else:
                next_lane[0] += 1
                visit(child, next_lane[0])

    for root in children.get(None, []):
        visit(root, next_lane[0])
    return rows, lanes


def tree_svg(scene: scenes.TreeScene) -> str:
    """The transcript tree: lanes for branches, the path to the leaf in colour, the compaction and label."""
    rows, lanes = _layout(scene.nodes)
    row_h, top, lane_w = 24, 56, 28
    svg = Svg(800, top + row_h * len(rows) + 20, "A transcript is a tree of entries")
    svg.text(
        16,
        24,
        "A transcript is a tree: every entry names its parent; the session goes on from its leaf",
        size=14,
        weight="bold",
    )
    svg.text(
        16,
        42,
        "coloured: the path from the root to the current leaf (what the context is built from); "
        "grey: another branch",
        size=11,
        colour="#555",
    )
    y_of = {node.id: top + row_h * i for i, node in enumerate(rows)}
    x_of = {node.id: 30 + lane_w * lanes[node.id] for node in rows}
    for node in rows:
        if node.parent is not None:
            px, py = x_of[node.parent], y_of[node.parent]
            colour = BLUE if node.on_path else GREY
            if x_of[node.id] == px:
                svg.line(px, py, px, y_of[node.id], colour, width=2)
            else:
                svg.polyline(
                    [(px, py), (x_of[node.id], py + row_h / 2), (x_of[node.id], y_of[node.id])], colour
                )
    for node in rows:
        x, y = x_of[node.id], y_of[node.id]
        fill = KIND_COLOURS.get(node.kind, GREY) if node.on_path else "#e4e7eb"
        svg.circle(x, y, 6, fill, stroke="white", cls=f"entry {'on-path' if node.on_path else 'off-path'}")
        tx = 30 + lane_w * (max(lanes.values()) + 1)
        colour = INK if node.on_path else "#8a9199"
        svg.text(tx, y + 4, node.kind, size=11, colour=colour, weight="bold")
        svg.text(tx + 82, y + 4, _short(node.text, 46), size=11, colour=colour)
        tag_x = tx + 400
        if node.label:
            svg.rect(tag_x, y - 8, 70, 16, KIND_COLOURS["label"], rx=8)
            svg.text(tag_x + 35, y + 4, f"label: {node.label}", size=10, colour="white", anchor="middle")
        if node.id == scene.first_kept:
            svg.text(tag_x, y + 4, "◀ first kept entry of the compaction", size=10, colour=ORANGE)
        if node.id == scene.leaf:
            svg.circle(x, y, 9, "none", stroke=INK, cls="leaf")
            svg.text(tag_x, y + 4, "◀ leaf: the next entry's parent", size=10, weight="bold")
    return svg.render()


def context_svg(scene: scenes.TreeScene) -> str:
    """The path to the leaf (left) and the context of the leaf (right) with what maps to what."""
    by_id = {node.id: node for node in scene.nodes}
    path = []
    cursor: str | None = scene.leaf
    while cursor is not None:
        path.append(by_id[cursor])
        cursor = by_id[cursor].parent
    path.reverse()
    ids = [node.id for node in path]
    assert scene.compaction in ids and scene.first_kept in ids, "the compaction must be on the path"
    first, compaction = ids.index(scene.first_kept), ids.index(str(scene.compaction))
    is_message = {"user", "assistant", "toolResult"}
    kept = [n for n in path[first:compaction] if n.kind in is_message]
    after = [n for n in path[compaction + 1 :] if n.kind in is_message]
    # the library's context must be exactly: the summary, the kept range, what came after
    expected = ["compactionSummary"] + [n.kind for n in kept + after]
    assert scene.context_kinds == expected, f"context {scene.context_kinds} != drawn {expected}"
    row_h, top, right = 22, 86, 560
    svg = Svg(900, top + row_h * len(path) + 30, "The context of a leaf")
    svg.text(
        16,
        24,
        "The context of the leaf: the summary, then the kept entries and everything after them",
        size=14,
        weight="bold",
    )
    svg.text(16, 44, "path to the leaf, as stored", size=12, weight="bold")
    svg.text(right, 44, "what the model is sent", size=12, weight="bold")
    svg.text(16, 60, "(root first; other branches are not part of it)", size=10, colour="#555")
    right_y = top
    targets: dict[str, float] = {}
    svg.rect(right, right_y - 12, 300, 18, ORANGE, opacity=0.9)
    svg.text(
        right + 8, right_y + 1, "compactionSummary: summary of the turns before", size=11, colour="white"
    )
    targets[str(scene.compaction)] = right_y
    for node in kept + after:
        right_y += row_h
        svg.rect(right, right_y - 12, 300, 18, KIND_COLOURS[node.kind], opacity=0.85)
        svg.text(right + 8, right_y + 1, f"{node.kind}: {_short(node.text, 30)}", size=11, colour="white")
        targets[node.id] = right_y
    for i, node in enumerate(path):
        y = top + row_h * i
        summarised = i < first and node.kind in is_message
        fill = GREY if summarised or node.kind not in is_message | {"compaction"} else KIND_COLOURS[node.kind]
        svg.rect(16, y - 12, 300, 18, fill, opacity=0.5 if summarised else 0.9)
        svg.text(
            24,
            y + 1,
            f"{node.kind}: {_short(node.text, 32)}",
            size=11,
            colour="white" if not summarised else INK,
        )
        if node.id in targets:
            svg.line(318, y - 3, right - 4, targets[node.id] - 3, "#555", width=1, arrow=True)
    if first > 0:
        y0, y1 = top - 12, top + row_h * (first - 1) + 6
        svg.line(330, y0, 330, y1, GREY, width=3)
        svg.text(338, y0 + 10, "summarised: replaced by", size=10, colour="#555")
        svg.text(338, y0 + 23, "the compaction's summary", size=10, colour="#555")
    return svg.render()


def cut_svg(scene: scenes.CutScene) -> str:
    """Where the cut point falls: the keep budget walked back from the newest message, past tool results."""
    nodes = scene.nodes
    row_h, top, bar_x, scale = 22, 84, 330, 0.45
    svg = Svg(900, top + row_h * len(nodes) + 56, "Where the cut point falls")
    svg.text(
        16,
        24,
        f"Where the cut point falls (keep_recent_tokens = {scene.keep_recent_tokens})",
        size=14,
        weight="bold",
    )
    svg.text(
        16,
        42,
        "Tokens are added up from the newest message back until the budget is reached; the cut "
        "moves to the next message that may start",
        size=11,
        colour="#555",
    )
    svg.text(
        16,
        56,
        "the kept part: a user or assistant message, never a tool result (it must stay with its call).",
        size=11,
        colour="#555",
    )
    svg.text(bar_x, top - 18, "estimated tokens (chars / 4)", size=10, colour="#555")
    svg.text(860, top - 18, "sum from the end", size=10, colour="#555", anchor="end")
    running, reached = 0, None
    sums = [0] * len(nodes)
    for i in range(len(nodes) - 1, -1, -1):
        running += nodes[i].tokens
        sums[i] = running
        if reached is None and running >= scene.keep_recent_tokens:
            reached = i
    for i, node in enumerate(nodes):
        y = top + row_h * i
        if i >= scene.first_kept_index:
            band, state = GREEN, "kept"
        elif scene.is_split_turn and i >= scene.turn_start_index:
            band, state = YELLOW, "split turn: its start is summarised separately"
        else:
            band, state = GREY, "summarised"
        svg.rect(
            10, y - 13, 870, 20, band, opacity=0.18, rx=0, cls=f"row {state.split(':')[0].replace(' ', '-')}"
        )
        svg.text(18, y + 2, f"{node.kind}", size=11, weight="bold")
        svg.text(100, y + 2, _short(node.text, 30), size=11)
        svg.rect(bar_x, y - 8, node.tokens * scale, 12, KIND_COLOURS.get(node.kind, GREY))
        svg.text(bar_x + node.tokens * scale + 6, y + 2, str(node.tokens), size=10)
        svg.text(860, y + 2, str(sums[i]), size=10, anchor="end")
    if reached is not None:
        y = top + row_h * reached
        svg.text(610, y + 2, f"◀ budget reached ({nodes[reached].kind})", size=11, colour=RED, weight="bold")
    cut_y = top + row_h * scene.first_kept_index - 13
    svg.line(10, cut_y, 880, cut_y, ORANGE, width=2.5)
    svg.text(610, cut_y + 15, "▲ cut point: first kept entry", size=11, colour=ORANGE, weight="bold")
    legend_y = top + row_h * len(nodes) + 14
    for x, colour, label in [
        (16, GREY, "summarised"),
        (170, YELLOW, "start of a split turn (summarised apart)"),
        (470, GREEN, "kept verbatim"),
    ]:
        svg.rect(x, legend_y, 14, 14, colour, opacity=0.5)
        svg.text(x + 20, legend_y + 11, label, size=11)
    return svg.render()


def prune_svg(scene: scenes.PruneScene) -> str:
    """One request before and after cache-TTL pruning, message by message."""
    row_h, top, bar_x, scale = 24, 96, 200, 0.05
    svg = Svg(900, top + row_h * len(scene.kinds) + 60, "What pruning sends")
    before, after = sum(scene.chars_before), sum(scene.chars_after)
    svg.text(
        16,
        24,
        "What pruning sends: old tool results trimmed for this request only (the transcript keeps them)",
        size=14,
        weight="bold",
    )
    svg.text(
        16,
        44,
        f"context {before} chars = {before / scene.window_chars:.2f} of the window "
        f"({scene.window_chars} chars); soft trim from {scene.soft_ratio}, hard clear while at least "
        f"{scene.hard_ratio}; after: {after} chars = {after / scene.window_chars:.2f}",
        size=11,
        colour="#555",
    )
    svg.text(
        16,
        60,
        "grey: before; colour: what is sent. The last 3 assistant replies and what follows them "
        "are never pruned.",
        size=11,
        colour="#555",
    )
    protected_y = top + row_h * scene.protected_from - 14
    svg.rect(
        10, protected_y, 880, row_h * (len(scene.kinds) - scene.protected_from) + 4, GREEN, opacity=0.1, rx=0
    )
    svg.text(880, protected_y + 12, "protected", size=10, colour=GREEN, anchor="end")
    for i, kind in enumerate(scene.kinds):
        y = top + row_h * i
        svg.text(18, y + 2, kind, size=11, weight="bold")
        svg.rect(bar_x, y - 10, scene.chars_before[i] * scale, 8, GREY)
        if i in scene.hard_cleared:
            colour, note = RED, "hard-cleared: placeholder"
        elif i in scene.soft_trimmed:
            colour, note = YELLOW, "soft-trimmed: head + tail"
        else:
            colour, note = KIND_COLOURS.get(kind, GREY), ""
        svg.rect(
            bar_x, y - 1, max(scene.chars_after[i] * scale, 1), 8, colour, cls="pruned" if note else "kept"
        )
        label = (
            f"{scene.chars_before[i]} → {scene.chars_after[i]} chars"
            if note
            else f"{scene.chars_after[i]} chars"
        )
        svg.text(bar_x + scene.chars_before[i] * scale + 8, y + 3, f"{label}  {note}", size=10)
    return svg.render()


def turns_svg(scene: scenes.TurnScene) -> str:
    """Context size per model call, the flush and compaction thresholds, and the events of each turn."""
    left, top, width, height = 70, 60, 760, 260
    svg = Svg(
        880, top + height + 60 + 18 * len(scene.hook_events), "Memory flush and compaction around turns"
    )
    svg.text(
        16,
        24,
        f"Around the turns: memory flush first, compaction later ({scene.window}-token window)",
        size=14,
        weight="bold",
    )
    svg.text(
        16,
        42,
        "context tokens sent per turn, from SessionRuntime with a scripted model",
        size=11,
        colour="#555",
    )
    top_tokens = scene.compaction_threshold * 1.15
    n = len(scene.calls)

    def xy(i: int, tokens: float) -> tuple[float, float]:
        return left + width * i / max(n - 1, 1), top + height - height * tokens / top_tokens

    for tokens, colour, label in [
        (scene.flush_threshold, GREEN, f"memory flush at {scene.flush_threshold}"),
        (scene.compaction_threshold, RED, f"compaction above {scene.compaction_threshold}"),
    ]:
        _, y = xy(0, tokens)
        svg.line(left, y, left + width, y, colour, dash="6 4")
        svg.text(left + 8, y - 5, label, size=11, colour=colour)
    svg.line(left, top + height, left + width, top + height, "#888")
    svg.line(left, top, left, top + height, "#888")
    svg.polyline([xy(i, t) for i, t in enumerate(scene.calls)], BLUE, width=2.5)
    for i, tokens in enumerate(scene.calls):
        x, y = xy(i, tokens)
        svg.circle(x, y, 3.5, BLUE)
        svg.text(x, top + height + 16, str(i + 1), size=10, anchor="middle", colour="#555")
    svg.text(left + width / 2, top + height + 32, "turn", size=11, anchor="middle", colour="#555")
    for i, what in scene.events:
        x, y = xy(i, scene.calls[i])
        colour = GREEN if "flush" in what else ORANGE
        svg.circle(x, y, 8, "none", stroke=colour, cls="event")
        right_side = x > left + 0.7 * width
        svg.text(
            x - 12 if right_side else x + 10,
            y - 12 if "flush" in what else y + 44,
            what,
            size=10,
            colour=colour,
            weight="bold",
            anchor="end" if right_side else "start",
        )
    y = top + height + 54
    svg.text(16, y, "hook events, in the order emitted:", size=11, weight="bold")
    for turn, names in scene.hook_events:
        y += 18
        svg.text(24, y, f"turn {turn + 1}: " + " → ".join(names), size=11)
    return svg.render()


def render_all(out_dir: Path) -> list[Path]:
    """Compute the scenes with the library and write every diagram into ``out_dir``; returns the files."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tree = scenes.tree_scene()
    drawings = {
        "tree.svg": tree_svg(tree),
        "context.svg": context_svg(tree),
        "cut-point.svg": cut_svg(scenes.cut_scene()),
        "pruning.svg": prune_svg(scenes.prune_scene()),
        "turns.svg": turns_svg(scenes.turn_scene()),
    }
    written = []
    for name, text in drawings.items():
        path = out_dir / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for file in render_all(
        Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent.parent / "_generated")
    ):
        print(file)
