"""
``sessionkeeper context FILE`` (DESIGN "CLI", decision 6); ``tree`` lives in ``cli/_tree.py``.

``context --json`` prints pi's ``SessionContext`` exactly (``{"messages", "thinkingLevel", "model"}``, one
line); ``--llm`` adds ``llmMessages`` (``convertToLlm``) like pi-oracle's ``context.mjs``. Without
``--json`` a readable view is printed with rich; with ``--llm`` it lists the messages as sent to the model
(after ``convertToLlm``: summaries, bash executions and custom messages become user messages). For the
default leaf the context comes from a bounded tail read (:func:`try_read_tail_context`, same result as the
full load; the full loader decides when the tail cannot, and always with ``--leaf``). ``--last N`` prints
the last N messages of the current branch (:func:`read_last_messages`; ``--json``: ``{"messages": [...]}``).
The text helpers here (``_snippet``, ``_message_text``, ``_content_text``, ``_load``) are shared with
``cli/_tree.py``.

Exit codes: 0 ok; 1 error; 2 bad input (not a transcript, missing file, unknown ``--leaf`` id).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import msgspec

from sessionkeeper.cli._file_args import TranscriptPath
from sessionkeeper.cli._json import json_text
from sessionkeeper.cli._main import EXIT_BAD_INPUT, fail
from sessionkeeper.records import NonStringId, entry_key
from sessionkeeper.transcript import (
    AgentMessage,
    TranscriptIndex,
    convert_to_llm,
    estimate_tokens,
    load_transcript,
    message_to_builtins,
    read_last_messages,
    try_read_tail_context,
)


if TYPE_CHECKING:
    from rich.console import Console

    from sessionkeeper.transcript import ContextTokenEstimate


__all__ = ("COMMANDS", "context_command")

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


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _printable(text: str) -> str:
    """``text`` with control characters shown as escapes (``\\x1b``, ``\\n``): ids, labels and message
    text come from the file, and a raw ESC or newline would drive the terminal or break the layout."""
    if text.isprintable():
        return text
    return _CONTROL.sub(lambda found: repr(found.group())[1:-1], text)


def _snippet(text: str, limit: int = _SNIPPET) -> str:
    flat = _printable(" ".join(text.split()))
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
    if leaf in index.by_id:
        return leaf
    # a number or boolean id (shown by ``tree`` as pi prints it: 7, 2.5, true) is keyed apart from the
    # string with the same text (entry_key): the string wins when both exist
    try:
        key = entry_key(msgspec.json.decode(leaf))
    except msgspec.DecodeError:
        key = None
    if not isinstance(key, NonStringId) or key not in index.by_id:
        fail(f"{index.path}: entry {leaf!r} not found", code=EXIT_BAD_INPUT)
    return key


_EPILOG = """\b
Examples:
  sessionkeeper context sessions/2f1c7b9e.jsonl
  sessionkeeper context sessions/2f1c7b9e.jsonl --json --llm
  sessionkeeper context sessions/2f1c7b9e.jsonl --last 5
  sessionkeeper context sessions/2f1c7b9e.jsonl --leaf a1b2c3d4
