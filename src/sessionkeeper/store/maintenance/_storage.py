"""
The archive passes of store maintenance for transcripts held in a storage other than files or
PostgreSQL (memory: ``SessionStore.in_memory()``, a Redis store without ``transcripts_dir``; issue 13),
through the :class:`~sessionkeeper.abc.ArchivingTranscriptStorage` seam: (4) the transcript of each
removed entry whose ``sessionId`` no remaining entry uses is archived as ``deleted``; (5) archives past
their retention (``pruneAfter`` for ``deleted``, ``resetArchiveRetention`` for ``reset``; OpenClaw spec
§2.4) are deleted, when something was archived or a reset retention is set. The disk budget and the
unreferenced-transcript pass stay file and PostgreSQL rules. A dry run reports without acting.

A transcript whose writer claim is held (memory: :meth:`MemoryTranscriptStorage.held_claims`) is what a
held lock file is on a directory: the planner keeps its entries (``claimed_transcripts`` gives it their
transcript names as locked files) and it is never archived (DESIGN D6, field report B19).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from sessionkeeper.exceptions import TranscriptNotFoundError, UnsafePathError
from sessionkeeper.store._entry_shape import session_id_of
from sessionkeeper.store.maintenance._report import EntryRemoval, FileAction
from sessionkeeper.store.maintenance._settings import MaintenanceSettings
from sessionkeeper.store.maintenance._state import Resolver
from sessionkeeper.transcript import (
    ArchivingTranscriptStorage,
    MemoryTranscriptStorage,
    TranscriptStorage,
    archive_stamp,
)


__all__ = ("claimed_transcripts", "storage_archive_passes")


def claimed_transcripts(entries: Mapping[str, Any], held: Collection[str]) -> frozenset[str]:
    """
    The transcript names (as the planner resolves them without a directory) of the entries whose
    ``sessionId`` is in ``held`` (session ids whose writer claim is held): the planner's locked files.
    """
    if not held:
        return frozenset()
    resolver = Resolver(Path())
    out: set[str] = set()
    for entry in entries.values():
        if isinstance(entry, Mapping) and session_id_of(entry) in held:
            name = resolver.transcript(entry)
            if name is not None:
                out.add(name)
    return frozenset(out)


async def storage_archive_passes(
    storage: TranscriptStorage,
    *,
    removals: Iterable[EntryRemoval],
    remaining_ids: Collection[str],
    settings: MaintenanceSettings,
    now_ms: int,
    apply: bool,
) -> list[FileAction]:
    """
    Run (or, without ``apply``, plan) steps 4 and 5 on ``storage`` (module docstring).

    Returns:
        The actions, in order: archives (``name`` the session id, ``archive_name`` the archive's), then
        archive deletions (``name`` the archive's).
    """
    assert isinstance(storage, ArchivingTranscriptStorage)
    actions: list[FileAction] = []
    removed_ids = dict.fromkeys(
        r.session_id for r in removals if r.session_id is not None and r.session_id not in remaining_ids
    )
    held = storage.held_claims() if isinstance(storage, MemoryTranscriptStorage) else frozenset()
    for session_id in removed_ids:
        if session_id in held:  # a writer claims it: never moved (the planner kept its entries)
            continue
        try:
            name: str | None
            if apply:
                archived = await storage.archive(session_id, reason="deleted", now_ms=now_ms)
                if archived is None:
                    continue
                size, name = archived.size, archived.name
            else:  # the name memory gives it (another storage's is its own)
                _, mark = await storage.read(session_id)
                size = mark.size
                memory = isinstance(storage, MemoryTranscriptStorage)
                name = f"{session_id}/deleted/{archive_stamp(now_ms)}" if memory else None
        except (TranscriptNotFoundError, UnsafePathError, FileExistsError):
            continue
        actions.append(
            FileAction(
                name=session_id,
                action="archive",
                reason="archive-removed-transcript",
                size=size,
                archive_name=name,
            )
        )
    reset_after = settings.reset_archive_retention_ms
    if not (actions or reset_after is not None):
        return actions
    rules = {"deleted": settings.prune_after_ms, "reset": reset_after}
    for archive in await storage.list_archives():
        older_than = rules[archive.reason]
        if older_than is None or now_ms - archive.archived_at_ms <= older_than:
            continue
        if apply and not await storage.delete_archive(archive.name):
            continue
        actions.append(
            FileAction(name=archive.name, action="delete", reason="archive-retention", size=archive.size)
        )
    return actions
