"""
``sessionkeeper context FILE`` and ``sessionkeeper tree FILE`` (DESIGN "CLI", decision 6).

``context --json`` prints pi's ``SessionContext`` exactly (``{"messages", "thinkingLevel", "model"}``,
one line); ``--llm`` adds ``llmMessages`` (``convertToLlm``) like pi-oracle's ``context.mjs``. Without
``--json`` a readable view is printed with rich. ``tree`` prints the entry tree with labels, the leaf
marked, and linear runs kept flat (only forks indent).

Exit codes: 0 ok; 1 error; 2 bad input (not a transcript, missing file, unknown ``--leaf`` id).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import msgspec
from rich.console import Console
from rich.markup import escape
from rich.tree import Tree

from sessionkeeper.cli._main import EXIT_BAD_INPUT, fail
from sessionkeeper.transcript import (
    AgentMessage,
    TranscriptEntry,
    TranscriptIndex,
    TreeNode,
    UnknownEntry,
    build_tree,
    convert_to_llm,
    entry_to_builtins,
    estimate_context_tokens,
    estimate_tokens,
    load_transcript,
    message_to_builtins,
)


__all__ = ("COMMANDS", "context_command", "tree_command")

_SNIPPET = 72
_ROLE_STYLE = {
    "user": "bold green",
    "assistant": "bold cyan",
    "toolResult": "yellow",
    "bashExecution": "magenta",
    "custom": "blue",
    "branchSummary": "bold magenta",
    "compactionSummary": "bold red",
}


def _snippet(text: str, limit: int = _SNIPPET) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "thinking":
            parts.append(f"(thinking) {block.get('thinking', '')}")
        elif kind == "toolCall":
            parts.append(f"→ {block.get('name')}({msgspec.json.encode(block.get('arguments')).decode()})")
        elif kind == "image":
            parts.append("[image]")
    return " ".join(parts)


def _message_text(raw: dict[str, Any]) -> str:
    role = raw.get("role")
    if role in ("branchSummary", "compactionSummary"):
        return str(raw.get("summary", ""))
    if role == "bashExecution":
        return f"$ {raw.get('command', '')}  {raw.get('output', '')}"
    text = _content_text(raw.get("content"))
    if role == "assistant" and raw.get("stopReason") in ("error", "aborted"):
        text = f"[{raw.get('stopReason')}] {raw.get('errorMessage', '')} {text}"
    return text


def _load(file: Path) -> TranscriptIndex:
    return load_transcript(file)


def _resolve_leaf(index: TranscriptIndex, leaf: str | None) -> str | None:
    if leaf is None:
        return index.leaf_id
    if leaf == "null":
        return None
    if leaf not in index.by_id:
        fail(f"{index.path}: entry {leaf!r} not found", code=EXIT_BAD_INPUT)
    return leaf


@click.command("context")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--leaf", metavar="ID|null", help="Rebuild for this entry instead of the last one; null = empty."
)
@click.option("--json", "as_json", is_flag=True, help="Print pi's SessionContext JSON (one line).")
@click.option("--llm", is_flag=True, help="With --json: add llmMessages (convertToLlm).")
def context_command(file: Path, leaf: str | None, as_json: bool, llm: bool) -> None:
    """Print the model context rebuilt from a transcript FILE (pi's buildSessionContext)."""
    index = _load(file)
    leaf_id = _resolve_leaf(index, leaf)
    ctx = index.build_context(leaf_id)
    if as_json:
        payload = ctx.to_json()
        if llm:
            payload["llmMessages"] = [message_to_builtins(m) for m in convert_to_llm(ctx.messages)]
        click.echo(msgspec.json.encode(payload).decode("utf-8"))
        return
    console = Console()
    estimate = estimate_context_tokens(ctx.messages)
    model = f"{ctx.model.provider}/{ctx.model.model_id}" if ctx.model else "-"
    console.print(f"[bold]{escape(str(file))}[/bold]  session {escape(index.header.id)}")
    console.print(
        f"leaf {leaf_id or 'null'} · {len(ctx.messages)} messages · thinking {escape(ctx.thinking_level)} · "
        f"model {escape(model)} · ~{estimate.tokens} context tokens"
    )
    for number, message in enumerate(ctx.messages, 1):
        _print_message(console, number, message)


def _print_message(console: Console, number: int, message: AgentMessage) -> None:
    raw = message_to_builtins(message)
    role = str(raw.get("role", "?"))
    style = _ROLE_STYLE.get(role, "white")
    text = _snippet(_message_text(raw), 160)
    console.print(
        f"[dim]{number:>4}[/dim] [{style}]{escape(role):<17}[/{style}] "
        f"[dim]{estimate_tokens(message):>6} tok[/dim]  {escape(text)}"
    )


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


COMMANDS: tuple[click.Command, ...] = (context_command, tree_command)
