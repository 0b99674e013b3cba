"""
Cron sessions: run-session retention, fresh isolated runs, run-log trimming (OpenClaw spec §2.3 and the
seeds' "Cron sessions and run logs"; ``src/cron/session-reaper.ts``, ``src/cron/isolated-agent/session.ts``).

- Isolated cron runs write ``agent:<a>:cron:<job>:run:<id>`` entries; ``cron.sessionRetention`` (default
  24 h, ``false`` disables) removes them once older, archiving their transcripts as ``*.deleted.<stamp>``
  and retiring ``*.deleted`` archives older than the retention.
- A forced new isolated run starts the ``cron:<jobId>`` entry afresh: safe preferences and labels are kept,
  ambient conversation context (routing, delivery, send/queue policy, elevation, origin, ACP binding) is
  dropped, so a new run cannot inherit stale delivery or execution authority.
- File-based run logs (``cron/runs/<jobId>.jsonl``) keep their newest ``keepLines`` (2000) lines within
  ``maxBytes`` (2 000 000).
"""

from __future__ import annotations

import copy
import math
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, Self

import anyio.to_thread
import attrs

from sessionkeeper._clock import SYSTEM_CLOCK, Clock
from sessionkeeper._config import Config, parse_byte_size, parse_duration_ms
from sessionkeeper._fs import atomic_write_bytes
from sessionkeeper.exceptions import ConfigError, UnsafePathError
from sessionkeeper.store._entry import SessionEntry, session_entry_from_dict, session_entry_to_dict
from sessionkeeper.store._keys import is_cron_run_session_key, transcript_file_name
from sessionkeeper.store._reset import evaluate_freshness, has_provider_owned_session
from sessionkeeper.store._reset_policy import ResetPolicy
from sessionkeeper.store.maintenance._artifacts import archive_file_name, archive_timestamp_ms
from sessionkeeper.store.maintenance._run import held_transcript_locks, list_store_files


__all__ = (
    "DEFAULT_CRON_SESSION_RETENTION_MS",
    "DEFAULT_RUN_LOG_KEEP_LINES",
    "DEFAULT_RUN_LOG_MAX_BYTES",
    "CronSessionResolution",
    "CronSettings",
    "CronSweepReport",
    "plan_cron_run_retention",
    "resolve_cron_session",
    "sanitize_fresh_cron_entry",
    "sweep_cron_run_sessions",
    "trim_cron_run_log",
)

DEFAULT_CRON_SESSION_RETENTION_MS: Final = 24 * 3_600_000
"""``cron.sessionRetention`` default: 24 h."""

DEFAULT_RUN_LOG_KEEP_LINES: Final = 2000
"""``cron.runLog.keepLines`` default."""

DEFAULT_RUN_LOG_MAX_BYTES: Final = 2_000_000
"""``cron.runLog.maxBytes`` default (bytes)."""

# Fields a fresh isolated cron run keeps from the previous ``cron:<jobId>`` entry (safe preferences).
_CARRIED: Final = (
    "heartbeatTaskState",
    "chatType",
    "thinkingLevel",
    "fastMode",
    "verboseLevel",
    "traceLevel",
    "reasoningLevel",
    "ttsAuto",
    "responseUsage",
    "pinnedAt",
    "label",
    "displayName",
)
# Ambient conversation context: kept only when the run is not forced new.
_AMBIENT: Final = (
    "elevatedLevel",
    "groupActivation",
    "groupActivationNeedsSystemIntro",
    "sendPolicy",
    "queueMode",
    "queueDebounceMs",
    "queueCap",
    "queueDrop",
    "channel",
    "groupId",
    "subject",
    "groupChannel",
    "space",
    "origin",
    "acp",
)


def _retention(value: object, key: str) -> int | None:
    if value is False:
        return None
    if value is None:
        return DEFAULT_CRON_SESSION_RETENTION_MS
    if isinstance(value, int | float) and not isinstance(value, bool):
        return parse_duration_ms(value, default_unit="h", key=key)
    if isinstance(value, str) and value.strip():
        return parse_duration_ms(value, default_unit="h", key=key)
    raise ConfigError(f"expected a duration such as '24h' or false, got {value!r}", key=key)


