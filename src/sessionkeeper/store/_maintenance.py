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

import json
import math
import posixpath
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from sessionkeeper.exceptions import UnsafePathError
from sessionkeeper.store._artifacts import (
    STORE_TEMP_STALE_MS,
    archive_file_name,
    archive_timestamp_ms,
    is_archive_name,
    is_checkpoint_transcript_name,
    is_primary_transcript_name,
    is_prompt_blob_temp_name,
    is_store_temp_name,
    is_trajectory_name,
    prompt_blob_hash,
    prompt_blob_name,
    trajectory_names,
)
from sessionkeeper.store._keys import (
    is_main_session_key,
    is_model_run_session_key,
    is_protected_session_entry,
    is_safe_session_id,
    parse_agent_session_key,
    transcript_file_name,
)
from sessionkeeper.store._maintenance_settings import MaintenanceSettings, entry_high_water


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

RemovalReason = Literal[
    "drop-unsafe", "prune-missing", "prune-model-run", "prune-stale", "cap-overflow", "evict-budget"
]
FileReason = Literal[
    "archive-removed-transcript",
    "removed-trajectory",
    "archive-retention",
    "budget-artifact",
    "budget-entry-file",
    "unreferenced-artifact",
    "stale-temp",
]


@attrs.frozen(kw_only=True)
class StoreFile:
    """
    One regular file directly inside the sessions directory.

    Attributes:
        name: File name (no directory).
        size: Size in bytes.
        mtime_ms: Modification time in ms since the epoch.
    """

    name: str
    size: int
    mtime_ms: float


@attrs.frozen(kw_only=True)
class EntryRemoval:
    """
    A session entry the plan removes.

    Attributes:
        key: The session key.
        reason: ``drop-unsafe`` (unsafe ``sessionId``, dropped as OpenClaw's loader does),
            ``prune-missing`` (``--fix-missing``: no transcript with messages), ``prune-model-run``,
            ``prune-stale``, ``cap-overflow`` or ``evict-budget``.
        session_id: The entry's ``sessionId``, if any.
        updated_at: The entry's ``updatedAt`` (ms since epoch), if any.
    """

    key: str
    reason: RemovalReason
    session_id: str | None
    updated_at: float | None


@attrs.frozen(kw_only=True)
class FileAction:
    """
    A planned file operation inside the sessions directory.

    Attributes:
        name: The file acted on.
        action: ``archive`` (rename to ``archive_name``) or ``delete``.
        reason: Why (``archive-removed-transcript``, ``removed-trajectory``, ``archive-retention``,
            ``budget-artifact``, ``budget-entry-file``, ``unreferenced-artifact``, ``stale-temp``).
        size: Its size in bytes.
        archive_name: The new name of an archived file.
    """

    name: str
    action: Literal["archive", "delete"]
    reason: FileReason
    size: int
    archive_name: str | None = None


@attrs.frozen(kw_only=True)
class DiskBudgetReport:
    """The disk budget pass (spec §2.5); field names follow OpenClaw's JSON (bytes)."""

    total_bytes_before: int
    total_bytes_after: int
    removed_files: int
    removed_entries: int
    freed_bytes: int
    max_bytes: int
    high_water_bytes: int
    over_budget: bool

    def to_json(self) -> dict[str, Any]:
        """OpenClaw's camelCase ``diskBudget`` object."""
        return {
            "totalBytesBefore": self.total_bytes_before,
            "totalBytesAfter": self.total_bytes_after,
            "removedFiles": self.removed_files,
            "removedEntries": self.removed_entries,
            "freedBytes": self.freed_bytes,
            "maxBytes": self.max_bytes,
            "highWaterBytes": self.high_water_bytes,
            "overBudget": self.over_budget,
        }


@attrs.frozen(kw_only=True)
class UnreferencedArtifactsReport:
    """The unreferenced-artifact pass of ``sessions cleanup`` (spec §2.4); bytes and ms."""

    scanned_files: int
    removed_files: int
    freed_bytes: int
    older_than_ms: int

    def to_json(self) -> dict[str, Any]:
        """OpenClaw's camelCase ``unreferencedArtifacts`` object."""
        return {
            "scannedFiles": self.scanned_files,
            "removedFiles": self.removed_files,
            "freedBytes": self.freed_bytes,
            "olderThanMs": self.older_than_ms,
        }


