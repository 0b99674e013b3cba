"""
The transcript storage seam: where a transcript's lines live (issue 12), apart from what a transcript
*is* (header, entry tree, leaf, labels, context: :class:`~sessionkeeper.transcript.TranscriptIndex`).

A storage holds, per session id, an append-only sequence of complete lines (JSON without the ``\\n``;
the first is the session header, pi-format spec §3). Three implementations ship:
:class:`~sessionkeeper.transcript.FileTranscriptStorage` (pi JSONL files ``<sessionId>.jsonl`` in a
directory: the write lock, torn-tail repair, following other writers),
:class:`~sessionkeeper.transcript.MemoryTranscriptStorage` and, in the store layer beside the PostgreSQL
store backend whose pool it shares, :class:`~sessionkeeper.store.PostgresTranscriptStorage` (issue 13:
``(session_id, seq)`` rows holding the exact line bytes). ``sessionkeeper.testing.conformance`` checks
the contract on any of them (:data:`~sessionkeeper.testing.conformance.TRANSCRIPT_STORAGE_CHECKS`).

The contract, in the terms a database implements it with:

- **Marks.** Every read and append returns a :class:`StorageMark`: how many lines the caller has seen
  and their size. An append is conditional on the mark: it lands only when nothing was appended since
  (a compare-and-swap on the end the writer saw, the "leaf CAS" of docs/postgres.md); otherwise it
  raises :class:`~sessionkeeper.exceptions.StaleTranscriptError` and writes nothing, and the writer
  reads what others appended (:meth:`TranscriptStorage.read_since`), re-links its entries and retries.
- **Writer claims.** :meth:`TranscriptStorage.claim` gives one writer the transcript until it
  releases the claim (the file lock; a claim row or advisory lock with a fencing token in a
  database). An append without a claim takes one for that append alone; an append with a claim that
  was lost raises :class:`~sessionkeeper.exceptions.LockNotHeldError` and writes nothing.
- **Idempotency.** An append with an ``idempotency_key`` already used on the transcript writes nothing
  again and returns the mark after the first one (a retry after a lost answer is safe).
- **Compaction claims** (optional, :class:`CompactionClaimStorage`). A storage shared by several
  processes may also offer a second, separate claim per transcript that never blocks appends: the
  compactor holds it while it summarises, so workers that decide to compact one transcript at once call
  the model once (DESIGN D10, ``compaction._flight``). It only saves model calls: a compaction lands
  with the mark-conditional append like any write, so two are never both landed from one snapshot
  whether or not a claim was held.
- **Archives** (optional, :class:`ArchivingTranscriptStorage`; issue 13). The storage equivalent of
  OpenClaw's ``<file>.reset.<stamp>`` / ``<file>.deleted.<stamp>`` renames (spec §1.5, §2.4): an
  archived transcript leaves the live set (reads raise
  :class:`~sessionkeeper.exceptions.TranscriptNotFoundError`, :meth:`TranscriptStorage.list_sessions`
  omits it, a new transcript may be created under its id) and keeps its lines until retention removes
  it (:meth:`ArchivingTranscriptStorage.delete_archive`; store maintenance, spec §2.4).

Where callers could see two storages differ, the contract fixes one answer (each rule is a conformance
check, named in brackets):

- A used idempotency key answers first: the retry returns the first append's mark even when its
  ``claim`` was released or lost since, and its ``mark`` is not checked (nothing is written)
  [``idempotency``].
- An empty append writes nothing and returns ``mark`` as given, unchecked (no claim is taken, a stale
  mark is not refused) [``conditional_append``].
- A claim taken on another transcript is refused: :class:`~sessionkeeper.exceptions.LockNotHeldError`
  (``reason="foreign"``), nothing written [``claims``].
- ``claim(timeout_ms=...)`` takes a positive number of milliseconds (or ``None``); ``0`` or less raises
  :class:`~sessionkeeper.exceptions.LockError` at once [``bad_arguments``].
- A line holding ``b"\\n"`` (in :meth:`TranscriptStorage.create` or :meth:`TranscriptStorage.append`)
  raises :class:`~sessionkeeper.exceptions.TranscriptFormatError` (a ``ValueError``), nothing written
  [``bad_arguments``].
- A session id that is not a safe name (:func:`check_session_id`: empty, ``.``/``..``, a path
  separator or NUL, longer than :data:`MAX_SESSION_ID_BYTES` in UTF-8) raises
  :class:`~sessionkeeper.exceptions.UnsafePathError` (a ``ValueError``) from every method taking one,
  before any I/O [``bad_arguments``].
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Final, Literal, Protocol, runtime_checkable

import attrs

from sessionkeeper._fs import check_safe_name
from sessionkeeper.exceptions import LockError, TranscriptFormatError, UnsafePathError
from sessionkeeper.records import iso_from_ms


__all__ = (
    "ArchiveReason",
    "ArchivingTranscriptStorage",
    "CompactionClaimStorage",
    "StorageMark",
    "TranscriptArchive",
    "TranscriptStorage",
    "WriterClaim",
)

ArchiveReason = Literal["reset", "deleted"]
"""Why a transcript was archived: its session was reset, or its entry removed (spec §2.4)."""

MAX_SESSION_ID_BYTES: Final = 200
"""
The longest session id a storage accepts, in UTF-8 bytes: ``<id>.jsonl.lock`` and OpenClaw's
``<id>-topic-<thread>.jsonl`` must fit the usual 255-byte file-name limit.
"""


def check_session_id(session_id: str) -> str:
    """
    Check ``session_id`` the way every transcript storage does (module docstring).

    Returns:
        ``session_id`` unchanged.

    Raises:
        UnsafePathError: Empty, ``.`` or ``..``, holds ``/``, ``\\`` or NUL, or longer than
            :data:`MAX_SESSION_ID_BYTES` bytes in UTF-8.
    """
    check_safe_name(session_id, what="session id")
    if len(session_id.encode("utf-8", "surrogatepass")) > MAX_SESSION_ID_BYTES:
        raise UnsafePathError(
            f"unsafe session id: {session_id[:40]!r}... is longer than {MAX_SESSION_ID_BYTES} bytes",
            value=session_id,
        )
    return session_id


def archive_stamp(now_ms: int) -> str:
    """
    The stamp of archive names (OpenClaw ``formatSessionArchiveTimestamp``, spec §2.4):
    ``Date.toISOString()`` with ``:`` replaced by ``-``, e.g. ``2026-09-01T02-36-20.208Z``.
    """
    return iso_from_ms(now_ms).replace(":", "-")


def check_lines(lines: Sequence[bytes], *, location: str) -> list[bytes]:
    """
    The lines as a list of ``bytes``, each checked to hold no ``\\n``.

    Raises:
        TranscriptFormatError: A line holds ``b"\\n"`` (``line``: its 1-based number among ``lines``).
    """
    checked = list(map(bytes, lines))
    if b"\n" not in b"".join(checked):  # one scan in C (a copy runs millions of lines through here)
        return checked
    for number, line in enumerate(checked, 1):
        if b"\n" in line:
            raise TranscriptFormatError(
                "a transcript line must not hold a newline; nothing was written", path=location, line=number
            )
    return checked


def check_claim_timeout(timeout_ms: float | None) -> None:
    """
    Raises:
        LockError: ``timeout_ms`` is not ``None`` and not positive.
    """
    if timeout_ms is not None and not timeout_ms > 0:
        raise LockError(f"timeout_ms must be positive, got {timeout_ms!r}")


@attrs.frozen(kw_only=True)
class StorageMark:
    """
    How much of one transcript a reader or writer has seen: the CAS target of its next append.

    Attributes:
        lines: Complete lines seen (the header and blank lines included).
        size: Their size in bytes, each with its ``\\n`` (the file offset just after them; a database
            keeps the same running count).
        token: The storage's own detail, compared for equality only (the file's identity and last
            bytes; a generation for memory). Callers never build one; they pass back what they got.
    """

    lines: int
    size: int
    token: object = attrs.field(default=None, eq=True, repr=False)


@runtime_checkable
class WriterClaim(Protocol):
    """
    A writer's exclusive right to append to one transcript, from :meth:`TranscriptStorage.claim` until
    :meth:`release` (for the file storage: :class:`~sessionkeeper.transcript.SessionWriteLock`).
    """

    @property
    def held(self) -> bool:
        """Whether the claim is still held (``False`` after :meth:`release` or when it was lost)."""
        ...

    def ensure_held(self) -> None:
        """
        Raise unless the claim is held.

        Raises:
            LockNotHeldError: Released or lost (a watchdog's ``max_hold_ms``, a superseded writer).
        """
        ...

    async def release(self) -> None:
        """Give the claim up; a second call, or one after the claim was lost, does nothing."""
        ...


@runtime_checkable
class TranscriptStorage(Protocol):
    """
    Where transcripts' lines live, keyed by session id (module docstring: marks, claims, idempotency).

    Lines are ``bytes`` without their ``\\n``, stored and returned byte for byte. A session id must be a
    safe name (no path separators; :class:`~sessionkeeper.exceptions.UnsafePathError` otherwise).
    """

    def location(self, session_id: str) -> str:
        """Where the transcript lives, for messages and ``parentSession`` (a path, or a URI)."""
        ...

    async def create(self, session_id: str, lines: Sequence[bytes]) -> StorageMark:
        """
        Create the transcript holding ``lines`` (the header first), all written at once.

        Raises:
            FileExistsError: It exists already (it is never overwritten).
        """
        ...

    async def read(self, session_id: str) -> tuple[list[bytes], StorageMark]:
        """
        Every complete line (a last line still being written, or torn, is left out) and their mark.

        Raises:
            TranscriptNotFoundError: There is no such transcript.
        """
        ...

    async def read_since(self, session_id: str, mark: StorageMark) -> tuple[list[bytes], StorageMark]:
        """
        The complete lines appended after ``mark`` (by anyone), and the mark after them.

        Raises:
            TranscriptNotFoundError: The transcript is gone.
            TranscriptChangedError: It was rewritten or replaced since ``mark`` (reopen it).
        """
        ...

    async def append(
        self,
        session_id: str,
        lines: Sequence[bytes],
        *,
        mark: StorageMark,
        claim: WriterClaim | None = None,
        idempotency_key: str | None = None,
    ) -> StorageMark:
        """
        Append complete ``lines`` in one write, only if nothing was appended since ``mark``.

        Args:
            session_id: The transcript.
            lines: The lines (no ``\\n`` inside); an empty sequence appends nothing.
            mark: What the writer has seen (from :meth:`create`, :meth:`read`, :meth:`read_since` or
                its last append).
            claim: The writer's held claim (:meth:`claim`); ``None``: one is taken for this append.
            idempotency_key: A retry with a key already used writes nothing and returns the mark
                after the first append.

        Returns:
            The mark just after the appended lines.

        Raises:
            StaleTranscriptError: Lines were appended since ``mark``; nothing was written.
            LockNotHeldError: ``claim`` is not held; nothing was written.
            SessionBusyError: No claim could be taken in time.
            TranscriptNotFoundError: The transcript is gone.
            TranscriptChangedError: It was rewritten or replaced since ``mark``.
        """
        ...

    def read_backwards(self, session_id: str) -> AsyncIterator[bytes]:
        """
        The complete lines from the last to the first (the header last), read lazily from the end.

        Raises:
            TranscriptNotFoundError: There is no such transcript (on the first iteration).
        """
        ...

    async def claim(self, session_id: str, *, timeout_ms: float | None = None) -> WriterClaim:
        """
        Take the transcript's writer claim, waiting up to ``timeout_ms`` (``None``: the storage's
        default; the file storage's is :attr:`WriteLockSettings.acquire_timeout_ms`).

        Raises:
            SessionBusyError: Another writer holds it past the timeout.
        """
        ...

    async def list_sessions(self) -> list[str]:
        """The session ids of every stored transcript, sorted."""
        ...

    async def delete(self, session_id: str) -> bool:
        """Remove the transcript; ``False`` when there was none."""
        ...


@runtime_checkable
class CompactionClaimStorage(Protocol):
    """
    A :class:`TranscriptStorage` that also coordinates compactions across writers (module docstring,
    "Compaction claims"; :class:`~sessionkeeper.transcript.MemoryTranscriptStorage` in its process, a
    database storage across processes and machines).

    The claim is independent of the writer claim (:meth:`TranscriptStorage.claim`): holding it blocks
    no append, only other compactions' summarising.
    """

    async def claim_compaction(self, session_id: str) -> WriterClaim | None:
        """
        Take the transcript's compaction claim if no one holds it, without waiting.

        A holder that dies loses it (memory: with its process; a database: with its connection), so a
        crashed worker never blocks the next compaction.

        Returns:
            The claim (give it back with :meth:`WriterClaim.release`), or ``None`` when another writer
            holds it (poll again, or compact without it: the landing check still guards the transcript).

        Raises:
            UnsafePathError: ``session_id`` is not a safe name.
        """
        ...


@attrs.frozen(kw_only=True)
class TranscriptArchive:
    """
    One archived transcript (:class:`ArchivingTranscriptStorage`; OpenClaw spec §2.4).

    Attributes:
        name: The storage's name for it, unique in the storage (the file storage:
            ``<sessionId>.jsonl.<reason>.<stamp>``, the file's name; memory and PostgreSQL:
            ``<sessionId>/<reason>/<stamp>``, never a session id, which holds no ``/``).
        session_id: The session id the transcript had.
        reason: ``"reset"`` or ``"deleted"``.
        archived_at_ms: When it was archived, ms since epoch (the file storage: the name's stamp, whole ms).
        size: Its bytes, each line with its newline (the file's size).
    """

    name: str
    session_id: str
    reason: ArchiveReason
    archived_at_ms: int
    size: int


@runtime_checkable
class ArchivingTranscriptStorage(Protocol):
    """
    A :class:`TranscriptStorage` that can archive a transcript instead of deleting it (module docstring,
    "Archives"): what a session reset (``<file>.reset.<stamp>``) and store maintenance
    (``<file>.deleted.<stamp>``) do to a transcript file, for transcripts that are not files. All three
    shipped storages are; ``sessionkeeper.testing.conformance`` checks it (``archives``).
    """

    async def archive(
        self, session_id: str, *, reason: ArchiveReason, now_ms: int
    ) -> TranscriptArchive | None:
        """
        Move the transcript out of the live set, keeping its lines (module docstring, "Archives").

        Args:
            session_id: The transcript.
            reason: ``"reset"`` or ``"deleted"`` (which retention rule applies, spec §2.4).
            now_ms: The archive's time stamp (ms since epoch; the store's clock).

        Returns:
            The archive, or ``None`` when there was no such transcript (nothing done).

        Raises:
            UnsafePathError: ``session_id`` is not a safe name.
            FileExistsError: An archive of the same name exists (the same id, reason and millisecond);
                nothing was moved.
        """
        ...

    async def list_archives(self) -> list[TranscriptArchive]:
        """Every archive of the storage, oldest first (then by name); reads no line."""
        ...

    async def delete_archive(self, name: str) -> bool:
        """Remove the archive ``name`` (:attr:`TranscriptArchive.name`) and its lines; ``False`` if none."""
        ...
