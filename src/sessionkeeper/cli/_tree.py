"""
``sessionkeeper tree FILE`` (DESIGN "CLI", decision 6).

Prints the entry tree of a transcript, one entry a line, laid out like pi 0.73.1's ``/tree`` selector
(``modes/interactive/components/tree-selector.js``, ``flattenTree``): an only child keeps its parent's
indentation, a branch point indents its children (and the first generation after it once more), the
branch holding the leaf comes first and its entries carry ``•``. Each line fits the width: a deep prefix
keeps its right end behind ``…``, the description is cut with ``…``, the entry id is never cut, so every
entry appears exactly once at any depth and width.

Exit codes: 0 ok; 1 error; 2 bad input (not a transcript, missing file).
"""

from __future__ import annotations

from pathlib import Path

import attrs
import click
from rich.cells import cell_len, set_cell_size
from rich.console import Console
from rich.text import Text

from sessionkeeper.cli._context import _content_text, _load, _message_text, _printable, _snippet
from sessionkeeper.cli._file_args import TranscriptPath
from sessionkeeper.transcript import (
    TranscriptEntry,
    TranscriptIndex,
    TreeNode,
    UnknownEntry,
    build_tree,
    entry_to_builtins,
)


__all__ = ("COMMANDS", "tree_command")


def _entry_label(entry: TranscriptEntry) -> str:
    raw = entry_to_builtins(entry) if not isinstance(entry, UnknownEntry) else entry.raw
    kind = str(raw.get("type", "?"))
    if kind == "message" and isinstance(raw.get("message"), dict):
        message = raw["message"]
        return f"{message.get('role', '?')}: {_snippet(_message_text(message))}"
    if kind == "compaction":
        return (
            f"compaction (keep from {raw.get('firstKeptEntryId')}): {_snippet(str(raw.get('summary', '')))}"
        )
    if kind == "branch_summary":
        return f"branch summary: {_snippet(str(raw.get('summary', '')))}"
    if kind == "custom_message":
        return f"custom message [{raw.get('customType')}]: {_snippet(_content_text(raw.get('content')))}"
    if kind == "custom":
        return f"custom [{raw.get('customType')}]"
    if kind == "label":
        return f"label {raw.get('label', '(cleared)')!s} → {raw.get('targetId')}"
    if kind == "session_info":
        return f"name: {raw.get('name', '')}"
    if kind == "model_change":
        return f"model → {raw.get('provider')}/{raw.get('modelId')}"
    if kind == "thinking_level_change":
        return f"thinking → {raw.get('thinkingLevel')}"
    return kind or "(no type)"


class _Gutter:
    """
    One gutter of a row's prefix (pi's ``{position, show}``), linked to the gutters of the levels above:
    rows share their ancestors' chains, so a deep tree costs no per-row copies.
    """

    __slots__ = ("level", "outer", "show")

    def __init__(self, level: int, show: bool, outer: _Gutter | None) -> None:
        self.level = level
        self.show = show
        self.outer = outer


@attrs.frozen(kw_only=True)
class _Row:
    """One line of the flattened tree: pi's ``FlatNode`` (``tree-selector.js`` ``flattenTree``)."""

    node: TreeNode
    indent: int
    show_connector: bool
    is_last: bool
    gutters: _Gutter | None  # innermost first; levels never increase along ``outer``
    is_virtual_root_child: bool


_Pending = tuple[TreeNode, int, bool, bool, bool, _Gutter | None, bool]


