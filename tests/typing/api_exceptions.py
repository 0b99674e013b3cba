"""Typing tests of the exception tree: typed fields never become ``Any`` (checked, never run)."""

from __future__ import annotations

from pathlib import Path
from typing import assert_type

from sessionkeeper.exceptions import (
    CompactionCancelled,
    ConfigError,
    ContextOverflowError,
    EntryNotFoundError,
    LockNotHeldError,
    ParentTooLargeError,
    SessionArchivedError,
    SessionBusyError,
    SessionKeeperError,
    SessionNotFoundError,
    StaleEntryError,
    StoreCorruptError,
    TranscriptFormatError,
)


def fields(
    *,
    config: ConfigError,
    busy: SessionBusyError,
    corrupt: StoreCorruptError,
    bad_line: TranscriptFormatError,
    missing_entry: EntryNotFoundError,
    missing_session: SessionNotFoundError,
    archived: SessionArchivedError,
    parent: ParentTooLargeError,
    stale: StaleEntryError,
    not_held: LockNotHeldError,
    cancelled: CompactionCancelled,
    overflow: ContextOverflowError,
) -> None:
    assert_type(config.key, str | None)
    assert_type(busy.path, Path)
    assert_type(busy.waited_ms, float)
    assert_type(busy.owner_pid, int | None)
    assert_type(corrupt.path, Path)
    assert_type(corrupt.backup_path, Path | None)
    assert_type(bad_line.path, Path | None)
    assert_type(bad_line.line, int | None)
    assert_type(missing_entry.entry_id, str)
    assert_type(missing_session.session_key, str)
    assert_type(archived.archived_at, int | None)
    assert_type(parent.parent_tokens, int)
    assert_type(parent.max_tokens, int)
    assert_type(stale.session_key, str)
    assert_type(not_held.reason, str)
    assert_type(cancelled.reason, str | None)
    assert_type(overflow.attempts, int)
    assert_type(overflow.context_tokens, int | None)


def builtin_co_bases() -> tuple[ValueError, TimeoutError, KeyError, SessionKeeperError]:
    # each error is also the builtin with the same meaning, so callers can catch either: the checkers
    # reject these assignments if a co-base is dropped
    config: ValueError = ConfigError("bad", key="session.store")
    busy: TimeoutError = SessionBusyError("busy", path="s.jsonl", waited_ms=10.0)
    missing: KeyError = SessionNotFoundError("agent:main:main")
    root: SessionKeeperError = ContextOverflowError("too long")
    return config, busy, missing, root
