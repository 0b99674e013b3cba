"""
The steps of ``sessionkeeper demo``: each one runs a part of the library on the copied sample sessions
and returns a :class:`StepResult` (summary, table rows, JSON data, notes). :data:`DEMO_STEPS` is their
order; ``_demo.py`` runs them and prints the report.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import attrs

from sessionkeeper._fs import ensure_dir
from sessionkeeper._silent_stream import SilentReplyStreamFilter
from sessionkeeper._tokens import EstimateTokenCounter
from sessionkeeper.cli._demo_runtime import replay_sessions
from sessionkeeper.cli._doctor import run_doctor
from sessionkeeper.compaction import extractive_summary, prepare_compaction
from sessionkeeper.pruning import Pruner, PruningSettings, SoftTrimSettings, estimate_context_chars
from sessionkeeper.transcript import (
    TranscriptManager,
    TreeNode,
    UserMessage,
    estimate_context_tokens,
    estimate_tokens,
)


__all__ = ("DEMO_STEPS", "DemoContext", "DemoStep", "StepResult")


@attrs.frozen(kw_only=True)
class StepResult:
    """
    What one demo step did.

    Attributes:
        summary: One line for humans.
        rows: Table rows (same keys in every row), shown as a table and included in the JSON.
        data: Extra JSON-ready facts.
        notes: One line per column (or number) that needs explaining, ``"<column>: <meaning>"``.
    """

    summary: str
    rows: tuple[dict[str, Any], ...] = ()
    data: dict[str, Any] = attrs.field(factory=dict)
    notes: tuple[str, ...] = ()


@attrs.define
class DemoContext:
    """
    Shared state of a demo run.

    Attributes:
        workdir: The work directory.
        sessions: The directory holding the copied transcripts.
        transcripts: The copied transcripts, by name.
        hide_workdir: Show paths under ``<workdir>`` (a temporary directory, removed afterwards: its
            random name would make every report differ).
    """

    workdir: Path
    sessions: Path
    transcripts: dict[str, Path] = attrs.field(factory=dict)
    hide_workdir: bool = False

    async def open(self, name: str) -> TranscriptManager:
        """Open one copied transcript."""
        return await TranscriptManager.open(self.transcripts[name])

    async def open_all(self) -> list[tuple[str, TranscriptManager]]:
        """Open every copied transcript, in name order."""
        return [(name, await self.open(name)) for name in sorted(self.transcripts)]

    def show(self, path: Path) -> str:
        """``path`` as the report shows it: under ``<workdir>`` with ``hide_workdir``, else as it is."""
        if not self.hide_workdir:
            return str(path)
        try:
            return str(Path("<workdir>") / path.relative_to(self.workdir))
        except ValueError:
            return str(path)


_LEGACY_NOTE = (
    "#N: the N-th entry of a v1 transcript, which has no entry ids on disk (pi draws random ids when it "
    "migrates the file on load, so an id would change from run to run)"
)


def entry_ref(manager: TranscriptManager, entry_id: str | None) -> str | None:
    """An entry as the report shows it: its id, or ``#N`` (position) in a migrated v1/v2 transcript."""
    if entry_id is None or not manager.diagnostics.legacy_version:
        return entry_id
    ids = [entry.id for entry in manager.entries()]
    return f"#{ids.index(entry_id) + 1}" if entry_id in ids else entry_id


@attrs.frozen(kw_only=True)
class DemoStep:
    """
    One step of the demo.

    Attributes:
        name: Short id (``"context"``), used in the JSON.
        title: What it shows.
        run: ``async (ctx) -> StepResult``.
    """

    name: str
    title: str
    run: Callable[[DemoContext], Awaitable[StepResult]]


def _copy_samples(sessions: Path) -> dict[str, Path]:
    ensure_dir(sessions)
    copied: dict[str, Path] = {}
    samples = importlib.resources.files("sessionkeeper").joinpath("_samples")
    for item in sorted(samples.iterdir(), key=lambda t: t.name):
        if not item.name.endswith(".jsonl"):
            continue
        target = sessions / item.name
        target.write_bytes(item.read_bytes())
        target.chmod(0o600)
        copied[item.name.removesuffix(".jsonl")] = target
    return copied


