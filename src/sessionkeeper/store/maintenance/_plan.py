"""
The store maintenance planner (OpenClaw spec §2, DESIGN D6): a pure function from (entries, directory
listing, settings, now, active keys) to a :class:`MaintenancePlan`.

The plan is a sequence of named passes (:data:`MAINTENANCE_PASSES`, one function per rule, each pure
over immutable values; in ``_passes`` and ``_budget``) that simulates, in OpenClaw's applied order,
everything an enforce run does: (1) model-run probes older than 24 h, (2) entries older than
``pruneAfter``, (3) the ``maxEntries`` cap, (4) archiving the transcripts of removed entries as
``*.deleted.<stamp>`` and deleting their trajectory sidecars, (5) archive retention, (6) the disk
budget, (7) unreferenced artifacts (``sessions cleanup`` only).
Executing a plan (:func:`sessionkeeper.store.run_maintenance`) performs exactly the planned file
actions, so a dry run reports what the enforce run then does (D6).

Deviations from OpenClaw 2026.7.35 (DESIGN D6): ``agent:<id>:main``, the caller's active keys and
entries whose transcript lock is held are never removed by any pass, and locked files are never moved;
a disabled ``pruneAfter`` (``None``) prunes nothing by age, keeps ``*.deleted`` archives and skips the
age-based unreferenced-artifact pass (stale temp files are still removed).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from sessionkeeper.store._entry_shape import is_safe_store_session_id
from sessionkeeper.store._keys import is_main_session_key, is_protected_session_entry
from sessionkeeper.store.maintenance._artifacts import archive_file_name, is_primary_transcript_name
from sessionkeeper.store.maintenance._budget import enforce_disk_budget, remove_unreferenced_artifacts
from sessionkeeper.store.maintenance._passes import (
    archive_removed_transcripts,
    cap_entries,
    prune_missing_transcripts,
    prune_model_runs,
    prune_stale_entries,
    retain_archives,
    retain_transcript_backups,
    sweep_write_temps,
)
from sessionkeeper.store.maintenance._report import (
    DiskBudgetReport,
    EntryRemoval,
    FileAction,
    MaintenancePlan,
    MaintenanceReport,
    RemovalReason,
    StoreFile,
    UnreferencedArtifactsReport,
    serialize_store,
)
from sessionkeeper.store.maintenance._settings import MaintenanceSettings
from sessionkeeper.store.maintenance._state import PlanContext, PlanSnapshot, Resolver


__all__ = (
    "MAINTENANCE_PASSES",
    "DiskBudgetReport",
    "EntryRemoval",
    "FileAction",
    "MaintenancePass",
    "MaintenancePlan",
    "MaintenanceReport",
    "RemovalReason",
    "StoreFile",
    "UnreferencedArtifactsReport",
    "find_unreferenced_transcripts",
    "load_plan",
    "plan_maintenance",
    "serialize_store",
)

MaintenancePass = Callable[[PlanSnapshot, PlanContext], PlanSnapshot]
"""One rule of the plan: a pure function from the plan so far (and the context) to the next plan."""

MAINTENANCE_PASSES: Final[tuple[MaintenancePass, ...]] = (
    prune_missing_transcripts,  # (0) --fix-missing
    prune_model_runs,  # (1) model-run probes older than 24 h
    prune_stale_entries,  # (2) entries older than pruneAfter
    cap_entries,  # (3) maxEntries
    archive_removed_transcripts,  # (4) *.deleted.<stamp> archives, trajectories deleted
    retain_archives,  # (5) archive retention
    retain_transcript_backups,  # (5b) *.bak.<stamp> transcript backups
    sweep_write_temps,  # (5c) temp files of killed writes
    enforce_disk_budget,  # (6) maxDiskBytes
    remove_unreferenced_artifacts,  # (7) sessions cleanup only
)
"""The passes of :func:`plan_maintenance`, in OpenClaw's applied order (spec §2.2-§2.5, DESIGN D6)."""


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

    Rows failing the shape check are dropped first (:func:`load_plan`); then every pass of
    :data:`MAINTENANCE_PASSES` runs in order, each on the previous one's result.
    """
    listing = {f.name: f for f in files}
    loaded, dropped = load_plan(entries)
    ctx = _context(
        entries,
        loaded,
        settings=settings,
        now_ms=now_ms,
        sessions_dir=sessions_dir,
        active_keys=active_keys,
        locked_files=locked_files,
        on_save=on_save,
        store_name=store_name,
        message_transcripts=message_transcripts,
    )
    plan = PlanSnapshot(entries=MappingProxyType(dict(loaded)), files=MappingProxyType(dict(listing)))
    for maintenance_pass in MAINTENANCE_PASSES:
        plan = maintenance_pass(plan, ctx)
    return _result(plan, ctx, dropped=dropped, listing=listing)


def load_plan(entries: Mapping[str, Any]) -> tuple[dict[str, Mapping[str, Any]], tuple[EntryRemoval, ...]]:
    """
    The store as OpenClaw's loader keeps it: values that are not objects, or whose ``sessionId`` fails
    the store shape check (spec §1.1, :func:`~sessionkeeper.store.is_safe_store_session_id`), are dropped
    as ``drop-unsafe``. Returns the kept entries (file order) and the drops (in order).
    """
    loaded: dict[str, Mapping[str, Any]] = {}
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
        loaded[key] = value
    return loaded, tuple(dropped)


def _context(
    raw: Mapping[str, Any],
    loaded: Mapping[str, Mapping[str, Any]],
    *,
    settings: MaintenanceSettings,
    now_ms: int,
    sessions_dir: Path | str,
    active_keys: Iterable[str],
    locked_files: Collection[str],
    on_save: bool,
    store_name: str,
    message_transcripts: Collection[str] | None,
) -> PlanContext:
    resolver = Resolver(Path(sessions_dir))
    locked = frozenset(locked_files)
    # OpenClaw compares the active key case-insensitively (its keys are normalised to lowercase on
    # write), in every pass: the preserve set holds lowercased keys and every check lowercases the key
    preserve = {k.strip().lower() for k in active_keys if k.strip()}
    # DESIGN D6: the main session, the caller's active set and locked transcripts are never evicted.
    for key, entry in loaded.items():
        transcript = resolver.transcript(entry)
        if is_main_session_key(key) or (transcript is not None and transcript in locked):
            preserve.add(key.lower())
    return PlanContext(
        settings=settings,
        now_ms=now_ms,
        resolver=resolver,
        store_name=store_name,
        loaded=MappingProxyType(dict(loaded)),
        raw=raw,
        # spec §2.3: durable external pointers (threads, topics, groups, channels) are protected.
        protected=MappingProxyType({key: is_protected_session_entry(key, e) for key, e in loaded.items()}),
        preserve=frozenset(preserve),
        locked=locked,
        on_save=on_save,
        message_transcripts=None if message_transcripts is None else frozenset(message_transcripts),
        archive_suffix=archive_file_name("", "deleted", now_ms),  # ".deleted.<stamp>", once per plan
    )


def _result(
    plan: PlanSnapshot,
    ctx: PlanContext,
    *,
    dropped: tuple[EntryRemoval, ...],
    listing: Mapping[str, StoreFile],
) -> MaintenancePlan:
    removals = dropped + plan.removals
    reasons = {r.key: r.reason for r in removals}
    actions = {key: reasons.get(key, "keep") for key in [*(d.key for d in dropped), *ctx.loaded]}
    # the count before the rules is taken after --fix-missing (its removals are a repair, not a rule)
    before_count = len(ctx.loaded) - sum(1 for r in plan.removals if r.reason == "prune-missing")
    # rows dropped as unsafe count too: the enforce run rewrites the store without them, as OpenClaw's
    # applied cleanup does (its save writes the loaded, normalised store), so the file holds what the
    # report says
    store_changed = bool(plan.removals) or bool(dropped)
    bytes_before = sum(f.size for f in listing.values())
    bytes_after = sum(f.size for f in plan.files.values())
    if store_changed and ctx.store_name in plan.files:
        bytes_after += len(serialize_store(dict(plan.entries))) - plan.files[ctx.store_name].size
    report = MaintenanceReport(
        mode=ctx.settings.mode,
        dry_run=False,
        applied=False,
        now_ms=ctx.now_ms,
        before_count=before_count,
        after_count=len(plan.entries),
        removals=removals,
        file_actions=plan.actions,
        actions=actions,
        bytes_before=bytes_before,
        bytes_after=bytes_after,
        disk_budget=plan.disk_budget,
        unreferenced_artifacts=plan.unreferenced,
        warnings=tuple(dict.fromkeys(plan.warnings)),
    )
    return MaintenancePlan(entries_after=dict(plan.entries), store_changed=store_changed, report=report)


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
