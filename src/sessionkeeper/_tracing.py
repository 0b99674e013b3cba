"""
Optional OpenTelemetry spans (extra ``otel``) around the operations an operator watches.

:func:`traced` decorates compaction, the memory flush, pruning, store maintenance and the transcript
write-lock wait; each call becomes one span of the tracer ``sessionkeeper`` with the attributes named in
``docs/tracing.md`` (session key, tokens before/after, summariser calls, duration, outcome). Only
``opentelemetry-api`` is used: the host installs and configures an SDK (exporter, sampler); without one
the API's tracer records nothing. Without ``opentelemetry`` installed, a decorated call is the plain
call (one ``is None`` test), and :func:`count` reads one context variable.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import math
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, ParamSpec, TypeVar, cast

from sessionkeeper._version import __version__


try:
    from opentelemetry import trace as _otel
except ImportError:  # the "otel" extra is not installed: every span is the plain call
    _otel = None  # type: ignore[assignment]


__all__ = ("PREFIX", "TRACER_NAME", "count", "traced")

P = ParamSpec("P")
R = TypeVar("R")

TRACER_NAME: Final = "sessionkeeper"
"""Name of the tracer (the instrumentation scope) of every span."""

PREFIX: Final = TRACER_NAME + "."
"""Prefix of span names and of the attributes this library sets."""

AttributeValue = str | bool | int | float
_Extract = Callable[[Mapping[str, Any]], dict[str, Any]]
_Result = Callable[[Any], dict[str, Any]]


class _Recording:
    """The span of one decorated call while it runs: counters added by :func:`count` land here."""

    __slots__ = ("counts", "span")

    def __init__(self, span: Any) -> None:
        self.span = span
        self.counts: dict[str, int] = {}


_current: contextvars.ContextVar[_Recording | None] = contextvars.ContextVar(
    "sessionkeeper_tracing_span", default=None
)


def count(attribute: str, amount: int = 1) -> None:
    """Add ``amount`` to the int attribute ``sessionkeeper.<attribute>`` of the innermost recording span."""
    recording = _current.get()
    if recording is not None:
        recording.counts[attribute] = recording.counts.get(attribute, 0) + amount


def _attr(value: object) -> AttributeValue | None:
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return None


def _set(span: Any, values: Mapping[str, object]) -> None:
    for key, value in values.items():
        clean = _attr(value)
        if clean is not None:
            span.set_attribute(PREFIX + key, clean)


# --------------------------------------------------------------------------------- what each span records


def _read(result: Any, **attributes: str) -> dict[str, Any]:
    """``{key: result.<attribute>}`` for each ``key=attribute`` (``None`` where the result lacks it)."""
    return {key: getattr(result, attribute, None) for key, attribute in attributes.items()}


def _sizes(result: Any, **attributes: str) -> dict[str, int]:
    """``{key: len(result.<attribute>)}`` for each ``key=attribute`` (0 where the result lacks it)."""
    return {key: len(getattr(result, attribute, ())) for key, attribute in attributes.items()}


def _session_key(args: Mapping[str, Any]) -> object:
    key = args.get("session_key")
    if key is None:
        key = getattr(args.get("session"), "session_key", None)
    return key


def _compaction_args(args: Mapping[str, Any]) -> dict[str, Any]:
    transcript = args.get("transcript")
    return {
        "session_key": _session_key(args),
        "session_id": getattr(transcript, "session_id", None),
        "reason": args.get("reason"),
        "summarizer_calls": 0,  # counted by the LLM summariser (count), set again when the span ends
    }


def _compaction_result(result: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        **_read(result, outcome="status", tokens_before="tokens_before", provider="provider"),
        **_sizes(result, fallbacks="fallbacks"),
    }
    summary = getattr(result, "summary", None)
    kept = getattr(getattr(result, "preparation", None), "kept_tokens", None)
    if getattr(result, "entry", None) is not None and isinstance(summary, str) and isinstance(kept, int):
        out["tokens_after"] = math.ceil(len(summary) / 4) + kept  # pi's chars/4 estimate
    return out


def _flush_args(args: Mapping[str, Any]) -> dict[str, Any]:
    return {"session_key": _session_key(args), "trigger": args.get("trigger")}


def _flush_result(result: Any) -> dict[str, Any]:
    return {
        "outcome": "ok" if getattr(result, "ok", False) else "failed",
        **_read(
            result,
            reason="reason",
            tokens_before="context_tokens",
            threshold="threshold",
            reply_silent="reply_silent",
            exhausted="exhausted",
        ),
    }


def _prune_args(args: Mapping[str, Any]) -> dict[str, Any]:
    return {"provider": args.get("provider"), "model_id": args.get("model_id")}


def _prune_result(result: Any) -> dict[str, Any]:
    skipped = getattr(result, "skipped", None)
    chars_before = getattr(result, "chars_before", 0)
    chars_after = getattr(result, "chars_after", 0)
    return {
        "outcome": skipped or ("pruned" if getattr(result, "changed", False) else "unchanged"),
        "chars_before": chars_before,
        "chars_after": chars_after,
        "tokens_before": math.ceil(chars_before / 4),  # OpenClaw's chars/4 of the weighted estimate
        "tokens_after": math.ceil(chars_after / 4),
        **_sizes(result, soft_trimmed="soft_trimmed", hard_cleared="hard_cleared", reapplied="reapplied"),
    }


def _maintenance_args(args: Mapping[str, Any]) -> dict[str, Any]:
    return {"mode": args.get("mode"), "dry_run": args.get("dry_run")}


def _maintenance_result(result: Any) -> dict[str, Any]:
    return {
        "outcome": "applied" if getattr(result, "applied", False) else "not_applied",
        **_read(result, mode="mode", entries_before="before_count", entries_after="after_count"),
        **_sizes(result, removed="removals", file_actions="file_actions"),
        **_read(result, bytes_before="bytes_before", bytes_after="bytes_after"),
    }


def _lock_args(args: Mapping[str, Any]) -> dict[str, Any]:
    timeout = args.get("timeout_ms")
    return {"lock_path": str(args.get("path")) + ".lock", "timeout_ms": timeout}


def _lock_result(result: Any) -> dict[str, Any]:
    return {"outcome": "acquired"}


_SPECS: Final[dict[str, tuple[_Extract, _Result]]] = {
    "compaction": (_compaction_args, _compaction_result),
    "memory_flush": (_flush_args, _flush_result),
    "pruning": (_prune_args, _prune_result),
    "maintenance": (_maintenance_args, _maintenance_result),
    "lock_wait": (_lock_args, _lock_result),
}


# --------------------------------------------------------------------------------------------- the span


class _Span:
    """One decorated call as a span: start, arguments, result or error, duration, counters, end."""

    __slots__ = ("_manager", "_recording", "_result", "_signature", "_start", "_token", "name")

    def __init__(self, name: str, signature: inspect.Signature, result: _Result) -> None:
        self.name = name
        self._signature = signature
        self._result = result
        self._manager: Any = None
        self._recording: _Recording | None = None
        self._token: contextvars.Token[_Recording | None] | None = None
        self._start = 0.0

    def enter(self, extract: _Extract, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        assert _otel is not None
        tracer = _otel.get_tracer(TRACER_NAME, __version__)
        self._manager = tracer.start_as_current_span(
            PREFIX + self.name, record_exception=True, set_status_on_exception=True
        )
        span = self._manager.__enter__()
        self._start = time.perf_counter()
        if span.is_recording():
            bound = self._signature.bind_partial(*args, **kwargs)
            bound.apply_defaults()
            _set(span, extract(bound.arguments))
            self._recording = _Recording(span)
            self._token = _current.set(self._recording)

    def succeed(self, result: object) -> None:
        """Record what the call returned (its outcome and counts) on the span, then end the span."""
        if self._recording is not None:
            _set(self._recording.span, self._result(result))
        self.exit(None)

    def exit(self, error: BaseException | None) -> None:
        recording = self._recording
        if recording is not None:
            span = recording.span
            if self._token is not None:
                _current.reset(self._token)
            span.set_attribute(PREFIX + "duration_ms", (time.perf_counter() - self._start) * 1000)
            for key, value in recording.counts.items():
                span.set_attribute(PREFIX + key, value)
            if error is not None:
                cancelled = not isinstance(error, Exception)  # asyncio/trio cancellation, KeyboardInterrupt
                span.set_attribute(PREFIX + "outcome", "cancelled" if cancelled else "error")
                span.set_attribute("error.type", type(error).__qualname__)
        self._manager.__exit__(type(error) if error else None, error, error.__traceback__ if error else None)


def traced(operation: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """
    Decorate a function (sync or async) so that each call is a span ``sessionkeeper.<operation>``.

    ``operation`` names what the span records: ``compaction``, ``memory_flush``, ``pruning``,
    ``maintenance`` or ``lock_wait`` (attributes in ``docs/tracing.md``). Every span gets
    ``sessionkeeper.duration_ms`` (wall time, ms) and ``sessionkeeper.outcome``; a raised exception is
    recorded on the span (status ``ERROR``, outcome ``error``, or ``cancelled`` for a cancellation) and
    propagates unchanged.

    Raises:
        KeyError: ``operation`` is not one of the names above (at decoration time).
    """
    extract, result_of = _SPECS[operation]

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        if _otel is None:
            return func  # nothing to record: the call stays the plain call
        signature = inspect.signature(func)
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def run_async(*args: P.args, **kwargs: P.kwargs) -> Any:
                span = _Span(operation, signature, result_of)
                span.enter(extract, args, kwargs)
                try:
                    result = await cast(Callable[..., Any], func)(*args, **kwargs)
                except BaseException as err:
                    span.exit(err)
                    raise
                span.succeed(result)
                return result

            return cast(Callable[P, R], run_async)

        @functools.wraps(func)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            span = _Span(operation, signature, result_of)
            span.enter(extract, args, kwargs)
            try:
                result = func(*args, **kwargs)
            except BaseException as err:
                span.exit(err)
                raise
            span.succeed(result)
            return result

        return run

    return decorate
