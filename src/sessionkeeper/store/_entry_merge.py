"""
Merging a patch into a :class:`SessionEntry` (OpenClaw ``mergeSessionEntry``, spec openclaw.md §1.3), and
the ``sessionFile`` rotation when a session id changes (``session-file-rotation.ts``).
"""

from __future__ import annotations

import math
import posixpath
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from msgspec import UNSET

from sessionkeeper.exceptions import InvalidSessionEntryError
from sessionkeeper.store._entry import (
    ATTR_TO_WIRE,
    SessionEntry,
    session_entry_from_dict,
    session_entry_to_dict,
)
from sessionkeeper.store._entry_shape import normalize_optional_string


__all__ = ("merge_session_entry", "rewrite_session_file_for_new_session_id")


_DELETE: Final = UNSET
"""In a patch, ``UNSET`` as a value removes the key (JavaScript's ``{...existing, key: undefined}``)."""


def rewrite_session_file_for_new_session_id(
    session_file: Any, *, previous_session_id: str, next_session_id: str
) -> str | None:
    """
    Rewrite a ``sessionFile`` path when the session id changes (OpenClaw ``session-file-rotation.ts``).

    ``<prev>.jsonl`` becomes ``<next>.jsonl``; ``<prev>-topic-<t>.jsonl`` becomes ``<next>-topic-<t>.jsonl``;
    a fork/successor name ``<ISO stamp>_<prev>.jsonl`` becomes ``<ISO stamp>_<next>.jsonl``. The directory
    part is kept (joined and normalised like Node's ``path.join``).

    Returns:
        The new path, or ``None`` when the file name does not derive from ``previous_session_id`` (the
        caller then keeps the old value).
    """
    trimmed = normalize_optional_string(session_file)
    if trimmed is None:
        return None
    base = posixpath.basename(trimmed)
    if not base.endswith(".jsonl"):
        return None
    without_ext = base[: -len(".jsonl")]
    directory = posixpath.dirname(trimmed)
    if without_ext == previous_session_id:
        return _node_join(directory, f"{next_session_id}.jsonl")
    if without_ext.startswith(f"{previous_session_id}-topic-"):
        return _node_join(directory, f"{next_session_id}{base[len(previous_session_id) :]}")
    fork = _FORK_NAME_RE.match(without_ext)
    if fork is not None and fork.group(2) == previous_session_id:
        return _node_join(directory, f"{fork.group(1)}_{next_session_id}.jsonl")
    return None


_FORK_NAME_RE: Final = re.compile(r"^(\d{4}-\d{2}-\d{2}T[\w-]+(?:Z|[+-]\d{2}(?:-\d{2})?)?)_(.+)$", re.ASCII)


def _node_join(directory: str, name: str) -> str:
    return posixpath.normpath(posixpath.join(directory or ".", name))


def _normalize_ts(value: Any, now_ms: int) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return min(value, now_ms)


