"""
pydantic-ai glue (extra ``pydantic-ai``): a history processor and message-history persistence.

Importing this module imports ``pydantic_ai``; ``import sessionkeeper`` never does.

* :class:`HistoryProcessor`: a pydantic-ai history processor (``Agent(history_processors=[...])``) that
  applies sessionkeeper's cache-TTL pruning, replay hygiene (tool call/result pairing, tool-call ids,
  thinking signatures, blank and silent turns) and compaction awareness (a compaction summary in the history
  is recognised, thinking signatures older than it are stripped, and the context is measured against the
  compaction threshold) to the ``ModelMessage`` list before each model request.
* :class:`SessionHistory`: a pydantic-ai conversation kept by a :class:`~sessionkeeper.SessionRuntime`
  under a session key: :meth:`~SessionHistory.load` gives the history as pydantic-ai messages, the object
  itself is the history processor of the run (it persists each step before the model is called, compacts
  the transcript when the context crosses the threshold and replaces the history by the compacted one),
  and :meth:`~SessionHistory.save` appends the rest of the run.
* :func:`to_pydantic_ai_messages` / :func:`from_pydantic_ai_messages`: the converters both ways.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Final

import attrs
from pydantic_ai import messages as pai
from pydantic_ai.tools import RunContext

from sessionkeeper import SYSTEM_CLOCK, Clock
from sessionkeeper.adapters._pydantic_ai import (
    PYDANTIC_AI_API,
    RETRY_CUSTOM_TYPE,
    SYSTEM_PROMPT_CUSTOM_TYPE,
    from_pydantic_ai_messages,
    to_pydantic_ai_messages,
)
from sessionkeeper.compaction import CompactionSettings, compaction_threshold
from sessionkeeper.pruning import (
    PRUNE_RECORD_CUSTOM_TYPE,
    HygieneResult,
    PruneLedger,
    Pruner,
    PruneResult,
    PruningSettings,
    prune_record_data,
    read_last_cache_touch,
    read_prune_ledger,
    resolve_replay_policy,
    sanitize_replay_history,
)
from sessionkeeper.records import (
    AgentMessage,
    CustomMessage,
)
from sessionkeeper.runtime import (
    CompactionOutcome,
    ModelInfo,
    RuntimeSession,
    SessionRuntime,
    TurnOutcome,
    resolve_context_window,
)
from sessionkeeper.transcript import (
    estimate_context_usage,
)


__all__ = (
    "PYDANTIC_AI_API",
    "RETRY_CUSTOM_TYPE",
    "SYSTEM_PROMPT_CUSTOM_TYPE",
    "HistoryProcessor",
    "HistoryReport",
    "SessionHistory",
    "from_pydantic_ai_messages",
    "model_info_for",
    "to_pydantic_ai_messages",
)

_log = logging.getLogger("sessionkeeper.adapters")

_APIS: Final = {
    "OpenAIResponsesModel": "openai-responses",
    "OpenAIChatModel": "openai-completions",
    "OpenAIModel": "openai-completions",
    "AnthropicModel": "anthropic-messages",
    "GoogleModel": "google-generative-ai",
    "GeminiModel": "google-generative-ai",
    "BedrockConverseModel": "bedrock-converse-stream",
}


def model_info_for(model: object, *, context_window: int | None = None) -> ModelInfo:
    """
    The :class:`~sessionkeeper.runtime.ModelInfo` of a pydantic-ai model (``RunContext.model``).

    ``provider`` is the model's ``system`` (``"openai"``, ``"anthropic"``, ``"function"``...), ``model_id``
    its ``model_name``; ``api`` follows the model class (``OpenAIResponsesModel`` -> ``openai-responses``,
    ``OpenAIChatModel`` -> ``openai-completions``, ``AnthropicModel`` -> ``anthropic-messages``, Google ->
    ``google-generative-ai``, Bedrock -> ``bedrock-converse-stream``; others ``None``: hygiene defaults).
    """
    system = getattr(model, "system", None)
    name = getattr(model, "model_name", None)
    return ModelInfo(
        provider=system if isinstance(system, str) else None,
        model_id=name if isinstance(name, str) else None,
        api=_APIS.get(type(model).__name__),
        context_window=context_window,
    )


@attrs.frozen(kw_only=True)
class HistoryReport:
    """
    What one call of a history processor did to the history before a model request.

    Attributes:
        pruning: The prune result (``skipped`` names the gate when nothing was pruned).
        hygiene: The replay hygiene result (findings, synthetic results, whether anything changed).
        context_tokens: Context estimate of the history sent, in tokens (provider usage + newer messages).
        compaction_threshold: ``context_window - effectiveReserve``, in tokens.
        over_threshold: ``context_tokens`` is above the threshold (compaction is due: a
            :class:`SessionHistory` compacts the transcript then; a plain :class:`HistoryProcessor`
            only reports it).
        compaction: The compaction a :class:`SessionHistory` ran before this request, if any.
    """

    pruning: PruneResult
    hygiene: HygieneResult
    context_tokens: int
    compaction_threshold: int
    over_threshold: bool
    compaction: CompactionOutcome | None = None


def _replay(
    context: Sequence[AgentMessage],
    *,
    pruner: Pruner,
    model: ModelInfo,
    compaction: CompactionSettings,
    now_ms: int,
    last_cache_touch_at: int | None,
    ledger: PruneLedger | None,
    window: int,
    done: CompactionOutcome | None = None,
) -> tuple[list[pai.ModelMessage], HistoryReport]:
    """Prune, then hygiene for ``model``, then convert back; the report says what happened."""
    pruning = pruner.prune(
        context,
        context_window_tokens=window,
        last_cache_touch_at=last_cache_touch_at,
        provider=model.provider,
        model_id=model.model_id,
        api=model.api,
        now_ms=now_ms,
        ledger=ledger,
    )
    policy = resolve_replay_policy(api=model.api, provider=model.provider, model_id=model.model_id)
    hygiene = sanitize_replay_history(
        pruning.messages, policy=policy, timestamp_ms=now_ms, api=model.api, provider=model.provider
    )
    tokens = estimate_context_usage(hygiene.messages).tokens
    threshold = compaction_threshold(
        compaction, context_window=window, max_output_tokens=model.max_output_tokens
    )
    report = HistoryReport(
        pruning=pruning,
        hygiene=hygiene,
        context_tokens=tokens,
        compaction_threshold=threshold,
        over_threshold=tokens > threshold,
        compaction=done,
    )
    return to_pydantic_ai_messages(hygiene.messages), report


class HistoryProcessor:
    """
    A pydantic-ai history processor: pruning, replay hygiene and compaction awareness, in memory.

    Pass it as ``Agent(..., history_processors=[HistoryProcessor(...)])``. Before each model request it
    converts the history (:func:`from_pydantic_ai_messages`), prunes old tool results when the provider's
    prompt cache has expired (:class:`~sessionkeeper.pruning.Pruner`, OpenClaw spec §7; off unless
    ``pruning.mode == "cache-ttl"``), applies the replay hygiene of the model's provider family
    (:func:`~sessionkeeper.pruning.sanitize_replay_history`, spec §9: pairing repair, tool-call ids,
    thinking signatures older than a compaction summary, blank and silent turns) and converts back.
    pydantic-ai keeps the processed list for the rest of the run. :attr:`last_report` says what the last
    call did, ``over_threshold`` included (compaction is due; persist through :class:`SessionHistory`
    to have it done).

    The TTL clock is kept in memory: the first prune happens at the first request (no cache touch yet
    counts as expired, deviation D11), later ones once ``pruning.ttl`` has passed since the last call.

    Args:
        model: Provider, model, API and window of the model; default: :func:`model_info_for` of the
            run's model (window 200000 tokens).
        pruning: Pruning settings (default: off).
        compaction: Compaction settings for the threshold (default: the references').
        clock: Time source (ms since epoch for the TTL and synthesised results).

    Raises:
        ValueError: From a call, for a part a transcript cannot keep (see :func:`from_pydantic_ai_messages`).
    """

    def __init__(
        self,
        *,
        model: ModelInfo | None = None,
        pruning: PruningSettings | None = None,
        compaction: CompactionSettings | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.model: ModelInfo | None = model
        self.pruner: Pruner = Pruner(settings=pruning or PruningSettings(), clock=clock)
        self.compaction: CompactionSettings = compaction if compaction is not None else CompactionSettings()
        self.clock: Clock = clock
        self.last_report: HistoryReport | None = None
        self._last_touch: int | None = None

    async def __call__(
        self, ctx: RunContext[Any], messages: list[pai.ModelMessage]
    ) -> list[pai.ModelMessage]:
        """The processed history for the next model request of the run ``ctx``."""
        model = self.model if self.model is not None else model_info_for(ctx.model)
        now = self.clock.now_ms()
        out, report = _replay(
            from_pydantic_ai_messages(messages),
            pruner=self.pruner,
            model=model,
            compaction=self.compaction,
            now_ms=now,
            last_cache_touch_at=self._last_touch,
            ledger=None,
            window=resolve_context_window(catalogue_context_window=model.context_window).tokens,
        )
        if report.pruning.last_cache_touch_at is not None:
            self._last_touch = report.pruning.last_cache_touch_at
        elif self._last_touch is None:
            self._last_touch = now  # this request writes the prompt cache
        self.last_report = report
        return out


class SessionHistory:
    """
    A pydantic-ai conversation kept in a sessionkeeper session, and its history processor.

    ::

        history = SessionHistory(runtime, "agent:main:main")
        agent = Agent(model, history_processors=[history])
        result = await agent.run(prompt, message_history=await history.load())
        await history.save(result.all_messages())

    :meth:`load` opens the session (:meth:`SessionRuntime.open`: store entry, reset policy, transcript) and
    returns its context (pi's ``buildSessionContext``: a compaction summary first) as pydantic-ai messages.
    Used as the run's history processor, before each model request the object appends the run's new
    messages to the transcript (the raw ones, before any pruning: the transcript keeps what happened),
    lets the runtime record the step (usage on the store entry, the cache-TTL marker, threshold compaction
    with the memory flush first), replaces the history by the compacted context when a compaction ran,
    then prunes (the runtime's pruner, decisions recorded in the transcript so later requests send the
    same bytes, deviation D11) and applies the replay hygiene of ``runtime.model`` (or of the run's model
    when ``runtime.model`` names no provider). :meth:`save` appends what the run added since (the final
    reply) and completes the turn. Without the processor, :meth:`save` appends the whole run.

    System prompts are kept as custom messages (:data:`SYSTEM_PROMPT_CUSTOM_TYPE`), since pydantic-ai
    sends them only when the history is empty. Use this object as the only (or the first) history
    processor: it finds the new messages by position.

    Args:
        runtime: The session runtime (store, settings, model, compaction client).
        session_key: The session key (``agent:main:main``).

    Raises:
        RuntimeError: From :meth:`save` or a processor call, before :meth:`load`.
        ValueError: From :meth:`save` or a processor call, for a part a transcript cannot keep.
    """

    def __init__(self, runtime: SessionRuntime, session_key: str) -> None:
        self.runtime: SessionRuntime = runtime
        self.session_key: str = session_key
        self.session: RuntimeSession | None = None
        self.last_report: HistoryReport | None = None
        self._seen = 0

    def _session(self) -> RuntimeSession:
        if self.session is None:
            raise RuntimeError("SessionHistory.load() must run before the agent run")
        return self.session

    async def load(self, *, body: str | None = None) -> list[pai.ModelMessage]:
        """
        Open the session and return its history as pydantic-ai messages (``message_history=``).

        Args:
            body: The incoming message text, for the reset triggers (``/new``, ``/reset``).

        Raises:
            SessionArchivedError, UnsafePathError, TranscriptFormatError: From :meth:`SessionRuntime.open`.
        """
        session = await self.runtime.open(self.session_key, body=body)
        self.session = session
        messages = to_pydantic_ai_messages(session.transcript.build_session_context().messages)
        self._seen = len(messages)
        return messages

    async def _append(self, messages: Sequence[pai.ModelMessage], *, complete: bool) -> TurnOutcome:
        session = self._session()
        converted = from_pydantic_ai_messages(messages)  # all or nothing: raises before any write
        run: list[AgentMessage] = []
        for message in converted:
            if isinstance(message, CustomMessage):  # stored as its own entry type (pi spec §5.7)
                if run:
                    await self.runtime.after_turn(session, messages=run, turn_complete=False)
                    run = []
                await session.transcript.append_custom_message(
                    message.custom_type,
                    content=message.content,
                    display=message.display,
                    details=message.details,
                )
            else:
                run.append(message)
        return await self.runtime.after_turn(session, messages=run, turn_complete=complete)

    async def __call__(
        self, ctx: RunContext[Any], messages: list[pai.ModelMessage]
    ) -> list[pai.ModelMessage]:
        """The history processor: persist the new messages, compact if due, prune, hygiene."""
        session = self._session()
        new = messages[self._seen :]
        compaction: CompactionOutcome | None = None
        if new:
            replied = any(isinstance(m, pai.ModelResponse) for m in new)
            outcome = await self._append(new, complete=replied)
            compaction = outcome.compaction
        runtime = self.runtime
        transcript = session.transcript
        if compaction is not None and compaction.compacted:
            context: Sequence[AgentMessage] = transcript.build_session_context().messages
        else:
            context = from_pydantic_ai_messages(messages)
        model = runtime.model
        if model.provider is None:
            model = attrs.evolve(
                model_info_for(ctx.model, context_window=model.context_window),
                max_output_tokens=model.max_output_tokens,
            )
        now = runtime.clock.now_ms()
        ledger: PruneLedger | None = None
        entries = transcript.entries()
        touch = read_last_cache_touch(entries, provider=model.provider, model_id=model.model_id)
        if runtime.pruner.settings.mode == "cache-ttl":
            ledger = read_prune_ledger(entries)
            recorded = ledger.touch_for(model.provider, model.model_id)
            if recorded is not None and (touch is None or recorded > touch):
                touch = recorded
        out, report = _replay(
            context,
            pruner=runtime.pruner,
            model=model,
            compaction=runtime.settings.compaction,
            now_ms=now,
            last_cache_touch_at=touch,
            ledger=ledger,
            window=runtime.context_window,
            done=compaction,
        )
        pruning = report.pruning
        if pruning.soft_trimmed or pruning.hard_cleared:
            settings = runtime.pruner.settings
            await transcript.append_custom(
                PRUNE_RECORD_CUSTOM_TYPE,
                data=prune_record_data(
                    timestamp_ms=now,
                    provider=model.provider,
                    model_id=model.model_id,
                    soft_trimmed=pruning.soft_trimmed,
                    hard_cleared=pruning.hard_cleared,
                    soft_trim=settings.soft_trim,
                    placeholder=settings.hard_clear.placeholder,
                ),
            )
        _log.debug(
            "pydantic-ai history: %d messages, %d tokens",
            len(out),
            report.context_tokens,
            extra={"session_key": self.session_key},
        )
        self.last_report = report
        self._seen = len(out)
        return out

    async def save(self, messages: Sequence[pai.ModelMessage]) -> TurnOutcome:
        """
        Append what the run added since the last processor call (``result.all_messages()``) and complete
        the turn (:meth:`SessionRuntime.after_turn`: store counters, cache-TTL marker, threshold compaction).

        Args:
            messages: All messages of the run (``result.all_messages()``); those already persisted (the
                loaded history, the steps the processor saw) are skipped by position.

        Returns:
            The :class:`~sessionkeeper.runtime.TurnOutcome` (``delivered_text``: ``None`` for a silent reply).

        Raises:
            RuntimeError: :meth:`load` was not called.
            ValueError: A part a transcript cannot keep; nothing was written.
        """
        new = list(messages[self._seen :])
        outcome = await self._append(new, complete=True)
        self._seen = len(messages)
        return outcome