@attrs.frozen(kw_only=True)
class CronSettings:
    """
    Cron session and run-log retention (the ``cron`` config section).

    Attributes:
        session_retention_ms: ``cron.sessionRetention``: isolated run sessions older than this are pruned
            (ms; default 24 h; bare numbers are hours; ``None`` when configured ``false``).
        run_log_keep_lines: ``cron.runLog.keepLines``: lines kept per job run log (default 2000).
        run_log_max_bytes: ``cron.runLog.maxBytes``: size cap of a file-based run log (default 2 000 000).
    """

    session_retention_ms: int | None = DEFAULT_CRON_SESSION_RETENTION_MS
    run_log_keep_lines: int = DEFAULT_RUN_LOG_KEEP_LINES
    run_log_max_bytes: int = DEFAULT_RUN_LOG_MAX_BYTES

    @classmethod
    def from_config(cls, config: Config) -> Self:
        """Read ``cron.sessionRetention`` and ``cron.runLog.{keepLines,maxBytes}``; raises ConfigError."""
        return cls.from_mapping(config.section("cron"))

    @classmethod
    def from_mapping(cls, cron: Mapping[str, Any]) -> Self:
        """Build the settings from a ``cron`` block (camelCase keys)."""
        run_log = cron.get("runLog")
        run_log = {} if run_log is None else run_log
        if not isinstance(run_log, Mapping):
            raise ConfigError("expected an object", key="cron.runLog")
        keep = run_log.get("keepLines", DEFAULT_RUN_LOG_KEEP_LINES)
        if (
            isinstance(keep, bool)
            or not isinstance(keep, int | float)
            or not math.isfinite(keep)
            or keep <= 0
        ):
            raise ConfigError(
                f"expected a positive number of lines, got {keep!r}", key="cron.runLog.keepLines"
            )
        max_bytes = run_log.get("maxBytes", DEFAULT_RUN_LOG_MAX_BYTES)
        return cls(
            session_retention_ms=_retention(cron.get("sessionRetention"), "cron.sessionRetention"),
            run_log_keep_lines=math.floor(keep),
            run_log_max_bytes=parse_byte_size(max_bytes, default_unit="b", key="cron.runLog.maxBytes"),
        )


def plan_cron_run_retention(
    entries: Mapping[str, Mapping[str, Any]], *, now_ms: int, retention_ms: int
) -> list[str]:
    """
    Keys of isolated cron run sessions (``agent:<a>:cron:<job>:run:<id>``) whose ``updatedAt`` (missing
    counts as 0) is older than ``now_ms - retention_ms``. Base ``cron:<jobId>`` entries are never listed.
    """
    cutoff = now_ms - retention_ms
    out: list[str] = []
    for key, entry in entries.items():
        if not is_cron_run_session_key(key):
            continue
        updated = entry.get("updatedAt")
        value = updated if isinstance(updated, int | float) and not isinstance(updated, bool) else 0
        if value < cutoff:
            out.append(key)
    return out


@attrs.frozen(kw_only=True)
class CronSweepReport:
    """
    What :func:`sweep_cron_run_sessions` removed (or would remove, for a dry run).

    Attributes:
        pruned_keys: Removed run-session keys.
        archived: ``(transcript, archive name)`` pairs.
        deleted_archives: ``*.deleted.<stamp>`` archives older than the retention that were deleted.
        dry_run: Nothing was changed.
    """

    pruned_keys: tuple[str, ...]
    archived: tuple[tuple[str, str], ...]
    deleted_archives: tuple[str, ...]
    dry_run: bool


