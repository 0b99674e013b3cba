"""
SessionRuntime holds the transcript's write lock for a turn (issue 16, "A turn costs one durable write").

From ``before_model_call(prompt=...)`` to ``after_turn(turn_complete=True)`` the lock file stays in place, so
the turn's appends pay only their write and fsync; it is released on every exit path (completion, errors,
cancellation, ``on_model_error`` giving the error back, an explicit ``release_turn_lock``) and by the
watchdog after ``maxHoldMs`` when a host abandons a turn. Between turns another process can write.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from tests.runtime._runtime_helpers import make_runtime, reply, tool_call, tool_result

from sessionkeeper.runtime import MemoryFlushRequest, MemoryFlushSettings, RuntimeSession, RuntimeSettings
from sessionkeeper.transcript import (
    BranchSummaryMessage,
    SessionWriteLock,
    TranscriptManager,
    UserMessage,
    WriteLockSettings,
    read_lock_owner,
)


pytestmark = pytest.mark.anyio

KEY = "agent:main:main"

_FOREIGN_APPEND = """
import sys, anyio
from sessionkeeper.exceptions import SessionBusyError
from sessionkeeper.transcript import TextContent, TranscriptManager, UserMessage

async def main() -> int:
    manager = await TranscriptManager.open(sys.argv[1])
    try:
        await manager.append_message(UserMessage(content=[TextContent(text=sys.argv[2])], timestamp=1))
    except SessionBusyError:
        return 3
    return 0

