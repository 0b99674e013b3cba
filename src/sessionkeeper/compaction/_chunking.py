"""
Chunked summarisation planning (OpenClaw 2026.7.35 ``compaction-planning.ts``, OpenClaw spec §5.5).

Pure functions over message sequences: split history into token-share chunks that never separate a
tool call from its results, pack chunks under a summariser's window, cut out oversized messages, and
size chunks adaptively.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import attrs

from sessionkeeper._tokens import TokenCounter, token_memo
from sessionkeeper.compaction._cut import message_role
from sessionkeeper.records import (
    AgentMessage,
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
)


__all__ = (
    "BASE_CHUNK_RATIO",
    "CHUNK_FLOOR_TOKENS",
    "MIN_CHUNK_RATIO",
    "SAFETY_MARGIN",
    "SUMMARIZATION_OVERHEAD_TOKENS",
    "HistoryPrune",
    "MessageSizer",
    "OversizedPlan",
    "adaptive_chunk_ratio",
    "chunk_messages_by_max_tokens",
    "history_needs_pruning",
    "max_chunk_tokens",
    "message_sizer",
    "omitted_note",
    "oversized_plan",
    "prune_history_for_context_share",
    "split_messages_by_token_share",
)

BASE_CHUNK_RATIO = 0.4
"""Default share of the summariser's window per chunk."""
MIN_CHUNK_RATIO = 0.15
"""Lowest adaptive chunk ratio."""
SAFETY_MARGIN = 1.2
"""Margin for the chars/4 estimate's inaccuracy."""
SUMMARIZATION_OVERHEAD_TOKENS = 4096
"""Tokens kept for prompts, previous summary and tags in each summary request."""
CHUNK_FLOOR_TOKENS = 8192
"""D10: the smallest chunk budget when the request has room for it (OpenClaw's can fall to 1)."""

MessageSizer = TokenCounter | Callable[[AgentMessage], int]
"""What sizes a message: a :class:`~sessionkeeper.TokenCounter` (counted through its memo) or a function."""


def message_sizer(token_counter: MessageSizer | None) -> Callable[[AgentMessage], int]:
    """
    ``token_counter`` as a function of a message: a counter (``None``: pi's estimate) is counted
    through its memo (:func:`~sessionkeeper._tokens.token_memo`), a function is used as it is.
    """
    if token_counter is None or isinstance(token_counter, TokenCounter):
        return token_memo(token_counter).count_message
    return token_counter


def _tool_calls(message: AgentMessage) -> list[str]:
    if isinstance(message, AssistantMessage):
        return [block.id for block in message.content if isinstance(block, ToolCall)]
    if isinstance(message, UnknownMessage) and message.role == "assistant":
        content = message.raw.get("content")
        if isinstance(content, list):
            return [
                str(block.get("id"))
                for block in content
                if isinstance(block, dict) and block.get("type") == "toolCall" and block.get("id")
            ]
    return []


def _stop_reason(message: AgentMessage) -> str | None:
    if isinstance(message, AssistantMessage):
        return message.stop_reason
    if isinstance(message, UnknownMessage):
        value = message.raw.get("stopReason")
        return value if isinstance(value, str) else None
    return None


def _result_id(message: AgentMessage) -> str | None:
    if isinstance(message, ToolResultMessage):
        return message.tool_call_id or None
    if isinstance(message, UnknownMessage):
        value = message.raw.get("toolCallId")
        return value if isinstance(value, str) and value else None
    return None


def _normalize_parts(parts: int, count: int) -> int:
    if parts <= 1:
        return 1
    return min(max(1, parts), max(1, count))


def split_messages_by_token_share(
    messages: Sequence[AgentMessage], *, parts: int = 2, token_counter: MessageSizer | None = None
) -> list[list[AgentMessage]]:
    """
    Split ``messages`` into at most ``parts`` chunks of about equal token share (OpenClaw §5.5).

    A new chunk starts before a message that would push the current chunk over ``total / parts``,
    but only while no tool call is pending. An assistant message with tool calls (stop reason other
    than ``aborted``/``error``; those never hold a split open) opens a pending set and remembers the
    chunk start at that assistant; each matching tool result clears its id (a result without an id
    clears the set). When the set empties and the chunk is over target, the chunk is split at the
    remembered assistant. A block still pending at the end is kept whole in the last chunk.

    Args:
        messages: Messages in order.
        parts: Maximum number of chunks (default 2).
        token_counter: Sizes a message (default: pi's estimate).

    Returns:
        Non-empty chunks, in order; together they are exactly ``messages``.
    """
    if not messages:
        return []
    count = _normalize_parts(parts, len(messages))
    if count <= 1:
        return [list(messages)]
    count_message = message_sizer(token_counter)
    tokens = [count_message(message) for message in messages]
    target = sum(tokens) / count
    chunks: list[list[AgentMessage]] = []
    current: list[AgentMessage] = []
    current_tokens: list[int] = []
    pending: set[str] = set()
    pending_start: int | None = None

    def split_at_pending() -> None:
        nonlocal current, current_tokens, pending_start
        if pending_start is None or pending_start <= 0 or len(chunks) >= count - 1:
            return
        chunks.append(current[:pending_start])
        current = current[pending_start:]
        current_tokens = current_tokens[pending_start:]
        pending_start = 0

    for message, size in zip(messages, tokens, strict=True):
        if not pending and len(chunks) < count - 1 and current and sum(current_tokens) + size > target:
            chunks.append(current)
            current, current_tokens, pending_start = [], [], None
        current.append(message)
        current_tokens.append(size)
        role = message_role(message)
        if role == "assistant":
            calls = _tool_calls(message)
            keeps_pending = bool(calls) and _stop_reason(message) not in ("aborted", "error")
            pending = set(calls) if keeps_pending else set()
            pending_start = len(current) - 1 if keeps_pending else None
        elif role == "toolResult" and pending:
            result_id = _result_id(message)
            if result_id is None:
                pending = set()
                pending_start = None
            else:
                pending.discard(result_id)
            if not pending and len(chunks) < count - 1 and sum(current_tokens) > target:
                split_at_pending()
                pending_start = None
    if pending and sum(current_tokens) > target:
        split_at_pending()
    if current:
        chunks.append(current)
    return chunks


