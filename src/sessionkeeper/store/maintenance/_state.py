"""
The working state of a maintenance plan: entry field readers, the resolver of an entry's files inside the
sessions directory, and the simulated directory the planner edits (private to the planner).
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Collection, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs

from sessionkeeper.exceptions import UnsafePathError
from sessionkeeper.store._entry_shape import session_id_of, updated_at_of
from sessionkeeper.store._keys import transcript_file_name
from sessionkeeper.store._paths import check_session_file_owner
from sessionkeeper.store.maintenance._artifacts import (
    is_prompt_blob_temp_name,
    prompt_blob_hash,
    trajectory_names,
)
from sessionkeeper.store.maintenance._report import (
    DiskBudgetReport,
    EntryRemoval,
    FileAction,
    FileReason,
    RemovalReason,
    StoreFile,
    UnreferencedArtifactsReport,
    serialize_store,
)
from sessionkeeper.store.maintenance._settings import MaintenanceSettings


__all__ = (
    "PlanContext",
    "PlanSnapshot",
    "PlanState",
    "Resolver",
    "blob_removable",
    "entry_chunk_bytes",
    "is_blob",
    "is_preserved",
    "prompt_hash",
    "prompt_refcounts",
    "session_id_of",
    "sort_time",
    "updated_at_of",
)


def entry_chunk_bytes(key: str, entry: Any) -> int:
    return len(serialize_store({key: entry})) - 4


def prompt_hash(entry: Mapping[str, Any]) -> str | None:
    """The skills prompt blob an entry refers to (``skillsSnapshot.promptRef``, sha256), if any."""
    snapshot = entry.get("skillsSnapshot")
    ref = snapshot.get("promptRef") if isinstance(snapshot, Mapping) else None
    if isinstance(ref, Mapping) and ref.get("algorithm") == "sha256" and isinstance(ref.get("hash"), str):
        return str(ref["hash"])
    return None


def prompt_refcounts(entries: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for entry in entries.values():
        digest = prompt_hash(entry)
        if digest is not None:
            counts[digest] = counts.get(digest, 0) + 1
    return counts


def blob_removable(
    file: StoreFile, refcounts: Mapping[str, int], blob_cutoff: float, temp_cutoff: float
) -> bool:
    """``isPromptBlobArtifactRemovable``: a stale blob temp file, or an old blob no entry refers to."""
    if is_prompt_blob_temp_name(file.name):
        return file.mtime_ms <= temp_cutoff
    digest = prompt_blob_hash(file.name)
    return digest is not None and file.mtime_ms <= blob_cutoff and digest not in refcounts


def is_blob(name: str) -> bool:
    return prompt_blob_hash(name) is not None or is_prompt_blob_temp_name(name)


def sort_time(entry: Mapping[str, Any]) -> float:
    """``updatedAt`` for the cap order: a missing value sorts as -infinity (removed first)."""
    updated = updated_at_of(entry)
    return -math.inf if updated is None else updated


class Resolver:
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
        return self.session_file(entry) or self.canonical(session_id_of(entry))

    def artifacts(self, entry: Mapping[str, Any]) -> list[str]:
        transcript = self.transcript(entry)
        if transcript is None:
            return []
        return [transcript, *trajectory_names(transcript)]

    def archive_candidates(
        self, session_id: str, session_file: str | None, refused: list[str] | None = None
    ) -> list[str]:
        """
        The files of a removed session to archive: its explicit ``sessionFile`` when the session owns it
        (:func:`~sessionkeeper.store._paths.check_session_file_owner`, F1), and its canonical name. A
        refused ``sessionFile`` is appended to ``refused`` as a sentence for the report.
        """
        out: list[str] = []
        explicit = self.session_file({"sessionFile": session_file}) if session_file else None
        if explicit is not None:
            reason = check_session_file_owner(explicit, session_id)
            if reason is not None:
                if refused is not None:
                    refused.append(f"sessionFile of session {session_id!r} refused, not archived: {reason}")
                explicit = None
        canonical = self.canonical(session_id)
        for name in (explicit, canonical):
            if name is not None and name not in out:
                out.append(name)
        return out

    def owned_artifacts(self, entry: Mapping[str, Any], refused: list[str] | None = None) -> list[str]:
        """:meth:`artifacts` of the files ``entry`` owns (F1): a refused ``sessionFile`` gives none."""
        session_id = session_id_of(entry)
        if session_id is None:
            return []
        value = entry.get("sessionFile")
        names: list[str] = []
        for name in self.archive_candidates(session_id, value if isinstance(value, str) else None, refused):
            names.extend([name, *trajectory_names(name)])
            break
        return names

    def referenced(self, entries: Mapping[str, Mapping[str, Any]]) -> set[str]:
        """Every file name an entry of ``entries`` references (transcripts, trajectories, checkpoints)."""
        names: set[str] = set()
        for entry in entries.values():
            names.update(self.entry_references(entry))
        return names

    def entry_references(self, entry: Mapping[str, Any]) -> set[str]:
        """The file names one entry references: its artifacts and its checkpoints' transcripts."""
        names = set(self.artifacts(entry))
        checkpoints = entry.get("compactionCheckpoints")
        if not isinstance(checkpoints, list):
            return names
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


