"""
What a maintenance run reports (OpenClaw spec §2; DESIGN "CLI JSON" item 6): the file listing it plans
over, every entry removal and file action with its reason, the disk-budget and unreferenced-artifact
summaries, and the JSON of ``sessions cleanup --json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs
import msgspec

from sessionkeeper.store._json import _encode_with_surrogates, _js_numbers


__all__ = (
    "DiskBudgetReport",
    "EntryRemoval",
    "FileAction",
    "FileReason",
    "MaintenancePlan",
    "MaintenanceReport",
    "RemovalReason",
    "StoreFile",
    "UnreferencedArtifactsReport",
    "serialize_store",
)

RemovalReason = Literal[
    "drop-unsafe", "prune-missing", "prune-model-run", "prune-stale", "cap-overflow", "evict-budget"
]
FileReason = Literal[
    "archive-removed-transcript",
    "removed-trajectory",
    "archive-retention",
    "backup-retention",
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
            ``backup-retention``, ``budget-artifact``, ``budget-entry-file``, ``unreferenced-artifact``,
            ``stale-temp``).
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

        ``wouldMutate`` is also ``True`` when the only change is dropping unsafe rows: the enforce run
        rewrites ``sessions.json`` without them. OpenClaw 2026.7.35 reports ``false`` there although its
        applied run rewrites the file too (its count leaves load-time drops out).
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
        store_changed: The store file must be rewritten: an entry is removed, or rows failing the
            load-time shape check are dropped (``drop-unsafe``; OpenClaw's applied cleanup rewrites the
            file without them too).
        report: What the plan does, with reasons (``applied`` is False: nothing ran yet).
    """

    entries_after: Mapping[str, Mapping[str, Any]]
    store_changed: bool
    report: MaintenanceReport


def serialize_store(entries: Mapping[str, Any]) -> bytes:
    """``JSON.stringify(store, null, 2)`` as UTF-8, no trailing newline: how ``sessions.json`` is written."""
    try:  # numbers in JavaScript's form (0.000012, not Python's 1.2e-05), as the JSON store writes them
        return msgspec.json.format(msgspec.json.encode(_js_numbers(entries)), indent=2)
    except (UnicodeEncodeError, TypeError, RecursionError):  # lone surrogates, RawJsonValue, deep values
        return _encode_with_surrogates(entries)
