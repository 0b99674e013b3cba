"""
What a transcript *is*, apart from where its lines live (issue 12): the index of its entries (header,
entry tree, labels, session name), the leaf, navigation, and the model context rebuilt from them (pi-format
spec §4-9). Pure: nothing here reads or writes storage; :class:`~sessionkeeper.transcript.TranscriptManager`
adds appends and the file.
"""

from __future__ import annotations

from pathlib import Path

from msgspec import UNSET, UnsetType

from sessionkeeper._clock import Clock
from sessionkeeper.exceptions import EntryNotFoundError
from sessionkeeper.records import SessionHeader, TranscriptEntry
from sessionkeeper.transcript._context import SessionContext
from sessionkeeper.transcript._diagnostics import TranscriptDiagnostics
from sessionkeeper.transcript._load import TranscriptIndex
from sessionkeeper.transcript._tree import TreeNode, build_tree


__all__ = ("TranscriptView",)


class TranscriptView:
    """
    One transcript as a tree: its index and leaf, read and navigated (the read half of
    :class:`~sessionkeeper.transcript.TranscriptManager`, which is one).

    The leaf is not persisted (spec §4): on load it is the last entry in file order, so navigation that
    appends nothing (:meth:`branch`, :meth:`reset_leaf`) is lost when the transcript is reopened.
    """

    def __init__(self, index: TranscriptIndex, *, path: Path | None, clock: Clock) -> None:
        """Internal: the manager builds it."""
        self._index = index
        self._path = path  # where the lines live, for messages (None: memory)
        self._clock = clock
        self._leaf_id = index.leaf_id
        self._navigated = False  # branch()/reset_leaf() since the last append: do not follow the tip

    @property
    def header(self) -> SessionHeader:
        """The session header (version 3 after an in-memory migration)."""
        return self._index.header

    @property
    def session_id(self) -> str:
        """The header's session id."""
        return self._index.header.id

    @property
    def cwd(self) -> str:
        """The header's working directory (``""`` when absent)."""
        cwd = self._index.header.cwd
        return cwd if isinstance(cwd, str) else ""

    @property
    def leaf_id(self) -> str | None:
        """The current leaf: new entries become its children; ``None`` = before the first entry."""
        return self._leaf_id

    @property
    def session_name(self) -> str | None:
        """The latest ``session_info`` name in file order (trimmed), ``None`` when unset or cleared."""
        return self._index.session_name

    @property
    def labels(self) -> dict[str, str]:
        """Resolved labels: target entry id -> label (a copy)."""
        return dict(self._index.labels)

    @property
    def diagnostics(self) -> TranscriptDiagnostics:
        """What loading found (torn tail, invalid lines, duplicates, legacy version, ...)."""
        return self._index.diagnostics

    @property
    def index(self) -> TranscriptIndex:
        """The underlying lazy index (advanced use: positions, kinds, raw lines)."""
        return self._index

    def entries(self) -> list[TranscriptEntry]:
        """All entries in file order, header excluded, duplicates included (pi's ``getEntries``)."""
        return list(self._index.entries())

    def get_entry(self, entry_id: str) -> TranscriptEntry | None:
        """The entry with ``entry_id`` (the later one when the id is duplicated), or ``None``."""
        return self._index.get(entry_id)

    def get_label(self, entry_id: str) -> str | None:
        """The label of ``entry_id``, or ``None``."""
        return self._index.labels.get(entry_id)

    def get_children(self, entry_id: str) -> list[TranscriptEntry]:
        """Entries whose parent is ``entry_id``, in file order."""
        return self._index.children(entry_id)

    def get_branch(self, leaf_id: str | None = None) -> list[TranscriptEntry]:
        """
        The path from a root to ``leaf_id`` (default: the current leaf), root first (``getBranch``).

        Empty when the leaf is ``None`` or unknown. A ``parentId`` cycle ends the walk (see
        :func:`walk_path`).
        """
        return self._index.branch(leaf_id if leaf_id is not None else self._leaf_id)

    def build_session_context(self, leaf_id: str | UnsetType | None = UNSET) -> SessionContext:
        """
        The model context for ``leaf_id`` (default: the current leaf), exactly as pi (spec §9).

        ``None`` gives the empty context; an id that is not present falls back to the last entry.
        Only the entries the context needs are decoded.
        """
        if leaf_id is UNSET:
            if self._leaf_id is None and not self._navigated:
                return self._index.build_context()  # no entry has an id: pi starts from the last entry
            leaf_id = self._leaf_id
        return self._index.build_context(leaf_id)

    def tree(self) -> tuple[TreeNode, ...]:
        """The session tree (roots, children sorted by timestamp, labels resolved); see :func:`build_tree`."""
        index = self._index
        indexed = (index.entry_at(pos) for pos in sorted(index.by_id.values()))
        return build_tree(indexed, labels=index.labels, label_timestamps=index.label_timestamps)

    # -- navigation ----------------------------------------------------------------------------------

    def branch(self, entry_id: str) -> None:
        """
        Move the leaf to an existing entry; the next append starts a new branch there (not persisted),
        whatever other writers appended meanwhile (it does not follow the tip, see the class docstring).

        Raises:
            EntryNotFoundError: ``entry_id`` is not in the transcript.
        """
        if entry_id not in self._index.by_id:
            raise EntryNotFoundError(entry_id)
        self._leaf_id = entry_id
        self._navigated = True

    def reset_leaf(self) -> None:
        """Set the leaf to ``None``: the next append creates a new root (not persisted; no tip following)."""
        self._leaf_id = None
        self._navigated = True
