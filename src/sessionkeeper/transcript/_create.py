"""
The lines of a new transcript (pi-format spec §3): the session header, then any entries, in one place for
every writer that creates a transcript outside :class:`~sessionkeeper.transcript.TranscriptManager`
(the store's reset and rollover headers, the parent fork's copy).
"""

from __future__ import annotations

from collections.abc import Iterable

from msgspec import UNSET

from sessionkeeper._fs import check_safe_name
from sessionkeeper.records import (
    CURRENT_SESSION_VERSION,
    SessionHeader,
    TranscriptEntry,
    encode_entry,
    encode_header,
    iso_from_ms,
    uuid7,
)


__all__ = ("create_transcript_lines", "fresh_session_header", "new_session_header")


def new_session_header(
    session_id: str, *, now_ms: int, cwd: str, parent_session: str | None = None
) -> SessionHeader:
    """
    The header of a new transcript: ``{"type":"session","version":3,"id","timestamp","cwd"
    [,"parentSession"]}`` (spec §3, pi's ``SessionManager.newSession``); ``timestamp`` is
    ``new Date(now_ms).toISOString()`` and ``parentSession`` is absent when ``None``.
    """
    return SessionHeader(
        version=CURRENT_SESSION_VERSION,
        id=session_id,
        timestamp=iso_from_ms(now_ms),
        cwd=cwd,
        parent_session=parent_session if parent_session is not None else UNSET,
    )


def fresh_session_header(
    now_ms: int, *, cwd: str, session_id: str | None, parent_session: str | None
) -> SessionHeader:
    """
    :func:`new_session_header` for a session this process starts: ``session_id`` defaults to a new UUID
    v7 (pi 0.73.1) and must be a safe name.

    Raises:
        UnsafePathError: ``session_id`` could escape a directory (it names the file).
    """
    sid = session_id if session_id is not None else uuid7(now_ms)
    check_safe_name(sid, what="session id")
    return new_session_header(sid, now_ms=now_ms, cwd=cwd, parent_session=parent_session)


def create_transcript_lines(
    session_id: str,
    *,
    now_ms: int,
    cwd: str,
    parent_session: str | None = None,
    entries: Iterable[TranscriptEntry | bytes] = (),
) -> list[bytes]:
    """
    The lines of a new transcript, without newlines: the header, then ``entries`` in order.

    The header is ``{"type":"session","version":3,"id","timestamp","cwd"[,"parentSession"]}`` (spec §3,
    pi's ``SessionManager.newSession``), ``timestamp`` being ``new Date(now_ms).toISOString()``. An entry
    given as ``bytes`` is one complete line copied byte for byte (a branch copied from another
    transcript); a typed entry is encoded as pi's ``JSON.stringify`` writes it (lone surrogates become
    U+FFFD).

    Args:
        session_id: The header's ``id`` (not checked here: the caller names the file after it).
        now_ms: The header's time, ms since the epoch.
        cwd: The header's working directory.
        parent_session: The header's ``parentSession`` (the transcript this one was forked from); ``None``
            (default) leaves it absent.
        entries: The entries after the header (default none: a header-only transcript).
    """
    lines = [
        encode_header(new_session_header(session_id, now_ms=now_ms, cwd=cwd, parent_session=parent_session))
    ]
    lines.extend(entry if isinstance(entry, bytes) else encode_entry(entry) for entry in entries)
    return lines
