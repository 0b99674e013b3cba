"""
The cache-TTL context pruner (OpenClaw spec §7, ``context-pruning/pruner.ts`` and ``extension.ts``).

Pruning works on the rebuilt context, in memory, before a model call; the transcript is never
rewritten. Only old ``toolResult`` messages change: first each eligible result longer than
``softTrim.maxChars`` is cut to a head and a tail with a note, then, if the context is still too
large, eligible results are replaced by a placeholder, oldest first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Literal

import attrs

from sessionkeeper._clock import SYSTEM_CLOCK, Clock
from sessionkeeper._tokens import EstimateTokenCounter, TokenCounter
from sessionkeeper._tracing import traced
from sessionkeeper._window import (
    DEFAULT_CONTEXT_WINDOW_TOKENS,
    ContextWindowSource,
    choose_context_window,
    positive_tokens,
)
from sessionkeeper.pruning._cache_ttl import is_cache_ttl_eligible_provider, is_cache_ttl_expired
from sessionkeeper.pruning._estimate import IMAGE_CHAR_ESTIMATE, char_weigher, estimate_message_chars
from sessionkeeper.pruning._replay_policy import resolve_replay_policy
from sessionkeeper.pruning._settings import PruningSettings, make_tool_predicate
from sessionkeeper.pruning._stable import PruneLedger
from sessionkeeper.pruning._thinking import drop_thinking_blocks, message_role
from sessionkeeper.pruning._trim import (
    ReappliedPruning,
    apply_prune_ledger,
    block_count,
    has_images,
    soft_trim,
    tool_call_id_of,
    tool_name_of,
    with_text,
)
from sessionkeeper.records import (
    AgentMessage,
)


__all__ = (
    "DEFAULT_CONTEXT_WINDOW_TOKENS",
    "ContextWindowSource",
    "PruneResult",
    "PruneSkipReason",
    "Pruner",
    "choose_context_window",
    "positive_tokens",
    "prune_context_messages",
    "resolve_context_window_tokens",
)

_log = logging.getLogger("sessionkeeper.pruning")

PruneSkipReason = Literal[
    "mode-off",
    "provider-not-eligible",
    "ttl-disabled",
    "ttl-not-expired",
    "no-context-window",
    "too-few-assistants",
    "below-soft-trim-ratio",
]


@attrs.frozen(kw_only=True)
class PruneResult:
    """
    What one pruning pass did.

    Attributes:
        messages: The context to send, in order (the input's own objects where unchanged).
        changed: Whether any message was replaced.
        soft_trimmed: Tool call ids of results that were soft-trimmed (or had their images replaced
            by markers) and not hard-cleared afterwards, oldest first; decided by this call (a result
            re-pruned from a :class:`PruneLedger` is in ``reapplied``).
        hard_cleared: Tool call ids of results replaced by the hard-clear placeholder, oldest first;
            decided by this call.
        chars_before: Weighted char estimate of the context before pruning (spec §7 estimate; thinking
            the replay policy drops is left out).
        chars_after: The same estimate after pruning.
        context_window_tokens: The window the ratios were computed against, ``None`` when unknown.
        skipped: Why nothing was evaluated, or ``None`` when the algorithm ran (``changed`` may still
            be ``False``, e.g. when no result was long enough to trim).
        last_cache_touch_at: The cache-touch time the host should keep (ms since epoch): the pruning
            time when this call decided something new (the prompt cache is rebuilt, so the TTL
            restarts), else the value passed in.
        reapplied: Tool call ids whose earlier decision (the ledger passed to :meth:`Pruner.prune`)
            was applied again, in context order (deviation D11).
    """

    messages: tuple[AgentMessage, ...]
    changed: bool
    soft_trimmed: tuple[str, ...] = ()
    hard_cleared: tuple[str, ...] = ()
    chars_before: int
    chars_after: int
    context_window_tokens: int | None = None
    skipped: PruneSkipReason | None = None
    last_cache_touch_at: int | None = None
    reapplied: tuple[str, ...] = ()

    @property
    def chars_saved(self) -> int:
        """``chars_before - chars_after`` (weighted chars)."""
        return self.chars_before - self.chars_after


def protected_tail_start(messages: Sequence[AgentMessage], keep_last_assistants: int) -> int | None:
    """
    Index of the ``keep_last_assistants``-th last assistant message: results from there on are never
    pruned; ``len(messages)`` when ``keep_last_assistants <= 0``, ``None`` when there are fewer
    assistants (nothing is pruned then).
    """
    if keep_last_assistants <= 0:
        return len(messages)
    remaining = keep_last_assistants
    for index in range(len(messages) - 1, -1, -1):
        if message_role(messages[index]) == "assistant":
            remaining -= 1
            if remaining == 0:
                return index
    return None


def resolve_context_window_tokens(
    *,
    configured: int | None = None,
    model_context_tokens: int | None = None,
    model_context_window: int | None = None,
    context_tokens_cap: int | None = None,
    default: int = DEFAULT_CONTEXT_WINDOW_TOKENS,
) -> int:
    """
    Resolve the context window used for the pruning ratios (OpenClaw ``resolveContextWindowInfo``).

    The first positive value of: the models config (``configured``), the model's ``contextTokens``,
    the model's ``contextWindow``, ``default``; then capped by ``agents.defaults.contextTokens``
    (``context_tokens_cap``) when that is smaller. All values in tokens. The rule is
    :func:`choose_context_window` (the runtime's :func:`~sessionkeeper.runtime.resolve_context_window`
    uses it too, and adds the source and OpenClaw's guard).
    """
    tokens, _, _ = choose_context_window(
        override=configured,
        model_context_tokens=model_context_tokens,
        model_context_window=model_context_window,
        cap=context_tokens_cap,
        default=default,
    )
    return tokens


def prune_context_messages(
    messages: Sequence[AgentMessage],
    *,
    settings: PruningSettings,
    context_window_tokens: int | None,
    drop_thinking_for_estimate: bool = False,
    is_tool_prunable: Callable[[str], bool] | None = None,
    pinned_indexes: frozenset[int] = frozenset(),
    token_counter: TokenCounter | None = None,
) -> PruneResult:
    """
    Run OpenClaw's soft-trim / hard-clear algorithm on a context (``pruneContextMessages``, spec §7).

    No gate is applied here but the algorithm's own (window, protected ranges, ratios); see
    :meth:`Pruner.prune` for the mode, provider and TTL gates.

    1. ``ratio = chars / (context_window_tokens x 4)``; below ``soft_trim_ratio`` nothing changes.
    2. Eligible results are the ``toolResult`` messages of prunable tools from the first ``user``
       message up to (not including) the ``keep_last_assistants``-th last assistant message; with
       fewer assistants nothing is pruned, with ``keep_last_assistants=0`` the tail is not protected.
    3. Each eligible result whose joined text (blocks joined by ``\\n``, UTF-16 units) exceeds
       ``soft_trim.max_chars`` and ``head_chars + tail_chars`` becomes ``head + "\\n...\\n" + tail``
       followed by a note with the original size; images become ``[image removed during context
       pruning]`` (field report B16), even in results short enough to keep.
    4. If the ratio is still at least ``hard_clear_ratio``, hard clear is enabled and the eligible
       results weigh at least ``min_prunable_tool_chars``, results are replaced by the placeholder,
       oldest first, until the ratio drops below ``hard_clear_ratio``.

    Deliberate deviation **P1** (so pruning never makes a context larger): OpenClaw applies a soft
    trim even when the head, tail and note are longer than the original (possible only when
    ``max_chars`` is smaller than ``head_chars + tail_chars`` plus about 100), and hard-clears results
    shorter than the placeholder; here such a replacement is skipped (image markers are still
    applied, they always shrink a result). The soft-trim case cannot occur with OpenClaw's defaults;
    the hard-clear case concerns results shorter than the placeholder (33 chars by default), which
    clearing would enlarge. Everywhere else the output equals OpenClaw's
    (``tests/pruning/test_pruning_oracle.py`` checks both).

    Args:
        messages: The rebuilt context (message records), oldest first. Never modified.
        settings: The pruning settings (``mode`` is not checked here).
        context_window_tokens: The model's context window in tokens; ``None`` or ``<= 0`` prunes nothing.
        drop_thinking_for_estimate: Leave out of the estimate the thinking blocks the replay policy
            drops (OpenClaw passes the transcript policy's ``dropThinkingBlocks``).
        is_tool_prunable: Overrides the predicate built from ``settings.tools``.
        pinned_indexes: Indexes of results already pruned by an earlier decision
            (:func:`apply_prune_ledger`): never soft-trimmed again, but they count, and may still be
            hard-cleared.
        token_counter: Weighs the context (``char_weigher``): ``None`` or
            an :class:`~sessionkeeper.EstimateTokenCounter` is OpenClaw's char estimate (exact); another
            counter weighs 4 x its tokens, so the ratios become ``tokens / window``.

    Returns:
        The :class:`PruneResult`.
    """
    weigher = char_weigher(token_counter)
    estimate_input = drop_thinking_blocks(messages) if drop_thinking_for_estimate else messages
    weights = [weigher.message(m) for m in estimate_input]  # per message, reused below
    total = sum(weights)
    chars_before = total

    def unchanged(reason: PruneSkipReason | None) -> PruneResult:
        return PruneResult(
            messages=tuple(messages),
            changed=False,
            chars_before=chars_before,
            chars_after=chars_before,
            context_window_tokens=window,
            skipped=reason,
        )

    window = context_window_tokens if context_window_tokens and context_window_tokens > 0 else None
    if window is None:
        return unchanged("no-context-window")
    char_window = window * 4
    cutoff = protected_tail_start(messages, settings.keep_last_assistants)
    if cutoff is None:
        return unchanged("too-few-assistants")
    start = next((i for i, m in enumerate(messages) if message_role(m) == "user"), len(messages))
    predicate = is_tool_prunable or make_tool_predicate(settings.tools)
    if total / char_window < settings.soft_trim_ratio:
        return unchanged("below-soft-trim-ratio")

    out: list[AgentMessage] = list(messages)
    max_chars = settings.soft_trim.max_chars
    prunable: list[int] = []
    soft: dict[int, str] = {}
    for index in range(start, cutoff):
        message = messages[index]
        if message_role(message) != "toolResult" or not predicate(tool_name_of(message)):
            continue
        prunable.append(index)
        openclaw = weigher.message is estimate_message_chars
        chars = weights[index] if openclaw else estimate_message_chars(message)
        if chars < min(IMAGE_CHAR_ESTIMATE, max_chars - block_count(message) + 1):
            continue  # no image, and its joined text cannot exceed max_chars: nothing to trim
        if index in pinned_indexes:
            continue  # re-pruned from the ledger: trimmed once, never again (D11)
        updated = soft_trim(message, settings.soft_trim)
        if updated is None:
            continue
        after = weigher.message(updated)
        delta = after - weights[index]
        if delta >= 0 and not has_images(message):
            continue  # deviation P1: a "trim" that does not shrink the result is not applied
        weights[index] = after
        total += delta
        out[index] = updated
        soft[index] = tool_call_id_of(message)

    cleared: list[int] = []
    ratio = total / char_window
    if (
        ratio >= settings.hard_clear_ratio
        and settings.hard_clear.enabled
        and sum(weights[i] for i in prunable) >= settings.min_prunable_tool_chars
    ):
        placeholder_chars = weigher.text(settings.hard_clear.placeholder)
        for index in prunable:
            if ratio < settings.hard_clear_ratio:
                break
            before = weights[index]
            if before <= placeholder_chars:
                continue  # deviation P1: clearing would not shrink the context
            out[index] = with_text(out[index], settings.hard_clear.placeholder)
            weights[index] = placeholder_chars
            total += placeholder_chars - before
            ratio = total / char_window
            cleared.append(index)
            soft.pop(index, None)

    changed = bool(soft) or bool(cleared)
    return PruneResult(
        messages=tuple(out) if changed else tuple(messages),
        changed=changed,
        soft_trimmed=tuple(soft[i] for i in sorted(soft)),
        hard_cleared=tuple(tool_call_id_of(messages[i]) for i in cleared),
        chars_before=chars_before,
        chars_after=total,
        context_window_tokens=window,
    )


def _anthropic_family_default(provider: str | None, model_id: str | None, api: str | None) -> bool:
    return is_cache_ttl_eligible_provider(provider, model_id, api)


@attrs.frozen(kw_only=True)
class Pruner:
    """
    Prunes old tool results from the context before a model call (OpenClaw spec §7, mode ``cache-ttl``).

    Transient and per request: :meth:`prune` returns a new message list and never touches the
    transcript. It runs only when all the gates of OpenClaw's ``contextPruningExtension`` pass:

    * ``settings.mode`` is ``"cache-ttl"``;
    * the provider's prompt cache expires (``is_cache_ttl_eligible``; by default the Anthropic family,
      Anthropic models on kilocode, and Gemini 2.5/3 on the Google Generative AI API);
    * ``settings.ttl_ms > 0`` and at least ``ttl_ms`` passed since the last cache touch (the newest
      ``openclaw.cache-ttl`` marker, see :func:`~sessionkeeper.pruning.read_last_cache_touch`).

    Deviation **D11** (stable pruning): with no cache touch at all for the model (``None``), the TTL
    counts as expired (OpenClaw never prunes then, so a session that never had a marker for the
    current model, e.g. after a model switch, is never pruned); and with a ``ledger``, every earlier
    decision is applied first, whatever the gates say (except ``mode``), so a result once pruned is
    sent with the same bytes on every later request. New decisions are made only when the gates
    pass, on top of the re-applied ones.

    Attributes:
        settings: The pruning settings (default ``PruningSettings()``: mode ``off``, OpenClaw's default).
        is_cache_ttl_eligible: ``(provider, model_id, api) -> bool``, the host's decision whether
            the provider's prompt cache expires (default :func:`is_cache_ttl_eligible_provider`).
        clock: Supplies "now" when :meth:`prune` is not given ``now_ms``.
        token_counter: Weighs the context (:func:`prune_context_messages`). The default,
            :class:`~sessionkeeper.EstimateTokenCounter`, keeps OpenClaw's char estimate exactly; any
            other counter weighs each message as 4 x its tokens (the ratios become ``tokens / window``).
    """

    settings: PruningSettings = attrs.field(factory=PruningSettings)
    is_cache_ttl_eligible: Callable[[str | None, str | None, str | None], bool] = _anthropic_family_default
    clock: Clock = SYSTEM_CLOCK
    token_counter: TokenCounter = attrs.field(factory=EstimateTokenCounter)

    @traced("pruning")
    def prune(
        self,
        messages: Sequence[AgentMessage],
        *,
        context_window_tokens: int | None,
        last_cache_touch_at: int | None,
        provider: str | None = "anthropic",
        model_id: str | None = None,
        api: str | None = None,
        now_ms: int | None = None,
        drop_thinking_for_estimate: bool | None = None,
        ledger: PruneLedger | None = None,
    ) -> PruneResult:
        """
        Prune ``messages`` if every gate passes (see the class docstring), else return them unchanged.

        Args:
            messages: The rebuilt context, oldest first (e.g. ``SessionContext.messages``).
            context_window_tokens: The resolved window in tokens (see
                :func:`resolve_context_window_tokens`); ``None`` prunes nothing.
            last_cache_touch_at: When the prompt cache was last written, ms since epoch (the newest
                matching ``openclaw.cache-ttl`` marker); ``None`` means never: the TTL counts as
                expired (deviation D11; OpenClaw prunes nothing then).
            provider: Provider id of the model about to be called.
            model_id: Model id.
            api: Wire API (``"anthropic-messages"``, ``"google-generative-ai"``, ...).
            now_ms: The current time in ms since epoch (default: ``clock.now_ms()``).
            drop_thinking_for_estimate: Leave dropped thinking out of the estimate; ``None`` asks the
                replay policy of ``provider``/``api``/``model_id`` (its ``drop_thinking_blocks``).
            ledger: The session's recorded prune decisions (:func:`read_prune_ledger`), re-applied
                first (D11). The host records this call's new decisions (``soft_trimmed``,
                ``hard_cleared``) with :func:`prune_record_data`.

        Returns:
            The :class:`PruneResult`; its ``last_cache_touch_at`` is ``now`` when this call decided
            something new.
        """
        now = self.clock.now_ms() if now_ms is None else now_ms
        skip: PruneSkipReason | None = None
        if self.settings.mode != "cache-ttl":
            skip = "mode-off"
        elif not self.is_cache_ttl_eligible(provider, model_id, api):
            skip = "provider-not-eligible"
        elif self.settings.ttl_ms <= 0:
            skip = "ttl-disabled"
        elif last_cache_touch_at and not is_cache_ttl_expired(
            last_cache_touch_at, ttl_ms=self.settings.ttl_ms, now_ms=now
        ):
            skip = "ttl-not-expired"  # no touch at all: expired (D11)
        if drop_thinking_for_estimate is None:
            policy = resolve_replay_policy(provider=provider, api=api, model_id=model_id)
            drop_thinking_for_estimate = policy.drop_thinking_blocks
        drop = drop_thinking_for_estimate
        weigher = char_weigher(self.token_counter)
        if ledger and skip != "mode-off":
            tail = protected_tail_start(messages, self.settings.keep_last_assistants)
            again = apply_prune_ledger(messages, ledger, protected_from=0 if tail is None else tail)
        else:
            again = ReappliedPruning(messages=tuple(messages))
        if skip is not None:
            chars = weigher.context(drop_thinking_blocks(messages) if drop else messages)
            sent = again.messages
            return PruneResult(
                messages=sent,
                changed=bool(again.reapplied),
                chars_before=chars,
                chars_after=(
                    weigher.context(drop_thinking_blocks(sent) if drop else sent)
                    if again.reapplied
                    else chars
                ),
                context_window_tokens=context_window_tokens,
                skipped=skip,
                last_cache_touch_at=last_cache_touch_at,
                reapplied=again.reapplied,
            )
        result = prune_context_messages(
            again.messages,
            settings=self.settings,
            context_window_tokens=context_window_tokens,
            drop_thinking_for_estimate=drop,
            pinned_indexes=again.indexes,
            token_counter=self.token_counter,
        )
        decided = bool(result.soft_trimmed or result.hard_cleared)
        touch = now if decided else last_cache_touch_at
        if decided:  # per request: DEBUG only (docs/logging.md)
            _log.debug(
                "pruned %d tool results (%d soft-trimmed, %d hard-cleared): %d -> %d chars",
                len(result.soft_trimmed) + len(result.hard_cleared),
                len(result.soft_trimmed),
                len(result.hard_cleared),
                result.chars_before,
                result.chars_after,
                extra={
                    "soft_trimmed": list(result.soft_trimmed),
                    "hard_cleared": list(result.hard_cleared),
                    "chars_before": result.chars_before,
                    "chars_after": result.chars_after,
                },
            )
        if not again.reapplied:
            return attrs.evolve(result, last_cache_touch_at=touch)
        cleared = set(result.hard_cleared)
        return attrs.evolve(
            result,
            changed=True,
            chars_before=weigher.context(drop_thinking_blocks(messages) if drop else messages),
            last_cache_touch_at=touch,
            reapplied=tuple(i for i in again.reapplied if i not in cleared),
        )
