"""
The facts the concept diagrams draw, computed by the library itself (issue #17: diagrams that stay true).

Each function builds a small session with sessionkeeper's public API (an in-memory transcript, the real
compactor, pruner and runtime, a fake clock and a scripted model) and returns plain data: which entries
exist, which are on the path to the leaf, where ``prepare_compaction`` puts the cut point, what
``Pruner.prune`` sends, what ``SessionRuntime`` did turn by turn. ``render.py`` only draws that data, so a
change in the library's behaviour changes the pictures at the next docs build.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio

from sessionkeeper import (
    AssistantMessage,
    CompactionEntry,
    CompactionSettings,
    Compactor,
    LabelEntry,
    MessageEntry,
    ModelInfo,
    RuntimeSettings,
    SessionRuntime,
    SessionStore,
    TextContent,
    ToolCall,
    ToolResultMessage,
    TranscriptManager,
    Usage,
    UserMessage,
    estimate_tokens,
    prepare_compaction,
)
from sessionkeeper.hooks import HookEvent
from sessionkeeper.pruning import Pruner, PruningSettings
from sessionkeeper.testing import FakeClock, ScriptedModelClient, ScriptedTurn, capture_events


START_MS = 1_767_240_000_000  # 2026-01-01 04:00 UTC


@dataclass(frozen=True)
class Node:
    """One entry as drawn: its id, parent, kind (role or entry type), a short text and its flags."""

    id: str
    parent: str | None
    kind: str
    text: str
    on_path: bool = False
    label: str | None = None
    tokens: int = 0


@dataclass(frozen=True)
class TreeScene:
    """The transcript tree: every entry, the current leaf, and the compaction on the path."""

    nodes: list[Node]
    leaf: str
    first_kept: str | None
    compaction: str | None
    context_kinds: list[str]
    context_texts: list[str]


@dataclass(frozen=True)
class CutScene:
    """The path before a compaction, each message's estimated tokens, and the plan's cut point."""

    nodes: list[Node]
    keep_recent_tokens: int
    first_kept_index: int
    turn_start_index: int
    is_split_turn: bool


@dataclass(frozen=True)
class PruneScene:
    """One request before and after cache-TTL pruning: per message its kind, chars before and after."""

    kinds: list[str]
    chars_before: list[int]
    chars_after: list[int]
    soft_trimmed: list[int]
    hard_cleared: list[int]
    protected_from: int
    window_chars: int
    soft_ratio: float
    hard_ratio: float


@dataclass(frozen=True)
class TurnScene:
    """A session run through ``SessionRuntime``: context tokens per model call and what happened when."""

    calls: list[int]
    events: list[tuple[int, str]]
    flush_threshold: int
    compaction_threshold: int
    window: int
    hook_events: list[tuple[int, list[str]]] = field(default_factory=list)


def _reply(*content: object, stop: str = "stop") -> AssistantMessage:
    return AssistantMessage(
        content=list(content),  # type: ignore[arg-type]
        api="anthropic-messages",
        provider="anthropic",
        model="claude-sonnet-4-5",
        stop_reason=stop,  # type: ignore[arg-type]
        timestamp=START_MS,
    )


def _turn(n: int, ask: str, path: str, answer: str, result_lines: int, *, scale: int = 1) -> list[object]:
    call = ToolCall(id=f"call_{n}", name="read", arguments={"path": path})
    return [
        UserMessage(content=ask, timestamp=START_MS),
        _reply(call, stop="toolUse"),
        ToolResultMessage(
            tool_call_id=f"call_{n}",
            tool_name="read",
            timestamp=START_MS,
            content=[
                TextContent(
                    text=f"# {path}\n" + "def step(state):\n    return state\n" * result_lines * scale
                )
            ],
        ),
        _reply(TextContent(text=answer)),
    ]


_TURNS = [
    ("Why does test_parse fail?", "tests/test_parse.py", "It expects a trailing newline.", 40),
    ("Show me the parser.", "src/parser.py", "parse() drops the last line.", 60),
    ("Fix it.", "src/parser.py", "Fixed: the last line is kept.", 30),
    ("Run the tests again.", "tests/test_parse.py", "All 12 tests pass.", 20),
]


def _kind(entry: object) -> str:
    if isinstance(entry, MessageEntry):
        return entry.message.role
    return str(getattr(entry, "type", "entry"))


def _text(entry: object) -> str:
    if isinstance(entry, MessageEntry):
        message = entry.message
        content = getattr(message, "content", "")
        if isinstance(content, str):
            return content
        parts = []
        for block in content:
            if isinstance(block, TextContent):
                parts.append(block.text.splitlines()[0] if block.text else "")
            elif isinstance(block, ToolCall):
                parts.append(f"read {block.arguments.get('path')}")
        return " ".join(parts)
    if isinstance(entry, CompactionEntry):
        return "summary of the turns before"
    if isinstance(entry, LabelEntry):
        return f"label {entry.label}"
    return ""


def _nodes(tm: TranscriptManager) -> list[Node]:
    path = {e.id for e in tm.get_branch()}
    labels = tm.labels
    nodes = []
    for entry in tm.entries():
        tokens = estimate_tokens(entry.message) if isinstance(entry, MessageEntry) else 0
        nodes.append(
            Node(
                id=entry.id,
                parent=entry.parent_id,
                kind=_kind(entry),
                text=_text(entry),
                on_path=entry.id in path,
                label=labels.get(entry.id),
                tokens=tokens,
            )
        )
    return nodes


async def _session(clock: FakeClock) -> tuple[TranscriptManager, str]:
    tm = TranscriptManager.in_memory(cwd="/work", clock=clock)
    first_answer = ""
    for n, turn in enumerate(_TURNS[:2], start=1):
        entries = await tm.append_messages(_turn(n, *turn))  # type: ignore[arg-type]
        if n == 1:
            first_answer = entries[-1].id
            await tm.append_label(entries[0].id, "start")
    return tm, first_answer


def tree_scene() -> TreeScene:
    """A session with a side branch, a label and a compaction on the current path."""

    async def build() -> TreeScene:
        clock = FakeClock(now_ms=START_MS)
        tm, first_answer = await _session(clock)
        tm.branch(first_answer)  # go back: the user asks something else after the first answer
        await tm.append_messages(
            _turn(9, "Explain the grammar instead.", "docs/grammar.md", "It is LL(1).", 10)
        )
        for n, turn in enumerate(_TURNS[2:], start=3):
            await tm.append_messages(_turn(n, *turn))  # type: ignore[arg-type]
        compactor = Compactor(settings=CompactionSettings(), clock=clock)
        result = await compactor.compact(tm, keep_recent_tokens=300)
        assert result.entry is not None
        await tm.append_messages(
            [UserMessage(content="Commit it.", timestamp=START_MS), _reply(TextContent(text="Committed."))]
        )
        context = tm.build_session_context()
        return TreeScene(
            nodes=_nodes(tm),
            leaf=str(tm.leaf_id),
            first_kept=result.entry.first_kept_entry_id,
            compaction=result.entry.id,
            context_kinds=[m.role for m in context.messages],
            context_texts=[_message_text(m) for m in context.messages],
        )

    return anyio.run(build)


def _message_text(message: object) -> str:
    if getattr(message, "role", "") == "compactionSummary":
        return "summary of the turns before"
    return _text(MessageEntry(id="x", parent_id=None, timestamp="", message=message))  # type: ignore[arg-type]


def cut_scene(keep_recent_tokens: int = 800) -> CutScene:
    """The current path of a four-turn session and where ``prepare_compaction`` cuts it."""

    async def build() -> CutScene:
        tm = TranscriptManager.in_memory(cwd="/work", clock=FakeClock(now_ms=START_MS))
        for n, turn in enumerate(_TURNS, start=1):
            await tm.append_messages(_turn(n, *turn))  # type: ignore[arg-type]
        branch = tm.get_branch()
        plan = prepare_compaction(branch, keep_recent_tokens=keep_recent_tokens)
        assert plan is not None
        return CutScene(
            nodes=_nodes(tm),
            keep_recent_tokens=keep_recent_tokens,
            first_kept_index=plan.first_kept_entry_index,
            turn_start_index=plan.turn_start_index,
            is_split_turn=plan.is_split_turn,
        )

    return anyio.run(build)


def prune_scene(window_tokens: int = 5_000) -> PruneScene:
    """One request of the four-turn session, pruned with OpenClaw's defaults in a small window."""

    async def build() -> PruneScene:
        tm = TranscriptManager.in_memory(cwd="/work", clock=FakeClock(now_ms=START_MS))
        for n, turn in enumerate(_TURNS, start=1):
            await tm.append_messages(_turn(n, *turn, scale=4))  # type: ignore[arg-type]
        messages = tm.build_session_context().messages
        settings = PruningSettings(mode="cache-ttl", min_prunable_tool_chars=2_000)
        result = Pruner(settings=settings).prune(
            messages,
            context_window_tokens=window_tokens,
            last_cache_touch_at=None,  # no cache marker: the TTL counts as expired (D11)
            provider="anthropic",
            model_id="claude-sonnet-4-5",
            api="anthropic-messages",
            now_ms=START_MS,
        )
        assistants = [i for i, m in enumerate(messages) if m.role == "assistant"]
        ids = [getattr(m, "tool_call_id", None) for m in messages]
        return PruneScene(
            kinds=[m.role for m in messages],
            chars_before=[len(_chars(m)) for m in messages],
            chars_after=[len(_chars(m)) for m in result.messages],
            soft_trimmed=[ids.index(i) for i in result.soft_trimmed],
            hard_cleared=[ids.index(i) for i in result.hard_cleared],
            protected_from=assistants[-settings.keep_last_assistants],
            window_chars=window_tokens * 4,
            soft_ratio=settings.soft_trim_ratio,
            hard_ratio=settings.hard_clear_ratio,
        )

    return anyio.run(build)


