"""
Parent fork sizing: how large a parent session is, and whether a child may fork it (OpenClaw spec §4.3;
``session-fork.ts``, ``session-fork.runtime.ts``, ``session-utils.fs.ts`` usage snapshots).

Pure rules (:func:`parent_fork_tokens`, :func:`decide_parent_fork`, :func:`usage_of_record`) plus the read
of a loaded transcript's tail (:func:`read_transcript_usage`). :mod:`._fork` applies the decision.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs
import msgspec

from sessionkeeper.store._entry import SessionEntry
from sessionkeeper.transcript import TranscriptManager


__all__ = (
    "PARENT_FORK_MAX_TOKENS",
    "ParentForkDecision",
    "TranscriptUsage",
    "decide_parent_fork",
    "parent_fork_tokens",
    "read_transcript_usage",
    "usage_of_record",
)

PARENT_FORK_MAX_TOKENS: Final = 100_000
"""The fixed fork cap, in tokens (OpenClaw ``DEFAULT_PARENT_FORK_MAX_TOKENS``; not configurable since the
legacy ``session.parentForkMaxTokens`` was removed)."""

_BYTES_PER_TOKEN: Final = 4
_TAIL_MAX_BYTES: Final = 1024 * 1024
_TAIL_MAX_LINES: Final = 1000
_MAX_USAGE_LINE_BYTES: Final = 256 * 1024  # OpenClaw skips larger lines (MAX_TRANSCRIPT_PARSE_LINE_BYTES)


@attrs.frozen(kw_only=True)
class TranscriptUsage:
    """
    The latest usage on a transcript's active branch (OpenClaw ``readLatestRecentSessionUsage...``).

    Attributes:
        context_state: ``"available"`` / ``"unavailable"`` from the reply's ``usage.contextUsage``, or
            ``None`` when the reply has none (pi transcripts).
        context_total_tokens: ``contextUsage.totalTokens`` when available, in tokens.
        input_tokens: ``usage.input`` (or a provider alias), in tokens; ``None`` when absent.
        output_tokens: ``usage.output``, in tokens.
        cache_read: ``usage.cacheRead``, in tokens.
        cache_write: ``usage.cacheWrite``, in tokens.
        trailing_bytes: UTF-8 bytes of the branch entries after that reply, one newline each included.
    """

    context_state: Literal["available", "unavailable"] | None = None
    context_total_tokens: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read: int | None = None
    cache_write: int | None = None
    trailing_bytes: int = 0


@attrs.frozen(kw_only=True)
class ParentForkDecision:
    """
    Whether a child may fork its parent (OpenClaw ``resolveParentForkDecision``).

    Attributes:
        action: ``"fork"``, or ``"skip"`` when ``parent_tokens > max_tokens``.
        parent_tokens: The parent's token count (see :func:`parent_fork_tokens`), ``None`` when unknown
            (an unknown size forks).
        max_tokens: The cap, in tokens.
    """

    action: Literal["fork", "skip"]
    parent_tokens: int | None
    max_tokens: int = PARENT_FORK_MAX_TOKENS

    @property
    def message(self) -> str:
        """OpenClaw's notice for a skipped fork (empty for a fork)."""
        if self.action == "fork":
            return ""
        return (
            f"Parent context is too large to fork ({self.parent_tokens}/{self.max_tokens} tokens); "
            "starting with isolated context instead."
        )


# ------------------------------------------------------------------------------------------ pure rules


