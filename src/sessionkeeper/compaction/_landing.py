"""
Landing a compaction safely when other writers share the transcript (issue #7).

A compaction is planned and summarised without the write lock (a summary takes seconds), from a
snapshot of the branch. It then *lands* in one critical section (:func:`landing`): with the write
lock held (and one landing at a time per manager in this process), the manager picks up what other
writers appended meanwhile (``TranscriptManager.refresh``), :func:`check_landing` compares the path
it would now hang from with the planned branch, and the caller writes the entry (and a successor
transcript) before the lock is released. The rules:

- the planned branch's last entry is no longer on the path to the leaf the entry would hang from
  (someone branched away): ``superseded``, nothing is written;
- a ``compaction`` entry that was not on the planned branch is on that path (another compactor landed
  first): ``superseded``, nothing is written (two compactions planned from one snapshot never both
  land);
- otherwise the entry lands as a child of the tip: every entry appended during the summarisation
  comes after it on the path and stays in the context (after ``firstKeptEntryId``). A strict
  checkpoint (planned ``firstKeptEntryId`` = its own id) that others wrote after keeps those
  entries: its ``firstKeptEntryId`` becomes the first of them (:attr:`LandingCheck.first_kept_entry_id`).

The entry itself is written by :func:`land_compaction`, which checks once more under the manager's
own write lock, against the leaf the entry is written under: another task of the same manager may
append (or navigate) between :func:`landing`'s check and the write, and a strict checkpoint must keep
that entry too.

A transcript in a storage shared without a write lock (memory, a database: ``TranscriptManager.storage``;
issue 13) has no critical section across writers: another worker may append between the check and the
write. There the entry is written with an *exact* conditional append (it lands only right after the
lines the check saw, the storage's mark compare-and-swap); when another writer appended first the
append raises ``StaleTranscriptError`` and writes nothing, and the landing picks their lines up and
checks again (a compaction among them supersedes this one), so two compactions planned from one
snapshot never both land, on any storage, with no lock held across workers.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import AsyncIterator, Sequence
from typing import Any, Literal, TypeAlias

import anyio
import attrs
from msgspec import UNSET

from sessionkeeper.compaction._cut import entry_kind
from sessionkeeper.exceptions import StaleTranscriptError
from sessionkeeper.transcript import CompactionEntry, TranscriptEntry, TranscriptManager


__all__ = (
    "LandingCheck",
    "LandingVerdict",
    "check_landing",
    "land_compaction",
    "landing",
    "locked_and_current",
)

LandingVerdict: TypeAlias = Literal["land", "superseded"]

MAX_LANDING_TRIES = 100
"""Exact appends a landing on a storage tries (each after picking up what other writers appended)."""


@attrs.frozen(kw_only=True)
class LandingCheck:
    """
    Whether a planned compaction may still be written, and where.

    Attributes:
        verdict: ``"land"`` or ``"superseded"`` (write nothing).
        reason: Why it was superseded (``None`` when it lands).
        arrived: Ids of the entries on the path after the planned branch (written meanwhile), in
            path order.
        parent_id: The entry the compaction will hang from (the leaf after the pick-up).
    """

    verdict: LandingVerdict
    reason: str | None = None
    arrived: tuple[str, ...] = ()
    parent_id: str | None = None

    @property
    def superseded(self) -> bool:
        """Whether nothing may be written."""
        return self.verdict == "superseded"

    def first_kept_entry_id(self, planned: str | None) -> str | None:
        """
        The ``firstKeptEntryId`` to write for a planned one (``None`` = a strict checkpoint, the entry's
        own id): a strict checkpoint keeps the entries that arrived during the summarisation.
        """
        if planned is None and self.arrived:
            return self.arrived[0]
        return planned


def check_landing(planned: Sequence[TranscriptEntry], path: Sequence[TranscriptEntry]) -> LandingCheck:
    """
    Decide whether a compaction planned on ``planned`` may land on ``path`` (module docstring).

    Args:
        planned: The branch the compaction was planned from, root first (non-empty).
        path: The path, root first, to the leaf the entry would hang from now (after picking up other
            writers' lines).

    Returns:
        The :class:`LandingCheck`.
    """
    parent_id = path[-1].id if path else None
    if not planned:
        return LandingCheck(verdict="land", arrived=tuple(e.id for e in path), parent_id=parent_id)
    last = planned[-1].id
    position = next((i for i in range(len(path) - 1, -1, -1) if path[i].id == last), -1)
    if position < 0:
        return LandingCheck(
            verdict="superseded",
            reason=f"the planned branch (ending at {last}) is no longer on the path to the leaf",
            parent_id=parent_id,
        )
    arrived = path[position + 1 :]
    other = next((e for e in arrived if entry_kind(e) == "compaction"), None)
    if other is not None:
        return LandingCheck(
            verdict="superseded",
            reason=f"another compaction ({other.id}) landed on this branch first",
            arrived=tuple(e.id for e in arrived),
            parent_id=parent_id,
        )
    return LandingCheck(verdict="land", arrived=tuple(e.id for e in arrived), parent_id=parent_id)


_LANDING_LOCKS: weakref.WeakKeyDictionary[TranscriptManager, anyio.Lock] = weakref.WeakKeyDictionary()


@contextlib.asynccontextmanager
async def locked_and_current(transcript: TranscriptManager) -> AsyncIterator[None]:
    """
    Hold the transcript's write lock for the block and pick up other writers' lines first
    (:meth:`TranscriptManager.refresh`), so what the block reads is the file as it is and stays so.

    The lock is not taken when the manager already holds it (:meth:`TranscriptManager.hold_write_lock`,
    e.g. inside :func:`landing`), has :attr:`TranscriptManager.locking` off, or has no file.

    Raises:
        SessionBusyError: The write lock was not acquired in time.
        TranscriptChangedError: The file was replaced or shrank since the manager read it.
    """
    needs_lock = transcript.path is not None and transcript.locking and transcript.held_write_lock is None
    async with transcript.hold_write_lock() if needs_lock else contextlib.nullcontext():
        await transcript.refresh()
        yield


@contextlib.asynccontextmanager
async def landing(
    transcript: TranscriptManager, planned: Sequence[TranscriptEntry]
) -> AsyncIterator[LandingCheck]:
    """
    The critical section of a compaction's landing: yields the :class:`LandingCheck`; write the entry
    (and anything that must see the same file state, e.g. a successor transcript) inside it.

    Holds, for the whole block: one landing at a time per manager in this process, and the
    transcript's write lock (see :func:`locked_and_current`, which also picks up other writers' lines
    first).

    Raises:
        SessionBusyError: The write lock was not acquired in time.
        TranscriptChangedError: The file was replaced or shrank since the manager read it.
    """
    lock = _LANDING_LOCKS.get(transcript)
    if lock is None:
        lock = _LANDING_LOCKS[transcript] = anyio.Lock()
    async with lock, locked_and_current(transcript):
        yield check_landing(planned, transcript.get_branch())


async def land_compaction(
    transcript: TranscriptManager,
    planned: Sequence[TranscriptEntry],
    *,
    summary: str,
    first_kept_entry_id: str | None,
    tokens_before: int,
    details: Any,
    from_hook: bool,
) -> tuple[LandingCheck, CompactionEntry | None]:
    """
    Write a planned compaction's entry inside :func:`landing`, checking once more under the manager's
    write lock (:func:`check_landing` on the path to the leaf the entry is written under).

    The entry hangs from that checked leaf even if a writer that takes no lock (pi) appended after
    the landing's pick-up: following the tip there would put it under an entry the check never saw
    (another branch, another compaction).

    Args:
        transcript: The transcript (inside ``landing(transcript, planned)``).
        planned: The branch the compaction was planned from.
        summary, tokens_before, details, from_hook: The entry's fields (``details`` may be ``UNSET``).
        first_kept_entry_id: The planned ``firstKeptEntryId``; ``None`` for a strict checkpoint (it
            then keeps the entries that arrived after the planned branch, see
            :meth:`LandingCheck.first_kept_entry_id`).

    On a storage shared without a write lock the write is an exact conditional append, tried again
    after picking up other writers' lines (module docstring).

    Returns:
        ``(the final check, the entry)``; the entry is ``None`` (nothing written) when the final check
        is ``superseded``.

    Raises:
        StaleTranscriptError: On a storage, other writers appended before each of
            :data:`MAX_LANDING_TRIES` tries; nothing was written.
    """
    checks: list[LandingCheck] = []

    def build(entry_id: str, parent_id: str | None, timestamp: str) -> CompactionEntry | None:
        check = check_landing(planned, transcript.get_branch())
        checks.append(check)
        if check.superseded:
            return None
        kept = check.first_kept_entry_id(first_kept_entry_id)
        return CompactionEntry(
            id=entry_id,
            parent_id=parent_id,
            timestamp=timestamp,
            summary=summary,
            first_kept_entry_id=entry_id if kept is None else kept,
            tokens_before=tokens_before,
            details=details,
            from_hook=from_hook,
            # pi 1.6: the instructions survive the compaction (issue 18); none on a pi 0.73 transcript
            system_message=transcript.compaction_system_message(parent_id, timestamp) or UNSET,
        )

    if transcript.storage is None:  # a file (under its write lock) or a transcript only in memory
        entry: CompactionEntry | None = await transcript._append(build, follow=False)
        return checks[-1], entry
    for _ in range(MAX_LANDING_TRIES):
        try:
            entry = await transcript._append_exact(build)
        except StaleTranscriptError:
            await transcript.refresh()  # their lines, then check again on the path they make
            continue
        return checks[-1], entry
    raise StaleTranscriptError(
        f"other writers appended before each of {MAX_LANDING_TRIES} tries to land the compaction;"
        " nothing was written",
        path=transcript.location,
    )
