"""
Store layout (OpenClaw spec §1.1, §2.4; DESIGN "Files").

``<root>/agents/<agentId>/sessions/`` holds ``sessions.json`` (or ``sessions.sqlite``), the transcripts
``<sessionId>.jsonl`` and ``<sessionId>-topic-<encodeURIComponent(threadId)>.jsonl``, and archives
``<file>.reset.<stamp>`` / ``<file>.deleted.<stamp>``. Every path built here is checked to stay inside
its sessions directory; an id that would escape it raises :class:`~sessionkeeper.exceptions.UnsafePathError`.

An entry's explicit ``sessionFile`` must also be attributable to that entry (:func:`check_session_file_owner`,
issue 15 item 1, deviation F1 in docs/decisions.md): OpenClaw accepts any file inside the directory, so one
wrong value made ``reset``, ``delete`` and ``sessions cleanup --enforce`` archive ``sessions.json`` or another
session's transcript.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import quote

from sessionkeeper._fs import check_safe_name
from sessionkeeper.exceptions import UnsafePathError
from sessionkeeper.store._entry_shape import is_valid_transcript_session_id
from sessionkeeper.transcript import archive_stamp as transcript_archive_stamp


__all__ = (
    "DEFAULT_AGENT_ID",
    "STORE_FILE_NAMES",
    "ArchiveReason",
    "agent_sessions_dir",
    "archive_name",
    "archive_stamp",
    "check_session_file_owner",
    "encode_thread_id",
    "is_store_file_name",
    "normalize_agent_id",
    "refused_session_files",
    "resolve_session_file",
    "session_ids_owning",
    "transcript_path",
)

DEFAULT_AGENT_ID: Final = "main"
"""The agent id used when none (or an unusable one) is given."""

ArchiveReason = Literal["reset", "deleted", "bak"]

STORE_FILE_NAMES: Final = ("sessions.json", "sessions.sqlite")
"""The store's own files; with their locks, backups, temp and journal files they are never a transcript."""

# pi's fork/successor name: ``<ISO stamp, ':' and '.' as '-'>_<sessionId>.jsonl``
_FORK_STEM_RE: Final = re.compile(
    r"^\d{4}-\d{2}-\d{2}T[\w-]+?(?:Z|[+-]\d{2}(?:-\d{2})?)?_(?P<id>[^_]+)$", re.ASCII
)

_VALID_AGENT_ID_RE: Final = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$", re.IGNORECASE)
_INVALID_AGENT_CHARS_RE: Final = re.compile(r"[^a-z0-9_-]+")


def normalize_agent_id(value: str | None) -> str:
    """
    Normalise an agent id to its file-system-safe form (OpenClaw ``normalizeAgentId``, spec §1.1).

    Trimmed and lowercased; runs of characters outside ``[a-z0-9_-]`` become ``-``, leading and trailing
    dashes are removed, the result is cut to 64 characters; an empty result gives ``"main"``.
    """
    trimmed = (value or "").strip()
    if not trimmed:
        return DEFAULT_AGENT_ID
    lowered = trimmed.lower()
    if _VALID_AGENT_ID_RE.match(trimmed):
        return lowered
    cleaned = _INVALID_AGENT_CHARS_RE.sub("-", lowered).lstrip("-").rstrip("-")[:64]
    return cleaned or DEFAULT_AGENT_ID


def agent_sessions_dir(root: Path | str, agent_id: str | None = None) -> Path:
    """Return ``<root>/agents/<normalised agentId>/sessions`` (spec §1.1); ``root`` is the state dir."""
    return Path(root) / "agents" / normalize_agent_id(agent_id) / "sessions"


def encode_thread_id(thread_id: str | int) -> str:
    """
    Encode a topic/thread id like JavaScript's ``encodeURIComponent`` (spec §1.1).

    Raises:
        UnsafePathError: The id is empty or contains a lone surrogate (``encodeURIComponent`` throws).
    """
    text = str(thread_id)
    if not text:
        raise UnsafePathError("empty thread id", value=text)
    try:
        return quote(text, safe="!~*'()", encoding="utf-8", errors="strict")
    except UnicodeEncodeError as err:
        raise UnsafePathError(f"thread id {text!r} is not valid Unicode", value=text) from err