"""


@click.command("context", epilog=_EPILOG)
@click.argument("file", type=TranscriptPath())
@click.option(
    "--leaf", metavar="ID|null", help="Rebuild for this entry instead of the last one; null = empty."
)
@click.option("--json", "as_json", is_flag=True, help="Print pi's SessionContext JSON (one line).")
@click.option(
    "--llm",
    is_flag=True,
    help="The messages as sent to the model (convertToLlm); with --json: add llmMessages.",
)
@click.option(
    "--last",
    type=click.IntRange(min=1),
    metavar="N",
    help="Print the last N messages of the current branch instead (history: no compaction applied).",
)
def context_command(file: Path, leaf: str | None, as_json: bool, llm: bool, last: int | None) -> None:
    """Print the model context rebuilt from a transcript FILE (pi's buildSessionContext)."""
    if last is not None:
        _print_last(file, last, leaf=leaf, as_json=as_json, llm=llm)
        return
    # the default leaf: a bounded tail read (the full loader decides when the tail cannot)
    tail = try_read_tail_context(file) if leaf is None else None
    if tail is not None:
        ctx, leaf_id, session_id = tail.context, tail.leaf_id, tail.session_id
    else:
        index = _load(file)
        leaf_id = _resolve_leaf(index, leaf)
        # the default leaf as pi picks it: with no entry id (leaf_id None) the last entry, not "null"
        ctx = index.build_context() if leaf is None else index.build_context(leaf_id)
        session_id = index.header.id
    if as_json:
        payload = ctx.to_json()
        if llm:
            payload["llmMessages"] = [message_to_builtins(m) for m in convert_to_llm(ctx.messages)]
        click.echo(json_text(payload))
        return
    from rich.markup import escape  # noqa: PLC0415 - the JSON path does not pay for rich (issue 11)

    from sessionkeeper.cli._output import console_for_stdout  # noqa: PLC0415
    from sessionkeeper.transcript import estimate_context_usage  # noqa: PLC0415

    console = console_for_stdout()
    estimate = estimate_context_usage(ctx.messages)
    shown = convert_to_llm(ctx.messages) if llm else list(ctx.messages)
    model = f"{ctx.model.provider}/{ctx.model.model_id}" if ctx.model else "-"
    console.print(f"[bold]{escape(_printable(str(file)))}[/bold]  session {escape(_printable(session_id))}")
    shown_leaf = "null" if leaf_id is None else escape(_printable(leaf_id))  # a falsy id (0) is shown
    console.print(
        f"leaf {shown_leaf} · {len(ctx.messages)} messages · "
        f"thinking {escape(_printable(ctx.thinking_level))} · "
        f"model {escape(_printable(model))} · ~{estimate.tokens} context tokens ({_token_source(estimate)})"
    )
    if llm:
        console.print(f"as sent to the model (convertToLlm): {len(shown)} messages")
    for number, message in enumerate(shown, 1):
        _print_message(console, number, message)


def _token_source(estimate: ContextTokenEstimate) -> str:
    """Where the context count comes from, in words (issue 11: report a number with its source)."""
    if estimate.source == "usage":
        return (
            f"usage: last provider usage {estimate.usage_tokens} + estimate {estimate.trailing_tokens} "
            "of newer messages"
        )
    stale = estimate.stale_usage_skipped
    skipped = f"; {stale} usage(s) before the latest compaction skipped as stale" if stale else ""
    return f"estimate: chars/4 of every message{skipped}"


def _print_last(file: Path, n: int, *, leaf: str | None, as_json: bool, llm: bool) -> None:
    """``--last N``: the last N messages of the current branch (:func:`read_last_messages`)."""
    if leaf is not None or llm:
        fail("--last cannot be combined with --leaf or --llm", code=EXIT_BAD_INPUT)
    messages = read_last_messages(file, n)
    if as_json:
        payload = {"messages": [message_to_builtins(m) for m in messages]}
        click.echo(json_text(payload))
        return
    from rich.markup import escape  # noqa: PLC0415 - the JSON path does not pay for rich

    from sessionkeeper.cli._output import console_for_stdout  # noqa: PLC0415

    console = console_for_stdout()
    console.print(
        f"[bold]{escape(_printable(str(file)))}[/bold]  last {len(messages)} messages of the current branch"
    )
    for number, message in enumerate(messages, 1):
        _print_message(console, number, message)


def _print_message(console: Console, number: int, message: AgentMessage) -> None:
    from rich.markup import escape  # noqa: PLC0415 - see context_command

    raw = message_to_builtins(message)
    role = _printable(str(raw.get("role", "?")))
    style = _ROLE_STYLE.get(role, "white")
    text = _snippet(_message_text(raw), 160)
    console.print(
        f"[dim]{number:>4}[/dim] [{style}]{escape(role):<17}[/{style}] "
        f"[dim]{estimate_tokens(message):>6} tok[/dim]  {escape(text)}"
    )


COMMANDS: tuple[click.Command, ...] = (context_command,)
