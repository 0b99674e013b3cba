"""
The transcript passes of store maintenance on PostgreSQL, as set-based SQL (issue 13): what the planner's
file passes do to a sessions directory (OpenClaw spec §2.2 steps 4-6, §2.4, §2.5), done to the
transcript rows of ``PostgresTranscriptStorage`` in the same schema and store id. Each pass is one
statement that selects exactly the rows it acts on; no pass reads every transcript or entry into Python.

- (4) **Archive removed transcripts** (``archive-removed-transcript``): the live transcript of each
  removed entry whose ``sessionId`` no remaining entry uses is archived as ``<id>/deleted/<stamp>``
  (``_postgres_transcript_archives``: the file's ``<file>.deleted.<stamp>``).
- (5) **Archive retention** (``archive-retention``): ``deleted`` archives older than ``pruneAfter`` and
  ``reset`` archives older than ``resetArchiveRetention`` are deleted (by ``archived_at``, the store's
  clock), when this run archived something or a reset retention is set (the planner's condition).
- (6) **Disk budget** (``maxDiskBytes`` / ``highWaterBytes``, in bytes of rows): the total is the
  ``byte_size`` of every transcript and archive of the store (their JSONL bytes) plus the UTF-8 bytes of
  the remaining entries' JSON text. Over ``maxDiskBytes``, rows go oldest first (a transcript's last
  write, ``updated_at``, the file's mtime) until the total is at the high-water mark: archives and
  transcripts no remaining entry uses (``budget-artifact``), then entries, least recently updated
  first, protected and preserved ones skipped (``evict-budget``), each deleting the transcript it alone
  used (``budget-entry-file``). One window-function statement per step (a running sum).
- (7) **Unreferenced transcripts** (``sessions cleanup`` only, ``unreferenced-artifact``): live
  transcripts no remaining entry uses whose last write is older than ``pruneAfter``.

**Held writer claims** are held lock files (DESIGN D6, field report B19): an entry whose transcript's
writer claim (``PostgresTranscriptStorage.claim``, a session-level advisory lock) is held is preserved
by every entry pass and the budget, like the main session, and the live transcript row of a claimed
session is never archived or deleted. "Held" is read from ``pg_locks`` (granted advisory locks of this
database, :data:`CLAIMED_KEYS`) inside the very statement that selects, and again inside the archiving
and deleting statements of an applied run (the directory re-checks a lock file before each move), so a
claim taken meanwhile skips the row. A claim taken after that last statement and before the commit is
not seen: that writer's next append then fails (``TranscriptNotFoundError``), it never writes into an
archive. Try-locking each candidate (``pg_try_advisory_xact_lock`` until the commit) would close that
window, but takes one slot of the server-wide lock table per acted-on session
(``max_locks_per_transaction`` x ``max_connections``, 6,400 by default): a large cleanup would fail with
"out of shared memory" and starve every other transaction meanwhile. An append without a claim holds
the same lock for its transaction, so its session is kept that run too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

import attrs

from sessionkeeper.store._postgres_transcript_archives import archive_name
from sessionkeeper.store.maintenance._report import (
    DiskBudgetReport,
    EntryRemoval,
    FileAction,
    UnreferencedArtifactsReport,
)
from sessionkeeper.store.maintenance._settings import MaintenanceSettings
from sessionkeeper.transcript import archive_stamp


__all__ = ("PRESERVED", "TRANSCRIPT_QUERIES", "TranscriptOutcome", "claim_prefix", "transcript_passes")

Query = Callable[..., Awaitable[list[Any]]]
"""``await query(name, **params)``: the rows of one statement of :data:`TRANSCRIPT_QUERIES`."""

CLAIMED_KEYS: Final = (
    "(SELECT (l.classid::int8 << 32) | l.objid::int8 FROM pg_locks l WHERE l.locktype = 'advisory'"
    " AND l.objsubid = 1 AND l.granted"
    " AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database()))"
)
"""The 64-bit keys of the advisory locks granted in this database now (one snapshot of ``pg_locks``)."""


def claim_prefix(schema: str, store_id: str) -> str:
    """
    The session id's prefix in the text hashed into a transcript's writer-claim key: the claim of
    session ``S`` is the advisory lock ``hashtextextended(prefix || S, 0)``
    (``PostgresTranscriptStorage.lock_name``).
    """
    return f"sessionkeeper.transcript:{schema}:{store_id}:"


def claimed(column: str) -> str:
    """SQL: the transcript of session id ``column`` has its writer claim held (module docstring)."""
    return f"(hashtextextended(%(claim)s || {column}, 0) IN {CLAIMED_KEYS})"


PRESERVED: Final = (
    "(key_folded = ANY(%(active)s) OR key_folded IN "
    "(SELECT m.key_folded FROM {t} m WHERE m.store_id = %(store)s AND (m.is_main"
    f" OR (m.session_id IS NOT NULL AND {claimed('m.session_id')}))))"
)
"""The planner's ``preserve`` set: the active keys and every key folding to the key of a main session
or of an entry whose transcript's writer claim is held."""
_REMAINING: Final = (
    "SELECT 1 FROM {t} s WHERE s.store_id = %(store)s AND s.session_id = h.session_id"
    " AND s.session_key <> ALL(%(removed)s)"
)
_MS: Final = "to_timestamp(%({})s::float8 / 1000)"

