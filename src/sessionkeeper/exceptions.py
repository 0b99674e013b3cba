"""
The exception tree of sessionkeeper.

Every error the library raises on purpose derives from :class:`SessionKeeperError`, so a host can catch
the whole family with one ``except``. Where a builtin exception means the same thing, the class also
derives from it (a :class:`ConfigError` is a :class:`ValueError`, a :class:`SessionBusyError` is a
:class:`TimeoutError`), so generic handlers keep working.

::

    SessionKeeperError
    ├── ConfigError (ValueError)                   bad setting value; names the key
    ├── UnsafePathError (ValueError)               id/key/thread id that would escape the sessions dir
    │   └── SymlinkRefusedError                    a path the library writes is a symbolic link
    ├── TranscriptError
    │   ├── TranscriptFormatError (ValueError)     not a transcript / bad line; names file and line
    │   ├── TranscriptNotFoundError (FileNotFoundError)
    │   ├── TranscriptChangedError                 file shrank or was replaced under an open manager
    │   │   └── StaleTranscriptError               append refused: others appended since the writer's mark
    │   ├── EntryNotFoundError (KeyError)          unknown entry id (branch target, label target, leaf)
    │   └── InvalidEntryError (ValueError)         an append refused: a value pi refuses or cannot read
    ├── StoreError
    │   ├── StoreCorruptError (ValueError)         unreadable sessions.json / sqlite; a 0600 backup was made
    │   ├── InvalidSessionEntryError (ValueError)  a SessionEntry value or patch that cannot be stored
    │   ├── SessionNotFoundError (KeyError)        no SessionEntry for a session key
    │   ├── SessionExistsError (FileExistsError)   a copy found another session in the target store
    │   ├── SessionArchivedError                   new work refused on an archived session (restore it)
    │   ├── ParentTooLargeError (ValueError)       operator fork refused: parent over the 100 000-token cap
    │   └── OpenClawDatabaseError (ValueError)     an OpenClaw agent database (or one row) cannot be read
    │       └── UnsupportedSchemaVersionError      its schema version is not one this reader knows
    ├── LockError
    │   ├── SessionBusyError (TimeoutError)        write lock not acquired in time; owner and wait attached
    │   │   └── StaleLockError                     live owner too old / over max hold: reported, not taken
    │   └── LockNotHeldError                       handle no longer holds its lock (released, watchdog, lost)
    ├── CompactionError                            compaction could not produce a usable summary
    │   └── CompactionCancelled                    a ``session_before_compact`` hook cancelled it
    ├── ProviderError
    │   ├── DuplicateProviderError (ValueError)    a compaction provider id registered twice
    │   └── UnknownProviderError (LookupError)     settings name a provider that is not registered
    ├── ModelClientError                           the host's ModelClient failed (wraps the cause)
    │   └── ModelProviderError                     a provider API refused a request (status, body kept)
    └── ContextOverflowError                       the context still does not fit after every recovery

Exceptions from dependencies (msgspec, cattrs, OSError from the file system) are translated at the
boundary with ``raise ... from err``; the original stays available as ``__cause__``.

Cancellation (anyio/asyncio cancellation, a caller's abort) is *not* an error of this tree: it
propagates unchanged.
"""

from __future__ import annotations

from pathlib import Path


__all__ = (
    "CompactionCancelled",
    "CompactionError",
    "ConfigError",
    "ContextOverflowError",
    "DuplicateProviderError",
    "EntryNotFoundError",
    "InvalidEntryError",
    "InvalidSessionEntryError",
    "LockError",
    "LockNotHeldError",
    "ModelClientError",
    "ModelProviderError",
    "OpenClawDatabaseError",
    "ParentTooLargeError",
    "ProviderError",
    "SessionArchivedError",
    "SessionBusyError",
    "SessionExistsError",
    "SessionKeeperError",
    "SessionNotFoundError",
    "StaleEntryError",
    "StaleLockError",
    "StaleTranscriptError",
    "StoreCorruptError",
    "StoreError",
    "StoreUnavailableError",
    "SymlinkRefusedError",
    "TranscriptChangedError",
    "TranscriptError",
    "TranscriptFormatError",
    "TranscriptNotFoundError",
    "UnknownProviderError",
    "UnsafePathError",
    "UnsupportedSchemaVersionError",
)


class SessionKeeperError(Exception):
    """Root of every error raised by sessionkeeper on purpose."""


class ConfigError(SessionKeeperError, ValueError):
    """
    A configuration value could not be understood.

    Attributes:
        key: The dotted config key at fault (``"session.maintenance.pruneAfter"``), or ``None`` when the
            error is about the whole document.
    """

    def __init__(self, message: str, *, key: str | None = None) -> None:
        self.key = key
        super().__init__(f"{key}: {message}" if key else message)


