"""The demo's main job: the bundled sessions replayed through SessionRuntime (store, transcripts, pi, CLI)."""

from __future__ import annotations

import importlib.resources
import json
import shutil
from pathlib import Path

import pytest
from tests import _pi_oracle
from tests._helpers import run_cli
from tests._pi_oracle import PiOracle

from sessionkeeper.cli._demo_runtime import DEMO_CONTEXT_WINDOW, replay_sessions
from sessionkeeper.pruning import PRUNE_RECORD_CUSTOM_TYPE
from sessionkeeper.store import SessionStore
from sessionkeeper.transcript import CompactionEntry, CustomEntry, TranscriptManager


pi_oracle = _pi_oracle.pi_oracle

KINDS = {"pruning", "memory_flush", "threshold_compaction", "overflow_recovery", "overflow_compaction"}


def _copy_samples(target: Path) -> dict[str, Path]:
    target.mkdir(parents=True, exist_ok=True)
    copied = {}
    for item in importlib.resources.files("sessionkeeper").joinpath("_samples").iterdir():
        if item.name.endswith(".jsonl"):
            path = target / item.name
            path.write_bytes(item.read_bytes())
            copied[item.name.removesuffix(".jsonl")] = path
    return copied


@pytest.mark.anyio
async def test_replay_writes_a_store_and_transcripts_where_every_rule_fires(tmp_path: Path) -> None:
    samples = _copy_samples(tmp_path / "samples")
    originals = {name: path.read_bytes() for name, path in samples.items()}
    report = await replay_sessions(samples, tmp_path)
    assert {e["kind"] for e in report.events} >= KINDS
    assert report.thresholds == {
        "contextWindow": DEMO_CONTEXT_WINDOW,
        "compactionThreshold": 6000,
        "memoryFlushThreshold": 2000,
    }
    assert {name: path.read_bytes() for name, path in samples.items()} == originals  # inputs untouched
    rows = {row["session"]: row for row in report.sessions}
    assert set(rows) == set(samples)
    async with SessionStore.open(report.store) as store:
        for name, path in report.transcripts.items():
            entry = await store.require(f"agent:main:demo-{name}")
            assert path == report.store / f"{entry.session_id}.jsonl"
            manager = await TranscriptManager.open(path)
            compactions = [e for e in manager.entries() if isinstance(e, CompactionEntry)]
            assert entry.compaction_count == rows[name]["compactionCount"] == len(compactions)
            assert entry.context_tokens == DEMO_CONTEXT_WINDOW
            assert entry.total_tokens == rows[name]["totalTokens"]
            diagnostics = manager.diagnostics
            assert diagnostics.invalid_lines == () and diagnostics.torn_tail is None
            assert diagnostics.version == 3 and not diagnostics.legacy_version
            if rows[name]["flushes"]:
                assert entry.memory_flush_compaction_count is not None
                assert entry.memory_flush_at is not None
            customs = [e for e in manager.entries() if isinstance(e, CustomEntry)]
            markers = [m for m in customs if m.custom_type == "openclaw.cache-ttl"]
            records = [m for m in customs if m.custom_type == PRUNE_RECORD_CUSTOM_TYPE]  # D11
            assert len(markers) + len(records) == len(customs)
            assert len(markers) == rows[name]["turns"] - sum(
                1 for e in report.events if e["session"] == name and e["kind"].endswith("_compaction")
            )
    overflow = [e for e in report.events if e["kind"] == "overflow_recovery"]
    assert len(overflow) == 1 and "compacted" in overflow[0]["what"]
    assert rows["full"]["overflowRecoveries"] == 1


@pytest.mark.oracle
def test_pi_loads_the_demo_transcripts_with_our_context(pi_oracle: PiOracle, tmp_path: Path) -> None:
    import anyio

    samples = _copy_samples(tmp_path / "samples")
    report = anyio.run(replay_sessions, samples, tmp_path)
    for name, path in report.transcripts.items():
        manager = anyio.run(TranscriptManager.open, path)
        ours = {e.id: manager.build_session_context(e.id).to_json() for e in manager.entries()}
        theirs = pi_oracle.context(path, all_leaves=True)
        assert set(theirs) == set(ours), name
        for leaf_id, context in theirs.items():
            assert ours[leaf_id] == context, (name, leaf_id)


def test_cli_demo_json_shows_pruning_flush_threshold_compaction_and_overflow_recovery(tmp_path: Path) -> None:
    work = tmp_path / "work"
    result = run_cli("demo", "--json", "--workdir", str(work), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    step = next(s for s in report["steps"] if s["name"] == "runtime")
    assert step["status"] == "ok"
    kinds = {row["kind"] for row in step["rows"]}
    assert kinds >= KINDS
    assert all(row["why"] for row in step["rows"])
    sessions = {row["session"]: row for row in step["data"]["sessions"]}
    assert sum(row["compactions"] for row in sessions.values()) >= 2
    assert sum(row["flushes"] for row in sessions.values()) >= 1
    store_file = Path(step["data"]["store"]) / "sessions.json"
    stored = json.loads(store_file.read_text())
    assert set(stored) == {f"agent:main:demo-{name}" for name in sessions}
    assert store_file.stat().st_mode & 0o777 == 0o600
    shutil.rmtree(work)
