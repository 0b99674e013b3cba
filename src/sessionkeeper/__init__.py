"""
sessionkeeper: the session layer for LLM agent runtimes.

Which conversation this is (session key -> :class:`SessionEntry` in a :class:`SessionStore`), what was said
(append-only JSONL transcripts shaped as a tree of entries, file-compatible with pi 0.73.1:
:class:`TranscriptManager`), and how the history keeps fitting the model's context window (compaction:
:class:`Compactor`; pruning: :class:`Pruner`; memory flush: :class:`MemoryFlushPolicy`; silent replies:
:func:`is_silent_reply`), tied together for an agent loop by :class:`SessionRuntime`.

The main names are re-exported here and imported lazily on first use, so ``import sessionkeeper`` stays
cheap. Every subpackage (``sessionkeeper.transcript``, ``.store``, ``.compaction``, ``.pruning``,
``.runtime``, ``.testing``) re-exports its full public surface; ``sessionkeeper.hooks`` has every hook event.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sessionkeeper import exceptions as exceptions
from sessionkeeper.exceptions import SessionKeeperError as SessionKeeperError


if TYPE_CHECKING:
    from sessionkeeper._clock import SYSTEM_CLOCK as SYSTEM_CLOCK
    from sessionkeeper._clock import Clock as Clock
    from sessionkeeper._clock import SystemClock as SystemClock
    from sessionkeeper._config import Config as Config
    from sessionkeeper._config import load_config as load_config
    from sessionkeeper._hooks import CompactHookResult as CompactHookResult
    from sessionkeeper._hooks import CompactionEndEvent as CompactionEndEvent
    from sessionkeeper._hooks import CompactionHookOverride as CompactionHookOverride
    from sessionkeeper._hooks import CompactionStartEvent as CompactionStartEvent
    from sessionkeeper._hooks import ContextEvent as ContextEvent
    from sessionkeeper._hooks import HookEvent as HookEvent
    from sessionkeeper._hooks import HookRegistry as HookRegistry
    from sessionkeeper._hooks import MemoryFlushEndEvent as MemoryFlushEndEvent
    from sessionkeeper._hooks import MemoryFlushStartEvent as MemoryFlushStartEvent
    from sessionkeeper._hooks import MessageEndEvent as MessageEndEvent
    from sessionkeeper._hooks import SessionBeforeCompactEvent as SessionBeforeCompactEvent
    from sessionkeeper._hooks import SessionBeforeForkEvent as SessionBeforeForkEvent
    from sessionkeeper._hooks import SessionBeforeSwitchEvent as SessionBeforeSwitchEvent
    from sessionkeeper._hooks import SessionBeforeTreeEvent as SessionBeforeTreeEvent
    from sessionkeeper._hooks import SessionCompactEvent as SessionCompactEvent
    from sessionkeeper._hooks import SessionShutdownEvent as SessionShutdownEvent
    from sessionkeeper._hooks import SessionStartEvent as SessionStartEvent
    from sessionkeeper._hooks import SessionTreeEvent as SessionTreeEvent
    from sessionkeeper._model_client import ModelClient as ModelClient
    from sessionkeeper._model_client import ModelRequest as ModelRequest
    from sessionkeeper._model_client import ModelResponse as ModelResponse
    from sessionkeeper._silent import SILENT_REPLY_TOKEN as SILENT_REPLY_TOKEN
    from sessionkeeper._silent import is_silent_reply as is_silent_reply
    from sessionkeeper._silent import is_silent_reply_payload as is_silent_reply_payload
    from sessionkeeper._silent_stream import SilentReplyStreamFilter as SilentReplyStreamFilter
    from sessionkeeper._silent_stream import filter_silent_stream as filter_silent_stream
    from sessionkeeper._tokens import EstimateTokenCounter as EstimateTokenCounter
    from sessionkeeper._tokens import TiktokenCounter as TiktokenCounter
    from sessionkeeper._tokens import TokenCounter as TokenCounter
    from sessionkeeper._version import __version__ as __version__
    from sessionkeeper.compaction import CompactionPreparation as CompactionPreparation
    from sessionkeeper.compaction import CompactionProvider as CompactionProvider
    from sessionkeeper.compaction import CompactionProviderRegistry as CompactionProviderRegistry
    from sessionkeeper.compaction import CompactionResult as CompactionResult
    from sessionkeeper.compaction import CompactionSettings as CompactionSettings
    from sessionkeeper.compaction import Compactor as Compactor
    from sessionkeeper.compaction import effective_reserve_tokens as effective_reserve_tokens
    from sessionkeeper.compaction import find_cut_point as find_cut_point
    from sessionkeeper.compaction import prepare_compaction as prepare_compaction
    from sessionkeeper.compaction import should_compact as should_compact
    from sessionkeeper.pruning import Pruner as Pruner
    from sessionkeeper.pruning import PruneResult as PruneResult
    from sessionkeeper.pruning import PruningSettings as PruningSettings
    from sessionkeeper.pruning import ReplayPolicy as ReplayPolicy
    from sessionkeeper.pruning import resolve_replay_policy as resolve_replay_policy
    from sessionkeeper.pruning import sanitize_replay_history as sanitize_replay_history
    from sessionkeeper.runtime import MemoryFlushPolicy as MemoryFlushPolicy
    from sessionkeeper.runtime import MemoryFlushSettings as MemoryFlushSettings
    from sessionkeeper.runtime import ModelCallPlan as ModelCallPlan
    from sessionkeeper.runtime import ModelInfo as ModelInfo
    from sessionkeeper.runtime import RecoveryOutcome as RecoveryOutcome
    from sessionkeeper.runtime import RuntimeSession as RuntimeSession
    from sessionkeeper.runtime import RuntimeSettings as RuntimeSettings
    from sessionkeeper.runtime import SessionRuntime as SessionRuntime
    from sessionkeeper.runtime import TurnOutcome as TurnOutcome
    from sessionkeeper.runtime import is_context_overflow as is_context_overflow
    from sessionkeeper.runtime import resolve_context_window as resolve_context_window
    from sessionkeeper.store import InMemoryStoreBackend as InMemoryStoreBackend
    from sessionkeeper.store import JsonFileStoreBackend as JsonFileStoreBackend
    from sessionkeeper.store import MaintenanceReport as MaintenanceReport
    from sessionkeeper.store import MaintenanceSettings as MaintenanceSettings
    from sessionkeeper.store import ResetPolicy as ResetPolicy
    from sessionkeeper.store import SessionEntry as SessionEntry
    from sessionkeeper.store import SessionResolution as SessionResolution
    from sessionkeeper.store import SessionStore as SessionStore
    from sessionkeeper.store import SqliteStoreBackend as SqliteStoreBackend
    from sessionkeeper.store import StoreBackend as StoreBackend
    from sessionkeeper.store import apply_parent_fork as apply_parent_fork
    from sessionkeeper.store import build_cron_session_key as build_cron_session_key
    from sessionkeeper.store import build_direct_session_key as build_direct_session_key
    from sessionkeeper.store import build_group_session_key as build_group_session_key
    from sessionkeeper.store import build_main_session_key as build_main_session_key
    from sessionkeeper.store import build_thread_session_key as build_thread_session_key
    from sessionkeeper.store import merge_session_entry as merge_session_entry
    from sessionkeeper.store import normalize_session_key as normalize_session_key
    from sessionkeeper.store import parse_agent_session_key as parse_agent_session_key
    from sessionkeeper.store import resolve_session as resolve_session
    from sessionkeeper.store import run_maintenance as run_maintenance
    from sessionkeeper.transcript import AgentMessage as AgentMessage
    from sessionkeeper.transcript import AssistantMessage as AssistantMessage
    from sessionkeeper.transcript import BashExecutionMessage as BashExecutionMessage
    from sessionkeeper.transcript import BranchSummaryEntry as BranchSummaryEntry
    from sessionkeeper.transcript import BranchSummaryMessage as BranchSummaryMessage
    from sessionkeeper.transcript import CompactionEntry as CompactionEntry
    from sessionkeeper.transcript import CompactionSummaryMessage as CompactionSummaryMessage
    from sessionkeeper.transcript import Cost as Cost
    from sessionkeeper.transcript import CustomEntry as CustomEntry
    from sessionkeeper.transcript import CustomMessage as CustomMessage
    from sessionkeeper.transcript import CustomMessageEntry as CustomMessageEntry
    from sessionkeeper.transcript import ImageContent as ImageContent
    from sessionkeeper.transcript import LabelEntry as LabelEntry
    from sessionkeeper.transcript import MessageEntry as MessageEntry
    from sessionkeeper.transcript import ModelChangeEntry as ModelChangeEntry
    from sessionkeeper.transcript import ModelRef as ModelRef
    from sessionkeeper.transcript import SessionContext as SessionContext
    from sessionkeeper.transcript import SessionHeader as SessionHeader
    from sessionkeeper.transcript import SessionInfoEntry as SessionInfoEntry
    from sessionkeeper.transcript import SessionWriteLock as SessionWriteLock
    from sessionkeeper.transcript import TextContent as TextContent
    from sessionkeeper.transcript import ThinkingContent as ThinkingContent
    from sessionkeeper.transcript import ThinkingLevelChangeEntry as ThinkingLevelChangeEntry
    from sessionkeeper.transcript import ToolCall as ToolCall
    from sessionkeeper.transcript import ToolResultMessage as ToolResultMessage
    from sessionkeeper.transcript import TranscriptDiagnostics as TranscriptDiagnostics
    from sessionkeeper.transcript import TranscriptEntry as TranscriptEntry
    from sessionkeeper.transcript import TranscriptInfo as TranscriptInfo
    from sessionkeeper.transcript import TranscriptManager as TranscriptManager
    from sessionkeeper.transcript import UnknownEntry as UnknownEntry
    from sessionkeeper.transcript import UnknownMessage as UnknownMessage
    from sessionkeeper.transcript import Usage as Usage
    from sessionkeeper.transcript import UserMessage as UserMessage
    from sessionkeeper.transcript import WriteLockSettings as WriteLockSettings
    from sessionkeeper.transcript import build_session_context as build_session_context
    from sessionkeeper.transcript import convert_to_llm as convert_to_llm
    from sessionkeeper.transcript import estimate_context_tokens as estimate_context_tokens
    from sessionkeeper.transcript import estimate_tokens as estimate_tokens
    from sessionkeeper.transcript import list_transcripts as list_transcripts
    from sessionkeeper.transcript import load_transcript as load_transcript
    from sessionkeeper.transcript import read_last_messages as read_last_messages
    from sessionkeeper.transcript import read_tail_context as read_tail_context
    from sessionkeeper.transcript import scan_transcript as scan_transcript
    from sessionkeeper.transcript import shared_index_cache as shared_index_cache


_LAZY: dict[str, str] = {
    "__version__": "sessionkeeper._version",  # a constant module: no importlib.metadata at import (issue 11)
    "apply_parent_fork": "sessionkeeper.store",
    "shared_index_cache": "sessionkeeper.transcript",
    "TranscriptInfo": "sessionkeeper.transcript",
    "list_transcripts": "sessionkeeper.transcript",
    "read_last_messages": "sessionkeeper.transcript",
    "read_tail_context": "sessionkeeper.transcript",
    "Clock": "sessionkeeper._clock",
    "SystemClock": "sessionkeeper._clock",
    "SYSTEM_CLOCK": "sessionkeeper._clock",
    "Config": "sessionkeeper._config",
    "load_config": "sessionkeeper._config",
    "HookRegistry": "sessionkeeper._hooks",
    "HookEvent": "sessionkeeper._hooks",
    "SessionBeforeCompactEvent": "sessionkeeper._hooks",
    "SessionCompactEvent": "sessionkeeper._hooks",
    "SessionBeforeTreeEvent": "sessionkeeper._hooks",
    "SessionTreeEvent": "sessionkeeper._hooks",
    "SessionStartEvent": "sessionkeeper._hooks",
    "SessionShutdownEvent": "sessionkeeper._hooks",
    "SessionBeforeSwitchEvent": "sessionkeeper._hooks",
    "SessionBeforeForkEvent": "sessionkeeper._hooks",
    "ContextEvent": "sessionkeeper._hooks",
    "MessageEndEvent": "sessionkeeper._hooks",
    "CompactionStartEvent": "sessionkeeper._hooks",
    "CompactionEndEvent": "sessionkeeper._hooks",
    "MemoryFlushStartEvent": "sessionkeeper._hooks",
    "MemoryFlushEndEvent": "sessionkeeper._hooks",
    "CompactHookResult": "sessionkeeper._hooks",
    "CompactionHookOverride": "sessionkeeper._hooks",
    "ModelClient": "sessionkeeper._model_client",
    "ModelRequest": "sessionkeeper._model_client",
    "ModelResponse": "sessionkeeper._model_client",
    "TokenCounter": "sessionkeeper._tokens",
    "EstimateTokenCounter": "sessionkeeper._tokens",
    "TiktokenCounter": "sessionkeeper._tokens",
    "SILENT_REPLY_TOKEN": "sessionkeeper._silent",
    "is_silent_reply": "sessionkeeper._silent",
    "is_silent_reply_payload": "sessionkeeper._silent",
    "SilentReplyStreamFilter": "sessionkeeper._silent_stream",
    "filter_silent_stream": "sessionkeeper._silent_stream",
    "TranscriptManager": "sessionkeeper.transcript",
    "SessionHeader": "sessionkeeper.transcript",
    "TranscriptEntry": "sessionkeeper.transcript",
    "MessageEntry": "sessionkeeper.transcript",
    "ThinkingLevelChangeEntry": "sessionkeeper.transcript",
    "ModelChangeEntry": "sessionkeeper.transcript",
    "CompactionEntry": "sessionkeeper.transcript",
    "BranchSummaryEntry": "sessionkeeper.transcript",
    "CustomEntry": "sessionkeeper.transcript",
    "CustomMessageEntry": "sessionkeeper.transcript",
    "LabelEntry": "sessionkeeper.transcript",
    "SessionInfoEntry": "sessionkeeper.transcript",
    "UnknownEntry": "sessionkeeper.transcript",
    "AgentMessage": "sessionkeeper.transcript",
    "UserMessage": "sessionkeeper.transcript",
    "AssistantMessage": "sessionkeeper.transcript",
    "ToolResultMessage": "sessionkeeper.transcript",
    "BashExecutionMessage": "sessionkeeper.transcript",
    "CustomMessage": "sessionkeeper.transcript",
    "BranchSummaryMessage": "sessionkeeper.transcript",
    "CompactionSummaryMessage": "sessionkeeper.transcript",
    "UnknownMessage": "sessionkeeper.transcript",
    "TextContent": "sessionkeeper.transcript",
    "ThinkingContent": "sessionkeeper.transcript",
    "ImageContent": "sessionkeeper.transcript",
    "ToolCall": "sessionkeeper.transcript",
    "Usage": "sessionkeeper.transcript",
    "Cost": "sessionkeeper.transcript",
    "SessionContext": "sessionkeeper.transcript",
    "ModelRef": "sessionkeeper.transcript",
    "build_session_context": "sessionkeeper.transcript",
    "convert_to_llm": "sessionkeeper.transcript",
    "estimate_tokens": "sessionkeeper.transcript",
    "estimate_context_tokens": "sessionkeeper.transcript",
    "load_transcript": "sessionkeeper.transcript",
    "scan_transcript": "sessionkeeper.transcript",
    "TranscriptDiagnostics": "sessionkeeper.transcript",
    "SessionWriteLock": "sessionkeeper.transcript",
    "WriteLockSettings": "sessionkeeper.transcript",
    "SessionStore": "sessionkeeper.store",
    "SessionEntry": "sessionkeeper.store",
    "StoreBackend": "sessionkeeper.store",
    "InMemoryStoreBackend": "sessionkeeper.store",
    "JsonFileStoreBackend": "sessionkeeper.store",
    "SqliteStoreBackend": "sessionkeeper.store",
    "merge_session_entry": "sessionkeeper.store",
    "MaintenanceSettings": "sessionkeeper.store",
    "MaintenanceReport": "sessionkeeper.store",
    "run_maintenance": "sessionkeeper.store",
    "ResetPolicy": "sessionkeeper.store",
    "resolve_session": "sessionkeeper.store",
    "SessionResolution": "sessionkeeper.store",
    "build_main_session_key": "sessionkeeper.store",
    "build_direct_session_key": "sessionkeeper.store",
    "build_group_session_key": "sessionkeeper.store",
    "build_thread_session_key": "sessionkeeper.store",
    "build_cron_session_key": "sessionkeeper.store",
    "parse_agent_session_key": "sessionkeeper.store",
    "normalize_session_key": "sessionkeeper.store",
    "Compactor": "sessionkeeper.compaction",
    "CompactionSettings": "sessionkeeper.compaction",
    "CompactionPreparation": "sessionkeeper.compaction",
    "CompactionResult": "sessionkeeper.compaction",
    "find_cut_point": "sessionkeeper.compaction",
    "prepare_compaction": "sessionkeeper.compaction",
    "should_compact": "sessionkeeper.compaction",
    "effective_reserve_tokens": "sessionkeeper.compaction",
    "CompactionProvider": "sessionkeeper.compaction",
    "CompactionProviderRegistry": "sessionkeeper.compaction",
    "Pruner": "sessionkeeper.pruning",
    "PruningSettings": "sessionkeeper.pruning",
    "PruneResult": "sessionkeeper.pruning",
    "sanitize_replay_history": "sessionkeeper.pruning",
    "resolve_replay_policy": "sessionkeeper.pruning",
    "ReplayPolicy": "sessionkeeper.pruning",
    "SessionRuntime": "sessionkeeper.runtime",
    "RuntimeSession": "sessionkeeper.runtime",
    "RuntimeSettings": "sessionkeeper.runtime",
    "ModelInfo": "sessionkeeper.runtime",
    "ModelCallPlan": "sessionkeeper.runtime",
    "TurnOutcome": "sessionkeeper.runtime",
    "RecoveryOutcome": "sessionkeeper.runtime",
    "MemoryFlushPolicy": "sessionkeeper.runtime",
    "MemoryFlushSettings": "sessionkeeper.runtime",
    "is_context_overflow": "sessionkeeper.runtime",
    "resolve_context_window": "sessionkeeper.runtime",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sessionkeeper' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = (
    "SILENT_REPLY_TOKEN",
    "SYSTEM_CLOCK",
    "AgentMessage",
    "AssistantMessage",
    "BashExecutionMessage",
    "BranchSummaryEntry",
    "BranchSummaryMessage",
    "Clock",
    "CompactHookResult",
    "CompactionEndEvent",
    "CompactionEntry",
    "CompactionHookOverride",
    "CompactionPreparation",
    "CompactionProvider",
    "CompactionProviderRegistry",
    "CompactionResult",
    "CompactionSettings",
    "CompactionStartEvent",
    "CompactionSummaryMessage",
    "Compactor",
    "Config",
    "ContextEvent",
    "Cost",
    "CustomEntry",
    "CustomMessage",
    "CustomMessageEntry",
    "EstimateTokenCounter",
    "HookEvent",
    "HookRegistry",
    "ImageContent",
    "InMemoryStoreBackend",
    "JsonFileStoreBackend",
    "LabelEntry",
    "MaintenanceReport",
    "MaintenanceSettings",
    "MemoryFlushEndEvent",
    "MemoryFlushPolicy",
    "MemoryFlushSettings",
    "MemoryFlushStartEvent",
    "MessageEndEvent",
    "MessageEntry",
    "ModelCallPlan",
    "ModelChangeEntry",
    "ModelClient",
    "ModelInfo",
    "ModelRef",
    "ModelRequest",
    "ModelResponse",
    "PruneResult",
    "Pruner",
    "PruningSettings",
    "RecoveryOutcome",
    "ReplayPolicy",
    "ResetPolicy",
    "RuntimeSession",
    "RuntimeSettings",
    "SessionBeforeCompactEvent",
    "SessionBeforeForkEvent",
    "SessionBeforeSwitchEvent",
    "SessionBeforeTreeEvent",
    "SessionCompactEvent",
    "SessionContext",
    "SessionEntry",
    "SessionHeader",
    "SessionInfoEntry",
    "SessionKeeperError",
    "SessionResolution",
    "SessionRuntime",
    "SessionShutdownEvent",
    "SessionStartEvent",
    "SessionStore",
    "SessionTreeEvent",
    "SessionWriteLock",
    "SilentReplyStreamFilter",
    "SqliteStoreBackend",
    "StoreBackend",
    "SystemClock",
    "TextContent",
    "ThinkingContent",
    "ThinkingLevelChangeEntry",
    "TiktokenCounter",
    "TokenCounter",
    "ToolCall",
    "ToolResultMessage",
    "TranscriptDiagnostics",
    "TranscriptEntry",
    "TranscriptInfo",
    "TranscriptManager",
    "TurnOutcome",
    "UnknownEntry",
    "UnknownMessage",
    "Usage",
    "UserMessage",
    "WriteLockSettings",
    "__version__",
    "apply_parent_fork",
    "build_cron_session_key",
    "build_direct_session_key",
    "build_group_session_key",
    "build_main_session_key",
    "build_session_context",
    "build_thread_session_key",
    "convert_to_llm",
    "effective_reserve_tokens",
    "estimate_context_tokens",
    "estimate_tokens",
    "exceptions",
    "filter_silent_stream",
    "find_cut_point",
    "is_context_overflow",
    "is_silent_reply",
    "is_silent_reply_payload",
    "list_transcripts",
    "load_config",
    "load_transcript",
    "merge_session_entry",
    "normalize_session_key",
    "parse_agent_session_key",
    "prepare_compaction",
    "read_last_messages",
    "read_tail_context",
    "resolve_context_window",
    "resolve_replay_policy",
    "resolve_session",
    "run_maintenance",
    "sanitize_replay_history",
    "scan_transcript",
    "shared_index_cache",
    "should_compact",
)
