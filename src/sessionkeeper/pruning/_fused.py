"""
Fused, allocation-light forms of hygiene passes for :func:`~sessionkeeper.pruning.sanitize_replay_history`.

Each function here equals a composition of the public passes (named in its docstring) on a *plain*
context, one where every message is exactly one of the known record types and every assistant
block exactly a known block type (:func:`survey` says so). On plain contexts a class check is a
``type(x) is C`` comparison instead of ``isinstance`` (three times cheaper on msgspec structs), and
passes that walk the list the same way are merged into one walk. Whenever a fast check finds
something to change that it does not rewrite itself, the caller runs the public pass, so the output
is the reference composition's (checked by a differential property test in
``tests/pruning/test_pruning_hygiene_fused.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

import attrs
import msgspec

from sessionkeeper.pruning._responses import _reasoning_item, _resolved
from sessionkeeper.pruning._thinking import OMITTED_ASSISTANT_REASONING_TEXT
from sessionkeeper.pruning._tool_ids import (
    _STRICT_MAX,
    _ids_unchanged,
    _reserve_thinking_turns,
    _Resolver,
    _sanitized_id,
)
from sessionkeeper.pruning._tool_repair import (
    keep_thinking_turn,
    pairing_intact,
    repair_tool_call_inputs,
    survey_calls,
)
from sessionkeeper.pruning._turns import (
    _TRANSCRIPT_ONLY_MODELS,
    _droppable_trailing,
    _has_bad_thought_signature,
    _has_blank,
    _latest_assistant,
    _strip_signatures,
)
from sessionkeeper.records import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)


__all__ = (
    "Survey",
    "fill_usage_and_strip_details",
    "has_item_ids",
    "has_reasoning_items",
    "normalize_responses_ids",
    "pairing_intact",
    "repair_call_inputs",
    "rewrite_tool_call_ids",
    "strip_thinking_signatures",
    "survey",
    "tail_checks",
)

_OTHER_RECORDS: frozenset[type] = frozenset(
    (BashExecutionMessage, CustomMessage, BranchSummaryMessage, CompactionSummaryMessage)
)
_ASSISTANT_BLOCKS: frozenset[type] = frozenset((TextContent, ThinkingContent, ToolCall, ImageContent))
_ZERO_USAGE = Usage(total_tokens=0)


@attrs.frozen(kw_only=True)
class Survey:
    """
    Facts about a context gathered in one walk.

    Attributes:
        plain: Every message is exactly a known record type (no :class:`UnknownMessage`, no subclass)
            and every assistant content block exactly a known block type.
        content_work: ``normalize_replay_content`` or ``sanitize_content_blocks`` may change
            something (conservative: a ``True`` only means the public passes must run).
        latest_compaction: Greatest ``timestamp`` of a compaction summary, ``None`` without one.
    """

    plain: bool
    content_work: bool
    latest_compaction: float | None


def survey(messages: Sequence[AgentMessage], *, thought_signatures: bool) -> Survey:
    """
    One walk that answers :class:`Survey`.

    ``content_work`` is true when ``_normalize_needed`` is (blank or empty user turns, transcript-only
    mirrors, empty assistant turns, ``stopReason: "length"``, text holding ``_`` (every silent reply
    does), a droppable last turn), or when ``sanitize_content_blocks`` would drop a blank block or,
    with ``thought_signatures``, a non-base64 ``thoughtSignature``.
    """
    plain = True
    work = False
    latest: float | None = None
    for message in messages:
        if type(message) is AssistantMessage:
            content = message.content
            if (
                not content
                or message.stop_reason == "length"
                or (message.provider == "openclaw" and message.model in _TRANSCRIPT_ONLY_MODELS)
            ):
                work = True
            for block in content:
                if type(block) is TextContent:
                    text = block.text
                    if not text or text.isspace() or "_" in text:
                        work = True
                elif type(block) not in _ASSISTANT_BLOCKS:
                    plain = False
            if thought_signatures and message.stop_reason != "error" and _has_bad_thought_signature(content):
                work = True
        elif type(message) is ToolResultMessage:
            if _has_blank(message.content):
                work = True
        elif type(message) is UserMessage:
            user_content = message.content
            if isinstance(user_content, str):
                if not user_content or user_content.isspace():
                    work = True
            elif not user_content or _has_blank(user_content):
                work = True
        elif type(message) is CompactionSummaryMessage:
            if latest is None or message.timestamp > latest:
                latest = message.timestamp
        elif type(message) not in _OTHER_RECORDS:
            plain = False
    if messages and _droppable_trailing(messages[-1]):
        work = True
    return Survey(plain=plain, content_work=work, latest_compaction=latest)


def strip_thinking_signatures(
    messages: Sequence[AgentMessage], *, latest_compaction: float | None, preserve_latest_assistant: bool
) -> Sequence[AgentMessage]:
    """
    ``strip_invalid_thinking_signatures(strip_stale_thinking_signatures(messages), ...)`` in one walk.

    ``latest_compaction`` is the greatest compaction-summary timestamp of ``messages`` (``None``
    without one). Neither pass drops or moves a message, so each assistant turn is rewritten by the
    two per-message rules in turn. Plain contexts only.
    """
    latest = _latest_assistant(messages) if preserve_latest_assistant else -1
    out: list[AgentMessage] | None = None
    for index, message in enumerate(messages):
        if type(message) is not AssistantMessage:
            if out is not None:
                out.append(message)
            continue
        new = message
        if latest_compaction is not None and message.timestamp < latest_compaction:
            new = _strip_signatures(message)
        if index != latest:
            for block in new.content:
                if type(block) is ThinkingContent:
                    signature = block.thinking_signature
                    if not (isinstance(signature, str) and signature.strip()):
                        break
            else:
                block = None
            if block is not None:
                kept = [
                    b
                    for b in new.content
                    if type(b) is not ThinkingContent
                    or (isinstance(b.thinking_signature, str) and b.thinking_signature.strip())
                ]
                new = msgspec.structs.replace(
                    new, content=kept or [TextContent(text=OMITTED_ASSISTANT_REASONING_TEXT)]
                )
        if new is not message and out is None:
            out = list(messages[:index])
        if out is not None:
            out.append(new)
    return messages if out is None else out


def fill_usage_and_strip_details(messages: Sequence[AgentMessage]) -> Sequence[AgentMessage]:
    """
    ``ensure_usage_totals(strip_stale_usage(strip_tool_result_details(messages)))`` in one walk.

    None of the three drops or moves a message: a tool result loses ``details``; an assistant turn
    at or before the latest compaction summary (the last one in order) gets a zero usage, then a
    usage without ``totalTokens`` gets the sum of its parts. Plain contexts only.
    """
    stale: float | None = None
    for message in messages:
        if type(message) is CompactionSummaryMessage:
            stale = message.timestamp
    out: list[AgentMessage] | None = None
    unset = msgspec.UNSET
    for index, message in enumerate(messages):
        new: AgentMessage = message
        if type(message) is ToolResultMessage:
            if message.details is not unset:
                new = msgspec.structs.replace(message, details=unset)
        elif type(message) is AssistantMessage:
            if stale is not None and message.timestamp <= stale and message.usage != _ZERO_USAGE:
                new_assistant = msgspec.structs.replace(message, usage=_ZERO_USAGE)
            else:
                new_assistant = message
            usage = new_assistant.usage
            if usage.total_tokens is unset:
                total = usage.input + usage.output + usage.cache_read + usage.cache_write
                new_assistant = msgspec.structs.replace(
                    new_assistant, usage=msgspec.structs.replace(usage, total_tokens=total)
                )
            new = new_assistant
        if new is not message and out is None:
            out = list(messages[:index])
        if out is not None:
            out.append(new)
    return messages if out is None else out


def _unanswered(turn: AssistantMessage, answered: dict[str, set[str]]) -> bool:
    thinking = False
    for block in turn.content:
        if type(block) is ThinkingContent:
            thinking = True
            break
    for block in turn.content:
        if type(block) is not ToolCall:
            continue
        names: Any = answered.get(block.id.strip())
        if names is None:
            return True
        if thinking:
            name = block.name.strip()
            if not name or (names - {""} and name not in names):
                return True
    return False


def rewrite_tool_call_ids(
    messages: Sequence[AgentMessage],
    *,
    mode: Literal["strict", "strict9", "dedupe"],
    preserve_thinking_turn_ids: bool = False,
    preserve_native_anthropic_ids: bool = False,
    allowed_tool_names: Iterable[str] | None = None,
    normalize: Callable[[str], str] | None = None,
) -> Sequence[AgentMessage]:
    """
    :func:`~sessionkeeper.pruning.sanitize_tool_call_ids` on a plain context, same arguments and result.

    The resolver's common case is inlined: in ``strict`` mode without native ids, the first use of
    a raw id takes its (cached) sanitised form unless another id holds it; a result takes the oldest
    pending id of its call. Everything else goes through the same resolver.

    ``normalize`` (a pure per-id map; not with ``preserve_thinking_turn_ids``): the result is that of
    the rewrite on the context whose every call and result id was first replaced by ``normalize(id)``
    (a message copied when either map changes one of its ids), in one walk and one copy:
    ``sanitize_tool_call_ids(normalize_openai_responses_ids(messages))`` with ``_resolved``.
    """
    if normalize is not None and preserve_thinking_turn_ids:
        raise ValueError("normalize is not supported with preserve_thinking_turn_ids")
    resolver = _Resolver(mode, keep_native=preserve_native_anthropic_ids)
    kept_turns = _reserve_thinking_turns(messages, resolver, preserve_thinking_turn_ids, allowed_tool_names)
    if normalize is None and _ids_unchanged(
        messages, mode, kept_turns, resolver.used, preserve_native_anthropic_ids
    ):
        return messages
    used, occurrences, pending = resolver.used, resolver.call_occurrences, resolver.pending
    strict = mode == "strict" and not preserve_native_anthropic_ids

    def call_id(raw: str) -> str:
        if not raw:
            return raw
        if not strict or raw in occurrences:
            return resolver.call(raw)
        new_id = _sanitized_id(raw, "strict")[:_STRICT_MAX]
        if new_id in used:
            new_id = resolver._unique(raw)
        occurrences[raw] = 1
        used.add(new_id)
        queue = pending.get(raw)
        if queue is None:
            pending[raw] = [new_id]
        else:
            queue.append(new_id)
        return new_id

    replace = msgspec.structs.replace
    dedupe = mode == "dedupe"
    out: list[AgentMessage] | None = None  # copied on the first change
    for index, message in enumerate(messages):
        new: AgentMessage = message
        if type(message) is AssistantMessage:
            if index in kept_turns:
                for block in message.content:
                    if type(block) is ToolCall and block.id:
                        resolver.preserve(block.id)
            else:
                content: list[TextContent | ThinkingContent | ToolCall] | None = None
                for position, block in enumerate(message.content):
                    if type(block) is ToolCall:
                        old = block.id
                        raw = old if normalize is None else normalize(old)
                        replacement = call_id(raw)
                        if replacement != raw or raw != old:
                            if content is None:
                                content = list(message.content)
                            content[position] = replace(block, id=replacement)
                if content is not None:
                    new = replace(message, content=content)
        elif type(message) is ToolResultMessage:
            old = message.tool_call_id
            raw = old if normalize is None else normalize(old)
            new_id = raw
            if raw:
                queue = pending.get(raw)
                if queue is not None or not dedupe:  # in dedupe mode an orphan keeps its id
                    if queue:
                        new_id = queue.pop(0)
                        if not queue:
                            del pending[raw]
                    else:
                        new_id = resolver.result(raw)
            if new_id != raw or raw != old:
                new = replace(message, tool_call_id=new_id)
        if new is not message and out is None:
            out = list(messages[:index])
        if out is not None:
            out.append(new)
    return messages if out is None else out


def repair_call_inputs(
    messages: Sequence[AgentMessage],
    *,
    allowed_tool_names: Iterable[str] | None = None,
    provider_owned_thinking_replay: bool = False,
) -> Sequence[AgentMessage]:
    """
    :func:`~sessionkeeper.pruning.repair_tool_call_inputs` on a plain context, same result.

    A dry run of the public pass with type-identity checks: while every tool-calling turn would be
    kept as it is (clean calls, or a replay-safe signed thinking turn under
    ``provider_owned_thinking_replay``), nothing is built; at the first turn the pass would change,
    the public pass runs on the whole context.
    """
    allowed = tuple(allowed_tool_names) if allowed_tool_names is not None else None
    owned = provider_owned_thinking_replay
    valid_names: dict[str, bool] = {}
    preserved: set[str] = set()
    prior: set[str] = set()
    for index, message in enumerate(messages):
        if type(message) is not AssistantMessage:
            continue
        has_call, has_thinking, clean = survey_calls(message, valid_names, allowed)
        if not has_call:
            continue
        if owned and has_thinking:
            if not keep_thinking_turn(messages, index, message, allowed, preserved=preserved, prior=prior):
                break
            continue
        if not clean:
            break
        for block in message.content:
            if type(block) is ToolCall:
                prior.add(block.id)
    else:
        return messages
    return repair_tool_call_inputs(messages, allowed_tool_names=allowed, provider_owned_thinking_replay=owned)


def normalize_responses_ids(messages: Sequence[AgentMessage]) -> Sequence[AgentMessage]:
    """
    :func:`~sessionkeeper.pruning._responses.normalize_openai_responses_ids` on a plain context.

    Same rewrite (the cached per-id resolution), with type-identity checks and each id resolved
    once per block.
    """
    resolve = _resolved
    replace = msgspec.structs.replace
    out: list[AgentMessage] | None = None  # copied on the first change
    for index, message in enumerate(messages):
        new: AgentMessage = message
        if type(message) is AssistantMessage:
            content: list[TextContent | ThinkingContent | ToolCall] | None = None
            for position, block in enumerate(message.content):
                if type(block) is ToolCall:
                    new_id = resolve(block.id)
                    if new_id != block.id:
                        if content is None:
                            content = list(message.content)
                        content[position] = replace(block, id=new_id)
            if content is not None:
                new = replace(message, content=content)
        elif type(message) is ToolResultMessage:
            new_id = resolve(message.tool_call_id)
            if new_id != message.tool_call_id:
                new = replace(message, tool_call_id=new_id)
        if new is not message and out is None:
            out = list(messages[:index])
        if out is not None:
            out.append(new)
    return messages if out is None else out


def has_reasoning_items(messages: Sequence[AgentMessage]) -> bool:
    """
    Whether an assistant turn holds a thinking block carrying a Responses reasoning item (plain contexts).

    Without one, ``downgrade_openai_reasoning`` changes nothing.
    """
    for message in messages:
        if type(message) is AssistantMessage:
            for block in message.content:
                if type(block) is ThinkingContent and _reasoning_item(block.thinking_signature):
                    return True
    return False


def has_item_ids(messages: Sequence[AgentMessage], *, normalize: Callable[[str], str] | None = None) -> bool:
    """
    Whether a tool call id (``normalize(id)`` when given) holds ``|fc_`` (plain contexts).

    Without one, ``downgrade_function_call_reasoning_pairs`` changes nothing: it only rewrites a
    ``call_id|fc_...`` call (and the results of a turn it rewrote).
    """
    for message in messages:
        if type(message) is AssistantMessage:
            for block in message.content:
                if type(block) is ToolCall and "|fc_" in (
                    block.id if normalize is None else normalize(block.id)
                ):
                    return True
    return False


@attrs.frozen(kw_only=True)
class TailChecks:
    """
    What the last steps would do, from one walk (plain contexts).

    Attributes:
        pairing_intact: :func:`pairing_intact`.
        assistant_runs: Two assistant turns follow each other.
        user_runs: Two user turns follow each other.
        dangling: ``_strip_dangling_tool_calls`` would change a turn: a tool-calling turn has a call
            no result answers (trimmed id) before the next assistant turn; with thinking, an answered
            call also needs a non-blank name matching one of its results' non-blank names, if any.
    """

    pairing_intact: bool
    assistant_runs: bool
    user_runs: bool
    dangling: bool


def tail_checks(messages: Sequence[AgentMessage], *, dangling_check: bool = True) -> TailChecks:
    """
    :func:`pairing_intact`, the role runs and the dangling-call check in one walk (their single-purpose
    references live with the differential test, ``tests/pruning/_single_checks.py``).

    The steps between the pairing repair and turn validation (details and usage, the Google
    bootstrap turn) change none of the three answers, so one walk serves them all when the pairing
    is intact. ``dangling_check=False`` (only the Anthropic turn validation reads it): the results'
    ids and names are not collected and ``dangling`` is ``False``.
    """
    intact = True
    assistant_runs = user_runs = dangling = False
    last: type | None = None
    seen: set[str] = set()
    expected: list[ToolCall] = []
    position = 0
    open_turn: AssistantMessage | None = None
    answered: dict[str, set[str]] = {}
    for message in messages:
        cls = type(message)
        if cls is last:
            if cls is AssistantMessage:
                assistant_runs = True
            elif cls is UserMessage:
                user_runs = True
        last = cls
        if type(message) is AssistantMessage:
            if open_turn is not None and not dangling and _unanswered(open_turn, answered):
                dangling = True
            open_turn = None
            calls = [b for b in message.content if type(b) is ToolCall and b.id]
            if calls and dangling_check:
                open_turn = message
                answered = {}
            if intact:
                if position < len(expected) or (calls and message.stop_reason in ("error", "aborted")):
                    intact = False
                expected, position = calls, 0
        elif type(message) is ToolResultMessage:
            if open_turn is not None:
                rid = message.tool_call_id.strip()
                if rid:
                    names = answered.get(rid)
                    if names is None:
                        names = answered[rid] = set()
                    names.add(message.tool_name.strip())
            if intact:
                if position >= len(expected):
                    intact = False
                else:
                    call_id = expected[position].id
                    name = message.tool_name
                    if (
                        message.tool_call_id != call_id
                        or call_id in seen
                        or call_id != call_id.strip()
                        or not name
                        or name != name.strip()
                    ):
                        intact = False
                    seen.add(call_id)
                    position += 1
        elif intact and position < len(expected):
            intact = False
    if open_turn is not None and not dangling and _unanswered(open_turn, answered):
        dangling = True
    if position < len(expected):
        intact = False
    return TailChecks(
        pairing_intact=intact, assistant_runs=assistant_runs, user_runs=user_runs, dangling=dangling
    )