@attrs.frozen(kw_only=True)
class MaintenanceReport:
    """
    What a maintenance run removes (or, for a dry run or warn mode, would remove), and why.

    Attributes:
        mode: ``enforce`` or ``warn``.
        dry_run: Nothing was changed on disk because a dry run was asked for.
        applied: The removals were carried out.
        now_ms: The time the rules were evaluated at (ms since epoch).
        before_count: Entries maintenance started from: after dropping unsafe rows and, with
            ``fix_missing``, entries without a transcript (as OpenClaw's applied run counts).
        after_count: Entries after.
        removals: Every removed entry with its reason, in pass order.
        file_actions: Every archived or deleted file with its reason, in execution order.
        actions: Session key -> ``keep`` or the removal reason, for every key present before.
        bytes_before: Total size of the files directly in the sessions directory before (bytes).
        bytes_after: The same after (``sessions.json`` at its rewritten size).
        disk_budget: The disk budget pass, or ``None`` when no budget is configured.
        unreferenced_artifacts: The unreferenced-artifact pass, or ``None`` when it did not run.
        warnings: Human-readable warnings (protected entries above the cap, disabled pruning, active
            session that would be evicted in warn mode, skipped locked files...).
    """

    mode: str
    dry_run: bool
    applied: bool
    now_ms: int
    before_count: int
    after_count: int
    removals: tuple[EntryRemoval, ...]
    file_actions: tuple[FileAction, ...]
    actions: Mapping[str, str]
    bytes_before: int
    bytes_after: int
    disk_budget: DiskBudgetReport | None
    unreferenced_artifacts: UnreferencedArtifactsReport | None
    warnings: tuple[str, ...] = ()

    def count(self, reason: RemovalReason) -> int:
        """Number of entries removed for ``reason``."""
        return sum(1 for r in self.removals if r.reason == reason)

    @property
    def removed_keys(self) -> tuple[str, ...]:
        """Every removed session key, in pass order."""
        return tuple(r.key for r in self.removals)

    def to_json(self) -> dict[str, Any]:
        """
        The JSON of ``sessions cleanup --json``: OpenClaw's fields plus ``actions`` and our details.

        OpenClaw's keys: ``mode``, ``dryRun``, ``beforeCount``, ``afterCount``, ``missing``,
        ``dmScopeRetired``, ``repaired``, ``modelRunPruned``, ``pruned``, ``capped``,
        ``unreferencedArtifacts``, ``diskBudget``, ``wouldMutate``, ``applied``, ``appliedCount``.
        Added: ``actions`` (key -> reason), ``droppedOnLoad``, ``files`` (the file actions),
        ``bytesBefore``, ``bytesAfter``, ``warnings``.
        """
        would_mutate = bool(self.removals) or bool(self.file_actions)
        out: dict[str, Any] = {
            "mode": self.mode,
            "dryRun": self.dry_run,
            "beforeCount": self.before_count,
            "afterCount": self.after_count,
            "repaired": 0,
            "missing": self.count("prune-missing"),
            "dmScopeRetired": 0,
            "modelRunPruned": self.count("prune-model-run"),
            "pruned": self.count("prune-stale"),
            "capped": self.count("cap-overflow"),
            "unreferencedArtifacts": self.unreferenced_artifacts.to_json()
            if self.unreferenced_artifacts
            else None,
            "diskBudget": self.disk_budget.to_json() if self.disk_budget else None,
            "wouldMutate": would_mutate,
        }
        if self.applied:
            out["applied"] = True
            out["appliedCount"] = self.after_count
        out["actions"] = dict(self.actions)
        out["droppedOnLoad"] = [r.key for r in self.removals if r.reason == "drop-unsafe"]
        out["files"] = [
            {"name": a.name, "action": a.action, "reason": a.reason, "size": a.size}
            | ({"archiveName": a.archive_name} if a.archive_name else {})
            for a in self.file_actions
        ]
        out["bytesBefore"] = self.bytes_before
        out["bytesAfter"] = self.bytes_after
        out["warnings"] = list(self.warnings)
        return out


@attrs.frozen(kw_only=True)
class MaintenancePlan:
    """
    The result of :func:`plan_maintenance`.

    Attributes:
        entries_after: The store after maintenance (session key -> raw entry object, order kept).
        store_changed: An entry is removed (rows dropped as unsafe alone do not require a rewrite: the
            store ignores them, and they disappear at its next write, as in OpenClaw).
        report: What the plan does, with reasons (``applied`` is False: nothing ran yet).
    """

    entries_after: Mapping[str, Mapping[str, Any]]
    store_changed: bool
    report: MaintenanceReport


