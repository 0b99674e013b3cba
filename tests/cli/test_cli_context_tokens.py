"""
``sessionkeeper context FILE`` counts the context it shows (issue 11, "compare like with like"): right after
a compaction every provider usage on the rebuilt branch is stale, so the count is the estimate the runtime
reports (``tokens_after``, source ``"estimate"``), not the last usage plus newer messages; a usage newer
than the latest compaction is used again and labelled as such.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests._helpers import run_cli
from tests.runtime._runtime_helpers import make_runtime, reply

from sessionkeeper.runtime import CompactionOutcome, RuntimeSession, SessionRuntime
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import UserMessage, estimate_tokens, load_transcript


pytestmark = pytest.mark.anyio
PAD = " history worth summarising" * 120
KEY = "agent:main:main"


def _context_line(path: Path) -> tuple[int, str]:
    result = run_cli("context", str(path), env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    found = re.search(r"~(\d+) context tokens(?: \(([^)]*)\))?", result.stdout)
    assert found is not None, result.stdout
    return int(found.group(1)), found.group(2) or ""


async def _turn(
    runtime: SessionRuntime, session: RuntimeSession, clock: FakeClock, n: int, usage: int
) -> None:
    clock.advance(60)
    prompt = UserMessage(content=f"question {n}{PAD}", timestamp=clock.now_ms())
    await runtime.before_model_call(session, prompt=prompt)
    await runtime.after_turn(
        session, messages=[reply(f"answer {n}", input_tokens=usage, output_tokens=50, now_ms=clock.now_ms())]
    )


async def _compacted(tmp_path: Path) -> tuple[SessionRuntime, RuntimeSession, FakeClock, CompactionOutcome]:
    runtime, _store, clock = make_runtime(tmp_path=tmp_path)
    session = await runtime.open(KEY)
    for n in range(6):
        await _turn(runtime, session, clock, n, usage=2_000 + 500 * n)
    clock.advance(60)
    outcome = await runtime.compact(session, keep_recent_tokens=1_000)
    assert outcome.compacted
    return runtime, session, clock, outcome


async def test_right_after_a_compaction_the_count_is_the_runtimes_estimate(tmp_path: Path) -> None:
    runtime, session, _clock, outcome = await _compacted(tmp_path)
    path = session.transcript.path
    assert path is not None
    kept = load_transcript(path).build_context().messages
    assert any(getattr(m, "usage", None) is not None for m in kept)  # a stale usage is on the branch
    assert outcome.tokens_after_source == "estimate"
    tokens, source = _context_line(path)
    assert tokens == outcome.tokens_after == runtime.context_tokens(session)
    assert tokens == sum(estimate_tokens(m) for m in kept)
    assert source.startswith("estimate")


async def test_a_usage_newer_than_the_compaction_is_used_and_labelled(tmp_path: Path) -> None:
    runtime, session, clock, _outcome = await _compacted(tmp_path)
    await _turn(runtime, session, clock, 7, usage=1_234)
    path = session.transcript.path
    assert path is not None
    tokens, source = _context_line(path)
    assert tokens == runtime.context_tokens(session) == 1_234 + 50  # the fresh reply's usage, nothing newer
    assert source.startswith("usage")


async def test_without_any_usage_the_count_is_the_estimate(tmp_path: Path) -> None:
    runtime, _store, clock = make_runtime(tmp_path=tmp_path)
    session = await runtime.open(KEY)
    clock.advance(60)
    await session.transcript.append_message(UserMessage(content="hello" + PAD, timestamp=clock.now_ms()))
    path = session.transcript.path
    assert path is not None
    tokens, source = _context_line(path)
    assert tokens == runtime.context_tokens(session)
    assert source.startswith("estimate")
