"""
The lazy index of one transcript: entries in file order, id index, leaf, labels, session name
(pi-format spec §4, §8). Built by :mod:`._load`; extended by :class:`TranscriptManager` as it appends.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec
from msgspec import UNSET, UnsetType

from sessionkeeper.exceptions import EntryNotFoundError
from sessionkeeper.records import (
    CURRENT_SESSION_VERSION,
    CompactionEntry,
    LabelEntry,
    SessionHeader,
    SessionInfoEntry,
    TranscriptEntry,
    UnknownEntry,
    decode_json_line,
    entry_from_line,
    entry_key,
    typed_entries_from_lines,
)
from sessionkeeper.transcript._context import (
    EMPTY_CONTEXT,
    SessionContext,
    build_context_lazily,
    entry_kind,
    entry_model,
    entry_thinking_level,
)
from sessionkeeper.transcript._diagnostics import TranscriptDiagnostics


if TYPE_CHECKING:
    from sessionkeeper.transcript._load import _Scan


__all__ = ("TranscriptIndex", "decode_line", "js_trim", "new_entry_id")

_JS_WHITESPACE: Final = (
    "\t\n\x0b\x0c\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def js_trim(text: str) -> str:
    """JavaScript's ``String.prototype.trim`` (strips JS whitespace and line terminators, incl. BOM)."""
    return text.strip(_JS_WHITESPACE)


def new_entry_id(taken: set[str] | dict[str, Any]) -> str:
    """
    Draw a new entry id: the first 8 hex chars of a random UUID v4, redrawn while it collides
    with ``taken``; after 100 collisions a full 36-char UUID (pi-format spec §4).
    """
    for _ in range(100):
        candidate = str(uuid.uuid4())[:8]
        if candidate not in taken:
            return candidate
    return str(uuid.uuid4())


_ANY_DECODER: Final = msgspec.json.Decoder()
_BATCH: Final = 256  # entries decoded per batch by TranscriptIndex.entries
_STAMPED_KINDS: Final = frozenset({"compaction", "branch_summary", "custom_message"})


def decode_line(line: bytes) -> Any:
    """Decode an indexed line; invalid UTF-8 (not checked by the fast scan) reads as U+FFFD."""
    try:
        return _ANY_DECODER.decode(line)
    except msgspec.DecodeError:
        return decode_json_line(line)[0]


