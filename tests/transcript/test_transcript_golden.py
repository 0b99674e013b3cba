"""Golden tests: our context, estimates and derived state equal pi 0.73.1's on the real samples."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from sessionkeeper.transcript import (
    CURRENT_SESSION_VERSION,
    UnknownEntry,
    convert_to_llm,
    estimate_context_tokens,
    estimate_tokens,
    load_transcript,
    load_transcript_bytes,
    message_to_builtins,
)


NAMES = ["basic", "full", "branchy", "large-2000"]


def _golden(pi_samples: Path, name: str, suffix: str) -> dict:
    return json.loads((pi_samples / f"{name}.{suffix}.json").read_text("utf-8"))


@pytest.mark.parametrize("name", NAMES)
def test_context_equals_pi_golden(pi_samples: Path, name: str) -> None:
    index = load_transcript(pi_samples / f"{name}.jsonl")
    golden = _golden(pi_samples, name, "context")
    ctx = index.build_context()
    got = ctx.to_json()
    assert got["messages"] == golden["messages"]
    assert got["thinkingLevel"] == golden["thinkingLevel"]
    assert got["model"] == golden["model"]
    assert [message_to_builtins(m) for m in convert_to_llm(ctx.messages)] == golden["llmMessages"]


@pytest.mark.parametrize("name", NAMES)
def test_meta_equals_pi_golden(pi_samples: Path, name: str) -> None:
    index = load_transcript(pi_samples / f"{name}.jsonl")
    meta = _golden(pi_samples, name, "meta")["meta"]
    ctx = index.build_context()
    assert index.leaf_id == meta["leafId"]
    assert len(index) == meta["entryCount"]
    assert index.session_name == meta["sessionName"]
    assert index.labels == meta["labels"]
    assert [e.id for e in index.branch(index.leaf_id)] == meta["branchEntryIds"]
    assert [estimate_tokens(m) for m in ctx.messages] == meta["messageTokenEstimates"]
    assert estimate_context_tokens(ctx.messages).to_json() == meta["contextTokens"]
    assert index.header_raw == meta["header"]
    assert index.migrated is meta["migratedOnLoad"]
    assert index.diagnostics.clean


@pytest.mark.parametrize("name", ["basic", "full", "branchy"])
def test_every_leaf_equals_pi_golden(pi_samples: Path, name: str) -> None:
    index = load_transcript(pi_samples / f"{name}.jsonl")
    leaves = _golden(pi_samples, name, "all-leaves")
    assert set(leaves) == {e.id for e in index.entries()}
    for leaf_id, golden in leaves.items():
        assert index.build_context(leaf_id).to_json() == golden, leaf_id


def test_large_20k_context_equals_pi_golden(pi_samples: Path) -> None:
    data = gzip.decompress((pi_samples / "large-20k.jsonl.gz").read_bytes())
    index = load_transcript_bytes(data)
    assert len(index) == 20001
    assert index.build_context().to_json() == _golden(pi_samples, "large-20k", "context")


def test_samples_decode_to_typed_records(pi_samples: Path) -> None:
    for name in NAMES:
        index = load_transcript(pi_samples / f"{name}.jsonl")
        assert not any(isinstance(e, UnknownEntry) for e in index.entries())


def test_v1_legacy_migrates_like_pi_structurally(pi_samples: Path) -> None:
    index = load_transcript(pi_samples / "v1-legacy.jsonl")
    golden = _golden(pi_samples, "v1-legacy", "context")
    assert index.migrated
    assert index.diagnostics.legacy_version
    assert index.diagnostics.version == 1
    assert index.header.version == CURRENT_SESSION_VERSION
    got = index.build_context().to_json()
    # ids are random on each migration: compare everything else exactly
    assert got == {k: golden[k] for k in ("messages", "thinkingLevel", "model")}
    ids = [e.id for e in index.entries()]
    assert all(len(i) == 8 and int(i, 16) >= 0 for i in ids)
    assert len(set(ids)) == len(ids)
    parents = [e.parent_id for e in index.entries()]
    assert parents == [None, *ids[:-1]]
