"""A session reset or deleted by another writer mid-turn: a typed error, nothing lost or recreated."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.runtime._runtime_helpers import make_runtime, reply

from sessionkeeper.exceptions import SessionNotFoundError, TranscriptNotFoundError


pytestmark = pytest.mark.anyio

KEY = "agent:main:main"


async def test_reset_by_another_writer_mid_turn_is_a_typed_error_and_loses_nothing(tmp_path: Path) -> None:
    runtime, store, _ = make_runtime(tmp_path=tmp_path)
    session = await runtime.open(KEY, body="hi")
    await runtime.before_model_call(session, prompt="hi")
    await runtime.after_turn(session, messages=[reply("hello", input_tokens=100, output_tokens=5)])
    await runtime.before_model_call(session, prompt="second")
    old_id = session.session_id
    new = await store.reset(KEY, cwd="/w")  # /new handled elsewhere: the transcript is archived
    with pytest.raises(TranscriptNotFoundError, match="nothing was written"):
        await runtime.after_turn(session, messages=[reply("answer", input_tokens=900, output_tokens=5)])
    entry = await store.require(KEY)
    assert entry.session_id == new.session_id and entry.compaction_count == 0 and entry.total_tokens == 0
    sessions = tmp_path / "sessions"
    assert not (sessions / f"{old_id}.jsonl").exists()  # not recreated headerless
    (archive,) = sessions.glob(f"{old_id}.jsonl.reset.*")
    assert '"second"' in archive.read_text()


async def test_delete_by_cleanup_mid_turn_is_a_typed_error(tmp_path: Path) -> None:
    runtime, store, _ = make_runtime(tmp_path=tmp_path)
    session = await runtime.open(KEY, body="hi")
    await runtime.before_model_call(session, prompt="hi")
    await store.delete(KEY)
    with pytest.raises(TranscriptNotFoundError):
        await runtime.after_turn(session, messages=[reply("answer", input_tokens=900, output_tokens=5)])
    assert await store.get(KEY) is None


async def test_delete_in_a_storage_mid_turn_is_a_typed_error() -> None:
    # transcripts in the store's storage (memory here; a database too) go with their entry (issue 13)
    runtime, store, _ = make_runtime()
    session = await runtime.open(KEY, body="hi")
    await runtime.before_model_call(session, prompt="hi")
    await store.delete(KEY)
    with pytest.raises(TranscriptNotFoundError):
        await runtime.after_turn(session, messages=[reply("answer", input_tokens=900, output_tokens=5)])
    assert await store.get(KEY) is None


async def test_delete_where_the_transcript_outlives_the_entry_never_recreates_the_key() -> None:
    # a delete that leaves the transcript (archive_transcript=False): the turn's appends still land in
    # the old transcript, then the entry patch finds the key gone
    runtime, store, _ = make_runtime()
    session = await runtime.open(KEY, body="hi")
    await runtime.before_model_call(session, prompt="hi")
    await store.delete(KEY, archive_transcript=False)
    with pytest.raises(SessionNotFoundError):
        await runtime.after_turn(session, messages=[reply("answer", input_tokens=900, output_tokens=5)])
    assert await store.get(KEY) is None  # not brought back under a new session id without a transcript
