"""
``sessionkeeper compact FILE`` (DESIGN "CLI", decision 6 item 6): plan or run a manual compaction.

``--dry-run --json`` prints the plan: ``firstKeptEntryId``, ``isSplitTurn``, ``turnStartEntryId``,
``tokensBefore``, ``messagesToSummarize``, ``turnPrefixMessages``, ``keptMessages``,
``nothingToSummarize``, ``deviation`` (``"B05"`` when the planner left pi's cut, then
``piFirstKeptEntryId`` says pi's), ``fileOps {read, modified}`` and a few more (``keptTokens``,
``strictCheckpoint``, ``pendingToolCallIds``). A real run appends the compaction entry and adds
``entryId``, ``provider`` and ``summaryChars`` (and ``status``, and ``contextCompacted``: whether the
branch is now compacted, by this run or, for ``"joined"``, by another writer's compaction it waited for).

Without ``--keep-recent-tokens`` a manual compaction is a strict checkpoint: everything is summarised
and the rebuilt context starts from the summary (OpenClaw's ``/compact``). The CLI has no model, so
summaries are extractive unless ``--provider`` names a provider that an installed package declares in the
``sessionkeeper.compaction_providers`` entry point group (DESIGN D3; an unknown id is bad input, exit 2).

When the compaction is written and FILE lies in a sessions directory whose store (``sessions.json`` or
``sessions.sqlite`` next to it) has an entry whose transcript is FILE, that entry's ``compactionCount``
is incremented (and, after a rotation, ``sessionId``/``sessionFile`` adopt the successor), as OpenClaw's
``incrementCompactionCount`` does after a manual ``/compact``; the JSON then has ``storeEntry {key,
compactionCount}`` (``null`` when nothing was written or no store entry references FILE).

When nothing is written, ``status`` says why and ``reason`` explains it in words; the plan fields are
always present (zeros and nulls when there is no plan: an empty branch, or one that already ends with
a compaction).

Exit codes: 0 ok (dry run; an entry was written; another writer's concurrent compaction of the file was
waited for and shared, ``"joined"``, DESIGN D10; or there was nothing to compact: empty branch, already
compacted, nothing to summarise); 1 nothing was written although there was history to compact (pending
tool results, ineffective summary, superseded by another writer's compaction or branch: the leaf may now
be on a branch no one compacted, so a rerun decides) or an error; 2 bad input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import attrs
import click
from rich.table import Table

from sessionkeeper.cli._file_args import TranscriptPath
from sessionkeeper.cli._json import json_text
from sessionkeeper.cli._main import EXIT_BAD_INPUT, EXIT_ERROR, fail
from sessionkeeper.cli._output import console_for_stdout, print_table
from sessionkeeper.compaction import (
    ENTRY_POINT_GROUP,
    CompactionProviderRegistry,
    CompactionResult,
    CompactionSettings,
    Compactor,
)
from sessionkeeper.exceptions import SessionKeeperError
from sessionkeeper.store import SQLITE_FILE_NAME, STORE_FILE_NAME, SessionEntry, SessionStore
from sessionkeeper.transcript import TranscriptManager


__all__ = ("COMMANDS", "compact_command", "record_compaction_in_store")

# What a plan reports when there is none (DESIGN "CLI JSON" item 6: the fields are always there).
_NO_PLAN: dict[str, Any] = {
    "firstKeptEntryId": None,
    "isSplitTurn": False,
    "turnStartEntryId": None,
    "tokensBefore": 0,
    "tokensBeforeSource": None,
    "tokensBeforeEstimate": 0,
    "messagesToSummarize": 0,
    "turnPrefixMessages": 0,
    "keptMessages": 0,
    "nothingToSummarize": True,
    "deviation": None,
    "fileOps": {"read": [], "modified": []},
    "keptTokens": 0,
    "keepRecentTokens": None,
    "piFirstKeptEntryId": None,
    "strictCheckpoint": False,
    "pendingToolCallIds": [],
}
_REASONS: dict[str, str] = {
    "empty": "the branch has no entries: nothing to compact",
    "already_compacted": "the branch already ends with a compaction: nothing new to summarise",
    "nothing_to_summarize": "no message before the kept recent tail: nothing to summarise",
    "pending_tool_results": "the last tool calls have no results yet: compact once they arrive",
    "ineffective": "the summary would not be smaller than the history it replaces",
    "superseded": "another writer compacted this branch (or moved the leaf off it) while the summary was"
    " made: nothing was written",
    "joined": "the file is compacted: another writer (task or process) was compacting this transcript at the"
    " same time, and this run waited for it and shares its compaction (entryId); nothing more was written",
}
# Statuses where nothing was written because there was nothing to do (exit 0).
_NOTHING_TO_DO = frozenset({"empty", "already_compacted", "nothing_to_summarize"})
# Statuses where this run wrote nothing but the branch is compacted: another writer's compaction, waited
# for and shared (D10, docs/compaction.md single-flight). "superseded" is not one: the leaf may have moved
# to another branch, which no one compacted (exit 1; a rerun says already_compacted or compacts it).
_SHARED = frozenset({"joined"})


def _with_reason(data: dict[str, Any]) -> dict[str, Any]:
    out = {**_NO_PLAN, **data}
    reason = _REASONS.get(str(out.get("status")))
    if reason is not None:
        out["reason"] = reason
    return out


def _print(data: dict[str, Any], *, as_json: bool, title: str) -> None:
    if as_json:
        click.echo(json_text(data))
        return
    table = Table(title=title, show_header=False)
    for key, value in data.items():
        table.add_row(key, json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value)
    print_table(console_for_stdout(), table)


async def _run(
    file: Path,
    *,
    settings: CompactionSettings,
    keep: int | None,
    context_window: int | None,
    instructions: str | None,
    dry_run: bool,
    providers: CompactionProviderRegistry | None = None,
) -> tuple[dict[str, Any], bool]:
    transcript = await TranscriptManager.open(file)
    compactor = Compactor(settings=settings, context_window=context_window, providers=providers)
    branch = transcript.get_branch()
    if dry_run:
        plan = compactor.plan(branch, reason="manual", keep_recent_tokens=keep)
        if plan is None:
            status = "already_compacted" if branch else "empty"
            return _with_reason({"status": status, "storeEntry": None}), True
        data = {"status": "planned", **plan.to_json(), "storeEntry": None}
        if plan.nothing_to_summarize:
            data["reason"] = _REASONS["nothing_to_summarize"]
        return data, True
    outcome: CompactionResult = await compactor.compact(
        transcript, reason="manual", keep_recent_tokens=keep, custom_instructions=instructions
    )
    data = _with_reason(outcome.to_json())
    data["contextCompacted"] = outcome.compacted or outcome.status in _SHARED
    # a joined compaction is counted in the store by the run that wrote it (as SessionRuntime does)
    data["storeEntry"] = await record_compaction_in_store(file, outcome) if outcome.compacted else None
    return data, data["contextCompacted"] or outcome.status in _NOTHING_TO_DO


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


async def record_compaction_in_store(file: Path, outcome: CompactionResult) -> dict[str, Any] | None:
    """
    Count a written compaction of ``file`` in the store of its sessions directory, if any.

    The store is the ``sessions.json`` or ``sessions.sqlite`` next to ``file``; the entries whose
    transcript (:meth:`SessionStore.transcript_file`) is ``file`` get ``compactionCount + 1`` and
    ``totalTokens`` = the post-compaction estimate (``totalTokensFresh`` true; false without one), and
    after a rotation (``outcome.successor``) the successor's ``sessionId`` and absolute ``sessionFile``
    (OpenClaw spec §5.8). The update re-checks under the store's writer lock that the entry still names
    ``file``.

    Returns:
        ``{"key", "compactionCount"}`` of the (first) updated entry, or ``None`` when no store entry
        references ``file`` (or there is no store).

    Raises:
        SessionKeeperError: The store cannot be read or written (a damaged ``sessions.json`` is never
            overwritten; see :class:`~sessionkeeper.store.JsonFileStoreBackend`).
    """
    directory = file.parent
    if not (directory / STORE_FILE_NAME).is_file() and not (directory / SQLITE_FILE_NAME).is_file():
        return None
    async with SessionStore.open(directory) as store:

        def names_file(entry: SessionEntry) -> bool:
            try:
                path = store.transcript_file(entry)
            except SessionKeeperError:  # an unsafe sessionFile names no file of this directory
                return False
            return path is not None and _same_file(path, file)

        keys = [key for key, entry in (await store.list(archived=None)) if names_file(entry)]
        recorded: dict[str, Any] | None = None
        for key in keys:

            def bump(current: SessionEntry) -> dict[str, Any] | None:
                if not names_file(current):
                    return None
                count = current.compaction_count if isinstance(current.compaction_count, int) else 0
                fields: dict[str, Any] = {"compactionCount": count + 1}
                # the pre-compaction total no longer holds (OpenClaw spec §5.8 incrementCompactionCount):
                # the post-compaction estimate, fresh; stale when there is none
                after = outcome.tokens_after
                if after is not None:
                    fields |= {"totalTokens": after, "totalTokensFresh": True}
                else:
                    fields["totalTokensFresh"] = False
                if outcome.successor is not None:
                    fields["sessionId"] = outcome.successor.session_id
                    if outcome.successor.path is not None:  # a file transcript's (this command's)
                        fields["sessionFile"] = str(outcome.successor.path)
                return fields

            updated = await store.update_entry(key, bump)
            if updated is not None and recorded is None:
                recorded = {"key": key, "compactionCount": updated.compaction_count}
        return recorded


_EPILOG = """\b
Examples:
  sessionkeeper compact sessions/2f1c7b9e.jsonl --dry-run
  sessionkeeper compact sessions/2f1c7b9e.jsonl --context-window 200000 --keep-recent-tokens 20000
  sessionkeeper compact sessions/2f1c7b9e.jsonl --provider my-summariser --instructions 'open TODOs' --json

