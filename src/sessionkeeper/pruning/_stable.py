"""
Stable cache-TTL pruning (deviation **D11**): what was pruned once is sent the same way afterwards.

OpenClaw prunes in memory only: once the TTL has expired it soft-trims or hard-clears old tool results,
and the next clean turn appends a new ``openclaw.cache-ttl`` marker, so the following requests fall
inside the TTL again and are sent *unpruned*. The provider's prompt cache then loses its prefix at the
first tool result that changed back, and the full results are cached again. Here every prune that
changed something is recorded in the transcript as a ``custom`` entry::

    {"type": "custom", "customType": "sessionkeeper.pruned-tool-results",
     "data": {"timestamp": ms, "provider": "anthropic", "modelId": "claude-sonnet-4-5",
              "softTrimmed": ["toolu_..."], "hardCleared": ["toolu_..."],
              "softTrim": {"maxChars": 4000, "headChars": 1500, "tailChars": 1500},
              "placeholder": "[Old tool result content cleared]"}}

and :class:`PruneLedger` re-applies every recorded decision, with the sizes recorded with it, before any
new pruning: a result once trimmed or cleared is sent with the same bytes on every later request of
the session, also after a restart or a settings change. ``custom`` entries are pi's extension state:
pi and OpenClaw load such a transcript unchanged and leave the entry out of the model context
(pi-format §5.6), so the file stays pi-loadable. A record also counts as a cache touch of its provider
and model (OpenClaw's in-memory ``lastCacheTouchAt = now`` after a prune, made durable).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal

import attrs

from sessionkeeper.pruning._settings import DEFAULT_HARD_CLEAR_PLACEHOLDER, SoftTrimSettings
from sessionkeeper.records import CustomEntry, TranscriptEntry, UnknownEntry


__all__ = (
    "PRUNE_RECORD_CUSTOM_TYPE",
    "PruneDecision",
    "PruneLedger",
    "prune_record_data",
    "read_prune_ledger",
)

PRUNE_RECORD_CUSTOM_TYPE: Final = "sessionkeeper.pruned-tool-results"
"""``customType`` of the entry that records a prune's decisions (deviation D11)."""


@attrs.frozen(kw_only=True)
class PruneDecision:
    """
    How one tool result (by tool call id) was pruned, with the sizes needed to repeat it byte for byte.

    Attributes:
        kind: ``"soft"`` (head + tail + note, images as markers) or ``"hard"`` (the placeholder).
        soft_trim: The soft-trim sizes used (``kind="soft"``).
        placeholder: The hard-clear text used (``kind="hard"``).
    """

    kind: Literal["soft", "hard"]
    soft_trim: SoftTrimSettings = attrs.field(factory=SoftTrimSettings)
    placeholder: str = DEFAULT_HARD_CLEAR_PLACEHOLDER


@attrs.frozen(kw_only=True)
class PruneLedger:
    """
    Every recorded prune decision of a session, by tool call id (later records win; a hard clear
    replaces an earlier soft trim).

    Attributes:
        decisions: Tool call id -> :class:`PruneDecision`.
        last_touch: Per ``(provider, model id)`` (lowercased, ``""`` when absent), the newest record's
            ``timestamp`` in ms: the prune rebuilt that model's prompt cache.
    """

    decisions: Mapping[str, PruneDecision] = attrs.field(factory=dict)
    last_touch: Mapping[tuple[str, str], int] = attrs.field(factory=dict)

    def __bool__(self) -> bool:
        return bool(self.decisions)

    def touch_for(self, provider: str | None, model_id: str | None) -> int | None:
        """The newest record time of this provider and model (case-insensitive), ms, or ``None``."""
        return self.last_touch.get((_norm(provider), _norm(model_id)))

    def extended(self, entries: Iterable[TranscriptEntry]) -> PruneLedger:
        """This ledger plus the prune records among ``entries`` (file order); ``self`` if none."""
        records = [data for data in map(record_data_of, entries) if data is not None]
        if not records:
            return self
        decisions = dict(self.decisions)
        touches = dict(self.last_touch)
        for data in records:
            _apply_record(data, decisions, touches)
        return PruneLedger(decisions=decisions, last_touch=touches)