async def sweep_cron_run_sessions(
    store: Any,
    *,
    settings: CronSettings | None = None,
    now_ms: int | None = None,
    dry_run: bool = False,
    clock: Clock = SYSTEM_CLOCK,
) -> CronSweepReport:
    """
    Prune expired isolated cron run sessions of a :class:`~sessionkeeper.store.SessionStore` (the cron
    session reaper): entries go in one atomic store transaction, then their transcripts (when no kept
    entry shares them and no live process holds their lock) are archived as ``*.deleted.<stamp>``, and
    ``*.deleted`` archives older than the retention are deleted.

    Args:
        store: A :class:`~sessionkeeper.store.SessionStore` with a sessions directory.
        settings: Cron settings (default: 24 h retention).
        now_ms: Evaluation time (ms since epoch); default ``clock.now_ms()``.
        dry_run: Report only.
        clock: Time source.

    Returns:
        The sweep report (empty when retention is disabled).
    """
    settings = settings or CronSettings()
    now = clock.now_ms() if now_ms is None else int(now_ms)
    retention = settings.session_retention_ms
    sessions_dir: Path = store.sessions_dir
    if retention is None:
        return CronSweepReport(pruned_keys=(), archived=(), deleted_archives=(), dry_run=dry_run)

    def select(entries: dict[str, SessionEntry]) -> tuple[list[str], dict[str, Any], set[str]]:
        raw = {k: session_entry_to_dict(e) for k, e in entries.items()}
        keys = plan_cron_run_retention(raw, now_ms=now, retention_ms=retention)
        kept_ids = {e.get("sessionId") for k, e in raw.items() if k not in keys}
        return keys, {k: raw[k] for k in keys}, {i for i in kept_ids if isinstance(i, str)}

    if dry_run:
        keys, removed, kept_ids = select(await store.backend.load_all())
    else:

        def transact(working: dict[str, SessionEntry]) -> tuple[list[str], dict[str, Any], set[str]]:
            result = select(working)
            for key in result[0]:
                del working[key]
            return result

        keys, removed, kept_ids = await store.backend.transaction(transact)

    def files() -> tuple[list[tuple[str, str]], list[str]]:
        listing = list_store_files(sessions_dir)
        present = {f.name for f in listing}
        locked = held_transcript_locks(sessions_dir, listing)
        archived: list[tuple[str, str]] = []
        for entry in removed.values():
            sid = entry.get("sessionId")
            if not isinstance(sid, str) or sid in kept_ids:
                continue
            try:
                name = transcript_file_name(sid)
            except UnsafePathError:
                continue
            if name in present and name not in locked:
                target = archive_file_name(name, "deleted", now)
                if not dry_run:
                    (sessions_dir / name).rename(sessions_dir / target)
                present.discard(name)
                present.add(target)
                archived.append((name, target))
        deleted: list[str] = []
        for name in sorted(present):
            stamp = archive_timestamp_ms(name, "deleted")
            if stamp is not None and now - stamp > retention:
                if not dry_run:
                    (sessions_dir / name).unlink(missing_ok=True)
                deleted.append(name)
        return archived, deleted

    archived, deleted = await anyio.to_thread.run_sync(files)
    return CronSweepReport(
        pruned_keys=tuple(keys), archived=tuple(archived), deleted_archives=tuple(deleted), dry_run=dry_run
    )


def sanitize_fresh_cron_entry(entry: Mapping[str, Any], *, preserve_ambient_context: bool) -> dict[str, Any]:
    """
    The part of a previous cron entry a fresh run keeps (``sanitizeFreshCronSessionEntry``).

    Always kept: ``heartbeatTaskState``, ``chatType``, the thinking/fast/verbose/trace/reasoning/TTS/usage
    toggles, ``pinnedAt``, ``label``, ``displayName``; model overrides unless auto-selected (source
    ``auto``, or an automatic-fallback provenance without a source); auth-profile overrides chosen by the
    user. Ambient context (elevation, group activation, send/queue policy, channel/group routing, origin,
    ACP binding) is kept only when ``preserve_ambient_context`` (a stale, not forced, rollover). Delivery
    fields and everything else are dropped.
    """
    out: dict[str, Any] = {}
    for field in (*_CARRIED, *(_AMBIENT if preserve_ambient_context else ())):
        if field in entry:
            out[field] = copy.deepcopy(entry[field])
    has_override = any(str(entry.get(f) or "").strip() for f in ("providerOverride", "modelOverride"))
    auto_fallback = (
        entry.get("modelOverrideSource") is None
        and has_override
        and bool(str(entry.get("modelOverrideFallbackOriginProvider") or "").strip())
        and bool(str(entry.get("modelOverrideFallbackOriginModel") or "").strip())
    )
    if entry.get("modelOverrideSource") != "auto" and not auto_fallback:
        if "modelOverride" in entry:
            out["modelOverride"] = entry["modelOverride"]
            if "agentRuntimeOverride" in entry:
                out["agentRuntimeOverride"] = entry["agentRuntimeOverride"]
        for field in ("providerOverride", "modelOverrideSource"):
            if field in entry:
                out[field] = entry[field]
    if entry.get("authProfileOverrideSource") == "user":
        for field in (
            "authProfileOverride",
            "authProfileOverrideSource",
            "authProfileOverrideCompactionCount",
        ):
            if field in entry:
                out[field] = entry[field]
    return out


