"""
The transcript-hygiene pipeline for replay (OpenClaw spec §9) and the checks ``doctor`` reuses.

:func:`sanitize_replay_history` turns the rebuilt context into what may be sent to one provider,
in OpenClaw's order, driven by a :class:`~sessionkeeper.pruning.ReplayPolicy`. It works in memory:
the stored transcript is never rewritten. :func:`check_tool_pairing` reports, without changing
anything, what the pairing repair would fix.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

import attrs

from sessionkeeper.pruning._fused import (
    Survey,
    TailChecks,
    fill_usage_and_strip_details,
    has_item_ids,
    has_reasoning_items,
    normalize_responses_ids,
    pairing_intact,
    repair_call_inputs,
    rewrite_tool_call_ids,
    strip_thinking_signatures,
    survey,
    tail_checks,
)
from sessionkeeper.pruning._replay_policy import ReplayPolicy, is_anthropic_api, is_openai_responses_api
from sessionkeeper.pruning._replay_view import has_unknown, replay_view
from sessionkeeper.pruning._responses import (
    _resolved,
    downgrade_function_call_reasoning_pairs,
    downgrade_openai_reasoning,
    normalize_openai_responses_ids,
)
from sessionkeeper.pruning._thinking import drop_reasoning_from_history, drop_thinking_blocks
from sessionkeeper.pruning._tool_ids import sanitize_tool_call_ids
from sessionkeeper.pruning._tool_repair import (
    is_allowed_tool_call_name,
    repair_tool_call_inputs,
    repair_tool_use_result_pairing,
    strip_tool_result_details,
)
from sessionkeeper.pruning._turn_order import _merge_consecutive, _strip_dangling_tool_calls
from sessionkeeper.pruning._turns import (
    annotate_inter_session_messages,
    ensure_usage_totals,
    normalize_replay_content,
    sanitize_content_blocks,
    sanitize_google_turn_ordering,
    should_preserve_latest_assistant_thinking,
    strip_invalid_thinking_signatures,
    strip_stale_thinking_signatures,
    strip_stale_usage,
    validate_anthropic_turns,
    validate_gemini_turns,
)
from sessionkeeper.records import (
    AgentMessage,
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
)


__all__ = (
    "HygieneFinding",
    "HygieneResult",
    "check_tool_pairing",
    "sanitize_replay_history",
)

_SIGNED_THINKING_PROVIDERS = frozenset(("anthropic", "amazon-bedrock", "anthropic-vertex"))

FindingKind = Literal[
    "missing-tool-result",
    "orphan-tool-result",
    "duplicate-tool-result",
    "displaced-tool-result",
    "invalid-tool-call",
]


@attrs.frozen(kw_only=True)
class HygieneFinding:
    """
    One problem in a context's tool calls and results.

    Attributes:
        kind: ``missing-tool-result`` (a call with no result before the next tool-calling assistant
            or the end), ``orphan-tool-result`` (a result matching no earlier call),
            ``duplicate-tool-result`` (a second result for one call), ``displaced-tool-result`` (a
            result separated from its call by other messages), ``invalid-tool-call`` (no id, or a
            name that is not allowed).
        index: Index of the message at fault in the checked sequence.
        tool_call_id: The tool call id concerned (``""`` when it has none).
        detail: One human-readable line.
    """

    kind: FindingKind
    index: int
    tool_call_id: str
    detail: str


@attrs.frozen(kw_only=True)
class HygieneResult:
    """
    The replay view of a context and what was repaired.

    Attributes:
        messages: What to send to the provider.
        findings: The pairing problems found in the input (see :func:`check_tool_pairing`).
        synthetic_results: Tool call ids that got a synthetic error result.
        changed: Whether ``messages`` differs from the input.
    """

    messages: tuple[AgentMessage, ...]
    findings: tuple[HygieneFinding, ...] = ()
    synthetic_results: tuple[str, ...] = ()
    changed: bool = False


def check_tool_pairing(messages: Sequence[AgentMessage]) -> tuple[HygieneFinding, ...]:
    """
    Report tool call / result pairing problems without changing anything (for ``doctor``).

    The PAIRING INVARIANT holds when this returns no finding: every tool call of an assistant turn
    is answered by exactly one result, placed after the call and before the next assistant turn,
    with only results between the call and its last result; every result answers an earlier call.
    """
    findings: list[HygieneFinding] = []
    open_calls: dict[str, int] = {}
    answered: set[str] = set()
    other_since_assistant = False  # a message other than a tool result since the latest assistant
    valid_names: dict[str, bool] = {}
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage):
            if open_calls:
                findings.extend(_missing_results(open_calls, " before the next assistant turn"))
                open_calls = {}
            other_since_assistant = False
            for block in message.content:
                if not isinstance(block, ToolCall):
                    continue
                allowed = valid_names.get(block.name)
                if allowed is None:
                    allowed = valid_names[block.name] = is_allowed_tool_call_name(block.name)
                if not block.id or not allowed:
                    findings.append(
                        HygieneFinding(
                            kind="invalid-tool-call",
                            index=index,
                            tool_call_id=block.id,
                            detail=f"tool call {block.id!r} has no id or an invalid name {block.name!r}",
                        )
                    )
                if block.id:
                    open_calls[block.id] = index
        elif isinstance(message, ToolResultMessage):
            call_id = message.tool_call_id
            if call_id in open_calls:
                if other_since_assistant:
                    findings.append(
                        HygieneFinding(
                            kind="displaced-tool-result",
                            index=index,
                            tool_call_id=call_id,
                            detail=f"result for {call_id!r} is separated from its call by other messages",
                        )
                    )
                del open_calls[call_id]
                answered.add(call_id)
            elif call_id in answered:
                findings.append(
                    HygieneFinding(
                        kind="duplicate-tool-result",
                        index=index,
                        tool_call_id=call_id,
                        detail=f"second result for tool call {call_id!r}",
                    )
                )
            else:
                findings.append(
                    HygieneFinding(
                        kind="orphan-tool-result",
                        index=index,
                        tool_call_id=call_id,
                        detail=f"result for {call_id!r} answers no earlier tool call",
                    )
                )
        else:
            other_since_assistant = True
    findings.extend(_missing_results(open_calls, ""))
    return tuple(sorted(findings, key=lambda f: f.index))


def _missing_results(open_calls: Mapping[str, int], until: str) -> Iterator[HygieneFinding]:
    """A ``missing-tool-result`` finding per unanswered call (id -> index of its turn), ``until`` where."""
    for call_id, at in open_calls.items():
        yield HygieneFinding(
            kind="missing-tool-result",
            index=at,
            tool_call_id=call_id,
            detail=f"tool call {call_id!r} has no result{until}",
        )


def sanitize_replay_history(
    messages: Sequence[AgentMessage],
    *,
    policy: ReplayPolicy,
    timestamp_ms: int,
    api: str | None = None,
    provider: str | None = None,
    allowed_tool_names: Iterable[str] | None = None,
    model_changed: bool = False,
) -> HygieneResult:
    """
    Prepare a context for replay to one provider (OpenClaw ``sanitizeSessionHistory`` and
    ``validateReplayTurns``, spec §9), in OpenClaw's order:

    1. user turns routed from another session get the ``[Inter-session message] ... isUser=false``
       marker; messages kept as unknown only because of extra fields are read as records (the extra
       fields are never sent); :func:`~sessionkeeper.pruning.normalize_replay_content` (blank and silent
       turns, mirrors, failed turns); blank text blocks dropped (:func:`sanitize_content_blocks`; image
       downscaling is not done);
    2. signed-thinking providers (``anthropic``, ``amazon-bedrock``, ``anthropic-vertex``) or
       ``policy.preserve_signatures``: signatures older than the latest compaction are stripped,
       then thinking without a valid signature is dropped (the latest assistant turn keeps its own
       when it ends the context or is the tool turn in flight);
    3. ``policy.drop_reasoning_from_history`` / ``policy.drop_thinking_blocks``;
    4. :func:`~sessionkeeper.pruning.repair_tool_call_inputs`; on Anthropic APIs with signed thinking
       kept, a thinking turn with tool calls is kept whole or dropped whole (its signature covers it),
       and its tool-call ids are not rewritten in step 6;
    5. OpenAI Responses: pairing repair with errored turns dropped and ``aborted`` synthetic results;
       orphan reasoning items dropped, ``call_id|fc_id`` ids normalised, ``fc_`` ids without their
       reasoning removed (:mod:`sessionkeeper.pruning._responses`); repaired again at the end;
    6. ``policy.sanitize_tool_call_ids``: strict / strict9 ids, calls and results kept paired.
       Deliberate deviation **H1**: without id sanitisation, a tool-call id used by two calls still
       gets a unique id per use (``<id>_2``...), results following their call; OpenClaw leaves the
       second call unanswered, which providers reject and which breaks the pairing invariant;
    7. other APIs, when ``policy.repair_tool_use_result_pairing``: pairing repair with errored
       turns dropped (synthetic results marked as such: field report B06b); tool-result ``details``
       are stripped; usage from before the latest compaction is zeroed and every usage gets a
       ``totalTokens``;
    8. ``policy.apply_google_turn_ordering``: a leading assistant turn gets a user turn before it;
    9. ``policy.validate_gemini_turns`` then ``policy.validate_anthropic_turns``.

    Not reproduced (no portable equivalent): image downscaling, provider-plugin hooks and the
    model-snapshot bookkeeping (pass ``model_changed``).

    Args:
        messages: The rebuilt context, oldest first.
        policy: The replay policy (:func:`~sessionkeeper.pruning.resolve_replay_policy`).
        timestamp_ms: Timestamp of synthesised messages, ms since epoch.
        api: The model's wire API (selects the Responses path and signed-thinking handling).
        provider: Provider id (signed-thinking providers).
        allowed_tool_names: Tool names the model may call; tool calls naming others are dropped.
        model_changed: The model differs from the one that produced the history (OpenClaw tracks this
            with a ``model-snapshot`` custom entry): OpenAI Responses reasoning items are dropped.

    Returns:
        The :class:`HygieneResult`; after it, with pairing repair on, the PAIRING INVARIANT holds
        (:func:`check_tool_pairing` finds nothing but what validation deliberately leaves).
    """
    findings = check_tool_pairing(messages)
    base64_signatures = policy.sanitize_thought_signatures and not policy.preserve_signatures
    facts = survey(messages, thought_signatures=base64_signatures)
    args = _StepArgs(
        policy=policy,
        timestamp_ms=timestamp_ms,
        api=api,
        provider=provider,
        allowed_tool_names=allowed_tool_names,
        model_changed=model_changed,
    )
    if not facts.plain:
        current, synthetic = _reference_steps(messages, args)
    else:
        current, synthetic = _fused_steps(messages, facts, args)
    out = tuple(current)
    changed = len(out) != len(messages) or any(a is not b for a, b in zip(out, messages, strict=False))
    return HygieneResult(messages=out, findings=findings, synthetic_results=tuple(synthetic), changed=changed)


@attrs.frozen(kw_only=True)
class _StepArgs:
    """What the steps read of :func:`sanitize_replay_history`'s arguments (documented there)."""

    policy: ReplayPolicy
    timestamp_ms: int
    api: str | None
    provider: str | None
    allowed_tool_names: Iterable[str] | None
    model_changed: bool


