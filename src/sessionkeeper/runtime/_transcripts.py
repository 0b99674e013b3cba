"""
Where the runtime's sessions' transcripts come from: opening the one a store entry names, and following
the successor another writer's rotation gave the entry (OpenClaw §5.8).
"""

from __future__ import annotations

import json
import os
import weakref
from pathlib import Path

import anyio

from sessionkeeper.compaction import SuccessorTranscript
from sessionkeeper.exceptions import TranscriptNotFoundError, UnsafePathError
from sessionkeeper.runtime._parts import RuntimeParts
from sessionkeeper.runtime._runtime_session import RuntimeSession
from sessionkeeper.store import PostgresTranscriptStorage, SessionEntry
from sessionkeeper.transcript import TranscriptManager, read_header


__all__ = ("TranscriptSource", "same_lineage")

_MAX_SUCCESSOR_HOPS = 64


def _lineage(path: Path) -> list[str]:
    """``path`` and its ancestors through the headers' ``parentSession`` links (real paths, newest first)."""
    chain: list[str] = []
    try:
        for _ in range(_MAX_SUCCESSOR_HOPS):
            chain.append(os.path.realpath(path))
            with path.open("rb") as handle:
                found = read_header(handle, os.fstat(handle.fileno()).st_size)  # the loader's header rule
            parent = found.raw.get("parentSession") if found is not None else None
            if not isinstance(parent, str) or not parent:
                break
            path = path.parent / parent  # an absolute parentSession replaces the directory
    except OSError:
        pass
    return chain


def same_lineage(candidate: Path, current: Path) -> bool:
    """
    Whether ``candidate`` continues the session of ``current``: a successor of it, or of one of its
    ancestors (another writer rotated the file this one had rotated too, or had not followed yet).
    """
    if os.path.realpath(candidate) == os.path.realpath(current):
        return False  # the same file (a symlinked sessions dir): nothing to follow
    return not set(_lineage(candidate)).isdisjoint(_lineage(current))


class TranscriptSource:
    """
    Opens the transcripts of one runtime's sessions: the file the store names for an entry
    (:meth:`SessionStore.transcript_file`, which honours a custom ``sessionFile``), or, for a store
    without a sessions directory, the session id's transcript in the store's
    :meth:`SessionStore.transcript_storage` (issue 12: the store, not the runtime, keeps it).
    """

    def __init__(self, parts: RuntimeParts) -> None:
        self._parts = parts
        # storage transcripts: how many entries each had at its last successor check
        self._seen: weakref.WeakKeyDictionary[TranscriptManager, int] = weakref.WeakKeyDictionary()
        self._rejected: weakref.WeakKeyDictionary[TranscriptManager, str] = weakref.WeakKeyDictionary()

    async def open(self, entry: SessionEntry) -> TranscriptManager:
        """
        The transcript of ``entry``: opened, or created with a header when absent.

        Raises:
            UnsafePathError: The entry has no usable session id, or its file would leave the sessions
                directory.
            TranscriptFormatError: The file exists but is not a transcript.
        """
        parts = self._parts
        session_id = entry.session_id
        if not isinstance(session_id, str):
            raise UnsafePathError("the session entry has no usable sessionId", value=repr(session_id))
        path = parts.store.transcript_file(entry)
        if path is None:
            storage = parts.store.transcript_storage()
            try:
                return await TranscriptManager.open_in(storage, session_id, clock=parts.clock)
            except TranscriptNotFoundError:
                pass
            try:
                return await TranscriptManager.create_in(
                    storage, cwd=parts.cwd, session_id=session_id, clock=parts.clock
                )
            except FileExistsError:  # another runtime on the same store created it meanwhile
                return await TranscriptManager.open_in(storage, session_id, clock=parts.clock)
        if await anyio.Path(path).exists():
            return await TranscriptManager.open(path, clock=parts.clock)
        try:
            return await TranscriptManager.create(
                path, cwd=parts.cwd, session_id=session_id, clock=parts.clock
            )
        except FileExistsError:  # another runtime on the same key created it meanwhile
            return await TranscriptManager.open(path, clock=parts.clock)

    async def open_successor(self, successor: SuccessorTranscript) -> TranscriptManager:
        """
        The successor transcript a compaction of this runtime rotated to (``truncateAfterCompaction``):
        its file, or its session id in the store's transcript storage.
        """
        if successor.path is not None:
            return await TranscriptManager.open(successor.path, clock=self._parts.clock)
        storage = self._parts.store.transcript_storage()
        return await TranscriptManager.open_in(storage, successor.session_id, clock=self._parts.clock)

    async def follow_successor(self, session: RuntimeSession) -> None:
        """
        Move ``session`` to the successor transcript another writer's rotation gave the store entry
        (OpenClaw §5.8).

        Another runtime on the same key (another process) that compacted with ``truncateAfterCompaction``
        points the entry at a successor of this session's file; the writes of this one would otherwise go
        on in the old file, which the store no longer names. Only a file of the same lineage is followed
        (a successor of the current file or of one of its ``parentSession`` ancestors: two writers that
        rotated the same file join the one the store adopted); a reset or another session id is left to
        :meth:`SessionRuntime.open`.
        """
        current = session.transcript.path
        if current is None:
            await self._follow_stored_successor(session)
            return
        store = self._parts.store
        entry = await store.get(session.session_key)
        if entry is None:
            return
        try:
            target = store.transcript_file(entry)
        except UnsafePathError:
            return
        if target is None or target == current:
            return
        if not await anyio.to_thread.run_sync(same_lineage, target, current):
            return
        session.switch_transcript(await TranscriptManager.open(target, clock=self._parts.clock), entry=entry)

    async def _follow_stored_successor(self, session: RuntimeSession) -> None:
        """
        :meth:`follow_successor` for a transcript held in the store's storage (issue 13), without a
        round trip on most turns: the store entry is read only when this transcript picked up a
        compaction since the last check (another writer's rotation appends one first); otherwise the
        entry the session last read (at :meth:`SessionRuntime.open`, at each turn's usage update)
        decides. Followed when the entry's session id names a transcript whose header's
        ``parentSession`` is this one's location (its successor) or this one's own ``parentSession``
        (another writer's successor of the same parent).
        """
        transcript = session.transcript
        storage = transcript.storage
        if storage is None:
            return
        kinds = transcript.index.kinds
        seen = self._seen.get(transcript)
        self._seen[transcript] = len(kinds)
        entry: SessionEntry | None = session.entry
        if seen is not None and "compaction" in kinds[seen:]:
            entry = await self._parts.store.get(session.session_key)
        target = entry.session_id if entry is not None else None
        if entry is None or not isinstance(target, str) or target == transcript.session_id:
            return
        if self._rejected.get(transcript) == target:  # checked already: another session (a reset)
            return
        self._rejected[transcript] = target
        try:
            # the header alone decides; on PostgreSQL read with the live lines only (O(live context))
            if isinstance(storage, PostgresTranscriptStorage):
                header = (await storage.read_live(target)).header
            else:
                header = (await storage.read(target))[0][0]
            parent = json.loads(header).get("parentSession")
        except (TranscriptNotFoundError, UnsafePathError, ValueError, IndexError, AttributeError):
            return
        own_parent = transcript.header.parent_session
        if parent != storage.location(transcript.session_id) and not (
            isinstance(parent, str) and parent == own_parent
        ):
            return
        try:
            candidate = await TranscriptManager.open_in(storage, target, clock=self._parts.clock)
        except TranscriptNotFoundError:
            return
        session.switch_transcript(candidate, entry=entry)
