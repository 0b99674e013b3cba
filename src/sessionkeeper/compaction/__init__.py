"""
Compaction: summarise old history into a ``compaction`` entry and keep the recent tail verbatim.

Planning is pure and pi-exact (:func:`find_cut_point`, :func:`prepare_compaction`, pi spec §13);
reserve arithmetic and safeguard mode follow OpenClaw (spec §5); :class:`Compactor` runs the hooks,
the summariser chain (provider -> LLM -> extractive, DESIGN D3) and writes the entry. See
``docs/compaction.md``.
"""

from __future__ import annotations

from sessionkeeper.compaction._branch_summary import (
    BranchEntries,
    BranchSummary,
    collect_entries_for_branch_summary,
    generate_branch_summary,
    prepare_branch_entries,
)
from sessionkeeper.compaction._budget import DEFAULT_CONTEXT_WINDOW as DEFAULT_CONTEXT_WINDOW
from sessionkeeper.compaction._budget import (
    CompactionBudget,
    compaction_budget,
    compaction_threshold,
    effective_reserve_tokens,
    should_compact,
)
from sessionkeeper.compaction._chunking import (
    adaptive_chunk_ratio,
    chunk_messages_by_max_tokens,
    split_messages_by_token_share,
)
from sessionkeeper.compaction._compactor import (
    CompactionResult,
    CompactionStatus,
    Compactor,
)
from sessionkeeper.compaction._compactor import check_provider_configured as check_provider_configured
from sessionkeeper.compaction._cut import CutPoint, find_cut_point, find_turn_start_index, is_cut_point
from sessionkeeper.compaction._extractive import extract_identifiers, extractive_summary
from sessionkeeper.compaction._memo import clear_token_memo as clear_token_memo
from sessionkeeper.compaction._prepare import CompactionPreparation, FileOperations, prepare_compaction
from sessionkeeper.compaction._providers import (
    ENTRY_POINT_GROUP,
    CompactionProvider,
    CompactionProviderRegistry,
    SummaryRequest,
)
from sessionkeeper.compaction._serialize import serialize_conversation
from sessionkeeper.compaction._settings import CompactionSettings, QualityGuardSettings
from sessionkeeper.compaction._successor import (
    CheckpointSide,
    CompactionCheckpoint,
    SuccessorTranscript,
    build_successor_entries,
    rotate_after_compaction,
)


__all__ = (
    "ENTRY_POINT_GROUP",
    "BranchEntries",
    "BranchSummary",
    "CheckpointSide",
    "CompactionBudget",
    "CompactionCheckpoint",
    "CompactionPreparation",
    "CompactionProvider",
    "CompactionProviderRegistry",
    "CompactionResult",
    "CompactionSettings",
    "CompactionStatus",
    "Compactor",
    "CutPoint",
    "FileOperations",
    "QualityGuardSettings",
    "SuccessorTranscript",
    "SummaryRequest",
    "adaptive_chunk_ratio",
    "build_successor_entries",
    "chunk_messages_by_max_tokens",
    "collect_entries_for_branch_summary",
    "compaction_budget",
    "compaction_threshold",
    "effective_reserve_tokens",
    "extract_identifiers",
    "extractive_summary",
    "find_cut_point",
    "find_turn_start_index",
    "generate_branch_summary",
    "is_cut_point",
    "prepare_branch_entries",
    "prepare_compaction",
    "rotate_after_compaction",
    "serialize_conversation",
    "should_compact",
    "split_messages_by_token_share",
)


from sessionkeeper._public import set_public_module


set_public_module(globals())
