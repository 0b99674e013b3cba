"""
The pre-compaction memory flush: when to run it, what to ask, and what to record.

Rules: OpenClaw spec §6 (settings, threshold, forced flush by transcript size, once per compaction cycle,
skip rules, prompts, model override without fallback, failure counting and the "exhausted" rule), the seeds'
"pre-compaction memory flush" section, DESIGN D4 (the flush threshold is ``contextWindow - effectiveReserve -
softThresholdTokens``, always below the compaction threshold; the flush runs first) and field reports B13
(threshold maths, the cycle recorded at flush start, no nested flush) and B14 (a compaction about to run,
overflow recovery included, flushes first; a failed flush does not stop it).

Pure: the runtime passes counters and sizes in, and writes the returned store patch itself.
"""

from __future__ import annotations

import logging
import math
import zoneinfo
from typing import Any, Final, Literal, Self

import attrs

from sessionkeeper._config import Config, parse_bool, parse_byte_size, setting, structure_settings
from sessionkeeper._user_zone import user_timezone_name
from sessionkeeper.compaction import CompactionSettings, compaction_threshold, effective_reserve_tokens
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.runtime._budget import DEFAULT_CONTEXT_WINDOW_TOKENS
from sessionkeeper.runtime._flush_prompts import (
    DEFAULT_MEMORY_FLUSH_PROMPT,
    DEFAULT_MEMORY_FLUSH_SYSTEM_PROMPT,
    ensure_hints,
    time_line,
)


__all__ = (
    "DEFAULT_MEMORY_FLUSH_PROMPT",
    "DEFAULT_MEMORY_FLUSH_SYSTEM_PROMPT",
    "MEMORY_FLUSH_MAX_FAILURES",
    "MemoryFlushDecision",
    "MemoryFlushModel",
    "MemoryFlushPlan",
    "MemoryFlushPolicy",
    "MemoryFlushRecord",
    "MemoryFlushSettings",
)

_log = logging.getLogger("sessionkeeper.runtime")

MEMORY_FLUSH_MAX_FAILURES: Final = 3
"""Consecutive failed flushes after which the cycle is given up ("exhausted", OpenClaw §6)."""
_MAX_ERROR_CHARS: Final = 200
_DEFAULT_FORCE_FLUSH_BYTES: Final = 2 * 1024 * 1024