\b
Exit codes: 0 compacted, joined or nothing to do, 1 superseded or failed, 2 bad input.
"""


@click.command("compact", epilog=_EPILOG)
@click.argument("file", type=TranscriptPath())
@click.option("--keep-recent-tokens", type=click.IntRange(min=0), help="Keep about N recent tokens verbatim.")
@click.option("--reserve-tokens", type=click.IntRange(min=0), help="Reserve tokens (default 16384).")
@click.option("--context-window", type=click.IntRange(min=1), help="The model's context window in tokens.")
@click.option(
    "--provider",
    "provider_id",
    help="Id of a compaction provider installed as a 'sessionkeeper.compaction_providers' entry point.",
)
@click.option("--instructions", help="Extra focus for the summary (/compact <text>).")
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (stable fields, camelCase).")
def compact_command(  # noqa: PLR0917 - click passes every option as a keyword of the callback
    file: Path,
    keep_recent_tokens: int | None,
    reserve_tokens: int | None,
    context_window: int | None,
    provider_id: str | None,
    instructions: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Compact the current branch of FILE: summarise old history, keep the recent tail."""
    settings = CompactionSettings()
    if reserve_tokens is not None:
        settings = attrs.evolve(settings, reserve_tokens=reserve_tokens)
    providers = None
    if provider_id:
        providers = CompactionProviderRegistry.from_entry_points()
        if provider_id not in providers:
            installed = ", ".join(providers.ids()) or "none"
            fail(
                f"no compaction provider {provider_id!r} is installed (installed: {installed}); providers "
                f"come from the '{ENTRY_POINT_GROUP}' entry point group",
                code=EXIT_BAD_INPUT,
            )
        settings = attrs.evolve(settings, provider=provider_id)
    data, ok = anyio.run(
        lambda: _run(
            file,
            settings=settings,
            keep=keep_recent_tokens,
            context_window=context_window,
            instructions=instructions,
            dry_run=dry_run,
            providers=providers,
        )
    )
    _print(data, as_json=as_json, title=f"compact {'plan' if dry_run else 'result'}: {file.name}")
    if not ok:
        raise SystemExit(EXIT_ERROR)


COMMANDS: tuple[click.Command, ...] = (compact_command,)
