"""
pi-compatible JSONL session transcripts: records, loading, context rebuild, token estimates.

See ``docs/transcripts.md`` and pi-format spec §1-12.
"""

from __future__ import annotations

from sessionkeeper._estimate import (
    ContextEstimate,
    calculate_context_tokens,
    estimate_context_tokens,
    estimate_tokens,
)
from sessionkeeper._lockfile import LockInspection, LockOwner, lock_path_for
from sessionkeeper.records import (
    CURRENT_SESSION_VERSION,
    AgentMessage,
    AssistantContent,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryEntry,
    BranchSummaryMessage,
    CompactionEntry,
    CompactionSummaryMessage,
    ContentBlock,
    Cost,
    CustomEntry,
    CustomMessage,
    CustomMessageEntry,
    ImageContent,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    SessionInfoEntry,
    StopReason,
    TextContent,
    ThinkingContent,
    ThinkingLevel,
    ThinkingLevelChangeEntry,
    ToolCall,
    ToolResultMessage,
    TranscriptEntry,
    UnknownEntry,
    UnknownMessage,
    Usage,
    UserContent,
    UserMessage,
    encode_entry,
    encode_message,
    entry_from_json,
    entry_to_builtins,
    message_from_json,
    message_to_builtins,
    utf16_len,
)
from sessionkeeper.transcript._context import (
    ModelRef,
    ProjectedEntry,
    SessionContext,
    build_context_from_path,
    build_session_context,
    project_path,
    walk_path,
)
from sessionkeeper.transcript._context import typed_entry_message as typed_entry_message  # compaction
from sessionkeeper.transcript._convert import (
    BRANCH_SUMMARY_PREFIX,
    BRANCH_SUMMARY_SUFFIX,
    COMPACTION_SUMMARY_PREFIX,
    COMPACTION_SUMMARY_SUFFIX,
    bash_execution_to_text,
    convert_to_llm,
)
from sessionkeeper.transcript._copy import copy_path, relink_kept_entries
from sessionkeeper.transcript._create import create_transcript_lines
from sessionkeeper.transcript._diagnostics import TornTail, TranscriptDiagnostics
from sessionkeeper.transcript._load import (
    TranscriptIndex,
    find_orphan_tool_results,
    load_transcript,
    load_transcript_bytes,
    scan_transcript,
)
from sessionkeeper.transcript._manager import Durability, TranscriptManager
from sessionkeeper.transcript._memory_storage import MemoryTranscriptStorage
from sessionkeeper.transcript._storage import (
    CompactionClaimStorage,
    StorageMark,
    TranscriptStorage,
    WriterClaim,
)
from sessionkeeper.transcript._storage import check_claim_timeout as check_claim_timeout  # for storages
from sessionkeeper.transcript._storage import check_lines as check_lines
from sessionkeeper.transcript._storage import check_session_id as check_session_id
from sessionkeeper.transcript._stream import LineBatchReader, iter_file_line_batches, iter_line_batches
from sessionkeeper.transcript._system import (
    PiGeneration,
    current_system_message,
    current_tools,
    detect_pi_generation,
)
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
    try_read_tail_context,
)
from sessionkeeper.transcript.file._tail_messages import aread_last_messages, read_last_messages
from sessionkeeper.transcript.file._tail_reader import read_header
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
    "CURRENT_SESSION_VERSION",
    "AgentMessage",
    "AssistantContent",
    "AssistantMessage",
    "BashExecutionMessage",
    "BranchSummaryEntry",
    "BranchSummaryMessage",
    "CompactionClaimStorage",
    "CompactionEntry",
    "CompactionSummaryMessage",
    "ContentBlock",
    "ContextEstimate",
    "ContextTokenEstimate",
    "Cost",
    "CustomEntry",
    "CustomMessage",
    "CustomMessageEntry",
    "Durability",
    "FileTranscriptStorage",
    "ImageContent",
    "IndexCacheStats",
    "LabelEntry",
    "LineBatchReader",
    "LockAcquisition",
    "LockInspection",
    "LockOwner",
    "MemoryTranscriptStorage",
    "MessageEntry",
    "ModelChangeEntry",
    "ModelRef",
    "PiGeneration",
    "ProjectedEntry",
    "SessionContext",
    "SessionHeader",
    "SessionInfoEntry",
    "SessionWriteLock",
    "StaleLockReport",
    "StopReason",
    "StorageMark",
    "TailContext",
    "TailRepair",
    "TextContent",
    "ThinkingContent",
    "ThinkingLevel",
    "ThinkingLevelChangeEntry",
    "ToolCall",
    "ToolResultMessage",
    "TornTail",
    "TranscriptDiagnostics",
    "TranscriptEntry",
    "TranscriptIndex",
    "TranscriptIndexCache",
    "TranscriptInfo",
    "TranscriptManager",
    "TranscriptStorage",
    "TreeNode",
    "UnknownEntry",
    "UnknownMessage",
    "Usage",
    "UserContent",
    "UserMessage",
    "WriteLockSettings",
    "WriterClaim",
    "alist_transcripts",
    "aread_last_messages",
    "aread_tail_context",
    "bash_execution_to_text",
    "build_context_from_path",
    "build_session_context",
    "build_tree",
    "calculate_context_tokens",
    "clean_stale_lock_files",
    "convert_to_llm",
    "copy_path",
    "create_transcript_lines",
    "current_system_message",
    "current_tools",
    "detect_pi_generation",
    "encode_entry",
    "encode_message",
    "entry_from_json",
    "entry_to_builtins",
    "estimate_context_tokens",
    "estimate_context_usage",
    "estimate_tokens",
    "find_orphan_tool_results",
    "is_locked",
    "iter_file_line_batches",
    "iter_line_batches",
    "list_transcripts",
    "load_transcript",
    "load_transcript_bytes",
    "lock_path_for",
    "message_from_json",
    "message_to_builtins",
    "project_path",
    "read_header",
    "read_last_messages",
    "read_lock_owner",
    "read_tail_context",
    "read_transcript_info",
    "relink_kept_entries",
    "run_locked",
    "scan_transcript",
    "shared_index_cache",
    "try_read_tail_context",
    "utf16_len",
    "walk_path",
)


from sessionkeeper._public import set_public_module


set_public_module(globals())
