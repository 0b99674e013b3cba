"""Break-it regressions (engineer w): SessionRuntime end to end around successor transcripts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.runtime._runtime_helpers import make_runtime, reply

from sessionkeeper.compaction import CompactionSettings
from sessionkeeper.store import SessionStore
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import CompactionSummaryMessage


pytestmark = pytest.mark.anyio

KEY = "agent:main:main"


async def _fill(runtime: object, session: object, turns: int, *, size: int = 2000) -> None:
    from sessionkeeper.runtime import SessionRuntime

    assert isinstance(runtime, SessionRuntime)
    for index in range(turns):
        await runtime.before_model_call(session, prompt=f"question {index} " + "q" * size)  # type: ignore[arg-type]
        await runtime.after_turn(session, messages=[reply("answer " + "a" * size)])  # type: ignore[arg-type]


def _same_file(a: Path | str, b: Path | str) -> bool:
    return Path(a).resolve() == Path(b).resolve()


def _exists(path: Path) -> bool:
    return path.exists()


def _check_absolute_successor(session_file: str, *, tmp_path: Path, old_path: Path) -> None:
    assert Path(session_file).is_absolute()
    assert Path(session_file).resolve().parent == (tmp_path / "sessions").resolve()
    header = json.loads(Path(session_file).read_text().splitlines()[0])
    assert Path(header["parentSession"]).resolve() == old_path


async def test_successor_of_a_relative_sessions_dir_is_recorded_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A store opened on a relative path ("sessions", as a host or --store gives it): the successor's
    # sessionFile was written relative to the cwd ("sessions/<stamp>_<id>.jsonl"), which the store reads
    # from the sessions dir ("sessions/sessions/..."): reopening the key started an empty transcript there
    # and the compacted history was lost from the session. The header's parentSession was relative too.
    monkeypatch.chdir(tmp_path)
    clock = FakeClock()
    store = SessionStore.open(Path("sessions"), clock=clock, durable=False)
    runtime, store, _ = make_runtime(
        store=store,
        clock=clock,
        compaction=CompactionSettings(keep_recent_tokens=100, truncate_after_compaction=True),
    )
    session = await runtime.open(KEY)
    await _fill(runtime, session, 3)
    old_path = (tmp_path / "sessions" / f"{session.session_id}.jsonl").resolve()
    outcome = await runtime.compact(session)
    assert outcome.compacted and outcome.result is not None and outcome.result.successor is not None
    entry = await store.require(KEY)
    assert isinstance(entry.session_file, str)
    _check_absolute_successor(entry.session_file, tmp_path=tmp_path, old_path=old_path)
    again = await runtime.open(KEY)
    assert again.transcript.path is not None
    assert _same_file(again.transcript.path, entry.session_file)
    plan = await runtime.before_model_call(again, prompt="next")
    assert isinstance(plan.messages[0], CompactionSummaryMessage)
    assert not _exists(tmp_path / "sessions" / "sessions")
