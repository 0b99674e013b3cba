"""
The store maintenance planner (OpenClaw spec §2, DESIGN D6): a pure function from (entries, directory
listing, settings, now, active keys) to a :class:`MaintenancePlan`.

The plan simulates, in OpenClaw's applied order, everything an enforce run does: (1) model-run probes
older than 24 h, (2) entries older than ``pruneAfter``, (3) the ``maxEntries`` cap, (4) archiving the
transcripts of removed entries as ``*.deleted.<stamp>`` and deleting their trajectory sidecars,
(5) archive retention, (6) the disk budget, (7) unreferenced artifacts (``sessions cleanup`` only).
Executing a plan (:func:`sessionkeeper.store.run_maintenance`) performs exactly the planned file
actions, so a dry run reports what the enforce run then does (D6).

Deviations from OpenClaw 2026.7.35 (DESIGN D6): ``agent:<id>:main``, the caller's active keys and
entries whose transcript lock is held are never removed by any pass, and locked files are never moved;
a disabled ``pruneAfter`` (``None``) prunes nothing by age, keeps ``*.deleted`` archives and skips the
age-based unreferenced-artifact pass (stale temp files are still removed).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from sessionkeeper.store._entry_shape import is_safe_store_session_id
from sessionkeeper.store._keys import (
    is_main_session_key,
    is_model_run_session_key,
    is_protected_session_entry,
    parse_agent_session_key,
)
from sessionkeeper.store.maintenance._artifacts import (
    STORE_TEMP_STALE_MS,
    archive_file_name,
    archive_timestamp_ms,
    is_archive_name,
    is_checkpoint_transcript_name,
    is_primary_transcript_name,
    is_prompt_blob_temp_name,
    is_store_temp_name,
    is_trajectory_name,
    is_write_temp_name,
    prompt_blob_name,
    transcript_backup_stamp_ms,
)
from sessionkeeper.store.maintenance._report import (
    DiskBudgetReport,
    EntryRemoval,
    FileAction,
    FileReason,
    MaintenancePlan,
    MaintenanceReport,
    RemovalReason,
    StoreFile,
    UnreferencedArtifactsReport,
    serialize_store,
)
from sessionkeeper.store.maintenance._settings import MaintenanceSettings, entry_high_water
from sessionkeeper.store.maintenance._state import (
    PlanState,
    Resolver,
    blob_removable,
    entry_chunk_bytes,
    is_blob,
    is_preserved,
    prompt_hash,
    prompt_refcounts,
    session_id_of,
    sort_time,
    updated_at_of,
)


__all__ = (
    "DiskBudgetReport",
    "EntryRemoval",
    "FileAction",
    "MaintenancePlan",
    "MaintenanceReport",
    "RemovalReason",
    "StoreFile",
    "UnreferencedArtifactsReport",
    "find_unreferenced_transcripts",
    "plan_maintenance",
    "serialize_store",
)


def plan_maintenance(
    entries: Mapping[str, Any],
    *,
    files: Iterable[StoreFile],
    settings: MaintenanceSettings,
    now_ms: int,
    sessions_dir: Path | str = ".",
    active_keys: Iterable[str] = (),
    locked_files: Collection[str] = (),
    on_save: bool = False,
    store_name: str = "sessions.json",
    message_transcripts: Collection[str] | None = None,
) -> MaintenancePlan:
    """
    Plan store maintenance (OpenClaw spec §2.2-§2.5, DESIGN D6). Pure: no I/O.

    Args:
        entries: The store as loaded (session key -> raw entry object with camelCase fields, in file
            order). Values that are not objects, or whose ``sessionId`` fails the store shape check
            (spec §1.1), are dropped (``drop-unsafe``), as OpenClaw's loader does.
        files: The regular files directly inside the sessions directory, with sizes and mtimes.
        settings: The maintenance settings (``mode`` is only reported; the plan is always the enforce
            plan, which warn mode and dry runs report without applying).
        now_ms: Current time, ms since epoch.
        sessions_dir: The sessions directory, used only to resolve absolute ``sessionFile`` values.
        active_keys: Keys that must survive (the caller's running sessions; D6). Compared
            case-insensitively in every pass (OpenClaw 2026.7.35: an active ``AGENT:MAIN:DIRECT:X``
            keeps ``agent:main:direct:x``).
        locked_files: Names of transcript files whose write lock is held by a live process: their
            entries are kept and the files are never moved or deleted (D6, field report B19).
        on_save: Plan the automatic maintenance of a store write instead of ``sessions cleanup``: the
            model-run prune and the cap then run only at the high-water mark (:func:`entry_high_water`),
            and the unreferenced-artifact pass does not run (spec §2.2).
        store_name: The store file name inside the directory.
        message_transcripts: With ``--fix-missing``: the names of the transcripts that exist and hold at
            least one message record. Entries whose transcript is not among them (missing, empty or
            header-only) are removed first as ``prune-missing``, as are non-agent keys without a
            ``sessionId`` (OpenClaw ``pruneMissingTranscriptEntries``); preserved keys (D6) are kept.
            ``None`` (default) skips this pass.

    Returns:
        The plan: the resulting entries and a report of every removal and file action.
    """
    resolver = Resolver(Path(sessions_dir))
    listing = {f.name: f for f in files}
    # OpenClaw compares the active key case-insensitively (its keys are normalised to lowercase on
    # write), in every pass: the preserve set holds lowercased keys and every check lowercases the key
    active = {k.strip().lower() for k in active_keys if k.strip()}
    locked = frozenset(locked_files)
    sim = PlanState(entries={}, files=dict(listing), locked=locked, now_ms=now_ms, store_name=store_name)
    sim.archive_suffix = archive_file_name("", "deleted", now_ms)  # ".deleted.<stamp>", once per plan
    dropped: list[EntryRemoval] = []
    for key, value in entries.items():
        if not isinstance(value, Mapping) or (
            "sessionId" in value and not is_safe_store_session_id(value["sessionId"])
        ):
            sid = value.get("sessionId") if isinstance(value, Mapping) else None
            dropped.append(
                EntryRemoval(
                    key=key,
                    reason="drop-unsafe",
                    session_id=sid if isinstance(sid, str) else None,
                    updated_at=None,
                )
            )
            continue
        sim.entries[key] = value
    before_keys = list(sim.entries)

    # spec §2.3: durable external pointers (threads, topics, groups, channels) are protected.
    protected = {key: is_protected_session_entry(key, entry) for key, entry in sim.entries.items()}
    # DESIGN D6: the main session, the caller's active set and locked transcripts are never evicted.
    preserve: set[str] = set(active)
    for key, entry in sim.entries.items():
        transcript = resolver.transcript(entry)
        if is_main_session_key(key) or (transcript is not None and transcript in locked):
            preserve.add(key.lower())

    # (0) --fix-missing: entries whose transcript is missing or holds no message.
    if message_transcripts is not None:
        with_messages = set(message_transcripts)
        for key in list(sim.entries):
            entry = sim.entries[key]
            if key.lower() in preserve:
                continue
            if session_id_of(entry) is None:
                if parse_agent_session_key(key) is None:
                    sim.remove_entry(key, "prune-missing")
                continue
            transcript = resolver.transcript(entry)
            if transcript is None or transcript not in with_messages:
                sim.remove_entry(key, "prune-missing")
    before_count = len(sim.entries)

    count = len(sim.entries)
    force = not on_save
    high_water = entry_high_water(settings.max_entries)

    # (1) model-run probes: forced runs only above maxEntries; store writes at the high-water mark.
    run_model = count > settings.max_entries if force else count >= high_water
    if run_model:
        cutoff = now_ms - settings.model_run_prune_after_ms
        for key in list(sim.entries):
            entry = sim.entries[key]
            updated = updated_at_of(entry)
            if key.lower() in preserve or not is_model_run_session_key(key):
                continue
            if updated is not None and updated < cutoff:
                sim.remove_entry(key, "prune-model-run")

    # (2) stale entries, on every run (B18: independent of the cap).
    if settings.prune_after_ms is None:
        sim.warnings.append("age pruning is disabled (pruneAfter is 0, negative or false)")
    else:
        cutoff = now_ms - settings.prune_after_ms
        for key in list(sim.entries):
            entry = sim.entries[key]
            if is_preserved(key, protected, preserve):
                continue
            updated = updated_at_of(entry)
            if updated is not None and updated < cutoff:
                sim.remove_entry(key, "prune-stale")

    # (3) the cap: forced by sessions cleanup, else only at the high-water mark (batched).
    if force or len(sim.entries) >= high_water:
        preserved_count = sum(1 for k in sim.entries if is_preserved(k, protected, preserve))
        max_removable = max(0, settings.max_entries - preserved_count)
        removable = [k for k in sim.entries if not is_preserved(k, protected, preserve)]
        if len(removable) > max_removable:
            ordered = sorted(removable, key=lambda k: -sort_time(sim.entries[k]))
            for key in ordered[max_removable:]:
                sim.remove_entry(key, "cap-overflow")
        if preserved_count > settings.max_entries:
            sim.warnings.append(
                f"{preserved_count} protected or active entries exceed maxEntries={settings.max_entries}; "
                "the store stays above the cap"
            )

    # (4) archive the transcripts of removed entries no remaining entry shares; drop their trajectories.
    removed_files: dict[str, str | None] = {}
    for removal in sim.removals:
        if removal.session_id is None or removal.reason == "prune-missing":
            continue
        entry_file = _removed_session_file(entries[removal.key])
        if removal.session_id not in removed_files or entry_file:
            removed_files[removal.session_id] = entry_file
    # F1 (issue 15 item 1): only files the removed session owns, and none a remaining entry references
    referenced_ids = {sid for e in sim.entries.values() if (sid := session_id_of(e))}
    live_files = resolver.referenced(sim.entries)
    archived_any = False
    for session_id, session_file in removed_files.items():
        if session_id in referenced_ids:
            continue
        for name in resolver.archive_candidates(session_id, session_file, sim.warnings):
            if name in live_files:
                if name in sim.files:
                    sim.warnings.append(f"kept {name}: a remaining entry references it")
                continue
            archived_any = sim.archive(name) or archived_any
    for session_id, session_file in removed_files.items():
        if session_id in referenced_ids:
            continue
        owned = resolver.owned_artifacts({"sessionId": session_id, "sessionFile": session_file})
        for name in owned[1:]:
            if name not in live_files:
                sim.delete(name, "removed-trajectory")

    # (5) archive retention: deleted archives after pruneAfter, reset archives after their retention.
    if archived_any or settings.reset_archive_retention_ms is not None:
        rules: list[tuple[Literal["deleted", "reset"], int | None]] = [
            ("deleted", settings.prune_after_ms),
            ("reset", settings.reset_archive_retention_ms),
        ]
        for name in list(sim.files):
            for reason, older_than in rules:
                stamp = archive_timestamp_ms(name, reason)
                if stamp is None:
                    continue
                if older_than is not None and now_ms - stamp > older_than:
                    sim.delete(name, "archive-retention")
                break

    # (5b) transcript backups (torn-tail repairs, migrations) after pruneAfter, like the deleted archives
    # (issue 15; OpenClaw sweeps *.bak.* only under the disk budget). Store backups are kept (B21).
    if settings.prune_after_ms is not None:
        for name in list(sim.files):
            stamp = transcript_backup_stamp_ms(name)
            if stamp is not None and now_ms - stamp > settings.prune_after_ms:
                sim.delete(name, "backup-retention")

    # (5c) temp files of killed writes (<name>.<pid>.<uuid>.tmp: transcript rewrites, the lock's named-temp
    # fallback) once older than STORE_TEMP_STALE_MS, in every run: a live write keeps its temp for
    # milliseconds and nothing references one (issue 15; docs/maintenance.md "Temp files").
    write_temp_cutoff = now_ms - STORE_TEMP_STALE_MS
    for name, file in list(sim.files.items()):
        if is_write_temp_name(name, sim.store_name) and file.mtime_ms <= write_temp_cutoff:
            sim.delete(name, "stale-temp")

    # (6) disk budget.
    disk_budget = _disk_budget(sim, resolver, settings, preserve, protected)

    # (7) unreferenced artifacts (sessions cleanup only).
    unreferenced = None if on_save else _unreferenced(sim, resolver, settings)

    removals = tuple(dropped) + tuple(sim.removals)
    reasons = {r.key: r.reason for r in removals}
    actions = {key: reasons.get(key, "keep") for key in [*(d.key for d in dropped), *before_keys]}
    # rows dropped as unsafe count too: the enforce run rewrites the store without them, as OpenClaw's
    # applied cleanup does (its save writes the loaded, normalised store), so the file holds what the
    # report says
    store_changed = bool(sim.removals) or bool(dropped)
    bytes_before = sum(f.size for f in listing.values())
    final_files = dict(sim.files)
    bytes_after = sum(f.size for f in final_files.values())
    if store_changed and store_name in final_files:
        bytes_after += len(serialize_store(sim.entries)) - final_files[store_name].size
    report = MaintenanceReport(
        mode=settings.mode,
        dry_run=False,
        applied=False,
        now_ms=now_ms,
        before_count=before_count,
        after_count=len(sim.entries),
        removals=removals,
        file_actions=tuple(sim.actions),
        actions=actions,
        bytes_before=bytes_before,
        bytes_after=bytes_after,
        disk_budget=disk_budget,
        unreferenced_artifacts=unreferenced,
        warnings=tuple(dict.fromkeys(sim.warnings)),
    )
    return MaintenancePlan(entries_after=dict(sim.entries), store_changed=store_changed, report=report)


def _removed_session_file(entry: Any) -> str | None:
    value = entry.get("sessionFile") if isinstance(entry, Mapping) else None
    return value if isinstance(value, str) and value.strip() else None


def _disk_budget(
    sim: PlanState,
    resolver: Resolver,
    settings: MaintenanceSettings,
    preserve: Collection[str],
    protected: Mapping[str, bool],
) -> DiskBudgetReport | None:
    max_bytes = settings.max_disk_bytes
    high_water = settings.resolved_high_water_bytes
    if max_bytes is None or high_water is None:
        return None
    store_file = sim.files.get(sim.store_name)
    projected = len(serialize_store(sim.entries))
    total = sum(f.size for f in sim.files.values()) - (store_file.size if store_file else 0) + projected
    before = total

    def result(removed_files: int, removed_entries: int, freed: int, *, over: bool) -> DiskBudgetReport:
        return DiskBudgetReport(
            total_bytes_before=before,
            total_bytes_after=total,
            removed_files=removed_files,
            removed_entries=removed_entries,
            freed_bytes=freed,
            max_bytes=max_bytes,
            high_water_bytes=high_water,
            over_budget=over,
        )

    if total <= max_bytes:
        return result(0, 0, 0, over=False)
    removed_files = removed_entries = freed = 0
    referenced = resolver.referenced(sim.entries)
    temp_cutoff = sim.now_ms - STORE_TEMP_STALE_MS
    prompt_refs = prompt_refcounts(sim.entries)

    def drop(name: str, reason: FileReason) -> None:
        """Delete one file and count it (OpenClaw counts only files with bytes)."""
        nonlocal total, freed, removed_files
        deleted = sim.delete(name, reason) or 0
        if deleted > 0:
            total -= deleted
            freed += deleted
            removed_files += 1

    def drain(files: Iterable[StoreFile]) -> None:
        """Delete ``files`` oldest first until the total is at the high-water mark."""
        for file in sorted(files, key=lambda f: f.mtime_ms):
            if total <= high_water:
                break
            drop(file.name, "budget-artifact")

    # 1. unreferenced prompt blobs older than 5 minutes and stale blob temp files, oldest first
    drain([f for f in sim.files.values() if blob_removable(f, prompt_refs, temp_cutoff, temp_cutoff)])

    def removable(file: StoreFile) -> bool:
        if is_blob(file.name):
            return False
        if is_store_temp_name(file.name, sim.store_name):
            return file.mtime_ms <= temp_cutoff
        return is_archive_name(file.name) or _is_unreferenced(file.name, referenced)

    # 2. archives, unreferenced transcripts/checkpoints/trajectories and stale temp files, oldest first
    drain([f for f in sim.files.values() if removable(f)])
    if total > high_water:
        refcounts: dict[str, int] = {}
        for entry in sim.entries.values():
            if (sid := session_id_of(entry)) is not None:
                refcounts[sid] = refcounts.get(sid, 0) + 1
        chunks = {k: entry_chunk_bytes(k, e) for k, e in sim.entries.items()}
        live_refs: Counter[str] = Counter()
        for entry in sim.entries.values():
            live_refs.update(resolver.entry_references(entry))
        for key in sorted(sim.entries, key=lambda k: updated_at_of(sim.entries[k]) or 0):
            if total <= high_water:
                break
            entry = sim.entries[key]
            if is_preserved(key, protected, preserve):
                continue
            previous = projected
            sim.remove_entry(key, "evict-budget")
            live_refs.subtract(resolver.entry_references(entry))
            projected = max(2, projected - (chunks[key] + 2))
            total += projected - previous
            digest = prompt_hash(entry)
            if digest is not None:
                prompt_refs[digest] = prompt_refs.get(digest, 1) - 1
                if prompt_refs[digest] <= 0:
                    del prompt_refs[digest]
                    blob = sim.files.get(prompt_blob_name(digest))
                    if blob is not None and blob_removable(blob, prompt_refs, temp_cutoff, temp_cutoff):
                        drop(blob.name, "budget-entry-file")
            removed_entries += 1
            sid = session_id_of(entry)
            if sid is None:
                continue
            refcounts[sid] = refcounts.get(sid, 1) - 1
            if refcounts[sid] > 0:
                continue
            for name in resolver.owned_artifacts(entry, sim.warnings):
                if live_refs[name] <= 0:  # F1: never a file a remaining entry references
                    drop(name, "budget-entry-file")
    if total > high_water:
        sim.warnings.append(
            f"session disk budget still above high-water target ({total} > {high_water} bytes)"
        )
    return result(removed_files, removed_entries, freed, over=True)


def _is_unreferenced(name: str, referenced: Collection[str]) -> bool:
    if name in referenced:
        return False
    return is_checkpoint_transcript_name(name) or is_trajectory_name(name) or is_primary_transcript_name(name)


def _unreferenced(
    sim: PlanState, resolver: Resolver, settings: MaintenanceSettings
) -> UnreferencedArtifactsReport:
    older_than = settings.prune_after_ms
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
            and _is_unreferenced(file.name, referenced)
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


def find_unreferenced_transcripts(
    entries: Mapping[str, Any], *, files: Iterable[StoreFile], sessions_dir: Path | str = "."
) -> list[str]:
    """
    Primary transcripts in the listing that no entry references, oldest first (for recovery, field
    report B21: after a lost ``sessions.json`` these are the sessions to re-register).
    """
    resolver = Resolver(Path(sessions_dir))
    valid = {k: v for k, v in entries.items() if isinstance(v, Mapping)}
    referenced = resolver.referenced(valid)
    orphans = [f for f in files if is_primary_transcript_name(f.name) and f.name not in referenced]
    return [f.name for f in sorted(orphans, key=lambda f: (f.mtime_ms, f.name))]