def _inside(directory: Path, candidate: Path) -> bool:
    base = os.path.realpath(directory)
    resolved = os.path.realpath(candidate)
    return os.path.commonpath([base, resolved]) == base and resolved != base


def transcript_path(sessions_dir: Path | str, session_id: str, *, thread_id: str | int | None = None) -> Path:
    """
    Return the transcript path of a session: ``<dir>/<sessionId>.jsonl`` or, for a topic thread,
    ``<dir>/<sessionId>-topic-<encodeURIComponent(threadId)>.jsonl`` (spec §1.1).

    Args:
        sessions_dir: The sessions directory.
        session_id: Must pass OpenClaw's ``validateSessionId`` (``^[a-z0-9][a-z0-9._-]{0,127}$``,
            case-insensitive, not a checkpoint name).
        thread_id: Topic thread id, if any.

    Raises:
        UnsafePathError: The id is invalid, or the path would leave ``sessions_dir``.
    """
    check_safe_name(session_id, what="session id")
    if not is_valid_transcript_session_id(session_id):
        raise UnsafePathError(f"invalid session id for a transcript file: {session_id!r}", value=session_id)
    name = f"{session_id.strip()}.jsonl"
    if thread_id is not None:
        name = f"{session_id.strip()}-topic-{encode_thread_id(thread_id)}.jsonl"
    check_safe_name(name, what="transcript name")
    directory = Path(sessions_dir)
    path = directory / name
    if not _inside(directory, path):
        raise UnsafePathError(f"transcript {name!r} would leave {directory}", value=name)
    return path


def is_store_file_name(name: str) -> bool:
    """
    True for the store's own files: ``sessions.json`` / ``sessions.sqlite`` and every name derived from
    them (``.lock``, ``.bak.<stamp>``, ``.<pid>.<uuid>.tmp``, SQLite's ``-wal`` / ``-shm`` / ``-journal``).
    Compared case-insensitively (case-insensitive file systems).
    """
    lowered = name.lower()
    return any(lowered == base or lowered.startswith((f"{base}.", f"{base}-")) for base in STORE_FILE_NAMES)


def check_session_file_owner(name: str, session_id: str | None) -> str | None:
    """
    Whether a transcript file name can belong to the entry with ``session_id`` (issue 15 item 1, F1).

    Attributable names: ``<sessionId>.jsonl``, the topic form ``<sessionId>-topic-<thread>.jsonl`` and the
    fork / successor / reset form ``<ISO stamp>_<sessionId>.jsonl`` (the names this library, pi and
    OpenClaw record, and what ``rewrite_session_file_for_new_session_id`` produces). Never the store's own
    files (:func:`is_store_file_name`) nor a trajectory sidecar.

    Args:
        name: The file name (no directory).
        session_id: The entry's ``sessionId``; ``None`` (no id) attributes nothing.

    Returns:
        ``None`` when the name is attributable, else the reason it is refused (one sentence).
    """
    if is_store_file_name(name):
        return f"{name!r} is a file of the store itself"
    sid = session_id.strip() if isinstance(session_id, str) else ""
    if not sid:
        return f"{name!r} cannot be attributed to an entry without a sessionId"
    if name.endswith(".jsonl") and not name.endswith(".trajectory.jsonl"):
        stem = name[: -len(".jsonl")]
        if stem == sid or stem.startswith(f"{sid}-topic-"):
            return None
        fork = _FORK_STEM_RE.match(stem)
        if fork is not None and fork.group("id") == sid:
            return None
    return f"{name!r} is not a transcript name of session {sid!r}"


