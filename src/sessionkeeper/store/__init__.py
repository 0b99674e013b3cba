"""
The session store: session key -> :class:`SessionEntry` (OpenClaw spec §1), with pluggable backends.

Public names are re-exported here; the modules inside are private.
"""

from __future__ import annotations

from sessionkeeper.store._entry import (
    ChatType,
    SessionEntry,
    SessionStatus,
    encode_session_entry,
    is_safe_store_session_id,
    is_valid_transcript_session_id,
    merge_session_entry,
    normalize_persisted_entry,
    rewrite_session_file_for_new_session_id,
    session_entry_from_dict,
    session_entry_to_dict,
)


__all__ = (
    "ChatType",
    "SessionEntry",
    "SessionStatus",
    "encode_session_entry",
    "is_safe_store_session_id",
    "is_valid_transcript_session_id",
    "merge_session_entry",
    "normalize_persisted_entry",
    "rewrite_session_file_for_new_session_id",
    "session_entry_from_dict",
    "session_entry_to_dict",
)
