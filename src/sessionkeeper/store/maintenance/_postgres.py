"""
Store maintenance of a :class:`~sessionkeeper.store.PostgresStoreBackend` as set-based SQL (issue 13):
the model-run, age (``pruneAfter``) and count (``maxEntries``) passes are one statement each, then the
transcript passes on the same store's transcript rows (``_postgres_transcripts``: archive, archive
retention, disk budget, unreferenced transcripts), and only the rows they act on are read into Python,
never every entry.

They select exactly what :func:`~sessionkeeper.store.plan_maintenance` selects on the same entries
(OpenClaw spec §2.2-§2.3; DESIGN D6): each row carries the planner's own verdicts, computed in Python
when the row is written (``updated_at`` = ``updated_at_of``, ``is_protected``, ``is_main``,
``is_model_run``, ``key_folded`` = ``str.lower``; schema migration 2), and the SQL only compares them.
Protected keys (the main session, every key whose folded form equals a main key's, the caller's active
set compared case-insensitively, protected entries) are never removed by the age and count passes; the
model-run pass, as in the planner, spares the main session and the active set. The cap orders by
``updatedAt`` descending, missing last, ties in insertion order (the planner's stable sort).

Used by :func:`~sessionkeeper.store.run_maintenance` for a PostgreSQL store without a transcripts
directory: with files to archive the planner needs every entry, and the Python plan runs (through the
backend's ``load_all`` / ``transaction``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sessionkeeper.store._entry import session_entry_to_dict
from sessionkeeper.store._remote import decode_entry_text
from sessionkeeper.store.maintenance._postgres_transcripts import (
    PRESERVED,
    TRANSCRIPT_QUERIES,
    TranscriptOutcome,
    claim_prefix,
    transcript_passes,
)
from sessionkeeper.store.maintenance._report import (
    EntryRemoval,
    FileAction,
    MaintenanceReport,
    RemovalReason,
    UnreferencedArtifactsReport,
)
from sessionkeeper.store.maintenance._settings import MaintenanceSettings, entry_high_water
from sessionkeeper.store.maintenance._state import session_id_of, updated_at_of


if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.rows import TupleRow

    from sessionkeeper.store._postgres import PostgresStoreBackend


__all__ = ("postgres_entry_maintenance",)

_log = logging.getLogger("sessionkeeper.maintenance")

_PRESERVED = PRESERVED
"""The planner's ``preserve`` set (``_postgres_transcripts.PRESERVED``): active, main and claimed keys."""

_QUERIES = {
    "count": "SELECT count(*) FROM {t} WHERE store_id = %(store)s",
    "lock": (
        "SELECT count(*) FROM (SELECT 1 FROM {t} WHERE store_id = %(store)s ORDER BY seq FOR UPDATE) locked"
    ),
    "model_run": (
        "SELECT session_key, entry_text FROM {t} WHERE store_id = %(store)s AND is_model_run "
        f"AND NOT {_PRESERVED} AND updated_at < %(cutoff)s ORDER BY seq"
    ),
    "stale": (
        "SELECT session_key, entry_text FROM {t} WHERE store_id = %(store)s AND NOT is_protected "
        f"AND NOT {_PRESERVED} AND updated_at < %(cutoff)s AND session_key <> ALL(%(removed)s) ORDER BY seq"
    ),
    "cap": (
        "WITH live AS (SELECT session_key, seq, updated_at, entry_text, "
        f"(is_protected OR {_PRESERVED}) AS kept FROM {{t}} "
        "WHERE store_id = %(store)s AND session_key <> ALL(%(removed)s)), "
        "kept AS (SELECT count(*) FILTER (WHERE kept) AS n FROM live), "
        "ranked AS (SELECT session_key, entry_text, "
        "row_number() OVER (ORDER BY updated_at DESC NULLS LAST, seq) AS rn FROM live WHERE NOT kept) "
        "SELECT kept.n, ranked.session_key, ranked.entry_text FROM kept "
        "LEFT JOIN ranked ON ranked.rn > greatest(0, %(max)s - kept.n) ORDER BY ranked.rn"
    ),
    "keys": "SELECT session_key FROM {t} WHERE store_id = %(store)s ORDER BY seq",
    "delete": (
        "DELETE FROM {t} WHERE store_id = %(store)s AND session_key = ANY(%(removed)s) RETURNING session_key"
    ),
}