def _owned_thinking(policy: ReplayPolicy, api: str | None, signed: bool) -> bool:
    """Anthropic API with signed thinking kept: thinking turns with tool calls are kept whole."""
    return (
        is_anthropic_api(api)
        and policy.validate_anthropic_turns
        and (policy.preserve_signatures or signed)
        and not policy.drop_thinking_blocks
    )


def _fused_steps(
    messages: Sequence[AgentMessage],
    facts: Survey,
    args: _StepArgs,
) -> tuple[Sequence[AgentMessage], list[str]]:
    """
    :func:`_reference_steps` on a plain context (:func:`~sessionkeeper.pruning._fused.survey`).

    Steps with nothing to do are skipped on the survey's word, steps that walk the list the same way
    run as one walk (:mod:`sessionkeeper.pruning._fused`); the result is the reference's.
    """
    responses = is_openai_responses_api(args.api)
    current: Sequence[AgentMessage] = messages
    if facts.content_work:
        current = sanitize_content_blocks(
            normalize_replay_content(current),
            preserve_signatures=args.policy.preserve_signatures,
            base64_thought_signatures=args.policy.sanitize_thought_signatures,
        )
    signed = _signed_thinking(args.provider)
    if signed or args.policy.preserve_signatures:
        current = strip_thinking_signatures(
            current,
            latest_compaction=facts.latest_compaction,
            preserve_latest_assistant=should_preserve_latest_assistant_thinking(current),
        )
    current = _drop_thinking(current, args.policy)
    owned_thinking = _owned_thinking(args.policy, args.api, signed)
    current = repair_call_inputs(
        current, allowed_tool_names=args.allowed_tool_names, provider_owned_thinking_replay=owned_thinking
    )
    synthetic: list[str] = []
    if responses and args.policy.repair_tool_use_result_pairing and not pairing_intact(current):
        current, synthetic = _repair_pairing(
            current, synthetic, timestamp_ms=args.timestamp_ms, responses=True
        )
    deferred = False  # the Responses id normalising rides on the id rewrite (one walk, one copy)
    if responses:
        if has_reasoning_items(current):
            current = downgrade_openai_reasoning(current, drop_replayable=args.model_changed)
        deferred = (
            not owned_thinking
            and _rewrites_ids(args.policy)
            and not has_item_ids(current, normalize=_resolved)
        )
        if not deferred:
            current = normalize_responses_ids(current)
            if has_item_ids(current):
                current = downgrade_function_call_reasoning_pairs(current)
    current = _tool_call_ids(
        rewrite_tool_call_ids,
        current,
        args.policy,
        owned_thinking,
        args.allowed_tool_names,
        **({"normalize": _resolved} if deferred else {}),
    )
    checks: TailChecks | None = None
    if not responses and args.policy.repair_tool_use_result_pairing:
        checks = tail_checks(current, dangling_check=args.policy.validate_anthropic_turns)
        if not checks.pairing_intact:
            current, synthetic = _repair_pairing(
                current, synthetic, timestamp_ms=args.timestamp_ms, responses=False
            )
            checks = None
    current = fill_usage_and_strip_details(current)
    if (  # repaired again after the provider step
        responses and args.policy.repair_tool_use_result_pairing
    ):
        checks = tail_checks(current, dangling_check=args.policy.validate_anthropic_turns)
        if not checks.pairing_intact:
            current, synthetic = _repair_pairing(
                current, synthetic, timestamp_ms=args.timestamp_ms, responses=True
            )
            checks = None
    if args.policy.apply_google_turn_ordering:
        current = sanitize_google_turn_ordering(current, timestamp_ms=args.timestamp_ms)
    if args.policy.validate_gemini_turns or args.policy.validate_anthropic_turns:
        if checks is None:
            checks = tail_checks(current, dangling_check=args.policy.validate_anthropic_turns)
        if args.policy.validate_gemini_turns and checks.assistant_runs:
            current = validate_gemini_turns(current)
            checks = tail_checks(current, dangling_check=args.policy.validate_anthropic_turns)
        if args.policy.validate_anthropic_turns:
            if checks.assistant_runs:
                current = validate_anthropic_turns(current)
            else:
                if checks.dangling:
                    current = _strip_dangling_tool_calls(current)
                if checks.user_runs:
                    current = _merge_consecutive(current, "user")
    return current, synthetic


