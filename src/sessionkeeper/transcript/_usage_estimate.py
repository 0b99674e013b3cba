"""
The context-token count with pi's staleness rule: the last provider usage, unless it predates the latest
compaction (pi-format spec §12 and §15.1).

Lives in the transcript layer so that the CLI's ``context`` command counts a context exactly as
:class:`~sessionkeeper.runtime.SessionRuntime` does without importing the runtime (issue 11: compare like
with like; each command imports only what it runs). Re-exported by :mod:`sessionkeeper.runtime`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import attrs

from sessionkeeper._estimate import calculate_context_tokens, estimate_tokens, reported_usage
from sessionkeeper.records import (
    AgentMessage,
    CompactionSummaryMessage,
    UnknownMessage,
)


__all__ = ("ContextTokenEstimate", "estimate_context_usage")


@attrs.frozen(kw_only=True)
class ContextTokenEstimate:
    """
    The best estimate of a context's size.

    Attributes:
        tokens: ``usage_tokens + trailing_tokens``, in tokens.
        usage_tokens: The provider-reported context size of the newest usable reply (0 when none).
        trailing_tokens: pi's estimate (``ceil(chars / 4)``) of the messages after that reply, or of every
            message when no usage is usable.
        last_usage_index: Index of the reply whose usage was used, or ``None``.
        source: ``"usage"`` when a provider usage anchors the count, ``"estimate"`` otherwise.
        stale_usage_skipped: Replies with usage that were ignored because they predate the latest compaction.
    """

    tokens: int
    usage_tokens: int
    trailing_tokens: int
    last_usage_index: int | None
    source: Literal["usage", "estimate"]
    stale_usage_skipped: int = 0


def _timestamp(message: AgentMessage) -> float | None:
    if isinstance(message, UnknownMessage):
        value = message.raw.get("timestamp")
    else:
        value = getattr(message, "timestamp", None)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _usable_usage_tokens(message: AgentMessage) -> int | None:
    """Context tokens reported by an assistant reply, or ``None`` (error/aborted, no usage, all zero)."""
    usage = reported_usage(message)
    tokens = calculate_context_tokens(usage) if usage is not None else 0
    return tokens if tokens > 0 else None


def estimate_context_usage(
    messages: Sequence[AgentMessage], /, *, compacted_at_ms: float | None = None
) -> ContextTokenEstimate:
    """
    The best token count for a context: the last provider-reported usage plus estimates of newer messages.

    pi's ``estimateContextTokens`` (spec §12), with pi's staleness rule of §15.1 applied: a reply whose
    ``timestamp`` is at or before the latest compaction (the newest ``compactionSummary`` message in
    ``messages``, or ``compacted_at_ms``) reported a context that included the history since summarised,
    so its usage is skipped. Replies with ``stopReason`` ``error``/``aborted`` and all-zero usage are
    skipped too. Without a usable reply, every message is estimated.

    Args:
        messages: The context messages (as :func:`~sessionkeeper.build_session_context` returns them).
        compacted_at_ms: Time of the latest compaction in ms since the epoch, when the caller knows it and
            the summary message is not in ``messages``.

    Returns:
        The estimate, with the index of the usage anchor.
    """
    boundary = compacted_at_ms
    for message in messages:
        if isinstance(message, CompactionSummaryMessage):
            stamp = _timestamp(message)
            if stamp is not None and (boundary is None or stamp > boundary):
                boundary = stamp
    skipped = 0
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        usage_tokens = _usable_usage_tokens(message)
        if usage_tokens is None:
            continue
        stamp = _timestamp(message)
        if boundary is not None and (stamp is None or stamp <= boundary):
            skipped += 1
            continue
        trailing = sum(estimate_tokens(m) for m in messages[index + 1 :])
        return ContextTokenEstimate(
            tokens=usage_tokens + trailing,
            usage_tokens=usage_tokens,
            trailing_tokens=trailing,
            last_usage_index=index,
            source="usage",
            stale_usage_skipped=skipped,
        )
    total = sum(estimate_tokens(m) for m in messages)
    return ContextTokenEstimate(
        tokens=total,
        usage_tokens=0,
        trailing_tokens=total,
        last_usage_index=None,
        source="estimate",
        stale_usage_skipped=skipped,
    )