def _flatten(roots: tuple[TreeNode, ...], leaf_id: str | None) -> list[_Row]:
    """
    Flatten the tree into display rows the way pi 0.73.1's ``/tree`` selector does.

    Pre-order, iterative (a 100k-entry chain must not recurse). The child subtree holding the leaf is
    listed first. Indentation only grows at a branch point: the children of a node with several
    children get ``indent + 1``, and the first generation after a branch one more; an only child stays
    at its parent's indentation, so a long linear chain never drifts right. Several roots are treated as
    the children of a virtual root (shown one level less indented, without connectors).
    """
    holds_leaf: set[int] = set()
    order: list[TreeNode] = []
    pending = list(roots)
    while pending:
        node = pending.pop()
        order.append(node)
        pending.extend(node.children)
    for node in reversed(order):  # children before parents
        if (leaf_id is not None and node.entry.id == leaf_id) or any(
            id(child) in holds_leaf for child in node.children
        ):
            holds_leaf.add(id(node))
    del order

    def leaf_first(nodes: tuple[TreeNode, ...]) -> tuple[TreeNode, ...]:
        if len(nodes) < 2:
            return nodes
        first = tuple(n for n in nodes if id(n) in holds_leaf)
        return first + tuple(n for n in nodes if id(n) not in holds_leaf) if first else nodes

    several_roots = len(roots) > 1
    ordered_roots = leaf_first(roots)
    last = len(ordered_roots) - 1
    stack: list[_Pending] = [
        (root, int(several_roots), several_roots, several_roots, i == last, None, several_roots)
        for i, root in reversed(list(enumerate(ordered_roots)))
    ]
    rows: list[_Row] = []
    while stack:
        node, indent, just_branched, show_connector, is_last, gutters, virtual_child = stack.pop()
        rows.append(
            _Row(
                node=node,
                indent=indent,
                show_connector=show_connector,
                is_last=is_last,
                gutters=gutters,
                is_virtual_root_child=virtual_child,
            )
        )
        forks = len(node.children) > 1
        child_indent = indent + 1 if forks or (just_branched and indent > 0) else indent
        child_gutters = gutters
        if show_connector and not virtual_child:
            shown = max(0, indent - 1) if several_roots else indent
            child_gutters = _Gutter(max(0, shown - 1), not is_last, gutters)
        children = leaf_first(node.children)
        for i in range(len(children) - 1, -1, -1):
            is_last_child = i == len(children) - 1
            stack.append((children[i], child_indent, forks, forks, is_last_child, child_gutters, False))
    return rows


