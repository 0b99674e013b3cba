"""
Compaction planning on transcripts whose ids are JSON numbers (pi spec §13.2): a previous compaction with a
numeric id or ``firstKeptEntryId`` sets the summarised span's start as pi's ``prepareCompaction`` does
(``findIndex(e => e.id === firstKeptEntryId)``), checked against the real pi on the numeric-id fixtures.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import pytest
from tests import _pi_oracle
from tests._pi_oracle import PiOracle
from tests.transcript.test_transcript_numeric_ids_oracle import _assistant, _header, _user

from sessionkeeper.compaction import Compactor, prepare_compaction
from sessionkeeper.records._entries import entry_key, key_to_json
from sessionkeeper.transcript import TranscriptManager, load_transcript


pi_oracle = _pi_oracle.pi_oracle  # the session-scoped fixture, made visible to this module

DATA = Path(__file__).resolve().parent.parent / "data" / "oracle" / "numeric-ids"
BUDGETS = (1, 12, 20_000)


def _plan(file: Path, budget: int):
    index = load_transcript(file)
    return prepare_compaction(index.branch(index.leaf_id), keep_recent_tokens=budget)


def test_numeric_previous_compaction_bounds_the_summarised_span() -> None:
    # 1 2 3 4 [compaction 5, firstKeptEntryId 3] 6: summarising starts at entry 3 (index 2)
    plan = _plan(DATA / "numeric-compaction.jsonl", 1)
    assert plan is not None
    assert plan.boundary_start == 2
    assert plan.previous_summary == "summary keeping from the number 3"
    assert plan.first_kept_entry_id == entry_key(6)
    assert plan.to_json()["firstKeptEntryId"] == 6


def test_string_first_kept_does_not_find_a_numeric_entry() -> None:
    # firstKeptEntryId "3" names no entry (the entry's id is the number 3): start after the compaction
    plan = _plan(DATA / "string-first-kept.jsonl", 1)
    assert plan is not None
    assert plan.boundary_start == 5
    assert plan.previous_summary == "summary keeping from the string 3"


_CUT_PROBE = r"""
const pkg = process.argv[2] + "/node_modules/@mariozechner/pi-coding-agent/dist/index.js";
const { SessionManager, findCutPoint, estimateTokens, calculateContextTokens } = await import(pkg);
const budgets = JSON.parse(process.argv[3]);
const contextTokens = (messages) => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (m.role === "assistant" && m.usage && m.stopReason !== "error" && m.stopReason !== "aborted") {
      let trailing = 0;
      for (let j = i + 1; j < messages.length; j++) trailing += estimateTokens(messages[j]);
      return calculateContextTokens(m.usage) + trailing;
    }
  }
  return messages.reduce((sum, m) => sum + estimateTokens(m), 0);
};
const out = {};
for (const file of process.argv.slice(4)) {
  const sm = SessionManager.open(file, "/nonexistent-dir-never-written");
  const path = sm.getBranch();
  const tokens = contextTokens(sm.buildSessionContext().messages);
  out[file] = budgets.map((keep) => {
    if (path.length === 0 || path[path.length - 1].type === "compaction") return null;
    let prev = -1;
    for (let i = path.length - 1; i >= 0; i--) if (path[i].type === "compaction") { prev = i; break; }
    let boundaryStart = 0;
    if (prev >= 0) {
      const idx = path.findIndex((e) => e.id === path[prev].firstKeptEntryId);
      boundaryStart = idx >= 0 ? idx : prev + 1;
    }
    const cut = findCutPoint(path, boundaryStart, path.length, keep);
    return { boundaryStart, firstKeptEntryId: path[cut.firstKeptEntryIndex]?.id ?? null, tokens };
  });
}
process.stdout.write(JSON.stringify(out));
"""


@pytest.mark.oracle
def test_cut_point_and_boundary_equal_pi(pi_oracle: PiOracle) -> None:
    # the boundary rule of pi's prepareCompaction and its findCutPoint, as pi-oracle's context.mjs
    # computes them (--cut-point), for every fixture and budget in one node run
    files = sorted(DATA.glob("*.jsonl"))
    with tempfile.NamedTemporaryFile("w", suffix=".mjs", delete=False) as handle:
        handle.write(_CUT_PROBE)
    try:
        run = subprocess.run(
            [pi_oracle.node, handle.name, str(pi_oracle.root), json.dumps(BUDGETS), *map(str, files)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
    finally:
        Path(handle.name).unlink()
    expected = json.loads(run.stdout)
    for file in files:
        for budget, cut in zip(BUDGETS, expected[str(file)], strict=True):
            plan = _plan(file, budget)
            if cut is None:
                assert plan is None, (file.stem, budget)
                continue
            assert plan is not None, (file.stem, budget)
            assert plan.boundary_start == cut["boundaryStart"], (file.stem, budget)
            assert key_to_json(plan.pi_first_kept_entry_id) == cut["firstKeptEntryId"], (file.stem, budget)
            assert plan.tokens_before == cut["tokens"], (file.stem, budget)


def _long_numeric_file(tmp: Path) -> Path:
    """A numeric-id chain long enough for a compaction to be worth writing."""
    lines = [_header("long")]
    for n in range(1, 9):
        text = f"turn {n}: " + "the parser reads every line of the transcript file " * 40
        make = _user if n % 2 else _assistant
        lines.append(make(str(n), "null" if n == 1 else str(n - 1), n, text))
    path = tmp / "numeric-long.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.anyio
async def test_compacting_a_numeric_transcript_writes_a_numeric_first_kept_id(tmp_path: Path) -> None:
    path = _long_numeric_file(tmp_path)
    transcript = await TranscriptManager.open(path)
    result = await Compactor().compact(transcript, keep_recent_tokens=500)
    assert result.status == "compacted" and result.entry is not None
    written = json.loads(path.read_text("utf-8").splitlines()[-1])
    assert written["parentId"] == 8 and type(written["firstKeptEntryId"]) is int
    assert result.to_json()["firstKeptEntryId"] == written["firstKeptEntryId"]
    messages = load_transcript(path).build_context().to_json()["messages"]
    assert messages[0]["role"] == "compactionSummary" and len(messages) > 1


@pytest.mark.oracle
@pytest.mark.anyio
async def test_compacted_numeric_transcript_reads_back_in_pi_as_in_ours(
    pi_oracle: PiOracle, tmp_path: Path
) -> None:
    path = _long_numeric_file(tmp_path)
    transcript = await TranscriptManager.open(path)
    await Compactor().compact(transcript, keep_recent_tokens=500)
    assert load_transcript(path).build_context().to_json() == pi_oracle.context(path)
