"""
The session store: session key -> :class:`SessionEntry` (OpenClaw spec §1), with pluggable backends.

Public names are re-exported here; the modules inside are private.
"""

from __future__ import annotations

from sessionkeeper.store._backend import EntryUpdater, LoadReport, StoreBackend, StoreTransaction
from sessionkeeper.store._entry import (
    ChatType,
    SessionEntry,
    SessionStatus,
    codex_seconds_to_ms,
    codex_thread_state,
    encode_session_entry,
    is_safe_store_session_id,
    is_valid_transcript_session_id,
    merge_session_entry,
    normalize_persisted_entry,
    rewrite_session_file_for_new_session_id,
    session_entry_from_dict,
    session_entry_to_dict,
)
from sessionkeeper.store._json import STORE_FILE_NAME, JsonFileStoreBackend
from sessionkeeper.store._memory import InMemoryStoreBackend
from sessionkeeper.store._paths import (
    DEFAULT_AGENT_ID,
    agent_sessions_dir,
    archive_name,
    archive_stamp,
    encode_thread_id,
    normalize_agent_id,
    resolve_session_file,
    transcript_path,
)
from sessionkeeper.store._sqlite import SQLITE_FILE_NAME, SqliteStoreBackend
from sessionkeeper.store._store import RESET_CLEARED_FIELDS, BackendName, SessionStore, resolve_store_location


__all__ = (
    "DEFAULT_AGENT_ID",
    "RESET_CLEARED_FIELDS",
    "SQLITE_FILE_NAME",
    "STORE_FILE_NAME",
    "BackendName",
    "ChatType",
    "EntryUpdater",
    "InMemoryStoreBackend",
    "JsonFileStoreBackend",
    "LoadReport",
    "SessionEntry",
    "SessionStatus",
    "SessionStore",
    "SqliteStoreBackend",
    "StoreBackend",
    "StoreTransaction",
    "agent_sessions_dir",
    "archive_name",
    "archive_stamp",
    "codex_seconds_to_ms",
    "codex_thread_state",
    "encode_session_entry",
    "encode_thread_id",
    "is_safe_store_session_id",
    "is_valid_transcript_session_id",
    "merge_session_entry",
    "normalize_agent_id",
    "normalize_persisted_entry",
    "resolve_session_file",
    "resolve_store_location",
    "rewrite_session_file_for_new_session_id",
    "session_entry_from_dict",
    "session_entry_to_dict",
    "transcript_path",
)
