"""
The compactor: plan, ask the hooks, summarise, write the ``compaction`` entry, tell the hooks.

Order (pi spec §15.6): ``compaction_start`` -> ``session_before_compact`` -> summariser -> append
entry -> ``session_compact`` -> ``compaction_end``. Only ``session_before_compact`` handlers can stop the
run (their errors propagate, before anything is written); the other three are notifications
(:meth:`HookRegistry.notify`): a raising handler is logged, passed to ``on_error`` and collected on
``CompactionResult.hook_errors``, and the result is still returned, so a caller never sees an exception
for a compaction that landed (and never retries it). The summariser chain is DESIGN D3's: configured
provider -> built-in LLM summariser (needs a ``ModelClient``) -> extractive summariser. No entry is
ever written when the summariser failed or produced nothing usable.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal, TypeAlias

import anyio
import attrs
from msgspec import UNSET

from sessionkeeper._clock import SYSTEM_CLOCK, Clock
from sessionkeeper._model_client import ModelClient
from sessionkeeper._tokens import EstimateTokenCounter, TokenCounter, token_memo
from sessionkeeper._tracing import traced
from sessionkeeper.compaction._budget import DEFAULT_CONTEXT_WINDOW, CompactionBudget, compaction_budget
from sessionkeeper.compaction._cut import entry_kind, message_role
from sessionkeeper.compaction._extractive import extractive_summary, message_text
from sessionkeeper.compaction._flight import flight
from sessionkeeper.compaction._landing import land_compaction, landing
from sessionkeeper.compaction._llm import LlmSummarizer
from sessionkeeper.compaction._prepare import CompactionPreparation, prepare_compaction
from sessionkeeper.compaction._prompts import build_structured_instructions, structured_fallback_summary
from sessionkeeper.compaction._providers import CompactionProviderRegistry, SummaryRequest
from sessionkeeper.compaction._settings import CompactionSettings
from sessionkeeper.compaction._successor import SuccessorTranscript, rotate_after_compaction
from sessionkeeper.compaction._suffix import (
    MAX_COMPACTION_SUMMARY_CHARS,
    cap_preserving_suffix,
    format_file_operations,
    safeguard_suffix,
)
from sessionkeeper.exceptions import CompactionCancelled, CompactionError, ConfigError, ModelClientError
from sessionkeeper.hooks import (
    CompactHookResult,
    CompactionEndEvent,
    CompactionHookOverride,
    CompactionReason,
    CompactionStartEvent,
    HookError,
    HookEvent,
    HookRegistry,
    SessionBeforeCompactEvent,
    SessionCompactEvent,
)
from sessionkeeper.records import key_to_json
from sessionkeeper.transcript import (
    CompactionEntry,
    CompactionSummaryMessage,
    TranscriptEntry,
    TranscriptManager,
    estimate_tokens,
)


__all__ = ("CompactionResult", "CompactionStatus", "Compactor", "check_provider_configured")

_log = logging.getLogger("sessionkeeper.compaction")

CompactionStatus: TypeAlias = Literal[
    "compacted",
    "empty",
    "already_compacted",
    "nothing_to_summarize",
    "pending_tool_results",
    "ineffective",
    "superseded",
    "joined",
]
_SILENT_TEXTS = frozenset({"NO_REPLY", "HEARTBEAT_OK"})


@attrs.frozen(kw_only=True)
class CompactionResult:
    """
    What :meth:`Compactor.compact` did.

    Attributes:
        status: ``"compacted"`` (an entry was written); ``"empty"`` (no branch); ``"already_compacted"``
            (the branch ends with a compaction); ``"nothing_to_summarize"`` (DESIGN D2);
            ``"pending_tool_results"`` (the leaf's tool calls have no results yet, field report B06);
            ``"ineffective"`` (the summary would not be smaller than what it replaces, B11);
            ``"superseded"`` (while the summary was made, another compaction landed on the branch or
            the leaf moved to another branch: issue #7, see :mod:`._landing`); ``"joined"`` (another
            task or process was compacting this transcript: this run waited for it and uses its entry
            instead of summarising again, DESIGN D10, :mod:`._flight`). Only ``"compacted"`` writes
            anything.
        entry: The written entry (for ``"joined"``: the entry the other run wrote), or ``None``.
        preparation: The plan, or ``None`` when there was none.
        summary: The summary written (``"joined"``: the other run's), ``None`` when nothing was written.
        provider: Who made the summary: ``"hook"``, a provider id, ``"llm"``, ``"extractive"`` or
            ``"fallback"`` (OpenClaw's structured fallback when there is no real conversation).
        fallbacks: Why earlier links of the chain were skipped (``"provider x failed: ..."``).
        tokens_before: Context tokens before compaction (the plan's: provider usage plus chars/4 of the
            newer messages; ``tokens_before_source`` says which, issue #11).
        successor: The successor transcript written after the compaction when
            ``settings.truncate_after_compaction`` is on (OpenClaw spec §5.8); the caller adopts its
            session id and file. ``None`` otherwise (or for in-memory transcripts).
        hook_errors: Failures of notification handlers during the run (``compaction_start``,
            ``session_compact``, ``compaction_end``), in order: reported, not raised (pi spec §15.6:
            ``session_compact`` is an after-the-fact notification). Empty when every handler succeeded.
    """

    status: CompactionStatus
    entry: CompactionEntry | None = None
    preparation: CompactionPreparation | None = None
    summary: str | None = None
    provider: str | None = None
    fallbacks: tuple[str, ...] = ()
    tokens_before: int = 0
    successor: SuccessorTranscript | None = None
    hook_errors: tuple[HookError, ...] = ()

    @property
    def compacted(self) -> bool:
        """Whether this run wrote an entry (``"joined"`` results carry another run's entry)."""
        return self.status == "compacted" and self.entry is not None

    @property
    def tokens_before_source(self) -> str | None:
        """``"usage"`` or ``"estimate"``: how :attr:`tokens_before` was measured (``None``: no plan)."""
        return self.preparation.tokens_before_source if self.preparation is not None else None

    @property
    def tokens_after(self) -> int | None:
        """
        chars/4 estimate of the context this compaction leaves (the summary message plus the kept
        messages), in tokens; ``None`` when no summary was made. Compare it with the plan's
        ``tokens_before_estimate`` (also chars/4), not with a usage-anchored ``tokens_before``.
        """
        if self.summary is None or self.preparation is None:
            return None
        summary = CompactionSummaryMessage(
            summary=self.summary, tokens_before=self.tokens_before, timestamp=0
        )
        return estimate_tokens(summary) + self.preparation.kept_tokens

    def to_json(self) -> dict[str, Any]:
        """The ``compact --json`` shape (DESIGN "CLI JSON" item 6), camelCase."""
        out: dict[str, Any] = self.preparation.to_json() if self.preparation is not None else {}
        out.update(
            {
                "status": self.status,
                "entryId": self.entry.id if self.entry is not None else None,
                "provider": self.provider,
                "summaryChars": len(self.summary) if self.summary is not None else 0,
                "fallbacks": list(self.fallbacks),
                "tokensAfter": self.tokens_after,
                "tokensAfterSource": "estimate",
            }
        )
        if self.entry is not None:
            out["firstKeptEntryId"] = key_to_json(self.entry.first_kept_entry_id)  # numeric: a number
        if self.hook_errors:
            out["hookErrors"] = [error.to_json() for error in self.hook_errors]
        if self.successor is not None:
            out["successor"] = {
                "sessionId": self.successor.session_id,
                "sessionFile": str(self.successor.path),
            }
        return out


def _describe(err: BaseException) -> str:
    """``Type: message`` of an error, one line, at most 300 characters (for log records)."""
    text = " ".join(str(err).split())
    described = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return described if len(described) <= 300 else described[:299] + "…"


async def _arrived_compaction(
    transcript: TranscriptManager, planned_tip: str | None
) -> CompactionEntry | None:
    """
    The newest compaction another writer landed on the branch after ``planned_tip`` (after picking up
    their lines), or ``None``.
    """
    await transcript.refresh()
    if planned_tip is None:
        return None
    branch = transcript.get_branch()
    position = next((i for i in range(len(branch) - 1, -1, -1) if branch[i].id == planned_tip), None)
    if position is None:
        return None
    landed = [e for e in branch[position + 1 :] if isinstance(e, CompactionEntry)]
    return landed[-1] if landed else None


def _joined(entry: CompactionEntry) -> CompactionResult:
    """The result of a run that found another writer's compaction landed: ``"joined"`` with its entry."""
    return CompactionResult(
        status="joined",
        entry=entry,
        summary=entry.summary,
        provider="hook" if entry.from_hook is True else None,
        tokens_before=entry.tokens_before if isinstance(entry.tokens_before, int) else 0,
    )


def _log_result(
    result: CompactionResult, transcript: TranscriptManager, *, reason: str, session_key: str | None
) -> None:
    """One INFO record per written compaction; DEBUG for runs that wrote nothing (``docs/logging.md``)."""
    extra: dict[str, Any] = {
        "session_key": session_key,
        "session_id": transcript.session_id,
        "reason": reason,
        "status": result.status,
        "provider": result.provider,
        "tokens_before": result.tokens_before,
    }
    if result.compacted and result.entry is not None:
        extra |= {
            "entry_id": result.entry.id,
            "summary_chars": len(result.summary or ""),
            "fallbacks": list(result.fallbacks),
        }
        _log.info(
            "compacted %s (%s): %d tokens before, %s summary of %d chars",
            session_key or transcript.session_id,
            reason,
            result.tokens_before,
            result.provider,
            extra["summary_chars"],
            extra=extra,
        )
    else:
        if result.entry is not None:
            extra["entry_id"] = result.entry.id  # "joined": the entry another run wrote
        _log.debug(
            "compaction of %s wrote nothing: %s",
            session_key or transcript.session_id,
            result.status,
            extra=extra,
        )


def _real_conversation(messages: tuple[Any, ...]) -> bool:
    """OpenClaw §5.6 step 1: meaningful user/assistant text (not NO_REPLY/heartbeat) or a tool result."""
    for message in messages:
        role = message_role(message)
        if role == "toolResult":
            return True
        if role in ("user", "assistant", "custom", "bashExecution"):
            text = message_text(message).strip()
            if text and text not in _SILENT_TEXTS:
                return True
        if role == "assistant" and any(
            type(b).__name__ == "ToolCall" for b in getattr(message, "content", ())
        ):
            return True
    return False


def check_provider_configured(
    settings: CompactionSettings, providers: CompactionProviderRegistry | None
) -> None:
    """
    Refuse settings that name a compaction provider no registry knows (issue #11 "no silent surprises").

    A configured ``agents.defaults.compaction.provider`` that is not in ``providers`` would otherwise make
    every compaction fall back to the LLM or extractive summariser without a word. Deviation from
    OpenClaw, which falls back silently (``docs/decisions.md`` row D3-unknown-provider).

    Args:
        settings: The compaction settings (``settings.provider`` is checked; ``None`` passes).
        providers: The registry the compactor will use (``None`` = an empty one).

    Raises:
        ConfigError: ``settings.provider`` is set and not registered (key
            ``agents.defaults.compaction.provider``; the message lists the registered ids).
    """
    wanted = settings.provider
    if not wanted:
        return
    if providers is not None and wanted in providers:
        return
    known = ", ".join(providers.ids()) if providers is not None and len(providers) else "none"
    raise ConfigError(
        f"compaction provider {wanted!r} is not registered (registered: {known}); register it in the "
        "CompactionProviderRegistry passed as providers=, or install the package declaring it "
        "(CompactionProviderRegistry.from_entry_points())",
        key="agents.defaults.compaction.provider",
    )


class Compactor:
    """
    Compacts transcripts (pi spec §13-15, OpenClaw spec §5, DESIGN D1-D4).

    Args:
        settings: Compaction settings (:class:`CompactionSettings`; defaults when omitted).
        model_client: The host's model, for LLM summaries; ``None`` -> extractive summaries.
        providers: Registered compaction providers (``settings.provider`` picks one).
        hooks: Hook registry for ``session_before_compact`` / ``session_compact`` and the
            ``compaction_start`` / ``compaction_end`` events; ``None`` emits nothing.
        context_window: The model's window in tokens (sizes the keep budget, summary requests and
            chunks, DESIGN D9); ``None`` = 200000.
        clock: Time source (retry waits).
        workspace_dir: Folder holding the agent's ``AGENTS.md``; with
            ``settings.post_compaction_sections`` its named sections are appended to safeguard
            summaries as ``<workspace-critical-rules>`` (OpenClaw spec §5.6). ``None``: not used.
        max_output_tokens: The host's reply budget, when known (raises the reserve, B09), so the
            D9 budgets match the runtime's threshold. ``None``: OpenClaw's reserve.
        token_counter: Counts a message's tokens wherever a run decides by size: the cut walk and
            kept tail (:func:`prepare_compaction`), the "ineffective" check, the history share and
            oversized messages of the LLM summariser. Counts are remembered per message object
            (:class:`~sessionkeeper._tokens.MessageTokenMemo`). ``None``: :class:`EstimateTokenCounter`,
            pi's chars/4 estimate (pi spec §12), which makes every decision pi-exact.

    Raises:
        ConfigError: ``settings.provider`` names a provider that ``providers`` does not hold
            (:func:`check_provider_configured`). A provider unregistered later, or one that raises, makes
            the run fall back down the chain with a WARNING on the ``sessionkeeper.compaction`` logger
            (``docs/logging.md``).
    """

    def __init__(
        self,
        *,
        settings: CompactionSettings | None = None,
        model_client: ModelClient | None = None,
        providers: CompactionProviderRegistry | None = None,
        hooks: HookRegistry | None = None,
        context_window: int | None = None,
        clock: Clock = SYSTEM_CLOCK,
        workspace_dir: Path | str | None = None,
        max_output_tokens: int | None = None,
        token_counter: TokenCounter | None = None,
    ) -> None:
        self.settings: CompactionSettings = settings if settings is not None else CompactionSettings()
        check_provider_configured(self.settings, providers)
        self.workspace_dir: Path | None = Path(workspace_dir) if workspace_dir is not None else None
        self.model_client = model_client
        self.providers: CompactionProviderRegistry = (
            providers if providers is not None else CompactionProviderRegistry()
        )
        self.hooks = hooks
        self.context_window: int = context_window or DEFAULT_CONTEXT_WINDOW
        self.max_output_tokens = max_output_tokens
        self.token_counter: TokenCounter = EstimateTokenCounter() if token_counter is None else token_counter
        """The counter a run decides sizes with (see ``token_counter`` above)."""
        self._tokens = token_memo(self.token_counter)
        self._clock = clock

    def budget(
        self, *, reason: CompactionReason = "threshold", keep_recent_tokens: int | None = None
    ) -> CompactionBudget:
        """
        The window-derived budgets of a run (DESIGN D9, :func:`compaction_budget`).

        The keep budget asked for is the explicit value, else the configured one; a manual run
        without either is a strict checkpoint (``None``, OpenClaw's ``/compact``), automatic runs use
        20000. It is then lowered to ``0.4 * (window - effectiveReserve)`` (logged once when lowered).
        """
        requested = keep_recent_tokens
        if requested is None:
            requested = (
                self.settings.keep_recent_tokens
                if reason == "manual"
                else self.settings.resolved_keep_recent_tokens
            )
        return compaction_budget(
            self.settings,
            context_window=self.context_window,
            keep_recent_tokens=requested,
            max_output_tokens=self.max_output_tokens,
            keep_configured=keep_recent_tokens is not None or self.settings.keep_recent_tokens is not None,
        )

    def keep_budget(self, *, reason: CompactionReason, keep_recent_tokens: int | None) -> int | None:
        """The keep budget in force for a run (:meth:`budget`), ``None`` for a strict checkpoint."""
        return self.budget(reason=reason, keep_recent_tokens=keep_recent_tokens).keep_recent_tokens

    def plan(
        self,
        branch: list[TranscriptEntry],
        *,
        reason: CompactionReason = "manual",
        keep_recent_tokens: int | None = None,
    ) -> CompactionPreparation | None:
        """:func:`prepare_compaction` with :meth:`keep_budget` and :attr:`token_counter`."""
        budget = self.keep_budget(reason=reason, keep_recent_tokens=keep_recent_tokens)
        return prepare_compaction(branch, keep_recent_tokens=budget, token_counter=self._tokens)

    async def _agents_md(self) -> str | None:
        """The workspace's AGENTS.md text, or ``None`` (no workspace, missing or unreadable file)."""
        if self.workspace_dir is None:
            return None
        path = self.workspace_dir / "AGENTS.md"

        def read() -> str | None:
            try:
                return path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                return None

        return await anyio.to_thread.run_sync(read)

    async def _notify(self, event: HookEvent[None], errors: list[HookError]) -> None:
        """Send a notification; its handlers' failures are added to ``errors`` (never raised)."""
        if self.hooks is not None:
            errors.extend(await self.hooks.notify(event))

    async def _rotate(self, transcript: TranscriptManager) -> SuccessorTranscript | None:
        """The successor transcript when ``truncate_after_compaction`` is on (inside the landing)."""
        if not self.settings.truncate_after_compaction:
            return None
        return await rotate_after_compaction(transcript, clock=self._clock)

    @traced("compaction")
    async def compact(
        self,
        transcript: TranscriptManager,
        *,
        reason: CompactionReason = "manual",
        keep_recent_tokens: int | None = None,
        custom_instructions: str | None = None,
        abort: anyio.Event | None = None,
        session_key: str | None = None,
        will_retry: bool = False,
    ) -> CompactionResult:
        """
        Compact the transcript's current branch.

        Args:
            transcript: The transcript; the entry is appended at its leaf.
            reason: ``"manual" | "threshold" | "overflow"`` (pi's ``compaction_start`` reason).
            keep_recent_tokens: Keep budget; ``None`` = see :meth:`keep_budget`.
            custom_instructions: Extra focus for the summary (``/compact <text>``).
            abort: Set to abort; the run raises and writes nothing.
            session_key: Carried by the ``compaction_start``/``compaction_end`` events.
            will_retry: Carried by ``compaction_end`` (the caller retries the model call after it).

        Returns:
            The :class:`CompactionResult` (``status`` says whether anything was written).

        Raises:
            CompactionCancelled: A ``session_before_compact`` handler cancelled, or the summariser
                was aborted. Nothing was written.
            Exception: Whatever a ``session_before_compact`` handler raised (unless the registry has
                ``on_error``); nothing was written. Notification handlers never raise here: their
                failures are on ``hook_errors``.
            TimeoutError: The run took longer than ``settings.timeout_seconds``.
            CompactionError: No summary could be made (not raised in practice: the extractive
                summariser always answers).
            OSError: Writing the entry failed.
        """
        errors: list[HookError] = []
        planned_tip = transcript.leaf_id  # what the caller decided on
        await self._notify(CompactionStartEvent(reason=reason, session_key=session_key), errors)
        try:
            result = await self._single_flight(
                transcript,
                planned_tip,
                abort=abort,
                run=lambda: self._compact(
                    transcript,
                    reason=reason,
                    keep_recent_tokens=keep_recent_tokens,
                    custom_instructions=custom_instructions,
                    abort=abort,
                    hook_errors=errors,
                ),
            )
        except CompactionCancelled as err:
            end = CompactionEndEvent(
                reason=reason,
                session_key=session_key,
                will_retry=will_retry,
                aborted=True,
                error_message=str(err),
            )
            await self._notify(end, errors)
            raise
        except Exception as err:
            end = CompactionEndEvent(
                reason=reason,
                session_key=session_key,
                will_retry=will_retry,
                error_message=str(err) or type(err).__name__,
            )
            await self._notify(end, errors)
            raise
        if errors:
            result = attrs.evolve(result, hook_errors=tuple(errors))
        _log_result(result, transcript, reason=reason, session_key=session_key)
        end = CompactionEndEvent(reason=reason, session_key=session_key, will_retry=will_retry, result=result)
        settled = len(errors)
        await self._notify(end, errors)
        if len(errors) > settled:
            result = attrs.evolve(result, hook_errors=tuple(errors))
        return result

    async def _single_flight(
        self,
        transcript: TranscriptManager,
        planned_tip: str | None,
        *,
        abort: anyio.Event | None,
        run: Callable[[], Awaitable[CompactionResult]],
    ) -> CompactionResult:
        """
        Run ``run`` as the transcript's only compaction in flight, or share the one in flight (D10).

        Another task of this event loop compacting the same file: wait for it and share its result
        (``"joined"`` when it wrote an entry). Another process holding the claim: wait until it is gone,
        then pick up the file. The owner first picks up other writers' lines: a compaction that landed
        on the branch after ``planned_tip`` (the leaf the caller decided on) is this run's result too.
        """
        while True:
            async with flight(
                transcript, stale_after_s=2 * self.settings.timeout_seconds, abort=abort
            ) as entered:
                if entered.role == "bypass":
                    return await run()
                if entered.role == "shared":
                    shared: CompactionResult = entered.shared
                    if shared.status != "compacted":
                        return attrs.evolve(shared, hook_errors=())
                    await transcript.refresh()  # another manager of this file wrote it
                    return attrs.evolve(shared, status="joined", hook_errors=())
                if entered.role == "owner":
                    assert entered.flight is not None
                    landed = await _arrived_compaction(transcript, planned_tip)
                    result = await run() if landed is None else _joined(landed)
                    entered.flight.publish(result)
                    return result
            if abort is not None and abort.is_set():
                raise CompactionCancelled("aborted")

    async def _compact(
        self,
        transcript: TranscriptManager,
        *,
        reason: CompactionReason,
        keep_recent_tokens: int | None,
        custom_instructions: str | None,
        abort: anyio.Event | None,
        hook_errors: list[HookError],
    ) -> CompactionResult:
        branch = transcript.get_branch()
        if not branch:
            return CompactionResult(status="empty")
        if entry_kind(branch[-1]) == "compaction":
            return CompactionResult(status="already_compacted")
        plan = self.plan(branch, reason=reason, keep_recent_tokens=keep_recent_tokens)
        if plan is None:
            return CompactionResult(status="empty")
        base = CompactionResult(
            status="nothing_to_summarize", preparation=plan, tokens_before=plan.tokens_before
        )
        if plan.pending_tool_call_ids:
            return attrs.evolve(base, status="pending_tool_results")
        if plan.nothing_to_summarize:
            return base
        instructions = custom_instructions or self.settings.custom_instructions

        hook_result = None
        if self.hooks is not None:
            hook_result = await self.hooks.emit_last(
                SessionBeforeCompactEvent(
                    preparation=plan, branch_entries=branch, custom_instructions=instructions, signal=abort
                )
            )
        override: CompactionHookOverride | None = None
        if isinstance(hook_result, CompactHookResult):
            if hook_result.cancel:
                raise CompactionCancelled(hook_result.reason)
            override = hook_result.compaction
        elif isinstance(hook_result, CompactionHookOverride):
            override = hook_result
        if override is not None and override.summary.strip():
            async with landing(transcript, branch) as check:
                if check.superseded:
                    return attrs.evolve(base, status="superseded", provider="hook")
                _, landed = await land_compaction(
                    transcript,
                    branch,
                    summary=override.summary,
                    first_kept_entry_id=override.first_kept_entry_id,
                    tokens_before=override.tokens_before,
                    details=UNSET if override.details is None else override.details,
                    from_hook=True,
                )
                if landed is None:
                    return attrs.evolve(base, status="superseded", provider="hook")
                entry = landed
                successor = await self._rotate(transcript)
            await self._notify(SessionCompactEvent(compaction_entry=entry, from_hook=True), hook_errors)
            return attrs.evolve(
                base,
                status="compacted",
                entry=entry,
                summary=override.summary,
                provider="hook",
                successor=successor,
            )

        budget = self.budget(reason=reason, keep_recent_tokens=keep_recent_tokens)
        with anyio.fail_after(self.settings.timeout_seconds):
            summary, provider, fallbacks = await self._summarize(
                plan, instructions=instructions, abort=abort, budget=budget
            )
        if abort is not None and abort.is_set():
            raise CompactionCancelled("aborted")

        count = self._tokens.count_message
        replaced = sum(count(m) for m in (*plan.messages_to_summarize, *plan.turn_prefix_messages))
        replaced += math.ceil(len(plan.previous_summary or "") / 4)
        if math.ceil(len(summary) / 4) >= replaced and not plan.strict_checkpoint and replaced > 0:
            return attrs.evolve(base, status="ineffective", provider=provider, fallbacks=fallbacks)

        details = plan.file_ops.details()
        async with landing(transcript, branch) as check:
            if check.superseded:
                return attrs.evolve(base, status="superseded", provider=provider, fallbacks=fallbacks)
            # None: a strict checkpoint (firstKeptEntryId = its own id, OpenClaw spec §5.8; pi §9 6b),
            # which keeps only what other writers appended during the summarisation
            _, landed = await land_compaction(
                transcript,
                branch,
                summary=summary,
                first_kept_entry_id=plan.first_kept_entry_id,
                tokens_before=plan.tokens_before,
                details=details,
                from_hook=False,
            )
            if landed is None:
                return attrs.evolve(base, status="superseded", provider=provider, fallbacks=fallbacks)
            entry = landed
            successor = await self._rotate(transcript)
        await self._notify(SessionCompactEvent(compaction_entry=entry, from_hook=False), hook_errors)
        return attrs.evolve(
            base,
            status="compacted",
            entry=entry,
            summary=summary,
            provider=provider,
            fallbacks=fallbacks,
            successor=successor,
        )

    async def _summarize(
        self,
        plan: CompactionPreparation,
        *,
        instructions: str | None,
        abort: anyio.Event | None,
        budget: CompactionBudget,
    ) -> tuple[str, str, tuple[str, ...]]:
        """Run the D3 chain; returns ``(summary, provider, fallbacks)`` (at most D9's chars)."""
        settings = self.settings
        max_chars = budget.summary_max_chars
        safeguard = settings.effective_mode == "safeguard"
        fallbacks: list[str] = []
        agents_md = await self._agents_md() if safeguard and settings.post_compaction_sections else None

        def suffix_of(split_turn: str = "") -> str:
            return safeguard_suffix(plan, settings, split_turn_summary=split_turn, agents_md=agents_md)

        messages = (*plan.messages_to_summarize, *plan.turn_prefix_messages)
        read_files, modified_files = plan.file_ops.read_files, plan.file_ops.modified_files

        if safeguard and not _real_conversation(messages):
            body = structured_fallback_summary(plan.previous_summary)
            return cap_preserving_suffix(body, suffix_of(), max_chars=max_chars), "fallback", ()

        structured = build_structured_instructions(
            instructions, policy=settings.identifier_policy, identifier_text=settings.identifier_instructions
        )
        if safeguard and settings.provider:
            provider = self.providers.get(settings.provider)
            if provider is None:
                fallbacks.append(f"provider {settings.provider!r} is not registered")
                _log.warning(
                    "compaction provider %r is not registered: falling back to the built-in summariser",
                    settings.provider,
                    extra={"provider": settings.provider, "fallback": "unregistered"},
                )
            else:
                request = SummaryRequest(
                    messages=messages,
                    previous_summary=plan.previous_summary,
                    custom_instructions=structured,
                    identifier_policy=settings.identifier_policy,
                    identifier_instructions=settings.identifier_instructions,
                    abort=abort,
                )
                try:
                    text = await provider.summarize(request)
                except TimeoutError:
                    raise
                except Exception as err:
                    if abort is not None and abort.is_set():
                        raise
                    fallbacks.append(f"provider {provider.id!r} failed: {err}")
                    _log.warning(
                        "compaction provider %r failed (%s): falling back to the built-in summariser",
                        provider.id,
                        _describe(err),
                        extra={"provider": provider.id, "fallback": "failed", "error": _describe(err)},
                    )
                else:
                    if text.strip():
                        suffix = suffix_of()
                        capped = cap_preserving_suffix(text, suffix, max_chars=max_chars)
                        return capped, provider.id, tuple(fallbacks)
                    fallbacks.append(f"provider {provider.id!r} returned an empty summary")
                    _log.warning(
                        "compaction provider %r returned an empty summary: falling back to the built-in "
                        "summariser",
                        provider.id,
                        extra={"provider": provider.id, "fallback": "empty"},
                    )

        if self.model_client is not None:
            llm = LlmSummarizer(
                self.model_client,
                settings=settings,
                context_window=self.context_window,
                clock=self._clock,
                budget=budget,
                token_counter=self._tokens,
            )
            try:
                if safeguard:
                    guarded = await llm.safeguard_summary(
                        messages_to_summarize=plan.messages_to_summarize,
                        turn_prefix_messages=plan.turn_prefix_messages,
                        is_split_turn=plan.is_split_turn,
                        previous_summary=plan.previous_summary,
                        structured_instructions=structured,
                        tokens_before=plan.tokens_before,
                        abort=abort,
                    )
                    suffix = suffix_of(guarded.split_turn)
                    capped = cap_preserving_suffix(guarded.history, suffix, max_chars=max_chars)
                    return capped, "llm", tuple(fallbacks)
                text = await llm.default_summary(
                    messages_to_summarize=plan.messages_to_summarize,
                    turn_prefix_messages=plan.turn_prefix_messages,
                    is_split_turn=plan.is_split_turn,
                    previous_summary=plan.previous_summary,
                    custom_instructions=instructions,
                    abort=abort,
                )
                return text + format_file_operations(read_files, modified_files), "llm", tuple(fallbacks)
            except (ModelClientError, CompactionError) as err:
                if isinstance(err, CompactionCancelled):
                    raise
                fallbacks.append(f"llm summarizer failed: {err}")
                _log.warning(
                    "LLM summariser failed (%s): writing an extractive summary",
                    _describe(err),
                    extra={"provider": "llm", "fallback": "failed", "error": _describe(err)},
                )
        else:
            fallbacks.append("no model client: extractive summary")

        suffix = suffix_of() if safeguard else ""
        room = min(MAX_COMPACTION_SUMMARY_CHARS, max_chars) - len(suffix) - 64 if safeguard else 12_000
        body = extractive_summary(
            messages,
            previous_summary=plan.previous_summary,
            read_files=read_files,
            modified_files=modified_files,
            max_chars=min(max(2000, room), max_chars),
        )
        if safeguard:
            return cap_preserving_suffix(body, suffix, max_chars=max_chars), "extractive", tuple(fallbacks)
        return body + format_file_operations(read_files, modified_files), "extractive", tuple(fallbacks)
