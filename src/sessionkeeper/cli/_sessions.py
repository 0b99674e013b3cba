"""
``sessionkeeper sessions list`` and ``sessionkeeper status`` (DESIGN "CLI"; JSON fields in docs/store.md).

``sessions_group`` is the ``sessions`` click group; other command modules attach their subcommands to it
(``sessions cleanup``).
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import click
from msgspec import UNSET
from rich.console import Console
from rich.table import Table
from rich.text import Text

from sessionkeeper.cli._json import json_text
from sessionkeeper.cli._main import EXIT_ERROR, fail
from sessionkeeper.cli._output import console_for_stdout, escape_controls, print_table
from sessionkeeper.cli._session_transcript import (
    TRANSCRIPTS_DIR_HELP,
    check_transcripts_dir,
    delete_outcome,
    outside_note,
    transcript_state,
)
from sessionkeeper.store import (
    JsonFileStoreBackend,
    PostgresStoreBackend,
    RawJsonValue,
    RedisStoreBackend,
    SessionEntry,
    SessionStore,
    is_store_url,
    redact_url,
    session_entry_to_dict,
)


__all__ = ("COMMANDS", "session_row", "sessions_group", "status_command", "store_options")

T = TypeVar("T")

_BACKEND_CHOICE = click.Choice(["json", "sqlite"])
_TRANSCRIPTS_DIR = click.Path(path_type=Path, exists=True, file_okay=False)

F = TypeVar("F", bound=Callable[..., Any])


def store_options(command: F, *, urls: bool = False) -> F:
    """
    The ``--store`` and ``--backend`` options of every command on a sessions store; with ``urls``
    ``--store`` also takes a ``postgresql://`` / ``redis://`` URL (a store in a database, docs/postgres.md).
    """
    command = click.option(
        "--backend",
        type=_BACKEND_CHOICE,
        default=None,
        help="Store backend (default: the file that exists, else json).",
    )(command)
    help_text = "Sessions directory (<root>/agents/<agentId>/sessions) or its sessions.json / sessions.sqlite"
    if urls:
        return click.option(
            "--store",
            "store_path",
            required=True,
            metavar="DIR|URL",
            callback=_store_location,
            help=help_text + ", or a postgresql:// or redis:// store URL (docs/postgres.md).",
        )(command)
    return click.option(
        "--store",
        "store_path",
        required=True,
        type=click.Path(path_type=Path, exists=True),
        help=help_text + ".",
    )(command)


def _store_location(ctx: click.Context, param: click.Parameter, value: str) -> Path | str:
    """``--store`` with URLs: a database store URL (kept as a string), else an existing path."""
    if is_store_url(value):
        return value
    converted: Path = click.Path(path_type=Path, exists=True).convert(value, param, ctx)
    return converted


def _store_or_url_options(command: F) -> F:
    return store_options(command, urls=True)


def backend_name(store: SessionStore) -> str:
    """The ``"backend"`` of a ``--json`` output: ``"postgres"``, ``"redis"``, ``"sqlite"`` or ``"json"``."""
    if isinstance(store.backend, PostgresStoreBackend):
        return "postgres"
    if isinstance(store.backend, RedisStoreBackend):
        return "redis"
    return "sqlite" if str(getattr(store.backend, "path", "")).endswith(".sqlite") else "json"


def _location(store: SessionStore, given: Path | str) -> tuple[str, str]:
    """``(where, backend name)`` for the output (a URL without its password)."""
    if isinstance(store.backend, PostgresStoreBackend | RedisStoreBackend):
        return redact_url(str(given)), backend_name(store)
    return str(getattr(store.backend, "path", given)), backend_name(store)


_ROW_FIELDS: tuple[tuple[str, str], ...] = (
    ("sessionId", "session_id"),
    ("updatedAt", "updated_at"),
    ("sessionStartedAt", "session_started_at"),
    ("label", "label"),
    ("displayName", "display_name"),
    ("chatType", "chat_type"),
    ("channel", "channel"),
    ("modelProvider", "model_provider"),
    ("model", "model"),
    ("totalTokens", "total_tokens"),
    ("contextTokens", "context_tokens"),
    ("compactionCount", "compaction_count"),
    ("archivedAt", "archived_at"),
    ("pinnedAt", "pinned_at"),
)


def session_row(key: str, entry: SessionEntry) -> dict[str, Any]:
    """The stable ``sessions list --json`` row of one entry (absent fields are ``null``)."""
    row: dict[str, Any] = {"key": key}
    for wire, attr in _ROW_FIELDS:
        value = getattr(entry, attr)
        row[wire] = None if value is UNSET else value
    row["archived"] = entry.is_archived
    row["pinned"] = entry.is_pinned
    return row


def plain(value: str) -> Text:
    """
    Stored text (a session key, label, file name) for a rich table or line: never read as markup (a
    ``[/bold]`` in a key crashed the command), control characters shown as escapes (``\\t``, ``\\n``,
    ``\\x1b``, as docs/cli.md says; no terminal escape sequences from the store).
    """
    return Text(escape_controls(value))


def compact_json(value: Any) -> str:
    """
    ``value`` as one line of JSON for a table cell (``json.dumps`` separators, non-ASCII kept); a
    :class:`~sessionkeeper.store.RawJsonValue` (``1e400``, a 5 000-digit integer, deep nesting: the RAW-JSON
    decision in docs/decisions.md) is written as its raw JSON text.
    """
    if isinstance(value, RawJsonValue):
        return value.text
    if isinstance(value, dict):
        inner = ", ".join(
            f"{json.dumps(str(k), ensure_ascii=False)}: {compact_json(v)}" for k, v in value.items()
        )
        return "{" + inner + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(compact_json(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _when(ms: Any) -> str:
    if not isinstance(ms, int):
        return "-"
    try:
        return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.UTC).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):  # a stored stamp beyond the datetime range
        return str(ms)


def _open(store: Path | str, backend: str | None, transcripts_dir: Path | None = None) -> SessionStore:
    """Open the store read-only: listing or showing a session never creates or writes anything."""
    if transcripts_dir is not None:  # a store URL (check_transcripts_dir)
        return SessionStore.open(store, transcripts_dir=transcripts_dir, read_only=True)
    return SessionStore.open(store, backend=backend, read_only=True)  # type: ignore[arg-type]


def _dropped_note(store: SessionStore) -> list[str]:
    if isinstance(store.backend, JsonFileStoreBackend):
        return list(store.backend.last_load.dropped_keys)
    return []


def _with_spinner(message: str, work: Callable[[], T]) -> T:
    """Run ``work`` with a spinner on stderr when it is a terminal (large stores take seconds to read)."""
    console = Console(stderr=True)
    if not console.is_terminal:
        return work()
    with console.status(message):
        return work()


_SESSIONS_EPILOG = """\b
Examples:
  sessionkeeper sessions list --store ~/.openclaw/agents/main/sessions
  sessionkeeper sessions cleanup --store ~/.openclaw/agents/main/sessions --dry-run
