"""
The size of a transcript's live window in bytes: what ``maxActiveTranscriptBytes`` and
``forceFlushTranscriptBytes`` measure (issue #15 item 11; pi-format §9).
"""

from __future__ import annotations

from sessionkeeper.records import UnknownEntry, entry_key
from sessionkeeper.transcript import CompactionEntry, TranscriptManager


__all__ = ("active_transcript_bytes",)


def active_transcript_bytes(transcript: TranscriptManager) -> int:
    """
    Bytes (lines and their newlines) of ``transcript``'s live window: the rule of
    :meth:`~sessionkeeper.runtime.SessionRuntime.active_transcript_bytes` (pi-format §9).
    """
    index = transcript.index
    kinds, ids, parents, lines, by_id = index.kinds, index.ids, index.parents, index.lines, index.by_id
    leaf = transcript.leaf_id
    pos = by_id.get(leaf) if isinstance(leaf, str) and leaf else None
    if pos is None:
        if not leaf or not kinds:
            return 0
        pos = len(kinds) - 1  # an unknown leaf: the last entry, as build_session_context falls back
    if pos == len(kinds) - 1 and parents[1:] == ids[:-1] and not parents[0]:
        # one chain and the leaf at its end (the usual file): C-speed list operations; this runs
        # before every turn, and a walk costs ~35 ms on a 20k-entry file
        try:
            start = len(kinds) - 1 - kinds[::-1].index("compaction")
        except ValueError:
            return sum(map(len, lines[: len(kinds)])) + len(kinds)
        entry = index.entry_at(start)
        kept_at = start
        if isinstance(entry, CompactionEntry | UnknownEntry):
            first = (
                entry.first_kept_entry_id
                if isinstance(entry, CompactionEntry)
                else entry_key(entry.raw.get("firstKeptEntryId"))
            )
            found = by_id.get(first) if first is not None else None
            kept_at = found if found is not None and found < start else start
        return sum(map(len, lines[kept_at : len(kinds)])) + len(kinds) - kept_at
    total = kept = 0
    first_kept: object = None
    compaction_seen = False
    seen = {pos}
    while True:
        size = len(lines[pos]) + 1
        if compaction_seen:
            kept += size
            if ids[pos] == first_kept:
                total += kept
                break
        else:
            total += size
            if kinds[pos] == "compaction":
                compaction_seen = True
                entry = index.entry_at(pos)
                if isinstance(entry, CompactionEntry):
                    first_kept = entry.first_kept_entry_id
                elif isinstance(entry, UnknownEntry):
                    first_kept = entry_key(entry.raw.get("firstKeptEntryId"))
                if first_kept is None or first_kept == ids[pos]:
                    break  # a strict checkpoint keeps nothing before itself
        parent = parents[pos]
        nxt = by_id.get(parent) if parent else None
        if nxt is None or nxt in seen:
            break
        seen.add(nxt)
        pos = nxt
    return total
