"""
OpenClaw's load-time shape check of a stored row (spec openclaw.md §1.1, §1.2, §1.4): which rows a load
drops, which ``sessionId`` may name a transcript, and how a row is normalised; plus the raw-row readers
the maintenance rules share (``updatedAt`` and ``sessionId`` as the loader sees them).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final


__all__ = (
    "is_safe_store_session_id",
    "is_valid_transcript_session_id",
    "normalize_optional_string",
    "normalize_persisted_entry",
    "session_id_of",
    "updated_at_of",
)

_SAFE_STORE_SESSION_ID_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]*$")
_TRANSCRIPT_SESSION_ID_RE: Final = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$", re.IGNORECASE)
_CHECKPOINT_NAME_RE: Final = re.compile(
    r"^(.+)\.checkpoint\.([0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12})\.jsonl$",
    re.IGNORECASE,
)


def is_safe_store_session_id(value: Any) -> bool:
    """
    OpenClaw's store-load check of a ``sessionId`` (``store-entry-shape.ts`` ``isSafeSessionId``, §1.1).

    The trimmed id is non-empty, at most 255 characters, has no ``/`` or ``\\``, is not ``.``/``..`` and
    matches ``^[A-Za-z0-9][A-Za-z0-9._:@-]*$``. An entry whose id fails this is dropped on load.
    """
    if not isinstance(value, str):
        return False
    trimmed = value.strip()
    if not trimmed or len(trimmed) > 255:
        return False
    if "/" in trimmed or "\\" in trimmed or trimmed in {".", ".."}:
        return False
    return _SAFE_STORE_SESSION_ID_RE.match(trimmed) is not None


def is_valid_transcript_session_id(value: str) -> bool:
    """
    OpenClaw's ``validateSessionId`` (``paths.ts``, §1.1): may ``<id>.jsonl`` name a transcript?

    The trimmed id matches ``^[a-z0-9][a-z0-9._-]{0,127}$`` (case-insensitive) and ``<id>.jsonl`` is not
    a compaction-checkpoint file name (``<sid>.checkpoint.<uuid>.jsonl``).
    """
    trimmed = value.strip()
    return (
        _TRANSCRIPT_SESSION_ID_RE.match(trimmed) is not None
        and _CHECKPOINT_NAME_RE.match(f"{trimmed}.jsonl") is None
    )


def normalize_persisted_entry(raw: Any) -> dict[str, Any] | None:
    """
    Apply OpenClaw's load-time normalisation to one stored row (spec §1.1, §1.2, §1.4).

    In OpenClaw's order: legacy-field migration (``provider`` -> ``channel``, ``lastProvider`` ->
    ``lastChannel``, ``room`` -> ``groupChannel`` or deleted), the shape check
    (``normalizePersistedSessionEntryShape``: a non-object row or an unsafe ``sessionId`` drops the row; an
    id unusable as a transcript name is removed when no ``sessionFile`` is set, else trimmed; a non-string
    ``sessionFile`` is removed; an invalid ``updatedAt`` becomes 0, an absent one stays absent), the
    runtime model fields (blank ``model`` removes ``model`` and ``modelProvider``; values trimmed), and
    the runtime-only ``skillsSnapshot.resolvedSkills`` is stripped.

    OpenClaw also rewrites delivery, pending-delivery and plugin-extension fields into canonical form;
    those are kept exactly as stored here (nothing is lost, OpenClaw reads them either way).

    Args:
        raw: One value of the decoded ``sessions.json`` object.

    Returns:
        The normalised JSON object (a new dict when anything changed, else ``raw`` itself), or ``None``
        when OpenClaw drops the row.
    """
    if not isinstance(raw, dict):
        return None
    entry: dict[str, Any] = raw
    changed = False

    def edit() -> dict[str, Any]:
        nonlocal entry, changed
        if not changed:
            entry = dict(entry)
            changed = True
        return entry

    # legacy migrations (store-migrations.ts)
    if not isinstance(entry.get("channel"), str) and isinstance(entry.get("provider"), str):
        e = edit()
        e["channel"] = e.pop("provider")
    if not isinstance(entry.get("lastChannel"), str) and isinstance(entry.get("lastProvider"), str):
        e = edit()
        e["lastChannel"] = e.pop("lastProvider")
    if not isinstance(entry.get("groupChannel"), str) and isinstance(entry.get("room"), str):
        e = edit()
        e["groupChannel"] = e.pop("room")
    elif "room" in entry:
        del edit()["room"]
    # shape check (store-entry-shape.ts)
    session_file = entry.get("sessionFile")
    session_file_trimmed = session_file.strip() if isinstance(session_file, str) else None
    if "sessionId" in entry:
        session_id = entry["sessionId"]
        if not is_safe_store_session_id(session_id):
            return None
        trimmed = session_id.strip()
        if not is_valid_transcript_session_id(trimmed) and not session_file_trimmed:
            del edit()["sessionId"]
        elif trimmed != session_id:
            edit()["sessionId"] = trimmed
    if "sessionFile" in entry and not isinstance(entry["sessionFile"], str):
        del edit()["sessionFile"]
    if "updatedAt" in entry:
        updated = entry["updatedAt"]
        valid = (
            isinstance(updated, int | float)
            and not isinstance(updated, bool)
            and math.isfinite(updated)
            and updated >= 0
        )
        if not valid:
            edit()["updatedAt"] = 0
    # runtime model fields (types.ts normalizeSessionRuntimeModelFields)
    model = normalize_optional_string(entry.get("model"))
    if model is None:
        if "model" in entry or "modelProvider" in entry:
            e = edit()
            e.pop("model", None)
            e.pop("modelProvider", None)
    else:
        if entry["model"] != model:
            edit()["model"] = model
        provider = normalize_optional_string(entry.get("modelProvider"))
        if provider is None:
            if "modelProvider" in entry:
                del edit()["modelProvider"]
        elif entry["modelProvider"] != provider:
            edit()["modelProvider"] = provider
    # runtime-only skills cache
    snapshot = entry.get("skillsSnapshot")
    if isinstance(snapshot, dict) and "resolvedSkills" in snapshot:
        edit()["skillsSnapshot"] = {k: v for k, v in snapshot.items() if k != "resolvedSkills"}
    return entry


def normalize_optional_string(value: Any) -> str | None:
    """``value`` trimmed; ``None`` when not a string or blank (OpenClaw ``normalizeOptionalString``)."""
    if not isinstance(value, str):
        return None
    trimmed = value.strip()
    return trimmed or None


def updated_at_of(entry: Mapping[str, Any]) -> float | None:
    """``updatedAt`` as OpenClaw's loader normalises it: absent -> None, not a finite number >= 0 -> 0."""
    if "updatedAt" not in entry:
        return None
    value = entry["updatedAt"]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return value if math.isfinite(value) and value >= 0 else 0


def session_id_of(entry: Mapping[str, Any]) -> str | None:
    """A raw row's ``sessionId`` trimmed, or ``None`` when absent, not a string or blank."""
    value = entry.get("sessionId")
    return value.strip() if isinstance(value, str) and value.strip() else None