"""


@click.group("sessions", epilog=_SESSIONS_EPILOG)
def sessions_group() -> None:
    """List and maintain the sessions of a store (a sessions directory or its sessions.json)."""


_LIST_EPILOG = """\b
Examples:
  sessionkeeper sessions list --store ~/.openclaw/agents/main/sessions
  sessionkeeper sessions list --store ~/.openclaw/agents/main/sessions --all --limit 20
  sessionkeeper sessions list --store 'postgresql://db/agents?store=main' --json
"""


@sessions_group.command("list", epilog=_LIST_EPILOG)
@_store_or_url_options
@click.option("--archived", is_flag=True, help="List archived sessions instead of active ones.")
@click.option("--all", "show_all", is_flag=True, help="List active and archived sessions.")
@click.option("--limit", type=click.IntRange(min=0), default=None, help="At most N sessions.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (fields documented in docs/store.md).")
def list_command(
    *,
    store_path: Path | str,
    backend: str | None,
    archived: bool,
    show_all: bool,
    limit: int | None,
    as_json: bool,
) -> None:
    """List sessions: pinned first, then most recently updated."""

    async def run() -> tuple[list[tuple[str, SessionEntry]], list[str], tuple[str, str]]:
        async with _open(store_path, backend) as store:
            rows = await store.list(archived=None if show_all else archived, limit=limit)
            return rows, _dropped_note(store), _location(store, store_path)

    rows, dropped, (location, backend_name) = _with_spinner(
        f"reading {redact_url(str(store_path))}", lambda: anyio.run(run)
    )
    if as_json:
        payload = {
            "store": location,
            "backend": backend_name,
            "count": len(rows),
            "sessions": [session_row(key, entry) for key, entry in rows],
            "droppedKeys": dropped,
        }
        click.echo(json_text(payload, indent=2))
        return
    table = Table(
        title=plain(f"{len(rows)} {'archived ' if archived and not show_all else ''}sessions in {location}")
    )
    for column in ("key", "session id", "updated (UTC)", "label", "model", "tokens", "flags"):
        table.add_column(column, overflow="fold")
    for key, entry in rows:
        flags = ("pinned " if entry.is_pinned else "") + ("archived" if entry.is_archived else "")
        table.add_row(
            plain(key),
            plain(entry.session_id) if isinstance(entry.session_id, str) else "-",
            _when(entry.updated_at),
            plain(entry.label) if isinstance(entry.label, str) else "",
            plain(entry.model) if isinstance(entry.model, str) else "",
            str(entry.total_tokens) if isinstance(entry.total_tokens, int) else "",
            flags.strip(),
        )
    console = console_for_stdout()
    print_table(console, table)
    if dropped:
        console.print(
            Text(f"{len(dropped)} invalid entries ignored (as OpenClaw does): ", style="yellow")
            + plain(", ".join(dropped))
        )


_STATUS_EPILOG = """\b
Examples:
  sessionkeeper status --store ~/.openclaw/agents/main/sessions agent:main:main
  sessionkeeper status --store redis://127.0.0.1/0 agent:main:main --json
