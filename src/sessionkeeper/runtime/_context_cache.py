"""
The per-session caches of :class:`~sessionkeeper.runtime.SessionRuntime`: the last context it built, and
the prune records (D11) read so far.

Both only save work: a cache miss rebuilds from the transcript, so a cache never changes a result.
"""

from __future__ import annotations

from collections.abc import Sequence

from sessionkeeper.pruning import PruneLedger
from sessionkeeper.transcript import (
    AgentMessage,
    CustomEntry,
    MessageEntry,
    TranscriptEntry,
    TranscriptManager,
)


__all__ = ("ContextCache", "PruneLedgerCache")


class ContextCache:
    """
    The leaf id and the context messages (pi's ``buildSessionContext``) of the last context the runtime
    built for one session; valid while the transcript's leaf is that id.
    """

    __slots__ = ("_memo",)

    def __init__(self) -> None:
        self._memo: tuple[str | None, Sequence[AgentMessage]] | None = None

    def clear(self) -> None:
        """Forget the context (the session moved to another transcript)."""
        self._memo = None

    def remember(self, leaf_id: str | None, context: Sequence[AgentMessage]) -> None:
        """Remember ``context`` as the context of the branch ending at ``leaf_id``."""
        self._memo = (leaf_id, context)

    def current(self, transcript: TranscriptManager) -> Sequence[AgentMessage]:
        """The context messages of ``transcript``'s branch: the remembered one when the leaf is unchanged."""
        memo = self._memo
        if memo is not None and memo[0] == transcript.leaf_id:
            return memo[1]
        return transcript.build_session_context().messages

    def after_append(
        self, transcript: TranscriptManager, appended: Sequence[TranscriptEntry]
    ) -> Sequence[AgentMessage]:
        """
        The context right after ``appended`` (entries each a child of the previous), remembered.

        When they are message and ``custom`` entries extending the remembered leaf, the context is the
        remembered one plus their messages (a message entry adds its message, a ``custom`` entry nothing,
        pi's ``buildSessionContext``); otherwise it is rebuilt.
        """
        memo = self._memo
        leaf = transcript.leaf_id
        context: Sequence[AgentMessage]
        if memo is not None and not appended and memo[0] == leaf:
            context = memo[1]
        elif (
            memo is not None
            and appended
            and appended[0].parent_id == memo[0]
            and appended[-1].id == leaf
            and all(isinstance(entry, MessageEntry | CustomEntry) for entry in appended)
        ):
            context = (*memo[1], *(entry.message for entry in appended if isinstance(entry, MessageEntry)))
        else:
            context = transcript.build_session_context().messages
        self._memo = (leaf, context)
        return context

    def after_custom(self, transcript: TranscriptManager, record: TranscriptEntry) -> None:
        """Carry the context over a ``custom`` entry just appended at the remembered leaf (no message)."""
        memo = self._memo
        if memo is not None and memo[0] == record.parent_id and transcript.leaf_id == record.id:
            self._memo = (record.id, memo[1])


class PruneLedgerCache:
    """The session's prune records (D11), read incrementally from its transcript index."""

    __slots__ = ("_cached",)

    def __init__(self) -> None:
        self._cached: tuple[object, int, PruneLedger] | None = None
        """The transcript index, entries scanned and prune records read from them."""

    def read(self, transcript: TranscriptManager) -> PruneLedger:
        """
        The prune records of ``transcript``: only entries added since the last call are decoded, and only
        ``custom`` ones; another index (another transcript, a reload) is read from its start.
        """
        index = transcript.index
        kinds = index.kinds
        cached = self._cached
        if cached is not None and cached[0] is index and cached[1] <= len(kinds):
            start, ledger = cached[1], cached[2]
        else:
            start, ledger = 0, PruneLedger()
        customs = [index.entry_at(pos) for pos in range(start, len(kinds)) if kinds[pos] == "custom"]
        if customs:
            ledger = ledger.extended(customs)
        self._cached = (index, len(kinds), ledger)
        return ledger
