"""
``sessionkeeper tree FILE`` (DESIGN "CLI", decision 6).

Prints the entry tree of a transcript with labels, the leaf marked, and linear runs kept flat (only
forks indent).

Exit codes: 0 ok; 1 error; 2 bad input (not a transcript, missing file).
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.tree import Tree

from sessionkeeper.cli._context import _content_text, _load, _message_text, _snippet
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


def _node_text(node: TreeNode, leaf_id: str | None) -> str:
    entry = node.entry
    text = f"[dim]{escape(entry.id)}[/dim] {escape(_entry_label(entry))}"
    if node.label:
        text += f" [bold yellow]⟨{escape(node.label)}⟩[/bold yellow]"
    if entry.id == leaf_id:
        text += " [bold green]◀ leaf[/bold green]"
    return text


def _render(container: Tree, roots: tuple[TreeNode, ...], leaf_id: str | None) -> None:
    """
    Attach the tree under ``container``. A linear run of entries is listed flat; each child of a fork
    starts an indented sub-tree (iterative: a 100k-entry session must not recurse 100k levels).
    """
    stack: list[tuple[Tree, TreeNode, bool]]
    if len(roots) == 1:
        stack = [(container, roots[0], False)]
    else:
        stack = [(container.add(_node_text(r, leaf_id)), r, True) for r in roots]
    while stack:
        box, node, shown = stack.pop()
        if not shown:
            box.add(_node_text(node, leaf_id))
        current = node
        while len(current.children) == 1:
            current = current.children[0]
            box.add(_node_text(current, leaf_id))
        subtrees = [(box.add(_node_text(child, leaf_id)), child, True) for child in current.children]
        stack.extend(reversed(subtrees))


@click.command("tree")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
def tree_command(file: Path) -> None:
    """Print the entry tree of a transcript FILE with labels; the leaf (last entry) is marked."""
    index = _load(file)
    indexed = (index.entry_at(pos) for pos in sorted(index.by_id.values()))
    roots = build_tree(indexed, labels=index.labels, label_timestamps=index.label_timestamps)
    name = f" · {index.session_name}" if index.session_name else ""
    root = Tree(f"[bold]{escape(str(file))}[/bold] · session {escape(index.header.id)}{escape(name)}")
    _render(root, roots, index.leaf_id)
    Console().print(root)
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
