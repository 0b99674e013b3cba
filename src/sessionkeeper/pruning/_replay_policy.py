"""
Replay policies per provider family (OpenClaw spec §9 "Policy defaults", ``transcript-policy.ts``).

A :class:`ReplayPolicy` says which transcript-hygiene steps run before history is replayed to a
model. :func:`resolve_replay_policy` gives OpenClaw's fallback for providers without a plugin
policy: Google (``google-generative-ai``, ``google-gemini-cli``), Anthropic (``anthropic-messages``,
``bedrock-converse-stream``), OpenAI chat completions (``openai-completions``) and the OpenAI
Responses family (``openai-responses``, ``openai-chatgpt-responses``, ``azure-openai-responses``).
Any other API gets the defaults (images-only sanitising, pairing repair, nothing else).
"""

from __future__ import annotations

import re
from typing import Final, Literal

import attrs


__all__ = (
    "ReplayPolicy",
    "SanitizeMode",
    "ToolCallIdMode",
    "fallback_replay_policy",
    "is_anthropic_api",
    "is_google_api",
    "is_openai_responses_api",
    "resolve_replay_policy",
)

SanitizeMode = Literal["images-only", "full"]
ToolCallIdMode = Literal["strict", "strict9"]

_ANTHROPIC_APIS: Final = frozenset(("anthropic-messages", "bedrock-converse-stream"))
_GOOGLE_APIS: Final = frozenset(("google-generative-ai", "google-gemini-cli"))
_RESPONSES_APIS: Final = frozenset(("openai-responses", "openai-chatgpt-responses", "azure-openai-responses"))
_CLAUDE_ID = re.compile(r"(?:^|[./:_-])claude(?:$|[./:_-])")
_REASONING_REPLAY_MODELS: Final = frozenset(
    (
        "kimi-for-coding",
        "kimi-k2.5",
        "kimi-k2.6",
        "kimi-k2.7-code",
        "kimi-k2-thinking",
        "kimi-k2-thinking-turbo",
        "mimo-v2-pro",
        "mimo-v2-omni",
        "mimo-v2.5",
        "mimo-v2.5-pro",
        "mimo-v2.6-pro",
    )
)


def is_anthropic_api(api: str | None) -> bool:
    """``anthropic-messages`` or ``bedrock-converse-stream``."""
    return api in _ANTHROPIC_APIS


def is_google_api(api: str | None) -> bool:
    """``google-generative-ai`` or ``google-gemini-cli``."""
    return api in _GOOGLE_APIS


def is_openai_responses_api(api: str | None) -> bool:
    """The OpenAI Responses family (``openai-responses``, ``openai-chatgpt-responses``, ``azure-...``)."""
    return api in _RESPONSES_APIS


@attrs.frozen(kw_only=True)
class ReplayPolicy:
    """
    Which hygiene steps apply when replaying history to one provider (OpenClaw ``TranscriptPolicy``).

    Defaults are OpenClaw's ``DEFAULT_TRANSCRIPT_POLICY``.

    Attributes:
        sanitize_mode: ``"images-only"`` or ``"full"``.
        sanitize_tool_call_ids: Rewrite tool-call ids (with ``tool_call_id_mode``).
        tool_call_id_mode: ``"strict"`` (alphanumeric) or ``"strict9"`` (9 alphanumerics, Mistral).
        repair_tool_use_result_pairing: Move, de-duplicate and synthesise tool results (default on).
        preserve_signatures: Keep (valid) thinking signatures for replay (Anthropic).
        preserve_native_anthropic_tool_use_ids: Keep ``toolu_...`` ids as they are when sanitising.
        sanitize_thought_signatures: Remove tool-call thought signatures that are not base64 (Google).
        drop_thinking_blocks: Remove thinking from all but the latest assistant turn.
        drop_reasoning_from_history: Remove reasoning from past turns (chat-completions proxies).
        apply_google_turn_ordering: Prepend a ``(session bootstrap)`` user turn before a leading assistant.
        validate_gemini_turns: Merge consecutive assistant turns.
        validate_anthropic_turns: Merge consecutive assistants, strip dangling tool calls, merge users.
        allow_synthetic_tool_results: The provider accepts synthesised tool results.
    """

    sanitize_mode: SanitizeMode = "images-only"
    sanitize_tool_call_ids: bool = False
    tool_call_id_mode: ToolCallIdMode | None = None
    repair_tool_use_result_pairing: bool = True
    preserve_signatures: bool = False
    preserve_native_anthropic_tool_use_ids: bool = False
    sanitize_thought_signatures: bool = False
    drop_thinking_blocks: bool = False
    drop_reasoning_from_history: bool = False
    apply_google_turn_ordering: bool = False
    validate_gemini_turns: bool = False
    validate_anthropic_turns: bool = False
    allow_synthetic_tool_results: bool = False


def _preserves_thinking(model_id: str) -> bool:
    """OpenClaw ``shouldPreserveThinkingBlocks``: Claude 4+ keeps its thinking on replay."""
    if "claude" not in model_id:
        return False
    if any(tag in model_id for tag in ("fable-5", "opus-4", "sonnet-4", "haiku-4")):
        return True
    return bool(re.search(r"claude-[5-9]", model_id) or re.search(r"claude-\d{2,}", model_id))


def _replays_reasoning_content(model_id: str) -> bool:
    parts = [part for part in model_id.split("/") if part]
    final = parts[-1] if parts else model_id
    candidates = [final]
    colon = [part for part in final.split(":") if part]
    if len(colon) > 1:
        candidates += [colon[0], colon[-1]]
    return any(candidate in _REASONING_REPLAY_MODELS for candidate in candidates)


