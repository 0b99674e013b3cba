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
- **Errors in handlers that decide** (events with result types: ``session_before_*``, ``context``,
  ``message_end``): pi catches and reports handler errors and carries on. A library should not swallow
  errors silently, so by default an exception raised by such a handler **propagates unchanged** out of
  :meth:`HookRegistry.emit` (later handlers do not run; nothing has been done yet, so nothing is lost).
  Pass ``on_error`` to the registry to get pi's behaviour instead: the callback receives the event, the
  handler and the exception, and the emission continues with the next handler.
- **Errors in notifications** (observe-only events, ``result_types == ()``: ``session_compact``,
  ``session_tree``, ``session_start``, ``session_shutdown``, ``compaction_start``/``compaction_end``,
  ``memory_flush_start``/``memory_flush_end``): one rule, :meth:`HookRegistry.notify`. The operation they
  report has happened (or will happen regardless), so a raising handler must not turn a done operation
  into an exception (a retrying caller would repeat it, e.g. compact twice). Each error is logged
  (logger ``sessionkeeper.hooks``, WARNING, naming the event and the handler), passed to ``on_error``
  when set, and returned as a :class:`HookError`; every handler runs. Emitters put the errors on their
  result (``CompactionResult.hook_errors``).
- A handler returning a result of the wrong type is an error of the same kind (a :class:`TypeError`).
  Cancellation (``BaseException``) always propagates.

This is the private registry module; the event and result classes live in the private events module
``sessionkeeper._hook_events``. Users and the other packages import both from :mod:`sessionkeeper.hooks`.
"""

from __future__ import annotations

import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeAlias, TypeVar

import attrs

from sessionkeeper._hook_events import HookEvent


__all__ = ("HookError", "HookErrorHandler", "HookHandler", "HookRegistry")

R = TypeVar("R")
E = TypeVar("E", bound="HookEvent[Any]")

_log = logging.getLogger("sessionkeeper.hooks")


# --------------------------------------------------------------------------- registry

HookHandler: TypeAlias = Callable[[E], object]
"""A handler: ``(event) -> result | None``, or an ``async`` function returning the same."""

HookErrorHandler: TypeAlias = Callable[["HookEvent[Any]", Callable[..., object], Exception], None]
"""``on_error(event, handler, exception)``: reports a handler error; the emission then continues."""


@attrs.frozen(kw_only=True)
class HookError:
    """
    A notification handler's failure, reported instead of raised (see :meth:`HookRegistry.notify`).

    Attributes:
        event: pi's event name (``"session_compact"``).
        handler: The handler's qualified name (``module.function``), for logs and reports.
        error: The exception it raised (a :class:`TypeError` for a non-``None`` result).

    .. versionadded:: 0.2
    """

    event: str
    handler: str
    error: Exception

    def to_json(self) -> dict[str, str]:
        """``{"event", "handler", "error": "<ExceptionType>: <message>"}`` (for ``--json`` reports)."""
        return {"event": self.event, "handler": self.handler, "error": _describe(self.error)}


def _describe(error: Exception) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _handler_name(handler: Callable[..., object]) -> str:
    target = getattr(handler, "func", handler)  # functools.partial
    module = getattr(target, "__module__", None)
    name = getattr(target, "__qualname__", None) or repr(target)
    return f"{module}.{name}" if module else name


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

    async def notify(self, event: HookEvent[None]) -> tuple[HookError, ...]:
        """
        Send a notification (an observe-only event) to its handlers; a raising handler is reported,
        never raised (the one rule for every notification, see the module docstring).

        Every handler runs, in registration order. Each failure is logged on ``sessionkeeper.hooks``
        (WARNING, with the event name and the handler), passed to ``on_error`` when the registry has one,
        and returned.

        Args:
            event: An event with no result types (``session_compact``, ``compaction_end``, ...).

        Returns:
            The handlers' failures, in order; empty when all succeeded.

        Raises:
            TypeError: ``event`` is one whose handlers decide (it has result types): use :meth:`emit`.
            BaseException: Cancellation and other non-``Exception`` exits propagate; so does whatever
                ``on_error`` itself raises.
        """
        if event.result_types:
            raise TypeError(
                f"{event.name!r} handlers return decisions; send it with emit()/emit_last(), not notify()"
            )
        for obs in [o for o in self._observers if isinstance(event, o.event_type)]:
            obs.handler(event)
        errors: list[HookError] = []
        for sub in [s for s in self._subs if isinstance(event, s.event_type)]:
            try:
                result = sub.handler(event)
                if inspect.isawaitable(result):
                    result = await _await(result)
                if result is not None:
                    _check_result(event, sub.handler, result)
            except Exception as err:
                errors.append(self._report(event, sub.handler, err))
        return tuple(errors)

    def _report(self, event: HookEvent[Any], handler: Callable[..., object], err: Exception) -> HookError:
        error = HookError(event=event.name, handler=_handler_name(handler), error=err)
        _log.warning(
            "hook handler %s for %r raised %s (a notification: reported, not raised)",
            error.handler,
            error.event,
            _describe(err),
        )
        if self._on_error is not None:
            self._on_error(event, handler, err)
        return error

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