@attrs.frozen(kw_only=True)
class CronSessionResolution:
    """
    The session entry an isolated cron run uses (``resolveCronSession``).

    Attributes:
        entry: The entry to write under the job's key (new ``sessionId`` when ``is_new``).
        is_new: A new session was started (forced, stale or missing).
        previous_session_id: The replaced session id, when one was replaced.
    """

    entry: SessionEntry
    is_new: bool
    previous_session_id: str | None


def resolve_cron_session(
    entry: SessionEntry | Mapping[str, Any] | None,
    *,
    now_ms: int,
    force_new: bool,
    policy: ResetPolicy | None = None,
    new_session_id: Callable[[], str] | None = None,
) -> CronSessionResolution:
    """
    Pick or roll the session of a cron job (``resolveCronSession``).

    ``force_new`` (an isolated run, ``sessionTarget: "isolated"``) always starts a new session from
    :func:`sanitize_fresh_cron_entry` without ambient context. Otherwise the entry is reused while fresh
    under the ``direct`` reset policy (a CLI-provider-owned session stays fresh unless a policy is
    configured), and a stale one rolls over keeping its ambient context.
    """
    policy = policy or ResetPolicy()
    current = session_entry_to_dict(entry) if isinstance(entry, SessionEntry) else dict(entry or {}) or None
    make_id = new_session_id or (lambda: str(uuid.uuid4()))
    reuse = False
    if not force_new and current is not None and current.get("sessionId"):
        effective = policy.resolve("direct")
        if has_provider_owned_session(current) and not effective.configured:
            reuse = True
        else:
            reuse = evaluate_freshness(
                updated_at=current.get("updatedAt"),
                session_started_at=current.get("sessionStartedAt"),
                last_interaction_at=current.get("lastInteractionAt"),
                now_ms=now_ms,
                policy=effective,
                zone=policy.zone,
            ).fresh
    if reuse and current is not None:
        out = {**current, "updatedAt": now_ms}
        return CronSessionResolution(
            entry=session_entry_from_dict(out), is_new=False, previous_session_id=None
        )
    base = sanitize_fresh_cron_entry(current, preserve_ambient_context=not force_new) if current else {}
    new = {**base, "sessionId": make_id(), "updatedAt": now_ms}
    new.update(sessionStartedAt=now_ms, lastInteractionAt=now_ms)
    previous = current.get("sessionId") if current else None
    return CronSessionResolution(
        entry=session_entry_from_dict(new),
        is_new=True,
        previous_session_id=previous if isinstance(previous, str) else None,
    )


def trim_cron_run_log(
    path: Path | str,
    *,
    keep_lines: int = DEFAULT_RUN_LOG_KEEP_LINES,
    max_bytes: int = DEFAULT_RUN_LOG_MAX_BYTES,
) -> int:
    """
    Trim a file-based cron run log (JSONL, one run per line) to its newest ``keep_lines`` lines within
    ``max_bytes``; the file is replaced atomically (0600) only when something is dropped.

    Returns:
        The number of lines dropped (0 when the file is missing or within limits).
    """
    target = Path(path)
    try:
        data = target.read_bytes()
    except FileNotFoundError:
        return 0
    lines = [line for line in data.splitlines(keepends=True) if line.strip()]
    keep = lines[-max(1, keep_lines) :]
    size = sum(len(line) for line in keep)
    while len(keep) > 1 and size > max_bytes:
        size -= len(keep[0])
        keep = keep[1:]
    dropped = len(lines) - len(keep)
    if dropped > 0:
        body = b"".join(keep)
        if body and not body.endswith(b"\n"):
            body += b"\n"
        atomic_write_bytes(target, body)
    return dropped