class UnsafePathError(SessionKeeperError, ValueError):
    """
    A session id, thread id, agent id or file name would resolve outside its sessions directory.

    Raised for ``..`` segments, path separators, NUL bytes and empty names (DESIGN "Files").

    Attributes:
        value: The refused value.
    """

    def __init__(self, message: str, *, value: str) -> None:
        self.value = value
        super().__init__(message)


class SymlinkRefusedError(UnsafePathError):
    """
    A file sessionkeeper would create, write, append to or replace is a symbolic link (issue 15 item 7).

    Links at write paths are never followed (a dangling link would create its target anywhere) and never
    replaced (an atomic rename would silently turn a linked ``sessions.json`` into a regular file). Reads
    follow links; directory components may be links. Nothing was written when this is raised.

    Attributes:
        value: The path, as text.
        path: The path.
    """

    def __init__(self, path: Path | str, *, what: str = "file") -> None:
        self.path: Path = Path(path)
        super().__init__(
            f"{what} {self.path} is a symbolic link; sessionkeeper does not write through or replace links "
            "(write to the link's target path instead)",
            value=str(path),
        )


class TranscriptError(SessionKeeperError):
    """Base class for transcript (JSONL session file) errors."""


class TranscriptFormatError(TranscriptError, ValueError):
    """
    A file is not a usable pi session transcript, or one of its lines is invalid where it must not be.

    Attributes:
        path: The file, when known.
        line: The 1-based line number at fault, when known.
    """

    def __init__(self, message: str, *, path: Path | str | None = None, line: int | None = None) -> None:
        self.path: Path | None = Path(path) if path is not None else None
        self.line = line
        where = ""
        if self.path is not None:
            where = f"{self.path}"
            if line is not None:
                where += f":{line}"
            where += ": "
        super().__init__(f"{where}{message}")


class TranscriptNotFoundError(TranscriptError, FileNotFoundError):
    """The transcript file does not exist."""


class TranscriptChangedError(TranscriptError):
    """
    The transcript file changed under an open manager in a way appends cannot follow: it shrank, was
    replaced (another inode), or its bytes before the end the manager knew changed. Nothing was
    written; reopen the transcript (``TranscriptManager.open``) and retry.

    Attributes:
        path: The file.
    """

    def __init__(self, message: str, *, path: Path | str) -> None:
        self.path: Path = Path(path)
        super().__init__(f"{self.path}: {message}")


class StaleTranscriptError(TranscriptChangedError):
    """
    A conditional append was refused: other writers appended to the transcript since the mark the
    writer passed (``TranscriptStorage.append``). Nothing was written; read what they appended
    (``read_since``), re-link the entries and append again.

    Attributes:
        path: Where the transcript lives (``TranscriptStorage.location``).
    """


class EntryNotFoundError(TranscriptError, KeyError):
    """
    An entry id is not present in the transcript.

    Attributes:
        entry_id: The missing id.
    """

    def __init__(self, entry_id: str, *, message: str | None = None) -> None:
        self.entry_id = entry_id
        super().__init__(message or f"entry {entry_id!r} not found")

    def __str__(self) -> str:
        return str(self.args[0])


class InvalidEntryError(TranscriptError, ValueError):
    """
    An append was refused before anything was written: an argument pi refuses (a context edit of an
    entry that is not on the active branch or holds no editable model content, a replacement that is
    not ``None``, a string or content blocks) or a value of the wrong type for the entry pi writes
    (a usage entry's ``kind``, a system message's sections and tools, ...), which pi and this library
    could not read back as that entry.
    """


class StoreError(SessionKeeperError):
    """Base class for session store errors."""


class StoreCorruptError(StoreError, ValueError):
    """
    The store file could not be parsed. It was left in place and a 0600 backup was written.

    Attributes:
        path: The store file.
        backup_path: Where the backup copy was written, or ``None`` if no backup could be made.
    """

    def __init__(self, message: str, *, path: Path | str, backup_path: Path | None = None) -> None:
        self.path: Path = Path(path)
        self.backup_path = backup_path
        super().__init__(f"{self.path}: {message}")


class InvalidSessionEntryError(StoreError, ValueError):
    """A session entry, or a patch for one, is not a JSON object of the ``SessionEntry`` shape."""


class SessionNotFoundError(StoreError, KeyError):
    """
    No :class:`~sessionkeeper.SessionEntry` exists for a session key.

    Attributes:
        session_key: The key looked up.
    """

    def __init__(self, session_key: str) -> None:
        self.session_key = session_key
        super().__init__(f"no session for key {session_key!r}")

    def __str__(self) -> str:
        return str(self.args[0])