def session_ids_owning(name: str) -> frozenset[str]:
    """
    Every session id that :func:`check_session_file_owner` lets own the file ``name`` (none for a store
    file or a trajectory sidecar): the stem of ``<id>.jsonl``, each ``<id>`` of ``<id>-topic-<thread>``,
    the ``<id>`` of ``<ISO stamp>_<id>.jsonl``. For scans over many entries (one set lookup each).
    """
    if is_store_file_name(name) or not name.endswith(".jsonl") or name.endswith(".trajectory.jsonl"):
        return frozenset()
    stem = name[: -len(".jsonl")]
    owners = {stem}
    start = stem.find("-topic-")
    while start >= 0:
        owners.add(stem[:start])
        start = stem.find("-topic-", start + 1)
    fork = _FORK_STEM_RE.match(stem)
    if fork is not None:
        owners.add(fork.group("id"))
    owners.discard("")
    return frozenset(owners)


def resolve_session_file(sessions_dir: Path | str, session_file: str) -> Path:
    """
    Resolve an entry's explicit ``sessionFile`` and check it lies inside the sessions directory (§1.1).

    Relative paths are taken from ``sessions_dir``. Symlinks are resolved (realpath). As in OpenClaw, a
    file in a sibling agent's ``sessions/`` directory (``<root>/agents/<other>/sessions/``) is accepted.
    This checks the place only; whose file it is, is :func:`check_session_file_owner`'s question.

    Raises:
        UnsafePathError: "Session file path must be within sessions directory"; also for a value that is
            not valid Unicode (a lone surrogate, which no file name can hold).
    """
    directory = Path(sessions_dir)
    if not session_file or "\0" in session_file:
        raise UnsafePathError("Session file path must be within sessions directory", value=session_file)
    try:
        session_file.encode("utf-8")
    except UnicodeEncodeError as err:
        raise UnsafePathError(
            f"Session file path {session_file!r} is not valid Unicode (lone surrogate)", value=session_file
        ) from err
    candidate = Path(session_file)
    if not candidate.is_absolute():
        candidate = directory / candidate
    if _inside(directory, candidate):
        return Path(os.path.realpath(candidate))
    real_dir = Path(os.path.realpath(directory))
    if real_dir.name == "sessions" and real_dir.parent.parent.name == "agents":
        agents_root = real_dir.parent.parent
        resolved = Path(os.path.realpath(candidate))
        rel = resolved.relative_to(agents_root) if resolved.is_relative_to(agents_root) else None
        if rel is not None and len(rel.parts) == 3 and rel.parts[1] == "sessions":
            return resolved
    raise UnsafePathError("Session file path must be within sessions directory", value=session_file)


def refused_session_files(sessions_dir: Path | str, entries: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """
    Every explicit ``sessionFile`` of ``entries`` the store refuses (for ``doctor``; issue 15 items 1, 4).

    Args:
        sessions_dir: The sessions directory.
        entries: The store as loaded (session key -> raw entry object with camelCase fields).

    Returns:
        ``(session key, sessionFile value, reason)`` per refused value, in store order: outside the
        directory, not valid Unicode, or not attributable to the entry (:func:`check_session_file_owner`).
    """
    refused: list[tuple[str, str, str]] = []
    for key, entry in entries.items():
        value = entry.get("sessionFile") if isinstance(entry, Mapping) else None
        if not isinstance(value, str) or not value.strip():
            continue
        try:
            path = resolve_session_file(sessions_dir, value.strip())
        except UnsafePathError as err:
            refused.append((key, value, str(err)))
            continue
        session_id = entry.get("sessionId")
        reason = check_session_file_owner(path.name, session_id if isinstance(session_id, str) else None)
        if reason is not None:
            refused.append((key, value, reason))
    return refused


def archive_stamp(now_ms: int) -> str:
    """
    The stamp of archive names (OpenClaw ``formatSessionArchiveTimestamp``, spec §2.4).

    ``Date.toISOString()`` with ``:`` replaced by ``-`` (the ``.`` before the milliseconds stays):
    ``2026-09-01T02-36-20.208Z``, as in the sample stores.
    """
    return transcript_archive_stamp(now_ms)


def archive_name(path: Path, reason: ArchiveReason, now_ms: int) -> Path:
    """Return ``<path>.<reason>.<archive_stamp(now_ms)>`` next to ``path`` (spec §2.4)."""
    return path.with_name(f"{path.name}.{reason}.{archive_stamp(now_ms)}")