def serialize_store(entries: Mapping[str, Any]) -> bytes:
    """``JSON.stringify(store, null, 2)`` as UTF-8, no trailing newline: how ``sessions.json`` is written."""
    text = json.dumps(entries, indent=2, ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8", "surrogatepass")


def _entry_chunk_bytes(key: str, entry: Any) -> int:
    return len(serialize_store({key: entry})) - 4


def _updated_at(entry: Mapping[str, Any]) -> float | None:
    """``updatedAt`` as OpenClaw's loader normalises it: absent -> None, not a finite number >= 0 -> 0."""
    if "updatedAt" not in entry:
        return None
    value = entry["updatedAt"]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return value if math.isfinite(value) and value >= 0 else 0


def _prompt_hash(entry: Mapping[str, Any]) -> str | None:
    """The skills prompt blob an entry refers to (``skillsSnapshot.promptRef``, sha256), if any."""
    snapshot = entry.get("skillsSnapshot")
    ref = snapshot.get("promptRef") if isinstance(snapshot, Mapping) else None
    if isinstance(ref, Mapping) and ref.get("algorithm") == "sha256" and isinstance(ref.get("hash"), str):
        return str(ref["hash"])
    return None


def _prompt_refcounts(entries: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for entry in entries.values():
        digest = _prompt_hash(entry)
        if digest is not None:
            counts[digest] = counts.get(digest, 0) + 1
    return counts


def _blob_removable(
    file: StoreFile, refcounts: Mapping[str, int], blob_cutoff: float, temp_cutoff: float
) -> bool:
    """``isPromptBlobArtifactRemovable``: a stale blob temp file, or an old blob no entry refers to."""
    if is_prompt_blob_temp_name(file.name):
        return file.mtime_ms <= temp_cutoff
    digest = prompt_blob_hash(file.name)
    return digest is not None and file.mtime_ms <= blob_cutoff and digest not in refcounts


def _is_blob(name: str) -> bool:
    return prompt_blob_hash(name) is not None or is_prompt_blob_temp_name(name)


def _sort_time(entry: Mapping[str, Any]) -> float:
    """``updatedAt`` for the cap order: a missing value sorts as -infinity (removed first)."""
    updated = _updated_at(entry)
    return -math.inf if updated is None else updated


def _session_id(entry: Mapping[str, Any]) -> str | None:
    value = entry.get("sessionId")
    return value.strip() if isinstance(value, str) and value.strip() else None


class _Resolver:
    """Resolves an entry's files to names directly inside the sessions directory (pure path logic)."""

    def __init__(self, sessions_dir: Path) -> None:
        self.base = posixpath.normpath(str(Path(sessions_dir).absolute()))

    def _inside(self, candidate: str) -> str | None:
        """The file name when ``candidate`` (relative or absolute) lies directly in the directory."""
        head, name = posixpath.split(posixpath.normpath(posixpath.join(self.base, candidate)))
        return name if head == self.base and name not in {"", ".", ".."} else None

    def session_file(self, entry: Mapping[str, Any]) -> str | None:
        value = entry.get("sessionFile")
        return self._inside(value.strip()) if isinstance(value, str) and value.strip() else None

    def canonical(self, session_id: str | None) -> str | None:
        if session_id is None:
            return None
        try:
            return transcript_file_name(session_id)
        except UnsafePathError:
            return None

    def transcript(self, entry: Mapping[str, Any]) -> str | None:
        """``resolveSessionFilePath``: the explicit ``sessionFile`` when inside, else the canonical name."""
        return self.session_file(entry) or self.canonical(_session_id(entry))

    def artifacts(self, entry: Mapping[str, Any]) -> list[str]:
        transcript = self.transcript(entry)
        if transcript is None:
            return []
        return [transcript, *trajectory_names(transcript)]

    def archive_candidates(self, session_id: str, session_file: str | None) -> list[str]:
        out: list[str] = []
        explicit = self.session_file({"sessionFile": session_file}) if session_file else None
        canonical = self.canonical(session_id)
        for name in (explicit, canonical):
            if name is not None and name not in out:
                out.append(name)
        return out

    def referenced(self, entries: Mapping[str, Mapping[str, Any]]) -> set[str]:
        names: set[str] = set()
        for entry in entries.values():
            names.update(self.artifacts(entry))
            checkpoints = entry.get("compactionCheckpoints")
            if not isinstance(checkpoints, list):
                continue
            for checkpoint in checkpoints:
                if not isinstance(checkpoint, Mapping):
                    continue
                for side in ("preCompaction", "postCompaction"):
                    part = checkpoint.get(side)
                    path = part.get("sessionFile") if isinstance(part, Mapping) else None
                    if isinstance(path, str) and path.strip():
                        inside = self._inside(path.strip())
                        if inside is not None:
                            names.add(inside)
        return names


@attrs.define
class _Sim:
    """Mutable simulation state of one plan."""

    entries: dict[str, Mapping[str, Any]]
    files: dict[str, StoreFile]
    locked: frozenset[str]
    now_ms: int
    store_name: str
    removals: list[EntryRemoval] = attrs.field(factory=list)
    actions: list[FileAction] = attrs.field(factory=list)
    archive_suffix: str = ""
    warnings: list[str] = attrs.field(factory=list)

    def remove_entry(self, key: str, reason: RemovalReason) -> Mapping[str, Any]:
        entry = self.entries.pop(key)
        self.removals.append(
            EntryRemoval(key=key, reason=reason, session_id=_session_id(entry), updated_at=_updated_at(entry))
        )
        return entry

    def delete(self, name: str, reason: FileReason) -> int | None:
        """Plan deleting ``name``; returns its size, or ``None`` when it is absent, the store or locked."""
        file = self.files.get(name)
        if file is None or name == self.store_name:
            return None
        if name in self.locked:
            self.warnings.append(f"kept {name}: its transcript lock is held")
            return None
        del self.files[name]
        self.actions.append(FileAction(name=name, action="delete", reason=reason, size=file.size))
        return file.size

    def archive(self, name: str) -> bool:
        file = self.files.get(name)
        if file is None:
            return False
        if name in self.locked:
            self.warnings.append(f"kept {name}: its transcript lock is held")
            return False
        target = f"{name}{self.archive_suffix}"
        del self.files[name]
        self.files[target] = StoreFile(name=target, size=file.size, mtime_ms=file.mtime_ms)
        self.actions.append(
            FileAction(
                name=name,
                action="archive",
                reason="archive-removed-transcript",
                size=file.size,
                archive_name=target,
            )
        )
        return True


def _is_preserved(key: str, protected: Mapping[str, bool], preserve: Collection[str]) -> bool:
    return key in preserve or protected[key]


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
        active_keys: Keys that must survive (the caller's running sessions; D6).
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
    resolver = _Resolver(Path(sessions_dir))
    listing = {f.name: f for f in files}
    active = {k.strip() for k in active_keys if k.strip()}
    locked = frozenset(locked_files)
    sim = _Sim(entries={}, files=dict(listing), locked=locked, now_ms=now_ms, store_name=store_name)
    sim.archive_suffix = archive_file_name("", "deleted", now_ms)  # ".deleted.<stamp>", once per plan
    dropped: list[EntryRemoval] = []
    for key, value in entries.items():
        if not isinstance(value, Mapping) or (
            "sessionId" in value and not is_safe_session_id(value["sessionId"])
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
            preserve.add(key)

    # (0) --fix-missing: entries whose transcript is missing or holds no message.
    if message_transcripts is not None:
        with_messages = set(message_transcripts)
        for key in list(sim.entries):
            entry = sim.entries[key]
            if key in preserve:
                continue
            if _session_id(entry) is None:
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
            updated = _updated_at(entry)
            if key in preserve or not is_model_run_session_key(key):
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
            if _is_preserved(key, protected, preserve):
                continue
            updated = _updated_at(entry)
            if updated is not None and updated < cutoff:
                sim.remove_entry(key, "prune-stale")

    # (3) the cap: forced by sessions cleanup, else only at the high-water mark (batched).
    if force or len(sim.entries) >= high_water:
        preserved_count = sum(1 for k in sim.entries if _is_preserved(k, protected, preserve))
        max_removable = max(0, settings.max_entries - preserved_count)
        removable = [k for k in sim.entries if not _is_preserved(k, protected, preserve)]
        if len(removable) > max_removable:
            ordered = sorted(removable, key=lambda k: -_sort_time(sim.entries[k]))
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
    referenced_ids = {sid for e in sim.entries.values() if (sid := _session_id(e))}
    archived_any = False
    for session_id, session_file in removed_files.items():
        if session_id in referenced_ids:
            continue
        for name in resolver.archive_candidates(session_id, session_file):
            archived_any = sim.archive(name) or archived_any
    for session_id, session_file in removed_files.items():
        if session_id in referenced_ids:
            continue
        transcript = resolver.transcript({"sessionId": session_id, "sessionFile": session_file})
        if transcript is not None:
            for name in trajectory_names(transcript):
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

    # (6) disk budget.
    disk_budget = _disk_budget(sim, resolver, settings, preserve, protected)

    # (7) unreferenced artifacts (sessions cleanup only).
    unreferenced = None if on_save else _unreferenced(sim, resolver, settings)

    removals = tuple(dropped) + tuple(sim.removals)
    reasons = {r.key: r.reason for r in removals}
    actions = {key: reasons.get(key, "keep") for key in [*(d.key for d in dropped), *before_keys]}
    store_changed = bool(sim.removals)
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
    sim: _Sim,
    resolver: _Resolver,
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
    prompt_refs = _prompt_refcounts(sim.entries)
    # 1. unreferenced prompt blobs older than 5 minutes and stale blob temp files, oldest first
    blobs = [f for f in sim.files.values() if _blob_removable(f, prompt_refs, temp_cutoff, temp_cutoff)]
    for file in sorted(blobs, key=lambda f: f.mtime_ms):
        if total <= high_water:
            break
        deleted = sim.delete(file.name, "budget-artifact") or 0
        if deleted > 0:
            total -= deleted
            freed += deleted
            removed_files += 1

    def removable(file: StoreFile) -> bool:
        if _is_blob(file.name):
            return False
        if is_store_temp_name(file.name, sim.store_name):
            return file.mtime_ms <= temp_cutoff
        return is_archive_name(file.name) or _is_unreferenced(file.name, referenced)

    # 2. archives, unreferenced transcripts/checkpoints/trajectories and stale temp files, oldest first
    queue = sorted((f for f in sim.files.values() if removable(f)), key=lambda f: f.mtime_ms)
    for file in queue:
        if total <= high_water:
            break
        deleted = sim.delete(file.name, "budget-artifact") or 0
        if deleted > 0:
            total -= deleted
            freed += deleted
            removed_files += 1
    if total > high_water:
        refcounts: dict[str, int] = {}
        for entry in sim.entries.values():
            if (sid := _session_id(entry)) is not None:
                refcounts[sid] = refcounts.get(sid, 0) + 1
        chunks = {k: _entry_chunk_bytes(k, e) for k, e in sim.entries.items()}
        lowered_active = {k.lower() for k in preserve}
        for key in sorted(sim.entries, key=lambda k: _updated_at(sim.entries[k]) or 0):
            if total <= high_water:
                break
            entry = sim.entries[key]
            if key.lower() in lowered_active or _is_preserved(key, protected, preserve):
                continue
            previous = projected
            sim.remove_entry(key, "evict-budget")
            projected = max(2, projected - (chunks[key] + 2))
            total += projected - previous
            digest = _prompt_hash(entry)
            if digest is not None:
                prompt_refs[digest] = prompt_refs.get(digest, 1) - 1
                if prompt_refs[digest] <= 0:
                    del prompt_refs[digest]
                    blob = sim.files.get(prompt_blob_name(digest))
                    if blob is not None and _blob_removable(blob, prompt_refs, temp_cutoff, temp_cutoff):
                        deleted = sim.delete(blob.name, "budget-entry-file") or 0
                        if deleted > 0:
                            total -= deleted
                            freed += deleted
                            removed_files += 1
            removed_entries += 1
            sid = _session_id(entry)
            if sid is None:
                continue
            refcounts[sid] = refcounts.get(sid, 1) - 1
            if refcounts[sid] > 0:
                continue
            for name in resolver.artifacts(entry):
                deleted = sim.delete(name, "budget-entry-file") or 0
                if deleted > 0:
                    total -= deleted
                    freed += deleted
                    removed_files += 1
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
    sim: _Sim, resolver: _Resolver, settings: MaintenanceSettings
) -> UnreferencedArtifactsReport:
    older_than = settings.prune_after_ms
    scanned = len(sim.files)
    referenced = resolver.referenced(sim.entries)
    temp_cutoff = sim.now_ms - STORE_TEMP_STALE_MS
    candidates: list[tuple[StoreFile, Literal["stale-temp", "unreferenced-artifact"]]] = []
    prompt_refs = _prompt_refcounts(sim.entries)
    blob_cutoff = sim.now_ms - max(older_than or 0, STORE_TEMP_STALE_MS)
    for file in sim.files.values():
        if _is_blob(file.name):
            if is_prompt_blob_temp_name(file.name) and file.mtime_ms <= temp_cutoff:
                candidates.append((file, "stale-temp"))
            elif older_than is not None and _blob_removable(file, prompt_refs, blob_cutoff, temp_cutoff):
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
    resolver = _Resolver(Path(sessions_dir))
    valid = {k: v for k, v in entries.items() if isinstance(v, Mapping)}
    referenced = resolver.referenced(valid)
    orphans = [f for f in files if is_primary_transcript_name(f.name) and f.name not in referenced]
    return [f.name for f in sorted(orphans, key=lambda f: (f.mtime_ms, f.name))]
