"""
Bounded tail reads of a transcript: the leaf's context and the last messages without loading the file
(DESIGN "Targets": context rebuild follows the live context, not the file; last 50 messages < 1 ms).

The file is read backwards in chunks from its end. Lines are interpreted with the loader's rules
(pi-format spec §2, :mod:`._load`): blank and unparseable lines are skipped, later ``session`` lines are
ignored, invalid UTF-8 and lone surrogates read as U+FFFD, entries without a string id are not part of
the tree, the leaf is the last entry with an id, and an id seen first from the end is its latest (winning)
occurrence. The ``parentId`` chain is followed from the leaf, reading further back only while the answer
still depends on earlier lines.

Whenever the tail cannot prove the answer, the full loader decides instead (so the result is always that
of :func:`load_transcript`): a legacy v1/v2 file (migrated in memory), a header that is not found in the
first 1 MiB, a file whose entries carry no id, or a walk that would read more than ``max_tail_bytes``
(except for the context when only the thinking level is still unknown: that walk goes on keeping ids
only, see :func:`_walk_lean`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import IO, Any

import anyio
import attrs
import msgspec

from sessionkeeper.records import (
    CURRENT_SESSION_VERSION,
    CompactionEntry,
    TranscriptEntry,
    UnknownEntry,
    entry_key,
)
from sessionkeeper.transcript._context import (
    EMPTY_CONTEXT,
    SessionContext,
    build_context_lazily,
    entry_model,
    entry_thinking_level,
)
from sessionkeeper.transcript._lines import TailRecord, chunk_heads, parse_entry_line, parse_entry_line_typed
from sessionkeeper.transcript._load import _header_version, load_transcript
from sessionkeeper.transcript.file._sidecar import (
    AncestryIndex,
    CorruptIndexError,
    index_path,
    load_index,
    save_index,
)
from sessionkeeper.transcript.file._sidecar_build import build_index
from sessionkeeper.transcript.file._tail_reader import (
    DEFAULT_MAX_TAIL_BYTES,
    TailHeader,
    TailReader,
    _Visit,
    open_transcript_file,
    read_header,
)


__all__ = (
    "DEFAULT_MAX_TAIL_BYTES",
    "TailContext",
    "TailRecord",
    "aread_tail_context",
    "parse_entry_line",
    "read_tail_context",
    "try_read_tail_context",
)

_log = logging.getLogger("sessionkeeper.transcript")


def _walk_tail(
    handle: IO[bytes],
    *,
    max_bytes: int,
    first_chunk: int,
    visit: _Visit,
    index_at: tuple[Path, str] | None = None,
    header_out: list[TailHeader] | None = None,
    reader_out: list[TailReader] | None = None,
    typed: bool = False,
) -> str:
    """
    Follow the leaf's ``parentId`` chain backwards, calling ``visit`` on each path entry from the
    leaf towards the root until it returns ``True``.

    With ``index_at`` (the ancestry index file and the transcript's real path, see :mod:`._sidecar`)
    and a visitor that only still needs the thinking level, the index answers instead of the walk:
    a valid index as soon as the lines after its covered prefix were read, else one built (or
    extended) once the walk passes ``max_bytes``.

    Returns ``"stopped"`` (visit said so), ``"root"`` (the path ended: root, missing parent or a
    cycle), ``"empty"`` (no entries), or ``"full"`` (the full loader must decide). The header found
    is appended to ``header_out`` (when given and the walk gets that far), the reader to ``reader_out``.
    A visitor with a ``next_chunk(bytes_read)`` method sizes each further read (``None``: doubling).
    ``typed``: the visitor needs the entry of nearly every line met, so each line is decoded once into
    its record (:func:`parse_entry_line_typed`) instead of its head first.
    """
    st = os.fstat(handle.fileno())
    size = st.st_size
    found = read_header(handle, size)
    if found is None or _header_version(found.raw) < CURRENT_SESSION_VERSION:
        return "full"
    if header_out is not None:
        header_out.append(found)
    reader = TailReader(handle, start=found.entries_offset, end=size, first_chunk=first_chunk)
    if reader_out is not None:
        reader_out.append(reader)
    next_chunk = getattr(visit, "next_chunk", None)
    parse = parse_entry_line_typed if typed else parse_entry_line
    latest: dict[str, TailRecord] = {}  # id -> its last occurrence in file order
    starts: dict[str, int] = {}  # id -> offset of that line
    on_path: set[int] = set()
    current: TailRecord | None = None
    any_entry = False
    only_thinking = getattr(visit, "only_thinking", None)
    index: AncestryIndex | None = None
    index_tried = index_at is None or only_thinking is None
    try:
        while True:
            end = reader.unread_end
            for line in reader.previous_lines_reversed():
                start = end - len(line)
                end = start - 1
                record = parse(line)
                if record is None:
                    continue
                any_entry = True
                entry_id = record.entry_id
                if entry_id is None or entry_id in latest:
                    continue
                latest[entry_id] = record
                starts[entry_id] = start
                if current is None:
                    if not entry_id:  # a falsy leaf (0, false, ""): pi starts from the last entry,
                        return "full"  # with or without an id; the loader decides
                    current = record  # the leaf: the last entry with an id
                    on_path.add(id(record))
                    if visit(record):
                        return "stopped"
                want = current.parent_id
                while want and want in latest:
                    nxt = latest[want]
                    if id(nxt) in on_path:
                        return "root"  # a cycle: the walk stops before repeating an entry
                    on_path.add(id(nxt))
                    current = nxt
                    if visit(current):
                        return "stopped"
                    want = current.parent_id
                if not want:
                    return "root"
            if reader.exhausted:
                if current is None:
                    return "full" if any_entry else "empty"
                return "root"  # the parent is not in the file
            if next_chunk is not None:
                wanted = next_chunk(reader.bytes_read)
                if wanted is not None:
                    reader.size_next(wanted)
            if current is not None and not index_tried and only_thinking is not None and only_thinking():
                assert index_at is not None
                index_tried = True
                index = load_index(
                    index_at[0], real_path=index_at[1], session_id=found.header.id, fd=handle.fileno(), st=st
                )
                if index is not None and index.unsupported:  # known not simple: no build either
                    index.close()
                    index, index_at = None, None
            if index is not None and current is not None and index.covered > reader.unread_end:
                outcome = _from_index(
                    index, fd=handle.fileno(), want=current.parent_id, starts=starts, visit=visit
                )
                if outcome is not None:
                    return outcome
                index.close()
                index = None
            if reader.bytes_read > max_bytes:
                go_lean = getattr(visit, "go_lean", None)
                if current is None or go_lean is None or not go_lean():
                    return "full"
                if index_at is not None:
                    outcome = _build_and_answer(
                        handle.fileno(),
                        base=index,
                        index_at=index_at,
                        found=found,
                        st=st,
                        want=current.parent_id,
                        starts=starts,
                        visit=visit,
                    )
                    if outcome is not None:
                        return outcome
                return _walk_lean(reader, set(latest), current.parent_id, visit)
    finally:
        if index is not None:
            index.close()


def _from_index(
    index: AncestryIndex, *, fd: int, want: str | None, starts: dict[str, int], visit: _Visit
) -> str | None:
    """
    Finish a walk that only needs the thinking level with the ancestry index (the walk has read every
    line after the index's covered prefix and ``want`` is not among them): ``None`` when the index
    does not describe the file (then the walk goes on without it).
    """
    try:
        if index.unsupported or not index.accepts(
            fd, [entry_id for entry_id, at in starts.items() if at >= index.covered]
        ):
            return None
        if not want:
            return "root"
        pos = index.find(fd, want)
        if pos is None:
            return "root"  # the parent is not in the file
        record = index.thinking_record(fd, pos)
    except (CorruptIndexError, OSError, ValueError, IndexError, msgspec.MsgspecError) as err:
        _log.debug("ancestry index %s ignored: %s", index.real_path, str(err) or "corrupt")
        return None
    if record is None:
        return "root"  # no usable thinking level on the rest of the path
    visit(record)
    return "stopped"


def _build_and_answer(
    fd: int,
    *,
    base: AncestryIndex | None,
    index_at: tuple[Path, str],
    found: TailHeader,
    st: os.stat_result,
    want: str | None,
    starts: dict[str, int],
    visit: _Visit,
) -> str | None:
    """Build the ancestry index (or extend ``base``), save it and answer from it (:func:`_from_index`)."""
    try:
        built = build_index(
            fd,
            start=found.entries_offset,
            size=st.st_size,
            real_path=index_at[1],
            session_id=found.header.id,
            st=st,
            base=base,
        )
    except (CorruptIndexError, OSError) as err:  # the file changed while it was read
        _log.debug("ancestry index of %s not built: %s", index_at[1], str(err) or "changed")
        return None
    if built is None:
        return None
    save_index(built, index_at[0])
    return _from_index(built, fd=fd, want=want, starts=starts, visit=visit)


def _walk_lean(reader: TailReader, later_ids: set[str | None], want: str | None, visit: _Visit) -> str:
    """
    Continue a walk whose visitor only still needs ``thinking_level_change`` entries (only those are
    passed to it): batches are decoded at C speed and only the ids seen are kept (no line bytes), so
    memory follows the number of entries rather than the bytes. A parent that occurs again later in
    the file (a forward reference or a duplicated id) sends the file to the full loader.
    """
    while want:
        if want in later_ids:
            return "full"
        if reader.exhausted:
            return "root"  # the parent is not in the file
        kinds, ids, parents, data = chunk_heads(reader.previous_lines())
        where = dict(zip(ids, range(len(ids)), strict=True))  # the last occurrence in the batch wins
        visited: set[int] = set()
        while want in where:
            if want in later_ids:
                return "full"
            at = where[want]
            if at in visited:
                return "root"  # a cycle: the walk stops before repeating an entry
            visited.add(at)
            if kinds[at] == "thinking_level_change" and visit(
                TailRecord("thinking_level_change", want, parents[at], data[at])
            ):
                return "stopped"
            want = parents[at]
            if not want:
                return "root"
        later_ids.update(ids)
    return "root"


def _first_kept_of(entry: TranscriptEntry) -> Any:
    if isinstance(entry, CompactionEntry):
        return entry.first_kept_entry_id
    if isinstance(entry, UnknownEntry):
        return entry.raw.get("firstKeptEntryId")
    return None


class _ContextWalk:
    """The stop rule of ``TranscriptIndex._context_path``: the last compaction on the path, its first
    kept entry, the last usable thinking level and the last usable model are known."""

    def __init__(self) -> None:
        self.path: list[TailRecord] = []
        self.compaction_seen = False
        self.kept_seen = False
        self.thinking_seen = False
        self.model_seen = False
        self.first_kept: Any = None
        self.lean = False

    def only_thinking(self) -> bool:
        """Only the thinking level is still unknown (the ancestry index can answer, see :mod:`._sidecar`)."""
        return self.compaction_seen and self.kept_seen and self.model_seen and not self.thinking_seen

    def go_lean(self) -> bool:
        """Past the byte budget: continue without keeping lines when only the thinking level is
        still unknown (the entries still to be met cannot add messages, a compaction or a model)."""
        self.lean = self.compaction_seen and self.kept_seen and self.model_seen
        return self.lean

    def __call__(self, record: TailRecord) -> bool:
        kind = record.kind
        if self.lean and kind != "thinking_level_change":
            return False
        self.path.append(record)
        if not self.compaction_seen and kind == "compaction":
            self.compaction_seen = True
            self.first_kept = entry_key(_first_kept_of(record.entry))
            # a retain-none compaction (pi 1.6: firstKeptEntryId = its own id) keeps nothing before it
            self.kept_seen = self.first_kept is None or self.first_kept == record.entry_id
        elif self.compaction_seen and not self.kept_seen and record.entry_id == self.first_kept:
            self.kept_seen = True
        if not self.thinking_seen and kind == "thinking_level_change":
            self.thinking_seen = entry_thinking_level(record.entry) is not None
        if not self.model_seen and kind in ("model_change", "message"):
            self.model_seen = entry_model(record.entry) is not None
        return self.compaction_seen and self.kept_seen and self.thinking_seen and self.model_seen


def read_tail_context(
    path: Path | str,
    *,
    max_tail_bytes: int = DEFAULT_MAX_TAIL_BYTES,
    chunk_bytes: int = 1 << 20,
    ancestry_index: bool = True,
) -> SessionContext:
    """
    The context of the transcript's leaf (its last entry with an id), reading the file backwards only
    as far as the context depends on it.

    Equal to ``load_transcript(path).build_context()`` (= :func:`build_session_context` on the loaded
    entries, pi-format spec §9) for every file. The walk stops once it has met the last compaction on
    the leaf's path, that compaction's ``firstKeptEntryId``, the last ``thinking_level_change`` and the
    last model (``model_change`` or assistant message); so with a recent compaction and the settings
    recorded after it, the cost follows the live context, not the file size.

    When only the thinking level is still unknown (pi records it only when it changes, so in a long
    session its one change is often at the start), the persisted ancestry index (:mod:`._sidecar`,
    in ``$SESSIONKEEPER_CACHE_DIR`` or ``~/.cache/sessionkeeper/tail-index/``) answers with one
    lookup and one line read, once the lines appended after it was written have been read. Without a
    valid index, the walk builds one (a forward scan of the file) when it passes ``max_tail_bytes``
    (default 8 MiB), saves it for the next reads and answers from it; when an index cannot be built
    (a duplicated id or a forward reference) the walk goes on at C speed keeping ids, not lines. In
    any other case past ``max_tail_bytes``, and for a legacy v1/v2 file, the full loader decides. An
    index that cannot be read or written, is corrupt, or describes another file is ignored.

    Args:
        path: The transcript file.
        max_tail_bytes: Bytes read backwards before handing over to the full loader.
        chunk_bytes: Size of the first backward read, in bytes (``None``: sized for ``n`` messages).
        ancestry_index: ``False``: neither read nor write the ancestry index (walk instead).

    Raises:
        TranscriptNotFoundError: The file does not exist.
        TranscriptFormatError: It is not a transcript (raised by the full loader, naming the line).
        OSError: It could not be read.
    """
    file = Path(path)
    found = try_read_tail_context(
        file, max_tail_bytes=max_tail_bytes, chunk_bytes=chunk_bytes, ancestry_index=ancestry_index
    )
    return found.context if found is not None else load_transcript(file).build_context()


def _index_target(file: Path) -> tuple[Path, str] | None:
    """Where the ancestry index of ``file`` lives; ``None`` when no cache directory can be named."""
    try:
        return index_path(file)
    except (RuntimeError, OSError, KeyError) as err:  # Path.home() without HOME or a passwd entry
        _log.debug("no ancestry index for %s: %s", file, err)
        return None


@attrs.frozen(kw_only=True)
class TailContext:
    """
    A leaf's context found by a tail read, with what identifies it.

    Attributes:
        context: The context (equal to the full loader's, see :func:`read_tail_context`).
        session_id: The header's session id.
        leaf_id: The leaf (the last entry with an id), ``None`` when the file has no entries.
    """

    context: SessionContext
    session_id: str
    leaf_id: str | None


def try_read_tail_context(
    path: Path | str,
    *,
    max_tail_bytes: int = DEFAULT_MAX_TAIL_BYTES,
    chunk_bytes: int = 1 << 20,
    ancestry_index: bool = True,
) -> TailContext | None:
    """
    :func:`read_tail_context` without its fallback: ``None`` when the full loader must decide (a
    legacy v1/v2 file, no header in the first 1 MiB, id-less entries, a walk past ``max_tail_bytes``
    that needs more than the thinking level); otherwise the context with the session id and leaf id
    (for callers that show them, e.g. the ``context`` command).

    Raises:
        TranscriptNotFoundError: The file does not exist.
        TranscriptFormatError: It is a directory, FIFO, device or socket.
        OSError: It could not be read.
    """
    file = Path(path)
    walk = _ContextWalk()
    headers: list[TailHeader] = []
    with open_transcript_file(file) as handle:
        outcome = _walk_tail(
            handle,
            max_bytes=max_tail_bytes,
            first_chunk=chunk_bytes,
            visit=walk,
            index_at=_index_target(file) if ancestry_index else None,
            header_out=headers,
        )
    if outcome == "full":
        return None
    session_id = headers[0].header.id
    if outcome == "empty":
        return TailContext(context=EMPTY_CONTEXT, session_id=session_id, leaf_id=None)
    records = walk.path[::-1]
    context = build_context_lazily(
        kinds=[r.kind for r in records],
        ids=[r.entry_id for r in records],
        entry_at=lambda i: records[i].entry,
    )
    return TailContext(context=context, session_id=session_id, leaf_id=walk.path[0].entry_id)


async def aread_tail_context(
    path: Path | str, *, max_tail_bytes: int = DEFAULT_MAX_TAIL_BYTES, ancestry_index: bool = True
) -> SessionContext:
    """:func:`read_tail_context` in a worker thread (asyncio and trio); same result and errors."""
    return await anyio.to_thread.run_sync(
        lambda: read_tail_context(path, max_tail_bytes=max_tail_bytes, ancestry_index=ancestry_index)
    )
