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

import contextlib
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import anyio
import msgspec
from msgspec import UNSET

from sessionkeeper._clock import SYSTEM_CLOCK, Clock
from sessionkeeper._fs import ensure_dir
from sessionkeeper._hooks import HookRegistry, MemoryFlushEndEvent, MemoryFlushStartEvent
from sessionkeeper._model_client import ModelClient, ModelRequest
from sessionkeeper._silent import is_silent_reply_payload, strip_silent_token
from sessionkeeper.compaction import (
    CompactionProviderRegistry,
    Compactor,
    check_provider_configured,
    compaction_threshold,
)
from sessionkeeper.exceptions import (
    CompactionCancelled,
    CompactionError,
    UnsafePathError,
)
from sessionkeeper.pruning import (
    CACHE_TTL_CUSTOM_TYPE,
    PRUNE_RECORD_CUSTOM_TYPE,
    PruneLedger,
    Pruner,
    cache_ttl_marker_data,
    prune_record_data,
    read_last_cache_touch,
    resolve_replay_policy,
    sanitize_replay_history,
)
from sessionkeeper.records import UnknownEntry, entry_key
from sessionkeeper.runtime._budget import estimate_context_usage, resolve_context_window
from sessionkeeper.runtime._memory_flush import MemoryFlushDecision, MemoryFlushPolicy
from sessionkeeper.runtime._overflow import OverflowRecoveryState, SyntheticTokenCount, plan_overflow_recovery
from sessionkeeper.runtime._pressure import estimate_prompt_pressure
from sessionkeeper.runtime._runtime_types import (
    CompactionOutcome,
    CompactionTriggerName,
    MemoryFlushOutcome,
    MemoryFlushRequest,
    MemoryFlushRunner,
    ModelCallPlan,
    ModelInfo,
    RecoveryOutcome,
    RuntimeSettings,
    TurnOutcome,
)
from sessionkeeper.runtime._tool_truncation import has_oversized_tool_results, truncate_oversized_tool_results
from sessionkeeper.runtime._triggers import (
    compaction_progress,
    decide_preflight_compaction,
    decide_threshold_compaction,
    decide_timeout_compaction,
    mid_turn_precheck,
)
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
    CompactionEntry,
    MessageEntry,
    SessionWriteLock,
    TextContent,
    TranscriptEntry,
    TranscriptManager,
    UserMessage,
    estimate_tokens,
    read_header,
)


__all__ = ("RuntimeSession", "SessionRuntime")

_log = logging.getLogger("sessionkeeper.runtime")


def _stamped(message: AgentMessage, now_ms: int) -> AgentMessage:
    """
    The message, dated now when the host left its ``timestamp`` at the records' default 0 (pi stamps every
    message when it is made). A reply dated 1970 reads as older than any compaction, so its provider usage
    would never count again (pi's staleness rule, :func:`estimate_context_usage`), and pi's session list
    would date the session by its header.
    """
    if not isinstance(message, msgspec.Struct) or "timestamp" not in message.__struct_fields__:
        return message
    stamp = getattr(message, "timestamp", None)
    if type(stamp) is not int or stamp != 0:
        return message
    return msgspec.structs.replace(message, timestamp=now_ms)


_FLUSH_MAX_TOKENS = 4096


class RuntimeSession:
    """
    One open session: its key, store entry and transcript, plus the per-turn state of the runtime.

    Made by :meth:`SessionRuntime.open`; pass it to the runtime's other methods. Not thread-safe: one
    agent loop drives one session at a time (the transcript's write lock guards the file itself).

    Attributes:
        session_key: The session key.
        transcript: The session's transcript.
        resolution: How :meth:`SessionRuntime.open` resolved the key (``is_new``, ``reason``).
        recovery: The turn's :class:`OverflowRecoveryState` (reset by a new prompt).
        ineffective_compactions: Automatic compactions in a row that left the context over the
            threshold (B11); reset by an effective compaction or a context back under the threshold.
        compacted_this_turn: A compaction ran in this turn (no TTL marker then).
        in_flush_turn: The memory flush turn is running (no nested flush, B13).
        truncate_tool_results: Oversized tool results are cut from the context (overflow second resort),
            until a compaction succeeds.
        timeout_compactions: Timeout compactions in this turn (at most 2).
        last_prompt_tokens: The context estimate of the last prepared call, in tokens.
        turn_usage: The turn's summed usage, camelCase keys, in tokens.

    The state attributes are the runtime's; hosts read them, the runtime writes them.
    """

    def __init__(
        self,
        *,
        session_key: str,
        entry: SessionEntry,
        transcript: TranscriptManager,
        resolution: SessionResolution | None,
    ) -> None:
        self.session_key = session_key
        self.transcript = transcript
        self.resolution = resolution
        self._entry = entry
        self.recovery: OverflowRecoveryState = OverflowRecoveryState()
        self.ineffective_compactions = 0
        self.compacted_this_turn = False
        self.in_flush_turn = False
        self.truncate_tool_results = False
        self.timeout_compactions = 0
        self.last_prompt_tokens: int | None = None
        self.turn_usage: dict[str, int] = {}
        self._context_memo: tuple[str | None, Sequence[AgentMessage]] | None = None
        """The leaf id and context messages of the last context the runtime built (internal)."""
        self._prune_ledger: tuple[object, int, PruneLedger] | None = None
        """The transcript index, entries scanned and prune records read from them (internal, D11)."""
        self._turn_lock: tuple[TranscriptManager, SessionWriteLock] | None = None
        """The write lock held for the turn in progress, with the transcript it guards (internal)."""

    @property
    def holds_turn_lock(self) -> bool:
        """Whether the runtime holds the transcript's write lock for a turn in progress right now."""
        hold = self._turn_lock
        return hold is not None and hold[1].held

    @property
    def entry(self) -> SessionEntry:
        """The store entry as last written by the runtime."""
        return self._entry

    @property
    def session_id(self) -> str:
        """The transcript's session id (never switched by overflow recovery, OpenClaw §5.7)."""
        return self.transcript.session_id

    def __repr__(self) -> str:
        return f"RuntimeSession({self.session_key!r}, session_id={self.session_id!r})"


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


