"""
Reads of part of a transcript in PostgreSQL (issue 13: context rebuild and "last N" in O(live context)):
the lines from a line number on, the last ``n`` lines, and the *live* lines: the header and every line
from the kept entry of the latest compaction on the leaf's path; the lines backwards and the listing.
A mixin of :class:`~sessionkeeper.store.PostgresTranscriptStorage`; each read is one statement (one
snapshot) on the primary key or the entry-id index, never the whole transcript.

The live read walks the leaf's ``parentId`` chain up in SQL (a recursive query on the entry-id index,
reading ids and types, no line) until a compaction entry, so it reads O(entries since that compaction),
then the lines from its ``firstKeptEntryId`` (pi-format spec §9: what the context is built from). The
rules follow the loader's: the leaf is the last line with a string id (not the header), an id's latest
line wins, a parent that is missing ends the path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs
import msgspec

from sessionkeeper.exceptions import TranscriptChangedError, TranscriptNotFoundError
from sessionkeeper.store._postgres_transcript_parts import (
    FORWARD_PAGE_LINES,
    StorageHost,
    forward_batches,
    indexed_id,
)
from sessionkeeper.store._remote import storable_key
from sessionkeeper.transcript import StorageMark


if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from psycopg import AsyncConnection


__all__ = ("LiveTranscriptLines", "PostgresTranscriptReads")

R = TypeVar("R")

_READS: Final[dict[str, str]] = {
    # the head and the lines seq in [start, line_count), and line `also` when before start (the header);
    # a NULL line when there are none (two range scans on the primary key)
    "from": (
        "SELECT h.generation, h.line_count, h.byte_size, l.line FROM {h} h LEFT JOIN LATERAL ("
        " SELECT x.seq, x.line FROM {l} x WHERE x.store_id = h.store_id AND x.session_id = h.session_id"
        "  AND x.seq = %(also)s AND x.seq < %(start)s AND x.seq < h.line_count"
        " UNION ALL"
        " SELECT x.seq, x.line FROM {l} x WHERE x.store_id = h.store_id AND x.session_id = h.session_id"
        "  AND x.seq >= %(start)s AND x.seq < h.line_count) l ON true"
        " WHERE h.store_id = %(store)s AND h.session_id = %(session)s ORDER BY l.seq"
    ),
    # the first line of the last n: one index probe from the end
    "tail_start": (
        "SELECT greatest(line_count - %(n)s, 0) FROM {h}"
        " WHERE store_id = %(store)s AND session_id = %(session)s"
    ),
    # where the live context starts: the latest compaction on the leaf's path (or the path's root); each
    # step is one probe of the entry-id index (OFFSET 0 keeps the planner from scanning seq backwards)
    "live_start": (
        "WITH RECURSIVE head AS (SELECT line_count FROM {h}"
        "  WHERE store_id = %(store)s AND session_id = %(session)s),"
        " leaf AS (SELECT l.seq, l.entry_id, l.parent_id, l.entry_type FROM {l} l, head"
        "  WHERE l.store_id = %(store)s AND l.session_id = %(session)s"
        "  AND l.seq > 0 AND l.seq < head.line_count"
        "  AND l.entry_id IS NOT NULL AND l.entry_type IS DISTINCT FROM 'session'"
        "  ORDER BY l.seq DESC LIMIT 1),"
        " path(seq, entry_id, parent_id, entry_type, depth) AS ("
        "  SELECT seq, entry_id, parent_id, entry_type, 0 FROM leaf"
        "  UNION ALL"
        "  SELECT up.seq, up.entry_id, up.parent_id, up.entry_type, path.depth + 1 FROM path"
        "  CROSS JOIN LATERAL (SELECT x.seq, x.entry_id, x.parent_id, x.entry_type FROM head, ("
        "    SELECT l.seq, l.entry_id, l.parent_id, l.entry_type FROM {l} l"
        "    WHERE l.store_id = %(store)s AND l.session_id = %(session)s AND l.entry_id = path.parent_id"
        "    OFFSET 0) x"
        "   WHERE x.seq > 0 AND x.seq < head.line_count AND x.entry_type IS DISTINCT FROM 'session'"
        "   ORDER BY x.seq DESC LIMIT 1) up"
        "  WHERE path.entry_type IS DISTINCT FROM 'compaction' AND path.depth < %(max_depth)s)"
        "  CYCLE entry_id SET cyc USING visited,"
        " top AS (SELECT seq, entry_type FROM path WHERE NOT cyc ORDER BY depth DESC LIMIT 1)"
        " SELECT top.seq, top.entry_type, CASE WHEN top.entry_type = 'compaction' THEN ("
        "  SELECT line FROM {l} WHERE store_id = %(store)s AND session_id = %(session)s"
        "  AND seq = top.seq) END FROM top"
    ),
    "entry_seq": (
        "SELECT max(seq) FROM {l} WHERE store_id = %(store)s AND session_id = %(session)s"
        " AND entry_id = %(entry)s AND seq > 0 AND seq <= %(before)s"
    ),
}

_FIRST_BATCH: Final = 16
_MAX_BATCH: Final = 1024

_MAX_DEPTH: Final = 1_000_000
"""A bound on the path walk (a cycle of parent ids ends it at once: ``CYCLE``)."""


class _Compaction(msgspec.Struct, gc=False):
    firstKeptEntryId: Any = None  # noqa: N815 - the on-disk key


_COMPACTION: Final = msgspec.json.Decoder(_Compaction)


@attrs.frozen(kw_only=True)
class LiveTranscriptLines:
    """
    The part of a transcript a context rebuild needs (:meth:`PostgresTranscriptStorage.read_live`).

    Attributes:
        header: Line 0, the session header.
        start: The line number (0-based, the header is 0) of the first of :attr:`lines`.
        lines: Every line from :attr:`start` to the end, byte for byte.
        mark: The transcript's mark when read (as :meth:`~TranscriptStorage.read` returns it).
    """

    header: bytes
    start: int
    lines: list[bytes]
    mark: StorageMark

    def jsonl(self) -> bytes:
        """The header and :attr:`lines`, each with its newline: a pi JSONL file the loader reads."""
        return b"".join(line + b"\n" for line in (self.header, *self.lines))


class PostgresTranscriptReads(StorageHost):
    """The partial reads of :class:`~sessionkeeper.store.PostgresTranscriptStorage` (module docstring)."""

    async def _reads(self, session_id: str, name: str, params: dict[str, Any]) -> list[Any]:
        from psycopg import sql as psycopg_sql  # noqa: PLC0415 - the optional extra, imported on first use

        sql: Any = psycopg_sql  # the statements are this module's constants (not LiteralString-typed)
        statement = sql.SQL(_READS[name]).format(
            h=sql.Identifier(self.schema, "sk_transcripts"),
            l=sql.Identifier(self.schema, "sk_transcript_lines"),
        )
        args = {"store": self.store_id, "session": session_id, **params}

        async def body(conn: AsyncConnection[Any]) -> list[Any]:
            return await (await conn.execute(statement, args)).fetchall()

        return await self._run(session_id, body, write=False)

    def iter_line_batches(self, session_id: str, *, batch_bytes: int) -> AsyncIterator[list[bytes]]:
        """
        Every line, first to last, in pages of up to ``batch_bytes`` bytes (a longer line alone) and
        4096 lines, a pool connection only while a page is read: ``copy_sessions`` streams transcripts of
        any size (:class:`~sessionkeeper.transcript.LineBatchReader`). Lines appended meanwhile are left out.

        Raises:
            TranscriptNotFoundError: No such transcript (on the first iteration).
            TranscriptChangedError: It was deleted or re-created while it was read.
        """
        self._check_id(session_id)

        async def page(start: int) -> list[Any]:
            async def body(conn: AsyncConnection[Any]) -> list[Any]:
                args = (start, FORWARD_PAGE_LINES, batch_bytes, self.store_id, session_id)
                return await (await conn.execute(self._sql["forward"], args)).fetchall()

            return await self._run(session_id, body, write=False)

        return forward_batches(page, location=self.location(session_id))

    async def read_from(self, session_id: str, *, start: int) -> tuple[list[bytes], StorageMark]:
        """
        The lines from line number ``start`` (0-based; the header is 0) to the end, and the mark after
        them: one statement on the primary key, reading only those lines.

        Raises:
            TranscriptNotFoundError: No such transcript.
            ValueError: ``start`` is negative.
        """
        self._check_id(session_id)
        if start < 0:
            raise ValueError(f"start must be a line number >= 0, not {start}")
        return await self._lines_from(session_id, start, also=-1)

    async def _lines_from(self, session_id: str, start: int, *, also: int) -> tuple[list[bytes], StorageMark]:
        rows = await self._reads(session_id, "from", {"start": start, "also": also})
        if not rows:
            raise TranscriptNotFoundError(f"transcript not found: {self.location(session_id)}")
        generation, count, size = rows[0][:3]
        return [bytes(row[3]) for row in rows if row[3] is not None], self._mark(count, size, generation)

    async def read_tail(self, session_id: str, *, lines: int) -> tuple[int, list[bytes], StorageMark]:
        """
        The last ``lines`` lines (fewer when the transcript is shorter; the header counts), first to last.

        Returns:
            ``(start, lines, mark)``: the line number of the first line returned, the lines, the mark.

        Raises:
            TranscriptNotFoundError: No such transcript.
            ValueError: ``lines`` is negative.
        """
        self._check_id(session_id)
        if lines < 0:
            raise ValueError(f"lines must be >= 0, not {lines}")
        found = await self._reads(session_id, "tail_start", {"n": lines})
        if not found:
            raise TranscriptNotFoundError(f"transcript not found: {self.location(session_id)}")
        start = int(found[0][0])
        tail, mark = await self.read_from(session_id, start=start)
        # appended in between: keep the last `lines` of what was read (the mark is after all of them)
        cut = max(0, len(tail) - lines)
        return start + cut, tail[cut:], mark

    async def read_live(self, session_id: str) -> LiveTranscriptLines:
        """
        The header and the lines a context rebuild of the leaf needs: from the ``firstKeptEntryId`` of
        the latest compaction on the leaf's path (or from that compaction when its kept entry is not
        found before it), else every line (module docstring). Loading :meth:`LiveTranscriptLines.jsonl`
        gives the same ``build_session_context()`` messages as the whole transcript, reading O(live
        context).

        The entries before the kept one are not read: a ``thinking_level_change`` or ``model_change``
        only there is not seen (the file tail reader walks on for them; this read does not).

        Raises:
            TranscriptNotFoundError: No such transcript.
        """
        self._check_id(session_id)
        found = await self._reads(session_id, "live_start", {"max_depth": _MAX_DEPTH})
        start = 0
        if found and found[0][1] == "compaction":
            compaction_seq, line = int(found[0][0]), found[0][2]
            start = compaction_seq
            try:
                kept = _COMPACTION.decode(bytes(line)).firstKeptEntryId
            except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
                kept = None
            if isinstance(kept, str) and storable_key(kept, nul_ok=False):
                entry = indexed_id(kept)  # as the entry_id column holds it
                at = await self._reads(session_id, "entry_seq", {"entry": entry, "before": compaction_seq})
                if at and at[0][0] is not None:
                    start = int(at[0][0])
        lines, mark = await self._lines_from(session_id, start, also=0)  # the header too, one snapshot
        if not lines:  # a transcript without lines (not even a header)
            return LiveTranscriptLines(header=b"", start=1, lines=[], mark=mark)
        return LiveTranscriptLines(header=lines[0], start=max(start, 1), lines=lines[1:], mark=mark)

    async def read_backwards(self, session_id: str) -> AsyncIterator[bytes]:
        """
        The lines from the last to the first, in batches by ``seq`` descending (16 lines, doubling up to
        1024; a pool connection only while a batch is read), so reading k lines costs O(k).

        Raises:
            TranscriptNotFoundError: No such transcript (on the first iteration).
            TranscriptChangedError: It was deleted or replaced while being read.
        """
        self._check_id(session_id)
        below: int | None = None
        generation: int | None = None
        batch = _FIRST_BATCH
        while below is None or below > 0:
            args: tuple[object, ...]
            if generation is None:
                query, args = self._sql["tail_first"], (batch, self.store_id, session_id)
            else:
                query, args = self._sql["tail_more"], (self.store_id, session_id, generation, below, batch)

            async def body(conn: AsyncConnection[Any], q: Any = query, a: Any = args) -> list[Any]:
                cur = await conn.execute(q, a)
                return await cur.fetchall()

            rows = await self._run(session_id, body, write=False)
            if generation is None:
                if not rows:
                    raise TranscriptNotFoundError(f"transcript not found: {self.location(session_id)}")
                generation, below = int(rows[0][0]), int(rows[0][1])
                found = [(row[2], row[3]) for row in rows if row[3] is not None]
            else:
                found = [(row[0], row[1]) for row in rows]
                if not found:
                    raise TranscriptChangedError(
                        "the transcript was deleted or replaced while it was read backwards",
                        path=self.location(session_id),
                    )
            for seq, line in found:
                below = int(seq)
                yield bytes(line)
            if not found:
                break
            batch = min(batch * 2, _MAX_BATCH)

    async def list_sessions(self) -> list[str]:
        """The session ids of this store's transcripts, sorted by code point (head rows only, no lines)."""

        async def body(conn: AsyncConnection[Any]) -> list[str]:
            cur = await conn.execute(self._sql["list"], (self.store_id,))
            return [row[0] for row in await cur.fetchall()]

        try:
            return await self._run("*", body, write=False)
        except TranscriptNotFoundError:  # a read-only open before the tables exist: none
            return []
