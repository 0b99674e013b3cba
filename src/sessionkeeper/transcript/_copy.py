"""
The one rule every copy of transcript entries follows (issue 15 item 8, deviation ``fork-keeps-context``).

A copy that leaves entries out (a fork or clone drops the path's ``label`` entries, as pi 0.73.1 does; a
successor transcript drops summarised messages and stale state) re-links what it keeps so that no kept
entry loses anything it depended on:

- a kept entry whose parent was left out gets the nearest kept ancestor as its parent;
- a kept compaction whose ``firstKeptEntryId`` was left out points at the next kept entry of its own
  path after that one (its own id when none is left before it), so the same messages are kept.

So a fork's context at its leaf equals the source's at the fork point, always (pi 1.6 re-links the same
way; pi 0.73.1 leaves the entry after a label without its parent and a compaction keeping nothing).
Used by :meth:`TranscriptManager.create_branched_session` (and ``clone``/``fork``), the store's parent
fork (``sessionkeeper.store.fork_transcript_lines``) and the successor transcript of a compaction
(``sessionkeeper.compaction.build_successor_entries``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from sessionkeeper.records import (
    CompactionEntry,
    LabelEntry,
    SessionHeader,
    TranscriptEntry,
    UnknownEntry,
    encode_entry,
    entry_from_json,
    entry_key,
    entry_to_builtins,
    iso_from_ms,
    key_to_json,
)
from sessionkeeper.transcript._context import entry_kind
from sessionkeeper.transcript._index import TranscriptIndex, new_entry_id


__all__ = ("copy_branch", "copy_path", "relink_kept_entries")


def _first_kept(entry: TranscriptEntry) -> str | None:
    if isinstance(entry, CompactionEntry):
        return entry.first_kept_entry_id
    if isinstance(entry, UnknownEntry) and entry.type == "compaction":
        return entry_key(entry.raw.get("firstKeptEntryId"))
    return None


def _ancestors(entry: TranscriptEntry, by_id: Mapping[str, TranscriptEntry]) -> list[TranscriptEntry]:
    """The entries above ``entry`` (nearest first), by the path walk's rules (falsy parent ends; no cycle)."""
    found: list[TranscriptEntry] = []
    seen = {id(entry)}
    parent_id = entry.parent_id
    while parent_id:
        parent = by_id.get(parent_id)
        if parent is None or id(parent) in seen:
            break
        seen.add(id(parent))
        found.append(parent)
        parent_id = parent.parent_id
    return found


def _with(entry: TranscriptEntry, changes: dict[str, Any]) -> TranscriptEntry:
    raw = dict(entry_to_builtins(entry))  # a copy: an UnknownEntry's raw is its own dict
    raw.update(changes)
    return entry_from_json(raw)


def relink_kept_entries(
    entries: Sequence[TranscriptEntry],
    left_out: Collection[str],
    by_id: Mapping[str, TranscriptEntry],
) -> list[TranscriptEntry]:
    """
    The entries of ``entries`` whose id is not in ``left_out``, in order, re-linked by the copy rule (module
    docstring).

    Args:
        entries: The entries the copy considers, in write order (kept and left-out ones).
        left_out: Ids of the entries the copy does not write.
        by_id: The source's id index (the walks follow it; later duplicates win, as the loader's).

    Returns:
        The kept entries; an entry that needs no change is returned as the same object, a changed one
        is a new record (decoded from its JSON with ``parentId`` / ``firstKeptEntryId`` replaced).
    """
    kept: list[TranscriptEntry] = []
    for entry in entries:
        if entry.id in left_out:
            continue
        changes: dict[str, Any] = {}
        if entry.parent_id and entry.parent_id in left_out:
            parent: str | None = None
            for ancestor in _ancestors(entry, by_id):
                if ancestor.id not in left_out:
                    parent = ancestor.id
                    break
            changes["parentId"] = key_to_json(parent)
        first_kept = _first_kept(entry)
        if first_kept is not None and first_kept in left_out:
            path = _ancestors(entry, by_id)[::-1]
            at = next((i for i, e in enumerate(path) if e.id == first_kept), -1)
            if at >= 0:  # an id off the path keeps nothing in the source either: left as it is
                target = next((e.id for e in path[at + 1 :] if e.id not in left_out), entry.id)
                changes["firstKeptEntryId"] = key_to_json(target)
        kept.append(_with(entry, changes) if changes else entry)
    return kept


def copy_path(
    index: TranscriptIndex, positions: Sequence[int], *, leave_out: Callable[[str], bool] | None = None
) -> tuple[list[TranscriptEntry], list[bytes]]:
    """
    The entries and JSON lines a copy of the path ``positions`` (root first) writes, under the copy rule.

    Args:
        index: The source transcript.
        positions: The path's entry positions, root first (:meth:`TranscriptIndex.path_positions`).
        leave_out: Called with each entry's ``type``: ``True`` leaves the entry out (a fork or clone leaves
            out ``label`` entries, as pi does); ``None`` copies every entry.

    Returns:
        ``(entries, lines)``: unchanged entries keep their line byte for byte; re-linked ones are
        re-encoded.
    """
    entries = [index.entry_at(pos) for pos in positions]
    left_out = {e.id for e in entries if leave_out is not None and leave_out(entry_kind(e))}
    if not left_out:
        return entries, [index.line_bytes(pos) for pos in positions]
    line_of = {id(e): index.line_bytes(pos) for e, pos in zip(entries, positions, strict=True)}
    by_id = {e.id: e for e in entries if e.id}
    kept = relink_kept_entries(entries, left_out, by_id)
    lines = [line_of[id(e)] if id(e) in line_of else encode_entry(e) for e in kept]
    return kept, lines


def copy_branch(
    index: TranscriptIndex, positions: Sequence[int], header: SessionHeader, *, path: Path | None, now_ms: int
) -> tuple[TranscriptIndex, list[bytes]]:
    """
    The new transcript of a fork or clone (spec §11, ``createBranchedSession``): the entries at
    ``positions`` copied by :func:`copy_path` with the label entries left out, then one fresh ``label``
    entry per label whose target was copied, chained after the last copied entry with the label's
    original timestamp (pi 0.73.1; ``now_ms`` when it has none).

    Returns:
        The new index (header ``header``, file ``path``) and its entry lines, header excluded.
    """
    new_index = TranscriptIndex.empty(header, path=path)
    copied, lines = copy_path(index, positions, leave_out=lambda kind: kind == "label")
    for entry, line in zip(copied, lines, strict=True):
        new_index.add(entry, line)
    path_ids = {entry.id for entry in copied}
    parent: str | None = copied[-1].id if copied else None
    taken: set[str] = set(path_ids)
    for target_id, label in index.labels.items():
        if target_id not in path_ids:
            continue
        label_id = new_entry_id(taken)
        taken.add(label_id)
        label_entry = LabelEntry(
            id=label_id,
            parent_id=parent,
            timestamp=index.label_timestamps.get(target_id, iso_from_ms(now_ms)),
            target_id=target_id,
            label=label,
        )
        line = encode_entry(label_entry)
        new_index.add(label_entry, line)
        lines.append(line)
        parent = label_id
    return new_index, lines