"""


@click.command("status", epilog=_STATUS_EPILOG)
@_store_or_url_options
@click.option("--transcripts-dir", type=_TRANSCRIPTS_DIR, default=None, help=TRANSCRIPTS_DIR_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (fields documented in docs/store.md).")
@click.argument("key")
def status_command(
    *, store_path: Path | str, backend: str | None, transcripts_dir: Path | None, as_json: bool, key: str
) -> None:
    """Show one session's entry and transcript. Exit 1 when the key is not in the store."""
    check_transcripts_dir(store_path, transcripts_dir)

    async def run() -> tuple[SessionEntry | None, dict[str, Any] | None, str | None, str]:
        async with _open(store_path, backend, transcripts_dir) as store:
            name = backend_name(store)
            entry = await store.get(key)
            if entry is None:
                return None, None, None, name
            transcript = await transcript_state(store, entry)
            note = outside_note(store, entry, transcript, given=store_path, transcripts_dir=transcripts_dir)
            return entry, transcript, note, name

    entry, transcript, note, name = anyio.run(run)
    if entry is None:
        if as_json:  # the JSON document is the answer (stdout only), as before
            click.echo(json_text({"key": key, "found": False, "backend": name}, indent=2))
            raise SystemExit(EXIT_ERROR)
        fail(f"no session for key {key!r} in {redact_url(str(store_path))}", code=EXIT_ERROR)
    if as_json:
        payload = {
            "key": key,
            "found": True,
            "backend": name,
            "archived": entry.is_archived,
            "pinned": entry.is_pinned,
            "entry": session_entry_to_dict(entry),
            "transcript": transcript,
        }
        if note is not None:
            payload["transcriptNote"] = note
        click.echo(
            json_text(payload, indent=2)
        )  # a RawJsonValue in the entry is written as its raw JSON text
        return
    table = Table(title=plain(key), show_header=False)
    table.add_column("field")
    table.add_column("value", overflow="fold")
    for field, value in session_entry_to_dict(entry).items():
        shown = _when(value) if field.endswith("At") and isinstance(value, int) else compact_json(value)
        if field.endswith("At") and isinstance(value, int):
            shown = f"{shown} ({value})"
        table.add_row(plain(field), plain(shown))
    if transcript is not None:
        size = f"{transcript['bytes']} bytes" if transcript["exists"] else "missing"
        if transcript.get("lines") is not None:
            size = f"{transcript['lines']} lines, {size}"
        table.add_row("transcript", plain(f"{transcript['path']} ({size})"))
    if note is not None:
        table.add_row("transcript", plain(f"not found: {note}"))
    print_table(console_for_stdout(), table)