class TranscriptIndex:
    """
    The loaded state of one transcript: header, entries in file order, id index, leaf, labels.

    Entries are decoded lazily from the file's bytes and cached. Built by :func:`load_transcript`,
    :func:`load_transcript_bytes` or :meth:`empty`; :class:`TranscriptManager` owns one and extends it
    with :meth:`add`. Positions (``pos``) are 0-based indexes into the entry list (file order, header
    excluded).
    """

    def __init__(
        self,
        *,
        path: Path | None,
        header: SessionHeader,
        header_raw: dict[str, Any],
    ) -> None:
        self.path = path
        self.header = header
        self.header_raw = header_raw
        self.migrated = False
        self.source_stat: tuple[int, int, int, int] | None = None
        """``(st_dev, st_ino, st_size, st_mtime_ns)`` of the file as loaded (taken before reading); a
        migration rewrite refuses to replace a file that changed since (it would drop its new lines)."""
        self._scan: _Scan | None = None
        self._diagnostics: TranscriptDiagnostics | None = None
        # Per entry, in file order: its JSON line (no newline), type, id, parent id, 1-based line number
        # (0 for appended entries).
        self.lines: list[bytes] = []
        self.kinds: list[str] = []
        self.ids: list[str | None] = []
        self.parents: list[str | None] = []
        self.line_numbers: list[int] | range = []
        self.by_id: dict[str, int] = {}
        self._cache: dict[int, TranscriptEntry] = {}
        self.leaf_id: str | None = None
        self._labels: dict[str, str] = {}
        self._label_timestamps: dict[str, str] = {}
        self._session_name: str | None = None
        self._replayed = True  # set to False by the loader: replayed on first use

    # -- construction ------------------------------------------------------------------------------

    @classmethod
    def empty(cls, header: SessionHeader, *, path: Path | None = None) -> TranscriptIndex:
        """An index holding only ``header`` (a new transcript)."""
        raw = msgspec.to_builtins(header)
        return cls(path=path, header=header, header_raw=raw)

    def _push(self, kind: str, entry_id: str | None, parent: str | None, line: int) -> int:
        pos = len(self.kinds)
        if isinstance(self.line_numbers, range):
            self.line_numbers = list(self.line_numbers)
        self.kinds.append(kind)
        self.ids.append(entry_id)
        self.parents.append(parent)
        self.line_numbers.append(line)
        if entry_id is not None:
            self.by_id[entry_id] = pos
            self.leaf_id = entry_id
        return pos

    def add(self, entry: TranscriptEntry, line: bytes) -> int:
        """
        Record an entry just written (or about to be written) as ``line`` and make it the leaf.

        Updates labels and the session name like pi's ``_appendEntry``. Returns its position.
        """
        kind = entry_kind(entry)
        if self._scan is not None and not self._scan.appended_from:
            self._scan.appended_from = len(self.kinds)
        self._replay()
        pos = self._push(kind, entry.id, entry.parent_id, 0)
        self.lines.append(line)
        self._cache[pos] = entry
        self._apply_label_or_name(entry)
        return pos

    # -- access ------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.kinds)

    def line_bytes(self, pos: int) -> bytes:
        """The JSON line (no newline) of the entry at ``pos``."""
        return self.lines[pos]

    def entry_at(self, pos: int) -> TranscriptEntry:
        """The decoded entry at ``pos`` (decoded once, straight into its record, then cached)."""
        cached = self._cache.get(pos)
        if cached is not None:
            return cached
        entry = entry_from_line(self.lines[pos])
        self._cache[pos] = entry
        return entry

    def entries(self) -> Iterator[TranscriptEntry]:
        """Every entry in file order (duplicates included), decoding as it goes (256 at a time)."""
        count = len(self.kinds)
        for start in range(0, count, _BATCH):
            yield from self._entries_in(start, min(start + _BATCH, count))

    def _entries_in(self, start: int, stop: int) -> list[TranscriptEntry]:
        """The entries at ``[start, stop)``; those not yet decoded decoded in one batch and cached."""
        cache = self._cache
        found = list(map(cache.get, range(start, stop)))
        if len(cache) == len(self.kinds) or all(entry is not None for entry in found):
            return found  # type: ignore[return-value]
        missing = [pos for pos, entry in zip(range(start, stop), found, strict=True) if entry is None]
        lines = self.lines
        typed, _ = typed_entries_from_lines([lines[pos] for pos in missing])
        for pos, entry in zip(missing, typed, strict=True):
            decoded = entry if entry is not None else entry_from_line(lines[pos])
            cache[pos] = decoded
            found[pos - start] = decoded
        return found  # type: ignore[return-value]

    def get(self, entry_id: str) -> TranscriptEntry | None:
        """The entry with ``entry_id`` (the later one for duplicated ids), or ``None``."""
        pos = self.by_id.get(entry_id)
        return None if pos is None else self.entry_at(pos)

    def path_positions(self, leaf_id: str | None) -> list[int]:
        """
        Positions from a root to ``leaf_id`` (root first); empty for ``None``, an unknown id, or a falsy
        one (``""``, the number ``0``, ``false``: pi's ``getBranch`` starts only from a truthy id).
        """
        if not leaf_id:
            return []
        pos = self.by_id.get(leaf_id)
        if pos is None:
            return []
        return self._walk(pos)

    def _walk(self, pos: int) -> list[int]:
        out = [pos]
        seen = {pos}
        while True:
            parent = self.parents[pos]
            if not parent:
                break
            nxt = self.by_id.get(parent)
            if nxt is None or nxt in seen:
                break
            seen.add(nxt)
            out.append(nxt)
            pos = nxt
        out.reverse()
        return out

    def branch(self, leaf_id: str | None) -> list[TranscriptEntry]:
        """The entries from a root to ``leaf_id``, root first (pi's ``getBranch``)."""
        return [self.entry_at(p) for p in self.path_positions(leaf_id)]

    def children(self, entry_id: str) -> list[TranscriptEntry]:
        """Indexed entries whose ``parentId`` is ``entry_id``, in file order (pi's ``getChildren``)."""
        return [self.entry_at(pos) for pos in sorted(self.by_id.values()) if self.parents[pos] == entry_id]

    def build_context(self, leaf_id: str | UnsetType | None = UNSET) -> SessionContext:
        """
        The context for ``leaf_id`` (default: the current leaf), as :func:`build_session_context`.

        ``None`` gives the empty context; an unknown id falls back to the last entry in file order.
        """
        if leaf_id is None:
            return EMPTY_CONTEXT
        target = self.leaf_id if leaf_id is UNSET else leaf_id
        pos = self.by_id.get(target) if isinstance(target, str) and target else None
        if pos is None:
            if not self.kinds:
                return EMPTY_CONTEXT
            pos = len(self.kinds) - 1
        path = self._context_path(pos)
        kinds, ids = self.kinds, self.ids
        return build_context_lazily(
            kinds=[kinds[p] for p in path],
            ids=[ids[p] for p in path],
            entry_at=lambda i: self.entry_at(path[i]),
        )

    def _context_path(self, pos: int) -> list[int]:
        """
        The part of the path from ``pos`` towards the root that the context depends on (root first).

        Walking leaf -> root, it stops once it has seen the last compaction on the path, that
        compaction's first kept entry, the last thinking level and the last model: earlier entries
        cannot change the result (spec §9), so a rebuild costs what the live context holds, not the
        file. Without a compaction it walks to the root.
        """
        kinds, ids, parents, by_id = self.kinds, self.ids, self.parents, self.by_id
        reverse = [pos]
        seen = {pos}
        compaction_seen = kept_seen = thinking_seen = model_seen = False
        first_kept: Any = None
        current = pos
        while True:
            kind = kinds[current]
            if not compaction_seen and kind == "compaction":
                compaction_seen = True
                entry = self.entry_at(current)
                if isinstance(entry, CompactionEntry):
                    first_kept = entry.first_kept_entry_id
                elif isinstance(entry, UnknownEntry):
                    first_kept = entry_key(entry.raw.get("firstKeptEntryId"))
                kept_seen = first_kept is None
            elif compaction_seen and not kept_seen and ids[current] == first_kept:
                kept_seen = True
            if not thinking_seen and kind == "thinking_level_change":
                thinking_seen = entry_thinking_level(self.entry_at(current)) is not None
            if not model_seen and kind in ("model_change", "message"):
                model_seen = entry_model(self.entry_at(current)) is not None
            if compaction_seen and kept_seen and thinking_seen and model_seen:
                break
            parent = parents[current]
            if not parent:
                break
            nxt = by_id.get(parent)
            if nxt is None or nxt in seen:
                break
            seen.add(nxt)
            reverse.append(nxt)
            current = nxt
        reverse.reverse()
        return reverse

    def require(self, entry_id: str) -> TranscriptEntry:
        """The entry with ``entry_id``; raises :class:`EntryNotFoundError` when absent."""
        entry = self.get(entry_id)
        if entry is None:
            raise EntryNotFoundError(entry_id)
        return entry

    # -- derived state -----------------------------------------------------------------------------

    @property
    def diagnostics(self) -> TranscriptDiagnostics:
        """
        What loading found (computed on first access, so opening stays cheap). Describes the file as it
        was loaded; entries added since are not re-checked.
        """
        if self._diagnostics is None:
            self._diagnostics = self._compute_diagnostics()
        return self._diagnostics

    def _compute_diagnostics(self) -> TranscriptDiagnostics:
        scan = self._scan
        if scan is None:  # a new transcript: nothing was loaded
            return TranscriptDiagnostics(path=self.path, line_count=1)
        loaded = len(self.line_numbers) if not scan.appended_from else scan.appended_from
        duplicates: dict[str, list[int]] = {}
        seen: dict[str, int] = {}
        for pos in range(loaded):
            entry_id = self.ids[pos]
            if entry_id is None:
                continue
            if entry_id in seen:
                duplicates.setdefault(entry_id, [self.line_numbers[seen[entry_id]]]).append(
                    self.line_numbers[pos]
                )
            seen[entry_id] = pos
        bad_utf8 = list(scan.bad_utf8)
        if scan.fast:  # the fast scan does not check UTF-8 inside skipped fields: check non-ASCII lines
            for pos in range(loaded):
                line = self.lines[pos]
                if not line.isascii():
                    try:
                        line.decode("utf-8")
                    except UnicodeDecodeError:
                        bad_utf8.append(self.line_numbers[pos])
        missing, cyclic = self._graph_findings()
        stamps, unreachable = self._entry_findings(loaded)
        return TranscriptDiagnostics(
            path=self.path,
            line_count=scan.line_count,
            header_line=scan.header_line,
            version=scan.version,
            legacy_version=scan.version < CURRENT_SESSION_VERSION,
            torn_tail=scan.torn,
            missing_final_newline=scan.missing_newline,
            invalid_lines=tuple(scan.invalid),
            non_object_lines=tuple(scan.non_object),
            bad_utf8_lines=tuple(sorted(bad_utf8)),
            lone_surrogate_lines=tuple(scan.lone),
            repeated_header_lines=tuple(scan.repeated),
            entries_without_id=tuple(scan.without_id),
            duplicate_ids=tuple((k, tuple(v)) for k, v in duplicates.items()),
            missing_parents=missing,
            cycles=cyclic,
            non_string_timestamps=stamps,
            unreachable_first_kept=unreachable,
            stale_leaf=self._stale_leaf(loaded),
        )

    def _is_ancestor(self, ancestor: str, pos: int) -> bool:
        """Whether ``ancestor`` is on the path above the entry at ``pos`` (the walk's rules, cycle-safe)."""
        seen = {pos}
        parent = self.parents[pos]
        while parent:
            if parent == ancestor:
                return True
            at = self.by_id.get(parent)
            if at is None or at in seen:
                return False
            seen.add(at)
            parent = self.parents[at]
        return False

    def _entry_findings(self, loaded: int) -> tuple[tuple[int, ...], tuple[str, ...]]:
        """Non-string timestamps of message-building entries, and compactions keeping nothing by
        accident (see :class:`TranscriptDiagnostics`); decodes only those entries."""
        stamps: list[int] = []
        unreachable: list[str] = []
        for pos in range(loaded):
            kind = self.kinds[pos]
            if kind not in _STAMPED_KINDS:
                continue
            entry = self.entry_at(pos)
            if isinstance(entry, UnknownEntry) and not isinstance(entry.raw.get("timestamp"), str):
                stamps.append(self.line_numbers[pos])
            if kind != "compaction" or self.ids[pos] is None:
                continue
            if isinstance(entry, CompactionEntry):
                first_kept: str | None = entry.first_kept_entry_id
            else:
                first_kept = (
                    entry_key(entry.raw.get("firstKeptEntryId")) if isinstance(entry, UnknownEntry) else None
                )
            if first_kept == self.ids[pos]:
                continue  # a hardened boundary: keeps nothing on purpose
            if first_kept is None or not self._is_ancestor(first_kept, pos):
                unreachable.append(self.ids[pos] or "")
        return tuple(stamps), tuple(unreachable)

    def _stale_leaf(self, loaded: int) -> tuple[str, str] | None:
        """``(leaf, newest)`` when the last entry is metadata off the branch of the newest message-building
        entry (see :class:`TranscriptDiagnostics`)."""
        leaf_pos = next((p for p in range(loaded - 1, -1, -1) if self.ids[p] is not None), -1)
        if leaf_pos < 0 or self.kinds[leaf_pos] in _STAMPED_KINDS or self.kinds[leaf_pos] == "message":
            return None
        newest = next(
            (
                p
                for p in range(leaf_pos - 1, -1, -1)
                if self.ids[p] is not None and (self.kinds[p] in _STAMPED_KINDS or self.kinds[p] == "message")
            ),
            -1,
        )
        if newest < 0:
            return None
        newest_id = self.ids[newest]
        assert newest_id is not None
        if self.by_id.get(newest_id) != newest or self._is_ancestor(newest_id, leaf_pos):
            return None
        leaf_id = self.ids[leaf_pos]
        assert leaf_id is not None
        return leaf_id, newest_id

    @property
    def labels(self) -> dict[str, str]:
        """Resolved labels, target entry id -> label (replayed in file order on first use, spec §8)."""
        self._replay()
        return self._labels

    @property
    def label_timestamps(self) -> dict[str, str]:
        """Target entry id -> ISO timestamp of the label entry that set its label."""
        self._replay()
        return self._label_timestamps

    @property
    def session_name(self) -> str | None:
        """The latest ``session_info`` name (trimmed); ``None`` when unset or cleared (spec §5.9)."""
        self._replay()
        return self._session_name

    def _apply_label_or_name(self, entry: TranscriptEntry) -> None:
        if isinstance(entry, LabelEntry) or (isinstance(entry, UnknownEntry) and entry.type == "label"):
            if isinstance(entry, LabelEntry):
                target: Any = entry.target_id
                label: Any = entry.label
            else:
                target, label = entry.raw.get("targetId"), entry.raw.get("label")
            target = entry_key(target)  # pi keys labels by the raw targetId (1 and "1" differ)
            if target is None:
                return
            if isinstance(label, str) and label:
                self._labels[target] = label
                self._label_timestamps[target] = entry.timestamp
            else:
                self._labels.pop(target, None)
                self._label_timestamps.pop(target, None)
        elif isinstance(entry, SessionInfoEntry) or (
            isinstance(entry, UnknownEntry) and entry.type == "session_info"
        ):
            name: Any = entry.name if isinstance(entry, SessionInfoEntry) else entry.raw.get("name")
            self._session_name = (js_trim(name) if isinstance(name, str) else "") or None

    def _replay(self) -> None:
        if self._replayed:
            return
        self._replayed = True
        for pos, kind in enumerate(self.kinds):
            if kind in ("label", "session_info"):
                self._apply_label_or_name(self.entry_at(pos))

    def _graph_findings(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        by_id, parents = self.by_id, self.parents
        missing: list[str] = []
        forward = False  # a cycle needs at least one parent link that does not point backwards
        for entry_id, pos in by_id.items():
            parent = parents[pos]
            if parent:
                parent_pos = by_id.get(parent)
                if parent_pos is None:
                    missing.append(entry_id)
                elif parent_pos >= pos:
                    forward = True
        if not forward:
            return tuple(missing), ()
        # Cycle detection over id -> parent id (later duplicates win, as in the walk).
        state: dict[str, int] = {}
        cyclic: list[str] = []
        for start in self.by_id:
            if start in state:
                continue
            stack: list[str] = []
            current: str | None = start
            while current is not None and current in self.by_id and current not in state:
                state[current] = 1
                stack.append(current)
                parent = self.parents[self.by_id[current]]
                current = parent or None
            if current is not None and state.get(current) == 1:
                cyclic.extend(stack[stack.index(current) :])
            for node in stack:
                state[node] = 2
        return tuple(missing), tuple(cyclic)