TRANSCRIPT_QUERIES: Final[dict[str, str]] = {
    # (4) the live transcripts of removed entries that no remaining entry uses
    "tx_orphaned": (
        "SELECT h.session_id, h.byte_size FROM {h} h"
        " WHERE h.store_id = %(store)s AND h.archived_at IS NULL AND EXISTS ("
        " SELECT 1 FROM {t} s WHERE s.store_id = %(store)s AND s.session_id = h.session_id"
        " AND s.session_key = ANY(%(removed)s))"
        f" AND NOT EXISTS ({_REMAINING}) AND NOT {claimed('h.session_id')}"
        ' ORDER BY h.session_id COLLATE "C"'
    ),
    # (5) archives past their retention (a NULL cutoff: that reason is kept)
    "tx_retention": (
        "SELECT session_id, byte_size FROM {h} WHERE store_id = %(store)s AND archived_at IS NOT NULL"
        f" AND ((archive_reason = 'deleted' AND archived_at < {_MS.format('deleted_cutoff')})"
        f" OR (archive_reason = 'reset' AND archived_at < {_MS.format('reset_cutoff')}))"
        ' ORDER BY archived_at, session_id COLLATE "C"'
    ),
    # (6) the total, and the archives and unused transcripts to delete, oldest write first, while the
    # total before each is above the high-water mark (none when the total is within maxDiskBytes)
    "tx_budget_rows": (
        "WITH heads AS (SELECT session_id, byte_size, updated_at, archived_at FROM {h}"
        "  WHERE store_id = %(store)s AND session_id <> ALL(%(gone)s)),"
        " live AS (SELECT session_id, entry_text FROM {t}"
        "  WHERE store_id = %(store)s AND session_key <> ALL(%(removed)s)),"
        " total AS (SELECT (SELECT coalesce(sum(byte_size), 0) FROM heads)"
        "  + (SELECT coalesce(sum(octet_length(entry_text)), 0) FROM live) AS n),"
        " cand AS (SELECT h.session_id, h.byte_size, h.updated_at FROM heads h"
        "  WHERE (h.archived_at IS NOT NULL OR h.session_id = ANY(%(archiving)s)"
        "  OR NOT EXISTS (SELECT 1 FROM live e WHERE e.session_id = h.session_id))"
        f"  AND (h.archived_at IS NOT NULL OR NOT {claimed('h.session_id')})),"
        " ranked AS (SELECT session_id, byte_size, sum(byte_size) OVER (ORDER BY updated_at,"
        '  session_id COLLATE "C" ROWS UNBOUNDED PRECEDING) - byte_size AS before FROM cand)'
        " SELECT total.n, r.session_id, r.byte_size FROM total LEFT JOIN ranked r"
        "  ON total.n > %(max)s AND total.n - r.before > %(high)s ORDER BY r.before"
    ),
    # (6) then entries, least recently updated first (missing: 0, ties in insertion order), each with the
    # live transcript it is the last remaining user of
    "tx_budget_entries": (
        "WITH live AS (SELECT session_key, seq, coalesce(updated_at, 0) AS u, session_id, entry_text,"
        f"  (is_protected OR {PRESERVED}) AS kept FROM {{t}}"
        "  WHERE store_id = %(store)s AND session_key <> ALL(%(removed)s)),"
        " refs AS (SELECT session_id, count(*) AS n FROM live WHERE session_id IS NOT NULL"
        "  GROUP BY session_id),"
        " cand AS (SELECT l.*, row_number() OVER (PARTITION BY l.session_id ORDER BY l.u, l.seq) AS nth"
        "  FROM live l WHERE NOT l.kept),"
        " sized AS (SELECT c.session_key, c.entry_text, c.u, c.seq, c.session_id,"
        "  CASE WHEN c.nth = r.n THEN h.byte_size END AS freed,"
        "  octet_length(c.entry_text) + coalesce(CASE WHEN c.nth = r.n THEN h.byte_size END, 0) AS size"
        "  FROM cand c LEFT JOIN refs r ON r.session_id = c.session_id"
        "  LEFT JOIN {h} h ON h.store_id = %(store)s AND h.session_id = c.session_id"
        "  AND h.archived_at IS NULL AND h.session_id <> ALL(%(gone)s)),"
        " ranked AS (SELECT *, sum(size) OVER (ORDER BY u, seq ROWS UNBOUNDED PRECEDING) - size AS before"
        "  FROM sized)"
        " SELECT session_key, entry_text, session_id, freed, size FROM ranked"
        "  WHERE %(remaining)s - before > %(high)s ORDER BY before"
    ),
    # (7) live transcripts no remaining entry uses, last written before the cutoff
    "tx_unreferenced": (
        "SELECT h.session_id, h.byte_size FROM {h} h WHERE h.store_id = %(store)s"
        " AND h.archived_at IS NULL AND h.session_id <> ALL(%(gone)s) AND h.session_id <> ALL(%(archiving)s)"
        f" AND h.updated_at <= {_MS.format('cutoff')} AND NOT EXISTS ({_REMAINING})"
        f" AND NOT {claimed('h.session_id')}"
        ' ORDER BY h.updated_at, h.session_id COLLATE "C"'
    ),
    # (7) the rows the pass looks at, as a directory counts its files (scannedFiles)
    "tx_count": "SELECT count(*) FROM {h} WHERE store_id = %(store)s",
    "tx_archive": (
        "UPDATE {h} h SET session_id = h.session_id || %(suffix)s,"
        f" archived_at = {_MS.format('ms')}, archive_reason = 'deleted', archived_from = h.session_id"
        " WHERE h.store_id = %(store)s AND h.session_id = ANY(%(archiving)s) AND h.archived_at IS NULL"
        " AND NOT EXISTS (SELECT 1 FROM {h} x WHERE x.store_id = h.store_id"
        " AND x.session_id = h.session_id || %(suffix)s)"
        f" AND NOT {claimed('h.session_id')} RETURNING h.archived_from"
    ),
    "tx_delete": (
        "DELETE FROM {h} h WHERE h.store_id = %(store)s AND h.session_id = ANY(%(names)s)"
        f" AND (h.archived_at IS NOT NULL OR NOT {claimed('h.session_id')}) RETURNING h.session_id"
    ),
}
"""The statements by name; ``{t}``: ``sk_sessions``, ``{h}``: ``sk_transcripts`` (module docstring)."""


