"""
pi-compatible JSONL session transcripts: records, loading, context rebuild, token estimates.

See ``docs/transcripts.md`` and pi-format spec §1-12.
"""

from __future__ import annotations

from sessionkeeper._estimate import (
    ContextEstimate,
    calculate_context_tokens,
)
from sessionkeeper._estimate import estimate_context_tokens as estimate_context_tokens
from sessionkeeper._estimate import estimate_tokens as estimate_tokens
from sessionkeeper._lockfile import LockInspection, LockOwner, lock_path_for
from sessionkeeper.records import CURRENT_SESSION_VERSION as CURRENT_SESSION_VERSION
from sessionkeeper.records import AgentMessage as AgentMessage
from sessionkeeper.records import AssistantContent as AssistantContent
from sessionkeeper.records import AssistantMessage as AssistantMessage
from sessionkeeper.records import BashExecutionMessage as BashExecutionMessage
from sessionkeeper.records import BranchSummaryEntry as BranchSummaryEntry
from sessionkeeper.records import BranchSummaryMessage as BranchSummaryMessage
from sessionkeeper.records import CompactionEntry as CompactionEntry
from sessionkeeper.records import CompactionSummaryMessage as CompactionSummaryMessage
from sessionkeeper.records import ContentBlock as ContentBlock
from sessionkeeper.records import Cost as Cost
from sessionkeeper.records import CustomEntry as CustomEntry
from sessionkeeper.records import CustomMessage as CustomMessage
from sessionkeeper.records import CustomMessageEntry as CustomMessageEntry
from sessionkeeper.records import ImageContent as ImageContent
from sessionkeeper.records import LabelEntry as LabelEntry
from sessionkeeper.records import MessageEntry as MessageEntry
from sessionkeeper.records import ModelChangeEntry as ModelChangeEntry
from sessionkeeper.records import SessionHeader as SessionHeader
from sessionkeeper.records import SessionInfoEntry as SessionInfoEntry
from sessionkeeper.records import StopReason as StopReason
from sessionkeeper.records import TextContent as TextContent
from sessionkeeper.records import ThinkingContent as ThinkingContent
from sessionkeeper.records import ThinkingLevel as ThinkingLevel
from sessionkeeper.records import ThinkingLevelChangeEntry as ThinkingLevelChangeEntry
from sessionkeeper.records import ToolCall as ToolCall
from sessionkeeper.records import ToolResultMessage as ToolResultMessage
from sessionkeeper.records import TranscriptEntry as TranscriptEntry
from sessionkeeper.records import UnknownEntry as UnknownEntry
from sessionkeeper.records import UnknownMessage as UnknownMessage
from sessionkeeper.records import Usage as Usage
from sessionkeeper.records import UserContent as UserContent
from sessionkeeper.records import UserMessage as UserMessage
from sessionkeeper.records import encode_entry as encode_entry
from sessionkeeper.records import encode_message as encode_message
from sessionkeeper.records import entry_from_json as entry_from_json
from sessionkeeper.records import entry_to_builtins as entry_to_builtins
from sessionkeeper.records import message_from_json as message_from_json
from sessionkeeper.records import message_to_builtins as message_to_builtins
from sessionkeeper.records import utf16_len as utf16_len
from sessionkeeper.transcript._appends import message_entry_of as message_entry_of  # runtime
from sessionkeeper.transcript._context import (
    ModelRef,
    ProjectedEntry,
    SessionContext,
    build_session_context,
    project_path,
)
from sessionkeeper.transcript._context import build_context_from_path as build_context_from_path
from sessionkeeper.transcript._context import typed_entry_message as typed_entry_message  # compaction
from sessionkeeper.transcript._context import walk_path as walk_path
from sessionkeeper.transcript._convert import (
    BRANCH_SUMMARY_PREFIX,
    BRANCH_SUMMARY_SUFFIX,
    COMPACTION_SUMMARY_PREFIX,
    COMPACTION_SUMMARY_SUFFIX,
    convert_to_llm,
)
from sessionkeeper.transcript._convert import bash_execution_to_text as bash_execution_to_text
from sessionkeeper.transcript._copy import copy_path as copy_path
from sessionkeeper.transcript._copy import relink_kept_entries as relink_kept_entries
from sessionkeeper.transcript._create import create_transcript_lines
from sessionkeeper.transcript._diagnostics import TornTail, TranscriptDiagnostics
from sessionkeeper.transcript._load import (
    TranscriptIndex,
    load_transcript,
    load_transcript_bytes,
)
from sessionkeeper.transcript._manager import Durability, TranscriptManager
from sessionkeeper.transcript._memory_storage import MemoryTranscriptStorage
from sessionkeeper.transcript._orphans import find_orphan_tool_results as find_orphan_tool_results
from sessionkeeper.transcript._orphans import scan_transcript
from sessionkeeper.transcript._riders import AppendRider, RidingStorage
from sessionkeeper.transcript._storage import (
    ArchiveReason,
    ArchivingTranscriptStorage,
    CompactionClaimStorage,
    StorageMark,
    TranscriptArchive,
    TranscriptStorage,
    WriterClaim,
)
from sessionkeeper.transcript._storage import archive_stamp as archive_stamp  # for storages, the store
from sessionkeeper.transcript._storage import check_claim_timeout as check_claim_timeout  # for storages
from sessionkeeper.transcript._storage import check_lines as check_lines
from sessionkeeper.transcript._storage import check_session_id as check_session_id
from sessionkeeper.transcript._stream import (
    LineBatchReader,
    iter_line_batches,
)
from sessionkeeper.transcript._stream import iter_file_line_batches as iter_file_line_batches
from sessionkeeper.transcript._system import (
    PiGeneration,
    current_system_message,
    detect_pi_generation,
)
from sessionkeeper.transcript._system import current_tools as current_tools
from sessionkeeper.transcript._tree import TreeNode, build_tree
from sessionkeeper.transcript._usage_estimate import ContextTokenEstimate, estimate_context_usage
from sessionkeeper.transcript.file._index_cache import (
    IndexCacheStats,
    TranscriptIndexCache,
    shared_index_cache,
)
from sessionkeeper.transcript.file._io import TailRepair
from sessionkeeper.transcript.file._listing import (
    TranscriptInfo,
    alist_transcripts,
    list_transcripts,
    read_transcript_info,
)
from sessionkeeper.transcript.file._storage import FileTranscriptStorage
from sessionkeeper.transcript.file._tail import (
    TailContext,
    aread_tail_context,
    read_tail_context,
)
from sessionkeeper.transcript.file._tail import try_read_tail_context as try_read_tail_context
from sessionkeeper.transcript.file._tail_messages import aread_last_messages, read_last_messages
from sessionkeeper.transcript.file._tail_reader import read_header as read_header
from sessionkeeper.transcript.lock._lock import LockAcquisition, SessionWriteLock
from sessionkeeper.transcript.lock._run import run_locked
from sessionkeeper.transcript.lock._settings import WriteLockSettings
from sessionkeeper.transcript.lock._tools import (
    StaleLockReport,
    clean_stale_lock_files,
    is_locked,
    read_lock_owner,
)


