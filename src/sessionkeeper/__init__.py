"""
sessionkeeper: the session layer for LLM agent runtimes.

Which conversation this is (session key -> :class:`SessionEntry` in a :class:`SessionStore`), what was said
(append-only JSONL transcripts shaped as a tree of entries, file-compatible with pi 0.73.1:
:class:`TranscriptManager`), and how the history keeps fitting the model's context window (compaction:
:class:`Compactor`; pruning: :class:`Pruner`; memory flush: :class:`MemoryFlushPolicy`; silent replies:
:func:`is_silent_reply`), tied together for an agent loop by :class:`SessionRuntime`.

The main names are re-exported here and imported lazily on first use, so ``import sessionkeeper`` stays
cheap. Each subpackage (``sessionkeeper.records``, ``.transcript``, ``.store``, ``.compaction``,
``.pruning``, ``.runtime``, ``.testing``) exports what a user needs; ``sessionkeeper.hooks`` has every hook
event and ``sessionkeeper.abc`` every protocol a user implements.

Each public name is written once, as a ``from module import Name as Name`` line (the redundant alias marks
a re-export for type checkers, as in anyio's ``__init__``): eagerly for the two error names below, under
``TYPE_CHECKING`` for the rest. At run time the lazy table and ``__all__`` are read from those very lines
(:func:`_exports`), so there is no second list to keep in step.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessionkeeper import exceptions as exceptions
from sessionkeeper.exceptions import SessionKeeperError as SessionKeeperError


if TYPE_CHECKING:
    from sessionkeeper._clock import SYSTEM_CLOCK as SYSTEM_CLOCK
    from sessionkeeper._clock import Clock as Clock
    from sessionkeeper._clock import SystemClock as SystemClock
    from sessionkeeper._config import Config as Config
    from sessionkeeper._config import load_config as load_config
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
    from sessionkeeper.hooks import CompactHookResult as CompactHookResult
    from sessionkeeper.hooks import CompactionEndEvent as CompactionEndEvent
    from sessionkeeper.hooks import CompactionHookOverride as CompactionHookOverride
    from sessionkeeper.hooks import CompactionStartEvent as CompactionStartEvent
    from sessionkeeper.hooks import ContextEvent as ContextEvent
    from sessionkeeper.hooks import HookEvent as HookEvent
    from sessionkeeper.hooks import HookRegistry as HookRegistry
    from sessionkeeper.hooks import MemoryFlushEndEvent as MemoryFlushEndEvent
    from sessionkeeper.hooks import MemoryFlushStartEvent as MemoryFlushStartEvent
    from sessionkeeper.hooks import MessageEndEvent as MessageEndEvent
    from sessionkeeper.hooks import SessionBeforeCompactEvent as SessionBeforeCompactEvent
    from sessionkeeper.hooks import SessionBeforeForkEvent as SessionBeforeForkEvent
    from sessionkeeper.hooks import SessionBeforeSwitchEvent as SessionBeforeSwitchEvent
    from sessionkeeper.hooks import SessionBeforeTreeEvent as SessionBeforeTreeEvent
    from sessionkeeper.hooks import SessionCompactEvent as SessionCompactEvent
    from sessionkeeper.hooks import SessionShutdownEvent as SessionShutdownEvent
    from sessionkeeper.hooks import SessionStartEvent as SessionStartEvent
    from sessionkeeper.hooks import SessionTreeEvent as SessionTreeEvent
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
    from sessionkeeper.transcript import ArchivingTranscriptStorage as ArchivingTranscriptStorage
    from sessionkeeper.transcript import AssistantMessage as AssistantMessage
    from sessionkeeper.transcript import BashExecutionMessage as BashExecutionMessage
    from sessionkeeper.transcript import BranchSummaryEntry as BranchSummaryEntry
    from sessionkeeper.transcript import BranchSummaryMessage as BranchSummaryMessage
    from sessionkeeper.transcript import CompactionClaimStorage as CompactionClaimStorage
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
    from sessionkeeper.transcript import TranscriptStorage as TranscriptStorage
    from sessionkeeper.transcript import UnknownEntry as UnknownEntry
    from sessionkeeper.transcript import UnknownMessage as UnknownMessage
    from sessionkeeper.transcript import Usage as Usage
    from sessionkeeper.transcript import UserMessage as UserMessage
    from sessionkeeper.transcript import WriteLockSettings as WriteLockSettings
    from sessionkeeper.transcript import WriterClaim as WriterClaim
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


_EXPORT_LINE = r"^( *)from (sessionkeeper[\w.]*) import (\w+) as \3$"


def _exports() -> dict[str, str | None]:
    """
    Every public name of this module -> the module to import it from on first use (``None``: eager).

    Read from this file's own ``from module import Name as Name`` lines (indented: under ``TYPE_CHECKING``,
    so lazy). A regular expression rather than :mod:`ast`: ``importlib``, ``re`` and ``pathlib`` are
    loaded anyway (``sessionkeeper.exceptions`` imports ``pathlib``) and the scan takes well under a
    millisecond; ``tests/test_public_api.py`` checks it finds exactly the
    imports :mod:`ast` finds. Computed on the first lazy lookup and kept in ``_EXPORTS``.
    """
    text = Path(__file__).read_text(encoding="utf-8")
    found: dict[str, str | None] = {}
    for match in re.finditer(_EXPORT_LINE, text, flags=re.MULTILINE):
        indent, module, name = match.groups()
        found[name] = module if indent else None
    return found


def __getattr__(name: str) -> Any:
    exports = globals().get("_EXPORTS")
    if exports is None:
        exports = globals()["_EXPORTS"] = _exports()
    if name == "__all__":
        value: Any = tuple(sorted(exports))
    else:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module 'sessionkeeper' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__getattr__("__all__")))