_MAX_SUCCESSOR_HOPS = 64


def _lineage(path: Path) -> list[str]:
    """``path`` and its ancestors through the headers' ``parentSession`` links (real paths, newest first)."""
    chain: list[str] = []
    try:
        for _ in range(_MAX_SUCCESSOR_HOPS):
            chain.append(os.path.realpath(path))
            with path.open("rb") as handle:
                found = read_header(handle, os.fstat(handle.fileno()).st_size)  # the loader's header rule
            parent = found.raw.get("parentSession") if found is not None else None
            if not isinstance(parent, str) or not parent:
                break
            path = path.parent / parent  # an absolute parentSession replaces the directory
    except OSError:
        pass
    return chain


def _same_lineage(candidate: Path, current: Path) -> bool:
    """
    Whether ``candidate`` continues the session of ``current``: a successor of it, or of one of its
    ancestors (another writer rotated the file this one had rotated too, or had not followed yet).
    """
    if os.path.realpath(candidate) == os.path.realpath(current):
        return False  # the same file (a symlinked sessions dir): nothing to follow
    return not set(_lineage(candidate)).isdisjoint(_lineage(current))


def _is_timeout(error: object) -> bool:
    """A model call that timed out: a ``TimeoutError`` (anyio's ``fail_after`` too) or a timeout message."""
    if isinstance(error, TimeoutError):
        return True
    text = error if isinstance(error, str) else getattr(error, "error_message", None)
    return isinstance(text, str) and ("timed out" in text.lower() or "timeout" in text.lower())


