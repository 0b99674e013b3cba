"""
The two space passes of a maintenance plan (spec openclaw.md §2.4, §2.5): the disk budget and the
unreferenced artifacts of ``sessions cleanup``. Pure like the other passes (:mod:`._passes`): each takes
an immutable :class:`PlanSnapshot` and returns a new one with its summary set.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Literal

import attrs

from sessionkeeper.store._entry_shape import session_id_of, updated_at_of
from sessionkeeper.store.maintenance._artifacts import (
    STORE_TEMP_STALE_MS,
    is_archive_name,
    is_checkpoint_transcript_name,
    is_primary_transcript_name,
    is_prompt_blob_temp_name,
    is_store_temp_name,
    is_trajectory_name,
    prompt_blob_name,
)
from sessionkeeper.store.maintenance._report import (
    DiskBudgetReport,
    FileReason,
    StoreFile,
    UnreferencedArtifactsReport,
    serialize_store,
)
from sessionkeeper.store.maintenance._state import (
    PlanContext,
    PlanSnapshot,
    PlanState,
    blob_removable,
    entry_chunk_bytes,
    is_blob,
    prompt_hash,
    prompt_refcounts,
)


__all__ = ("enforce_disk_budget", "is_unreferenced", "remove_unreferenced_artifacts")


def enforce_disk_budget(plan: PlanSnapshot, ctx: PlanContext) -> PlanSnapshot:
    """
    The disk budget (spec §2.4, ``maxDiskBytes`` / ``highWaterBytes``): when the directory (the store file
    counted at its projected size) exceeds ``maxDiskBytes``, delete oldest first until it is at the
    high-water mark: (1) unreferenced prompt blobs older than 5 minutes and stale blob temps, (2) archives,
    unreferenced transcripts, checkpoints, trajectories and stale temp files (``budget-artifact``), then
    (3) evict entries, least recently updated first (``evict-budget``), deleting the files they alone own
    (``budget-entry-file``; F1: never a file a remaining entry references). Protected and preserved keys
    stay (D6); still above the mark adds a warning. No budget set: the pass does nothing.
    """
    if ctx.settings.max_disk_bytes is None or ctx.settings.resolved_high_water_bytes is None:
        return plan
    sim = ctx.edit(plan)
    sim.disk_budget = _disk_budget(sim, ctx)
    return sim.freeze()


def remove_unreferenced_artifacts(plan: PlanSnapshot, ctx: PlanContext) -> PlanSnapshot:
    """
    Unreferenced artifacts (spec §2.5, ``sessions cleanup`` only, never on a store write): transcripts,
    checkpoints and trajectories no entry references, and prompt blobs no entry refers to, older than
    ``pruneAfter``, as ``unreferenced-artifact``; store and blob temp files older than 5 minutes as
    ``stale-temp``; oldest first. A disabled ``pruneAfter`` skips the age-based part (D6).
    """
    if ctx.on_save:
        return plan
    sim = ctx.edit(plan)
    sim.unreferenced = _unreferenced(sim, ctx)
    return sim.freeze()


@attrs.define
class _Tally:
    """The running totals of one disk-budget pass (bytes; the store file counted at its projected size)."""

    total: int
    high_water: int
    projected: int
    freed: int = 0
    removed_files: int = 0
    removed_entries: int = 0

    @property
    def over(self) -> bool:
        return self.total > self.high_water

    def drop(self, sim: PlanState, name: str, reason: FileReason) -> None:
        """Delete one file and count it (OpenClaw counts only files with bytes)."""
        deleted = sim.delete(name, reason) or 0
        if deleted > 0:
            self.total -= deleted
            self.freed += deleted
            self.removed_files += 1

    def drain(self, sim: PlanState, files: Iterable[StoreFile]) -> None:
        """Delete ``files`` oldest first until the total is at the high-water mark."""
        for file in sorted(files, key=lambda f: f.mtime_ms):
            if not self.over:
                break
            self.drop(sim, file.name, "budget-artifact")


def _disk_budget(sim: PlanState, ctx: PlanContext) -> DiskBudgetReport:
    max_bytes = ctx.settings.max_disk_bytes
    high_water = ctx.settings.resolved_high_water_bytes
    assert max_bytes is not None and high_water is not None
    store_file = sim.files.get(sim.store_name)
    projected = len(serialize_store(sim.entries))
    total = sum(f.size for f in sim.files.values()) - (store_file.size if store_file else 0) + projected
    tally = _Tally(total=total, high_water=high_water, projected=projected)
    if total > max_bytes:
        temp_cutoff = sim.now_ms - STORE_TEMP_STALE_MS
        prompt_refs = prompt_refcounts(sim.entries)
        # 1. unreferenced prompt blobs older than 5 minutes and stale blob temp files, oldest first
        tally.drain(
            sim, [f for f in sim.files.values() if blob_removable(f, prompt_refs, temp_cutoff, temp_cutoff)]
        )
        # 2. archives, unreferenced transcripts/checkpoints/trajectories and stale temp files, oldest first
        referenced = ctx.resolver.referenced(sim.entries)
        tally.drain(
            sim, [f for f in sim.files.values() if _artifact_removable(sim, f, referenced, temp_cutoff)]
        )
        # 3. entries, least recently updated first, with the files they alone own
        if tally.over:
            _evict_entries(sim, ctx, tally, prompt_refs, temp_cutoff)
        if tally.over:
            sim.warnings.append(
                f"session disk budget still above high-water target ({tally.total} > {high_water} bytes)"
            )
    return DiskBudgetReport(
        total_bytes_before=total,
        total_bytes_after=tally.total,
        removed_files=tally.removed_files,
        removed_entries=tally.removed_entries,
        freed_bytes=tally.freed,
        max_bytes=max_bytes,
        high_water_bytes=high_water,
        over_budget=total > max_bytes,
    )


def _artifact_removable(
    sim: PlanState, file: StoreFile, referenced: Collection[str], temp_cutoff: int
) -> bool:
    """Step 2's files: an archive, an unreferenced transcript file, or a stale store temp file."""
    if is_blob(file.name):
        return False
    if is_store_temp_name(file.name, sim.store_name):
        return file.mtime_ms <= temp_cutoff
    return is_archive_name(file.name) or is_unreferenced(file.name, referenced)