@attrs.define
class TranscriptOutcome:
    """What the transcript passes selected (and :meth:`apply` carries out)."""

    now_ms: int
    file_actions: list[FileAction] = attrs.Factory(list)
    evictions: list[EntryRemoval] = attrs.Factory(list)
    archiving: list[str] = attrs.Factory(list)  # live session ids to archive as <id>/deleted/<stamp>
    deleting: list[str] = attrs.Factory(list)  # head-row names to delete (after the archiving)
    disk_budget: DiskBudgetReport | None = None
    unreferenced: UnreferencedArtifactsReport | None = None
    warnings: list[str] = attrs.Factory(list)

    def _archived(self, session_id: str) -> str:
        return archive_name(session_id, "deleted", self.now_ms)

    def delete(self, name: str, size: int, reason: Any) -> None:
        """Plan the deletion of the head row ``name`` (an archive of this run by its new name)."""
        self.deleting.append(self._archived(name) if name in self.archiving else name)
        self.file_actions.append(
            FileAction(name=self.deleting[-1], action="delete", reason=reason, size=int(size))
        )

    async def apply(self, query: Query, *, store: str) -> None:
        """Archive, then delete, the planned rows (inside the caller's transaction)."""
        if self.archiving:
            suffix = "/deleted/" + archive_stamp(self.now_ms)
            await query("tx_archive", archiving=self.archiving, suffix=suffix, ms=self.now_ms, store=store)
        if self.deleting:
            await query("tx_delete", names=self.deleting, store=store)


