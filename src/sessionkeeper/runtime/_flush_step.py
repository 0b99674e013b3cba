"""
The runtime's memory-flush step (OpenClaw §6, B13, B14): decide with :class:`MemoryFlushPolicy`, run the
silent flush turn, record its success or failure on the store entry, and notify the hooks.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Literal, TypeAlias

import anyio

from sessionkeeper._fs import ensure_dir
from sessionkeeper._model_client import ModelRequest
from sessionkeeper._silent import is_silent_reply_payload, strip_silent_token
from sessionkeeper._tracing import traced
from sessionkeeper.exceptions import UnsafePathError
from sessionkeeper.hooks import HookError, MemoryFlushEndEvent, MemoryFlushStartEvent
from sessionkeeper.runtime._active_bytes import active_transcript_bytes
from sessionkeeper.runtime._memory_flush import MemoryFlushDecision, MemoryFlushPlan, MemoryFlushPolicy
from sessionkeeper.runtime._parts import RuntimeParts
from sessionkeeper.runtime._runtime_session import RuntimeSession, int_or_zero, patch_session_entry
from sessionkeeper.runtime._runtime_types import MemoryFlushOutcome, MemoryFlushRequest, MemoryFlushRunner
from sessionkeeper.transcript import TextContent, UserMessage


__all__ = ("FlushTrigger", "MemoryFlushStep")

_log = logging.getLogger("sessionkeeper.runtime")

_FLUSH_MAX_TOKENS = 4096

FlushTrigger: TypeAlias = Literal["pre_turn", "threshold", "preflight", "overflow", "timeout"]
"""What asked for the flush: a new prompt, or the compaction it precedes."""


class MemoryFlushStep:
    """
    Runs the memory flush for one runtime.

    Args:
        parts: The runtime (model, sizes, store, hooks, clock, model client, token counter).
        policy: The flush rules.
        runner: The host's flush turn; ``None``: the default turn when ``parts.model_client`` and
            ``workspace_dir`` are both given, else no flush.
        workspace_dir: Where the default turn appends its memory file.
        host_supports_flush: ``False``: no flush at all (OpenClaw's CLI-backend rule).
    """

    def __init__(
        self,
        parts: RuntimeParts,
        *,
        policy: MemoryFlushPolicy,
        runner: MemoryFlushRunner | None,
        workspace_dir: Path | None,
        host_supports_flush: bool,
    ) -> None:
        self._parts = parts
        self.policy = policy
        self.workspace_dir = workspace_dir
        uses_default = False
        if runner is None and parts.model_client is not None:
            if workspace_dir is not None:
                runner, uses_default = self._default_runner, True
            elif host_supports_flush and parts.settings.memory_flush.enabled:
                # the default flush turn's only output is the memory file: without a workspace it would
                # pay for a model call whose reply is thrown away (issue #11)
                _log.info(
                    "memory flush off: the default flush turn needs workspace_dir (or a memory_flush_runner)",
                    extra={"reason": "no_workspace_dir"},
                )
        self._runner: MemoryFlushRunner | None = runner if host_supports_flush else None
        self._uses_default = uses_default and host_supports_flush

    async def maybe_flush(
        self,
        session: RuntimeSession,
        *,
        context_tokens: int,
        trigger: FlushTrigger,
        pending_compaction: bool = False,
        is_heartbeat: bool = False,
    ) -> MemoryFlushOutcome | None:
        """
        Run the flush turn when the policy says so (``None`` when it does not run).

        Raises:
            OSError: The store write failed (a failing flush turn is recorded, not raised).
        """
        parts = self._parts
        entry = session.entry
        flush_count = entry.memory_flush_compaction_count
        decision = self.policy.decide(
            context_tokens=context_tokens,
            context_window=parts.context_window,
            compaction_count=int_or_zero(entry.compaction_count),
            memory_flush_compaction_count=flush_count if isinstance(flush_count, int) else None,
            active_transcript_bytes=active_transcript_bytes(session.transcript),
            max_output_tokens=parts.model.max_output_tokens,
            pending_compaction=pending_compaction,
            in_flush_turn=session.in_flush_turn,
            host_supports_flush=self._runner is not None,
            is_heartbeat=is_heartbeat,
        )
        if not decision.run or self._runner is None:
            return None
        return await self._run(
            session, self._runner, decision, trigger=trigger, pending_compaction=pending_compaction
        )

    @traced("memory_flush")
    async def _run(
        self,
        session: RuntimeSession,
        runner: MemoryFlushRunner,
        decision: MemoryFlushDecision,
        *,
        trigger: FlushTrigger,
        pending_compaction: bool,
    ) -> MemoryFlushOutcome:
        parts = self._parts
        start_count = int_or_zero(session.entry.compaction_count)
        plan = self.policy.plan(now_ms=parts.clock.now_ms(), current_provider=parts.model.provider)
        request = MemoryFlushRequest(
            session_key=session.session_key,
            session_id=session.session_id,
            plan=plan,
            messages=tuple(session.transcript.build_session_context().messages),
            decision=decision,
            trigger=trigger,
        )
        hook_errors = list(
            await parts.hooks.notify(
                MemoryFlushStartEvent(
                    session_key=session.session_key,
                    context_tokens=decision.context_tokens or 0,
                    threshold_tokens=decision.threshold,
                    forced=decision.forced,
                )
            )
        )
        session.begin_flush_turn()
        try:
            reply = await runner(request)
        except Exception as err:
            session.end_flush_turn()
            return await self._failed(
                session,
                decision,
                err,
                trigger=trigger,
                pending_compaction=pending_compaction,
                hook_errors=hook_errors,
            )
        session.end_flush_turn()
        record = self.policy.record_success(
            compaction_count_at_start=start_count, now_ms=parts.clock.now_ms()
        )
        await patch_session_entry(parts.store, session, record.to_entry_patch())
        hook_errors += await parts.hooks.notify(MemoryFlushEndEvent(session_key=session.session_key, ok=True))
        return self._succeeded(session, decision, plan, reply, trigger=trigger, hook_errors=hook_errors)

    async def _failed(
        self,
        session: RuntimeSession,
        decision: MemoryFlushDecision,
        err: Exception,
        *,
        trigger: FlushTrigger,
        pending_compaction: bool,
        hook_errors: list[HookError],
    ) -> MemoryFlushOutcome:
        parts = self._parts
        failures = session.entry.memory_flush_failure_count
        record = self.policy.record_failure(
            error=err,
            previous_failure_count=failures if isinstance(failures, int) else None,
            compaction_count=int_or_zero(session.entry.compaction_count),
            now_ms=parts.clock.now_ms(),
            pending_compaction=pending_compaction,
        )
        await patch_session_entry(parts.store, session, record.to_entry_patch())
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
        hook_errors += await parts.hooks.notify(
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

    def _succeeded(
        self,
        session: RuntimeSession,
        decision: MemoryFlushDecision,
        plan: MemoryFlushPlan,
        reply: str | None,
        *,
        trigger: FlushTrigger,
        hook_errors: list[HookError],
    ) -> MemoryFlushOutcome:
        silent = reply is None or is_silent_reply_payload(reply) or not reply.strip()
        memory_file = None
        if not silent and self.workspace_dir is not None and self._uses_default:
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

    async def _default_runner(self, request: MemoryFlushRequest) -> str | None:
        """One model call with the flush prompts; a non-silent reply is appended to the memory file."""
        parts = self._parts
        client = parts.model_client
        assert client is not None
        count = parts.token_counter.count_message
        plan = request.plan
        prompt = UserMessage(content=[TextContent(text=plan.prompt)], timestamp=parts.clock.now_ms())
        budget = parts.compaction_threshold - count(prompt)
        messages = list(request.messages)
        total = sum(count(m) for m in messages)
        while messages and total > budget:  # cut to fit a flush request, oldest first
            total -= count(messages.pop(0))
        model = None
        if plan.model is not None:
            model = f"{plan.model.provider}/{plan.model.model}" if plan.model.provider else plan.model.model
        response = await client.complete(
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
