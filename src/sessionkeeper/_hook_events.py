"""
The typed session events and the results their handlers may return (pi spec §15.6; OpenClaw spec §6).

Re-exported by :mod:`sessionkeeper.hooks`, which holds the :class:`~sessionkeeper.hooks.HookRegistry`
that runs the handlers. Payloads that belong to later layers (the compaction preparation, the
compaction result) are typed ``object`` here; the layers that emit them document the concrete types.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, Generic, Literal, TypeAlias, TypeVar

import anyio
import attrs

from sessionkeeper.records import AgentMessage, CompactionEntry, TranscriptEntry


__all__ = (
    "BranchSummaryOverride",
    "CompactHookResult",
    "CompactionEndEvent",
    "CompactionHookOverride",
    "CompactionReason",
    "CompactionStartEvent",
    "ContextEvent",
    "ContextHookResult",
    "ForkHookResult",
    "HookEvent",
    "MemoryFlushEndEvent",
    "MemoryFlushStartEvent",
    "MessageEndEvent",
    "MessageEndHookResult",
    "SessionBeforeCompactEvent",
    "SessionBeforeForkEvent",
    "SessionBeforeSwitchEvent",
    "SessionBeforeTreeEvent",
    "SessionCompactEvent",
    "SessionShutdownEvent",
    "SessionStartEvent",
    "SessionTreeEvent",
    "SwitchHookResult",
    "TreeHookResult",
    "TreePreparation",
)

R = TypeVar("R")

CompactionReason: TypeAlias = Literal["manual", "threshold", "overflow"]
"""Why a compaction runs (pi's ``compaction_start.reason``)."""


def _to_messages(items: Iterable[AgentMessage]) -> tuple[AgentMessage, ...]:
    return tuple(items)


def _to_entries(items: Iterable[TranscriptEntry]) -> tuple[TranscriptEntry, ...]:
    return tuple(items)


@attrs.frozen(kw_only=True)
class HookEvent(Generic[R]):
    """
    Base of every event. ``R`` is the type a handler may return (``None`` for observe-only events).

    Attributes:
        name: pi's event name (``"session_before_compact"``), a class constant.
        result_types: The result classes a handler may return, a class constant (empty: observe only).
    """

    name: ClassVar[str] = "event"
    result_types: ClassVar[tuple[type, ...]] = ()

    def chain(self, result: R) -> HookEvent[R]:
        """Return the event the next handler sees after ``result`` (unchanged except for chained events)."""
        del result
        return self


# --------------------------------------------------------------------------- results


@attrs.frozen(kw_only=True)
class CompactionHookOverride:
    """
    A summary supplied by a ``session_before_compact`` handler, written verbatim with ``fromHook: true``.

    pi does not validate ``first_kept_entry_id`` (pi spec §15.6); the compactor documents what it checks.

    Attributes:
        summary: The summary text.
        first_kept_entry_id: Id of the first entry kept after the compaction.
        tokens_before: Context tokens before the compaction.
        details: Extra JSON written as the entry's ``details``; ``None`` omits it.
    """

    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: Any = None


@attrs.frozen(kw_only=True)
class CompactHookResult:
    """
    What a ``session_before_compact`` handler returns (pi: ``{cancel}`` or ``{compaction}``).

    Attributes:
        cancel: ``True`` cancels the compaction; later handlers do not run.
        reason: Why it was cancelled (carried by ``CompactionCancelled``).
        compaction: A summary to write instead of calling the summariser.
    """

    cancel: bool = False
    reason: str | None = None
    compaction: CompactionHookOverride | None = None


@attrs.frozen(kw_only=True)
class BranchSummaryOverride:
    """
    A branch summary supplied by a ``session_before_tree`` handler (written with ``fromHook: true``).

    Attributes:
        summary: The summary text.
        details: Extra JSON for the entry's ``details``; ``None`` omits it.
    """

    summary: str
    details: Any = None


@attrs.frozen(kw_only=True)
class TreeHookResult:
    """
    What a ``session_before_tree`` handler returns (pi spec §15.6).

    Attributes:
        cancel: ``True`` cancels the navigation.
        summary: A branch summary to use (only when the user asked for one).
        custom_instructions: Replaces the summary instructions.
        replace_instructions: Whether ``custom_instructions`` replace (not extend) the default prompt.
        label: A label for the summary entry.
    """

    cancel: bool = False
    summary: BranchSummaryOverride | None = None
    custom_instructions: str | None = None
    replace_instructions: bool | None = None
    label: str | None = None


@attrs.frozen(kw_only=True)
class ForkHookResult:
    """
    What a ``session_before_fork`` handler returns.

    Attributes:
        cancel: ``True`` cancels the fork.
        skip_conversation_restore: Reserved by pi, unused.
    """

    cancel: bool = False
    skip_conversation_restore: bool = False


@attrs.frozen(kw_only=True)
class SwitchHookResult:
    """
    What a ``session_before_switch`` handler returns.

    Attributes:
        cancel: ``True`` cancels the switch.
    """

    cancel: bool = False


@attrs.frozen(kw_only=True)
class ContextHookResult:
    """
    Replacement messages from a ``context`` handler (chained: the next handler sees them).

    Attributes:
        messages: The new context messages.
    """

    messages: tuple[AgentMessage, ...] = attrs.field(converter=_to_messages)


@attrs.frozen(kw_only=True)
class MessageEndHookResult:
    """
    Replacement for a finished message before it is persisted (pi 0.73.1).

    A replacement whose role differs from the original is ignored, as pi ignores it.

    Attributes:
        message: The message to persist instead.
    """

    message: AgentMessage


# --------------------------------------------------------------------------- session events


@attrs.frozen(kw_only=True)
class SessionBeforeCompactEvent(HookEvent[CompactHookResult | CompactionHookOverride]):
    """
    ``session_before_compact``: fired before the summariser runs; may cancel or supply the summary.

    Attributes:
        preparation: The compaction plan (``CompactionPreparation``, pi spec §13.2).
        branch_entries: The current path, root to leaf.
        custom_instructions: The user's focus instructions, if any.
        signal: Set when the compaction is aborted; ``None`` when there is no abort signal.
    """

    name: ClassVar[str] = "session_before_compact"
    result_types: ClassVar[tuple[type, ...]] = (CompactHookResult, CompactionHookOverride)

    preparation: object
    branch_entries: tuple[TranscriptEntry, ...] = attrs.field(converter=_to_entries)
    custom_instructions: str | None = None
    signal: anyio.Event | None = attrs.field(default=None, eq=False)


@attrs.frozen(kw_only=True)
class SessionCompactEvent(HookEvent[None]):
    """
    ``session_compact``: a compaction entry was appended and the context rebuilt.

    Attributes:
        compaction_entry: The entry written.
        from_hook: Whether its summary came from a ``session_before_compact`` handler.
    """

    name: ClassVar[str] = "session_compact"

    compaction_entry: CompactionEntry
    from_hook: bool = False


@attrs.frozen(kw_only=True)
class TreePreparation:
    """
    The plan of a tree navigation, given to ``session_before_tree`` handlers (pi spec §11, §15.6).

    Attributes:
        target_id: The entry to move the leaf to.
        old_leaf_id: The current leaf (``None`` for an empty transcript).
        common_ancestor_id: Deepest common ancestor of the old leaf and the target, if any.
        entries_to_summarize: The abandoned entries a branch summary would cover.
        user_wants_summary: Whether a branch summary was requested.
        custom_instructions: Summary instructions, if any.
        replace_instructions: Whether they replace the default prompt.
        label: Label for the summary entry, if any.
    """

    target_id: str
    old_leaf_id: str | None
    common_ancestor_id: str | None
    entries_to_summarize: tuple[TranscriptEntry, ...] = attrs.field(converter=_to_entries)
    user_wants_summary: bool = False
    custom_instructions: str | None = None
    replace_instructions: bool | None = None
    label: str | None = None


@attrs.frozen(kw_only=True)
class SessionBeforeTreeEvent(HookEvent[TreeHookResult]):
    """
    ``session_before_tree``: fired on every tree navigation when handlers exist.

    Attributes:
        preparation: The navigation plan.
        signal: Abort signal, or ``None``.
    """

    name: ClassVar[str] = "session_before_tree"
    result_types: ClassVar[tuple[type, ...]] = (TreeHookResult,)

    preparation: TreePreparation
    signal: anyio.Event | None = attrs.field(default=None, eq=False)


@attrs.frozen(kw_only=True)
class SessionTreeEvent(HookEvent[None]):
    """
    ``session_tree``: the leaf moved (and a branch summary was appended, if any).

    Attributes:
        new_leaf_id: The new leaf.
        old_leaf_id: The previous leaf.
        summary_entry: The ``branch_summary`` entry appended, if any.
        from_hook: Whether the summary came from a handler.
    """

    name: ClassVar[str] = "session_tree"

    new_leaf_id: str | None
    old_leaf_id: str | None
    summary_entry: TranscriptEntry | None = None
    from_hook: bool = False


@attrs.frozen(kw_only=True)
class SessionStartEvent(HookEvent[None]):
    """
    ``session_start``: a session was opened.

    Attributes:
        reason: ``startup | reload | new | resume | fork``.
        previous_session_file: The file of the previous session, for ``new``/``resume``/``fork``.
    """

    name: ClassVar[str] = "session_start"

    reason: Literal["startup", "reload", "new", "resume", "fork"]
    previous_session_file: str | None = None


@attrs.frozen(kw_only=True)
class SessionShutdownEvent(HookEvent[None]):
    """
    ``session_shutdown``: a session is being closed.

    Attributes:
        reason: ``quit | reload | new | resume | fork``.
        target_session_file: The session switched to, if any.
    """

    name: ClassVar[str] = "session_shutdown"

    reason: Literal["quit", "reload", "new", "resume", "fork"]
    target_session_file: str | None = None


@attrs.frozen(kw_only=True)
class SessionBeforeSwitchEvent(HookEvent[SwitchHookResult]):
    """
    ``session_before_switch``: about to start a new session or resume another; may cancel.

    Attributes:
        reason: ``new | resume``.
        target_session_file: The session to resume, if any.
    """

    name: ClassVar[str] = "session_before_switch"
    result_types: ClassVar[tuple[type, ...]] = (SwitchHookResult,)

    reason: Literal["new", "resume"]
    target_session_file: str | None = None


@attrs.frozen(kw_only=True)
class SessionBeforeForkEvent(HookEvent[ForkHookResult]):
    """
    ``session_before_fork``: about to fork the session at an entry; may cancel.

    Attributes:
        entry_id: The entry the fork is taken at.
        position: ``"before"`` (fork before that entry) or ``"at"``.
    """

    name: ClassVar[str] = "session_before_fork"
    result_types: ClassVar[tuple[type, ...]] = (ForkHookResult,)

    entry_id: str
    position: Literal["before", "at"] = "before"


@attrs.frozen(kw_only=True)
class ContextEvent(HookEvent[ContextHookResult]):
    """
    ``context``: the messages about to be sent to the model; handlers may replace them (chained).

    Attributes:
        messages: The context messages (records are immutable, so no deep copy is needed).
    """

    name: ClassVar[str] = "context"
    result_types: ClassVar[tuple[type, ...]] = (ContextHookResult,)

    messages: tuple[AgentMessage, ...] = attrs.field(converter=_to_messages)

    def chain(self, result: ContextHookResult) -> ContextEvent:
        """The next handler sees the replacement messages."""
        return attrs.evolve(self, messages=result.messages)


def _role(message: AgentMessage) -> str | None:
    role = getattr(message, "role", None)
    if isinstance(role, str):
        return role
    tag = getattr(type(message), "__struct_config__", None)
    return tag.tag if tag is not None and isinstance(tag.tag, str) else None


@attrs.frozen(kw_only=True)
class MessageEndEvent(HookEvent[MessageEndHookResult]):
    """
    ``message_end``: a message is complete and about to be persisted; handlers may replace it (chained).

    Attributes:
        message: The finished message.
    """

    name: ClassVar[str] = "message_end"
    result_types: ClassVar[tuple[type, ...]] = (MessageEndHookResult,)

    message: AgentMessage

    def chain(self, result: MessageEndHookResult) -> MessageEndEvent:
        """The next handler sees the replacement, when it has the same role (pi ignores others)."""
        if _role(result.message) != _role(self.message):
            return self
        return attrs.evolve(self, message=result.message)

    def apply(self, result: MessageEndHookResult | None) -> AgentMessage:
        """Return the message to persist: the replacement if it keeps the role, else the original."""
        return self.message if result is None else self.chain(result).message


# --------------------------------------------------------------------------- runtime events


@attrs.frozen(kw_only=True)
class CompactionStartEvent(HookEvent[None]):
    """
    ``compaction_start``: a compaction begins (before ``session_before_compact``).

    Attributes:
        reason: ``manual | threshold | overflow``.
        session_key: The session key, when the runtime knows it.
    """

    name: ClassVar[str] = "compaction_start"

    reason: CompactionReason
    session_key: str | None = None


@attrs.frozen(kw_only=True)
class CompactionEndEvent(HookEvent[None]):
    """
    ``compaction_end``: a compaction finished, failed, was cancelled or had nothing to do.

    Attributes:
        reason: ``manual | threshold | overflow``.
        result: The ``CompactionResult``, or ``None`` when nothing was written.
        aborted: Whether it was aborted or cancelled.
        will_retry: Whether the run retries the model call after it (overflow recovery).
        error_message: Why it failed, if it did.
        session_key: The session key, when the runtime knows it.
    """

    name: ClassVar[str] = "compaction_end"

    reason: CompactionReason
    result: object | None = None
    aborted: bool = False
    will_retry: bool = False
    error_message: str | None = None
    session_key: str | None = None


@attrs.frozen(kw_only=True)
class MemoryFlushStartEvent(HookEvent[None]):
    """
    ``memory_flush_start``: the pre-compaction memory flush turn begins (OpenClaw spec §6).

    Attributes:
        session_key: The session key, when known.
        context_tokens: The projected context size that triggered it, in tokens.
        threshold_tokens: The flush threshold, in tokens.
        forced: Whether it was forced by the transcript size (``forceFlushTranscriptBytes``).
    """

    name: ClassVar[str] = "memory_flush_start"

    session_key: str | None = None
    context_tokens: int = 0
    threshold_tokens: int = 0
    forced: bool = False


@attrs.frozen(kw_only=True)
class MemoryFlushEndEvent(HookEvent[None]):
    """
    ``memory_flush_end``: the memory flush turn ended.

    Attributes:
        session_key: The session key, when known.
        ok: Whether the flush succeeded.
        error_message: The error (OpenClaw keeps at most 200 chars), if it failed.
        failure_count: Consecutive failures so far (3 exhausts the cycle).
    """

    name: ClassVar[str] = "memory_flush_end"

    session_key: str | None = None
    ok: bool = True
    error_message: str | None = None
    failure_count: int = 0