async def _step_samples(ctx: DemoContext) -> StepResult:
    ctx.transcripts = await anyio.to_thread.run_sync(_copy_samples, ctx.sessions)
    rows = []
    for name, path in sorted(ctx.transcripts.items()):
        data = await anyio.Path(path).read_bytes()
        rows.append({"transcript": name, "bytes": len(data), "lines": data.count(b"\n")})
    return StepResult(
        summary=f"copied {len(rows)} bundled sample transcripts to {ctx.show(ctx.sessions)}",
        rows=tuple(rows),
        data={"sessions": ctx.show(ctx.sessions)},
        notes=(
            "bytes: the file's size",
            "lines: JSONL lines, one per entry plus the session header line",
        ),
    )


async def _step_open(ctx: DemoContext) -> StepResult:
    rows = []
    for name, manager in await ctx.open_all():
        diag = manager.diagnostics
        rows.append(
            {
                "transcript": name,
                "version": diag.version,
                "entries": len(manager.entries()),
                "leaf": entry_ref(manager, manager.leaf_id),
                "name": manager.session_name,
                "labels": len(manager.labels),
            }
        )
    legacy = [name for name, manager in await ctx.open_all() if manager.diagnostics.legacy_version]
    note = f"; {', '.join(legacy)} migrated from an old version in memory (nothing written)" if legacy else ""
    notes: tuple[str, ...] = (
        "version: pi's transcript format version (3 is current; 1 and 2 are migrated to 3 when opened)",
        "entries: every entry of the tree (messages, model and thinking changes, compactions, labels, ...)",
        "leaf: the entry the session continues from (new entries are appended after it)",
        "labels: entries a user bookmarked with a label",
    )
    if legacy:
        notes = (*notes, _LEGACY_NOTE)
    return StepResult(summary=f"opened {len(rows)} transcripts{note}", rows=tuple(rows), notes=notes)


async def _step_context(ctx: DemoContext) -> StepResult:
    counter = EstimateTokenCounter()
    rows = []
    for name, manager in await ctx.open_all():
        context = manager.build_session_context()
        estimate = estimate_context_tokens(context.messages)
        rows.append(
            {
                "transcript": name,
                "messages": len(context.messages),
                "model": f"{context.model.provider}/{context.model.model_id}" if context.model else None,
                "thinkingLevel": context.thinking_level,
                "contextTokens": estimate.tokens,
                "charsOver4": sum(counter.count_message(m) for m in context.messages),
            }
        )
    return StepResult(
        summary="rebuilt each leaf's model context (pi's buildSessionContext) and estimated its tokens",
        rows=tuple(rows),
        notes=(
            "messages: what the model receives: the leaf's branch from its root, a compaction summary in "
            "place of what it replaced",
            "contextTokens: pi's estimate, compared with the window: the input and output tokens the "
            "provider reported for the last assistant reply (its system prompt and tool definitions "
            "included, which the transcript does not hold), plus chars/4 of every message after it",
            "charsOver4: every message's characters / 4, ignoring reported usage: the transcript's messages "
            "only, so well below contextTokens when the provider counted a large system prompt",
        ),
    )


def _tree_stats(roots: tuple[TreeNode, ...]) -> tuple[int, int, int]:
    nodes = leaves = depth = 0
    stack = [(root, 1) for root in roots]
    while stack:
        node, level = stack.pop()
        nodes += 1
        depth = max(depth, level)
        if not node.children:
            leaves += 1
        stack.extend((child, level + 1) for child in node.children)
    return nodes, leaves, depth


async def _step_tree(ctx: DemoContext) -> StepResult:
    rows = []
    for name, manager in await ctx.open_all():
        roots = manager.tree()
        nodes, leaves, depth = _tree_stats(roots)
        rows.append(
            {
                "transcript": name,
                "entries": nodes,
                "roots": len(roots),
                "branchTips": leaves,
                "depth": depth,
                "pathToLeaf": len(manager.get_branch()),
            }
        )
    return StepResult(
        summary="walked each session tree (branches, depth, current path)",
        rows=tuple(rows),
        notes=(
            "entries: the tree's entries (as in step 2)",
            "roots: entries without a parent (normally 1)",
            "branchTips: entries without children: each is the end of a branch the session could go on from",
            "depth: entries on the longest root-to-tip path",
            "pathToLeaf: entries on the path from the root to the current leaf (what the context is built "
            "from)",
        ),
    )


