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

import math
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import attrs
from msgspec import UNSET

from sessionkeeper._clock import SYSTEM_CLOCK, Clock
from sessionkeeper._model_client import ModelClient
from sessionkeeper._tokens import EstimateTokenCounter, TokenCounter, token_memo
from sessionkeeper._tracing import traced
from sessionkeeper.compaction._budget import DEFAULT_CONTEXT_WINDOW, CompactionBudget, compaction_budget
from sessionkeeper.compaction._cut import entry_kind
from sessionkeeper.compaction._flight import flight
from sessionkeeper.compaction._landing import land_compaction, landing
from sessionkeeper.compaction._prepare import CompactionPreparation, prepare_compaction
from sessionkeeper.compaction._providers import CompactionProviderRegistry
from sessionkeeper.compaction._result import (
    CompactionResult,
    CompactionStatus,
    joined_result,
    log_result,
)
from sessionkeeper.compaction._settings import CompactionSettings
from sessionkeeper.compaction._successor import SuccessorTranscript, rotate_after_compaction
from sessionkeeper.compaction._summary_chain import summarize_with_chain
from sessionkeeper.exceptions import CompactionCancelled, ConfigError
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
from sessionkeeper.transcript import (
    CompactionEntry,
    TranscriptEntry,
    TranscriptManager,
)


__all__ = ("CompactionResult", "CompactionStatus", "Compactor", "check_provider_configured")


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
        log_result(result, transcript, reason=reason, session_key=session_key)
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
                    result = await run() if landed is None else joined_result(landed)
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
            return await self._land(
                transcript,
                branch,
                attrs.evolve(base, provider="hook"),
                summary=override.summary,
                first_kept_entry_id=override.first_kept_entry_id,
                tokens_before=override.tokens_before,
                details=UNSET if override.details is None else override.details,
                from_hook=True,
                hook_errors=hook_errors,
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

        # first_kept_entry_id None: a strict checkpoint (firstKeptEntryId = its own id, OpenClaw spec
        # §5.8; pi §9 6b), which keeps only what other writers appended during the summarisation
        return await self._land(
            transcript,
            branch,
            attrs.evolve(base, provider=provider, fallbacks=fallbacks),
            summary=summary,
            first_kept_entry_id=plan.first_kept_entry_id,
            tokens_before=plan.tokens_before,
            details=plan.file_ops.details(),
            from_hook=False,
            hook_errors=hook_errors,
        )

    async def _land(
        self,
        transcript: TranscriptManager,
        branch: list[TranscriptEntry],
        tried: CompactionResult,
        *,
        summary: str,
        first_kept_entry_id: str | None,
        tokens_before: int,
        details: Any,
        from_hook: bool,
        hook_errors: list[HookError],
    ) -> CompactionResult:
        """
        Write the entry unless the branch moved on (``"superseded"``), rotate, tell the hooks.

        ``tried`` is the run's result so far (plan, provider, fallbacks); the returned one adds the
        status, and for ``"compacted"`` the entry, summary and successor.
        """
        async with landing(transcript, branch) as check:
            if check.superseded:
                return attrs.evolve(tried, status="superseded")
            _, landed = await land_compaction(
                transcript,
                branch,
                summary=summary,
                first_kept_entry_id=first_kept_entry_id,
                tokens_before=tokens_before,
                details=details,
                from_hook=from_hook,
            )
            if landed is None:
                return attrs.evolve(tried, status="superseded")
            successor = await self._rotate(transcript)
        await self._notify(SessionCompactEvent(compaction_entry=landed, from_hook=from_hook), hook_errors)
        return attrs.evolve(tried, status="compacted", entry=landed, summary=summary, successor=successor)

    async def _summarize(
        self,
        plan: CompactionPreparation,
        *,
        instructions: str | None,
        abort: anyio.Event | None,
        budget: CompactionBudget,
    ) -> tuple[str, str, tuple[str, ...]]:
        """Run the D3 chain (:func:`summarize_with_chain`); ``(summary, provider, fallbacks)``."""
        safeguard = self.settings.effective_mode == "safeguard"
        sections = safeguard and self.settings.post_compaction_sections
        return await summarize_with_chain(
            plan,
            settings=self.settings,
            providers=self.providers,
            model_client=self.model_client,
            context_window=self.context_window,
            clock=self._clock,
            token_counter=self._tokens,
            budget=budget,
            instructions=instructions,
            agents_md=await self._agents_md() if sections else None,
            abort=abort,
        )