def _prefix(row: _Row, *, several_roots: bool, room: int) -> str:
    """
    The gutter and connector prefix of a row, three cells per level, drawn as pi draws it, in at most
    ``room`` cells: a deeper prefix keeps its right end (the connector) and starts with ``…``, so deep
    forks never push the entry id off the line. Costs the levels shown, not the depth.
    """
    levels = max(0, row.indent - 1) if several_roots else row.indent
    if room <= 0:
        return ""
    first = 0 if levels * 3 <= room else max(0, levels - room // 3 - 1)
    connector_level = levels - 1 if row.show_connector and not row.is_virtual_root_child else -1
    gutters: dict[int, bool] = {}
    gutter = row.gutters
    while gutter is not None and gutter.level >= first:
        gutters[gutter.level] = gutter.show  # walking inwards-out, the outermost (pi's first) wins
        gutter = gutter.outer
    cells: list[str] = []
    for level in range(first, levels):
        if level in gutters:
            cells.append("│  " if gutters[level] else "   ")
        elif level == connector_level:
            cells.append("└─ " if row.is_last else "├─ ")
        else:
            cells.append("   ")
    prefix = "".join(cells)
    if first == 0 and len(prefix) <= room:
        return prefix
    return "…" + prefix[len(prefix) - room + 1 :]


def _cut(text: str, room: int) -> str:
    """``text`` in at most ``room`` cells, ending in ``…`` when cut (ASCII fast path)."""
    if text.isascii():
        return text if len(text) <= room else text[: room - 1] + "…" if room > 0 else ""
    if cell_len(text) <= room:
        return text
    return set_cell_size(text, room - 1) + "…" if room > 0 else ""


_Part = tuple[str, str]  # (text, rich style)


def _row_parts(
    row: _Row, *, several_roots: bool, leaf_id: str | None, on_path: bool, width: int
) -> list[_Part]:
    """
    One output line of at most ``width`` cells (when the entry id fits), as styled parts: prefix,
    active-path marker ``•``, entry id, leaf mark, label, description. The prefix shrinks first (to at
    most half the width), then what follows the id is cut with ``…``; the entry id is never cut (a width
    narrower than the id makes the line overflow instead).
    """
    entry = row.node.entry
    marker = "• " if on_path else ""
    shown_id = _printable(entry.id)
    essential = len(marker) + cell_len(shown_id)
    prefix = _prefix(row, several_roots=several_roots, room=min(width // 2, width - essential - 1))
    parts: list[_Part] = [(prefix, "dim"), (marker, "cyan"), (shown_id, "dim")]
    room = width - len(prefix) - essential
    tail: list[_Part] = []
    if entry.id == leaf_id:
        tail.append((" ◀ leaf", "bold green"))
    if row.node.label:
        tail.append((f" ⟨{_printable(row.node.label)}⟩", "bold yellow"))
    tail.append((" " + _printable(_entry_label(entry)), ""))
    for piece, style in tail:
        if room <= 1:  # no room for more than "…": stop after the id
            break
        fitted = _cut(piece, room)
        parts.append((fitted, style))
        room -= cell_len(fitted)
    return parts


_EPILOG = """\b
Examples:
  sessionkeeper tree sessions/2f1c7b9e.jsonl
  sessionkeeper tree sessions/2f1c7b9e.jsonl --width 120
"""


@click.command("tree", epilog=_EPILOG)
@click.argument("file", type=TranscriptPath())
@click.option(
    "--width",
    type=click.IntRange(min=1),
    help="Line width in cells (default: the terminal's, else $COLUMNS, else 80).",
)
def tree_command(file: Path, width: int | None) -> None:
    """
    Print the entry tree of a transcript FILE, one entry a line: id, label, the leaf marked.

    Laid out like pi's /tree view: a linear run keeps its indentation and only branch points indent,
    so every entry is shown at any depth; each line is cut to the width after the entry id.
    """
    index = _load(file)
    indexed = (index.entry_at(pos) for pos in sorted(index.by_id.values()))
    roots = build_tree(indexed, labels=index.labels, label_timestamps=index.label_timestamps)
    console = Console(width=width) if width is not None else Console()
    name = f" · {index.session_name}" if index.session_name else ""
    header: list[_Part] = [
        (_printable(str(file)), "bold"),
        (_printable(f" · session {index.header.id}{name}"), ""),
    ]
    leaf_id = index.leaf_id
    on_path = {index.entry_at(pos).id for pos in index.path_positions(leaf_id)}
    several_roots = len(roots) > 1
    cells = console.width  # a property that asks the terminal: read it once
    rows = [
        _row_parts(
            row,
            several_roots=several_roots,
            leaf_id=leaf_id,
            on_path=row.node.entry.id in on_path,
            width=cells,
        )
        for row in _flatten(roots, leaf_id)
    ]
    if console.is_terminal and console.color_system is not None:
        lines = [Text.assemble(*parts) for parts in (header, *rows)]
        for line in lines:
            line.rstrip()
        console.print(Text("\n").join(lines), soft_wrap=True)
    else:  # piped or colourless: plain text, written at once (rich's layout would dominate the time)
        click.echo("\n".join("".join(text for text, _ in parts).rstrip() for parts in (header, *rows)))
    if index.diagnostics.clean is False:
        click.echo(f"note: {_diagnostic_summary(index)}", err=True)


def _diagnostic_summary(index: TranscriptIndex) -> str:
    diag = index.diagnostics.to_json()
    found = [
        key
        for key, value in diag.items()
        if value and key not in ("path", "lineCount", "headerLine", "version", "clean")
    ]
    return "transcript has findings: " + ", ".join(found) + " (see `sessionkeeper doctor`)"


COMMANDS: tuple[click.Command, ...] = (tree_command,)