async def _step_doctor(ctx: DemoContext) -> StepResult:
    run = await run_doctor(ctx.sessions)
    rows = [
        {
            "transcript": r.path.stem,
            "status": r.status,
            "findings": ", ".join(f.check for f in r.findings) or "-",
        }
        for r in run.files
    ]
    repair_dir = ctx.workdir / "repair"
    ensure_dir(repair_dir)
    torn = repair_dir / "torn.jsonl"
    source = await anyio.Path(ctx.transcripts["basic"]).read_bytes()
    await anyio.Path(torn).write_bytes(source + b'{"type":"message","id":"deadbeef","parentId":')
    fixed = await run_doctor(torn, fix=True)
    report = fixed.files[0]
    # the backup's name ends with the time of the repair: shown as a pattern, the same in every run
    backup = "torn.jsonl.bak.<UTC time>" if report.backup_path else None
    rows.append({"transcript": "torn copy", "status": report.status, "findings": f"backup {backup}"})
    return StepResult(
        summary="checked every transcript, then repaired a copy with a torn last line (backup first)",
        rows=tuple(rows),
        data={
            "repair": {
                "path": ctx.show(torn),
                "status": report.status,
                "fixed": [f.check for f in report.fixed],
                "backup": backup,
            }
        },
        notes=(
            "status: healthy (nothing found), fixed (repaired by --fix after a 0600 backup), problems",
            "findings: the checks that found something (see `sessionkeeper doctor --help`)",
        ),
    )


async def _step_append(ctx: DemoContext) -> StepResult:
    manager = await ctx.open("basic")
    before = len(manager.build_session_context().messages)
    entry = await manager.append_message(
        UserMessage(content="Demo: what changed since yesterday?", timestamp=0)
    )
    reopened = await ctx.open("basic")
    after = len(reopened.build_session_context().messages)
    return StepResult(
        summary=(
            f"appended a user message after entry {entry.parent_id} durably (one complete line, fsync); "
            f"context {before} -> {after} messages after reopening"
        ),
        data={"parentId": entry.parent_id, "before": before, "after": after},
        notes=(
            "the new entry's id is 8 random hex digits, drawn as pi draws them (not shown: it differs "
            "in every run)",
        ),
    )