def _positive(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value <= 0:
        return None
    return math.floor(value)


def _max_positive(*values: Any) -> int | None:
    found = [v for v in (_positive(x) for x in values) if v is not None]
    return max(found) if found else None


def parent_fork_tokens(
    parent: SessionEntry, *, usage: TranscriptUsage | None, transcript_bytes: int | None
) -> int | None:
    """
    The parent's token count for the fork cap (OpenClaw ``resolveParentForkTokenCountRuntime``, §4.3).

    In order: the persisted ``totalTokens`` when fresh (``totalTokensFresh`` not ``false``; a fresh 0
    counts); else the transcript's last context usage plus ``ceil(trailing bytes / 4)``; else
    ``max(prompt + output, cached totalTokens, ceil(file bytes / 4))`` where prompt = input + cacheRead +
    cacheWrite of the last reply; else ``max(cached totalTokens, ceil(file bytes / 4))``.

    Args:
        parent: The parent's entry.
        usage: The latest usage on the parent's branch (:func:`read_transcript_usage`), if any.
        transcript_bytes: Size of the parent's transcript file in bytes, if it exists.

    Returns:
        Tokens, or ``None`` when nothing is known.
    """
    total = parent.total_tokens
    if isinstance(total, int) and total >= 0 and parent.total_tokens_fresh is not False:
        return total
    cached = _positive(total)
    by_bytes = _positive(math.ceil(transcript_bytes / _BYTES_PER_TOKEN)) if transcript_bytes else None
    if usage is not None:
        transcript_tokens: int | None = None
        if usage.context_state == "available":
            trailing = math.ceil(usage.trailing_bytes / _BYTES_PER_TOKEN)
            transcript_tokens = _positive((usage.context_total_tokens or 0) + trailing)
            if transcript_tokens is not None:
                return transcript_tokens
        elif usage.context_state is None:
            prompt_sum = (usage.input_tokens or 0) + (usage.cache_read or 0) + (usage.cache_write or 0)
            prompt = _positive(prompt_sum)
            if prompt is not None:
                transcript_tokens = prompt + (_positive(usage.output_tokens) or 0)
        if transcript_tokens is not None:
            return _max_positive(transcript_tokens, cached, by_bytes)
    return _max_positive(cached, by_bytes)


def decide_parent_fork(
    parent: SessionEntry,
    *,
    usage: TranscriptUsage | None,
    transcript_bytes: int | None,
    max_tokens: int = PARENT_FORK_MAX_TOKENS,
) -> ParentForkDecision:
    """
    Fork, or skip because the parent is over the cap (``parent_tokens > max_tokens``; OpenClaw §4.3).

    Args:
        parent: The parent's entry.
        usage: See :func:`parent_fork_tokens`.
        transcript_bytes: See :func:`parent_fork_tokens`.
        max_tokens: The cap, in tokens (default :data:`PARENT_FORK_MAX_TOKENS`, OpenClaw's fixed value).
    """
    tokens = parent_fork_tokens(parent, usage=usage, transcript_bytes=transcript_bytes)
    action: Literal["fork", "skip"] = "skip" if tokens is not None and tokens > max_tokens else "fork"
    return ParentForkDecision(action=action, parent_tokens=tokens, max_tokens=max_tokens)


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return 0 if value <= 0 else int(value)


def _first(raw: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        value = raw.get(key)
        if value is not None:
            return value
    return None


def _first_nested(raw: Mapping[str, Any], keys: tuple[str, ...], sub: str) -> Any:
    for key in keys:
        inner = raw.get(key)
        if isinstance(inner, dict) and inner.get(sub) is not None:
            return inner.get(sub)
    return None


def usage_of_record(record: Any) -> TranscriptUsage | None:
    """
    The usage snapshot of one transcript record, or ``None`` when it carries none (OpenClaw
    ``extractUsageSnapshotFromTranscriptLine`` + ``hasTranscriptUsage``, ``normalizeUsage``).

    Only assistant (or role-less) ``message`` records count; ``usage`` is read from the message, else
    from the record. Provider aliases (``input_tokens``, ``prompt_tokens``, ``cache_read_input_tokens``,
    OpenAI's ``cached_tokens`` inside the input, ...) are understood.
    """
    if not isinstance(record, dict):
        return None
    message = record.get("message")
    if not isinstance(message, dict):
        return None
    role = message.get("role")
    if isinstance(role, str) and role != "assistant":
        return None
    raw = message.get("usage") if isinstance(message.get("usage"), dict) else record.get("usage")
    if not isinstance(raw, dict):
        return None
    openai_cached = _first_nested(raw, ("input_tokens_details", "prompt_tokens_details"), "cached_tokens")
    cache_read_raw = _first(raw, "cacheRead", "cache_read", "cache_read_input_tokens", "cached_tokens")
    cache_read = _count(cache_read_raw if cache_read_raw is not None else openai_cached)
    raw_input = _first(raw, "input", "inputTokens", "input_tokens", "promptTokens", "prompt_tokens")
    openai_style = raw.get("cached_tokens") is not None or openai_cached is not None
    if openai_style and cache_read is not None and isinstance(raw_input, int | float):
        raw_input = raw_input - cache_read  # OpenAI counts cached tokens inside the prompt
    context = raw.get("contextUsage")
    state: Literal["available", "unavailable"] | None = None
    context_total: int | None = None
    if isinstance(context, dict) and context.get("state") == "unavailable":
        state = "unavailable"
    elif isinstance(context, dict) and context.get("state") == "available":
        prompt, total = _count(context.get("promptTokens")), _count(context.get("totalTokens"))
        if prompt is not None and total is not None and total >= prompt:
            state, context_total = "available", total
    usage = TranscriptUsage(
        context_state=state,
        context_total_tokens=context_total,
        input_tokens=_count(raw_input),
        output_tokens=_count(
            _first(raw, "output", "outputTokens", "output_tokens", "completionTokens", "completion_tokens")
        ),
        cache_read=cache_read,
        cache_write=_count(_first(raw, "cacheWrite", "cache_write", "cache_creation_input_tokens")),
    )
    cost = _first_nested(raw, ("cost",), "total")
    has_cost = _count(cost) is not None and cost >= 0
    has_usage = (
        has_cost
        or state is not None
        or any(
            v is not None
            for v in (usage.input_tokens, usage.output_tokens, usage.cache_read, usage.cache_write)
        )
    )
    return usage if has_usage else None


# ------------------------------------------------------------------------------------------ transcript


def read_transcript_usage(transcript: TranscriptManager) -> TranscriptUsage | None:
    """
    The latest usage on the active branch (root -> leaf) of a loaded transcript, with the bytes of the
    branch entries after it (OpenClaw ``extractLatestUsageFromTranscriptLines``).

    Like OpenClaw, only the recent part is looked at: the last 1000 branch entries within 1 MiB of lines
    from the leaf; an older usage is not found (the caller then falls back to byte estimates). A line over
    256 KiB is never parsed for usage (it counts as trailing bytes), as in OpenClaw.

    Returns:
        The usage (see :func:`usage_of_record`) with ``trailing_bytes`` set, or ``None``.
    """
    index = transcript.index
    trailing = 0
    positions = index.path_positions(transcript.leaf_id)
    for pos in reversed(positions[-_TAIL_MAX_LINES:]):
        line = index.line_bytes(pos)
        if trailing + len(line) + 1 > _TAIL_MAX_BYTES:
            break
        if index.kinds[pos] == "message" and len(line) <= _MAX_USAGE_LINE_BYTES:
            try:
                usage = usage_of_record(msgspec.json.decode(line))
            except msgspec.DecodeError:
                usage = None
            if usage is not None:
                return attrs.evolve(usage, trailing_bytes=trailing)
        trailing += len(line) + 1
    return None