async def postgres_entry_maintenance(
    backend: PostgresStoreBackend,
    *,
    settings: MaintenanceSettings,
    now_ms: int,
    active_keys: Iterable[str],
    on_save: bool,
    apply: bool,
) -> MaintenanceReport:
    """
    Plan (and with ``apply`` carry out, in one transaction with the store's rows locked) the entry
    passes of store maintenance in SQL.

    Args:
        backend: The store (its schema at version 2 or later).
        settings: Every rule (the entry passes, archive retention, the disk budget in bytes of rows).
        now_ms: The time the rules are evaluated at (ms since epoch).
        active_keys: Keys that must survive (compared case-insensitively; D6).
        on_save: The automatic maintenance of a store write (the count rules wait for the high-water mark).
        apply: Delete the selected rows; otherwise only report them.

    Returns:
        The report :func:`~sessionkeeper.store.plan_maintenance` gives for the same entries and no
        files (``mode``/``dry_run``/``applied`` are set by the caller).
    """
    active = sorted({k.strip().lower() for k in active_keys if k.strip()})
    queries: dict[str, Any] = {}
    params: dict[str, Any] = {
        "store": backend.store_id,
        "active": active,
        "removed": [],
        "claim": claim_prefix(backend.schema, backend.store_id),
    }
    warnings: list[str] = []

    async def rows(conn: AsyncConnection[TupleRow], name: str, **extra: Any) -> list[TupleRow]:
        if not queries:  # the backend imports psycopg on its first use
            sql = backend._sql_module
            tables = {
                "t": sql.Identifier(backend.schema, "sk_sessions"),
                "h": sql.Identifier(backend.schema, "sk_transcripts"),
            }
            texts = {**_QUERIES, **TRANSCRIPT_QUERIES}
            queries.update({key: sql.SQL(text).format(**tables) for key, text in texts.items()})
        cur = await conn.execute(queries[name], {**params, **extra})
        return await cur.fetchall()

    def removal(key: str, text: str, reason: RemovalReason) -> EntryRemoval:
        values = session_entry_to_dict(decode_entry_text(key, text, where=backend.where))
        return EntryRemoval(
            key=key, reason=reason, session_id=session_id_of(values), updated_at=updated_at_of(values)
        )

    async def body(conn: AsyncConnection[TupleRow]) -> MaintenanceReport:
        async with conn.transaction():
            if not await backend._has_tables(conn):
                return _report(
                    settings, now_ms=now_ms, count=0, keys=[], removals=[], warnings=warnings, on_save=on_save
                )
            [(count,)] = await rows(conn, "lock" if apply else "count")
            removals: list[EntryRemoval] = []
            force = not on_save
            high_water = entry_high_water(settings.max_entries)
            # (1) model-run probes
            if (count > settings.max_entries) if force else (count >= high_water):
                cutoff = now_ms - settings.model_run_prune_after_ms
                for key, text in await rows(conn, "model_run", cutoff=cutoff):
                    removals.append(removal(key, text, "prune-model-run"))
            # (2) stale entries
            if settings.prune_after_ms is None:
                warnings.append("age pruning is disabled (pruneAfter is 0, negative or false)")
            else:
                params["removed"] = [r.key for r in removals]
                cutoff = now_ms - settings.prune_after_ms
                for key, text in await rows(conn, "stale", cutoff=cutoff):
                    removals.append(removal(key, text, "prune-stale"))
            # (3) the cap
            if force or count - len(removals) >= high_water:
                params["removed"] = [r.key for r in removals]
                capped = await rows(conn, "cap", max=settings.max_entries)
                preserved_count = int(capped[0][0])
                for _, key, text in capped:
                    if key is not None:
                        removals.append(removal(key, text, "cap-overflow"))
                if preserved_count > settings.max_entries:
                    warnings.append(
                        f"{preserved_count} protected or active entries exceed "
                        f"maxEntries={settings.max_entries}; the store stays above the cap"
                    )
            # (4)-(7) the transcript rows of the same store (_postgres_transcripts)
            outcome = await transcript_passes(
                lambda name, **extra: rows(conn, name, **extra),
                settings=settings,
                now_ms=now_ms,
                on_save=on_save,
                removed=[r.key for r in removals],
                evict=lambda key, text: removal(key, text, "evict-budget"),
            )
            removals.extend(outcome.evictions)
            warnings.extend(outcome.warnings)
            keys = [key for (key,) in await rows(conn, "keys")]
            if apply and removals:
                await rows(conn, "delete", removed=[r.key for r in removals])
            if apply:
                await outcome.apply(lambda name, **extra: rows(conn, name, **extra), store=backend.store_id)
            return _report(
                settings,
                now_ms=now_ms,
                count=count,
                keys=keys,
                removals=removals,
                warnings=warnings,
                on_save=on_save,
                outcome=outcome,
            )

    report = await backend._run(body, write=apply, turn=None)
    _log.debug(
        "maintenance as set-based SQL on %s: %d of %d entries selected",
        backend.where,
        len(report.removals),
        report.before_count,
        extra={"where": backend.where, "rows_read": len(report.removals), "applied": apply},
    )
    return report


def _report(
    settings: MaintenanceSettings,
    *,
    now_ms: int,
    count: int,
    keys: list[str],
    removals: list[EntryRemoval],
    warnings: list[str],
    on_save: bool,
    outcome: TranscriptOutcome | None = None,
) -> MaintenanceReport:
    reasons = {r.key: r.reason for r in removals}
    unreferenced = (
        None
        if on_save
        else UnreferencedArtifactsReport(
            scanned_files=0, removed_files=0, freed_bytes=0, older_than_ms=settings.prune_after_ms or 0
        )
    )
    budget = None
    file_actions: tuple[FileAction, ...] = ()
    if outcome is not None:
        unreferenced = outcome.unreferenced if outcome.unreferenced is not None else unreferenced
        budget = outcome.disk_budget
        file_actions = tuple(outcome.file_actions)
    return MaintenanceReport(
        mode=settings.mode,
        dry_run=False,
        applied=False,
        now_ms=now_ms,
        before_count=count,
        after_count=count - len(removals),
        removals=tuple(removals),
        file_actions=file_actions,
        actions={key: reasons.get(key, "keep") for key in keys},
        bytes_before=budget.total_bytes_before if budget is not None else 0,
        bytes_after=budget.total_bytes_after if budget is not None else 0,
        disk_budget=budget,
        unreferenced_artifacts=unreferenced,
        warnings=tuple(dict.fromkeys(warnings)),
    )