def _chars(message: object) -> str:
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    return "".join(getattr(b, "text", "") or str(getattr(b, "arguments", "")) for b in content)


def turn_scene(turns: int = 12, window: int = 16_000) -> TurnScene:
    """A session of ``turns`` turns through ``SessionRuntime`` with a scripted model and a fake clock."""

    async def build() -> TurnScene:
        clock = FakeClock(now_ms=START_MS)
        flushes: list[str] = []

        async def flush(request: object) -> str | None:
            flushes.append("flush")
            return "NO_REPLY"

        runtime = SessionRuntime(
            SessionStore.in_memory(clock=clock),
            model=ModelInfo(
                provider="openai", model_id="gpt-5", api="openai-completions", context_window=window
            ),
            settings=RuntimeSettings(compaction=CompactionSettings()),
            model_client=ScriptedModelClient(
                handler=lambda request: "## Goal\nKeep going.\n## Next Steps\nMore."
            ),
            memory_flush_runner=flush,
            clock=clock,
        )
        flush_at, compact_at = runtime.flush_policy.thresholds(context_window=window)
        session = await runtime.open("agent:main:main")
        calls: list[int] = []
        events: list[tuple[int, str]] = []
        hook_events: list[tuple[int, list[str]]] = []
        body = "Please look at the next part of the parser and explain it. " * 30
        for n in range(turns):
            with capture_events(runtime.hooks, HookEvent) as captured:
                plan = await runtime.before_model_call(session, prompt=f"Part {n + 1}. {body}")
                if plan.memory_flush is not None:
                    events.append((len(calls), "memory flush"))
                if plan.compaction is not None and plan.compaction.compacted:
                    events.append((len(calls), "compaction (before the turn)"))
                calls.append(plan.context_tokens)
                reply = ScriptedTurn(
                    text="Explained. " * 120, usage=Usage(input=plan.context_tokens, output=330)
                )
                message = reply.to_message(provider="openai", model="gpt-5", api="openai-completions")
                outcome = await runtime.after_turn(session, messages=[message])
                if outcome.compaction is not None and outcome.compaction.compacted:
                    events.append((len(calls) - 1, "compaction (after the turn)"))
            if captured.names:
                hook_events.append((n, list(captured.names)))
        return TurnScene(
            calls=calls,
            events=events,
            flush_threshold=flush_at,
            compaction_threshold=compact_at,
            window=window,
            hook_events=hook_events,
        )

    return anyio.run(build)