def _patch_to_wire(patch: SessionEntry | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(patch, SessionEntry):
        return session_entry_to_dict(patch)
    wire: dict[str, Any] = {}
    for key, value in patch.items():
        if not isinstance(key, str):
            raise InvalidSessionEntryError(f"patch keys must be strings, got {key!r}")
        if key == "extra" and isinstance(value, Mapping):
            wire.update(value)
            continue
        wire[ATTR_TO_WIRE.get(key, key)] = value
    return wire


def _normalize_runtime_model_fields(entry: dict[str, Any]) -> None:
    model = normalize_optional_string(entry.get("model"))
    provider = normalize_optional_string(entry.get("modelProvider"))
    if model is None:
        entry.pop("model", None)
        entry.pop("modelProvider", None)
        return
    entry["model"] = model
    if provider is None:
        entry.pop("modelProvider", None)
    else:
        entry["modelProvider"] = provider


def merge_session_entry(
    existing: SessionEntry | None,
    patch: SessionEntry | Mapping[str, Any],
    *,
    now_ms: int,
    preserve_activity: bool = False,
    new_session_id: Callable[[], str] | None = None,
) -> SessionEntry:
    """
    Merge ``patch`` into ``existing`` exactly as OpenClaw's ``mergeSessionEntry`` (spec §1.3).

    - ``sessionId`` = patch's, else existing's, else a new id (``new_session_id()``, default uuid4).
    - ``updatedAt`` = ``max(existing, patch, now)``, each first clamped to at most ``now_ms``; negative or
      non-finite values are ignored. With ``preserve_activity`` (``mergeSessionEntryPreserveActivity``,
      for inbound metadata and route updates) an existing entry keeps its ``updatedAt``.
    - New entry: ``sessionStartedAt`` = patch's, else ``updatedAt``. Existing entry: kept while the
      session id is unchanged, else ``updatedAt`` (unless the patch sets it).
    - When the session id changes, ``sessionFile`` (patch's if given, else existing's) is rewritten to
      the new id (:func:`rewrite_session_file_for_new_session_id`).
    - A patch that sets ``model`` to a new value without ``modelProvider`` drops ``modelProvider``; blank
      ``model``/``modelProvider`` are removed, and a missing or blank ``model`` removes both.

    Args:
        existing: The stored entry, or ``None`` for a new one.
        patch: Fields to set: a :class:`SessionEntry`, or a mapping keyed by Python names
            (``session_id``) or on-disk names (``sessionId``, and any unknown key). A value of
            ``msgspec.UNSET`` removes the key; an ``extra`` mapping is merged key by key.
        now_ms: The current time in ms since the epoch (from the store's :class:`~sessionkeeper.Clock`).
        preserve_activity: Keep the existing ``updatedAt`` (see above).
        new_session_id: Factory for a new session id; default ``str(uuid.uuid4())`` like OpenClaw.

    Returns:
        The merged entry (a new object; the inputs are unchanged).

    Raises:
        InvalidSessionEntryError: A patch key is not a string, or the result is not a valid entry.
    """
    p = _patch_to_wire(patch)
    old = session_entry_to_dict(existing) if existing is not None else None

    def present(d: Mapping[str, Any] | None, key: str) -> Any:
        if d is None:
            return None
        value = d.get(key)
        return None if value is UNSET else value

    session_id = present(p, "sessionId")
    if session_id is None:
        session_id = present(old, "sessionId")
    if session_id is None:
        session_id = new_session_id() if new_session_id is not None else str(uuid.uuid4())

    existing_updated = _normalize_ts(present(old, "updatedAt"), now_ms)
    patch_updated = _normalize_ts(present(p, "updatedAt"), now_ms)
    updated_at: int | float
    if preserve_activity and old is not None:
        updated_at = (
            existing_updated
            if existing_updated is not None
            else patch_updated
            if patch_updated is not None
            else now_ms
        )
    else:
        updated_at = max(existing_updated or 0, patch_updated or 0, now_ms)

    patch_started = present(p, "sessionStartedAt")
    merged: dict[str, Any]
    if old is None:
        merged = dict(p)
        merged["sessionId"] = session_id
        merged["updatedAt"] = updated_at
        merged["sessionStartedAt"] = patch_started if patch_started is not None else updated_at
    else:
        merged = {**old, **p}
        merged["sessionId"] = session_id
        merged["updatedAt"] = updated_at
        if patch_started is not None:
            merged["sessionStartedAt"] = patch_started
        elif old.get("sessionId") == session_id:
            merged["sessionStartedAt"] = old.get("sessionStartedAt", UNSET)
        else:
            merged["sessionStartedAt"] = updated_at
        previous_id = old.get("sessionId")
        if previous_id != session_id and isinstance(previous_id, str):
            source = p["sessionFile"] if "sessionFile" in p else old.get("sessionFile")
            rewritten = rewrite_session_file_for_new_session_id(
                None if source is UNSET else source,
                previous_session_id=previous_id,
                next_session_id=session_id,
            )
            if rewritten is not None:
                merged["sessionFile"] = rewritten
        if "model" in p and "modelProvider" not in p:
            patched_model = normalize_optional_string(present(p, "model"))
            existing_model = normalize_optional_string(old.get("model"))
            if patched_model and patched_model != existing_model:
                merged.pop("modelProvider", None)
    for key in [k for k, v in merged.items() if v is UNSET]:
        del merged[key]
    _normalize_runtime_model_fields(merged)
    return session_entry_from_dict(merged)
