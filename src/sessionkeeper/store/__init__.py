"""
The session store: session key -> :class:`SessionEntry` (OpenClaw spec §1), with pluggable backends.

Public names are re-exported here; the modules inside are private.
"""

from __future__ import annotations

from sessionkeeper.store._backend import (
    EntryUpdater,
    LoadReport,
    StoreBackend,
    StoreTransaction,
    check_entry,
    diff_entries,
)
from sessionkeeper.store._entry import (
    ChatType,
    SessionEntry,
    SessionStatus,
    codex_thread_state,
    encode_session_entry,
    session_entry_from_dict,
    session_entry_to_dict,
)
from sessionkeeper.store._entry import codex_seconds_to_ms as codex_seconds_to_ms
from sessionkeeper.store._entry_merge import (
    merge_session_entry,
)
from sessionkeeper.store._entry_merge import (
    rewrite_session_file_for_new_session_id as rewrite_session_file_for_new_session_id,
)
from sessionkeeper.store._entry_rider import EntryRider
from sessionkeeper.store._entry_shape import is_safe_store_session_id as is_safe_store_session_id
from sessionkeeper.store._entry_shape import is_valid_transcript_session_id as is_valid_transcript_session_id
from sessionkeeper.store._entry_shape import normalize_persisted_entry as normalize_persisted_entry
from sessionkeeper.store._fork import ParentForkResult, apply_parent_fork, fork_transcript_lines
from sessionkeeper.store._fork_size import (
    PARENT_FORK_MAX_TOKENS,
    ParentForkDecision,
    TranscriptUsage,
    parent_fork_tokens,
)
from sessionkeeper.store._fork_size import decide_parent_fork as decide_parent_fork
from sessionkeeper.store._fork_size import read_transcript_usage as read_transcript_usage
from sessionkeeper.store._fork_size import usage_of_record as usage_of_record
from sessionkeeper.store._json import STORE_FILE_NAME, JsonFileStoreBackend
from sessionkeeper.store._jsontext import RawJsonValue
from sessionkeeper.store._keys import (
    DEFAULT_MAIN_KEY,
    GLOBAL_SESSION_KEY,
    DmScope,
    ParsedSessionKey,
    build_cron_run_session_key,
    build_cron_session_key,
    build_direct_session_key,
    build_group_session_key,
    build_heartbeat_session_key,
    build_hook_session_key,
    build_main_session_key,
    build_model_run_session_key,
    build_subagent_session_key,
    build_thread_session_key,
    build_topic_session_key,
    is_acp_session_key,
    is_cron_run_session_key,
    is_cron_session_key,
    is_external_group_session_key,
    is_main_session_key,
    is_model_run_session_key,
    is_protected_session_entry,
    is_subagent_session_key,
    is_synthetic_session_key,
    is_telegram_topic_session_key,
    normalize_main_key,
    normalize_session_key,
    parse_agent_session_key,
    parse_cron_run_job_id,
    parse_thread_suffix,
    transcript_file_name,
    validate_session_id,
)
from sessionkeeper.store._legacy_config import LEGACY_CONFIG_KEYS as LEGACY_CONFIG_KEYS
from sessionkeeper.store._legacy_config import (
    LegacyConfigKey,
    find_legacy_keys,
    migrate_legacy_config,
)
from sessionkeeper.store._memory import InMemoryStoreBackend
from sessionkeeper.store._paths import (
    DEFAULT_AGENT_ID,
    agent_sessions_dir,
    archive_name,
    check_session_file_owner,
    normalize_agent_id,
    refused_session_files,
    resolve_session_file,
    transcript_path,
)
from sessionkeeper.store._paths import archive_stamp as archive_stamp
from sessionkeeper.store._paths import encode_thread_id as encode_thread_id
from sessionkeeper.store._paths import is_store_file_name as is_store_file_name
from sessionkeeper.store._postgres import POSTGRES_SCHEMA_VERSION as POSTGRES_SCHEMA_VERSION
from sessionkeeper.store._postgres import (
    PostgresStoreBackend,
)
from sessionkeeper.store._postgres_transcript_reads import LiveTranscriptLines
from sessionkeeper.store._postgres_transcripts import PostgresTranscriptStorage
from sessionkeeper.store._redis import RedisStoreBackend
from sessionkeeper.store._remote import (
    RevisionedEntry,
)
from sessionkeeper.store._remote import redact_url as redact_url
from sessionkeeper.store._reset import (
    Freshness,
    ResetContext,
    SessionEvent,
    SessionResolution,
    daily_reset_at_ms,
    evaluate_freshness,
    match_reset_trigger,
    resolve_reset_type,
    resolve_session,
)
from sessionkeeper.store._reset import has_provider_owned_session as has_provider_owned_session
from sessionkeeper.store._reset_policy import EffectiveResetPolicy, ResetPolicy, ResetRule
from sessionkeeper.store._sqlite import SQLITE_FILE_NAME as SQLITE_FILE_NAME
from sessionkeeper.store._sqlite import (
    SqliteStoreBackend,
)
from sessionkeeper.store._store import RESET_CLEARED_FIELDS as RESET_CLEARED_FIELDS
from sessionkeeper.store._store import (
    BackendName,
    SessionStore,
)
from sessionkeeper.store._store import resolve_store_location as resolve_store_location
from sessionkeeper.store._transfer import (
    CopiedSession,
    CopyOutcome,
    CopyReport,
    copy_sessions,
)
from sessionkeeper.store._transfer import target_entry as target_entry
from sessionkeeper.store._urls import is_store_url as is_store_url
from sessionkeeper.store.maintenance import CronSessionResolution as CronSessionResolution
from sessionkeeper.store.maintenance import CronSettings as CronSettings
from sessionkeeper.store.maintenance import CronSweepReport as CronSweepReport
from sessionkeeper.store.maintenance import DiskBudgetReport as DiskBudgetReport
from sessionkeeper.store.maintenance import EntryRemoval as EntryRemoval
from sessionkeeper.store.maintenance import FileAction as FileAction
from sessionkeeper.store.maintenance import MaintenanceMode as MaintenanceMode
from sessionkeeper.store.maintenance import MaintenancePlan as MaintenancePlan
from sessionkeeper.store.maintenance import (
    MaintenanceReport,
    MaintenanceSettings,
    run_maintenance,
)
from sessionkeeper.store.maintenance import StoreFile as StoreFile
from sessionkeeper.store.maintenance import UnreferencedArtifactsReport as UnreferencedArtifactsReport
from sessionkeeper.store.maintenance import entry_high_water as entry_high_water
from sessionkeeper.store.maintenance import find_unreferenced_transcripts as find_unreferenced_transcripts
from sessionkeeper.store.maintenance import plan_cron_run_retention as plan_cron_run_retention
from sessionkeeper.store.maintenance import plan_maintenance as plan_maintenance
from sessionkeeper.store.maintenance import resolve_cron_session as resolve_cron_session
from sessionkeeper.store.maintenance import sanitize_fresh_cron_entry as sanitize_fresh_cron_entry
from sessionkeeper.store.maintenance import sweep_cron_run_sessions as sweep_cron_run_sessions
from sessionkeeper.store.maintenance import trim_cron_run_log as trim_cron_run_log
from sessionkeeper.store.maintenance._report import serialize_store as serialize_store