sys.exit(anyio.run(main))
"""


def _path(session: RuntimeSession) -> Path:
    path = session.transcript.path
    assert path is not None
    return path


def _locked_by_us(session: RuntimeSession) -> bool:
    owner = read_lock_owner(_path(session))
    return owner is not None and owner.pid == os.getpid()


async def _foreign_append(path: Path, text: str, *, acquire_timeout_ms: int) -> int:
    env = dict(os.environ, OPENCLAW_SESSION_WRITE_LOCK_ACQUIRE_TIMEOUT_MS=str(acquire_timeout_ms))
    done = await anyio.run_process(
        [sys.executable, "-c", _FOREIGN_APPEND, str(path), text], env=env, check=False, stderr=subprocess.PIPE
    )
    return done.returncode


async def test_the_lock_is_held_from_the_prompt_to_the_completed_turn(tmp_path: Path) -> None:
    runtime, _, _ = make_runtime(tmp_path=tmp_path)
    session = await runtime.open(KEY)
    assert read_lock_owner(_path(session)) is None
    await runtime.before_model_call(session, prompt="read a.py")
    assert _locked_by_us(session) and session.holds_turn_lock
    await runtime.after_turn(session, messages=[tool_call("c1", path="a.py")], turn_complete=False)
    await runtime.after_turn(session, messages=[tool_result("c1", "print(1)")], turn_complete=False)
    assert _locked_by_us(session)  # the tool loop keeps it
    await runtime.before_model_call(session)
    assert _locked_by_us(session)
    await runtime.after_turn(session, messages=[reply("done")])
    assert read_lock_owner(_path(session)) is None and not session.holds_turn_lock
    reopened = await TranscriptManager.open(_path(session))
    assert reopened.entries() == session.transcript.entries()


async def test_another_process_writes_between_turns_but_not_during_one(tmp_path: Path) -> None:
    runtime, _, _ = make_runtime(tmp_path=tmp_path)
    session = await runtime.open(KEY)
    path = _path(session)
    await runtime.before_model_call(session, prompt="first")
    assert await _foreign_append(path, "too early", acquire_timeout_ms=200) == 3  # SessionBusyError
    await runtime.after_turn(session, messages=[reply("one")])
    assert await _foreign_append(path, "from the other process", acquire_timeout_ms=30_000) == 0
    plan = await runtime.before_model_call(session, prompt="second")
    texts = [
        block.text
        for message in plan.messages
        if isinstance(message, UserMessage) and not isinstance(message.content, str)
        for block in message.content
        if hasattr(block, "text")
    ]
    assert "from the other process" in texts and "too early" not in texts
    await runtime.after_turn(session, messages=[reply("two")])
    assert read_lock_owner(path) is None


async def test_an_error_in_after_turn_releases_the_lock(tmp_path: Path) -> None:
    runtime, _, _ = make_runtime(tmp_path=tmp_path)
    session = await runtime.open(KEY)
    await runtime.before_model_call(session, prompt="hi")
    assert _locked_by_us(session)
    wrong = BranchSummaryMessage(summary="s", from_id="x", timestamp=1)  # stored as its own entry type
    with pytest.raises(TypeError):
        await runtime.after_turn(session, messages=[wrong])
    assert read_lock_owner(_path(session)) is None and not session.holds_turn_lock


async def test_on_model_error_releases_when_it_gives_the_error_back(tmp_path: Path) -> None:
    runtime, _, _ = make_runtime(tmp_path=tmp_path)
    session = await runtime.open(KEY)
    await runtime.before_model_call(session, prompt="hi")
    with pytest.raises(ConnectionResetError):
        await runtime.on_model_error(session, ConnectionResetError("peer went away"))
    assert read_lock_owner(_path(session)) is None
    await runtime.before_model_call(session, prompt="again")
    outcome = await runtime.on_model_error(session, reply("boom", stop="error"))
    assert outcome.action == "not_overflow"
    assert read_lock_owner(_path(session)) is None


async def test_cancelling_a_call_that_holds_the_lock_releases_it(tmp_path: Path) -> None:
    started = anyio.Event()

    async def stuck_flush(request: MemoryFlushRequest) -> str:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    settings = RuntimeSettings(memory_flush=MemoryFlushSettings(force_flush_transcript_bytes=1))
    runtime, _, _ = make_runtime(tmp_path=tmp_path, settings=settings, memory_flush_runner=stuck_flush)
    session = await runtime.open(KEY)
    await session.transcript.append_message(UserMessage(content="earlier", timestamp=1))
    async with anyio.create_task_group() as tg:

        async def turn() -> None:
            await runtime.before_model_call(session, prompt="hi")

        tg.start_soon(turn)
        await started.wait()  # the flush turn runs inside the held lock
        assert _locked_by_us(session)
        tg.cancel_scope.cancel()
    assert read_lock_owner(_path(session)) is None and not session.holds_turn_lock


async def test_an_abandoned_turn_is_bounded_by_the_watchdog_and_the_next_turn_recovers(
    tmp_path: Path,
) -> None:
    runtime, _, clock = make_runtime(tmp_path=tmp_path)
    session = await runtime.open(KEY)
    session.transcript.write_lock_settings = WriteLockSettings(max_hold_ms=1_000, watchdog_interval_ms=0)
    await runtime.before_model_call(session, prompt="never finished")
    assert _locked_by_us(session)
    assert SessionWriteLock.run_watchdog() == 0  # within maxHoldMs: kept
    clock.advance(2)
    assert SessionWriteLock.run_watchdog() == 1
    assert read_lock_owner(_path(session)) is None and not session.holds_turn_lock
    assert await _foreign_append(_path(session), "meanwhile", acquire_timeout_ms=30_000) == 0
    await runtime.before_model_call(session, prompt="next turn")  # takes a new lock, no LockNotHeldError
    assert _locked_by_us(session)
    await runtime.after_turn(session, messages=[reply("ok")])
    assert read_lock_owner(_path(session)) is None


async def test_release_turn_lock_ends_an_abandoned_turn(tmp_path: Path) -> None:
    runtime, _, _ = make_runtime(tmp_path=tmp_path)
    session = await runtime.open(KEY)
    await runtime.before_model_call(session, prompt="abandoned")
    await runtime.release_turn_lock(session)
    await runtime.release_turn_lock(session)  # idempotent
    assert read_lock_owner(_path(session)) is None
    assert await _foreign_append(_path(session), "after", acquire_timeout_ms=30_000) == 0
    await runtime.after_turn(session, messages=[reply("late reply")])  # single appends, as before
    assert read_lock_owner(_path(session)) is None


async def test_a_host_held_lock_is_used_not_waited_for(tmp_path: Path) -> None:
    runtime, _, _ = make_runtime(tmp_path=tmp_path)
    session = await runtime.open(KEY)
    with anyio.fail_after(30):
        async with session.transcript.hold_write_lock():
            await runtime.before_model_call(session, prompt="hi")
            assert not session.holds_turn_lock
            await runtime.after_turn(session, messages=[reply("done")])
    assert read_lock_owner(_path(session)) is None