class SessionExistsError(StoreError, FileExistsError):
    """
    A copy of a session between stores (:func:`~sessionkeeper.store.copy_sessions`, ``sessionkeeper
    export`` / ``import``) found the target holding something else under its name: another entry under
    the session key, or another transcript where the session's goes. Nothing of that session was
    written; ``overwrite=True`` (``--overwrite``) replaces them.

    Attributes:
        session_key: The session key being copied.
        location: What is in the way: ``"entry"``, or the target transcript's location.
    """

    def __init__(self, session_key: str, *, location: str, message: str | None = None) -> None:
        self.session_key = session_key
        self.location = location
        super().__init__(
            message
            or (
                f"the target store holds another entry under {session_key!r}"
                if location == "entry"
                else f"another transcript is at {location} (target of {session_key!r})"
            )
        )

    def __str__(self) -> str:
        return str(self.args[0])


class SessionArchivedError(StoreError):
    """
    New work was refused on an archived session (its entry has ``archivedAt``): OpenClaw 2026.7.35
    ``initSessionState`` (spec §4.3 step 3) throws ``Session "<key>" is archived. Restore it before
    starting new work.``; restore it with :meth:`~sessionkeeper.store.SessionStore.unarchive` first.

    Attributes:
        session_key: The archived session's key.
        archived_at: The entry's ``archivedAt`` (ms since epoch), or ``None`` if it is not a number.
    """

    def __init__(self, session_key: str, *, archived_at: int | None = None) -> None:
        self.session_key = session_key
        self.archived_at = archived_at
        super().__init__(f'Session "{session_key}" is archived. Restore it before starting new work.')


class ParentTooLargeError(StoreError, ValueError):
    """
    An operator fork was refused: the parent session is over the fork cap (OpenClaw spec §4.3,
    ``sessions.create {fork:true}``: "parent session is too large to fork").

    Attributes:
        parent_session_key: The parent's session key.
        parent_tokens: The parent's token count, in tokens.
        max_tokens: The cap, in tokens (100 000).
    """

    def __init__(self, parent_session_key: str, *, parent_tokens: int, max_tokens: int) -> None:
        self.parent_session_key = parent_session_key
        self.parent_tokens = parent_tokens
        self.max_tokens = max_tokens
        super().__init__(f"parent session is too large to fork ({parent_tokens}/{max_tokens} tokens)")


class StaleEntryError(StoreError):
    """
    A compare-and-swap write of a session entry lost: the stored revision is not the one the writer read
    (PostgreSQL and Redis store backends; ``spec/distributed.md`` §2.4 "Session entries"). Nothing was
    written; re-read the entry and retry.

    Attributes:
        session_key: The entry's session key.
        expected_revision: The revision the writer read (``None``: it expected no entry).
        current_revision: The stored revision now (``None``: no entry).
    """

    def __init__(
        self, session_key: str, *, expected_revision: int | None, current_revision: int | None
    ) -> None:
        self.session_key = session_key
        self.expected_revision = expected_revision
        self.current_revision = current_revision
        super().__init__(
            f"stale write of {session_key!r}: expected revision {expected_revision}, "
            f"the store holds {current_revision}"
        )


class OpenClawDatabaseError(StoreError, ValueError):
    """
    An OpenClaw 2026.8+ agent database (``openclaw-agent.sqlite``), or one of its rows, cannot be read.

    Raised by :func:`sessionkeeper.openclaw.read_agent_database` for a file that is not SQLite, lacks the
    session tables, or holds a row that does not decode (entry JSON that is not an object, transcript
    text that is not JSON, a zstd payload whose length differs from ``event_utf8_bytes``). Nothing is
    written when it is raised, and the database is never modified.

    Attributes:
        path: The database file.
        where: The row at fault (``"session_nodes 'agent:main:main'"``,
            ``"transcript_events 'abc' seq 3"``), or ``None`` for the whole file.
    """

    def __init__(self, message: str, *, path: Path | str, where: str | None = None) -> None:
        self.path: Path = Path(path)
        self.where = where
        super().__init__(f"{self.path}: {where + ': ' if where else ''}{message}")


class UnsupportedSchemaVersionError(OpenClawDatabaseError):
    """
    An OpenClaw agent database's schema version (``PRAGMA user_version``) is not one sessionkeeper reads.

    Attributes:
        version: The database's version.
        supported: The versions that are read, lowest first.
    """

    def __init__(self, *, path: Path | str, version: int, supported: tuple[int, ...]) -> None:
        self.version = version
        self.supported = supported
        super().__init__(
            f"OpenClaw agent schema version {version} is not supported "
            f"(supported: {supported[0]}-{supported[-1]})",
            path=path,
        )


class StoreUnavailableError(StoreError, ConnectionError):
    """
    A database-backed store could not reach its server (PostgreSQL, Redis), or lost it mid-operation.
    An operation that raised this may or may not have committed: re-read before retrying.
    """


class LockError(SessionKeeperError):
    """Base class for write-lock errors."""