__all__ = (
    "DEFAULT_AGENT_ID",
    "DEFAULT_MAIN_KEY",
    "GLOBAL_SESSION_KEY",
    "PARENT_FORK_MAX_TOKENS",
    "STORE_FILE_NAME",
    "BackendName",
    "ChatType",
    "CopiedSession",
    "CopyOutcome",
    "CopyReport",
    "DmScope",
    "EffectiveResetPolicy",
    "EntryRider",
    "EntryUpdater",
    "Freshness",
    "InMemoryStoreBackend",
    "JsonFileStoreBackend",
    "LegacyConfigKey",
    "LiveTranscriptLines",
    "LoadReport",
    "MaintenanceReport",
    "MaintenanceSettings",
    "ParentForkDecision",
    "ParentForkResult",
    "ParsedSessionKey",
    "PostgresStoreBackend",
    "PostgresTranscriptStorage",
    "RawJsonValue",
    "RedisStoreBackend",
    "ResetContext",
    "ResetPolicy",
    "ResetRule",
    "RevisionedEntry",
    "SessionEntry",
    "SessionEvent",
    "SessionResolution",
    "SessionStatus",
    "SessionStore",
    "SqliteStoreBackend",
    "StoreBackend",
    "StoreTransaction",
    "TranscriptUsage",
    "agent_sessions_dir",
    "apply_parent_fork",
    "archive_name",
    "build_cron_run_session_key",
    "build_cron_session_key",
    "build_direct_session_key",
    "build_group_session_key",
    "build_heartbeat_session_key",
    "build_hook_session_key",
    "build_main_session_key",
    "build_model_run_session_key",
    "build_subagent_session_key",
    "build_thread_session_key",
    "build_topic_session_key",
    "check_entry",
    "check_session_file_owner",
    "codex_thread_state",
    "copy_sessions",
    "daily_reset_at_ms",
    "diff_entries",
    "encode_session_entry",
    "evaluate_freshness",
    "find_legacy_keys",
    "fork_transcript_lines",
    "is_acp_session_key",
    "is_cron_run_session_key",
    "is_cron_session_key",
    "is_external_group_session_key",
    "is_main_session_key",
    "is_model_run_session_key",
    "is_protected_session_entry",
    "is_subagent_session_key",
    "is_synthetic_session_key",
    "is_telegram_topic_session_key",
    "match_reset_trigger",
    "merge_session_entry",
    "migrate_legacy_config",
    "normalize_agent_id",
    "normalize_main_key",
    "normalize_session_key",
    "parent_fork_tokens",
    "parse_agent_session_key",
    "parse_cron_run_job_id",
    "parse_thread_suffix",
    "refused_session_files",
    "resolve_reset_type",
    "resolve_session",
    "resolve_session_file",
    "run_maintenance",
    "session_entry_from_dict",
    "session_entry_to_dict",
    "transcript_file_name",
    "transcript_path",
    "validate_session_id",
)


from sessionkeeper._public import set_public_module


set_public_module(globals())