def fallback_replay_policy(
    *,
    api: str | None,
    model_id: str | None = None,
    model_reasoning: bool = False,
    supports_reasoning_effort: bool | None = None,
) -> ReplayPolicy:
    """
    OpenClaw's policy for providers without a plugin policy (``buildUnownedProviderTransportReplayFallback``).

    * Google APIs: full sanitise, ``strict`` ids, non-base64 thought signatures removed,
      assistant-first ordering fix, Gemini turn validation, synthetic results allowed.
    * Anthropic APIs: full sanitise, ``strict`` ids, signatures preserved, thinking dropped for
      Claude models before Claude 4 (or when the model does not support reasoning effort), Anthropic
      turn validation, synthetic results allowed.
    * ``openai-completions``: ``strict`` ids, reasoning dropped from history (unless the model
      replays reasoning: ``model_reasoning`` or a Kimi/MiMo reasoning model), ordering fix, Gemini and
      Anthropic validation.
    * OpenAI Responses family: ``strict`` ids, synthetic results allowed, Anthropic validation only
      for Claude model ids.
    * Anything else: the defaults.
    """
    model = (model_id or "").strip().lower()
    google = is_google_api(api)
    anthropic = is_anthropic_api(api)
    completions = api == "openai-completions"
    responses = is_openai_responses_api(api)
    if not (google or anthropic or completions or responses):
        return ReplayPolicy()
    drop_thinking = False
    if anthropic and "claude" in model:
        drop_thinking = not _preserves_thinking(model)
    if anthropic and supports_reasoning_effort is False:
        drop_thinking = True
    replays_reasoning = model_reasoning or _replays_reasoning_content(model)
    return ReplayPolicy(
        sanitize_mode="full" if google or anthropic else "images-only",
        sanitize_tool_call_ids=True,
        tool_call_id_mode="strict",
        preserve_signatures=anthropic,
        sanitize_thought_signatures=google,
        drop_thinking_blocks=drop_thinking,
        drop_reasoning_from_history=completions and not replays_reasoning,
        apply_google_turn_ordering=google or completions,
        validate_gemini_turns=google or completions,
        validate_anthropic_turns=anthropic or completions or (responses and bool(_CLAUDE_ID.search(model))),
        allow_synthetic_tool_results=google or anthropic or responses,
    )


def _bundled_policy(
    provider: str, api: str | None, model: str, fallback: ReplayPolicy
) -> ReplayPolicy | None:
    """
    The replay policies of the provider plugins bundled with OpenClaw 2026.7.35, as data.

    Read off OpenClaw's own ``resolveTranscriptPolicy`` for each provider and API (fixture
    ``tests/data/oracle/replay-policies.json``); ``None`` means the provider uses the fallback.
    """
    completions = api == "openai-completions"
    responses = is_openai_responses_api(api)
    if provider == "anthropic" and is_anthropic_api(api):
        return attrs.evolve(fallback, preserve_native_anthropic_tool_use_ids=True)
    if provider == "openai" and responses:
        return ReplayPolicy(allow_synthetic_tool_results=True)
    if provider == "openai" and completions:
        return ReplayPolicy(sanitize_tool_call_ids=True, tool_call_id_mode="strict")
    if provider == "openrouter" and (completions or is_anthropic_api(api)):
        if "mistral" in model:
            return ReplayPolicy(sanitize_tool_call_ids=True, tool_call_id_mode="strict9")
        return ReplayPolicy(sanitize_thought_signatures="gemini" in model)
    if provider == "mistral":
        return ReplayPolicy(sanitize_tool_call_ids=True, tool_call_id_mode="strict9")
    if provider in ("xai", "ollama") and completions:
        return attrs.evolve(fallback, drop_reasoning_from_history=True)
    if provider == "xai" and responses:
        return ReplayPolicy(
            allow_synthetic_tool_results=True, sanitize_tool_call_ids=True, tool_call_id_mode="strict"
        )
    if provider == "github-copilot":
        return ReplayPolicy(drop_thinking_blocks="claude" in model)
    return None


def resolve_replay_policy(
    *,
    api: str | None,
    provider: str | None = None,
    model_id: str | None = None,
    model_reasoning: bool = False,
    supports_reasoning_effort: bool | None = None,
    tool_call_id_mode: ToolCallIdMode | None = None,
    bundled_plugins: bool = True,
) -> ReplayPolicy:
    """
    Resolve the replay policy for a model (OpenClaw ``resolveTranscriptPolicy``).

    Providers whose OpenClaw plugin brings its own policy get it (``anthropic`` keeps native
    ``toolu_`` ids; ``openai`` Responses replays ids unchanged; ``mistral`` uses ``strict9`` ids;
    ``openrouter``, ``xai``, ``ollama`` and ``github-copilot`` have their own); every other provider
    gets :func:`fallback_replay_policy` for its API.

    Args:
        api: The model's wire API.
        provider: Provider id (case-insensitive).
        model_id: Model id (case-insensitive).
        model_reasoning: The model is configured with ``reasoning: true``.
        supports_reasoning_effort: ``False`` when the model's compat says it does not support
            reasoning effort (Anthropic APIs then drop thinking).
        tool_call_id_mode: Force id sanitising with this mode (``"strict"`` or ``"strict9"``).
        bundled_plugins: ``False`` ignores the bundled provider policies (fallback only).
    """
    model = (model_id or "").strip().lower()
    fallback = fallback_replay_policy(
        api=api,
        model_id=model_id,
        model_reasoning=model_reasoning,
        supports_reasoning_effort=supports_reasoning_effort,
    )
    name = (provider or "").strip().lower()
    policy = (_bundled_policy(name, api, model, fallback) if bundled_plugins else None) or fallback
    if tool_call_id_mode is not None:
        policy = attrs.evolve(policy, sanitize_tool_call_ids=True, tool_call_id_mode=tool_call_id_mode)
    return policy