def _non_negative_int(raw: object, key: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw) or raw < 0:
        raise ConfigError(f"expected a non-negative number of tokens, got {raw!r}", key=key)
    return int(raw // 1)


def _bytes(raw: object, key: str) -> int:
    return parse_byte_size(raw, key=key)


def _optional_str(raw: object, key: str) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise ConfigError(f"expected a string, got {raw!r}", key=key)
    return raw.strip() or None


def _timezone(raw: object, key: str) -> str | None:
    name = _optional_str(raw, key)
    if name is None:
        return None
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as err:
        raise ConfigError(f"unknown time zone {name!r}", key=key) from err
    return name


@attrs.frozen(kw_only=True)
class MemoryFlushSettings:
    """
    ``agents.defaults.compaction.memoryFlush`` (OpenClaw §6).

    Attributes:
        enabled: ``enabled`` (default ``True``); ``False`` means no flush.
        soft_threshold_tokens: ``softThresholdTokens``: how far below the compaction threshold the flush
            fires, in tokens (default 4000; a value of 0 acts as 1 so the flush stays strictly first, B13).
        force_flush_transcript_bytes: ``forceFlushTranscriptBytes``: a transcript at least this large forces
            the flush even with stale token counts, in bytes (``"2mb"`` strings accepted; default 2 MiB, the
            code's default — the docs say unset; ``0`` disables).
        model: ``model``: ``"provider/model"`` for the flush turn, used exactly, with no fallback chain; a
            bare model id keeps the session's provider. ``None`` = the session's model.
        prompt: ``prompt``: a custom user prompt (the safety hints and a NO_REPLY hint are appended when
            missing). ``None`` = :data:`DEFAULT_MEMORY_FLUSH_PROMPT`.
        system_prompt: ``systemPrompt``: a custom extra system prompt (same appending). ``None`` =
            :data:`DEFAULT_MEMORY_FLUSH_SYSTEM_PROMPT`.
        user_timezone: ``agents.defaults.userTimezone`` (IANA name) for the ``memory/YYYY-MM-DD.md`` date and
            the "Current time:" line; ``None`` = the host's local time zone.
    """

    enabled: bool = setting(default=True, parse=parse_bool)
    soft_threshold_tokens: int = setting(default=4000, parse=_non_negative_int)
    force_flush_transcript_bytes: int = setting(default=_DEFAULT_FORCE_FLUSH_BYTES, parse=_bytes)
    model: str | None = setting(default=None, parse=_optional_str)
    prompt: str | None = setting(default=None, parse=_optional_str)
    system_prompt: str | None = setting(default=None, parse=_optional_str)
    user_timezone: str | None = setting(default=None, key="userTimezone", parse=_timezone)

    @classmethod
    def from_config(cls, config: Config) -> Self:
        """
        Build from ``agents.defaults.compaction.memoryFlush`` (and ``agents.defaults.userTimezone``).

        An unknown ``agents.defaults.userTimezone`` is ignored with a WARNING on
        ``sessionkeeper.runtime`` (the host's zone is used), as the reset policy does (DESIGN D12).

        Raises:
            ConfigError: A value is invalid; the error names the dotted key.
        """
        prefix = "agents.defaults.compaction.memoryFlush"
        settings = structure_settings(cls, config.section(prefix), prefix=prefix)
        zone = user_timezone_name(
            config.section("agents.defaults").get("userTimezone"), log=_log, purpose="the memory flush"
        )
        return attrs.evolve(settings, user_timezone=zone) if zone else settings


@attrs.frozen(kw_only=True)
class MemoryFlushModel:
    """
    The model the flush turn must use (OpenClaw §6): exact, never falling back to other models.

    Attributes:
        provider: Provider id, or ``None`` to keep the session's provider.
        model: Model id.
        fallbacks: Always empty: the flush must not move to a paid chat model silently.
    """

    provider: str | None
    model: str
    fallbacks: tuple[str, ...] = ()

    @classmethod
    def parse(cls, value: str, /) -> MemoryFlushModel:
        """``"provider/model"`` (split at the first ``/``) or a bare model id."""
        text = value.strip()
        head, sep, tail = text.partition("/")
        if sep and head.strip() and tail.strip():
            return cls(provider=head.strip(), model=tail.strip())
        return cls(provider=None, model=text)


@attrs.frozen(kw_only=True)
class MemoryFlushPlan:
    """
    What to run for one flush turn (a silent agent turn, ``trigger: "memory"``).

    Attributes:
        prompt: The user prompt of the turn (not stored as a user message: ``transcript_prompt`` is empty).
        system_prompt: The extra system prompt: the run's own extra system prompt, then the flush one.
        relative_path: ``memory/YYYY-MM-DD.md``, dated in the user's time zone; create it (append-open, inside
            the workspace) before the turn.
        date_stamp: The ``YYYY-MM-DD`` used.
        model: The model override, or ``None``.
        transcript_prompt: ``""``: the prompt is not recorded as a user turn.
        silent_expected: ``True``: the reply is expected to be ``NO_REPLY`` and is never delivered.
    """

    prompt: str
    system_prompt: str
    relative_path: str
    date_stamp: str
    model: MemoryFlushModel | None
    transcript_prompt: str = ""
    silent_expected: bool = True


MemoryFlushReason = Literal[
    "threshold",
    "transcript_size",
    "pending_compaction",
    "disabled",
    "no_session",
    "flush_in_progress",
    "unsupported_host",
    "heartbeat",
    "read_only_workspace",
    "already_flushed",
    "below_threshold",
    "no_token_count",
]


@attrs.frozen(kw_only=True)
class MemoryFlushDecision:
    """
    Whether to run the flush now, and why.

    Attributes:
        run: Run the flush turn before anything else (before any compaction, D4).
        reason: ``"threshold"``, ``"transcript_size"`` (forced) or ``"pending_compaction"`` when ``run``;
            otherwise the skip reason: ``"disabled"``, ``"no_session"``, ``"flush_in_progress"`` (the flush
            turn itself; no nested flush, B13), ``"unsupported_host"`` (e.g. CLI backends),
            ``"heartbeat"``, ``"read_only_workspace"`` (``workspaceAccess`` ``ro``/``none``),
            ``"already_flushed"`` (once per compaction cycle), ``"below_threshold"``, ``"no_token_count"``.
        threshold: The flush threshold in tokens (may be <= 0: then only size or a pending compaction flush).
        compaction_threshold: The compaction threshold in tokens (always > ``threshold``).
        context_tokens: The count the decision used, in tokens, if any.
    """

    run: bool
    reason: MemoryFlushReason
    threshold: int
    compaction_threshold: int
    context_tokens: int | None = None

    @property
    def forced(self) -> bool:
        """``True`` when the flush runs for a reason other than the token threshold."""
        return self.run and self.reason != "threshold"


@attrs.frozen(kw_only=True)
class MemoryFlushRecord:
    """
    The ``SessionEntry`` fields to write after a flush turn (OpenClaw §6), plus what to tell the runtime.

    Attributes:
        memory_flush_at: ``memoryFlushAt`` (ms since epoch) to set, or ``None`` to leave unchanged.
        memory_flush_compaction_count: ``memoryFlushCompactionCount`` to set, or ``None`` to leave unchanged.
        memory_flush_failure_count: ``memoryFlushFailureCount`` to set.
        memory_flush_last_failed_at: ``memoryFlushLastFailedAt`` (ms), or ``None`` to clear it.
        memory_flush_last_failure_error: ``memoryFlushLastFailureError`` (<= 200 chars), or ``None`` to clear.
        compaction_count: ``compactionCount`` to set when a compaction completed during the flush turn.
        exhausted: Three consecutive failures: the cycle is marked flushed; if the next preflight compaction
            does not compact, the runtime resets (rotates) the session (OpenClaw §6).
        diagnostic: ``"memoryFlushSkipped"`` when a compaction goes ahead without the flush (B14), else
            ``None``.
        notice: A message for the user, or ``None``.
    """

    memory_flush_at: int | None = None
    memory_flush_compaction_count: int | None = None
    memory_flush_failure_count: int = 0
    memory_flush_last_failed_at: int | None = None
    memory_flush_last_failure_error: str | None = None
    compaction_count: int | None = None
    exhausted: bool = False
    diagnostic: Literal["memoryFlushSkipped"] | None = None
    notice: str | None = None

    def to_entry_patch(self) -> dict[str, Any]:
        """
        The fields as ``sessions.json`` names them (camelCase).

        A value of ``None`` means "delete the field"; fields to leave unchanged are absent.
        """
        patch: dict[str, Any] = {
            "memoryFlushFailureCount": self.memory_flush_failure_count,
            "memoryFlushLastFailedAt": self.memory_flush_last_failed_at,
            "memoryFlushLastFailureError": self.memory_flush_last_failure_error,
        }
        if self.memory_flush_at is not None:
            patch["memoryFlushAt"] = self.memory_flush_at
        if self.memory_flush_compaction_count is not None:
            patch["memoryFlushCompactionCount"] = self.memory_flush_compaction_count
        if self.compaction_count is not None:
            patch["compactionCount"] = self.compaction_count
        return patch


@attrs.frozen(kw_only=True)
class MemoryFlushPolicy:
    """
    The memory-flush rules for one agent (OpenClaw §6, D4, B13, B14). Pure: no I/O.

    Attributes:
        settings: The flush settings.
        compaction: The compaction settings (the flush threshold sits ``soft_threshold_tokens`` below the
            compaction threshold computed from them).
    """

    settings: MemoryFlushSettings = attrs.field(factory=MemoryFlushSettings)
    compaction: CompactionSettings = attrs.field(factory=CompactionSettings)

    @classmethod
    def from_config(cls, config: Config) -> Self:
        """
        Build from ``agents.defaults.compaction`` and its ``memoryFlush`` block.

        Raises:
            ConfigError: A value is invalid; the error names the dotted key.
        """
        return cls(
            settings=MemoryFlushSettings.from_config(config),
            compaction=CompactionSettings.from_config(config),
        )

    def thresholds(
        self, *, context_window: int | None, max_output_tokens: int | None = None
    ) -> tuple[int, int]:
        """
        ``(flush_threshold, compaction_threshold)`` in tokens (D4).

        ``compaction = contextWindow - effectiveReserve`` (the compaction package's
        ``effective_reserve_tokens``: OpenClaw's floor and caps, and ``max_output_tokens`` when given,
        B09); ``flush = compaction - max(1, softThresholdTokens)``. With the defaults and a 200000
        window: 176000 and 180000. The flush threshold is therefore strictly below the compaction
        threshold, unlike OpenClaw 2026.7.35, whose flush used ``reserveTokensFloor`` and could come
        after compaction (B13).

        Args:
            context_window: The model's window in tokens; ``None``/0 = 200000 (D5).
            max_output_tokens: The reply budget the host requests, if known.
        """
        window = context_window if context_window and context_window > 0 else DEFAULT_CONTEXT_WINDOW_TOKENS
        compact_at = compaction_threshold(
            self.compaction, context_window=window, max_output_tokens=max_output_tokens
        )
        return compact_at - max(1, self.settings.soft_threshold_tokens), compact_at

    def effective_reserve(self, *, context_window: int | None, max_output_tokens: int | None = None) -> int:
        """The effective reserve in tokens (see :meth:`thresholds`)."""
        window = context_window if context_window and context_window > 0 else DEFAULT_CONTEXT_WINDOW_TOKENS
        return effective_reserve_tokens(
            self.compaction, context_window=window, max_output_tokens=max_output_tokens
        )

    def decide(
        self,
        *,
        context_tokens: int | None,
        context_window: int | None,
        compaction_count: int | None,
        memory_flush_compaction_count: int | None,
        active_transcript_bytes: int | None = None,
        max_output_tokens: int | None = None,
        pending_compaction: bool = False,
        has_session: bool = True,
        in_flush_turn: bool = False,
        host_supports_flush: bool = True,
        is_heartbeat: bool = False,
        workspace_access: Literal["rw", "ro", "none"] = "rw",
    ) -> MemoryFlushDecision:
        """
        Decide whether to run the flush before this turn (or before a compaction about to run).

        Skip rules, in order: disabled; no session entry; the flush turn itself is running (B13: no nested
        flush); the host has no flush support (OpenClaw: CLI backends); heartbeat turns; a sandboxed
        workspace that is not ``rw``; already flushed in this compaction cycle (``memoryFlushCompactionCount
        == compactionCount``, a missing ``compactionCount`` being 0). Then the flush runs when a compaction
        is about to run (``pending_compaction``: threshold, preflight, overflow or timeout compaction; B14,
        D4 "the flush always runs first"), when ``context_tokens >= flush threshold > 0``, or when the
        live window (the latest compaction, its kept range and what follows) is at least
        ``forceFlushTranscriptBytes`` (> 0).

        Args:
            context_tokens: The projected context in tokens (last usage + newer messages + the incoming
                prompt), or ``None`` when unknown.
            context_window: The model's window in tokens (``None`` = 200000).
            compaction_count: ``SessionEntry.compactionCount`` (``None`` = 0).
            memory_flush_compaction_count: ``SessionEntry.memoryFlushCompactionCount`` (``None`` = never).
            active_transcript_bytes: Bytes of the live window the next request carries, if known: on the
                path to the leaf, the latest compaction entry, its kept range (from ``firstKeptEntryId``)
                and everything after it; the whole path when it has none
                (``SessionRuntime.active_transcript_bytes``, issue #15 item 11). Refinement of OpenClaw,
                which measures the whole file: an append-only file stays over the limit after a
                compaction, so OpenClaw's forced flush fires again at the start of every cycle, on nothing
                but the summary (B14).
            max_output_tokens: The reply budget the host requests, if known (raises the reserve, B09).
            pending_compaction: A compaction is about to run in this turn.
            has_session: A ``SessionEntry`` exists for the session key.
            in_flush_turn: This check runs inside the flush turn.
            host_supports_flush: The host can run a silent flush turn at all.
            is_heartbeat: The turn is a heartbeat.
            workspace_access: The sandbox's workspace access (``"rw"`` when not sandboxed).
        """
        flush_at, compact_at = self.thresholds(
            context_window=context_window, max_output_tokens=max_output_tokens
        )

        def skip(reason: MemoryFlushReason) -> MemoryFlushDecision:
            return MemoryFlushDecision(
                run=False,
                reason=reason,
                threshold=flush_at,
                compaction_threshold=compact_at,
                context_tokens=context_tokens,
            )

        def run(reason: MemoryFlushReason) -> MemoryFlushDecision:
            return attrs.evolve(skip(reason), run=True)

        if not self.settings.enabled:
            return skip("disabled")
        if not has_session:
            return skip("no_session")
        if in_flush_turn:
            return skip("flush_in_progress")
        if not host_supports_flush:
            return skip("unsupported_host")
        if is_heartbeat:
            return skip("heartbeat")
        if workspace_access != "rw":
            return skip("read_only_workspace")
        if memory_flush_compaction_count is not None and memory_flush_compaction_count == (
            compaction_count or 0
        ):
            return skip("already_flushed")
        if pending_compaction:
            return run("pending_compaction")
        if context_tokens is not None and context_tokens > 0 and flush_at > 0 and context_tokens >= flush_at:
            return run("threshold")
        force = self.settings.force_flush_transcript_bytes
        if force > 0 and active_transcript_bytes is not None and active_transcript_bytes >= force:
            return run("transcript_size")
        return skip("below_threshold" if context_tokens else "no_token_count")

    def plan(
        self, *, now_ms: int, extra_system_prompt: str | None = None, current_provider: str | None = None
    ) -> MemoryFlushPlan:
        """
        Build the flush turn (OpenClaw §6): prompts with ``YYYY-MM-DD`` replaced by today's date in the user's
        time zone, a "Current time:" line appended to the prompt (unless it has one), the target
        ``memory/YYYY-MM-DD.md`` and the exact model override.

        Custom prompts get each missing safety hint (target file, append only, read-only reference files)
        appended, and a NO_REPLY hint when they do not mention ``NO_REPLY``.

        Args:
            now_ms: The current time, ms since epoch.
            extra_system_prompt: The run's own extra system prompt, placed before the flush system prompt.
            current_provider: The session's provider, kept when the override is a bare model id.
        """
        line, stamp = time_line(now_ms, self.settings.user_timezone)
        prompt = ensure_hints(self.settings.prompt or DEFAULT_MEMORY_FLUSH_PROMPT).replace(
            "YYYY-MM-DD", stamp
        )
        prompt = prompt if "Current time:" in prompt else f"{prompt.rstrip()}\n{line}"
        system = ensure_hints(self.settings.system_prompt or DEFAULT_MEMORY_FLUSH_SYSTEM_PROMPT)
        system = system.replace("YYYY-MM-DD", stamp)
        if extra_system_prompt and extra_system_prompt.strip():
            system = f"{extra_system_prompt.strip()}\n\n{system}"
        model: MemoryFlushModel | None = None
        if self.settings.model:
            model = MemoryFlushModel.parse(self.settings.model)
            if model.provider is None and current_provider:
                model = attrs.evolve(model, provider=current_provider)
        return MemoryFlushPlan(
            prompt=prompt,
            system_prompt=system,
            relative_path=f"memory/{stamp}.md",
            date_stamp=stamp,
            model=model,
        )

    def record_success(
        self, *, compaction_count_at_start: int | None, now_ms: int, compacted_during_flush: bool = False
    ) -> MemoryFlushRecord:
        """
        The store update after a successful flush (OpenClaw §6, B13).

        ``memoryFlushCompactionCount`` is the ``compactionCount`` from *before* the flush turn, even when a
        compaction completed during it (then ``compactionCount`` is incremented), so the next cycle still
        flushes. Failure fields are cleared.

        Args:
            compaction_count_at_start: ``compactionCount`` when the flush started (``None`` = 0).
            now_ms: The current time, ms since epoch (``memoryFlushAt``).
            compacted_during_flush: A compaction completed during the flush turn.
        """
        start = compaction_count_at_start or 0
        return MemoryFlushRecord(
            memory_flush_at=now_ms,
            memory_flush_compaction_count=start,
            memory_flush_failure_count=0,
            compaction_count=start + 1 if compacted_during_flush else None,
        )

    def record_failure(
        self,
        *,
        error: BaseException | str,
        previous_failure_count: int | None,
        compaction_count: int | None,
        now_ms: int,
        pending_compaction: bool = False,
    ) -> MemoryFlushRecord:
        """
        The store update after a failed flush (OpenClaw §6, B14). Do not call it for a cancellation.

        The failure count goes up by one and the error (at most 200 chars) and time are recorded. After
        :data:`MEMORY_FLUSH_MAX_FAILURES` consecutive failures the state is *exhausted*: the cycle is marked
        flushed (``memoryFlushAt``, ``memoryFlushCompactionCount = compactionCount``) and the user is told.
        When a compaction is about to run (``pending_compaction``), it goes ahead: the cycle is closed the
        same way so the flush is not retried on the post-compaction summary, and the record carries the
        ``memoryFlushSkipped`` diagnostic.

        Args:
            error: What failed.
            previous_failure_count: ``memoryFlushFailureCount`` before this failure (``None`` = 0).
            compaction_count: ``compactionCount`` now (``None`` = 0).
            now_ms: The current time, ms since epoch.
            pending_compaction: A compaction follows in this turn.
        """
        failures = max(0, previous_failure_count or 0) + 1
        message = (str(error).strip() or type(error).__name__) if isinstance(error, BaseException) else error
        if len(message) > _MAX_ERROR_CHARS:
            message = message[: _MAX_ERROR_CHARS - 1] + "…"
        exhausted = failures >= MEMORY_FLUSH_MAX_FAILURES
        closes_cycle = exhausted or pending_compaction
        return MemoryFlushRecord(
            memory_flush_at=now_ms if closes_cycle else None,
            memory_flush_compaction_count=(compaction_count or 0) if closes_cycle else None,
            memory_flush_failure_count=failures,
            memory_flush_last_failed_at=now_ms,
            memory_flush_last_failure_error=message,
            exhausted=exhausted,
            diagnostic="memoryFlushSkipped" if pending_compaction else None,
            notice=(
                f"Memory flush failed {failures} times in a row; it is skipped until the next compaction."
                if exhausted
                else None
            ),
        )