class SessionBusyError(LockError, TimeoutError):
    """
    A transcript's write lock could not be acquired before the timeout (OpenClaw spec §3).

    Attributes:
        path: The file whose lock was wanted.
        waited_ms: How long the caller waited, in milliseconds.
        owner_pid: The pid recorded in the lock file, if it could be read.
        owner_created_at: When the owner took the lock (ms since epoch), if known.
    """

    def __init__(
        self,
        message: str,
        *,
        path: Path | str,
        waited_ms: float,
        owner_pid: int | None = None,
        owner_created_at: int | None = None,
    ) -> None:
        self.path: Path = Path(path)
        self.waited_ms = waited_ms
        self.owner_pid = owner_pid
        self.owner_created_at = owner_created_at
        super().__init__(message)


class StaleLockError(SessionBusyError):
    """
    The lock file is stale but may not be taken: its owner is alive and only too old or over its own
    ``maxHoldMs`` (OpenClaw spec §3 ``SessionWriteLockStaleError``; DESIGN D8: reported, never evicted).

    Attributes:
        stale_reasons: The inspection's reasons, e.g. ``("too-old", "hold-exceeded")``.
    """

    def __init__(
        self,
        message: str,
        *,
        path: Path | str,
        waited_ms: float,
        stale_reasons: tuple[str, ...],
        owner_pid: int | None = None,
        owner_created_at: int | None = None,
    ) -> None:
        self.stale_reasons = stale_reasons
        super().__init__(
            message, path=path, waited_ms=waited_ms, owner_pid=owner_pid, owner_created_at=owner_created_at
        )


class LockNotHeldError(LockError):
    """
    A write-lock handle was used after it stopped holding its lock.

    Attributes:
        path: The transcript the lock was for.
        reason: ``"released"``, ``"disposed"`` or ``"max-hold-exceeded"`` (the watchdog released it).
    """

    def __init__(self, message: str, *, path: Path | str, reason: str) -> None:
        self.path: Path = Path(path)
        self.reason = reason
        super().__init__(message)


class CompactionError(SessionKeeperError):
    """A compaction could not produce a usable summary; nothing was written."""


class CompactionCancelled(CompactionError):  # noqa: N818 - the name mirrors the hook's "cancel" result
    """
    A ``session_before_compact`` hook cancelled the compaction; nothing was written.

    Attributes:
        reason: The reason given by the hook, if any.
    """

    def __init__(self, reason: str | None = None) -> None:
        self.reason = reason
        super().__init__(
            f"compaction cancelled by hook: {reason}" if reason else "compaction cancelled by hook"
        )


class ProviderError(SessionKeeperError):
    """Base class for compaction-provider registry errors."""


class DuplicateProviderError(ProviderError, ValueError):
    """A compaction provider with the same id is already registered (the first registration wins)."""


class UnknownProviderError(ProviderError, LookupError):
    """The configured compaction provider id is not registered."""


class ModelClientError(SessionKeeperError):
    """The host's :class:`~sessionkeeper.ModelClient` raised or returned something unusable."""


class ModelProviderError(ModelClientError):
    """
    A provider API refused or failed a request made by one of the bundled clients
    (:mod:`sessionkeeper.adapters.openai`, :mod:`sessionkeeper.adapters.anthropic`).

    It carries what :func:`~sessionkeeper.is_context_overflow` reads, so an overflow reply (OpenAI's
    ``context_length_exceeded`` 400, Anthropic's ``prompt is too long`` 400) is recognised from it.

    Attributes:
        provider: ``"openai"``, ``"anthropic"`` or the configured provider id.
        message: The provider's error message (``error.message`` of the body when present).
        status_code: The HTTP status, or ``None`` (connection failure, stream error event).
        code: The provider's error ``code`` (OpenAI), when present.
        type: The provider's error ``type`` (``invalid_request_error``, ...), when present.
        body: The decoded error body, when present.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status_code: int | None = None,
        code: str | None = None,
        type: str | None = None,
        body: object = None,
    ) -> None:
        self.provider = provider
        self.message = message
        self.status_code = status_code
        self.code = code
        self.type = type
        self.body = body
        status = f" (HTTP {status_code})" if status_code is not None else ""
        super().__init__(f"{provider}{status}: {message}")


class ContextOverflowError(SessionKeeperError):
    """
    The context still exceeds the model's window after every recovery step (OpenClaw spec §5.7).

    The session mapping is kept: the caller decides what to tell the user.

    Attributes:
        attempts: How many overflow compactions were tried.
        context_tokens: The last known context size in tokens, if any.
    """

    def __init__(self, message: str, *, attempts: int = 0, context_tokens: int | None = None) -> None:
        self.attempts = attempts
        self.context_tokens = context_tokens
        super().__init__(message)
