"""
Store layout (OpenClaw spec §1.1, §2.4; DESIGN "Files").

``<root>/agents/<agentId>/sessions/`` holds ``sessions.json`` (or ``sessions.sqlite``), the transcripts
``<sessionId>.jsonl`` and ``<sessionId>-topic-<encodeURIComponent(threadId)>.jsonl``, and archives
``<file>.reset.<stamp>`` / ``<file>.deleted.<stamp>``. Every path built here is checked to stay inside
its sessions directory; an id that would escape it raises :class:`~sessionkeeper.exceptions.UnsafePathError`.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from pathlib import Path
from typing import Final, Literal
from urllib.parse import quote

from sessionkeeper._fs import check_safe_name
from sessionkeeper.exceptions import UnsafePathError
from sessionkeeper.store._entry import is_valid_transcript_session_id


__all__ = (
    "DEFAULT_AGENT_ID",
    "ArchiveReason",
    "agent_sessions_dir",
    "archive_name",
    "archive_stamp",
    "encode_thread_id",
    "normalize_agent_id",
    "resolve_session_file",
    "transcript_path",
)

DEFAULT_AGENT_ID: Final = "main"
"""The agent id used when none (or an unusable one) is given."""

ArchiveReason = Literal["reset", "deleted", "bak"]

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


def resolve_session_file(sessions_dir: Path | str, session_file: str) -> Path:
    """
    Resolve an entry's explicit ``sessionFile`` and check it lies inside the sessions directory (§1.1).

    Relative paths are taken from ``sessions_dir``. Symlinks are resolved (realpath). As in OpenClaw, a
    file in a sibling agent's ``sessions/`` directory (``<root>/agents/<other>/sessions/``) is accepted.

    Raises:
        UnsafePathError: "Session file path must be within sessions directory".
    """
    directory = Path(sessions_dir)
    if not session_file or "\0" in session_file:
        raise UnsafePathError("Session file path must be within sessions directory", value=session_file)
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


def archive_stamp(now_ms: int) -> str:
    """
    The stamp of archive names (OpenClaw ``formatSessionArchiveTimestamp``, spec §2.4).

    ``Date.toISOString()`` with ``:`` replaced by ``-`` (the ``.`` before the milliseconds stays):
    ``2026-09-01T02-36-20.208Z``, as in the sample stores.
    """
    when = _dt.datetime.fromtimestamp(now_ms / 1000, tz=_dt.UTC)
    text = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now_ms % 1000:03d}Z"
    return text.replace(":", "-")


def archive_name(path: Path, reason: ArchiveReason, now_ms: int) -> Path:
    """Return ``<path>.<reason>.<archive_stamp(now_ms)>`` next to ``path`` (spec §2.4)."""
    return path.with_name(f"{path.name}.{reason}.{archive_stamp(now_ms)}")
