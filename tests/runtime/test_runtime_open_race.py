"""
Several writers opening one session key at once (docs/runtime.md "Several writers on one key").

The first message on a new key, or the first one after the daily boundary, from several tasks, store
instances or processes at once: exactly one session is created (rolled over), the others continue it, and
every turn lands in the transcript the store names. The interleaving that lost turns (every caller reads
the store before any writes) is forced with a rendezvous on the backend's reads: the callers wait for each
other's state, never for time.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from zoneinfo import ZoneInfo

import anyio
import pytest
from tests._servers import pg_schema
from tests.runtime._runtime_helpers import make_runtime

from sessionkeeper.runtime import ModelInfo, RuntimeSettings, SessionRuntime
from sessionkeeper.store import EntryUpdater, ResetPolicy, SessionEntry, SessionStore
from sessionkeeper.transcript import (
    AssistantMessage,
    CompactionEntry,
    MessageEntry,
    TextContent,
    TranscriptManager,
    UserMessage,
)


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema",)

KEY = "agent:main:main"
WRITERS = 4
WORKER = Path(__file__).with_name("_open_race_worker.py")
UTC_DAILY = RuntimeSettings(reset=ResetPolicy(time_zone=ZoneInfo("UTC")))


class Rendezvous:
    """
    The store's reads return only once ``parties`` of them have read (all read one state), or once a write
    starts (a caller that decides without a plain read: nothing is left to line up).
    """

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.arrived = 0
        self.open = anyio.Event()

    def gate(self, store: SessionStore) -> None:
        backend = store.backend
        read, write = backend.get, backend.update

        async def get(session_key: str) -> SessionEntry | None:
            entry = await read(session_key)
            self.arrived += 1
            if self.arrived >= self.parties:
                self.open.set()
            await self.open.wait()
            return entry

        async def update(session_key: str, fn: EntryUpdater) -> SessionEntry | None:
            self.open.set()
            return await write(session_key, fn)

        backend.get = get  # type: ignore[method-assign]
        backend.update = update  # type: ignore[method-assign]


def _open_store(kind: str, tmp_path: Path) -> SessionStore:
    if kind == "memory":
        return SessionStore.in_memory()
    return SessionStore.open(tmp_path, backend="json" if kind == "json" else "sqlite")


async def _turn(runtime: SessionRuntime, name: str, used: list[str], body: str = "hi") -> None:
    session = await runtime.open(KEY, body=body)
    await runtime.before_model_call(session, prompt=f"hello from {name}")
    reply = AssistantMessage(
        content=[TextContent(text=f"reply to {name}")], api="anthropic-messages", provider="p", model="m"
    )
    await runtime.after_turn(session, messages=[reply])
    used.append(session.session_id)


async def _together(*calls: Callable[[], Awaitable[None]]) -> None:
    async with anyio.create_task_group() as tg:
        for call in calls:
            tg.start_soon(call)


def _prompts(transcript: TranscriptManager) -> list[str]:
    """The prompts on the transcript's current branch, in order."""
    return [
        entry.message.content[0].text  # type: ignore[union-attr]
        for entry in transcript.get_branch()
        if isinstance(entry, MessageEntry) and isinstance(entry.message, UserMessage)
    ]


async def _check_one_session(
    store: SessionStore, used: list[str], names: list[str], runtime: SessionRuntime | None = None
) -> Path | None:
    """One session id everywhere, named by the store, holding every turn; its path (``None``: in memory)."""
    entry = await store.require(KEY)
    assert set(used) == {entry.session_id}, used
    path = store.transcript_file(entry)
    if path is None:
        transcript = await TranscriptManager.open_in(store.transcript_storage(), str(entry.session_id))
    else:
        live = sorted(p.name for p in path.parent.glob("*.jsonl"))
        assert live == [path.name], live  # no orphan transcript
        transcript = await TranscriptManager.open(path)
    assert sorted(_prompts(transcript)) == sorted(f"hello from {name}" for name in names)
    return path


@pytest.mark.parametrize("kind", ["memory", "json", "sqlite"])
async def test_concurrent_first_messages_on_a_new_key_share_one_session(kind: str, tmp_path: Path) -> None:
    async with _open_store(kind, tmp_path) as store:
        Rendezvous(WRITERS).gate(store)
        runtime = SessionRuntime(store, model=ModelInfo(), cwd="/w")
        used: list[str] = []
        names = [f"task {i}" for i in range(WRITERS)]
        await _together(*(lambda n=n: _turn(runtime, n, used) for n in names))
        await _check_one_session(store, used, names, runtime)


@pytest.mark.parametrize("kind", ["json", "sqlite"])
async def test_first_messages_from_several_store_instances_share_one_session(
    kind: str, tmp_path: Path
) -> None:
    # one store instance per writer, as separate processes have: only the files are shared
    stores = [_open_store(kind, tmp_path) for _ in range(WRITERS)]
    rendezvous = Rendezvous(WRITERS)
    try:
        for store in stores:
            rendezvous.gate(store)
        runtimes = [SessionRuntime(store, model=ModelInfo(), cwd="/w") for store in stores]
        used: list[str] = []
        names = [f"writer {i}" for i in range(WRITERS)]
        await _together(*(lambda r=r, n=n: _turn(r, n, used) for r, n in zip(runtimes, names, strict=True)))
        await _check_one_session(stores[0], used, names)
    finally:
        for store in stores:
            await store.aclose()