async def _step_compaction(ctx: DemoContext) -> StepResult:
    rows = []
    summaries: dict[str, str] = {}
    for name, manager in await ctx.open_all():
        branch = manager.get_branch()
        estimated = sum(estimate_tokens(m) for m in manager.build_session_context().messages)
        keep = max(1, estimated // 4)
        plan = prepare_compaction(branch, keep_recent_tokens=keep)
        if plan is None:
            rows.append({"transcript": name, "keepRecentTokens": keep, "plan": "nothing to compact"})
            continue
        summary = ""
        if not plan.nothing_to_summarize:
            summary = extractive_summary(
                [*plan.messages_to_summarize, *plan.turn_prefix_messages],
                previous_summary=plan.previous_summary,
                read_files=sorted(plan.file_ops.read),
                modified_files=sorted(plan.file_ops.written | plan.file_ops.edited),
            )
            summaries[name] = summary
        rows.append(
            {
                "transcript": name,
                "keepRecentTokens": keep,
                "tokensBefore": plan.tokens_before,
                "summarized": len(plan.messages_to_summarize),
                "kept": plan.kept_messages,
                "firstKeptEntryId": entry_ref(manager, plan.first_kept_entry_id),
                "splitTurn": plan.is_split_turn,
                "summaryChars": len(summary),
            }
        )
    return StepResult(
        summary="planned a compaction keeping ~1/4 of each context and summarised the rest (no model needed)",
        rows=tuple(rows),
        data={"summaries": summaries},
        notes=(
            "keepRecentTokens: the recent tokens to keep verbatim (here a quarter of the context's chars/4)",
            "tokensBefore: the context's tokens before compacting (pi's estimate, as contextTokens above)",
            "summarized: whole messages before the cut that the summary replaces",
            "kept: messages from the cut on, kept verbatim after the summary",
            "firstKeptEntryId: the entry the kept part starts at (the cut point)",
            "splitTurn: the cut falls inside a turn; the turn's start (its prefix) is summarised too",
            "summaryChars: length of the extractive summary (no model): the summarised messages and a split "
            "turn's prefix, so it is above 0 with summarized 0 when only a turn prefix is summarised; 0 "
            "when there is nothing before the cut",
            _LEGACY_NOTE,
        ),
    )


async def _step_pruning(ctx: DemoContext) -> StepResult:
    # OpenClaw's ratios, with thresholds scaled down to the small samples.
    settings = PruningSettings(
        mode="cache-ttl",
        keep_last_assistants=1,
        min_prunable_tool_chars=500,
        soft_trim=SoftTrimSettings(max_chars=300, head_chars=100, tail_chars=100),
    )
    pruner = Pruner(settings=settings)
    rows = []
    for name, manager in await ctx.open_all():
        messages = manager.build_session_context().messages
        window = max(estimate_context_chars(messages) // 4, 100)  # the context fills its window
        result = pruner.prune(messages, context_window_tokens=window, last_cache_touch_at=1, now_ms=10**13)
        rows.append(
            {
                "transcript": name,
                "contextWindow": window,
                "changed": result.changed,
                "softTrimmed": len(result.soft_trimmed),
                "hardCleared": len(result.hard_cleared),
                "charsBefore": result.chars_before,
                "charsAfter": result.chars_after,
            }
        )
    return StepResult(
        summary=(
            "pruned old tool results for a cache-TTL provider whose TTL expired, with thresholds scaled "
            "to the samples (transcripts untouched)"
        ),
        rows=tuple(rows),
        notes=(
            "contextWindow: a window (tokens) chosen so that the context fills it",
            "changed: whether any tool result was trimmed for this request (never in the transcript)",
            "softTrimmed: long tool results cut to their head and tail",
            "hardCleared: tool results replaced by a placeholder (once the context is over hardClearRatio)",
            "charsBefore, charsAfter: OpenClaw's weighted character estimate of the context (tokens x 4 "
            "is the window in chars)",
        ),
    )


async def _step_silent(ctx: DemoContext) -> StepResult:
    del ctx
    rows = []
    for chunks in (
        ["NO", "_RE", "PLY"],
        ["N", "O_REPLY\n"],
        ["No", " problem, done."],
        ["Done.", " NO_REPLY"],
    ):
        stream = SilentReplyStreamFilter()
        shown = [stream.feed(chunk) for chunk in chunks]
        shown.append(stream.finish())
        rows.append(
            {
                "streamed": " | ".join(repr(c) for c in chunks),
                "shown": " | ".join(repr(s) for s in shown if s) or "(nothing)",
                "silent": stream.silent,
            }
        )
    return StepResult(
        summary="streamed replies through the NO_REPLY filter",
        rows=tuple(rows),
        notes=(
            "streamed: the chunks as the model sent them; shown: what reached the user",
            "silent: the whole reply was NO_REPLY, so nothing is delivered",
        ),
    )


async def _step_runtime(ctx: DemoContext) -> StepResult:
    report = await replay_sessions(ctx.transcripts, ctx.workdir)
    limits = report.thresholds
    return StepResult(
        summary=(
            f"replayed every sample turn by turn through SessionRuntime in a {limits['contextWindow']}-token "
            f"window (flush at {limits['memoryFlushThreshold']}, compaction over "
            f"{limits['compactionThreshold']}); store and transcripts in {ctx.show(report.store)}; "
            + "; ".join(
                f"{row['session']}: {row['turns']} turns, {row['pruned']} pruned calls, {row['flushes']} "
                f"flushes, {row['compactions']} compactions, {row['overflowRecoveries']} overflow recoveries"
                for row in report.sessions
            )
        ),
        rows=report.events,
        data={
            "sessions": list(report.sessions),
            "thresholds": limits,
            "store": ctx.show(report.store),
            "transcripts": {name: ctx.show(path) for name, path in report.transcripts.items()},
        },
        notes=(
            "turn: the replayed session's turn (a user prompt and the replies and tool results after it)",
            "pruned calls: model calls whose context had old tool results trimmed (cache-TTL pruning): "
            "soft-trimmed / hard-cleared on that call, or re-applied (pruned on an earlier call and sent "
            "with the same bytes again, so the prompt cache keeps its prefix; D11)",
            "flushes: memory-flush turns (the model is asked to save notes before history is compacted)",
            "compactions, overflow recoveries: summaries written; provider 'too long' errors recovered from",
        ),
    )


DEMO_STEPS: list[DemoStep] = [
    DemoStep(name="samples", title="Bundled samples", run=_step_samples),
    DemoStep(name="open", title="Open transcripts", run=_step_open),
    DemoStep(name="context", title="Context rebuild and token estimates", run=_step_context),
    DemoStep(name="tree", title="Session trees", run=_step_tree),
    DemoStep(name="doctor", title="Doctor checks and repair", run=_step_doctor),
    DemoStep(name="append", title="Durable append", run=_step_append),
    DemoStep(name="compaction", title="Compaction plan and extractive summary", run=_step_compaction),
    DemoStep(name="pruning", title="Cache-TTL pruning", run=_step_pruning),
    DemoStep(name="silent", title="Silent replies", run=_step_silent),
    DemoStep(name="runtime", title="Agent loop through SessionRuntime (the main job)", run=_step_runtime),
]
"""The demo, in order. Later features append their step here."""
