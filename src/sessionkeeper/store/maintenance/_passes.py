"""
The entry and file passes of a maintenance plan, one function per rule, in OpenClaw's applied order
(spec openclaw.md §2.2-§2.5, DESIGN D6).

Every pass is pure: ``pass_(plan, ctx) -> plan`` takes an immutable :class:`PlanSnapshot` and the plan's
:class:`PlanContext` and returns a new snapshot (it edits a private copy, :meth:`PlanContext.edit`). A
pass whose rule does not apply returns its input unchanged. No pass removes a preserved key
(``agent:<id>:main``, the caller's active keys, locked transcripts' entries) or moves a locked file (D6).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from sessionkeeper.store._entry_shape import session_id_of, updated_at_of
from sessionkeeper.store._keys import is_model_run_session_key, parse_agent_session_key
from sessionkeeper.store.maintenance._artifacts import (
    STORE_TEMP_STALE_MS,
    archive_timestamp_ms,
    is_write_temp_name,
    transcript_backup_stamp_ms,
)
from sessionkeeper.store.maintenance._settings import entry_high_water
from sessionkeeper.store.maintenance._state import PlanContext, PlanSnapshot, sort_time


__all__ = (
    "archive_removed_transcripts",
    "cap_entries",
    "prune_missing_transcripts",
    "prune_model_runs",
    "prune_stale_entries",
    "retain_archives",
    "retain_transcript_backups",
    "sweep_write_temps",
)


def prune_missing_transcripts(plan: PlanSnapshot, ctx: PlanContext) -> PlanSnapshot:
    """
    ``--fix-missing`` (OpenClaw ``pruneMissingTranscriptEntries``): remove as ``prune-missing`` every entry
    whose transcript is missing or holds no message record, and non-agent keys without a ``sessionId``.

    Runs only when ``ctx.message_transcripts`` is set; preserved keys are kept (D6).
    """
    if ctx.message_transcripts is None:
        return plan
    with_messages = ctx.message_transcripts
    sim = ctx.edit(plan)
    for key in list(sim.entries):
        entry = sim.entries[key]
        if key.lower() in ctx.preserve:
            continue
        if session_id_of(entry) is None:
            if parse_agent_session_key(key) is None:
                sim.remove_entry(key, "prune-missing")
            continue
        transcript = ctx.resolver.transcript(entry)
        if transcript is None or transcript not in with_messages:
            sim.remove_entry(key, "prune-missing")
    return sim.freeze()


def prune_model_runs(plan: PlanSnapshot, ctx: PlanContext) -> PlanSnapshot:
    """
    Model-run probes (``agent:<id>:model-run:...``) older than ``modelRunPruneAfter`` (24 h), as
    ``prune-model-run`` (spec §2.2 step 1).

    ``sessions cleanup`` runs it only above ``maxEntries``; a store write only at the high-water mark
    (:func:`entry_high_water`). Entries without ``updatedAt`` stay; preserved keys stay (D6).
    """
    count = len(plan.entries)
    settings = ctx.settings
    high_water = entry_high_water(settings.max_entries)
    if not (count >= high_water if ctx.on_save else count > settings.max_entries):
        return plan
    cutoff = ctx.now_ms - settings.model_run_prune_after_ms
    sim = ctx.edit(plan)
    for key in list(sim.entries):
        entry = sim.entries[key]
        updated = updated_at_of(entry)
        if key.lower() in ctx.preserve or not is_model_run_session_key(key):
            continue
        if updated is not None and updated < cutoff:
            sim.remove_entry(key, "prune-model-run")
    return sim.freeze()


def prune_stale_entries(plan: PlanSnapshot, ctx: PlanContext) -> PlanSnapshot:
    """
    Entries whose ``updatedAt`` is older than ``pruneAfter``, as ``prune-stale`` (spec §2.2 step 2), on
    every run (field report B18: independent of the cap).

    Protected (spec §2.3) and preserved (D6) keys stay, as do entries without ``updatedAt``. A disabled
    ``pruneAfter`` (``None``, DESIGN D6) prunes nothing and adds a warning.
    """
    sim = ctx.edit(plan)
    if ctx.settings.prune_after_ms is None:
        sim.warnings.append("age pruning is disabled (pruneAfter is 0, negative or false)")
        return sim.freeze()
    cutoff = ctx.now_ms - ctx.settings.prune_after_ms
    for key in list(sim.entries):
        entry = sim.entries[key]
        if ctx.is_preserved(key):
            continue
        updated = updated_at_of(entry)
        if updated is not None and updated < cutoff:
            sim.remove_entry(key, "prune-stale")
    return sim.freeze()


def cap_entries(plan: PlanSnapshot, ctx: PlanContext) -> PlanSnapshot:
    """
    The ``maxEntries`` cap (spec §2.2 step 3): the oldest removable entries (by ``updatedAt``, a missing
    one first) go as ``cap-overflow`` until at most ``maxEntries - preserved`` removable ones remain.

    ``sessions cleanup`` always applies it; a store write only at the high-water mark (batched,
    :func:`entry_high_water`). When protected and preserved entries alone exceed the cap, the store stays
    above it and a warning says so.
    """
    settings = ctx.settings
    if ctx.on_save and len(plan.entries) < entry_high_water(settings.max_entries):
        return plan
    sim = ctx.edit(plan)
    preserved_count = sum(1 for k in sim.entries if ctx.is_preserved(k))
    max_removable = max(0, settings.max_entries - preserved_count)
    removable = [k for k in sim.entries if not ctx.is_preserved(k)]
    if len(removable) > max_removable:
        ordered = sorted(removable, key=lambda k: -sort_time(sim.entries[k]))
        for key in ordered[max_removable:]:
            sim.remove_entry(key, "cap-overflow")
    if preserved_count > settings.max_entries:
        sim.warnings.append(
            f"{preserved_count} protected or active entries exceed maxEntries={settings.max_entries}; "
            "the store stays above the cap"
        )
    return sim.freeze()


def archive_removed_transcripts(plan: PlanSnapshot, ctx: PlanContext) -> PlanSnapshot:
    """
    Archive the transcripts of the removed entries as ``<name>.deleted.<stamp>`` and delete their
    trajectory sidecars (``removed-trajectory``; spec §2.2 step 4).

    Only files the removed session owns (its canonical ``<sessionId>.jsonl`` and a ``sessionFile`` that
    passes :func:`~sessionkeeper.store.check_session_file_owner`), none whose session id a remaining entry
    still uses, and none a remaining entry references (F1, issue 15 item 1). ``prune-missing`` removals
    have no file to archive. Locked files are kept with a warning (B19).
    """
    removed_files: dict[str, str | None] = {}
    for removal in plan.removals:
        if removal.session_id is None or removal.reason == "prune-missing":
            continue
        entry_file = _removed_session_file(ctx.raw[removal.key])
        if removal.session_id not in removed_files or entry_file:
            removed_files[removal.session_id] = entry_file
    if not removed_files:
        return plan
    sim = ctx.edit(plan)
    referenced_ids = {sid for e in sim.entries.values() if (sid := session_id_of(e))}
    live_files = ctx.resolver.referenced(sim.entries)
    archived_any = False
    for session_id, session_file in removed_files.items():
        if session_id in referenced_ids:
            continue
        for name in ctx.resolver.archive_candidates(session_id, session_file, sim.warnings):
            if name in live_files:
                if name in sim.files:
                    sim.warnings.append(f"kept {name}: a remaining entry references it")
                continue
            archived_any = sim.archive(name) or archived_any
    for session_id, session_file in removed_files.items():
        if session_id in referenced_ids:
            continue
        owned = ctx.resolver.owned_artifacts({"sessionId": session_id, "sessionFile": session_file})
        for name in owned[1:]:
            if name not in live_files:
                sim.delete(name, "removed-trajectory")
    sim.archived_any = archived_any
    return sim.freeze()


def retain_archives(plan: PlanSnapshot, ctx: PlanContext) -> PlanSnapshot:
    """
    Archive retention (spec §2.2 step 5): ``*.deleted.<stamp>`` archives older than ``pruneAfter`` and
    ``*.reset.<stamp>`` archives older than ``resetArchiveRetention`` are deleted (``archive-retention``).

    Runs when this plan archived something or a reset retention is set (OpenClaw's condition); a
    disabled ``pruneAfter`` keeps the deleted archives (D6).
    """
    settings = ctx.settings
    if not (plan.archived_any or settings.reset_archive_retention_ms is not None):
        return plan
    rules: list[tuple[Literal["deleted", "reset"], int | None]] = [
        ("deleted", settings.prune_after_ms),
        ("reset", settings.reset_archive_retention_ms),
    ]
    sim = ctx.edit(plan)
    for name in list(sim.files):
        for reason, older_than in rules:
            stamp = archive_timestamp_ms(name, reason)
            if stamp is None:
                continue
            if older_than is not None and ctx.now_ms - stamp > older_than:
                sim.delete(name, "archive-retention")
            break
    return sim.freeze()


def retain_transcript_backups(plan: PlanSnapshot, ctx: PlanContext) -> PlanSnapshot:
    """
    Transcript backups (``*.bak.<stamp>``: torn-tail repairs, migrations) older than ``pruneAfter`` are
    deleted (``backup-retention``), like the deleted archives (issue 15; OpenClaw sweeps them only under
    the disk budget). Store backups are kept (B21); a disabled ``pruneAfter`` keeps everything.
    """
    prune_after = ctx.settings.prune_after_ms
    if prune_after is None:
        return plan
    sim = ctx.edit(plan)
    for name in list(sim.files):
        stamp = transcript_backup_stamp_ms(name)
        if stamp is not None and ctx.now_ms - stamp > prune_after:
            sim.delete(name, "backup-retention")
    return sim.freeze()


def sweep_write_temps(plan: PlanSnapshot, ctx: PlanContext) -> PlanSnapshot:
    """
    Temp files of killed writes (``<name>.<pid>.<uuid>.tmp``: transcript rewrites, the lock's named-temp
    fallback) older than :data:`STORE_TEMP_STALE_MS` (5 minutes) are deleted (``stale-temp``), in every
    run: a live write keeps its temp for milliseconds and nothing references one (issue 15;
    ``docs/maintenance.md`` "Temp files").
    """
    cutoff = ctx.now_ms - STORE_TEMP_STALE_MS
    stale = [
        name
        for name, file in plan.files.items()
        if is_write_temp_name(name, ctx.store_name) and file.mtime_ms <= cutoff
    ]
    if not stale:
        return plan
    sim = ctx.edit(plan)
    for name in stale:
        sim.delete(name, "stale-temp")
    return sim.freeze()


def _removed_session_file(entry: Any) -> str | None:
    value = entry.get("sessionFile") if isinstance(entry, Mapping) else None
    return value if isinstance(value, str) and value.strip() else None
