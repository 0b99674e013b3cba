"""
The demo's main job: replay the bundled sessions turn by turn through :class:`SessionRuntime`.

Each bundled pi transcript's longest root-to-leaf path is cut into turns (a user message and the replies
and tool results that follow it). Every turn goes through the calls an agent loop makes:
``before_model_call`` (prompt appended, memory flush / preflight compaction first when due, cache-TTL
pruning, hygiene), the model call (a :class:`~sessionkeeper.testing.ScriptedModelClient` that answers with
the recorded reply, reports our own estimate as usage, and rejects one request with a provider overflow
error), ``on_model_error`` when it fails, and ``after_turn`` (recorded replies, threshold compaction, TTL
marker, store counters). The context window is small (``DEMO_CONTEXT_WINDOW``) and the pruning thresholds
scaled down, so that pruning, a memory flush, a threshold compaction and an overflow recovery all happen.

The store (``sessions.json``) and the new transcripts are written under ``<workdir>/runtime``; every
transcript is an ordinary pi v3 file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import msgspec

from sessionkeeper._model_client import ModelRequest, ModelResponse
from sessionkeeper.compaction import CompactionSettings
from sessionkeeper.pruning import PruneResult, PruningSettings, SoftTrimSettings
from sessionkeeper.runtime import (
    CompactionOutcome,
    ModelInfo,
    RuntimeSettings,
    SessionRuntime,
)
from sessionkeeper.store import SessionStore, agent_sessions_dir, session_entry_to_dict
from sessionkeeper.testing import FakeClock, ScriptedModelClient
from sessionkeeper.transcript import (
    AgentMessage,
    AssistantMessage,
    MessageEntry,
    ToolResultMessage,
    TranscriptManager,
    Usage,
    UserMessage,
    estimate_tokens,
)


__all__ = ("DEMO_CONTEXT_WINDOW", "DEMO_MODEL", "ReplayReport", "replay_sessions")

DEMO_CONTEXT_WINDOW = 12_000
"""The small window the demo runs with, in tokens (threshold 6000, flush at 2000 with the defaults)."""

DEMO_MODEL = ModelInfo(
    provider="anthropic",
    model_id="claude-sonnet-4-5",
    api="anthropic-messages",
    context_window=DEMO_CONTEXT_WINDOW,
)
"""A cache-TTL-eligible model, so pruning and the TTL marker apply."""

_OVERFLOW_SESSION = "full"
_OVERFLOW_AT_TOKENS = 2_400  # the provider rejects the first request of that size in that session
_TURN_GAP_S = 6 * 60  # more than the 5-minute TTL: the prompt cache expires between turns


@attrs.frozen(kw_only=True)
class ReplayReport:
    """
    What the replay did.

    Attributes:
        events: One row per notable event: ``{"session", "turn", "kind", "what", "why"}``; ``kind`` is
            ``pruning``, ``memory_flush``, ``overflow_recovery`` or ``<trigger>_compaction``.
        sessions: One row per replayed session (turns, counts, store counters).
        store: The sessions directory written.
        transcripts: The transcript written for each sample, by sample name.
        thresholds: ``{"contextWindow", "compactionThreshold", "memoryFlushThreshold"}``.
    """

    events: tuple[dict[str, Any], ...]
    sessions: tuple[dict[str, Any], ...]
    store: Path
    transcripts: dict[str, Path]
    thresholds: dict[str, int]


def _longest_path(manager: TranscriptManager) -> list[AgentMessage]:
    best: list[AgentMessage] = []
    parents = {e.parent_id for e in manager.entries()}
    for entry in manager.entries():
        if entry.id in parents:
            continue
        path: list[AgentMessage] = [
            e.message
            for e in manager.get_branch(entry.id)
            if isinstance(e, MessageEntry)
            and isinstance(e.message, UserMessage | AssistantMessage | ToolResultMessage)
        ]
        if len(path) > len(best):
            best = path
    return best


def _turns(messages: Sequence[AgentMessage]) -> list[tuple[UserMessage, list[AgentMessage]]]:
    turns: list[tuple[UserMessage, list[AgentMessage]]] = []
    for message in messages:
        if isinstance(message, UserMessage):
            turns.append((message, []))
        elif turns:
            turns[-1][1].append(message)
    return [turn for turn in turns if turn[1]]


def _settings() -> RuntimeSettings:
    return RuntimeSettings(
        compaction=CompactionSettings(keep_recent_tokens=1_500),
        pruning=PruningSettings(
            mode="cache-ttl",
            keep_last_assistants=1,
            soft_trim_ratio=0.1,
            hard_clear_ratio=0.3,
            min_prunable_tool_chars=500,
            soft_trim=SoftTrimSettings(max_chars=300, head_chars=100, tail_chars=100),
        ),
    )


def _compaction_event(session: str, turn: int, outcome: CompactionOutcome) -> dict[str, Any]:
    why = {
        "preflight": "the prompt would take the context over the threshold",
        "threshold": "after a successful turn the context was over window - reserve",
        "overflow": "the provider rejected the request as too long",
        "manual": "requested",
    }[outcome.trigger]
    return {
        "session": session,
        "turn": turn,
        "kind": f"{outcome.trigger}_compaction",
        "what": f"{outcome.trigger} compaction: {outcome.status}, {outcome.tokens_before} -> "
        f"{outcome.tokens_after} tokens",
        "why": f"{why} (threshold {outcome.threshold})",
    }


def _pruning_event(session: str, turn: int, pruning: PruneResult) -> dict[str, Any]:
    """
    A pruning row whose counts explain the shrink: the results this call soft-trimmed or hard-cleared and
    the ones pruned on an earlier call and re-applied from the transcript's
    ``sessionkeeper.pruned-tool-results`` records with the same bytes (deviation D11, docs/pruning.md).
    """
    soft, hard, again = len(pruning.soft_trimmed), len(pruning.hard_cleared), len(pruning.reapplied)
    reasons = []
    if soft or hard:
        reasons.append("prompt cache TTL expired and old tool results weigh on the window")
    if again:
        reasons.append(
            "results pruned on an earlier call are sent pruned again, with the same bytes, so the provider's "
            "prompt cache keeps its prefix (D11)"
        )
    return {
        "session": session,
        "turn": turn,
        "kind": "pruning",
        "what": f"pruned {soft} soft-trimmed, {hard} hard-cleared, {again} re-applied tool results "
        f"({pruning.chars_before} -> {pruning.chars_after} chars)",
        "why": "; ".join(reasons),
    }


async def replay_sessions(samples: dict[str, Path], workdir: Path) -> ReplayReport:
    """
    Replay each sample (name -> transcript path) through one :class:`SessionRuntime`.

    Args:
        samples: The bundled transcripts (copies; they are only read).
        workdir: Where ``runtime/agents/main/sessions`` is written.
    """
    clock = FakeClock()
    sessions_dir = agent_sessions_dir(workdir / "runtime")
    state: dict[str, Any] = {"overflow_sent": False, "replies": {}}

    def answer(request: ModelRequest) -> ModelResponse:
        purpose = request.metadata.get("purpose")
        if purpose == "memory-flush":
            return ModelResponse(text="NO_REPLY")
        key = request.metadata.get("sessionKey", "")
        tokens = int(request.metadata.get("tokens", "0"))
        if key.endswith(_OVERFLOW_SESSION) and tokens >= _OVERFLOW_AT_TOKENS and not state["overflow_sent"]:
            state["overflow_sent"] = True
            raise RuntimeError(
                f"prompt is too long: {tokens + DEMO_CONTEXT_WINDOW} tokens > {DEMO_CONTEXT_WINDOW} maximum"
            )
        return ModelResponse(text=state["replies"].get(key, ""))

    client = ScriptedModelClient(handler=answer)

    async def flush(request: Any) -> str | None:
        reply = await client.complete(
            ModelRequest(
                system_prompt=request.plan.system_prompt,
                messages=(*request.messages, UserMessage(content=request.plan.prompt, timestamp=0)),
                max_tokens=1024,
                metadata={"purpose": "memory-flush", "sessionKey": request.session_key},
            )
        )
        return reply.text

    events: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    transcripts: dict[str, Path] = {}
    numbers = iter(range(1, 1_000_000))

    def session_id() -> str:
        """Numbered session ids (valid UUIDs): two demo runs write the same files (issue 11)."""
        return f"00000000-0000-4000-8000-{next(numbers):012d}"

    async with SessionStore.open(sessions_dir, clock=clock, new_session_id=session_id) as store:
        runtime = SessionRuntime(
            store,
            model=DEMO_MODEL,
            settings=_settings(),
            memory_flush_runner=flush,
            clock=clock,
            cwd="/demo",
        )
        flush_at, compact_at = runtime.flush_policy.thresholds(context_window=runtime.context_window)
        for name, path in sorted(samples.items()):
            source = await TranscriptManager.open(path)
            turns = _turns(_longest_path(source))
            key = f"agent:main:demo-{name}"
            session = await runtime.open(key, body="demo")
            transcripts[name] = session.transcript.path or path
            counts = {"pruned": 0, "flushes": 0, "compactions": 0, "overflowRecoveries": 0, "silent": 0}
            for number, (prompt, replies) in enumerate(turns, start=1):
                clock.advance(_TURN_GAP_S)
                plan = await runtime.before_model_call(
                    session, prompt=msgspec.structs.replace(prompt, timestamp=clock.now_ms())
                )
                if plan.memory_flush is not None:
                    counts["flushes"] += 1
                    events.append(
                        {
                            "session": name,
                            "turn": number,
                            "kind": "memory_flush",
                            "what": f"memory flush ({'ok' if plan.memory_flush.ok else 'failed'}, reply "
                            f"{'silent' if plan.memory_flush.reply_silent else 'delivered'})",
                            "why": f"projected context {plan.memory_flush.context_tokens} >= flush "
                            f"threshold {plan.memory_flush.threshold} ({plan.memory_flush.reason})",
                        }
                    )
                if plan.compaction is not None:
                    counts["compactions"] += 1
                    events.append(_compaction_event(name, number, plan.compaction))
                if plan.pruning is not None and plan.pruning.changed:
                    counts["pruned"] += 1
                    events.append(_pruning_event(name, number, plan.pruning))
                text = "".join(getattr(b, "text", "") for m in replies for b in getattr(m, "content", ()))
                state["replies"][key] = text
                while True:
                    try:
                        await client.complete(
                            ModelRequest(
                                system_prompt="",
                                messages=plan.messages,
                                max_tokens=1024,
                                metadata={
                                    "sessionKey": key,
                                    "turn": str(number),
                                    "tokens": str(plan.context_tokens),
                                },
                            )
                        )
                    except RuntimeError as err:
                        recovery = await runtime.on_model_error(session, err)
                        counts["overflowRecoveries"] += 1
                        events.append(
                            {
                                "session": name,
                                "turn": number,
                                "kind": "overflow_recovery",
                                "what": f"overflow recovery: {recovery.action} (attempt {recovery.attempt})",
                                "why": f"provider said: {err}",
                            }
                        )
                        if recovery.memory_flush is not None:
                            counts["flushes"] += 1
                        if recovery.compaction is not None:
                            counts["compactions"] += 1
                            events.append(_compaction_event(name, number, recovery.compaction))
                        plan = await runtime.before_model_call(session)
                        continue
                    break
                recorded = _with_usage(replies, plan.context_tokens, clock.now_ms())
                outcome = await runtime.after_turn(session, messages=recorded)
                if outcome.silent:
                    counts["silent"] += 1
                if outcome.compaction is not None:
                    counts["compactions"] += 1
                    events.append(_compaction_event(name, number, outcome.compaction))
            entry = session_entry_to_dict(session.entry)
            rows.append(
                {
                    "session": name,
                    "turns": len(turns),
                    **counts,
                    "compactionCount": entry.get("compactionCount", 0),
                    "totalTokens": entry.get("totalTokens"),
                    "memoryFlushCompactionCount": entry.get("memoryFlushCompactionCount"),
                    "entries": len(session.transcript.entries()),
                }
            )
    return ReplayReport(
        events=tuple(events),
        sessions=tuple(rows),
        store=sessions_dir,
        transcripts=transcripts,
        thresholds={
            "contextWindow": DEMO_CONTEXT_WINDOW,
            "compactionThreshold": compact_at,
            "memoryFlushThreshold": flush_at,
        },
    )


def _with_usage(replies: Sequence[AgentMessage], prompt_tokens: int, now_ms: int) -> list[AgentMessage]:
    """
    The recorded replies with usage as the scripted model reports it: each reply's input is our estimate
    of what was sent for that call (the prompt plus the turn's earlier replies and tool results).
    """
    out: list[AgentMessage] = []
    sent = prompt_tokens
    for message in replies:
        if isinstance(message, AssistantMessage):
            output = estimate_tokens(message)
            usage = Usage(input=sent, output=output, total_tokens=sent + output)
            message = msgspec.structs.replace(message, usage=usage, timestamp=now_ms)
        out.append(message)
        sent += estimate_tokens(message)
    return out
