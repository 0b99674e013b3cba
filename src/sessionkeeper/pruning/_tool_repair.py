"""
Tool-call repairs of the replay pipeline (OpenClaw spec §9 steps 6, 8 and 9).

* :func:`repair_tool_call_inputs` (``sanitizeToolCallInputs``): drop tool calls without an id or
  with a name that is not allowed, trim names, drop assistant turns left empty.
* :func:`repair_tool_use_result_pairing` (``repairToolUseResultPairing``): results moved right after
  their call in call order, duplicates dropped, later results pulled forward, missing results
  synthesised as clearly marked errors (field report B06b), orphan results dropped.

All functions are pure: they take a message sequence and return a new list (or the input itself when
nothing changed). Messages of unknown shape (:class:`UnknownMessage`) pass through unchanged. Tool-call
ids for strict providers (step 8) are :mod:`._tool_ids`'s.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence
from typing import Final, Literal

import attrs
import msgspec

from sessionkeeper.records import (
    AgentMessage,
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
)


__all__ = (
    "SYNTHETIC_MISSING_TOOL_RESULT_TEXT",
    "ErroredAssistantPolicy",
    "PairingRepair",
    "is_allowed_tool_call_name",
    "is_synthetic_missing_tool_result",
    "keep_thinking_turn",
    "make_missing_tool_result",
    "pairing_intact",
    "repair_tool_call_inputs",
    "repair_tool_use_result_pairing",
    "strip_tool_result_details",
    "survey_calls",
)

SYNTHETIC_MISSING_TOOL_RESULT_TEXT: Final = (
    "[openclaw] missing tool result in session history;"
    " inserted synthetic error result for transcript repair."
)
"""Text of a synthesised result for a tool call whose result is missing (OpenClaw's wording)."""

SYNTHETIC_DETAIL_KEY: Final = "openclawSyntheticMissingToolResult"
_NAME_RE = re.compile(r"^[A-Za-z0-9_:.-]+$")
_NAME_MAX = 64

ErroredAssistantPolicy = Literal["keep", "drop"]


def is_allowed_tool_call_name(name: object, allowed: Iterable[str] | None = None) -> bool:
    """
    Whether a model-supplied tool name may be replayed (OpenClaw ``isAllowedToolCallName``).

    After trimming: non-empty, at most 64 chars, ``^[A-Za-z0-9_:.-]+$``, and, when ``allowed`` is
    given (and non-empty after trimming), one of those names case-insensitively.
    """
    if not isinstance(name, str):
        return False
    trimmed = name.strip()
    if not trimmed or len(trimmed) > _NAME_MAX or not _NAME_RE.match(trimmed):
        return False
    names = {a.strip().lower() for a in allowed or () if a.strip()}
    return not names or trimmed.lower() in names


def _replay_safe_thinking_calls(
    message: AssistantMessage, allowed: tuple[str, ...] | None
) -> list[ToolCall] | None:
    """
    The tool calls of a signed-thinking turn that may be replayed as is, or ``None`` when one may not.

    OpenClaw ``isReplaySafeThinkingAssistantTurn``: every call has a non-blank id, unique in the turn,
    an allowed name that needs no trimming.
    """
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for block in message.content:
        if not isinstance(block, ToolCall):
            continue
        call_id = block.id.strip()
        if not call_id or call_id in seen or not is_allowed_tool_call_name(block.name, allowed):
            return None
        if block.name != block.name.strip():
            return None
        seen.add(call_id)
        calls.append(block)
    return calls or None


def _results_displaced(messages: Sequence[AgentMessage], index: int) -> bool:
    """Whether a result after ``messages[index]`` comes after another kind of message (OpenClaw's check)."""
    saw_other = False
    for at in range(index + 1, len(messages)):
        message = messages[at]
        if isinstance(message, AssistantMessage) and any(
            isinstance(b, ToolCall) and b.id for b in message.content
        ):
            break
        if isinstance(message, ToolResultMessage):
            if message.tool_call_id.strip() and saw_other:
                return True
            continue
        saw_other = True
    return False


def keep_thinking_turn(
    messages: Sequence[AgentMessage],
    index: int,
    message: AssistantMessage,
    allowed: tuple[str, ...] | None,
    *,
    preserved: set[str],
    prior: set[str],
) -> bool:
    """
    Whether the signed thinking turn ``message`` (at ``index``) is kept whole under provider-owned
    thinking replay: its calls are replay-safe, none of their ids was kept before (``preserved``) and,
    when its results are displaced, none was seen before (``prior``). A kept turn's ids join both sets.
    """
    calls = _replay_safe_thinking_calls(message, allowed)
    if calls is None:
        return False
    displaced = _results_displaced(messages, index)
    if not all(c.id not in preserved and (not displaced or c.id not in prior) for c in calls):
        return False
    for c in calls:
        preserved.add(c.id)
        prior.add(c.id)
    return True


def survey_calls(
    message: AssistantMessage, valid_names: dict[str, bool], allowed: tuple[str, ...] | None
) -> tuple[bool, bool, bool]:
    """
    ``(has a tool call, has thinking, clean)`` of one assistant turn: clean when every call has a
    non-blank id and an allowed, trimmed name. ``valid_names`` remembers the name checks.
    """
    has_call = has_thinking = False
    clean = True
    for b in message.content:
        if isinstance(b, ToolCall):
            has_call = True
            name = b.name
            allowed_name = valid_names.get(name)
            if allowed_name is None:
                allowed_name = valid_names[name] = is_allowed_tool_call_name(name, allowed)
            if not allowed_name or not b.id or b.id.isspace() or name != name.strip():
                clean = False
        elif isinstance(b, ThinkingContent):
            has_thinking = True
    return has_call, has_thinking, clean


def repair_tool_call_inputs(
    messages: Sequence[AgentMessage],
    *,
    allowed_tool_names: Iterable[str] | None = None,
    provider_owned_thinking_replay: bool = False,
) -> Sequence[AgentMessage]:
    """
    Drop unusable tool calls from assistant turns (OpenClaw ``repairToolCallInputs``, spec §9 step 6).

    A tool call without a (non-blank) id, or whose name is not allowed
    (:func:`is_allowed_tool_call_name`), is dropped; names with surrounding whitespace are trimmed; an
    assistant turn left with no content is dropped.

    With ``provider_owned_thinking_replay`` (Anthropic with signed thinking kept), a turn holding both
    thinking and tool calls is never edited, because its signature covers the whole turn: it is kept
    as is when all its calls are replay-safe (valid unique ids, allowed untrimmed names, ids not
    already used by an earlier kept thinking turn, and not reused after displaced results), otherwise
    the whole turn is dropped.

    Returns:
        A new list, or ``messages`` itself when nothing changed.
    """
    allowed = tuple(allowed_tool_names) if allowed_tool_names is not None else None
    out: list[AgentMessage] = []
    changed = False
    preserved: set[str] = set()
    prior: set[str] = set()
    valid_names: dict[str, bool] = {}  # is_allowed_tool_call_name per distinct name
    for index, message in enumerate(messages):
        if not isinstance(message, AssistantMessage):
            out.append(message)
            continue
        has_call, has_thinking, clean = survey_calls(message, valid_names, allowed)
        if not has_call:
            out.append(message)
            continue
        if clean and not (provider_owned_thinking_replay and has_thinking):
            prior.update([b.id for b in message.content if isinstance(b, ToolCall)])
            out.append(message)
            continue
        if provider_owned_thinking_replay and has_thinking:
            if keep_thinking_turn(messages, index, message, allowed, preserved=preserved, prior=prior):
                out.append(message)
            else:
                changed = True
            continue
        content: list[TextContent | object] = []
        touched = False
        for block in message.content:
            if isinstance(block, ToolCall):
                if not block.id.strip() or not is_allowed_tool_call_name(block.name, allowed):
                    touched = True
                    continue
                if block.name != block.name.strip():
                    block = msgspec.structs.replace(block, name=block.name.strip())
                    touched = True
            content.append(block)
        prior.update(b.id for b in content if isinstance(b, ToolCall) and b.id)
        if not touched:
            out.append(message)
            continue
        changed = True
        if content:
            out.append(msgspec.structs.replace(message, content=content))
    return out if changed else messages


def make_missing_tool_result(
    tool_call_id: str, *, tool_name: str | None, timestamp_ms: int, text: str | None = None
) -> ToolResultMessage:
    """
    A synthetic error result for a tool call whose result is missing (OpenClaw ``makeMissingToolResult``).

    ``isError`` is true, the text says a result was missing, and ``details`` carries
    ``{"openclawSyntheticMissingToolResult": true}`` so it is recognisable (field report B06b).
    """
    return ToolResultMessage(
        tool_call_id=tool_call_id,
        tool_name=tool_name or "unknown",
        content=[TextContent(text=text if text is not None else SYNTHETIC_MISSING_TOOL_RESULT_TEXT)],
        details={SYNTHETIC_DETAIL_KEY: True},
        is_error=True,
        timestamp=timestamp_ms,
    )


def is_synthetic_missing_tool_result(message: AgentMessage) -> bool:
    """Whether ``message`` is a result synthesised by :func:`make_missing_tool_result`."""
    if not isinstance(message, ToolResultMessage) or not message.is_error:
        return False
    details = message.details
    if isinstance(details, dict) and details.get(SYNTHETIC_DETAIL_KEY) is True:
        return True
    return any(
        isinstance(b, TextContent) and b.text == SYNTHETIC_MISSING_TOOL_RESULT_TEXT for b in message.content
    )


def _calls(message: AssistantMessage) -> list[ToolCall]:
    return [b for b in message.content if isinstance(b, ToolCall) and b.id]


def _has_thinking(message: AssistantMessage) -> bool:
    for b in message.content:  # noqa: SIM110 - no generator per message on the hot path
        if isinstance(b, ThinkingContent):
            return True
    return False


def _has_calls(message: AssistantMessage) -> bool:
    """Whether :func:`_calls` is not empty (no list is built)."""
    for b in message.content:  # noqa: SIM110 - no generator per message on the hot path
        if isinstance(b, ToolCall) and b.id:
            return True
    return False


def _result_id(message: ToolResultMessage) -> str:
    return message.tool_call_id.strip()


def _with_name(result: ToolResultMessage, fallback: str | None) -> ToolResultMessage:
    """OpenClaw ``normalizeToolResultName``: a trimmed name, else the call's name, else ``unknown``."""
    trimmed = result.tool_name.strip()
    if trimmed:
        return result if trimmed == result.tool_name else msgspec.structs.replace(result, tool_name=trimmed)
    if fallback and fallback.strip():
        return msgspec.structs.replace(result, tool_name=fallback.strip())
    return msgspec.structs.replace(result, tool_name="unknown")


def _legacy_id(result: ToolResultMessage, calls: list[ToolCall]) -> ToolResultMessage:
    """A result with no id answers a lone call of the same name (``normalizeLegacyToolResultId``)."""
    if _result_id(result) or len(calls) != 1:
        return result
    call = calls[0]
    if result.tool_name.strip() and call.name.strip() and result.tool_name.strip() != call.name.strip():
        return result
    return msgspec.structs.replace(result, tool_call_id=call.id, is_error=True)


def _later_results(
    messages: Sequence[AgentMessage],
    positions: dict[str, list[int]],
    start: int,
    calls: list[ToolCall],
    seen: set[str],
) -> dict[str, ToolResultMessage]:
    """
    The first result at or after ``start`` for each unanswered call (``collectLaterMatchingToolResults``).

    Uses the per-id position index instead of rescanning the tail for every assistant, so the repair
    stays linear in the context length.
    """
    found: dict[str, ToolResultMessage] = {}
    names = {c.id: c.name for c in calls}
    for call in calls:
        if call.id in seen or call.id in found:
            continue
        best: int | None = None
        same = positions.get(call.id, [])
        at = bisect.bisect_left(same, start)
        if at < len(same):
            best = same[at]
        if len(calls) == 1:  # a legacy result without an id answers a lone call of the same name
            blank = positions.get("", [])
            for pos in blank[bisect.bisect_left(blank, start) :]:
                if best is not None and pos > best:
                    break
                candidate = messages[pos]
                if isinstance(candidate, ToolResultMessage) and _legacy_id(candidate, calls) is not candidate:
                    best = pos
                    break
        if best is not None:
            candidate = messages[best]
            assert isinstance(candidate, ToolResultMessage)
            found[call.id] = _with_name(_legacy_id(candidate, calls), names[call.id])
    return found


def pairing_intact(messages: Sequence[AgentMessage]) -> bool:
    """
    Whether :func:`repair_tool_use_result_pairing` would return ``messages`` unchanged (a dry run).

    True when every tool-calling assistant (none errored or aborted) has calls with distinct,
    trimmed ids never used before, each answered right after it, in call order, by exactly one
    result with that id and a trimmed, non-blank name, and no other result appears anywhere.
    """
    seen: set[str] = set()
    total = len(messages)
    index = 0
    while index < total:
        message = messages[index]
        index += 1
        if isinstance(message, ToolResultMessage):
            return False  # an orphan (or a result displaced from its call)
        if not isinstance(message, AssistantMessage):
            continue
        calls = _calls(message)
        if not calls:
            continue
        if message.stop_reason in ("error", "aborted") or index + len(calls) > total:
            return False
        for call in calls:
            result = messages[index]
            index += 1
            call_id = call.id
            if (
                not isinstance(result, ToolResultMessage)
                or result.tool_call_id != call_id
                or call_id in seen
                or call_id != call_id.strip()
                or not result.tool_name
                or result.tool_name != result.tool_name.strip()
            ):
                return False
            seen.add(call_id)
    return True


@attrs.frozen(kw_only=True)
class PairingRepair:
    """
    What :func:`repair_tool_use_result_pairing` did.

    Attributes:
        messages: The repaired messages.
        added: Tool call ids that got a synthetic error result.
        dropped_duplicates: Duplicate results dropped.
        dropped_orphans: Results without a matching call dropped.
        moved: Whether results were moved (displaced or pulled forward) or anything else changed.
    """

    messages: tuple[AgentMessage, ...]
    added: tuple[str, ...] = ()
    dropped_duplicates: int = 0
    dropped_orphans: int = 0
    moved: bool = False


def repair_tool_use_result_pairing(
    messages: Sequence[AgentMessage],
    *,
    timestamp_ms: int,
    errored_assistant_policy: ErroredAssistantPolicy = "keep",
    missing_result_text: str | None = None,
) -> PairingRepair:
    """
    Make every tool call answered exactly once, right after its call (OpenClaw spec §9 step 9).

    For each assistant with tool calls, the span up to the next assistant *with tool calls* is
    scanned: matching results move directly after the assistant in call order (other messages of
    the span follow them); duplicates are dropped, a real result replacing a synthetic one; results
    for these calls found later are pulled forward; a call with no result gets a synthetic error
    result (:func:`make_missing_tool_result`, field report B06b); results matching no call are
    dropped. A result with no id answers a lone call of the same name. An assistant that stopped
    with ``error`` or ``aborted`` gets no synthetic results; with ``errored_assistant_policy="drop"``
    (what OpenClaw's replay uses) it is dropped with its results.

    Args:
        messages: The context, oldest first.
        timestamp_ms: Timestamp of synthetic results, ms since epoch.
        errored_assistant_policy: ``"keep"`` or ``"drop"`` errored/aborted tool-calling assistants.
        missing_result_text: Text of synthetic results (OpenAI Responses uses ``"aborted"``).

    Returns:
        The :class:`PairingRepair`. Afterwards every tool call of a kept assistant is followed by
        exactly one result with its id, and every result follows its call.
    """
    if pairing_intact(messages):
        return PairingRepair(messages=tuple(messages))
    out: list[AgentMessage] = []
    added: list[str] = []
    seen: set[str] = set()
    positions: dict[str, int] = {}
    dropped_duplicates = 0
    dropped_orphans = 0
    changed = False

    def push(result: ToolResultMessage) -> None:
        nonlocal dropped_duplicates, changed
        rid = _result_id(result)
        if rid and rid in seen:
            at = positions.get(rid)
            existing = out[at] if at is not None else None
            if (
                at is not None
                and existing is not None
                and is_synthetic_missing_tool_result(existing)
                and not is_synthetic_missing_tool_result(result)
            ):
                out[at] = result
                if rid in added:
                    added.remove(rid)
            dropped_duplicates += 1
            changed = True
            return
        if rid:
            seen.add(rid)
            positions[rid] = len(out)
        out.append(result)

    result_positions: dict[str, list[int]] | None = None  # built on first need: most turns are complete
    index = 0
    total = len(messages)
    while index < total:
        message = messages[index]
        if isinstance(message, ToolResultMessage):
            dropped_orphans += 1
            changed = True
            index += 1
            continue
        calls = _calls(message) if isinstance(message, AssistantMessage) else None
        if not calls:
            out.append(message)
            index += 1
            continue
        assert isinstance(message, AssistantMessage)
        ids = {c.id for c in calls}
        names = {c.id: c.name for c in calls}
        span: dict[str, ToolResultMessage] = {}
        remainder: list[AgentMessage] = []
        first_remainder = last_result = -1
        j = index + 1
        while j < total:
            nxt = messages[j]
            if isinstance(nxt, AssistantMessage):
                if _has_calls(nxt):
                    break
                remainder.append(nxt)
                first_remainder = j if first_remainder < 0 else first_remainder
            elif isinstance(nxt, ToolResultMessage):
                last_result = j
                result = _legacy_id(nxt, calls)
                rid = _result_id(result)
                if rid and rid in seen:
                    push(_with_name(result, names.get(rid)))
                elif rid and rid in ids:
                    named = _with_name(result, names.get(rid))
                    changed = changed or named is not nxt
                    existing = span.get(rid)
                    if existing is None:
                        span[rid] = named
                    else:
                        if is_synthetic_missing_tool_result(
                            existing
                        ) and not is_synthetic_missing_tool_result(named):
                            span[rid] = named
                        dropped_duplicates += 1
                        changed = True
                else:
                    dropped_orphans += 1
                    changed = True
            else:
                remainder.append(nxt)
                first_remainder = j if first_remainder < 0 else first_remainder
            j += 1
        if message.stop_reason in ("error", "aborted"):
            if errored_assistant_policy == "keep":
                out.append(message)
                for call in calls:
                    if call.id in span:
                        push(span[call.id])
            else:
                changed = True
            out.extend(remainder)
            index = j
            continue
        out.append(message)
        if span and 0 <= first_remainder < last_result:
            changed = True  # a result is moved up past other messages
        later: dict[str, ToolResultMessage] = {}
        if any(call.id not in span for call in calls):
            if result_positions is None:
                result_positions = {}
                for at, candidate in enumerate(messages):
                    if isinstance(candidate, ToolResultMessage):
                        result_positions.setdefault(_result_id(candidate), []).append(at)
            later = _later_results(messages, result_positions, j, calls, seen)
        for call in calls:
            if call.id in span:
                push(span[call.id])
            elif call.id in later:
                push(later.pop(call.id))
                changed = True
            else:
                missing = make_missing_tool_result(
                    call.id, tool_name=call.name, timestamp_ms=timestamp_ms, text=missing_result_text
                )
                added.append(call.id)
                changed = True
                push(missing)
        out.extend(remainder)
        index = j
    return PairingRepair(
        messages=tuple(out) if changed else tuple(messages),
        added=tuple(added),
        dropped_duplicates=dropped_duplicates,
        dropped_orphans=dropped_orphans,
        moved=changed,
    )


def strip_tool_result_details(messages: Sequence[AgentMessage]) -> Sequence[AgentMessage]:
    """Remove ``details`` from tool results (never sent to a model; OpenClaw ``stripToolResultDetails``)."""
    out: list[AgentMessage] = []
    changed = False
    for message in messages:
        if isinstance(message, ToolResultMessage) and message.details is not msgspec.UNSET:
            message = msgspec.structs.replace(message, details=msgspec.UNSET)
            changed = True
        out.append(message)
    return out if changed else messages