def _norm(value: object) -> str:
    return value.strip().lower() if isinstance(value, str) else ""


def _soft_trim_of(value: object) -> SoftTrimSettings | None:
    if not isinstance(value, dict):
        return None
    sizes: list[int] = []
    for key in ("maxChars", "headChars", "tailChars"):
        size = value.get(key)
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            return None
        sizes.append(size)
    return SoftTrimSettings(max_chars=sizes[0], head_chars=sizes[1], tail_chars=sizes[2])


def _ids(value: object) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _apply_record(
    data: Any, decisions: dict[str, PruneDecision], touches: dict[tuple[str, str], int]
) -> None:
    if not isinstance(data, dict):
        return
    soft_trim = _soft_trim_of(data.get("softTrim"))
    if soft_trim is not None:
        for call_id in _ids(data.get("softTrimmed")):
            if call_id not in decisions or decisions[call_id].kind != "hard":
                decisions[call_id] = PruneDecision(kind="soft", soft_trim=soft_trim)
    placeholder = data.get("placeholder")
    if isinstance(placeholder, str) and placeholder:
        for call_id in _ids(data.get("hardCleared")):
            decisions[call_id] = PruneDecision(kind="hard", placeholder=placeholder)
    timestamp = data.get("timestamp")
    if isinstance(timestamp, int | float) and not isinstance(timestamp, bool) and math.isfinite(timestamp):
        key = (_norm(data.get("provider")), _norm(data.get("modelId")))
        touches[key] = max(touches.get(key, 0), math.floor(timestamp))


def record_data_of(entry: TranscriptEntry) -> Any | None:
    """The ``data`` of a prune record entry, or ``None`` when ``entry`` is not one."""
    if isinstance(entry, CustomEntry):
        return entry.data if entry.custom_type == PRUNE_RECORD_CUSTOM_TYPE else None
    if isinstance(entry, UnknownEntry) and entry.type == "custom":
        raw = entry.raw
        return raw.get("data") if raw.get("customType") == PRUNE_RECORD_CUSTOM_TYPE else None
    return None


def read_prune_ledger(entries: Iterable[TranscriptEntry] | Sequence[TranscriptEntry]) -> PruneLedger:
    """
    Collect the prune records of ``entries`` (file order, oldest first) into a :class:`PruneLedger`.

    A record that cannot be read (no sizes, no placeholder, ids that are not strings) contributes what
    it can and never raises: a damaged record only means a result may be sent whole again.
    """
    return PruneLedger().extended(entries)


def prune_record_data(
    *,
    timestamp_ms: int,
    provider: str | None,
    model_id: str | None,
    soft_trimmed: Sequence[str],
    hard_cleared: Sequence[str],
    soft_trim: SoftTrimSettings,
    placeholder: str,
) -> dict[str, Any]:
    """
    The ``data`` of a prune record (see the module docstring); ``None`` provider/model are left out.

    Args:
        timestamp_ms: When the prune ran (ms since epoch); also a cache touch of provider and model.
        provider: Provider id of the model the pruned context was built for.
        model_id: Its model id.
        soft_trimmed: Tool call ids soft-trimmed by this prune.
        hard_cleared: Tool call ids hard-cleared by this prune.
        soft_trim: The soft-trim sizes used.
        placeholder: The hard-clear placeholder used.
    """
    data: dict[str, Any] = {"timestamp": timestamp_ms}
    if provider is not None:
        data["provider"] = provider
    if model_id is not None:
        data["modelId"] = model_id
    data["softTrimmed"] = list(soft_trimmed)
    data["hardCleared"] = list(hard_cleared)
    data["softTrim"] = {
        "maxChars": soft_trim.max_chars,
        "headChars": soft_trim.head_chars,
        "tailChars": soft_trim.tail_chars,
    }
    data["placeholder"] = placeholder
    return data