def _archives(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".jsonl.reset." in p.name)


async def _make_stale(store: SessionStore) -> None:
    """Date the session two days back: it started before the latest daily boundary (real clock: the
    turns' lock waits need real time, which a FakeClock's instant sleeps would skip)."""
    then = int(time.time() * 1000) - 2 * 86_400_000
    await store.patch(KEY, sessionStartedAt=then, lastInteractionAt=then, updatedAt=then)


@pytest.mark.parametrize("kind", ["json", "sqlite"])
async def test_concurrent_messages_at_the_daily_boundary_roll_over_once(kind: str, tmp_path: Path) -> None:
    async with _open_store(kind, tmp_path) as store:
        runtime = SessionRuntime(store, model=ModelInfo(), settings=UTC_DAILY, cwd="/w")
        before: list[str] = []
        await _turn(runtime, "yesterday", before)
        await _make_stale(store)
        Rendezvous(WRITERS).gate(store)
        used: list[str] = []
        names = [f"task {i}" for i in range(WRITERS)]
        await _together(*(lambda n=n: _turn(runtime, n, used) for n in names))
        path = await _check_one_session(store, used, names)
        assert path is not None and before[0] not in used
        archives = _archives(tmp_path)
        assert len(archives) == 1 and archives[0].startswith(f"{before[0]}.jsonl.reset."), archives
        old = await TranscriptManager.open(tmp_path / archives[0])
        assert _prompts(old) == ["hello from yesterday"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_postgres_store_first_messages_and_rollover_share_one_session(
    pg_schema: tuple[str, str], tmp_path: Path
) -> None:
    dsn, schema = pg_schema
    async with SessionStore.open(f"{dsn}?schema={schema}", transcripts_dir=tmp_path) as store:
        Rendezvous(WRITERS).gate(store)
        runtime = SessionRuntime(store, model=ModelInfo(), settings=UTC_DAILY, cwd="/w")
        used: list[str] = []
        names = [f"task {i}" for i in range(WRITERS)]
        await _together(*(lambda n=n: _turn(runtime, n, used) for n in names))
        await _check_one_session(store, used, names)
        await _make_stale(store)
        Rendezvous(WRITERS).gate(store)
        rolled: list[str] = []
        await _together(*(lambda n=n: _turn(runtime, n, rolled) for n in names))
        await _check_one_session(store, rolled, names)
        assert rolled[0] != used[0]
        assert len(_archives(tmp_path)) == 1


def _run_processes(location: str, transcripts: str, names: list[str]) -> list[str]:
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), location, transcripts, name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in names
    ]
    try:
        for proc in procs:  # every worker's store open before any starts: maximal overlap
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        used = []
        for proc in procs:
            out, _ = proc.communicate(timeout=240)
            assert proc.returncode == 0, (proc.returncode, out)
            used.append(out.strip())
        return used
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("kind", ["json", "sqlite", "postgres"])
async def test_first_messages_from_several_processes_share_one_session(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    for trial in range(3):
        directory = tmp_path / f"trial{trial}"
        directory.mkdir()
        location, transcripts = str(directory), "-"
        if kind == "sqlite":
            location = str(directory / "sessions.sqlite")
        elif kind == "postgres":
            dsn, schema = request.getfixturevalue("pg_schema")
            location, transcripts = f"{dsn}?schema={schema}&store=trial{trial}", str(directory)
        names = [f"process {i}" for i in range(WRITERS)]
        used = await anyio.to_thread.run_sync(_run_processes, location, transcripts, names)
        if kind == "postgres":
            store = SessionStore.open(location, transcripts_dir=directory)
        else:
            store = SessionStore.open(directory)
        async with store:
            await _check_one_session(store, used, names)


def _run_count_workers(directory: Path, processes: int, turns: int) -> None:
    worker = Path(__file__).with_name("_compaction_count_worker.py")
    procs = [
        subprocess.Popen(
            [sys.executable, str(worker), str(directory), str(turns)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs:
            out, _ = proc.communicate(timeout=240)
            assert proc.returncode == 0 and out.strip() == "done", (proc.returncode, out)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_compactions_from_several_processes_are_all_counted(tmp_path: Path) -> None:
    # each process increments compactionCount on the entry stored now, not on the one its session read
    # at its last write: another process's compaction in between is never lost (mp.py: 5 counted for 8)
    await anyio.to_thread.run_sync(_run_count_workers, tmp_path, WRITERS, 8)
    async with SessionStore.open(tmp_path) as store:
        entry = await store.require(KEY)
        path = store.transcript_file(entry)
        assert path is not None
        transcript = await TranscriptManager.open(path)
        written = sum(isinstance(e, CompactionEntry) for e in transcript.entries())
        assert written >= 2
        assert entry.compaction_count == written


async def test_two_runtimes_opening_a_new_key_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both runtimes saw no transcript file and created it: the second one's create raised a bare
    # FileExistsError out of open(). It now opens the file the other one created.
    import anyio

    runtime_a, _, _ = make_runtime(tmp_path=tmp_path)
    runtime_b, _, _ = make_runtime(tmp_path=tmp_path)
    a = await runtime_a.open(KEY)

    async def missing(self: anyio.Path) -> bool:
        return False

    monkeypatch.setattr(anyio.Path, "exists", missing)
    b = await runtime_b.open(KEY)
    assert b.transcript.path == a.transcript.path
    assert b.session_id == a.session_id
