"""
:class:`RuntimeSession`: one open session of :class:`~sessionkeeper.runtime.SessionRuntime` and the
runtime's per-turn state of it. Its state changes only through its own methods, which name the event
(a new turn, a reply, a compaction, a rotation) rather than the fields it touches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from msgspec import UNSET

from sessionkeeper.pruning import PruneLedger
from sessionkeeper.runtime._context_cache import ContextCache, PruneLedgerCache
from sessionkeeper.runtime._overflow import OverflowRecoveryState
from sessionkeeper.runtime._turn_lock import TurnLock
from sessionkeeper.store import SessionEntry, SessionResolution, SessionStore
from sessionkeeper.transcript import AgentMessage, AssistantMessage, TranscriptEntry, TranscriptManager


__all__ = ("RuntimeSession", "int_or_zero", "patch_session_entry")


def int_or_zero(value: object) -> int:
    """``value`` when it is an ``int`` (not a ``bool``), else 0: a count read from a store entry."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class RuntimeSession:
    """
    One open session: its key, store entry and transcript, plus the per-turn state of the runtime.

    Made by :meth:`SessionRuntime.open`; pass it to the runtime's other methods. Not thread-safe: one
    agent loop drives one session at a time (the transcript's write lock guards the file itself).

    Attributes:
        session_key: The session key.
        transcript: The session's transcript.
        resolution: How :meth:`SessionRuntime.open` resolved the key (``is_new``, ``reason``).
        recovery: The turn's :class:`OverflowRecoveryState` (reset by a new prompt).
        ineffective_compactions: Automatic compactions in a row that left the context over the
            threshold (B11); reset by an effective compaction or a context back under the threshold.
        compacted_this_turn: A compaction ran in this turn (no TTL marker then).
        in_flush_turn: The memory flush turn is running (no nested flush, B13).
        truncate_tool_results: Oversized tool results are cut from the context (overflow second resort),
            until a compaction succeeds.
        timeout_compactions: Timeout compactions in this turn (at most 2).
        last_prompt_tokens: The context estimate of the last prepared call, in tokens.
        turn_usage: The turn's summed usage, camelCase keys, in tokens.

    The state attributes are the runtime's; hosts read them, the runtime changes them through this
    class's methods.
    """

    def __init__(
        self,
        *,
        session_key: str,
        entry: SessionEntry,
        transcript: TranscriptManager,
        resolution: SessionResolution | None,
    ) -> None:
        self.session_key: str = session_key
        self.transcript: TranscriptManager = transcript
        self.resolution: SessionResolution | None = resolution
        self._entry = entry
        self.recovery: OverflowRecoveryState = OverflowRecoveryState()
        self.ineffective_compactions: int = 0
        self.compacted_this_turn: bool = False
        self.in_flush_turn: bool = False
        self.truncate_tool_results: bool = False
        self.timeout_compactions: int = 0
        self.last_prompt_tokens: int | None = None
        self.turn_usage: dict[str, int] = {}
        self._context = ContextCache()
        self._prune_ledger = PruneLedgerCache()
        self._turn_lock = TurnLock()

    @property
    def holds_turn_lock(self) -> bool:
        """Whether the runtime holds the transcript's write lock for a turn in progress right now."""
        return self._turn_lock.held

    @property
    def entry(self) -> SessionEntry:
        """The store entry as last written by the runtime."""
        return self._entry

    @property
    def session_id(self) -> str:
        """The transcript's session id (never switched by overflow recovery, OpenClaw §5.7)."""
        return self.transcript.session_id

    def __repr__(self) -> str:
        return f"RuntimeSession({self.session_key!r}, session_id={self.session_id!r})"

    # ------------------------------------------------------------------ entry and transcript

    def adopt_entry(self, entry: SessionEntry) -> None:
        """Take ``entry`` as the store entry last written for this session."""
        self._entry = entry

    def switch_transcript(self, transcript: TranscriptManager, *, entry: SessionEntry | None = None) -> None:
        """
        Go on in ``transcript`` (a successor after a rotation, OpenClaw §5.8); the cached context is
        dropped. ``entry``: the store entry that names it, when already read.
        """
        self.transcript = transcript
        self._context.clear()
        if entry is not None:
            self._entry = entry

    # ------------------------------------------------------------------ context and prune records

    def current_context(self) -> Sequence[AgentMessage]:
        """The context messages of the branch: the last one built when the leaf is unchanged."""
        return self._context.current(self.transcript)

    def remember_context(self, context: Sequence[AgentMessage]) -> None:
        """Remember ``context`` as the context of the transcript's current leaf."""
        self._context.remember(self.transcript.leaf_id, context)

    def context_after_append(self, appended: Sequence[TranscriptEntry]) -> Sequence[AgentMessage]:
        """The context right after ``appended`` (message or ``custom`` entries, each a child of the last)."""
        return self._context.after_append(self.transcript, appended)

    def note_custom_entry(self, record: TranscriptEntry) -> None:
        """A ``custom`` entry (no message) was just appended to the transcript."""
        self._context.after_custom(self.transcript, record)

    def prune_ledger(self) -> PruneLedger:
        """The session's prune records (D11), read incrementally."""
        return self._prune_ledger.read(self.transcript)

    # ------------------------------------------------------------------ the turn's write lock

    async def hold_turn_lock(self, *, start: bool) -> None:
        """Take (``start``: a new turn) or keep up the transcript's write lock for the turn."""
        await self._turn_lock.hold(self.transcript, start=start)

    async def release_turn_lock(self) -> None:
        """Give back the turn's write lock (no-op when none is held)."""
        await self._turn_lock.release()

    # ------------------------------------------------------------------ per-turn state

    def begin_turn(self) -> None:
        """A new prompt: the per-turn recovery state, timeout count, compaction flag and usage restart."""
        self.recovery = OverflowRecoveryState()
        self.timeout_compactions = 0
        self.compacted_this_turn = False
        self.turn_usage = {}

    def note_context_fits(self) -> None:
        """The context is back under the compaction threshold (B11's counter restarts)."""
        self.ineffective_compactions = 0

    def note_prompt_tokens(self, tokens: int) -> None:
        """The context estimate of the call being prepared, in tokens."""
        self.last_prompt_tokens = tokens

    def note_reply(self, message: AssistantMessage) -> None:
        """A reply of the turn: a clean one re-arms recovery (pi §15.2); its usage is summed."""
        if message.stop_reason not in ("error", "aborted"):
            self.recovery = self.recovery.after_reply()
        self.turn_usage = self.usage_with([message])

    def usage_with(self, messages: Sequence[AgentMessage]) -> dict[str, int]:
        """The turn's usage sums as they will be once ``messages``' replies are noted (nothing changes)."""
        sums = dict(self.turn_usage)
        for message in messages:
            if not isinstance(message, AssistantMessage):
                continue
            usage = message.usage
            for key, value in (
                ("inputTokens", usage.input),
                ("outputTokens", usage.output),
                ("cacheRead", usage.cache_read),
                ("cacheWrite", usage.cache_write),
            ):
                sums[key] = sums.get(key, 0) + value
        return sums

    def note_auto_compaction(self, *, effective: bool) -> None:
        """An automatic compaction (or a joined one) ran this turn; ``effective``: it restored headroom."""
        self.compacted_this_turn = True
        if effective:
            self.ineffective_compactions = 0
        else:
            self.ineffective_compactions += 1

    def note_context_compacted(self) -> None:
        """A compaction landed: oversized tool results are no longer cut."""
        self.truncate_tool_results = False

    def note_overflow_compaction(self, *, succeeded: bool) -> None:
        """An overflow compaction was tried (OpenClaw §5.7 attempt counts)."""
        self.recovery = self.recovery.after_compaction(succeeded=succeeded)

    def start_truncating_tool_results(self) -> None:
        """Overflow recovery's second resort: cut oversized tool results from now on."""
        self.truncate_tool_results = True
        self.recovery = self.recovery.after_truncation()

    def count_timeout_compaction(self) -> int:
        """One more timeout compaction this turn; returns how many ran."""
        self.timeout_compactions += 1
        return self.timeout_compactions

    def begin_flush_turn(self) -> None:
        """The memory flush turn starts (no nested flush, B13)."""
        self.in_flush_turn = True

    def end_flush_turn(self) -> None:
        """The memory flush turn ended."""
        self.in_flush_turn = False


async def patch_session_entry(
    store: SessionStore, session: RuntimeSession, fields: Mapping[str, Any]
) -> SessionEntry:
    """
    Patch ``session``'s store entry (a ``None`` value deletes the field) and adopt the result.

    The entry is never created here: when it was deleted while the session ran (``SessionStore.delete``,
    maintenance, another worker), the runtime's bookkeeping must not bring the key back under a new
    session id that has no transcript.

    Raises:
        SessionNotFoundError: The entry is gone; nothing was written.
    """
    patch = {key: UNSET if value is None else value for key, value in fields.items()}  # None = delete
    entry = await store.patch(session.session_key, patch, create=False)
    session.adopt_entry(entry)
    return entry
