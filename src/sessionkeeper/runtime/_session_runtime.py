"""
``SessionRuntime``: the glue an agent loop calls around every model call (issue 5; DESIGN "Layers").

The loop makes three calls, and the runtime applies the store, the transcript, the pruner, the memory-flush
policy and the compactor behind them::

    runtime = SessionRuntime(store, model=ModelInfo(provider="anthropic", model_id="claude-sonnet-4-5",
                                                    context_window=200_000))
    session = await runtime.open("agent:main:main", body=user_text)
    plan = await runtime.before_model_call(session, prompt=user_text)
    while True:
        try:
            reply = await my_model(plan.messages)
        except Exception as err:
            await runtime.on_model_error(session, err)        # compacts / truncates, or raises
            plan = await runtime.before_model_call(session)   # same turn, rebuilt context
            continue
        ...

Rules: OpenClaw spec §4.3 (resolve), §5.2-5.3 and §5.7 (thresholds, preflight, overflow recovery), §6
(memory flush), §7 (pruning and the TTL marker), §8 (silent replies), §9 (hygiene); pi-format §15;
DESIGN D3-D5; field reports B09, B11, B13, B14, B15.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from sessionkeeper._clock import SYSTEM_CLOCK, Clock
from sessionkeeper._model_client import ModelClient
from sessionkeeper._tokens import EstimateTokenCounter, TokenCounter
from sessionkeeper.compaction import (
    CompactionProviderRegistry,
    check_provider_configured,
    compaction_threshold,
)
from sessionkeeper.hooks import HookRegistry
from sessionkeeper.pruning import Pruner
from sessionkeeper.runtime._active_bytes import active_transcript_bytes as _active_transcript_bytes
from sessionkeeper.runtime._budget import estimate_context_usage, resolve_context_window
from sessionkeeper.runtime._compaction_step import CompactionStep
from sessionkeeper.runtime._flush_step import MemoryFlushStep
from sessionkeeper.runtime._memory_flush import MemoryFlushPolicy
from sessionkeeper.runtime._preflight_step import PreflightStep
from sessionkeeper.runtime._recovery_step import RecoveryStep
from sessionkeeper.runtime._request_step import RequestStep
from sessionkeeper.runtime._runtime_session import RuntimeSession
from sessionkeeper.runtime._runtime_types import (
    CompactionOutcome,
    MemoryFlushOutcome,
    MemoryFlushRunner,
    ModelCallPlan,
    ModelInfo,
    RecoveryOutcome,
    RuntimeSettings,
    TurnOutcome,
)
from sessionkeeper.runtime._stamp import stamped
from sessionkeeper.runtime._transcripts import TranscriptSource
from sessionkeeper.runtime._turn_end_step import NO_PLAN, TurnEnd, TurnEndStep, reply_delivery
from sessionkeeper.store import (
    ResetContext,
    SessionEntry,
    SessionEvent,
    SessionResolution,
    SessionStore,
    resolve_session,
)
from sessionkeeper.transcript import (
    AgentMessage,
    AssistantMessage,
    TranscriptEntry,
    UserMessage,
)


__all__ = ("RuntimeSession", "SessionRuntime")

_log = logging.getLogger("sessionkeeper.runtime")


class SessionRuntime:
    """
    Store + transcript + pruner + memory flush + compactor behind the calls an agent loop makes.

    Args:
        store: The session store (key -> :class:`SessionEntry`). With a sessions directory, transcripts are
            ``<dir>/<sessionId>.jsonl``; without one (in-memory store) they live in memory.
        model: The model about to be called (provider, id, API, window, reply budget).
        settings: All settings (:class:`RuntimeSettings`; defaults: the references').
        model_client: The host's model, for LLM summaries and the default memory-flush turn; ``None``:
            extractive summaries, and no flush unless ``memory_flush_runner`` is given.
        memory_flush_runner: Runs the silent flush turn (``async (MemoryFlushRequest) -> reply text``).
            Default with a ``model_client`` and a ``workspace_dir``: one model call with the flush prompts;
            a non-silent reply is appended to ``workspace_dir / memory/YYYY-MM-DD.md``. Without a runner
            and without that pair, the host has no flush support (OpenClaw's CLI-backend rule) and the
            flush is skipped: a ``model_client`` without ``workspace_dir`` never runs the default flush
            turn, whose reply would have nowhere to go (issue #11; one INFO record on
            ``sessionkeeper.runtime`` says so at construction).
        workspace_dir: The agent workspace for the default flush runner's memory file (``None``: no
            default flush turn).
        hooks: Receives ``compaction_start``/``compaction_end`` (reason ``manual | threshold | overflow``),
            ``session_before_compact``, ``session_compact``, ``memory_flush_start``/``memory_flush_end``.
        providers: Registered compaction providers.
        clock: Time source (ms since epoch for timestamps, TTL and flush dates).
        cwd: The ``cwd`` written in new transcript headers (default: the process's).
        host_supports_flush: ``False`` turns the flush off (OpenClaw skips it for CLI backends).
        token_counter: Counts the tokens of the messages the runtime sizes itself (the prompt, the
            compaction report's estimate, the default flush request's cut), and is passed on to the
            :class:`~sessionkeeper.compaction.Compactor` and :class:`~sessionkeeper.pruning.Pruner`
            the runtime builds (the cut walk, the kept budget, the prune ratios); default
            :class:`~sessionkeeper.EstimateTokenCounter` (pi's estimate, so thresholds match the
            references). The context estimate (provider usage + newer messages) stays pi's rule.

    The runtime orchestrates; its private steps (transcripts, flush, compaction, preflight, request,
    turn end, recovery) do the work, and :class:`RuntimeSession` holds the per-session state.

    Raises:
        ConfigError: ``settings.compaction.provider`` names a compaction provider that ``providers`` does
            not hold (issue #11; ``docs/decisions.md`` D3-unknown-provider).
    """

    def __init__(
        self,
        store: SessionStore,
        *,
        model: ModelInfo | None = None,
        settings: RuntimeSettings | None = None,
        model_client: ModelClient | None = None,
        memory_flush_runner: MemoryFlushRunner | None = None,
        workspace_dir: Path | str | None = None,
        hooks: HookRegistry | None = None,
        providers: CompactionProviderRegistry | None = None,
        clock: Clock = SYSTEM_CLOCK,
        cwd: str | None = None,
        host_supports_flush: bool = True,
        token_counter: TokenCounter | None = None,
    ) -> None:
        self.store = store
        self.model: ModelInfo = model if model is not None else ModelInfo()
        self.settings: RuntimeSettings = settings if settings is not None else RuntimeSettings()
        self.model_client = model_client
        self.hooks: HookRegistry = hooks if hooks is not None else HookRegistry()
        self.providers = providers
        self.clock = clock
        self.cwd: str = cwd if cwd is not None else str(Path.cwd())
        self.token_counter: TokenCounter = (
            token_counter if token_counter is not None else EstimateTokenCounter()
        )
        self.pruner: Pruner = Pruner(
            settings=self.settings.pruning, clock=clock, token_counter=self.token_counter
        )
        check_provider_configured(self.settings.compaction, providers)
        self._flush = MemoryFlushStep(
            self,
            policy=MemoryFlushPolicy(
                settings=self.settings.memory_flush, compaction=self.settings.compaction
            ),
            runner=memory_flush_runner,
            workspace_dir=Path(workspace_dir) if workspace_dir is not None else None,
            host_supports_flush=host_supports_flush,
        )
        self._transcripts = TranscriptSource(self)
        self._compaction = CompactionStep(self, transcripts=self._transcripts)
        self._request = RequestStep(self)
        self._preflight = PreflightStep(self, flush=self._flush, compaction=self._compaction)
        self._turn_end = TurnEndStep(
            self, flush=self._flush, compaction=self._compaction, request=self._request
        )
        self._recovery = RecoveryStep(self, flush=self._flush, compaction=self._compaction)

    @property
    def flush_policy(self) -> MemoryFlushPolicy:
        """The memory-flush rules (built from ``settings.memory_flush`` and ``settings.compaction``)."""
        return self._flush.policy

    @flush_policy.setter
    def flush_policy(self, policy: MemoryFlushPolicy) -> None:
        self._flush.policy = policy

    @property
    def workspace_dir(self) -> Path | None:
        """The agent workspace the default flush turn writes its memory file in (``None``: none)."""
        return self._flush.workspace_dir

    @workspace_dir.setter
    def workspace_dir(self, workspace_dir: Path | None) -> None:
        self._flush.workspace_dir = workspace_dir

    # ------------------------------------------------------------------ sizes

    @property
    def context_window(self) -> int:
        """The resolved window in tokens: catalogue value (or 200000), capped by ``contextTokens``."""
        return resolve_context_window(
            catalogue_context_window=self.model.context_window,
            cap=self.settings.context_window.context_tokens,
        ).tokens

    @property
    def compaction_threshold(self) -> int:
        """``window - effectiveReserve`` in tokens (D4)."""
        return compaction_threshold(
            self.settings.compaction,
            context_window=self.context_window,
            max_output_tokens=self.model.max_output_tokens,
        )

    def context_tokens(self, session: RuntimeSession) -> int:
        """The context estimate of the session's branch now (provider usage + newer messages), tokens."""
        return estimate_context_usage(session.transcript.build_session_context().messages).tokens

    @staticmethod
    def active_transcript_bytes(session: RuntimeSession) -> int:
        """
        Bytes (lines and their newlines) of the live window the next request carries: on the path to the
        leaf, the latest compaction entry, its kept range (from ``firstKeptEntryId`` up to it) and every
        entry after it; the whole path when it has no compaction (issue #15 item 11; pi's
        ``buildSessionContext`` rule, pi-format §9). A kept range whose ``firstKeptEntryId`` is not on the
        path keeps nothing, as pi does. Off-branch lines are not counted.
        """
        return _active_transcript_bytes(session.transcript)

    # ------------------------------------------------------------------ open

    async def open(
        self,
        session_key: str,
        *,
        body: str | None = None,
        event: SessionEvent = "message",
        context: ResetContext | None = None,
    ) -> RuntimeSession:
        """
        Map a session key to its :class:`SessionEntry` and transcript (OpenClaw ``initSessionState``, §4.3).

        The reset policy decides whether the entry is reused (fresh, system event, ``/reset soft``) or a new
        session id starts (new key, stale daily/idle, ``/new`` or ``/reset``): a rollover is
        :meth:`SessionStore.reset`'s (new header, old transcript archived as ``*.reset.<stamp>``).

        The decision is made atomically against the entry stored now (:meth:`SessionStore.resolve`): when
        several tasks or processes open a new key, or a stale session, at once, exactly one creates (rolls
        over) the session and the others continue it, so every turn lands in the transcript the store
        names (docs/runtime.md "Several writers on one key"). Concurrent ``/new`` triggers still reset
        once each, one after the other.

        Args:
            session_key: The session key (``agent:main:main``).
            body: The incoming message text (reset triggers are matched on it).
            event: ``"message"`` or a system event (``heartbeat``, ``cron-event``, ``exec-event``).
            context: Thread / group / channel facts of the message.

        Raises:
            SessionArchivedError: The entry is archived; nothing is written (restore it first, §4.3).
            UnsafePathError: The session id or file would leave the sessions directory, or the entry's
                ``sessionFile`` is not its own (deviation F1); raised before the store is written. A reset
                of such an entry (``/new``, a stale session) starts fresh at ``<new id>.jsonl`` instead.
            TranscriptFormatError: The transcript exists but is not one (it is left as is).
        """

        def decide(current: SessionEntry | None, new_session_id: Callable[[], str]) -> SessionResolution:
            return resolve_session(
                current,
                session_key=session_key,
                # the time of the decision: a winner's entry stamped after this caller started is not
                # "in the future" (ignored, hence stale) for the callers that decide after it
                now_ms=self.clock.now_ms(),
                policy=self.settings.reset,
                event=event,
                body=body,
                context=context,
                new_session_id=new_session_id,  # the store's factory, as its reset uses
            )

        # decided against the entry stored now, under the store's write serialisation: of several
        # writers that open a new key (or a stale session) at once, one creates (rolls over) the
        # session and the others continue it (docs/runtime.md "Several writers on one key")
        entry, resolution = await self.store.resolve(session_key, decide, cwd=self.cwd)
        transcript = await self._transcripts.open(entry)
        return RuntimeSession(
            session_key=session_key, entry=entry, transcript=transcript, resolution=resolution
        )

    # ------------------------------------------------------------------ the turn's write lock

    async def release_turn_lock(self, session: RuntimeSession) -> None:
        """
        Give back the transcript write lock the runtime holds for ``session``'s turn in progress (no-op
        when none is held; idempotent; runs shielded from cancellation).

        The runtime takes the lock when :meth:`before_model_call` starts a turn (with a ``prompt``) and
        keeps it through the turn's calls (tool loop, retries); it releases it
        when :meth:`after_turn` completes the turn (``turn_complete=True``), when any of them or
        :meth:`on_model_error` raises or is cancelled, and when :meth:`on_model_error` returns
        ``"not_overflow"``. A host that abandons a turn without :meth:`after_turn` calls this; otherwise
        the lock is kept until the session's next turn (which reuses it) or until the lock watchdog
        releases it after ``session.writeLock.maxHoldMs`` (default 5 min, checked every
        ``watchdog_interval_ms``), so another writer waits at most that long (docs/locking.md).
        """
        await session.release_turn_lock()

    # ------------------------------------------------------------------ before the call

    async def before_model_call(
        self,
        session: RuntimeSession,
        *,
        prompt: str | UserMessage | None = None,
        system_prompt: str | None = None,
        is_heartbeat: bool = False,
    ) -> ModelCallPlan:
        """
        Prepare one model call.

        With ``prompt`` (a new turn): the per-turn recovery state is reset; the memory flush runs first
        when the projected context (history + prompt) reaches the flush threshold, when the transcript since
        the latest compaction reaches ``forceFlushTranscriptBytes``, or when a preflight compaction is
        about to run (D4, B13, B14); then the preflight compaction runs when the projected context is over
        ``window - effectiveReserve`` (or the active transcript reaches ``maxActiveTranscriptBytes``); then
        the prompt is appended to the transcript. Without ``prompt`` (a retry or the next call of a tool
        loop) nothing is appended, and the mid-turn precheck runs when enabled.

        The messages to send are the rebuilt context (pi's ``buildSessionContext``), pruned (cache-TTL,
        OpenClaw §7: the TTL clock is the newest ``openclaw.cache-ttl`` marker or prune record of this
        provider and model; deviation D11: no touch at all counts as expired, every earlier decision of
        the session is re-applied byte for byte, and new decisions are recorded as a
        ``sessionkeeper.pruned-tool-results`` custom entry),
        with oversized tool results cut once overflow recovery asked for it, then sanitised for the
        provider family (OpenClaw §9; silent replies leave the replayed history).

        Args:
            session: From :meth:`open`.
            prompt: The user's message for a new turn (a string becomes a :class:`UserMessage`).
            system_prompt: The run's system prompt (only used by the mid-turn precheck estimate).
            is_heartbeat: The turn is a heartbeat (no flush, no preflight compaction).

        Returns:
            A :class:`ModelCallPlan`.

        Raises:
            OSError: A transcript or store write failed.
            TimeoutError: A compaction took longer than ``timeoutSeconds``.
            SessionBusyError: The transcript's write lock, taken for the turn, was not acquired in time.
        """
        try:
            return await self._before_model_call(
                session, prompt=prompt, system_prompt=system_prompt, is_heartbeat=is_heartbeat
            )
        except BaseException:
            await self.release_turn_lock(session)
            raise

    async def _before_model_call(
        self,
        session: RuntimeSession,
        *,
        prompt: str | UserMessage | None,
        system_prompt: str | None,
        is_heartbeat: bool,
    ) -> ModelCallPlan:
        await self._transcripts.follow_successor(session)
        await session.hold_turn_lock(start=prompt is not None)
        flush_outcome: MemoryFlushOutcome | None = None
        compaction: CompactionOutcome | None = None
        prompt_entry: TranscriptEntry | None = None
        if prompt is not None:
            start = await self._preflight.start_turn(session, prompt, is_heartbeat=is_heartbeat)
            flush_outcome, compaction, prompt_entry = start.memory_flush, start.compaction, start.prompt_entry
            context, tokens = start.context, start.tokens
        else:
            context = session.current_context()
            tokens = estimate_context_usage(context).tokens
        session.note_prompt_tokens(tokens)
        session.remember_context(context)
        request = await self._request.prepare(
            session, context, in_tool_loop=prompt is None, system_prompt=system_prompt
        )
        return ModelCallPlan(
            messages=request.hygiene.messages,
            prompt_entry=prompt_entry,
            context_tokens=tokens,
            context_window=self.context_window,
            memory_flush=flush_outcome,
            compaction=compaction,
            pruning=request.pruning,
            hygiene=request.hygiene,
            truncated_tool_results=request.truncated,
            precheck=request.precheck,
        )

    # ------------------------------------------------------------------ after the turn

    async def after_turn(
        self,
        session: RuntimeSession,
        *,
        messages: Sequence[AgentMessage],
        turn_complete: bool = True,
    ) -> TurnOutcome:
        """
        Record the model's reply and tool results, and maintain the session after a successful turn.

        Every message is appended to the transcript (a silent ``NO_REPLY`` reply too: the file keeps what
        happened; it is never delivered and hygiene drops it from replay). Usage is summed over the turn's
        replies. When ``turn_complete``:

        1. threshold compaction (D4) when the context is over ``window - effectiveReserve`` and the reply
           was not aborted, with the memory flush first on the full history (B13/B14); after an automatic
           compaction that did not restore headroom, no second one runs (B11, ``compaction_ineffective``);
        2. an ``openclaw.cache-ttl`` marker after a clean attempt (no compaction in the turn) on a
           cache-TTL-eligible provider (OpenClaw §7);
        3. the store entry gets ``inputTokens``/``outputTokens``/``cacheRead``/``cacheWrite`` (the turn's
           sums), ``totalTokens`` (the context estimate after the turn, ``totalTokensFresh: true``),
           ``contextTokens`` (the resolved window, as OpenClaw stores it), ``modelProvider``/``model``.

        Args:
            session: From :meth:`open`.
            messages: The assistant reply(ies) and tool results since the last call, in order; a message
                whose ``timestamp`` is 0 (not set) is written with the runtime clock's time.
            turn_complete: ``False`` inside a tool loop (only records and counts usage).

        Returns:
            A :class:`TurnOutcome`; ``delivered_text`` is ``None`` for a silent reply.

        Raises:
            TypeError: A message of a role stored as its own entry type (summaries, custom messages).
            OSError: A write failed.
            SessionBusyError: The transcript's write lock, taken for the turn, was not acquired in time.
            TranscriptNotFoundError: The transcript was archived (the session reset or deleted by another
                writer); nothing was written.
            SessionNotFoundError: The entry was deleted while the transcript lived on (a store whose
                transcripts outlive their entries: memory, a database); the key is not recreated.
        """
        try:
            outcome = await self._after_turn(session, messages=messages, turn_complete=turn_complete)
        except BaseException:
            await self.release_turn_lock(session)
            raise
        if turn_complete:
            await self.release_turn_lock(session)
        return outcome

    async def _after_turn(
        self, session: RuntimeSession, *, messages: Sequence[AgentMessage], turn_complete: bool
    ) -> TurnOutcome:
        await self._transcripts.follow_successor(session)
        await session.hold_turn_lock(start=False)
        now_ms = self.clock.now_ms()
        messages = [stamped(message, now_ms) for message in messages]
        replies = [message for message in messages if isinstance(message, AssistantMessage)]
        last_reply = replies[-1] if replies else None
        # the store entry write rides on the reply's write (and the cache-TTL marker joins it) when the
        # turn's end would do nothing else (TurnEndStep.plan_write); one write and one fsync for the reply
        plan = self._turn_end.plan_write(session, messages, last_reply) if turn_complete else NO_PLAN
        written, marker = await self._turn_end.write(session, messages, plan)
        appended: list[TranscriptEntry] = written[:-1] if marker else written
        for message in replies:
            session.note_reply(message)
        tokens = estimate_context_usage(session.context_after_append(written)).tokens
        if not turn_complete:
            return TurnOutcome(
                entries=tuple(appended), delivered_text=None, silent=False, context_tokens=tokens
            )
        delivered, silent = reply_delivery(last_reply)
        if plan.rider is not None and tokens == plan.expected:
            session.adopt_entry(plan.rider.result())  # SessionNotFoundError: as the patch would
            end = TurnEnd(memory_flush=None, compaction=None, tokens=tokens, marker=marker)
        else:  # more to do than the entry write, or other writers' lines changed the context estimate
            end = await self._turn_end.finish(
                session, tokens=tokens, last_reply=last_reply, marker=marker or None
            )
        return TurnOutcome(
            entries=tuple(appended),
            delivered_text=delivered,
            silent=silent,
            context_tokens=end.tokens,
            memory_flush=end.memory_flush,
            compaction=end.compaction,
            cache_ttl_marker=end.marker,
        )

    # ------------------------------------------------------------------ errors

    async def on_model_error(self, session: RuntimeSession, error: object) -> RecoveryOutcome:
        """
        Recover from a failed model call (OpenClaw §5.7, pi §15.2, D5, B09, B11, B14).

        A context overflow (:func:`~sessionkeeper.runtime.is_context_overflow`) gets, within the attempt
        limits (3 overflow compactions per turn, one compact-and-retry per reply):

        1. the memory flush FIRST, on the full history, unless this cycle already flushed (B14);
        2. an overflow compaction (``reason="overflow"``) given the synthetic count (observed ??
           estimate ?? ``window + 1``); the loop then calls :meth:`before_model_call` (no prompt) and
           retries;
        3. when compaction is blocked (it failed, or the retry after it overflowed again) and some tool
           result is oversized: those results are cut from the context from now on, and the loop retries;
        4. otherwise :class:`ContextOverflowError`. The session keeps its id and its store mapping.

        A timeout (``TimeoutError``, or an error text saying it timed out) whose prompt used more than 65 %
        of the window gets a timeout compaction (flush first), at most 2 per turn (OpenClaw §5.7). Any other
        failure that is not an overflow passes through: an exception is re-raised unchanged; a message
        (e.g. an error :class:`AssistantMessage`) gives ``action="not_overflow"``.

        Args:
            session: From :meth:`open`.
            error: What the provider returned: an exception, an error message string or mapping, or an
                assistant message with ``stopReason: "error"``.

        Returns:
            A :class:`RecoveryOutcome`: retry the call after it.

        Raises:
            ContextOverflowError: Recovery is exhausted (``attempts`` and ``context_tokens`` attached).
            BaseException: ``error`` itself, when it is an exception that is not an overflow.

        The turn's write lock stays held when the outcome is a retry (``"compacted"``, ``"truncated"``)
        and is released when this raises or returns ``"not_overflow"`` (the turn is the host's to end).
        """
        try:
            outcome = await self._on_model_error(session, error)
        except BaseException:
            await self.release_turn_lock(session)
            raise
        if outcome.action == "not_overflow":
            await self.release_turn_lock(session)
        return outcome

    async def _on_model_error(self, session: RuntimeSession, error: object) -> RecoveryOutcome:
        await self._transcripts.follow_successor(session)
        return await self._recovery.recover(session, error)

    # ------------------------------------------------------------------ manual compaction

    async def compact(
        self,
        session: RuntimeSession,
        *,
        instructions: str | None = None,
        keep_recent_tokens: int | None = None,
    ) -> CompactionOutcome:
        """
        Compact now (``/compact [instructions]``), whatever the thresholds and the B11 guard.

        Without ``keep_recent_tokens`` (and none configured) it is a strict checkpoint, as OpenClaw's
        ``/compact``: nothing is kept verbatim after the summary. Increments ``compactionCount`` when an
        entry is written.

        Args:
            session: From :meth:`open`.
            instructions: Extra focus for the summary.
            keep_recent_tokens: Tokens of recent history to keep verbatim.

        Raises:
            CompactionCancelled: A ``session_before_compact`` hook cancelled (nothing written).
            TimeoutError: Longer than ``timeoutSeconds``.
            OSError: The write failed.
        """
        await self._transcripts.follow_successor(session)
        tokens = self.context_tokens(session)
        return await self._compaction.compact(
            session,
            trigger="manual",
            tokens_before=tokens,
            instructions=instructions,
            keep_recent_tokens=keep_recent_tokens,
        )