def _reference_steps(
    messages: Sequence[AgentMessage],
    args: _StepArgs,
) -> tuple[Sequence[AgentMessage], list[str]]:
    """
    The steps of :func:`sanitize_replay_history` as a plain composition of the public passes.

    Used for contexts that are not plain (unknown-shape messages, record subclasses) and, in the
    tests, as the reference the fused steps must equal.
    """
    responses = is_openai_responses_api(args.api)
    current: Sequence[AgentMessage] = messages
    if has_unknown(messages):  # both steps only read or rewrite unknown-shape messages
        current = replay_view(annotate_inter_session_messages(messages))
    current = normalize_replay_content(current)
    current = sanitize_content_blocks(
        current,
        preserve_signatures=args.policy.preserve_signatures,
        base64_thought_signatures=args.policy.sanitize_thought_signatures,
    )
    signed = _signed_thinking(args.provider)
    if signed or args.policy.preserve_signatures:
        preserve_latest = should_preserve_latest_assistant_thinking(current)
        current = strip_stale_thinking_signatures(current)
        current = strip_invalid_thinking_signatures(current, preserve_latest_assistant=preserve_latest)
    current = _drop_thinking(current, args.policy)
    owned_thinking = _owned_thinking(args.policy, args.api, signed)
    current = repair_tool_call_inputs(
        current, allowed_tool_names=args.allowed_tool_names, provider_owned_thinking_replay=owned_thinking
    )
    synthetic: list[str] = []
    if responses and args.policy.repair_tool_use_result_pairing:
        current, synthetic = _repair_pairing(
            current, synthetic, timestamp_ms=args.timestamp_ms, responses=True
        )
    if responses:
        current = downgrade_openai_reasoning(current, drop_replayable=args.model_changed)
        current = downgrade_function_call_reasoning_pairs(normalize_openai_responses_ids(current))
    current = _tool_call_ids(
        sanitize_tool_call_ids, current, args.policy, owned_thinking, args.allowed_tool_names
    )
    if not responses and args.policy.repair_tool_use_result_pairing:
        current, synthetic = _repair_pairing(
            current, synthetic, timestamp_ms=args.timestamp_ms, responses=False
        )
    current = ensure_usage_totals(strip_stale_usage(strip_tool_result_details(current)))
    if responses and args.policy.repair_tool_use_result_pairing:  # repaired again after the provider step
        current, synthetic = _repair_pairing(
            current, synthetic, timestamp_ms=args.timestamp_ms, responses=True
        )
    if args.policy.apply_google_turn_ordering:
        current = sanitize_google_turn_ordering(current, timestamp_ms=args.timestamp_ms)
    if args.policy.validate_gemini_turns:
        current = validate_gemini_turns(current)
    if args.policy.validate_anthropic_turns:
        current = validate_anthropic_turns(current)
    return current, synthetic