__all__ = (
    "BRANCH_SUMMARY_PREFIX",
    "BRANCH_SUMMARY_SUFFIX",
    "COMPACTION_SUMMARY_PREFIX",
    "COMPACTION_SUMMARY_SUFFIX",
    "AppendRider",
    "ArchiveReason",
    "ArchivingTranscriptStorage",
    "CompactionClaimStorage",
    "ContextEstimate",
    "ContextTokenEstimate",
    "Durability",
    "FileTranscriptStorage",
    "IndexCacheStats",
    "LineBatchReader",
    "LockAcquisition",
    "LockInspection",
    "LockOwner",
    "MemoryTranscriptStorage",
    "ModelRef",
    "PiGeneration",
    "ProjectedEntry",
    "RidingStorage",
    "SessionContext",
    "SessionWriteLock",
    "StaleLockReport",
    "StorageMark",
    "TailContext",
    "TailRepair",
    "TornTail",
    "TranscriptArchive",
    "TranscriptDiagnostics",
    "TranscriptIndex",
    "TranscriptIndexCache",
    "TranscriptInfo",
    "TranscriptManager",
    "TranscriptStorage",
    "TreeNode",
    "WriteLockSettings",
    "WriterClaim",
    "alist_transcripts",
    "aread_last_messages",
    "aread_tail_context",
    "build_session_context",
    "build_tree",
    "calculate_context_tokens",
    "clean_stale_lock_files",
    "convert_to_llm",
    "create_transcript_lines",
    "current_system_message",
    "detect_pi_generation",
    "estimate_context_usage",
    "is_locked",
    "iter_line_batches",
    "list_transcripts",
    "load_transcript",
    "load_transcript_bytes",
    "lock_path_for",
    "project_path",
    "read_last_messages",
    "read_lock_owner",
    "read_tail_context",
    "read_transcript_info",
    "run_locked",
    "scan_transcript",
    "shared_index_cache",
)


from sessionkeeper._public import set_public_module


set_public_module(globals(), also=("sessionkeeper._estimate", "sessionkeeper._lockfile"))  # only exporter
