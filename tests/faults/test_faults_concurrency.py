"""
Concurrent writers on one transcript under the write lock (DESIGN "Reliability and security targets").

Several forked processes (asyncio and trio), each with several ``TranscriptManager`` instances and many
tasks, append to one transcript. Every acknowledged entry must be in the file exactly once, every
``parentId`` must point at an entry of the file, no line may be torn, and no lock file may be left.
Runs made under ``hold_write_lock`` must come out contiguous: nobody else writes while a run holds it.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

import anyio
import pytest
from tests._helpers import user

from sessionkeeper.transcript import TranscriptManager, load_transcript
from sessionkeeper.transcript.lock._settings import WriteLockSettings


SETTINGS = WriteLockSettings(acquire_timeout_ms=60_000, watchdog_interval_ms=0)
PROCESSES = 4
MANAGERS = 2
TASKS = 4
APPENDS = 10
RUNS = 3
RUN_LENGTH = 4


def _writer(transcript: Path, acks: Path, proc: int, backend: str) -> None:
    ack_fd = os.open(acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    async def open_manager() -> TranscriptManager:
        manager = await TranscriptManager.open(transcript)
        manager.write_lock_settings = SETTINGS
        return manager

    async def appender(manager: TranscriptManager, task: int) -> None:
        for i in range(APPENDS):
            entry = await manager.append_message(user(f"p{proc} t{task} #{i}", ts=int(time.time() * 1000)))
            os.write(ack_fd, f"{entry.id}\n".encode())

    async def runner(manager: TranscriptManager) -> None:
        for run in range(RUNS):
            async with manager.hold_write_lock():
                for i in range(RUN_LENGTH):
                    entry = await manager.append_message(
                        user(f"run p{proc} r{run} #{i}", ts=int(time.time() * 1000))
                    )
                    os.write(ack_fd, f"{entry.id}\n".encode())
            await anyio.sleep(0.001)

    async def main() -> None:
        managers = [await open_manager() for _ in range(MANAGERS)]
        solo = await open_manager()
        async with anyio.create_task_group() as tg:
            for m, manager in enumerate(managers):
                for task in range(TASKS):
                    tg.start_soon(appender, manager, m * TASKS + task)
            tg.start_soon(runner, solo)

    anyio.run(main, backend=backend)


@pytest.mark.timeout(120)
def test_many_processes_and_tasks_append_to_one_transcript(tmp_path: Path) -> None:
    transcript = tmp_path / "shared.jsonl"
    anyio.run(lambda: TranscriptManager.create(transcript, cwd="/work", session_id="shared"))
    ctx = multiprocessing.get_context("fork")
    acks = [tmp_path / f"acks-{p}.txt" for p in range(PROCESSES)]
    procs = [
        ctx.Process(target=_writer, args=(transcript, acks[p], p, "trio" if p % 2 else "asyncio"))
        for p in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(100)
        assert proc.exitcode == 0

    acknowledged = [line for path in acks for line in path.read_text().split("\n") if line]
    per_process = MANAGERS * TASKS * APPENDS + RUNS * RUN_LENGTH
    assert len(acknowledged) == PROCESSES * per_process

    raw_lines = transcript.read_bytes().split(b"\n")
    assert raw_lines[-1] == b""  # ends with a complete line
    records = [json.loads(line) for line in raw_lines[:-1]]  # every line parses: nothing torn
    assert records[0]["type"] == "session"
    entries = records[1:]
    ids = [entry["id"] for entry in entries]
    assert len(ids) == len(set(ids)), "an entry was written twice"
    assert sorted(ids) == sorted(acknowledged), "acknowledged entries missing or unacknowledged extras"
    id_set = set(ids)
    for entry in entries:
        assert entry["parentId"] is None or entry["parentId"] in id_set

    texts = [entry["message"]["content"] for entry in entries]
    for proc in range(PROCESSES):
        for run in range(RUNS):
            positions = [i for i, text in enumerate(texts) if text.startswith(f"run p{proc} r{run} ")]
            assert positions == list(range(positions[0], positions[0] + RUN_LENGTH)), (
                "a held run was interleaved"
            )

    index = load_transcript(transcript)
    assert not index.diagnostics.torn_tail
    assert not (tmp_path / "shared.jsonl.lock").exists()
