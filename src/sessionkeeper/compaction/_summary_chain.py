"""
The summariser chain of DESIGN D3: configured provider -> built-in LLM summariser -> extractive summary.

Safeguard mode (OpenClaw spec §5.6) adds the structured fallback when there is no real conversation and
the preserved suffix (recent turns, tool failures, workspace rules) to every summary.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio

from sessionkeeper._clock import Clock
from sessionkeeper._model_client import ModelClient
from sessionkeeper._tokens import TokenCounter
from sessionkeeper.compaction._budget import CompactionBudget
from sessionkeeper.compaction._cut import message_role
from sessionkeeper.compaction._extractive import extractive_summary, message_text
from sessionkeeper.compaction._llm import LlmSummarizer
from sessionkeeper.compaction._prepare import CompactionPreparation
from sessionkeeper.compaction._prompts import build_structured_instructions, structured_fallback_summary
from sessionkeeper.compaction._providers import CompactionProviderRegistry, SummaryRequest
from sessionkeeper.compaction._result import describe_error
from sessionkeeper.compaction._settings import CompactionSettings
from sessionkeeper.compaction._suffix import (
    MAX_COMPACTION_SUMMARY_CHARS,
    cap_preserving_suffix,
    format_file_operations,
    safeguard_suffix,
)
from sessionkeeper.exceptions import CompactionCancelled, CompactionError, ModelClientError


__all__ = ("summarize_with_chain",)

_log = logging.getLogger("sessionkeeper.compaction")

_SILENT_TEXTS = frozenset({"NO_REPLY", "HEARTBEAT_OK"})


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


async def summarize_with_chain(
    plan: CompactionPreparation,
    *,
    settings: CompactionSettings,
    providers: CompactionProviderRegistry,
    model_client: ModelClient | None,
    context_window: int,
    clock: Clock,
    token_counter: TokenCounter,
    budget: CompactionBudget,
    instructions: str | None,
    agents_md: str | None,
    abort: anyio.Event | None,
) -> tuple[str, str, tuple[str, ...]]:
    """
    Run the D3 chain on ``plan``; returns ``(summary, provider, fallbacks)`` (at most D9's chars).

    Args:
        plan: What to summarise.
        settings: Mode, provider id, identifier policy and the safeguard's sections.
        providers: The registered providers (``settings.provider`` picks one, safeguard mode only).
        model_client: The host's model for the LLM summariser; ``None`` skips it.
        context_window: The summarising model's window, in tokens.
        clock: Waits between retries.
        token_counter: Sizes messages for the LLM summariser.
        budget: The run's window-derived budgets (DESIGN D9).
        instructions: The run's custom instructions.
        agents_md: The workspace's ``AGENTS.md`` text for ``<workspace-critical-rules>``, or ``None``.
        abort: Set to abort; provider failures then propagate instead of falling back.
    """
    max_chars = budget.summary_max_chars
    safeguard = settings.effective_mode == "safeguard"
    fallbacks: list[str] = []

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
        provider = providers.get(settings.provider)
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
                    describe_error(err),
                    extra={"provider": provider.id, "fallback": "failed", "error": describe_error(err)},
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

    if model_client is not None:
        llm = LlmSummarizer(
            model_client,
            settings=settings,
            context_window=context_window,
            clock=clock,
            budget=budget,
            token_counter=token_counter,
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
                describe_error(err),
                extra={"provider": "llm", "fallback": "failed", "error": describe_error(err)},
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