async def transcript_passes(
    query: Query,
    *,
    settings: MaintenanceSettings,
    now_ms: int,
    on_save: bool,
    removed: list[str],
    evict: Callable[[str, str], EntryRemoval],
) -> TranscriptOutcome:
    """
    Select the transcript rows steps 4-7 act on (module docstring), after the entry passes removed
    ``removed`` (session keys). ``query`` runs a statement of :data:`TRANSCRIPT_QUERIES` in the caller's
    transaction with its ``store`` and ``active`` parameters; ``evict(key, entry_text)`` makes the
    report row of an entry the budget evicts.
    """
    out = TranscriptOutcome(now_ms=now_ms)
    gone: list[str] = []
    # (4) archive the transcripts of removed entries
    if removed:
        for session_id, size in await query("tx_orphaned", removed=removed):
            out.archiving.append(session_id)
            out.file_actions.append(
                FileAction(
                    name=session_id,
                    action="archive",
                    reason="archive-removed-transcript",
                    size=int(size),
                    archive_name=out._archived(session_id),
                )
            )
    # (5) archive retention
    deleted_after, reset_after = settings.prune_after_ms, settings.reset_archive_retention_ms
    if out.archiving or reset_after is not None:
        for name, size in await query(
            "tx_retention",
            deleted_cutoff=None if deleted_after is None else now_ms - deleted_after,
            reset_cutoff=None if reset_after is None else now_ms - reset_after,
        ):
            out.delete(name, size, "archive-retention")
            gone.append(name)
    # (6) the disk budget
    max_bytes, high = settings.max_disk_bytes, settings.resolved_high_water_bytes
    if max_bytes is not None and high is not None:
        await _budget(query, out, gone, removed, max_bytes=max_bytes, high=high, evict=evict)
    # (7) unreferenced transcripts (sessions cleanup)
    if not on_save:
        older = settings.prune_after_ms
        removed_files = freed = 0
        ((rows,),) = await query("tx_count")  # archived rows too, as a directory's archive files
        scanned = int(rows) - len(set(out.deleting))  # what retention and the budget leave
        if older is not None:
            gone = [*gone, *out.deleting]
            keys = [*removed, *(e.key for e in out.evictions)]
            for name, size in await query(
                "tx_unreferenced", removed=keys, gone=gone, archiving=out.archiving, cutoff=now_ms - older
            ):
                out.delete(name, size, "unreferenced-artifact")
                removed_files += 1 if size > 0 else 0
                freed += int(size)
        out.unreferenced = UnreferencedArtifactsReport(
            scanned_files=scanned, removed_files=removed_files, freed_bytes=freed, older_than_ms=older or 0
        )
    return out


async def _budget(
    query: Query,
    out: TranscriptOutcome,
    gone: list[str],
    removed: list[str],
    *,
    max_bytes: int,
    high: int,
    evict: Callable[[str, str], EntryRemoval],
) -> None:
    rows = await query(
        "tx_budget_rows", gone=gone, removed=removed, archiving=out.archiving, max=max_bytes, high=high
    )
    total = int(rows[0][0])
    current = total
    freed = files = 0
    for _, name, size in rows:
        if name is None:
            continue
        out.delete(name, size, "budget-artifact")
        current -= int(size)
        freed += int(size)
        files += 1 if size > 0 else 0
    evicted = 0
    if total > max_bytes and current > high:
        for key, text, session_id, transcript, size in await query(
            "tx_budget_entries", removed=removed, gone=gone, remaining=current, high=high
        ):
            out.evictions.append(evict(key, text))
            evicted += 1
            current -= int(size)
            if transcript is not None:
                out.delete(session_id, transcript, "budget-entry-file")
                freed += int(transcript)
                files += 1 if transcript > 0 else 0
    if total > max_bytes and current > high:
        out.warnings.append(f"session disk budget still above high-water target ({current} > {high} bytes)")
    out.disk_budget = DiskBudgetReport(
        total_bytes_before=total,
        total_bytes_after=current,
        removed_files=files,
        removed_entries=evicted,
        freed_bytes=freed,
        max_bytes=max_bytes,
        high_water_bytes=high,
        over_budget=total > max_bytes,
    )
