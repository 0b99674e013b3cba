"""
pi-compatible JSONL session transcripts: records, loading, context rebuild, token estimates.

See ``docs/transcripts.md`` and pi-format spec §1-12.
"""

from __future__ import annotations

from sessionkeeper.transcript._codec import (
    encode_entry,
    encode_message,
    entry_from_json,
    entry_to_builtins,
    message_from_json,
    message_to_builtins,
)
from sessionkeeper.transcript._context import (
    ModelRef,
    SessionContext,
    build_context_from_path,
    build_session_context,
    walk_path,
)
from sessionkeeper.transcript._convert import (
    BRANCH_SUMMARY_PREFIX,
    BRANCH_SUMMARY_SUFFIX,
    COMPACTION_SUMMARY_PREFIX,
    COMPACTION_SUMMARY_SUFFIX,
    bash_execution_to_text,
    convert_to_llm,
)
from sessionkeeper.transcript._diagnostics import TornTail, TranscriptDiagnostics
from sessionkeeper.transcript._entries import (
    CURRENT_SESSION_VERSION,
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    SessionInfoEntry,
    ThinkingLevel,
    ThinkingLevelChangeEntry,
    TranscriptEntry,
    UnknownEntry,
)
from sessionkeeper.transcript._estimate import (
    ContextEstimate,
    calculate_context_tokens,
    estimate_context_tokens,
    estimate_tokens,
    utf16_len,
)
from sessionkeeper.transcript._index_cache import (
    IndexCacheStats,
    TranscriptIndexCache,
    shared_index_cache,
)
from sessionkeeper.transcript._io import TailRepair
from sessionkeeper.transcript._listing import (
    TranscriptInfo,
    alist_transcripts,
    list_transcripts,
    read_transcript_info,
)
from sessionkeeper.transcript._load import (
    TranscriptIndex,
    find_orphan_tool_results,
    load_transcript,
    load_transcript_bytes,
    scan_transcript,
)
from sessionkeeper.transcript._lock import LockAcquisition, SessionWriteLock, run_locked
from sessionkeeper.transcript._lock_inspect import LockInspection, LockOwner, lock_path_for
from sessionkeeper.transcript._lock_settings import WriteLockSettings
from sessionkeeper.transcript._lock_tools import (
    StaleLockReport,
    clean_stale_lock_files,
    is_locked,
    read_lock_owner,
)
from sessionkeeper.transcript._manager import Durability, TranscriptManager
from sessionkeeper.transcript._messages import (
    AgentMessage,
    AssistantContent,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    ContentBlock,
    Cost,
    CustomMessage,
    ImageContent,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    Usage,
    UserContent,
    UserMessage,
)
from sessionkeeper.transcript._tail import (
    TailContext,
    aread_last_messages,
    aread_tail_context,
    read_last_messages,
    read_tail_context,
    try_read_tail_context,
)
from sessionkeeper.transcript._tree import TreeNode, build_tree


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
    "CompactionEntry",
    "CompactionSummaryMessage",
    "ContentBlock",
    "ContextEstimate",
    "Cost",
    "CustomEntry",
    "CustomMessage",
    "CustomMessageEntry",
    "Durability",
    "ImageContent",
    "IndexCacheStats",
    "LabelEntry",
    "LockAcquisition",
    "LockInspection",
    "LockOwner",
    "MessageEntry",
    "ModelChangeEntry",
    "ModelRef",
    "SessionContext",
    "SessionHeader",
    "SessionInfoEntry",
    "SessionWriteLock",
    "StaleLockReport",
    "StopReason",
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
    "TreeNode",
    "UnknownEntry",
    "UnknownMessage",
    "Usage",
    "UserContent",
    "UserMessage",
    "WriteLockSettings",
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
    "encode_entry",
    "encode_message",
    "entry_from_json",
    "entry_to_builtins",
    "estimate_context_tokens",
    "estimate_tokens",
    "find_orphan_tool_results",
    "is_locked",
    "list_transcripts",
    "load_transcript",
    "load_transcript_bytes",
    "lock_path_for",
    "message_from_json",
    "message_to_builtins",
    "read_last_messages",
    "read_lock_owner",
    "read_tail_context",
    "read_transcript_info",
    "run_locked",
    "scan_transcript",
    "shared_index_cache",
    "try_read_tail_context",
    "utf16_len",
    "walk_path",
)
