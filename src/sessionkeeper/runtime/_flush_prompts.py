"""
The memory flush turn's prompts (OpenClaw §6 "default prompt"): the defaults, the safety hints every
prompt carries, and the date and time lines.
"""

from __future__ import annotations

import datetime as dt
import os
import zoneinfo
from typing import Final

from sessionkeeper._silent import SILENT_REPLY_TOKEN


__all__ = ("DEFAULT_MEMORY_FLUSH_PROMPT", "DEFAULT_MEMORY_FLUSH_SYSTEM_PROMPT", "ensure_hints", "time_line")

_TARGET_HINT: Final = (
    "Write durable memories only to memory/YYYY-MM-DD.md (create the memory/ directory if it is missing)."
)
_APPEND_ONLY_HINT: Final = (
    "If memory/YYYY-MM-DD.md already exists, only append to it: never overwrite or rewrite existing entries."
)
_READ_ONLY_HINT: Final = (
    "During this flush, treat the workspace reference files MEMORY.md, DREAMS.md, SOUL.md, TOOLS.md and "
    "AGENTS.md as read-only: do not edit, replace or overwrite them."
)
_REQUIRED_HINTS: Final = (_TARGET_HINT, _APPEND_ONLY_HINT, _READ_ONLY_HINT)
_NO_REPLY_HINT: Final = f"If no reply for the user is needed, start your reply with {SILENT_REPLY_TOKEN}."

DEFAULT_MEMORY_FLUSH_PROMPT: Final = " ".join(
    (
        "Pre-compaction memory flush.",
        _TARGET_HINT,
        _READ_ONLY_HINT,
        _APPEND_ONLY_HINT,
        "Do not create timestamped variants such as YYYY-MM-DD-HHMM.md; always use the canonical "
        "YYYY-MM-DD.md file name.",
        f"If there is nothing worth storing, reply with {SILENT_REPLY_TOKEN}.",
    )
)
"""The flush turn's user prompt before date substitution (OpenClaw §6 "default prompt")."""

DEFAULT_MEMORY_FLUSH_SYSTEM_PROMPT: Final = " ".join(
    (
        "Pre-compaction memory flush turn.",
        "This session is close to automatic compaction: save durable memories to disk now.",
        _TARGET_HINT,
        _READ_ONLY_HINT,
        _APPEND_ONLY_HINT,
        f"You may reply, but {SILENT_REPLY_TOKEN} is usually the right answer.",
    )
)
"""The extra system prompt of the flush turn before date substitution (OpenClaw §6)."""


def ensure_hints(text: str) -> str:
    """``text`` with each missing safety hint appended, and the NO_REPLY hint when it lacks the token."""
    result = text.strip()
    for hint in _REQUIRED_HINTS:
        if hint not in result:
            result = f"{result}\n\n{hint}" if result else hint
    if SILENT_REPLY_TOKEN not in result:
        result = f"{result}\n\n{_NO_REPLY_HINT}"
    return result


def _ordinal(day: int) -> str:
    if 11 <= day % 100 <= 13:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


def _local_time(now_ms: int, zone: str | None) -> tuple[dt.datetime, str]:
    utc = dt.datetime.fromtimestamp(now_ms / 1000, tz=dt.UTC)
    if zone:
        return utc.astimezone(zoneinfo.ZoneInfo(zone)), zone
    local = utc.astimezone()
    label = os.environ.get("TZ") or local.tzname() or "local"
    return local, label


def time_line(now_ms: int, zone: str | None) -> tuple[str, str]:
    """The prompt's "Current time:" line and today's ``YYYY-MM-DD`` in ``zone`` (``None``: the local zone)."""
    local, label = _local_time(now_ms, zone)
    utc = dt.datetime.fromtimestamp(now_ms / 1000, tz=dt.UTC)
    when = f"{local:%A}, {local:%B} {local.day}{_ordinal(local.day)}, {local.year} - {local:%H:%M}"
    line = f"Current time: {when} ({label})\nReference UTC: {utc:%Y-%m-%d %H:%M} UTC"
    return line, f"{local:%Y-%m-%d}"