def _repair_pairing(
    messages: Sequence[AgentMessage], synthetic: list[str], *, timestamp_ms: int, responses: bool
) -> tuple[Sequence[AgentMessage], list[str]]:
    """
    Step 9's pairing repair (errored turns dropped; for the Responses API a missing result reads
    ``aborted``); returns the messages and ``synthetic`` plus the ids of the results it made up.
    """
    repaired = repair_tool_use_result_pairing(
        messages,
        timestamp_ms=timestamp_ms,
        errored_assistant_policy="drop",
        missing_result_text="aborted" if responses else None,
    )
    return repaired.messages, synthetic + list(repaired.added)


def _tool_call_ids(
    rewrite: Callable[..., Sequence[AgentMessage]],
    messages: Sequence[AgentMessage],
    policy: ReplayPolicy,
    owned_thinking: bool,
    allowed_tool_names: Iterable[str] | None,
    **extra: Any,
) -> Sequence[AgentMessage]:
    """
    Step 8 with ``rewrite`` (:func:`sanitize_tool_call_ids` or its fused twin, given ``extra``): the
    policy's id mode, else ``dedupe`` when the pairing is repaired (deviation H1), else the messages as
    they are (:func:`_rewrites_ids` says which).
    """
    if policy.sanitize_tool_call_ids and policy.tool_call_id_mode is not None:
        return rewrite(
            messages,
            mode=policy.tool_call_id_mode,
            preserve_thinking_turn_ids=owned_thinking,
            preserve_native_anthropic_ids=policy.preserve_native_anthropic_tool_use_ids,
            allowed_tool_names=allowed_tool_names,
            **extra,
        )
    if policy.repair_tool_use_result_pairing:
        return rewrite(messages, mode="dedupe", **extra)  # deviation H1
    return messages


def _rewrites_ids(policy: ReplayPolicy) -> bool:
    """Whether :func:`_tool_call_ids` runs a rewrite under ``policy``."""
    return (
        policy.sanitize_tool_call_ids and policy.tool_call_id_mode is not None
    ) or policy.repair_tool_use_result_pairing


def _signed_thinking(provider: str | None) -> bool:
    """Whether the provider signs thinking (its signatures are checked before replay)."""
    return (provider or "").strip().lower() in _SIGNED_THINKING_PROVIDERS


def _drop_thinking(messages: Sequence[AgentMessage], policy: ReplayPolicy) -> Sequence[AgentMessage]:
    """Reasoning dropped from history, then thinking blocks, as the policy asks."""
    if policy.drop_reasoning_from_history:
        messages = drop_reasoning_from_history(messages)
    if policy.drop_thinking_blocks:
        messages = drop_thinking_blocks(messages)
    return messages
