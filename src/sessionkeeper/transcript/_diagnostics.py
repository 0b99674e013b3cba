"""
What a transcript load found wrong, line by line (the ``doctor`` command builds on this).

Loading never fails on a damaged *line*: it skips it, records it here, and the writer repairs the file
(after a 0600 backup) only when it next writes. Only a file that is not a transcript at all raises
:class:`~sessionkeeper.exceptions.TranscriptFormatError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs


__all__ = ("TornTail", "TranscriptDiagnostics")


@attrs.frozen(kw_only=True)
class TornTail:
    """
    A last line with no trailing newline that does not parse: the remains of an interrupted append.

    Attributes:
        line: Its 1-based line number.
        offset: Byte offset where it starts (= the length of the file's complete part).
        length: Its length in bytes.
    """

    line: int
    offset: int
    length: int


@attrs.frozen(kw_only=True)
class TranscriptDiagnostics:
    """
    Everything unusual found while loading one transcript (pi-format spec §2, §7.4, §16.7).

    Line numbers are 1-based file lines. A transcript with no finding is :attr:`clean`.

    Attributes:
        path: The file, or ``None`` for bytes loaded from memory.
        line_count: Lines in the file (a last line without newline counts).
        header_line: Line of the session header used (the first parseable line).
        version: The header's format version (1 when absent).
        legacy_version: ``True`` when ``version < 3``: migrated in memory, rewritten on first write.
        torn_tail: The torn last line, if any (skipped; cut off after a backup before the next append).
        missing_final_newline: The last line parses but has no ``\\n`` (one is added before appending).
        invalid_lines: Lines that are not valid JSON (skipped, like pi does), excluding the torn tail.
        non_object_lines: Lines holding valid JSON that is not an object (skipped).
        bad_utf8_lines: Lines with invalid UTF-8 bytes (read with U+FFFD, as Node does).
        lone_surrogate_lines: Lines with unpaired ``\\udXXX`` escapes (read as U+FFFD, field report B02).
        repeated_header_lines: Later ``session`` header lines (ignored, spec §7.4).
        entries_without_id: Lines of entries with no string ``id`` (kept, but not part of the tree).
        duplicate_ids: Ids used by more than one entry, with their lines (the later entry wins).
        missing_parents: Ids of entries whose ``parentId`` names no entry (treated as roots).
        cycles: Ids of entries on a ``parentId`` cycle (a walk stops before repeating an entry).
        orphan_tool_results: ``toolCallId`` of tool results on the leaf's context with no matching
            tool call in the closest preceding assistant message (only set by ``scan``).
        non_string_timestamps: Lines of ``compaction``, ``branch_summary`` and ``custom_message``
            entries whose ``timestamp`` is not a string (read as ``new Date(value)``, as pi does:
            ``null`` is 0, a number is ms, most other values an invalid date; issue 15 item 3).
        unreachable_first_kept: Ids of compactions whose ``firstKeptEntryId`` names no entry on their
            own path (absent, or an id that is not an ancestor, e.g. after a copy that dropped it):
            such a compaction keeps no message verbatim. A compaction naming its own id (a hardened
            successor boundary) is not listed (issue 15 item 8).
        stale_leaf: ``(leaf id, newest id)`` when the file's last entry (the leaf on load) is a
            metadata entry (label, session name, model or thinking change, custom state) whose path
            does not hold the newest message-bearing entry of the file: another program appended it
            through a stale handle, and the context at the leaf silently leaves out the newer
            messages (issue 15 item 10). ``None`` otherwise.
    """

    path: Path | None = None
    line_count: int = 0
    header_line: int = 1
    version: int = 3
    legacy_version: bool = False
    torn_tail: TornTail | None = None
    missing_final_newline: bool = False
    invalid_lines: tuple[int, ...] = ()
    non_object_lines: tuple[int, ...] = ()
    bad_utf8_lines: tuple[int, ...] = ()
    lone_surrogate_lines: tuple[int, ...] = ()
    repeated_header_lines: tuple[int, ...] = ()
    entries_without_id: tuple[int, ...] = ()
    duplicate_ids: tuple[tuple[str, tuple[int, ...]], ...] = ()
    missing_parents: tuple[str, ...] = ()
    cycles: tuple[str, ...] = ()
    orphan_tool_results: tuple[str, ...] = ()
    non_string_timestamps: tuple[int, ...] = ()
    unreachable_first_kept: tuple[str, ...] = ()
    stale_leaf: tuple[str, str] | None = None

    @property
    def clean(self) -> bool:
        """``True`` when nothing was found (a legacy version alone is not a defect: it is migrated)."""
        return not (
            self.torn_tail
            or self.missing_final_newline
            or self.invalid_lines
            or self.non_object_lines
            or self.bad_utf8_lines
            or self.lone_surrogate_lines
            or self.repeated_header_lines
            or self.entries_without_id
            or self.duplicate_ids
            or self.missing_parents
            or self.cycles
            or self.orphan_tool_results
            or self.non_string_timestamps
            or self.unreachable_first_kept
            or self.stale_leaf
        )

    @property
    def needs_repair(self) -> bool:
        """
        ``True`` when a repair would change the file: a torn tail or missing final newline, skipped or
        unreadable lines, or a legacy version. The next append itself only cuts a torn tail (after a
        backup), adds a missing newline and rewrites a legacy file; the rest is left to an explicit
        repair (``doctor --fix``).
        """
        return bool(
            self.torn_tail
            or self.missing_final_newline
            or self.legacy_version
            or self.bad_utf8_lines
            or self.lone_surrogate_lines
            or self.invalid_lines
            or self.non_object_lines
        )

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict with camelCase keys (stable, used by ``doctor --json``)."""
        return {
            "path": str(self.path) if self.path is not None else None,
            "lineCount": self.line_count,
            "headerLine": self.header_line,
            "version": self.version,
            "legacyVersion": self.legacy_version,
            "tornTail": attrs.asdict(self.torn_tail) if self.torn_tail else None,
            "missingFinalNewline": self.missing_final_newline,
            "invalidLines": list(self.invalid_lines),
            "nonObjectLines": list(self.non_object_lines),
            "badUtf8Lines": list(self.bad_utf8_lines),
            "loneSurrogateLines": list(self.lone_surrogate_lines),
            "repeatedHeaderLines": list(self.repeated_header_lines),
            "entriesWithoutId": list(self.entries_without_id),
            "duplicateIds": {eid: list(lines) for eid, lines in self.duplicate_ids},
            "missingParents": list(self.missing_parents),
            "cycles": list(self.cycles),
            "orphanToolResults": list(self.orphan_tool_results),
            "nonStringTimestamps": list(self.non_string_timestamps),
            "unreachableFirstKept": list(self.unreachable_first_kept),
            "staleLeaf": (
                {"leafId": self.stale_leaf[0], "newestEntryId": self.stale_leaf[1]}
                if self.stale_leaf
                else None
            ),
            "clean": self.clean,
        }
