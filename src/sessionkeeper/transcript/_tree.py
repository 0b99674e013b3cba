"""The session tree view (pi's ``getTree``, pi-format spec §4 and §8), with a cycle guard."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from sessionkeeper.records import TranscriptEntry, parse_iso_ms


__all__ = ("TreeNode", "build_tree")


@attrs.frozen(kw_only=True)
class TreeNode:
    """
    One entry of the session tree.

    Attributes:
        entry: The entry.
        children: Its children, sorted by entry timestamp ascending (stable for ties).
        label: The entry's resolved label, if any.
        label_timestamp: ISO timestamp of the label entry that set it, if any.
    """

    entry: TranscriptEntry
    children: tuple[TreeNode, ...] = ()
    label: str | None = None
    label_timestamp: str | None = None


def _compare(a: TranscriptEntry, b: TranscriptEntry) -> int:
    diff = parse_iso_ms(a.timestamp) - parse_iso_ms(b.timestamp)
    if math.isnan(diff) or diff == 0:
        return 0  # JavaScript's sort treats a NaN comparison as "equal"
    return -1 if diff < 0 else 1


def build_tree(
    entries: Iterable[TranscriptEntry],
    *,
    labels: Mapping[str, str],
    label_timestamps: Mapping[str, str],
) -> tuple[TreeNode, ...]:
    """
    Build the session tree from the indexed entries (file order, one entry per id).

    Roots are entries whose ``parent_id`` is ``None``, equals their own id, or names no entry (orphans).
    Children are sorted by ``Date.parse(timestamp)`` ascending, stable for ties. Cycle guard (pi would
    drop these entries from the tree): entries on a ``parentId`` cycle, unreachable from any root, are
    detached from their parent and shown as roots, earliest in file order first.
    """
    ordered = list(entries)
    by_id = {entry.id: entry for entry in ordered}
    children: dict[str, list[TranscriptEntry]] = {entry.id: [] for entry in ordered}
    roots: list[TranscriptEntry] = []
    for entry in ordered:
        parent = entry.parent_id
        if parent is None or parent == entry.id or parent not in by_id:
            roots.append(entry)
        else:
            children[parent].append(entry)

    def reachable() -> set[str]:
        seen: set[str] = set()
        stack = [r.id for r in roots]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            stack.extend(c.id for c in children[current])
        return seen

    seen = reachable()
    while len(seen) < len(ordered):
        loose = next(e for e in ordered if e.id not in seen)
        if loose.parent_id is not None:
            children[loose.parent_id] = [c for c in children[loose.parent_id] if c.id != loose.id]
        roots.append(loose)
        seen = reachable()

    key = functools.cmp_to_key(_compare)
    return tuple(_build_iterative(roots, children, key, labels, label_timestamps)) if ordered else ()


def _build_iterative(
    roots: list[TranscriptEntry],
    children: dict[str, list[TranscriptEntry]],
    key: Callable[[TranscriptEntry], Any],
    labels: Mapping[str, str],
    label_timestamps: Mapping[str, str],
) -> list[TreeNode]:
    """Post-order construction without recursion (deep linear sessions have 100k levels)."""
    built: dict[str, TreeNode] = {}
    stack: list[tuple[TranscriptEntry, bool]] = [(root, False) for root in reversed(roots)]
    while stack:
        entry, expanded = stack.pop()
        if expanded:
            kids = sorted(children[entry.id], key=key)
            built[entry.id] = TreeNode(
                entry=entry,
                children=tuple(built[kid.id] for kid in kids),
                label=labels.get(entry.id),
                label_timestamp=label_timestamps.get(entry.id),
            )
            continue
        stack.append((entry, True))
        stack.extend((kid, False) for kid in children[entry.id])
    return [built[root.id] for root in roots]