_DELETE_EPILOG = """\b
Examples:
  sessionkeeper sessions delete --store ~/.openclaw/agents/main/sessions agent:main:direct:old
  sessionkeeper sessions delete --store postgresql://db/agents agent:main:direct:old --json
  sessionkeeper sessions delete --store redis://127.0.0.1/0 --transcripts-dir ./t agent:main:direct:old
"""


@sessions_group.command("delete", epilog=_DELETE_EPILOG)
@_store_or_url_options
@click.option("--transcripts-dir", type=_TRANSCRIPTS_DIR, default=None, help=TRANSCRIPTS_DIR_HELP)
@click.option(
    "--keep-transcript", is_flag=True, help="Leave the transcript as it is (default: archive or remove it)."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON: {key, deleted, backend, transcript}.")
@click.argument("key")
def delete_command(
    *,
    store_path: Path | str,
    backend: str | None,
    transcripts_dir: Path | None,
    keep_transcript: bool,
    as_json: bool,
    key: str,
) -> None:
    """
    Remove one session's entry. Its transcript, unless another entry uses it, is archived as
    <file>.deleted.<stamp> in a sessions directory (recoverable; a store URL's with --transcripts-dir);
    in a PostgreSQL store that holds the transcripts it is deleted for good (its rows removed, no
    archive: export first to keep it). A transcript file beside a store URL given no --transcripts-dir
    is left as it is, and the output says so (docs/postgres.md "Reset, delete and archives"). Exit 1
    when the key is not in the store.
    """
    check_transcripts_dir(store_path, transcripts_dir)

    async def run() -> tuple[bool, dict[str, Any] | None, str]:
        opened = (
            SessionStore.open(store_path, transcripts_dir=transcripts_dir)
            if transcripts_dir is not None
            else SessionStore.open(store_path, backend=backend)  # type: ignore[arg-type]
        )
        async with opened as store:
            name = backend_name(store)
            entry = await store.get(key)
            before = None if entry is None else await transcript_state(store, entry)
            if not await store.delete(key, archive_transcript=not keep_transcript):
                return False, None, name
            if entry is None:  # written between the read and the delete: nothing known of it
                return True, None, name
            note = outside_note(store, entry, before, given=store_path, transcripts_dir=transcripts_dir)
            after = None if note is not None else await transcript_state(store, entry)
            return True, delete_outcome(before, after, session_id=entry.session_id, note=note), name

    deleted, transcript, name = anyio.run(run)
    if as_json:
        payload: dict[str, Any] = {"key": key, "deleted": deleted, "backend": name}
        if deleted:
            payload["transcript"] = transcript
        click.echo(json_text(payload, indent=2))
        if not deleted:
            raise SystemExit(EXIT_ERROR)
        return
    if not deleted:
        fail(f"no session for key {key!r} in {redact_url(str(store_path))}", code=EXIT_ERROR)
    console = console_for_stdout()
    console.print(Text("deleted ") + plain(key))
    if transcript is None:
        return
    if transcript["outcome"] == "notFound":
        left = f"transcript of session {transcript['sessionId']} left as it is: {transcript['note']}"
        console.print(plain(left), style="yellow")
    else:
        console.print(Text(f"transcript {transcript['outcome']}: ") + plain(str(transcript["path"])))


COMMANDS: tuple[click.Command, ...] = (sessions_group, status_command)
