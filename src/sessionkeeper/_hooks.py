"""
Typed session hooks (pi spec §15.6; DESIGN "Who uses it": plugin writers).

A :class:`HookRegistry` is a plain object passed to the parts that emit events (no global registry,
STYLE item 10). Handlers subscribe per event class with :meth:`HookRegistry.on` and may be sync or async.

Semantics (pi 0.73.1, ``ExtensionRunner``), with one deliberate choice about errors:

- Handlers run **sequentially in registration order**, each awaited before the next.
- A handler registered for a base class (e.g. :class:`HookEvent`) receives every subclass event, in the
  same single registration order.
- ``None`` results are ignored. For the ``session_before_*`` events a result with ``cancel=True`` stops
  the emission at once (later handlers do not run); otherwise the **last non-``None`` result wins**
  (:meth:`HookRegistry.emit_last`).
- **Chained events** (:class:`ContextEvent`, :class:`MessageEndEvent`): each handler sees the event as
  rewritten by the previous non-``None`` result, so the last result holds the final value.
- **Errors**: pi catches and reports handler errors and carries on. A library should not swallow errors
  silently, so by default an exception raised by a handler **propagates unchanged** out of
  :meth:`HookRegistry.emit` (later handlers do not run). Pass ``on_error`` to the registry to get pi's
  behaviour instead: the callback receives the event, the handler and the exception, and the emission
  continues with the next handler. A handler returning a result of the wrong type is an error of the
  same kind (a :class:`TypeError`). Cancellation (``BaseException``) always propagates.

Event payloads that belong to later layers (the compaction preparation, the compaction entry, the
compaction result) are typed ``object`` here; the layers that emit them document the concrete types.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, ClassVar, Generic, Literal, TypeAlias, TypeVar

import anyio
import attrs

from sessionkeeper.transcript._entries import CompactionEntry, TranscriptEntry
from sessionkeeper.transcript._messages import AgentMessage


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
    "HookErrorHandler",
    "HookEvent",
    "HookHandler",
    "HookRegistry",
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
E = TypeVar("E", bound="HookEvent[Any]")

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


# --------------------------------------------------------------------------- registry

HookHandler: TypeAlias = Callable[[E], object]
"""A handler: ``(event) -> result | None``, or an ``async`` function returning the same."""

HookErrorHandler: TypeAlias = Callable[["HookEvent[Any]", Callable[..., object], Exception], None]
"""``on_error(event, handler, exception)``: reports a handler error; the emission then continues."""


@attrs.frozen
class _Subscription:
    seq: int
    event_type: type[HookEvent[Any]]
    handler: Callable[[Any], object]


def _check_result(event: HookEvent[Any], handler: Callable[..., object], result: object) -> None:
    if not isinstance(result, event.result_types or (type(None),)):
        raise TypeError(
            f"hook handler {handler!r} returned {type(result).__name__} for {event.name!r}; "
            f"expected None or one of {[t.__name__ for t in event.result_types]}"
        )


def _is_cancel(result: object) -> bool:
    return getattr(result, "cancel", False) is True


class HookRegistry:
    """
    Handlers for session events, run in registration order (pi spec §15.6). No global state.

    Args:
        on_error: ``None`` (default): a handler's exception propagates unchanged out of :meth:`emit`.
            A callback: it receives ``(event, handler, exception)`` and the emission continues with
            the next handler, as pi does.

    .. versionadded:: 0.1
    """

    __slots__ = ("_counter", "_observers", "_on_error", "_subs")

    def __init__(self, *, on_error: HookErrorHandler | None = None) -> None:
        self._subs: list[_Subscription] = []
        self._observers: list[_Subscription] = []
        self._counter = itertools.count()
        self._on_error = on_error

    def on(self, event_type: type[E], handler: HookHandler[E]) -> Callable[[], None]:
        """
        Subscribe ``handler`` to ``event_type`` and to its subclasses.

        Args:
            event_type: A :class:`HookEvent` subclass (``HookEvent`` itself receives every event).
            handler: A sync or async callable taking the event and returning ``None`` or one of the
                event's result types.

        Returns:
            A callable that unsubscribes the handler (calling it twice is harmless).

        Raises:
            TypeError: ``event_type`` is not a :class:`HookEvent` subclass or ``handler`` is not callable.
        """
        return self._add(self._subs, event_type, handler)

    def observe(self, event_type: type[E], handler: Callable[[E], None]) -> Callable[[], None]:
        """
        Watch events without taking part: ``handler`` (sync) is called with every matching event as
        :meth:`emit` starts, before any handler runs, even when a handler later cancels.

        Used by :func:`sessionkeeper.testing.capture_events`. Returns an unsubscribe callable.

        Raises:
            TypeError: As for :meth:`on`.
        """
        return self._add(self._observers, event_type, handler)

    def _add(
        self, target: list[_Subscription], event_type: type[Any], handler: Callable[[Any], object]
    ) -> Callable[[], None]:
        if not (isinstance(event_type, type) and issubclass(event_type, HookEvent)):  # type: ignore[redundant-expr]  # runtime guard for untyped callers
            raise TypeError(f"event_type must be a HookEvent subclass, got {event_type!r}")
        if not callable(handler):
            raise TypeError(f"handler must be callable, got {handler!r}")
        sub = _Subscription(next(self._counter), event_type, handler)
        target.append(sub)

        def unsubscribe() -> None:
            if sub in target:
                target.remove(sub)

        return unsubscribe

    def has_handlers(self, event_type: type[HookEvent[Any]]) -> bool:
        """Whether any handler (not observer) would receive an event of ``event_type``."""
        return any(issubclass(event_type, sub.event_type) for sub in self._subs)

    def handlers(self) -> Mapping[str, int]:
        """Count of handlers per subscribed event class name (for diagnostics)."""
        counts: dict[str, int] = {}
        for sub in self._subs:
            counts[sub.event_type.__name__] = counts.get(sub.event_type.__name__, 0) + 1
        return counts

    async def emit(self, event: HookEvent[R]) -> list[R]:
        """
        Run the handlers of ``event`` in registration order and collect their results.

        Args:
            event: The event.

        Returns:
            The non-``None`` results, in order. Emission stops after a result with ``cancel=True``
            (it is the last item). For chained events each handler saw the previous result applied.

        Raises:
            TypeError: A handler returned something that is not one of the event's result types
                (unless ``on_error`` is set).
            Exception: Whatever a handler raised, unchanged (unless ``on_error`` is set).
        """
        for obs in [o for o in self._observers if isinstance(event, o.event_type)]:
            obs.handler(event)
        results: list[R] = []
        current: HookEvent[R] = event
        for sub in [s for s in self._subs if isinstance(event, s.event_type)]:
            try:
                result = sub.handler(current)
                if inspect.isawaitable(result):
                    result = await _await(result)
                if result is None:
                    continue
                _check_result(current, sub.handler, result)
            except Exception as err:
                if self._on_error is None:
                    raise
                self._on_error(event, sub.handler, err)
                continue
            typed: R = result  # type: ignore[assignment]  # checked against result_types above
            results.append(typed)
            if _is_cancel(typed):
                break
            current = current.chain(typed)
        return results

    async def emit_last(self, event: HookEvent[R]) -> R | None:
        """
        Run the handlers and return the effective result (pi's rule for ``session_before_*``).

        Returns:
            The cancelling result if a handler cancelled, else the last non-``None`` result (for
            chained events: the final replacement), else ``None``.

        Raises:
            TypeError, Exception: As for :meth:`emit`.
        """
        results = await self.emit(event)
        return results[-1] if results else None

    def __repr__(self) -> str:
        return f"HookRegistry(handlers={dict(self.handlers())!r})"


async def _await(value: Awaitable[object]) -> object:
    return await value
