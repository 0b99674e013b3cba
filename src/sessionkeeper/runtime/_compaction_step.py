"""
The runtime's compaction step (D4, B11, OpenClaw §5.7-5.8): run the :class:`Compactor` on a session,
measure the context after it, count it on the store entry, and adopt a rotated successor transcript.
"""

from __future__ import annotations

from typing import Any, Literal

from sessionkeeper.compaction import Compactor, SuccessorTranscript
from sessionkeeper.exceptions import CompactionCancelled, CompactionError
from sessionkeeper.runtime._budget import estimate_context_usage
from sessionkeeper.runtime._overflow import SyntheticTokenCount
from sessionkeeper.runtime._parts import RuntimeParts
from sessionkeeper.runtime._runtime_session import RuntimeSession, int_or_zero, patch_session_entry
from sessionkeeper.runtime._runtime_types import CompactionOutcome, CompactionTriggerName
from sessionkeeper.runtime._transcripts import TranscriptSource
from sessionkeeper.runtime._triggers import compaction_progress
from sessionkeeper.store import SessionEntry


__all__ = ("CompactionStep",)


class CompactionStep:
    """
    Compacts the sessions of one runtime.

    Args:
        parts: The runtime (settings, model, sizes, store, hooks, clock, model client, providers).
        transcripts: Opens successor transcripts and follows other writers' rotations.
    """

    def __init__(self, parts: RuntimeParts, *, transcripts: TranscriptSource) -> None:
        self._parts = parts
        self._transcripts = transcripts

    def refused(self, *, trigger: CompactionTriggerName, tokens: int) -> CompactionOutcome:
        """The outcome of an automatic compaction the B11 guard refused (``compaction_ineffective``)."""
        return CompactionOutcome(
            trigger=trigger,
            status="compaction_ineffective",
            tokens_before=tokens,
            tokens_after=tokens,
            threshold=self._parts.compaction_threshold,
            effective=False,
        )

    async def auto_compact(
        self,
        session: RuntimeSession,
        *,
        trigger: CompactionTriggerName,
        tokens_before: int,
        synthetic: SyntheticTokenCount | None = None,
    ) -> CompactionOutcome:
        """
        An automatic compaction: a cancelled or failed one is an outcome, not an error; one that ran (or
        was joined) is noted on the session with whether it restored headroom (B11).

        Raises:
            TimeoutError: Longer than ``timeoutSeconds``.
            OSError: A write failed.
        """
        try:
            outcome = await self.compact(
                session, trigger=trigger, tokens_before=tokens_before, synthetic=synthetic
            )
        except (CompactionCancelled, CompactionError) as err:
            return CompactionOutcome(
                trigger=trigger,
                status="cancelled" if isinstance(err, CompactionCancelled) else "failed",
                tokens_before=tokens_before,
                tokens_after=tokens_before,
                threshold=self._parts.compaction_threshold,
                effective=False,
                synthetic_tokens=synthetic,
            )
        if outcome.compacted or outcome.status == "joined":  # joined: another run compacted it for us
            session.note_auto_compaction(effective=outcome.effective)
        return outcome

    async def compact(
        self,
        session: RuntimeSession,
        *,
        trigger: CompactionTriggerName,
        tokens_before: int,
        instructions: str | None = None,
        keep_recent_tokens: int | None = None,
        synthetic: SyntheticTokenCount | None = None,
    ) -> CompactionOutcome:
        """
        Compact ``session`` now and report the numbers with their sources (issue #11).

        Raises:
            CompactionCancelled: A ``session_before_compact`` hook cancelled (nothing written).
            CompactionError: The summary could not be made.
            TimeoutError: Longer than ``timeoutSeconds``.
            OSError: A write failed.
        """
        parts = self._parts
        compactor = Compactor(
            settings=parts.settings.compaction,
            model_client=parts.model_client,
            providers=parts.providers,
            hooks=parts.hooks,
            context_window=parts.context_window,
            clock=parts.clock,
            max_output_tokens=parts.model.max_output_tokens,
            token_counter=parts.token_counter,
        )
        reason: Literal["manual", "threshold", "overflow"] = (
            "threshold" if trigger == "preflight" else "overflow" if trigger == "timeout" else trigger
        )
        # issue #11: report each number with its source (provider usage vs chars/4 estimate)
        before_context = session.current_context()
        before_source = (
            synthetic.source if synthetic is not None else estimate_context_usage(before_context).source
        )
        before_estimate = sum(parts.token_counter.count_message(message) for message in before_context)
        result = await compactor.compact(
            session.transcript,
            reason=reason,
            keep_recent_tokens=keep_recent_tokens,
            custom_instructions=instructions,
            session_key=session.session_key,
            will_retry=trigger in ("overflow", "timeout"),
        )
        threshold = parts.compaction_threshold
        joined = result.status == "joined"
        if result.status == "superseded" or (joined and result.successor is None):
            await self._transcripts.follow_successor(
                session
            )  # the other writer's compaction may have rotated
        # "superseded" / "joined": another writer's compaction landed on this branch (picked up by the
        # landing, or waited for: D10), so the context did shrink: measure it again.
        measured = (
            estimate_context_usage(session.transcript.build_session_context().messages)
            if result.compacted or result.status in ("superseded", "joined")
            else None
        )
        after = measured.tokens if measured is not None else tokens_before
        after_source = measured.source if measured is not None else before_source
        progress = compaction_progress(tokens_before=tokens_before, tokens_after=after, threshold=threshold)
        if result.compacted or (joined and result.successor is not None):
            session.note_context_compacted()
            await self._record(session, counted=result.compacted, after=after, successor=result.successor)
        return CompactionOutcome(
            trigger=trigger,
            status=result.status,
            tokens_before=tokens_before,
            tokens_after=after,
            threshold=threshold,
            effective=progress.effective,
            result=result,
            synthetic_tokens=synthetic,
            tokens_before_source=before_source,
            tokens_before_estimate=before_estimate,
            tokens_after_source=after_source,
        )

    async def _record(
        self, session: RuntimeSession, *, counted: bool, after: int, successor: SuccessorTranscript | None
    ) -> None:
        """
        Write the compaction on the store entry: ``totalTokens`` (fresh), ``compactionCount`` + 1 when
        ``counted`` (a joined run's compaction is counted by the run that wrote it), and with a
        ``successor`` (``truncateAfterCompaction``) its ``sessionId`` and ``sessionFile``.
        """
        store = self._parts.store
        fields: dict[str, Any] = {"totalTokens": after, "totalTokensFresh": True}

        def counted_fields(current: SessionEntry) -> dict[str, Any]:
            # incremented on the entry stored now, under the store's write serialisation: another
            # writer's compaction of this key since this session last read it is never lost
            if not counted:
                return fields
            return {**fields, "compactionCount": int_or_zero(current.compaction_count) + 1}

        if successor is None:
            updated = await store.update_entry(session.session_key, counted_fields)
            if updated is not None:
                session.adopt_entry(updated)
            else:  # the entry is gone: recreate it, as the other runtime writes do
                await patch_session_entry(
                    store, session, {**fields, **({"compactionCount": 1} if counted else {})}
                )
            return
        # truncateAfterCompaction (OpenClaw §5.8): the store entry adopts the successor's
        # sessionId and sessionFile (absolute, as OpenClaw writes it); the old file stays. A successor
        # in the store's transcript storage (issue 13) is named by its sessionId alone.
        rotated_id = session.transcript.session_id
        session.switch_transcript(await self._transcripts.open_successor(successor))
        fields["sessionId"] = successor.session_id
        if successor.path is not None:
            fields["sessionFile"] = str(successor.path)

        def adopt(current: SessionEntry) -> dict[str, Any] | None:
            # only while the entry still names the rotated session: after another writer's
            # reset (a new sessionId) the key is that session's, never taken back
            return counted_fields(current) if current.session_id == rotated_id else None

        entry = await store.update_entry(session.session_key, adopt)
        if entry is not None:
            session.adopt_entry(entry)
        else:  # another writer's rotation of the same file won: go on in its successor
            await self._transcripts.follow_successor(session)
