"""
What a compaction run did: :class:`CompactionResult`, its status, and its log record.
"""

from __future__ import annotations

import logging
from typing import Any, Literal, TypeAlias

import attrs

from sessionkeeper.compaction._prepare import CompactionPreparation
from sessionkeeper.compaction._successor import SuccessorTranscript
from sessionkeeper.hooks import (
    HookError,
)
from sessionkeeper.records import key_to_json
from sessionkeeper.transcript import (
    CompactionEntry,
    CompactionSummaryMessage,
    TranscriptManager,
    estimate_tokens,
)


__all__ = ("CompactionResult", "CompactionStatus", "describe_error", "joined_result", "log_result")

_log = logging.getLogger("sessionkeeper.compaction")

CompactionStatus: TypeAlias = Literal[
    "compacted",
    "empty",
    "already_compacted",
    "nothing_to_summarize",
    "pending_tool_results",
    "ineffective",
    "superseded",
    "joined",
]


@attrs.frozen(kw_only=True)
class CompactionResult:
    """
    What :meth:`Compactor.compact` did.

    Attributes:
        status: ``"compacted"`` (an entry was written); ``"empty"`` (no branch); ``"already_compacted"``
            (the branch ends with a compaction); ``"nothing_to_summarize"`` (DESIGN D2);
            ``"pending_tool_results"`` (the leaf's tool calls have no results yet, field report B06);
            ``"ineffective"`` (the summary would not be smaller than what it replaces, B11);
            ``"superseded"`` (while the summary was made, another compaction landed on the branch or
            the leaf moved to another branch: issue #7, see :mod:`._landing`); ``"joined"`` (another
            task or process was compacting this transcript: this run waited for it and uses its entry
            instead of summarising again, DESIGN D10, :mod:`._flight`). Only ``"compacted"`` writes
            anything.
        entry: The written entry (for ``"joined"``: the entry the other run wrote), or ``None``.
        preparation: The plan, or ``None`` when there was none.
        summary: The summary written (``"joined"``: the other run's), ``None`` when nothing was written.
        provider: Who made the summary: ``"hook"``, a provider id, ``"llm"``, ``"extractive"`` or
            ``"fallback"`` (OpenClaw's structured fallback when there is no real conversation).
        fallbacks: Why earlier links of the chain were skipped (``"provider x failed: ..."``).
        tokens_before: Context tokens before compaction (the plan's: provider usage plus chars/4 of the
            newer messages; ``tokens_before_source`` says which, issue #11).
        successor: The successor transcript written after the compaction when
            ``settings.truncate_after_compaction`` is on (OpenClaw spec §5.8); the caller adopts its
            session id and file. ``None`` otherwise (or for in-memory transcripts).
        hook_errors: Failures of notification handlers during the run (``compaction_start``,
            ``session_compact``, ``compaction_end``), in order: reported, not raised (pi spec §15.6:
            ``session_compact`` is an after-the-fact notification). Empty when every handler succeeded.
    """

    status: CompactionStatus
    entry: CompactionEntry | None = None
    preparation: CompactionPreparation | None = None
    summary: str | None = None
    provider: str | None = None
    fallbacks: tuple[str, ...] = ()
    tokens_before: int = 0
    successor: SuccessorTranscript | None = None
    hook_errors: tuple[HookError, ...] = ()

    @property
    def compacted(self) -> bool:
        """Whether this run wrote an entry (``"joined"`` results carry another run's entry)."""
        return self.status == "compacted" and self.entry is not None

    @property
    def tokens_before_source(self) -> str | None:
        """``"usage"`` or ``"estimate"``: how :attr:`tokens_before` was measured (``None``: no plan)."""
        return self.preparation.tokens_before_source if self.preparation is not None else None

    @property
    def tokens_after(self) -> int | None:
        """
        chars/4 estimate of the context this compaction leaves (the summary message plus the kept
        messages), in tokens; ``None`` when no summary was made. Compare it with the plan's
        ``tokens_before_estimate`` (also chars/4), not with a usage-anchored ``tokens_before``.
        """
        if self.summary is None or self.preparation is None:
            return None
        summary = CompactionSummaryMessage(
            summary=self.summary, tokens_before=self.tokens_before, timestamp=0
        )
        return estimate_tokens(summary) + self.preparation.kept_tokens

    def to_json(self) -> dict[str, Any]:
        """The ``compact --json`` shape (DESIGN "CLI JSON" item 6), camelCase."""
        out: dict[str, Any] = self.preparation.to_json() if self.preparation is not None else {}
        out.update(
            {
                "status": self.status,
                "entryId": self.entry.id if self.entry is not None else None,
                "provider": self.provider,
                "summaryChars": len(self.summary) if self.summary is not None else 0,
                "fallbacks": list(self.fallbacks),
                "tokensAfter": self.tokens_after,
                "tokensAfterSource": "estimate",
            }
        )
        if self.entry is not None:
            out["firstKeptEntryId"] = key_to_json(self.entry.first_kept_entry_id)  # numeric: a number
        if self.hook_errors:
            out["hookErrors"] = [error.to_json() for error in self.hook_errors]
        if self.successor is not None:
            path = self.successor.path
            out["successor"] = {
                "sessionId": self.successor.session_id,
                "sessionFile": str(path) if path is not None else None,
                "location": self.successor.location,
            }
        return out


def describe_error(err: BaseException) -> str:
    """``Type: message`` of an error, one line, at most 300 characters (for log records)."""
    text = " ".join(str(err).split())
    described = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return described if len(described) <= 300 else described[:299] + "…"


def joined_result(entry: CompactionEntry) -> CompactionResult:
    """The result of a run that found another writer's compaction landed: ``"joined"`` with its entry."""
    return CompactionResult(
        status="joined",
        entry=entry,
        summary=entry.summary,
        provider="hook" if entry.from_hook is True else None,
        tokens_before=entry.tokens_before if isinstance(entry.tokens_before, int) else 0,
    )


def log_result(
    result: CompactionResult, transcript: TranscriptManager, *, reason: str, session_key: str | None
) -> None:
    """One INFO record per written compaction; DEBUG for runs that wrote nothing (``docs/logging.md``)."""
    extra: dict[str, Any] = {
        "session_key": session_key,
        "session_id": transcript.session_id,
        "reason": reason,
        "status": result.status,
        "provider": result.provider,
        "tokens_before": result.tokens_before,
    }
    if result.compacted and result.entry is not None:
        extra |= {
            "entry_id": result.entry.id,
            "summary_chars": len(result.summary or ""),
            "fallbacks": list(result.fallbacks),
        }
        _log.info(
            "compacted %s (%s): %d tokens before, %s summary of %d chars",
            session_key or transcript.session_id,
            reason,
            result.tokens_before,
            result.provider,
            extra["summary_chars"],
            extra=extra,
        )
    else:
        if result.entry is not None:
            extra["entry_id"] = result.entry.id  # "joined": the entry another run wrote
        _log.debug(
            "compaction of %s wrote nothing: %s",
            session_key or transcript.session_id,
            result.status,
            extra=extra,
        )