def _reply_text(message: AssistantMessage) -> str:
    return "".join(block.text for block in message.content if isinstance(block, TextContent))


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
    ) -> None:
        self.store = store
        self.model: ModelInfo = model if model is not None else ModelInfo()
        self.settings: RuntimeSettings = settings if settings is not None else RuntimeSettings()
        self.model_client = model_client
        self.hooks: HookRegistry = hooks if hooks is not None else HookRegistry()
        self.providers = providers
        self.clock = clock
        self.cwd: str = cwd if cwd is not None else str(Path.cwd())
        self.workspace_dir: Path | None = Path(workspace_dir) if workspace_dir is not None else None
        self.flush_policy: MemoryFlushPolicy = MemoryFlushPolicy(
            settings=self.settings.memory_flush, compaction=self.settings.compaction
        )
        self.pruner: Pruner = Pruner(settings=self.settings.pruning, clock=clock)
        check_provider_configured(self.settings.compaction, providers)
        runner = memory_flush_runner
        if runner is None and model_client is not None:
            if self.workspace_dir is not None:
                runner = self._default_flush_runner
            elif host_supports_flush and self.settings.memory_flush.enabled:
                # the default flush turn's only output is the memory file: without a workspace it would
                # pay for a model call whose reply is thrown away (issue #11)
                _log.info(
                    "memory flush off: the default flush turn needs workspace_dir (or a memory_flush_runner)",
                    extra={"reason": "no_workspace_dir"},
                )
        self._flush_runner: MemoryFlushRunner | None = runner if host_supports_flush else None
        self._memory_transcripts: dict[str, TranscriptManager] = {}

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
    def _current_context(session: RuntimeSession) -> Sequence[AgentMessage]:
        """The context messages of the session's branch: the last one built when the leaf is unchanged."""
        memo = session._context_memo
        transcript = session.transcript
        if memo is not None and memo[0] == transcript.leaf_id:
            return memo[1]
        return transcript.build_session_context().messages

    @staticmethod
    def _tokens_after_append(session: RuntimeSession, appended: Sequence[TranscriptEntry]) -> int:
        """
        :meth:`context_tokens` right after ``appended`` (message entries, each a child of the previous).

        When they extend the leaf of the context the runtime last built, the context is that one plus
        their messages (a message entry adds its message, pi's ``buildSessionContext``); otherwise it
        is rebuilt.
        """
        transcript = session.transcript
        memo = session._context_memo
        leaf = transcript.leaf_id
        context: Sequence[AgentMessage]
        if memo is not None and not appended and memo[0] == leaf:
            context = memo[1]
        elif (
            memo is not None
            and appended
            and appended[0].parent_id == memo[0]
            and appended[-1].id == leaf
            and all(isinstance(entry, MessageEntry) for entry in appended)
        ):
            context = (*memo[1], *(entry.message for entry in appended if isinstance(entry, MessageEntry)))
        else:
            context = transcript.build_session_context().messages
        session._context_memo = (leaf, context)
        return estimate_context_usage(context).tokens

    @staticmethod
    def active_transcript_bytes(session: RuntimeSession) -> int:
        """
        Bytes (lines and their newlines) of the live window the next request carries: on the path to the
        leaf, the latest compaction entry, its kept range (from ``firstKeptEntryId`` up to it) and every
        entry after it; the whole path when it has no compaction (issue #15 item 11; pi's
        ``buildSessionContext`` rule, pi-format §9). A kept range whose ``firstKeptEntryId`` is not on the
        path keeps nothing, as pi does. Off-branch lines are not counted.
        """
        index = session.transcript.index
        kinds, ids, parents, lines, by_id = index.kinds, index.ids, index.parents, index.lines, index.by_id
        leaf = session.transcript.leaf_id
        pos = by_id.get(leaf) if isinstance(leaf, str) and leaf else None
        if pos is None:
            if not leaf or not kinds:
                return 0
            pos = len(kinds) - 1  # an unknown leaf: the last entry, as build_session_context falls back
        if pos == len(kinds) - 1 and parents[1:] == ids[:-1] and not parents[0]:
            # one chain and the leaf at its end (the usual file): C-speed list operations; this runs
            # before every turn, and a walk costs ~35 ms on a 20k-entry file
            try:
                start = len(kinds) - 1 - kinds[::-1].index("compaction")
            except ValueError:
                return sum(map(len, lines[: len(kinds)])) + len(kinds)
            entry = index.entry_at(start)
            kept_at = start
            if isinstance(entry, CompactionEntry | UnknownEntry):
                first = (
                    entry.first_kept_entry_id
                    if isinstance(entry, CompactionEntry)
                    else entry_key(entry.raw.get("firstKeptEntryId"))
                )
                found = by_id.get(first) if first is not None else None
                kept_at = found if found is not None and found < start else start
            return sum(map(len, lines[kept_at : len(kinds)])) + len(kinds) - kept_at
        total = kept = 0
        first_kept: object = None
        compaction_seen = False
        seen = {pos}
        while True:
            size = len(lines[pos]) + 1
            if compaction_seen:
                kept += size
                if ids[pos] == first_kept:
                    total += kept
                    break
            else:
                total += size
                if kinds[pos] == "compaction":
                    compaction_seen = True
                    entry = index.entry_at(pos)
                    if isinstance(entry, CompactionEntry):
                        first_kept = entry.first_kept_entry_id
                    elif isinstance(entry, UnknownEntry):
                        first_kept = entry_key(entry.raw.get("firstKeptEntryId"))
                    if first_kept is None or first_kept == ids[pos]:
                        break  # a strict checkpoint keeps nothing before itself
            parent = parents[pos]
            nxt = by_id.get(parent) if parent else None
            if nxt is None or nxt in seen:
                break
            seen.add(nxt)
            pos = nxt
        return total

    def _last_cache_touch(self, transcript: TranscriptManager) -> int | None:
        """The newest ``openclaw.cache-ttl`` marker of this provider and model (decodes markers only)."""
        index = transcript.index
        kinds = index.kinds
        for pos in range(len(kinds) - 1, -1, -1):
            if kinds[pos] != "custom":
                continue
            touch = read_last_cache_touch(
                (index.entry_at(pos),), provider=self.model.provider, model_id=self.model.model_id
            )
            if touch is not None:
                return touch
        return None

    def _read_prune_ledger(self, session: RuntimeSession) -> PruneLedger:
        """
        The session's prune records (D11), read incrementally: only entries added since the last call
        are decoded, and only ``custom`` ones.
        """
        index = session.transcript.index
        kinds = index.kinds
        cached = session._prune_ledger
        if cached is not None and cached[0] is index and cached[1] <= len(kinds):
            start, ledger = cached[1], cached[2]
        else:
            start, ledger = 0, PruneLedger()
        customs = [index.entry_at(pos) for pos in range(start, len(kinds)) if kinds[pos] == "custom"]
        if customs:
            ledger = ledger.extended(customs)
        session._prune_ledger = (index, len(kinds), ledger)
        return ledger

    async def _record_prune(
        self,
        session: RuntimeSession,
        soft_trimmed: Sequence[str],
        hard_cleared: Sequence[str],
        *,
        now_ms: int,
    ) -> None:
        """
        Append the prune record of this request's new decisions (D11): a ``custom`` entry, which pi and
        OpenClaw keep out of the model context, so later requests and restarts send the same bytes.
        """
        settings = self.pruner.settings
        transcript = session.transcript
        record = await transcript.append_custom(
            PRUNE_RECORD_CUSTOM_TYPE,
            data=prune_record_data(
                timestamp_ms=now_ms,
                provider=self.model.provider,
                model_id=self.model.model_id,
                soft_trimmed=soft_trimmed,
                hard_cleared=hard_cleared,
                soft_trim=settings.soft_trim,
                placeholder=settings.hard_clear.placeholder,
            ),
        )
        memo = session._context_memo
        if memo is not None and memo[0] == record.parent_id and transcript.leaf_id == record.id:
            session._context_memo = (record.id, memo[1])  # a custom entry adds no message
        _log.debug(
            "recorded a prune: %d soft-trimmed, %d hard-cleared",
            len(soft_trimmed),
            len(hard_cleared),
            extra={"session_key": session.session_key, "entry_id": record.id},
        )

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
        transcript = await self._open_transcript(entry)
        return RuntimeSession(
            session_key=session_key, entry=entry, transcript=transcript, resolution=resolution
        )

    async def _open_transcript(self, entry: SessionEntry) -> TranscriptManager:
        session_id = entry.session_id
        if not isinstance(session_id, str):
            raise UnsafePathError("the session entry has no usable sessionId", value=repr(session_id))
        path = self.store.transcript_file(entry)
        if path is None:
            manager = self._memory_transcripts.get(session_id)
            if manager is None:
                manager = TranscriptManager.in_memory(cwd=self.cwd, session_id=session_id, clock=self.clock)
                self._memory_transcripts[session_id] = manager
            return manager
        if await anyio.Path(path).exists():
            return await TranscriptManager.open(path, clock=self.clock)
        try:
            return await TranscriptManager.create(path, cwd=self.cwd, session_id=session_id, clock=self.clock)
        except FileExistsError:  # another runtime on the same key created it meanwhile
            return await TranscriptManager.open(path, clock=self.clock)

    async def _follow_successor(self, session: RuntimeSession) -> None:
        """
        Move to the successor transcript another writer's rotation gave the store entry (OpenClaw §5.8).

        Another runtime on the same key (another process) that compacted with ``truncateAfterCompaction``
        points the entry at a successor of this session's file; the writes of this one would otherwise go
        on in the old file, which the store no longer names. Only a file of the same lineage is followed
        (a successor of the current file or of one of its ``parentSession`` ancestors: two writers that
        rotated the same file join the one the store adopted); a reset or another session id is left to
        :meth:`open`.
        """
        current = session.transcript.path
        if current is None:
            return
        entry = await self.store.get(session.session_key)
        if entry is None:
            return
        try:
            target = self.store.transcript_file(entry)
        except UnsafePathError:
            return
        if target is None or target == current:
            return
        if not await anyio.to_thread.run_sync(_same_lineage, target, current):
            return
        session.transcript = await TranscriptManager.open(target, clock=self.clock)
        session._context_memo = None
        session._entry = entry

    async def _patch(self, session: RuntimeSession, fields: dict[str, Any]) -> SessionEntry:
        patch = {key: UNSET if value is None else value for key, value in fields.items()}  # None = delete
        entry = await self.store.patch(session.session_key, patch)
        session._entry = entry
        return entry

    # ------------------------------------------------------------------ the turn's write lock

    async def _hold_turn_lock(self, session: RuntimeSession, *, start: bool) -> None:
        """
        Hold the session transcript's write lock until the turn ends (OpenClaw holds it for the whole
        agent run, spec §3), so each append of the turn pays only its write and fsync. ``start``: a new
        turn begins (a prompt); otherwise only a hold already made for the turn is kept up.

        Not taken for an in-memory transcript, with ``locking`` off, or while the host holds the lock
        itself (``hold_write_lock``: the turn's writes use that one). A hold the watchdog released after
        ``maxHoldMs``, or one on a transcript the session left (rotation), is given back and taken again.
        """
        transcript = session.transcript
        hold = session._turn_lock
        if hold is not None:
            if hold[0] is transcript and hold[1].held:
                return
            await self.release_turn_lock(session)
        elif not start:
            return
        if transcript.path is None or not transcript.locking or transcript.held_write_lock is not None:
            return
        session._turn_lock = (transcript, await transcript.acquire_write_lock_hold())

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
        hold = session._turn_lock
        if hold is None:
            return
        session._turn_lock = None
        await hold[0].release_write_lock_hold(hold[1])

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
        await self._follow_successor(session)
        await self._hold_turn_lock(session, start=prompt is not None)
        transcript = session.transcript
        window = self.context_window
        flush_outcome: MemoryFlushOutcome | None = None
        compaction: CompactionOutcome | None = None
        prompt_entry: TranscriptEntry | None = None
        if prompt is not None:
            message = (
                _stamped(prompt, self.clock.now_ms())  # dated now when left at 0, as after_turn does
                if isinstance(prompt, UserMessage)
                else UserMessage(content=[TextContent(text=prompt)], timestamp=self.clock.now_ms())
            )
            session.recovery = OverflowRecoveryState()
            session.timeout_compactions = 0
            session.compacted_this_turn = False
            session.turn_usage = {}
            prompt_tokens = estimate_tokens(message)
            leaf_before = transcript.leaf_id
            history = self._current_context(session)
            history_tokens = estimate_context_usage(history).tokens
            projected = history_tokens + prompt_tokens
            if projected <= self.compaction_threshold:
                session.ineffective_compactions = 0
            preflight = decide_preflight_compaction(
                context_tokens=projected,
                context_window=window,
                settings=self.settings.compaction,
                active_transcript_bytes=self.active_transcript_bytes(session),
                max_output_tokens=self.model.max_output_tokens,
                is_heartbeat=is_heartbeat,
                ineffective_compactions=session.ineffective_compactions,
                recovery=self.settings.recovery,
            )
            flush_outcome = await self._maybe_flush(
                session,
                context_tokens=projected,
                pending_compaction=preflight.compact,
                trigger="preflight" if preflight.compact else "pre_turn",
                is_heartbeat=is_heartbeat,
            )
            if preflight.compact:
                compaction = await self._auto_compact(session, trigger="preflight", tokens_before=projected)
            elif preflight.reason == "compaction_ineffective":
                compaction = self._refused(trigger="preflight", tokens=projected)
            # a compaction with truncateAfterCompaction moved the session to its successor transcript
            transcript = session.transcript
            prompt_entry = await transcript.append_message(message)
            if transcript.leaf_id == prompt_entry.id and prompt_entry.parent_id == leaf_before:
                # nothing else was written since the estimate: extend the context instead of rebuilding it
                context: Sequence[AgentMessage] = (*history, prompt_entry.message)
                tokens = projected
            else:
                context = transcript.build_session_context().messages
                tokens = estimate_context_usage(context).tokens
        else:
            context = self._current_context(session)
            tokens = estimate_context_usage(context).tokens
        session.last_prompt_tokens = tokens
        session._context_memo = (transcript.leaf_id, context)
        now = self.clock.now_ms()
        model = self.model
        ledger = self._read_prune_ledger(session) if self.pruner.settings.mode == "cache-ttl" else None
        touch = self._last_cache_touch(transcript)
        if ledger is not None:
            recorded = ledger.touch_for(model.provider, model.model_id)
            if recorded is not None and (touch is None or recorded > touch):
                touch = recorded  # a prune rebuilt the cache (OpenClaw keeps that in memory only)
        pruning = self.pruner.prune(
            context,
            context_window_tokens=window,
            last_cache_touch_at=touch,
            provider=model.provider,
            model_id=model.model_id,
            api=model.api,
            now_ms=now,
            ledger=ledger,
        )
        if pruning.soft_trimmed or pruning.hard_cleared:
            await self._record_prune(session, pruning.soft_trimmed, pruning.hard_cleared, now_ms=now)
        messages = pruning.messages
        truncated: tuple[str, ...] = ()
        if session.truncate_tool_results:
            cut = truncate_oversized_tool_results(messages, context_window_tokens=window)
            messages, truncated = cut.messages, cut.truncated
        policy = resolve_replay_policy(api=model.api, provider=model.provider, model_id=model.model_id)
        hygiene = sanitize_replay_history(
            messages, policy=policy, timestamp_ms=now, api=model.api, provider=model.provider
        )
        precheck = None
        if prompt is None and self.settings.mid_turn_precheck.enabled:
            precheck = mid_turn_precheck(
                precheck=self.settings.mid_turn_precheck,
                estimated_prompt_tokens=estimate_prompt_pressure(
                    hygiene.messages, system_prompt=system_prompt
                ),
                context_window=window,
                settings=self.settings.compaction,
            )
        return ModelCallPlan(
            messages=hygiene.messages,
            prompt_entry=prompt_entry,
            context_tokens=tokens,
            context_window=window,
            memory_flush=flush_outcome,
            compaction=compaction,
            pruning=pruning,
            hygiene=hygiene,
            truncated_tool_results=truncated,
            precheck=precheck,
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
        await self._follow_successor(session)
        await self._hold_turn_lock(session, start=False)
        transcript = session.transcript
        now_ms = self.clock.now_ms()
        messages = [_stamped(message, now_ms) for message in messages]
        # one write and one fsync for the whole reply (the turn's durable unit)
        appended: list[TranscriptEntry] = list(await transcript.append_messages(messages))
        last_reply: AssistantMessage | None = None
        for message in messages:
            if isinstance(message, AssistantMessage):
                last_reply = message
                if message.stop_reason not in ("error", "aborted"):
                    session.recovery = session.recovery.after_reply()
                usage = message.usage
                for key, value in (
                    ("inputTokens", usage.input),
                    ("outputTokens", usage.output),
                    ("cacheRead", usage.cache_read),
                    ("cacheWrite", usage.cache_write),
                ):
                    session.turn_usage[key] = session.turn_usage.get(key, 0) + value
        if not turn_complete:
            return TurnOutcome(
                entries=tuple(appended),
                delivered_text=None,
                silent=False,
                context_tokens=self._tokens_after_append(session, appended),
            )
        text = _reply_text(last_reply) if last_reply is not None else ""
        silent = last_reply is not None and is_silent_reply_payload(text)
        delivered = None if silent or last_reply is None else (strip_silent_token(text) or None)
        silent = silent or (last_reply is not None and delivered is None and bool(text.strip()))

        tokens = self._tokens_after_append(session, appended)
        flush_outcome: MemoryFlushOutcome | None = None
        compaction: CompactionOutcome | None = None
        decision = decide_threshold_compaction(
            context_tokens=tokens,
            context_window=self.context_window,
            settings=self.settings.compaction,
            max_output_tokens=self.model.max_output_tokens,
            reply_aborted=last_reply is not None and last_reply.stop_reason == "aborted",
            ineffective_compactions=session.ineffective_compactions,
            recovery=self.settings.recovery,
        )
        if decision.compact:
            flush_outcome = await self._maybe_flush(
                session, context_tokens=tokens, pending_compaction=True, trigger="threshold"
            )
            compaction = await self._auto_compact(session, trigger="threshold", tokens_before=tokens)
            tokens = compaction.tokens_after
        elif decision.reason == "compaction_ineffective":
            compaction = self._refused(trigger="threshold", tokens=tokens)

        marker: TranscriptEntry | None = None
        transcript = session.transcript  # the successor, if a compaction rotated the transcript
        model = self.model
        aborted = last_reply is not None and last_reply.stop_reason in ("error", "aborted")
        if (
            not session.compacted_this_turn
            and not aborted
            and self.pruner.is_cache_ttl_eligible(model.provider, model.model_id, model.api)
        ):
            marker = await transcript.append_custom(
                CACHE_TTL_CUSTOM_TYPE,
                data=cache_ttl_marker_data(
                    timestamp_ms=self.clock.now_ms(), provider=model.provider, model_id=model.model_id
                ),
            )
            memo = session._context_memo
            if memo is not None and memo[0] == marker.parent_id and transcript.leaf_id == marker.id:
                session._context_memo = (marker.id, memo[1])  # a custom entry adds no message
        fields: dict[str, Any] = dict(session.turn_usage)
        fields.update(totalTokens=tokens, totalTokensFresh=True, contextTokens=self.context_window)
        if model.provider:
            fields["modelProvider"] = model.provider
        if model.model_id:
            fields["model"] = model.model_id
        await self._patch(session, fields)
        return TurnOutcome(
            entries=tuple(appended),
            delivered_text=delivered,
            silent=silent,
            context_tokens=tokens,
            memory_flush=flush_outcome,
            compaction=compaction,
            cache_ttl_marker=marker,
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
        await self._follow_successor(session)
        window = self.context_window
        context = session.transcript.build_session_context().messages
        oversized = has_oversized_tool_results(context, context_window_tokens=window)
        decision = plan_overflow_recovery(
            error,
            state=session.recovery,
            context_window=window,
            settings=self.settings.recovery,
            estimate_tokens=session.last_prompt_tokens,
            has_reducible_tool_results=oversized and not session.truncate_tool_results,
        )
        if decision.action == "not_overflow":
            if _is_timeout(error):
                timeout = await self._timeout_compaction(session)
                if timeout is not None:
                    return timeout
            if isinstance(error, BaseException):
                raise error
            return RecoveryOutcome(action="not_overflow", reason=decision.reason)
        flush_outcome: MemoryFlushOutcome | None = None
        compaction: CompactionOutcome | None = None
        if decision.action == "compact":
            count = decision.token_count
            assert count is not None
            flush_outcome = await self._maybe_flush(
                session, context_tokens=count.tokens, pending_compaction=True, trigger="overflow"
            )
            compaction = await self._auto_compact(
                session, trigger="overflow", tokens_before=count.tokens, synthetic=count
            )
            session.recovery = session.recovery.after_compaction(succeeded=compaction.context_compacted)
            if compaction.context_compacted:
                return RecoveryOutcome(
                    action="compacted",
                    reason=decision.reason,
                    attempt=decision.attempt,
                    observed_tokens=decision.observed_tokens,
                    memory_flush=flush_outcome,
                    compaction=compaction,
                )
            decision = plan_overflow_recovery(
                error,
                state=session.recovery,
                context_window=window,
                settings=self.settings.recovery,
                estimate_tokens=session.last_prompt_tokens,
                has_reducible_tool_results=oversized and not session.truncate_tool_results,
            )
        if decision.action == "truncate_tool_results":
            session.truncate_tool_results = True
            session.recovery = session.recovery.after_truncation()
            return RecoveryOutcome(
                action="truncated",
                reason=decision.reason,
                observed_tokens=decision.observed_tokens,
                memory_flush=flush_outcome,
                compaction=compaction,
            )
        raise decision.error(attempts=session.recovery.compactions)

    async def _timeout_compaction(self, session: RuntimeSession) -> RecoveryOutcome | None:
        """OpenClaw §5.7: a timed-out call whose prompt used > 65 % of the window compacts (2 per turn)."""
        decision = decide_timeout_compaction(
            prompt_tokens=session.last_prompt_tokens or 0,
            context_window=self.context_window,
            settings=self.settings.compaction,
            timeout_compactions=session.timeout_compactions,
            recovery=self.settings.recovery,
        )
        if not decision.compact:
            return None
        session.timeout_compactions += 1
        tokens = decision.context_tokens
        flush_outcome = await self._maybe_flush(
            session, context_tokens=tokens, pending_compaction=True, trigger="timeout"
        )
        compaction = await self._auto_compact(session, trigger="timeout", tokens_before=tokens)
        if not compaction.context_compacted:
            return None
        return RecoveryOutcome(
            action="compacted",
            reason=decision.reason,
            attempt=session.timeout_compactions,
            memory_flush=flush_outcome,
            compaction=compaction,
        )

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
        await self._follow_successor(session)
        tokens = self.context_tokens(session)
        return await self._compact(
            session,
            trigger="manual",
            tokens_before=tokens,
            instructions=instructions,
            keep_recent_tokens=keep_recent_tokens,
        )

    # ------------------------------------------------------------------ internals

    def _refused(self, *, trigger: CompactionTriggerName, tokens: int) -> CompactionOutcome:
        return CompactionOutcome(
            trigger=trigger,
            status="compaction_ineffective",
            tokens_before=tokens,
            tokens_after=tokens,
            threshold=self.compaction_threshold,
            effective=False,
        )

    async def _auto_compact(
        self,
        session: RuntimeSession,
        *,
        trigger: CompactionTriggerName,
        tokens_before: int,
        synthetic: SyntheticTokenCount | None = None,
    ) -> CompactionOutcome:
        try:
            outcome = await self._compact(
                session, trigger=trigger, tokens_before=tokens_before, synthetic=synthetic
            )
        except (CompactionCancelled, CompactionError) as err:
            return CompactionOutcome(
                trigger=trigger,
                status="cancelled" if isinstance(err, CompactionCancelled) else "failed",
                tokens_before=tokens_before,
                tokens_after=tokens_before,
                threshold=self.compaction_threshold,
                effective=False,
                synthetic_tokens=synthetic,
            )
        if outcome.compacted or outcome.status == "joined":  # joined: another run compacted it for us
            session.compacted_this_turn = True
            if outcome.effective:
                session.ineffective_compactions = 0
            else:
                session.ineffective_compactions += 1
        return outcome

    async def _compact(
        self,
        session: RuntimeSession,
        *,
        trigger: CompactionTriggerName,
        tokens_before: int,
        instructions: str | None = None,
        keep_recent_tokens: int | None = None,
        synthetic: SyntheticTokenCount | None = None,
    ) -> CompactionOutcome:
        compactor = Compactor(
            settings=self.settings.compaction,
            model_client=self.model_client,
            providers=self.providers,
            hooks=self.hooks,
            context_window=self.context_window,
            clock=self.clock,
            max_output_tokens=self.model.max_output_tokens,
        )
        reason: Literal["manual", "threshold", "overflow"] = (
            "threshold" if trigger == "preflight" else "overflow" if trigger == "timeout" else trigger
        )
        # issue #11: report each number with its source (provider usage vs chars/4 estimate)
        before_context = self._current_context(session)
        before_source = (
            synthetic.source if synthetic is not None else estimate_context_usage(before_context).source
        )
        before_estimate = sum(estimate_tokens(message) for message in before_context)
        result = await compactor.compact(
            session.transcript,
            reason=reason,
            keep_recent_tokens=keep_recent_tokens,
            custom_instructions=instructions,
            session_key=session.session_key,
            will_retry=trigger in ("overflow", "timeout"),
        )
        threshold = self.compaction_threshold
        joined = result.status == "joined"
        if result.status == "superseded" or (joined and result.successor is None):
            await self._follow_successor(session)  # the other writer's compaction may have rotated
        # "superseded" / "joined": another writer's compaction landed on this branch (picked up by the
        # landing, or waited for: D10), so the context did shrink: measure it again.
        measured = (
            estimate_context_usage(session.transcript.build_session_context().messages)
            if result.compacted or result.status in ("superseded", "joined")
            else None
        )
        after = measured.tokens if measured is not None else tokens_before
        after_source = measured.source if measured is not None else before_source
        progress = compaction_progress(tokens_before=tokens_before, tokens_after=after, threshold=threshold)
        if result.compacted or (joined and result.successor is not None):
            session.truncate_tool_results = False
            fields: dict[str, Any] = {"totalTokens": after, "totalTokensFresh": True}
            counted = result.compacted  # a joined run's compaction is counted by the run that wrote it

            def counted_fields(current: SessionEntry) -> dict[str, Any]:
                # incremented on the entry stored now, under the store's write serialisation: another
                # writer's compaction of this key since this session last read it is never lost
                if not counted:
                    return fields
                return {**fields, "compactionCount": _int(current.compaction_count) + 1}

            successor = result.successor
            if successor is None:
                updated = await self.store.update_entry(session.session_key, counted_fields)
                if updated is not None:
                    session._entry = updated
                else:  # the entry is gone: recreate it, as the other runtime writes do
                    await self._patch(session, {**fields, **({"compactionCount": 1} if counted else {})})
            else:
                # truncateAfterCompaction (OpenClaw §5.8): the store entry adopts the successor's
                # sessionId and sessionFile (absolute, as OpenClaw writes it); the old file stays.
                rotated_id = session.transcript.session_id
                session.transcript = await TranscriptManager.open(successor.path, clock=self.clock)
                session._context_memo = None
                fields |= {"sessionId": successor.session_id, "sessionFile": str(successor.path)}

                def adopt(current: SessionEntry) -> dict[str, Any] | None:
                    # only while the entry still names the rotated session: after another writer's
                    # reset (a new sessionId) the key is that session's, never taken back
                    return counted_fields(current) if current.session_id == rotated_id else None

                entry = await self.store.update_entry(session.session_key, adopt)
                if entry is not None:
                    session._entry = entry
                else:  # another writer's rotation of the same file won: go on in its successor
                    await self._follow_successor(session)
        return CompactionOutcome(
            trigger=trigger,
            status=result.status,
            tokens_before=tokens_before,
            tokens_after=after,
            threshold=threshold,
            effective=progress.effective,
            result=result,
            synthetic_tokens=synthetic,
            tokens_before_source=before_source,
            tokens_before_estimate=before_estimate,
            tokens_after_source=after_source,
        )

    async def _maybe_flush(
        self,
        session: RuntimeSession,
        *,
        context_tokens: int,
        trigger: Literal["pre_turn", "threshold", "preflight", "overflow", "timeout"],
        pending_compaction: bool = False,
        is_heartbeat: bool = False,
    ) -> MemoryFlushOutcome | None:
        entry = session.entry
        flush_count = entry.memory_flush_compaction_count
        decision = self.flush_policy.decide(
            context_tokens=context_tokens,
            context_window=self.context_window,
            compaction_count=_int(entry.compaction_count),
            memory_flush_compaction_count=flush_count if isinstance(flush_count, int) else None,
            active_transcript_bytes=self.active_transcript_bytes(session),
            max_output_tokens=self.model.max_output_tokens,
            pending_compaction=pending_compaction,
            in_flush_turn=session.in_flush_turn,
            host_supports_flush=self._flush_runner is not None,
            is_heartbeat=is_heartbeat,
        )
        if not decision.run or self._flush_runner is None:
            return None
        return await self._run_flush(
            session, decision, trigger=trigger, pending_compaction=pending_compaction
        )

    async def _run_flush(
        self,
        session: RuntimeSession,
        decision: MemoryFlushDecision,
        *,
        trigger: Literal["pre_turn", "threshold", "preflight", "overflow", "timeout"],
        pending_compaction: bool,
    ) -> MemoryFlushOutcome:
        assert self._flush_runner is not None
        start_count = _int(session.entry.compaction_count)
        plan = self.flush_policy.plan(now_ms=self.clock.now_ms(), current_provider=self.model.provider)
        request = MemoryFlushRequest(
            session_key=session.session_key,
            session_id=session.session_id,
            plan=plan,
            messages=tuple(session.transcript.build_session_context().messages),
            decision=decision,
            trigger=trigger,
        )
        hook_errors = list(
            await self.hooks.notify(
                MemoryFlushStartEvent(
                    session_key=session.session_key,
                    context_tokens=decision.context_tokens or 0,
                    threshold_tokens=decision.threshold,
                    forced=decision.forced,
                )
            )
        )
        session.in_flush_turn = True
        try:
            reply = await self._flush_runner(request)
        except Exception as err:
            session.in_flush_turn = False
            failures = session.entry.memory_flush_failure_count
            record = self.flush_policy.record_failure(
                error=err,
                previous_failure_count=failures if isinstance(failures, int) else None,
                compaction_count=_int(session.entry.compaction_count),
                now_ms=self.clock.now_ms(),
                pending_compaction=pending_compaction,
            )
            await self._patch(session, record.to_entry_patch())
            _log.warning(
                "memory flush of %s failed (%d in a row%s): %s",
                session.session_key,
                record.memory_flush_failure_count,
                ", cycle given up" if record.exhausted else "",
                record.memory_flush_last_failure_error,
                extra={
                    "session_key": session.session_key,
                    "session_id": session.session_id,
                    "trigger": trigger,
                    "reason": decision.reason,
                    "error": record.memory_flush_last_failure_error,
                    "failure_count": record.memory_flush_failure_count,
                    "exhausted": record.exhausted,
                },
            )
            hook_errors += await self.hooks.notify(
                MemoryFlushEndEvent(
                    session_key=session.session_key,
                    ok=False,
                    error_message=record.memory_flush_last_failure_error,
                    failure_count=record.memory_flush_failure_count,
                )
            )
            return MemoryFlushOutcome(
                trigger=trigger,
                reason=decision.reason,
                ok=False,
                context_tokens=decision.context_tokens,
                threshold=decision.threshold,
                error=record.memory_flush_last_failure_error,
                exhausted=record.exhausted,
                diagnostic=record.diagnostic,
                hook_errors=tuple(hook_errors),
            )
        session.in_flush_turn = False
        record = self.flush_policy.record_success(
            compaction_count_at_start=start_count, now_ms=self.clock.now_ms()
        )
        await self._patch(session, record.to_entry_patch())
        hook_errors += await self.hooks.notify(MemoryFlushEndEvent(session_key=session.session_key, ok=True))
        silent = reply is None or is_silent_reply_payload(reply) or not reply.strip()
        memory_file = None
        if not silent and self.workspace_dir is not None and self._flush_runner == self._default_flush_runner:
            memory_file = plan.relative_path
        _log.info(
            "memory flush of %s ran (%s, %s)",
            session.session_key,
            decision.reason,
            "silent" if silent else "replied",
            extra={
                "session_key": session.session_key,
                "session_id": session.session_id,
                "trigger": trigger,
                "reason": decision.reason,
                "context_tokens": decision.context_tokens,
                "reply_silent": silent,
                "memory_file": memory_file,
            },
        )
        return MemoryFlushOutcome(
            trigger=trigger,
            reason=decision.reason,
            ok=True,
            context_tokens=decision.context_tokens,
            threshold=decision.threshold,
            reply_silent=silent,
            memory_file=memory_file,
            hook_errors=tuple(hook_errors),
        )

    async def _default_flush_runner(self, request: MemoryFlushRequest) -> str | None:
        """One model call with the flush prompts; a non-silent reply is appended to the memory file."""
        assert self.model_client is not None
        plan = request.plan
        prompt = UserMessage(content=[TextContent(text=plan.prompt)], timestamp=self.clock.now_ms())
        budget = self.compaction_threshold - estimate_tokens(prompt)
        messages = list(request.messages)
        total = sum(estimate_tokens(m) for m in messages)
        while messages and total > budget:  # cut to fit a flush request, oldest first
            total -= estimate_tokens(messages.pop(0))
        model = None
        if plan.model is not None:
            model = f"{plan.model.provider}/{plan.model.model}" if plan.model.provider else plan.model.model
        response = await self.model_client.complete(
            ModelRequest(
                system_prompt=plan.system_prompt,
                messages=(*messages, prompt),
                max_tokens=_FLUSH_MAX_TOKENS,
                model=model,
                metadata={"purpose": "memory-flush", "sessionKey": request.session_key},
            )
        )
        text = response.text
        if self.workspace_dir is not None and text.strip() and not is_silent_reply_payload(text):
            await anyio.to_thread.run_sync(self._append_memory, plan.relative_path, strip_silent_token(text))
        return text

    def _append_memory(self, relative_path: str, text: str) -> None:
        assert self.workspace_dir is not None
        root = self.workspace_dir.resolve()
        target = (root / relative_path).resolve()
        if not target.is_relative_to(root):
            raise UnsafePathError(f"memory file {relative_path!r} leaves the workspace", value=relative_path)
        ensure_dir(target.parent)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with contextlib.closing(os.fdopen(fd, "a", encoding="utf-8")) as handle:
            handle.write(text.rstrip() + "\n")