def chunk_messages_by_max_tokens(
    messages: Sequence[AgentMessage], *, max_tokens: int, token_counter: MessageSizer | None = None
) -> list[list[AgentMessage]]:
    """
    Greedy packing under ``floor(max_tokens / 1.2)`` tokens per chunk (OpenClaw §5.5).

    A single message larger than the limit becomes a chunk of its own (the summariser then cuts it,
    see :func:`oversized_plan`). ``token_counter`` sizes a message (default: pi's estimate; the LLM
    summariser passes the size of its serialised text, D10).
    """
    count = message_sizer(token_counter)
    if not messages:
        return []
    limit = max(1, math.floor(max_tokens / SAFETY_MARGIN))
    chunks: list[list[AgentMessage]] = []
    current: list[AgentMessage] = []
    current_tokens = 0
    for message in messages:
        size = count(message)
        if current and current_tokens + size > limit:
            chunks.append(current)
            current, current_tokens = [], 0
        current.append(message)
        current_tokens += size
        if size > limit:
            chunks.append(current)
            current, current_tokens = [], 0
    if current:
        chunks.append(current)
    return chunks


def adaptive_chunk_ratio(
    messages: Sequence[AgentMessage], *, context_window: int, token_counter: MessageSizer | None = None
) -> float:
    """
    Chunk ratio adapted to message size: 0.4, lowered towards 0.15 when messages are big.

    ``avg = total / n * 1.2 / window``; above 0.1 the ratio is ``max(0.15, 0.4 - min(2 * avg, 0.25))``.
    ``token_counter`` sizes a message (default: pi's estimate).
    """
    if not messages or context_window <= 0:
        return BASE_CHUNK_RATIO
    count = message_sizer(token_counter)
    total = sum(count(message) for message in messages)
    average = total / len(messages) * SAFETY_MARGIN / context_window
    if average > 0.1:
        reduction = min(average * 2, BASE_CHUNK_RATIO - MIN_CHUNK_RATIO)
        return max(MIN_CHUNK_RATIO, BASE_CHUNK_RATIO - reduction)
    return BASE_CHUNK_RATIO


def max_chunk_tokens(
    messages: Sequence[AgentMessage],
    *,
    context_window: int,
    room: int | None = None,
    token_counter: MessageSizer | None = None,
) -> int:
    """
    The token budget of one chunk.

    OpenClaw (§5.5): ``max(1, floor(window * adaptive ratio) - 4096)``, which falls to 1 in a 16000
    window with large messages (issue #11: one summariser call per message). With ``room`` (the
    tokens one request can carry beside its prompt, a chained previous summary and the reply, DESIGN
    D10) the budget is at least ``min(room, 8192)`` and at most ``room``; without it, OpenClaw's.

    Args:
        messages: The messages to chunk (for the adaptive ratio).
        context_window: The summariser's window, in tokens.
        room: What fits one request besides the prompt and the reply, in tokens; ``None``: not known.
        token_counter: Sizes a message (default: pi's estimate).
    """
    ratio = adaptive_chunk_ratio(messages, context_window=context_window, token_counter=token_counter)
    budget = max(1, math.floor(context_window * ratio) - SUMMARIZATION_OVERHEAD_TOKENS)
    if room is None:
        return budget
    room = max(1, room)
    return min(room, max(budget, min(room, CHUNK_FLOOR_TOKENS)))


@attrs.frozen(kw_only=True)
class OversizedPlan:
    """
    Messages split into summarisable ones and notes for those too big to summarise.

    Attributes:
        small_messages: Messages kept for the summary.
        oversized_notes: ``[Large <role> (~NK tokens) omitted from summary]`` per dropped message.
    """

    small_messages: tuple[AgentMessage, ...]
    oversized_notes: tuple[str, ...]


