"""Typing tests of compaction and pruning: Compactor.compact, find_cut_point, Pruner (never run)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal, assert_type

from sessionkeeper import CompactionResult, Compactor, Pruner, TranscriptEntry, TranscriptManager
from sessionkeeper.compaction import CompactionSettings, CutPoint, find_cut_point
from sessionkeeper.pruning import PruneResult
from sessionkeeper.records import AgentMessage, CompactionEntry
from sessionkeeper.testing import ScriptedModelClient


async def compact(transcript: TranscriptManager) -> None:
    compactor = Compactor(
        settings=CompactionSettings(reserve_tokens=16_384, keep_recent_tokens=20_000),
        model_client=ScriptedModelClient(["## Goal\n..."]),
        context_window=200_000,
    )
    result = await compactor.compact(transcript, reason="manual")
    assert_type(result, CompactionResult)
    assert_type(result.entry, CompactionEntry | None)
    assert_type(result.summary, str | None)
    assert_type(result.tokens_before, int)
    assert_type(
        result.status,
        Literal[
            "compacted",
            "empty",
            "already_compacted",
            "nothing_to_summarize",
            "pending_tool_results",
            "ineffective",
            "superseded",
            "joined",
        ],
    )
    if result.entry is not None:
        assert_type(result.entry.first_kept_entry_id, str)
    if result.successor is not None:  # a file's successor has a path; a storage's only a location
        assert_type(result.successor.path, Path | None)
        assert_type(result.successor.location, str)


def cut(entries: Sequence[TranscriptEntry]) -> None:
    point = find_cut_point(entries, keep_recent_tokens=20_000)
    assert_type(point, CutPoint)
    assert_type(point.first_kept_entry_index, int)
    assert_type(point.is_split_turn, bool)
    assert_type(point.budget_index, int | None)


def prune(messages: Sequence[AgentMessage]) -> None:
    result = Pruner().prune(messages, context_window_tokens=200_000, last_cache_touch_at=None)
    assert_type(result, PruneResult)
    assert_type(result.messages, tuple[AgentMessage, ...])
    assert_type(result.changed, bool)
    assert_type(result.soft_trimmed, tuple[str, ...])