@attrs.frozen(kw_only=True)
class PlanContext:
    """
    What every pass of one plan reads and none changes: the settings, the clock, the directory, and the
    sets computed once from the loaded store (DESIGN D6).

    Attributes:
        settings: The maintenance settings.
        now_ms: The time the rules are evaluated at, ms since epoch.
        resolver: Resolves an entry's files to names directly inside the sessions directory.
        store_name: The store file's name inside the directory (never deleted or moved).
        loaded: The store as loaded, rows dropped by the shape check left out (file order).
        raw: The entries exactly as given to the planner (a removed entry's ``sessionFile`` is read here).
        protected: Loaded key -> whether it is a durable external pointer (spec §2.3).
        preserve: Lowercased keys no pass removes: ``agent:<id>:main``, the caller's active keys and the
            entries whose transcript lock is held (D6).
        locked: Names of the transcripts whose write lock is held: never moved or deleted (B19).
        on_save: The automatic maintenance of a store write, not ``sessions cleanup``.
        message_transcripts: With ``--fix-missing``, the transcripts holding a message; else ``None``.
        archive_suffix: ``.deleted.<stamp>``, computed once per plan.
    """

    settings: MaintenanceSettings
    now_ms: int
    resolver: Resolver
    store_name: str
    loaded: Mapping[str, Mapping[str, Any]]
    raw: Mapping[str, Any]
    protected: Mapping[str, bool]
    preserve: frozenset[str]
    locked: frozenset[str]
    on_save: bool
    message_transcripts: frozenset[str] | None
    archive_suffix: str

    def is_preserved(self, key: str) -> bool:
        """True when no pass may remove ``key`` (protected, or in :attr:`preserve`, case-insensitively)."""
        return is_preserved(key, self.protected, self.preserve)

    def edit(self, plan: PlanSnapshot) -> PlanState:
        """A private mutable copy of ``plan`` for one pass to edit; :meth:`PlanState.freeze` ends it."""
        return PlanState(
            entries=dict(plan.entries),
            files=dict(plan.files),
            locked=self.locked,
            now_ms=self.now_ms,
            store_name=self.store_name,
            removals=list(plan.removals),
            actions=list(plan.actions),
            archive_suffix=self.archive_suffix,
            warnings=list(plan.warnings),
            archived_any=plan.archived_any,
            disk_budget=plan.disk_budget,
            unreferenced=plan.unreferenced,
        )


@attrs.frozen(kw_only=True)
class PlanSnapshot:
    """
    The plan between two passes, immutable: a pass takes one and returns a new one.

    Attributes:
        entries: The entries still in the store (read-only view, file order).
        files: The simulated directory listing after the planned file actions (read-only view).
        removals: The entry removals so far, in the order the passes made them.
        actions: The planned file actions so far, in order.
        warnings: Sentences for the report, in order (duplicates are folded at the end).
        archived_any: A removed entry's transcript was archived (archive retention then runs).
        disk_budget: The disk-budget pass's summary, once it ran with a budget set.
        unreferenced: The unreferenced-artifact pass's summary, once it ran.
    """

    entries: Mapping[str, Mapping[str, Any]]
    files: Mapping[str, StoreFile]
    removals: tuple[EntryRemoval, ...] = ()
    actions: tuple[FileAction, ...] = ()
    warnings: tuple[str, ...] = ()
    archived_any: bool = False
    disk_budget: DiskBudgetReport | None = None
    unreferenced: UnreferencedArtifactsReport | None = None


@attrs.define
class PlanState:
    """Mutable working copy of one pass (:meth:`PlanContext.edit`); :meth:`freeze` returns the result."""

    entries: dict[str, Mapping[str, Any]]
    files: dict[str, StoreFile]
    locked: frozenset[str]
    now_ms: int
    store_name: str
    removals: list[EntryRemoval] = attrs.field(factory=list)
    actions: list[FileAction] = attrs.field(factory=list)
    archive_suffix: str = ""
    warnings: list[str] = attrs.field(factory=list)
    archived_any: bool = False
    disk_budget: DiskBudgetReport | None = None
    unreferenced: UnreferencedArtifactsReport | None = None

    def freeze(self) -> PlanSnapshot:
        """The edited plan as a new immutable :class:`PlanSnapshot`."""
        return PlanSnapshot(
            entries=MappingProxyType(dict(self.entries)),
            files=MappingProxyType(dict(self.files)),
            removals=tuple(self.removals),
            actions=tuple(self.actions),
            warnings=tuple(self.warnings),
            archived_any=self.archived_any,
            disk_budget=self.disk_budget,
            unreferenced=self.unreferenced,
        )

    def remove_entry(self, key: str, reason: RemovalReason) -> Mapping[str, Any]:
        entry = self.entries.pop(key)
        self.removals.append(
            EntryRemoval(
                key=key, reason=reason, session_id=session_id_of(entry), updated_at=updated_at_of(entry)
            )
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


def is_preserved(key: str, protected: Mapping[str, bool], preserve: Collection[str]) -> bool:
    """True when ``key`` is protected or in ``preserve`` (a set of lowercased keys: case-insensitive)."""
    return key.lower() in preserve or protected[key]