def oversized_plan(
    messages: Sequence[AgentMessage], *, context_window: int, token_counter: MessageSizer | None = None
) -> OversizedPlan:
    """
    Drop messages whose ``tokens * 1.2 > 0.5 * context_window`` (OpenClaw §5.5 fallback).

    ``token_counter`` sizes a message (default: pi's estimate).
    """
    count = message_sizer(token_counter)
    small: list[AgentMessage] = []
    notes: list[str] = []
    threshold = context_window * 0.5
    for message in messages:
        size = count(message)
        if size * SAFETY_MARGIN > threshold:
            notes.append(omitted_note(message_role(message) or "message", size))
        else:
            small.append(message)
    return OversizedPlan(small_messages=tuple(small), oversized_notes=tuple(notes))


def _js_round(value: float) -> int:
    return math.floor(value + 0.5)


def omitted_note(role: str, tokens: int) -> str:
    """
    The note for a message left out of a summary: OpenClaw's ``[Large <role> (~NK tokens) omitted
    from summary]`` (``N`` rounded half up) from 1000 tokens (rounded: 500); below that the size in
    tokens, ``(~120 tokens)``, where OpenClaw would print ``~0K`` (D10).
    """
    size = f"~{_js_round(tokens / 1000)}K tokens" if tokens >= 500 else f"~{max(0, tokens)} tokens"
    return f"[Large {role} ({size}) omitted from summary]"


@attrs.frozen(kw_only=True)
class HistoryPrune:
    """
    Result of :func:`prune_history_for_context_share`.

    Attributes:
        kept: The newest messages that fit the share, tool pairing repaired as OpenClaw does
            (``repairToolUseResultPairing``): results whose call was dropped are dropped, a displaced
            result moves back right after its call, a duplicate is dropped, and a call left without
            a result gets the synthetic error result.
        dropped: The oldest messages taken out, in order (summarised separately).
        dropped_chunks: How many token-share chunks were dropped.
        dropped_orphans: Results dropped by the pairing repair because their call was in a dropped
            chunk (OpenClaw's ``droppedOrphanCount``, summed over the chunks).
    """

    kept: tuple[AgentMessage, ...]
    dropped: tuple[AgentMessage, ...]
    dropped_chunks: int
    dropped_orphans: int = 0

    @property
    def dropped_messages(self) -> int:
        """``len(dropped) + dropped_orphans``: OpenClaw's ``droppedMessages``."""
        return len(self.dropped) + self.dropped_orphans


def prune_history_for_context_share(
    messages: Sequence[AgentMessage],
    *,
    context_window: int,
    max_history_share: float = 0.5,
    parts: int = 2,
    timestamp_ms: int | None = None,
    token_counter: MessageSizer | None = None,
) -> HistoryPrune:
    """
    Drop the oldest token-share chunks until the history fits ``context_window * max_history_share``
    (OpenClaw's ``pruneHistoryForContextShare``, spec §5.5), repairing tool pairing on what is kept
    after each drop with the full repair (:func:`~sessionkeeper.pruning.repair_tool_use_result_pairing`,
    as OpenClaw runs ``repairToolUseResultPairing``).

    Args:
        messages: The messages to summarise, oldest first.
        context_window: The summariser's window in tokens.
        max_history_share: Share of the window the kept history may use (0.5).
        parts: Token-share chunks per split (2).
        timestamp_ms: Timestamp of synthetic results, ms since epoch (OpenClaw: now); ``None`` uses
            the newest timestamp among ``messages``, so the result does not depend on the clock.
        token_counter: Sizes a message (default: pi's estimate).
    """
    # imported here: the pruning layer (below this one) is not needed to import compaction
    from sessionkeeper.pruning import repair_tool_use_result_pairing  # noqa: PLC0415

    budget = max(1, math.floor(context_window * max_history_share))
    kept = list(messages)
    dropped: list[AgentMessage] = []
    chunks_dropped = 0
    orphans = 0
    if timestamp_ms is None:
        stamps = [getattr(m, "timestamp", 0) for m in messages]
        timestamp_ms = max((t for t in stamps if isinstance(t, int) and not isinstance(t, bool)), default=0)
    count = _normalize_parts(parts, len(kept))
    size = message_sizer(token_counter)
    while kept and sum(size(m) for m in kept) > budget:
        chunks = split_messages_by_token_share(kept, parts=count, token_counter=size)
        if len(chunks) <= 1:
            break
        dropped.extend(chunks[0])
        chunks_dropped += 1
        repair = repair_tool_use_result_pairing(
            [m for chunk in chunks[1:] for m in chunk], timestamp_ms=timestamp_ms
        )
        orphans += repair.dropped_orphans
        kept = list(repair.messages)
    return HistoryPrune(
        kept=tuple(kept), dropped=tuple(dropped), dropped_chunks=chunks_dropped, dropped_orphans=orphans
    )


def history_needs_pruning(
    *,
    tokens_before: int,
    summarizable_tokens: int,
    context_window: int,
    max_history_share: float,
) -> bool:
    """
    OpenClaw's ``buildHistoryPrunePlan`` test: the new (kept) content
    ``max(0, tokens_before - summarizable)`` exceeds ``floor(window * share * 1.2)``.
    """
    new_content = max(0, math.floor(tokens_before - summarizable_tokens))
    return new_content > math.floor(context_window * max_history_share * SAFETY_MARGIN)
