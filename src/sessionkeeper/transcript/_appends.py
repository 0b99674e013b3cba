"""
Appending to a transcript: every entry type as a typed child of the leaf, one write per call (D7), ids
drawn unique, other writers followed at the tip (pi-format spec §4-5; issue #7). Where the lines go is
``_write_lines``: nowhere for a transcript in memory, the file for
:class:`~sessionkeeper.transcript.TranscriptManager`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeAlias, TypeVar, cast

import msgspec
from msgspec import UNSET, UnsetType

from sessionkeeper._clock import Clock
from sessionkeeper.exceptions import EntryNotFoundError, TranscriptFormatError
from sessionkeeper.records import (
    AgentMessage,
    BranchSummaryEntry,
    BranchSummaryMessage,
    CompactionEntry,
    CompactionSummaryMessage,
    CustomEntry,
    CustomMessage,
    CustomMessageEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionInfoEntry,
    SystemMessage,
    ThinkingLevelChangeEntry,
    TranscriptEntry,
    Usage,
    UserContent,
    encode_entry,
    entry_from_json,
    iso_from_ms,
)
from sessionkeeper.transcript._load import TranscriptIndex, js_trim, new_entry_id
from sessionkeeper.transcript._pi16_writes import Pi16Appends
from sessionkeeper.transcript._riders import AppendRider
from sessionkeeper.transcript._view import TranscriptView
from sessionkeeper.transcript.file._follow import PendingWrite
from sessionkeeper.transcript.lock._local import ThreadSafeLock


__all__ = ("EntryBuilder", "TranscriptAppends", "message_entry_of")

E = TypeVar("E", bound=TranscriptEntry)

EntryBuilder: TypeAlias = Callable[[str, str | None, str], E | None]
"""
Builds the entry an append writes: ``build(entry_id, parent_id, timestamp) -> entry``; returning
``None`` writes nothing (:meth:`TranscriptManager.append_with`).
"""


def message_entry_of(message: AgentMessage) -> Callable[[str, str | None, str], MessageEntry]:
    """
    The :data:`EntryBuilder` of the ``message`` entry holding ``message`` (spec §5.1).

    Raises:
        TypeError: ``message`` is a compaction/branch summary or a custom message, stored as their own
            entry types (spec §16.5).
    """
    if isinstance(message, CompactionSummaryMessage | BranchSummaryMessage | CustomMessage):
        raise TypeError(
            f"{type(message).__name__} is not stored as a message entry; use the dedicated append method"
        )
    return lambda i, p, t: MessageEntry(id=i, parent_id=p, timestamp=t, message=message)


def _new_write_lock() -> ThreadSafeLock:
    """
    The lock that serialises this manager's appends, from any task, event loop or thread (issue 15
    item 6: with ``anyio.Lock`` a manager used by two threads, each with its own ``anyio.run``, deadlocked
    after the first append).

    Uncontended, it is taken without a trip through the event loop (the write checks for cancellation
    right after: ``checkpoint_if_cancelled`` before an inline write, the worker-thread call otherwise).
    """
    return ThreadSafeLock()


def _draw_entry_id(taken: dict[str, int]) -> str:
    """
    :func:`new_entry_id`'s rule with a faster first draw: 8 random hex digits (32 bits from
    ``os.urandom``, exactly what the first 8 hex digits of a UUID v4 hold); on a collision it falls
    back to :func:`new_entry_id` (redraws, then a full UUID after 100 collisions; spec §4).
    """
    candidate = os.urandom(4).hex()
    return candidate if candidate not in taken else new_entry_id(taken)


class TranscriptAppends(TranscriptView, Pi16Appends):
    """
    A :class:`TranscriptView` that appends: each ``append_*`` creates a child of the leaf, moves the
    leaf to it and returns it; appends are serialised (from any task, event loop or thread). The pi 1.6
    entries and conventions (:attr:`pi_generation`) come from :class:`Pi16Appends`.
    """

    def __init__(self, index: TranscriptIndex, *, path: Path | None, clock: Clock) -> None:
        """Internal: the manager builds it."""
        super().__init__(index, path=path, clock=clock)
        self._write_lock = _new_write_lock()
        self._stamp_second: int | None = None  # the second whose ISO prefix is in _stamp_prefix
        self._stamp_prefix = ""

    async def _write_lines(self, pending: PendingWrite, rider: AppendRider | None = None) -> bool:
        """
        Where an append's lines go: nowhere here (the transcript lives in memory); files and storages
        override it. Returns whether ``rider`` was landed with the lines (here never: it runs after).
        """
        return False

    async def refresh(self) -> int:
        """Pick up what other writers appended: a transcript in memory has none (``0``)."""
        return 0

    def _timestamp(self) -> str:
        """``iso_from_ms(clock.now_ms())``, reusing the formatted date and time of the same second."""
        second, millis = divmod(self._clock.now_ms(), 1000)
        if second != self._stamp_second:
            self._stamp_prefix = iso_from_ms(second * 1000)[:-4]  # drop "000Z"
            self._stamp_second = second
        return f"{self._stamp_prefix}{millis:03d}Z"

    def _encoded(self, entry: E) -> tuple[E, bytes]:
        """
        ``entry`` and its line. A value JSON cannot hold raises; lone surrogates are written as
        U+FFFD, and the entry is then the one the line holds (what a reload reads).

        Raises:
            TranscriptFormatError: ``entry`` holds a value JSON cannot represent.
        """
        try:
            line = encode_entry(entry)
        except (TypeError, ValueError, NotImplementedError, OverflowError) as err:
            raise TranscriptFormatError(
                f"cannot write a {type(entry).__name__} as JSON: {err}; nothing was written",
                path=self._path,
            ) from err
        if b"\xef\xbf\xbd" in line:  # lone surrogates were replaced: keep what the file holds
            entry = cast("E", entry_from_json(msgspec.json.decode(line)))  # same type, decoded back
        return entry, line

    async def _append_chain(
        self,
        builds: Sequence[EntryBuilder[E]],
        *,
        follow: bool,
        exact: bool = False,
        rider: AppendRider | None = None,
    ) -> list[E] | None:
        """
        Build, write (in one write) and index a chain of entries, each a child of the one before, the
        first a child of the leaf; ``follow``: move the chain under the new last entry when other
        writers appended and the leaf was at the tip (class docstring).

        The builders run under the manager's write lock, so they see the index and leaf the entries
        are written against; when one returns ``None`` nothing is written and ``None`` is returned.
        ``exact``: other writers' lines refuse the write (``StaleTranscriptError``) instead of re-linking it.
        ``rider``: landed with the lines when the storage carries it, else run on its own after them
        (``_riders``; not run when nothing is written).
        """
        async with self._write_lock:
            at_tip = follow and not self._navigated and self._leaf_id == self._index.leaf_id
            timestamp = self._timestamp()
            parent = self._leaf_id
            drawn: set[str] = set()
            entries: list[E] = []
            lines: list[bytes] = []
            for build in builds:
                entry_id = _draw_entry_id(self._index.by_id)
                while entry_id in drawn:
                    entry_id = _draw_entry_id(self._index.by_id)
                drawn.add(entry_id)
                built = build(entry_id, parent, timestamp)
                if built is None:
                    return None
                entry, line = self._encoded(built)
                entries.append(entry)
                lines.append(line)
                parent = entry.id
            pending = PendingWrite(entries, lines, follow=at_tip, known=self._index.by_id, exact=exact)
            # without a rider, the one-argument seam call (tests and wrappers wrap that shape)
            carried = bool(
                await self._write_lines(pending, rider) if rider else await self._write_lines(pending)
            )
            for written, line in zip(pending.entries, pending.lines, strict=True):
                self._index.add(written, line)
            self._leaf_id = pending.entries[-1].id
            self._navigated = False
        if rider is not None and not carried:
            await rider.run_alone()  # its errors are the rider owner's to raise (AppendRider)
        return cast("list[E]", pending.entries)  # re-linked at most, same types

    async def append_with(self, build: EntryBuilder[E], *, follow: bool = True) -> E | None:
        """
        Append the entry ``build(entry_id, parent_id, timestamp)`` returns, as a child of the leaf, and
        move the leaf to it; every ``append_*`` method is this with its entry type.

        ``build`` runs under the manager's write lock with a fresh id, the leaf and the timestamp the
        entry is written with, so it sees the index and leaf the entry is written against; when it
        returns ``None`` nothing is written and ``None`` is returned (a compaction landing that is
        superseded, see ``compaction._landing``).

        Args:
            build: Makes the entry.
            follow: When other writers appended and the leaf was at the tip, hang the entry under
                the new last entry (class docstring); ``False``: under the leaf, whatever they wrote.

        Raises:
            TranscriptFormatError: The entry holds a value JSON cannot represent; nothing was written.
            OSError: The write failed; nothing was added.
        """
        written = await self._append_chain([build], follow=follow)
        return None if written is None else written[0]

    async def append_chain(
        self,
        builds: Sequence[EntryBuilder[TranscriptEntry]],
        *,
        follow: bool = True,
        rider: AppendRider | None = None,
    ) -> list[TranscriptEntry] | None:
        """
        Append the entries ``builds`` return, each a child of the one before (the first a child of the
        leaf), in one write: one lock round, one thread hop and one fsync; the leaf moves to the last.

        :meth:`append_with` for several entries of any types (a turn's reply and the ``custom`` marker
        written after it): the builders run in order under the manager's write lock, with fresh ids,
        their parent and one timestamp for the chain. A crash during the write leaves a prefix of
        complete entries and at most a torn last line, as for :meth:`append_messages`.

        Args:
            builds: Make the entries, oldest first; an empty sequence writes nothing (``[]``).
            follow: As for :meth:`append_with`.
            rider: A write to land with them, as for :meth:`append_messages` (a database turn's reply,
                its cache-TTL marker and its store entry update in one commit); not run when nothing is
                written (no builds, or a builder returned ``None``).

        Returns:
            The entries written, in order; ``None`` (nothing written) when a builder returned ``None``.

        Raises:
            TranscriptFormatError: An entry holds a value JSON cannot represent; nothing was written.
            OSError: The write failed; nothing was added.
        """
        if not builds:
            return []
        return await self._append_chain(builds, follow=follow, rider=rider)

    _append = append_with  # the name compaction._landing calls

    async def _append_exact(self, build: EntryBuilder[E]) -> E | None:
        """
        :meth:`append_with` (under the leaf, never following) that lands only if no other writer
        appended since this manager last saw the transcript: a compaction landing on a storage shared
        without a write lock (``compaction._landing``), whose ``build`` checked the path it saw.

        Raises:
            StaleTranscriptError: Other writers appended first; nothing was written or indexed
                (:meth:`refresh`, then build again).
        """
        written = await self._append_chain([build], follow=False, exact=True)
        return None if written is None else written[0]

    async def _append_one(self, build: Callable[[str, str | None, str], E], *, follow: bool = True) -> E:
        """:meth:`append_with` for a builder that always builds."""
        written = await self._append_chain([build], follow=follow)
        assert written is not None
        return written[0]

    async def append_message(self, message: AgentMessage) -> MessageEntry:
        """
        Append a ``message`` entry (spec §5.1) for a user, assistant, toolResult or bashExecution message.

        Raises:
            TypeError: ``message`` is a compaction/branch summary or a custom message: those are
                stored as their own entry types (:meth:`append_compaction`,
                :meth:`branch_with_summary`, :meth:`append_custom_message`; spec §16.5).
            OSError: The write failed; nothing was added.
        """
        return (await self.append_messages([message]))[0]

    async def append_messages(
        self, messages: Sequence[AgentMessage], *, rider: AppendRider | None = None
    ) -> list[MessageEntry]:
        """
        Append several ``message`` entries, each a child of the previous one, in one write.

        ``rider``: a write to land with them (:class:`~sessionkeeper.transcript.AppendRider`): in the
        append's transaction when the storage carries it (a :class:`RidingStorage`), else on its own
        right after the append landed.

        What :meth:`append_message` does for each message, with one lock round, one thread hop and
        one fsync for all of them: the durable unit of an agent turn (reply and tool results). A
        crash during the write leaves a prefix of complete entries and at most a torn last line,
        which the next append cuts (as for any append).

        Raises:
            TypeError: A message is stored as its own entry type (see :meth:`append_message`);
                nothing was written.
            TranscriptFormatError: A message holds a value JSON cannot represent; nothing was written.
            OSError: The write failed; nothing was added.
        """
        builds = [message_entry_of(m) for m in messages]
        if not builds:
            return []
        written = await self._append_chain(builds, follow=True, rider=rider)
        assert written is not None
        return written

    async def append_thinking_level_change(self, thinking_level: str) -> ThinkingLevelChangeEntry:
        """Append a ``thinking_level_change`` (spec §5.2): ``off|minimal|low|medium|high|xhigh``."""
        result: ThinkingLevelChangeEntry = await self._append_one(
            lambda i, p, t: ThinkingLevelChangeEntry(
                id=i, parent_id=p, timestamp=t, thinking_level=thinking_level
            )
        )
        return result

    async def append_model_change(self, provider: str, *, model_id: str) -> ModelChangeEntry:
        """Append a ``model_change`` (spec §5.3)."""
        result: ModelChangeEntry = await self._append_one(
            lambda i, p, t: ModelChangeEntry(
                id=i, parent_id=p, timestamp=t, provider=provider, model_id=model_id
            )
        )
        return result

    async def append_compaction(
        self,
        *,
        summary: str,
        first_kept_entry_id: str | None,
        tokens_before: int,
        details: Any | UnsetType = UNSET,
        from_hook: bool | UnsetType = UNSET,
        usage: Usage | UnsetType = UNSET,
        system_message: SystemMessage | UnsetType | None = UNSET,
    ) -> CompactionEntry:
        """
        Append a ``compaction`` entry (spec §5.4, §13.5). ``first_kept_entry_id`` is not validated,
        as in pi (hook-supplied compactions are written verbatim).

        Args:
            summary: The summary text.
            first_kept_entry_id: First entry kept verbatim (on the path before this entry). ``None`` writes
                a strict checkpoint: the entry's own id, so the rebuilt context starts from the summary and
                keeps nothing before it (OpenClaw's hardened boundary, spec openclaw.md §5.8; pi §9 6b).
            tokens_before: Context tokens before compaction.
            details: pi writes ``{"readFiles": [...], "modifiedFiles": [...]}``; omitted when ``UNSET``.
            from_hook: ``False`` for our own compactions, ``True`` when a hook supplied it.
            usage: Usage of the summariser call(s) (pi 1.6); omitted when ``UNSET``.
            system_message: pi 1.6 ``systemMessage``, the complete prompt and tools at this boundary.
                ``UNSET`` (default): on a :attr:`pi_generation` ``"1.6"`` transcript, the current system
                message of the leaf's context (as pi 1.6.0's ``appendCompaction``), else none;
                ``None``: none.
        """
        result: CompactionEntry = await self._append_one(
            lambda i, p, t: CompactionEntry(
                id=i,
                parent_id=p,
                timestamp=t,
                summary=summary,
                first_kept_entry_id=i if first_kept_entry_id is None else first_kept_entry_id,
                tokens_before=tokens_before,
                details=details,
                usage=usage,
                from_hook=from_hook,
                system_message=self._boundary_system_message(system_message, p, t),
            )
        )
        return result

    async def append_custom(self, custom_type: str, *, data: Any | UnsetType = UNSET) -> CustomEntry:
        """Append a ``custom`` entry: extension state, never in the model context (spec §5.6)."""
        result: CustomEntry = await self._append_one(
            lambda i, p, t: CustomEntry(custom_type=custom_type, data=data, id=i, parent_id=p, timestamp=t)
        )
        return result

    async def append_custom_message(
        self,
        custom_type: str,
        *,
        content: str | list[UserContent],
        display: bool = True,
        details: Any | UnsetType = UNSET,
    ) -> CustomMessageEntry:
        """Append a ``custom_message``: sent to the model as a user message (spec §5.7)."""
        result: CustomMessageEntry = await self._append_one(
            lambda i, p, t: CustomMessageEntry(
                custom_type=custom_type,
                content=content,
                display=display,
                details=details,
                id=i,
                parent_id=p,
                timestamp=t,
            )
        )
        return result

    async def append_label(self, target_id: str, label: str | None) -> LabelEntry:
        """
        Set (non-empty ``label``) or clear (``None`` or ``""``) the label of ``target_id`` (spec §5.8).

        An id this manager has not seen is looked for among the lines other writers appended since it
        last read the file (:meth:`refresh`) before the call fails.

        Raises:
            EntryNotFoundError: ``target_id`` is not in the transcript.
            TranscriptChangedError: Looking for it found the file shrunk or replaced (see :meth:`refresh`).
        """
        if target_id not in self._index.by_id:
            await self.refresh()
            if target_id not in self._index.by_id:
                raise EntryNotFoundError(target_id)
        value: str | UnsetType = UNSET if label is None else label
        result: LabelEntry = await self._append_one(
            lambda i, p, t: LabelEntry(id=i, parent_id=p, timestamp=t, target_id=target_id, label=value)
        )
        return result

    async def append_session_info(self, name: str) -> SessionInfoEntry:
        """Set the session's display name (stored trimmed; an empty name clears it, spec §5.9)."""
        result: SessionInfoEntry = await self._append_one(
            lambda i, p, t: SessionInfoEntry(id=i, parent_id=p, timestamp=t, name=js_trim(name))
        )
        return result

    async def branch_with_summary(
        self,
        entry_id: str | None,
        summary: str,
        *,
        details: Any | UnsetType = UNSET,
        from_hook: bool | UnsetType = UNSET,
        usage: Usage | UnsetType = UNSET,
    ) -> BranchSummaryEntry:
        """
        Move the leaf to ``entry_id`` (``None``: before the first entry) and append a ``branch_summary``
        child there (spec §4, §5.5). ``fromId`` follows :attr:`pi_generation`: ``"0.73"`` the target
        ``entry_id`` (``"root"`` for ``None``), ``"1.6"`` the abandoned leaf (``"root"`` when there was
        none). ``usage``: the summariser call's usage (pi 1.6).

        Raises:
            EntryNotFoundError: ``entry_id`` is not in the transcript.
        """
        if entry_id is not None and entry_id not in self._index.by_id:
            raise EntryNotFoundError(entry_id)
        from_id = self._summary_from_id(entry_id)
        self._leaf_id = entry_id
        result: BranchSummaryEntry = await self._append_one(
            lambda i, p, t: BranchSummaryEntry(
                id=i,
                parent_id=entry_id,
                timestamp=t,
                from_id=from_id,
                summary=summary,
                details=details,
                usage=usage,
                from_hook=from_hook,
            ),
            follow=False,  # hangs where it was asked to, whatever others appended
        )
        return result

    async def append_branch_summary(
        self,
        summary: str,
        *,
        details: Any | UnsetType = UNSET,
        from_hook: bool | UnsetType = UNSET,
        usage: Usage | UnsetType = UNSET,
    ) -> BranchSummaryEntry:
        """Append a ``branch_summary`` at the current leaf (:meth:`branch_with_summary` there)."""
        return await self.branch_with_summary(
            self._leaf_id, summary, details=details, from_hook=from_hook, usage=usage
        )