def _evict_entries(
    sim: PlanState, ctx: PlanContext, tally: _Tally, prompt_refs: dict[str, int], temp_cutoff: int
) -> None:
    """
    Step 3: evict unpreserved entries, least recently updated first, until the total is at the mark; each
    eviction shrinks the projected store file and deletes the prompt blob and the files only it owned.
    """
    resolver = ctx.resolver
    refcounts: dict[str, int] = {}
    for entry in sim.entries.values():
        if (sid := session_id_of(entry)) is not None:
            refcounts[sid] = refcounts.get(sid, 0) + 1
    chunks = {k: entry_chunk_bytes(k, e) for k, e in sim.entries.items()}
    live_refs: Counter[str] = Counter()
    for entry in sim.entries.values():
        live_refs.update(resolver.entry_references(entry))
    for key in sorted(sim.entries, key=lambda k: updated_at_of(sim.entries[k]) or 0):
        if not tally.over:
            break
        if ctx.is_preserved(key):
            continue
        entry = sim.remove_entry(key, "evict-budget")
        live_refs.subtract(resolver.entry_references(entry))
        previous = tally.projected
        tally.projected = max(2, tally.projected - (chunks[key] + 2))
        tally.total += tally.projected - previous
        _release_prompt_blob(sim, tally, entry, prompt_refs, temp_cutoff)
        tally.removed_entries += 1
        sid = session_id_of(entry)
        if sid is None:
            continue
        refcounts[sid] = refcounts.get(sid, 1) - 1
        if refcounts[sid] > 0:
            continue
        for name in resolver.owned_artifacts(entry, sim.warnings):
            if live_refs[name] <= 0:  # F1: never a file a remaining entry references
                tally.drop(sim, name, "budget-entry-file")


def _release_prompt_blob(
    sim: PlanState, tally: _Tally, entry: Mapping[str, Any], prompt_refs: dict[str, int], temp_cutoff: int
) -> None:
    """An evicted entry's prompt blob goes when no remaining entry refers to it (and it is removable)."""
    digest = prompt_hash(entry)
    if digest is None:
        return
    prompt_refs[digest] = prompt_refs.get(digest, 1) - 1
    if prompt_refs[digest] > 0:
        return
    del prompt_refs[digest]
    blob = sim.files.get(prompt_blob_name(digest))
    if blob is not None and blob_removable(blob, prompt_refs, temp_cutoff, temp_cutoff):
        tally.drop(sim, blob.name, "budget-entry-file")


def is_unreferenced(name: str, referenced: Collection[str]) -> bool:
    """A transcript, checkpoint or trajectory file name that is not in ``referenced``."""
    if name in referenced:
        return False
    return is_checkpoint_transcript_name(name) or is_trajectory_name(name) or is_primary_transcript_name(name)


def _unreferenced(sim: PlanState, ctx: PlanContext) -> UnreferencedArtifactsReport:
    older_than = ctx.settings.prune_after_ms
    resolver = ctx.resolver
    scanned = len(sim.files)
    referenced = resolver.referenced(sim.entries)
    temp_cutoff = sim.now_ms - STORE_TEMP_STALE_MS
    candidates: list[tuple[StoreFile, Literal["stale-temp", "unreferenced-artifact"]]] = []
    prompt_refs = prompt_refcounts(sim.entries)
    blob_cutoff = sim.now_ms - max(older_than or 0, STORE_TEMP_STALE_MS)
    for file in sim.files.values():
        if is_blob(file.name):
            if is_prompt_blob_temp_name(file.name) and file.mtime_ms <= temp_cutoff:
                candidates.append((file, "stale-temp"))
            elif older_than is not None and blob_removable(file, prompt_refs, blob_cutoff, temp_cutoff):
                candidates.append((file, "unreferenced-artifact"))
        elif is_store_temp_name(file.name, sim.store_name):
            if file.mtime_ms <= temp_cutoff:
                candidates.append((file, "stale-temp"))
        elif (
            older_than is not None
            and file.mtime_ms <= sim.now_ms - older_than
            and is_unreferenced(file.name, referenced)
        ):
            candidates.append((file, "unreferenced-artifact"))
    removed = freed = 0
    for file, reason in sorted(candidates, key=lambda c: c[0].mtime_ms):
        deleted = sim.delete(file.name, reason) or 0
        if deleted > 0:  # OpenClaw counts only files with bytes (an empty one is removed, not counted)
            removed += 1
            freed += deleted
    return UnreferencedArtifactsReport(
        scanned_files=scanned, removed_files=removed, freed_bytes=freed, older_than_ms=older_than or 0
    )
