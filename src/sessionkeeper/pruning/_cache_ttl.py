"""
The prompt-cache TTL clock of context pruning (OpenClaw spec §7 "TTL clock", ``cache-ttl.ts``).

After each clean model call on a cache-TTL-eligible provider, OpenClaw appends a ``custom`` entry
``{"customType": "openclaw.cache-ttl", "data": {"timestamp", "provider", "modelId"}}`` to the
transcript. The newest marker for the same provider and model is the last time the prompt cache was
written; pruning is allowed only once ``ttl`` has passed since then. Because the marker lives in the
transcript, a restart keeps the clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Final

from sessionkeeper.records import CustomEntry, TranscriptEntry, UnknownEntry, iso_from_ms


__all__ = (
    "CACHE_TTL_CUSTOM_TYPE",
    "build_cache_ttl_entry",
    "cache_ttl_marker_data",
    "is_cache_ttl_eligible_provider",
    "is_cache_ttl_expired",
    "read_last_cache_touch",
)

CACHE_TTL_CUSTOM_TYPE: Final = "openclaw.cache-ttl"
"""``customType`` of the cache-touch marker entry."""

_ANTHROPIC_PROVIDERS: Final = frozenset(("anthropic", "anthropic-vertex"))


def _norm(value: object) -> str:
    return value.strip().lower() if isinstance(value, str) else ""


def _is_anthropic_bedrock_model(model_id: str) -> bool:
    if "anthropic.claude" in model_id or "anthropic/claude" in model_id:
        return True
    if model_id.startswith(("arn:aws:bedrock:", "arn:aws-cn:bedrock:", "arn:aws-us-gov:bedrock:")):
        marker = ":application-inference-profile/"
        if marker in model_id:
            return "claude" in model_id.split(marker, 1)[1]
    return False


def is_cache_ttl_eligible_provider(provider: str | None, model_id: str | None, api: str | None) -> bool:
    """
    Whether a provider/model has a prompt cache that expires (OpenClaw ``isCacheTtlEligibleProvider``).

    True for the Anthropic family (providers ``anthropic`` and ``anthropic-vertex``, Claude models on
    ``amazon-bedrock``, any provider speaking the ``anthropic-messages`` API), for ``anthropic/...``
    models on ``kilocode``, and for Gemini 2.5 / 3 models on the ``google-generative-ai`` API.
    Provider plugins may decide otherwise in OpenClaw; here the host passes its own predicate to
    :class:`~sessionkeeper.pruning.Pruner` instead.
    """
    name = _norm(provider)
    model = _norm(model_id)
    if name in _ANTHROPIC_PROVIDERS:
        return True
    if name == "amazon-bedrock":
        if _is_anthropic_bedrock_model(model):
            return True
    elif api == "anthropic-messages":
        return True
    if name == "kilocode" and model.startswith("anthropic/"):
        return True
    return api == "google-generative-ai" and model.startswith(("gemini-2.5", "gemini-3"))


def _marker_matches(data: Any, provider: str | None, model_id: str | None) -> bool:
    expected_provider = _norm(provider)
    if expected_provider and (not isinstance(data, dict) or _norm(data.get("provider")) != expected_provider):
        return False
    expected_model = _norm(model_id)
    return not (
        expected_model and (not isinstance(data, dict) or _norm(data.get("modelId")) != expected_model)
    )


def read_last_cache_touch(
    entries: Iterable[TranscriptEntry] | Sequence[TranscriptEntry],
    *,
    provider: str | None = None,
    model_id: str | None = None,
) -> int | None:
    """
    Return the timestamp of the newest ``openclaw.cache-ttl`` marker (OpenClaw ``readLastCacheTtlTimestamp``).

    Args:
        entries: Transcript entries in file order, oldest first (the whole file, as OpenClaw reads
            it, or the current branch).
        provider: Only markers of this provider count (case-insensitive); ``None`` accepts any.
        model_id: Only markers of this model count (case-insensitive); ``None`` accepts any.

    Returns:
        The marker's ``data.timestamp`` in ms since epoch (floored), or ``None`` when there is no
        matching marker with a finite, non-zero numeric timestamp.
    """
    ordered = entries if isinstance(entries, Sequence) else list(entries)
    for entry in reversed(ordered):
        custom_type: object
        data: Any
        if isinstance(entry, CustomEntry):
            custom_type, data = entry.custom_type, entry.data
        elif isinstance(entry, UnknownEntry) and entry.type == "custom":
            custom_type, data = entry.raw.get("customType"), entry.raw.get("data")
        else:
            continue
        if custom_type != CACHE_TTL_CUSTOM_TYPE or not _marker_matches(data, provider, model_id):
            continue
        timestamp = data.get("timestamp") if isinstance(data, dict) else None
        if isinstance(timestamp, bool) or not isinstance(timestamp, int | float):
            continue
        if timestamp and math.isfinite(timestamp):
            return math.floor(timestamp)
    return None


def is_cache_ttl_expired(last_cache_touch_at: int | None, *, ttl_ms: int, now_ms: int) -> bool:
    """
    Whether pruning may run now (OpenClaw ``contextPruningExtension`` gate).

    False when there is no cache touch (``None`` or 0), when ``ttl_ms <= 0``, or while
    ``now_ms - last_cache_touch_at < ttl_ms``; true otherwise. All values in ms.
    """
    if not last_cache_touch_at or ttl_ms <= 0:
        return False
    return now_ms - last_cache_touch_at >= ttl_ms


def cache_ttl_marker_data(*, timestamp_ms: int, provider: str | None, model_id: str | None) -> dict[str, Any]:
    """
    The ``data`` object of a cache-touch marker: ``{"timestamp", "provider", "modelId"}``.

    ``None`` values are left out, as JSON drops OpenClaw's ``undefined``.
    """
    data: dict[str, Any] = {"timestamp": timestamp_ms}
    if provider is not None:
        data["provider"] = provider
    if model_id is not None:
        data["modelId"] = model_id
    return data


def build_cache_ttl_entry(
    *,
    entry_id: str,
    parent_id: str | None,
    timestamp_ms: int,
    provider: str | None,
    model_id: str | None,
) -> CustomEntry:
    """
    Build the ``openclaw.cache-ttl`` custom entry to append after a clean model call or a prune.

    OpenClaw appends it after every attempt without compaction on an eligible provider; appending
    one after a prune too records the in-memory TTL reset, so a restart keeps it.

    Args:
        entry_id: The new entry's id (8 lowercase hex chars, unique in the file).
        parent_id: The current leaf id.
        timestamp_ms: The cache-touch time, ms since epoch (also the entry's ISO ``timestamp``).
        provider: Provider id of the model called.
        model_id: Model id.
    """
    return CustomEntry(
        custom_type=CACHE_TTL_CUSTOM_TYPE,
        data=cache_ttl_marker_data(timestamp_ms=timestamp_ms, provider=provider, model_id=model_id),
        id=entry_id,
        parent_id=parent_id,
        timestamp=iso_from_ms(timestamp_ms),
    )
