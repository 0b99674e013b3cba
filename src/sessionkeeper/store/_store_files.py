"""
A store's transcript files (OpenClaw spec §1.5; DESIGN "Files"): where an entry's transcript is (its
``sessionFile`` when the entry may own it, deviation F1, else ``<sessionId>.jsonl``), creating a new one
with its header, and archiving a removed or reset one as ``<file>.<reason>.<stamp>``.
:class:`~sessionkeeper.store.SessionStore` delegates its file side here.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Literal

import anyio.to_thread

from sessionkeeper._fs import FILE_MODE, fsync_dir, refuse_symlink
from sessionkeeper.exceptions import UnsafePathError
from sessionkeeper.store._entry import SessionEntry
from sessionkeeper.store._paths import (
    archive_name,
    check_session_file_owner,
    resolve_session_file,
    session_ids_owning,
    transcript_path,
)
from sessionkeeper.transcript import create_transcript_lines


__all__ = (
    "archive_transcript",
    "refusal_of",
    "transcript_file_of",
    "unlink_quietly",
    "warn_refused_reset",
    "write_header",
)

_log = logging.getLogger("sessionkeeper.store")


def transcript_file_of(sessions_dir: Path | None, entry: SessionEntry) -> Path | None:
    """
    :meth:`SessionStore.transcript_file <sessionkeeper.store.SessionStore.transcript_file>` for a store
    whose sessions directory is ``sessions_dir`` (``None``: none; the entry's file is then ``None``).

    Raises:
        UnsafePathError: The entry's ``sessionFile`` leaves the directory or is not the entry's (F1).
    """
    if sessions_dir is None:
        return None
    if isinstance(entry.session_file, str) and entry.session_file.strip():
        value = entry.session_file.strip()
        path = resolve_session_file(sessions_dir, value)
        session_id = entry.session_id if isinstance(entry.session_id, str) else None
        refused = check_session_file_owner(path.name, session_id)
        if refused is not None:
            raise UnsafePathError(f"sessionFile refused: {refused}", value=value)
        return path
    if isinstance(entry.session_id, str):
        return transcript_path(sessions_dir, entry.session_id)
    return None


def refusal_of(sessions_dir: Path | None, entry: SessionEntry) -> UnsafePathError | None:
    """The error :func:`transcript_file_of` raises for ``entry``'s explicit ``sessionFile``, if any."""
    if not (isinstance(entry.session_file, str) and entry.session_file.strip()):
        return None
    try:
        transcript_file_of(sessions_dir, entry)
    except UnsafePathError as err:
        return err
    return None


def write_header(sessions_dir: Path | None, entry: SessionEntry, now_ms: int, cwd: str | None) -> Path | None:
    """
    Create ``entry``'s transcript holding its header (``create_transcript_lines``; 0600, fsynced, never
    through a symbolic link); the path when created here, ``None`` when it exists already or the store
    has no sessions directory.
    """
    path = transcript_file_of(sessions_dir, entry)
    if path is None:
        return None
    refuse_symlink(path, what="transcript")  # a link, dangling or not: never write through it (issue 15)
    if path.exists():
        return None
    assert isinstance(entry.session_id, str)  # transcript_file() found a file: the entry has an id
    header = create_transcript_lines(
        entry.session_id, now_ms=now_ms, cwd=cwd if cwd is not None else str(Path.cwd())
    )[0]
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), FILE_MODE)
    try:
        os.write(fd, header + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)
    return path


async def archive_transcript(
    sessions_dir: Path | None,
    entry: SessionEntry,
    reason: Literal["reset", "deleted"],
    *,
    live: Callable[[], Awaitable[Mapping[str, SessionEntry]]],
    now_ms: Callable[[], int],
) -> None:
    """
    Rename the transcript of a removed or reset ``entry`` to ``<file>.<reason>.<stamp>``.

    Not acted on (issue 15 item 1, F1), with a ``sessionkeeper.store`` warning: a ``sessionFile`` the
    entry cannot own (:func:`transcript_file_of` refuses it), and a file a live entry of the store still
    references. Never renames over an existing file.
    """
    try:
        path = transcript_file_of(sessions_dir, entry)
    except UnsafePathError as err:
        _log.warning(
            "transcript not archived: %s",
            err,
            extra={"session_id": entry.session_id, "session_file": err.value, "reason": reason},
        )
        return
    if path is None:
        return
    owners = session_ids_owning(path.name)
    for key, other in (await live()).items():
        # only an entry that could own this file name can reference it (transcript_file refuses the
        # rest), so the others are skipped without resolving their paths (a realpath each)
        if not isinstance(other.session_id, str) or other.session_id.strip() not in owners:
            continue
        try:
            other_path = transcript_file_of(sessions_dir, other)
        except UnsafePathError:
            continue
        if other_path == path:
            _log.warning(
                "transcript %s not archived: the live entry %r references it",
                path.name,
                key,
                extra={"session_id": entry.session_id, "session_key": key, "reason": reason},
            )
            return
    target = archive_name(path, reason, now_ms())

    def move() -> None:
        if path.exists() and not target.exists():
            path.rename(target)
            fsync_dir(path.parent)

    await anyio.to_thread.run_sync(move)


def warn_refused_reset(
    session_key: str, previous: SessionEntry, refused: UnsafePathError, result: SessionEntry
) -> None:
    """The WARNING of a reset that left a refused ``sessionFile`` alone (issue 15 item 1, F1)."""
    _log.warning(
        "reset of %r: sessionFile refused (%s); the new session starts at %s and the refused file "
        "is left as it is",
        session_key,
        refused,
        result.session_file or f"{result.session_id}.jsonl",
        extra={
            "session_key": session_key,
            "session_id": previous.session_id,
            "session_file": refused.value,
            "reason": "reset",
        },
    )


def unlink_quietly(path: Path) -> None:
    """Remove a header file a failed :meth:`~sessionkeeper.store.SessionStore.reset` created (best effort)."""
    try:
        path.unlink()
    except OSError:
        _log.warning("could not remove %s after a failed reset", path, extra={"path": str(path)})
