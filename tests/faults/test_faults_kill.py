"""
Crash safety under SIGKILL (DESIGN "Reliability and security targets"; pi-format spec §7.4).

A forked child appends turns to one transcript (through ``TranscriptManager``, under the write lock,
fsync per append), compacts it now and then (about one operation in ten: extractive summary, small
keep budget, landed under the lock) and rewrites a store file with ``atomic_write_bytes``; after each
durable write it records an acknowledgement in an ack file. The parent SIGKILLs it at a random moment,
then checks: every file still loads and its context rebuilds (pi's rules: a compaction on the path
starts the context with its summary), no acknowledged entry or store write is missing, and the next
append and the next compaction succeed (the parent writes through the lock, reclaiming the dead
child's lock file). Some entries are large (hundreds of KB, many pages) so a kill can tear a line
mid-write; some rounds start from a v1 file so a kill can hit the migration rewrite.

The default run makes ~30 kills; ``--run-slow`` runs the long version (hundreds).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import shutil
import signal
import time
from pathlib import Path

import anyio
import pytest
from tests._helpers import user

import sessionkeeper
from sessionkeeper._fs import atomic_write_bytes
from sessionkeeper.compaction import Compactor
from sessionkeeper.transcript import CompactionSummaryMessage, TranscriptManager, load_transcript
from sessionkeeper.transcript.lock._settings import WriteLockSettings


SAMPLES = Path(sessionkeeper.__file__).parent / "_samples"  # as installed (the wheel run has no src/)
LOCK_SETTINGS = WriteLockSettings(acquire_timeout_ms=10_000, watchdog_interval_ms=0)


TORN = b'{"type":"message","id":"deadbeef","parentId":null,"message":{"role":"us'
KEEP_TOKENS = 2_000
COMPACT_EVERY = 0.1  # share of the child's operations that are compactions


def _child(transcript: Path, store: Path, acks: Path, seed: int) -> None:
    """Append and store-write forever, acknowledging each durable write (runs in a forked child)."""
    rng = random.Random(seed)
    ack_fd = os.open(acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def ack(line: str) -> None:
        os.write(ack_fd, (line + "\n").encode())

    exists = transcript.exists()

    async def main() -> None:
        if exists:
            manager = await TranscriptManager.open(transcript)
        else:
            manager = await TranscriptManager.create(transcript, cwd="/work", session_id="fault-run")
        manager.write_lock_settings = LOCK_SETTINGS
        compactor = Compactor()
        counter = 0
        while True:
            counter += 1
            if rng.random() < COMPACT_EVERY:
                ack("A compaction started")
                result = await compactor.compact(manager, keep_recent_tokens=KEEP_TOKENS)
                if result.entry is not None:
                    ack(f"T {result.entry.id}")
                    ack(f"K {result.entry.id}")
                continue
            size = 300_000 if rng.random() < 0.03 else rng.choice([20, 200, 2_000, 20_000])
            entry = await manager.append_message(
                user(f"turn {seed}-{counter} " + "x" * size, ts=int(time.time() * 1000))
            )
            ack(f"T {entry.id}")
            if counter % 3 == 0:
                body = json.dumps({"seed": seed, "counter": counter, "pad": "y" * rng.choice([10, 50_000])})
                await anyio.to_thread.run_sync(atomic_write_bytes, store, body.encode())
                ack(f"S {seed} {counter}")

    anyio.run(main)


def _complete_lines(path: Path) -> list[str]:
    data = path.read_bytes() if path.exists() else b""
    return data.decode().split("\n")[:-1]  # the last piece is empty or an incomplete line


def _file_ids(transcript: Path) -> list[str]:
    ids = []
    for line in transcript.read_bytes().split(b"\n"):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn last line: skipped by loaders, repaired by the next append
        if isinstance(record, dict) and record.get("type") != "session" and "id" in record:
            ids.append(record["id"])
    return ids


def _wait_for_ack(acks: Path, child: multiprocessing.process.BaseProcess, limit_s: float = 10.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and child.is_alive():
        if acks.exists() and b"\n" in acks.read_bytes():
            return
        time.sleep(0.002)


async def _parent_append_and_compact(transcript: Path, text: str) -> tuple[str, str | None]:
    manager = await TranscriptManager.open(transcript)
    manager.write_lock_settings = LOCK_SETTINGS
    entry = await manager.append_message(user(text, ts=int(time.time() * 1000)))
    result = await Compactor().compact(manager, keep_recent_tokens=KEEP_TOKENS)
    assert result.status in ("compacted", "nothing_to_summarize", "ineffective"), result.status
    return entry.id, result.entry.id if result.entry is not None else None


def _check_context(index: object) -> bool:
    """The context rebuilds; with a compaction on the path it starts with that summary (pi §9)."""
    context = index.build_context()  # type: ignore[attr-defined]
    path = index.branch(index.leaf_id)  # type: ignore[attr-defined]
    compacted = any(type(entry).__name__ == "CompactionEntry" for entry in path)
    if compacted:
        assert isinstance(context.messages[0], CompactionSummaryMessage)
    return compacted


def _run_kills(tmp_path: Path, rounds: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    ctx = multiprocessing.get_context("fork")
    stats = {"kills": 0, "torn": 0, "acked": 0, "migrations": 0, "stale_locks": 0, "compactions": 0}
    stats |= {"empty_locks": 0, "max_after_kill_ms": 0}
    stats["compacted_contexts"] = stats["compaction_attempts"] = 0
    transcript = tmp_path / "sessions" / "run.jsonl"
    store = tmp_path / "sessions" / "sessions.json"
    acks = tmp_path / "acks.txt"
    transcript.parent.mkdir(mode=0o700)
    acked_entries: list[str] = []
    for round_no in range(rounds):
        if round_no % 10 == 5:  # start over from a legacy v1 file: the first write migrates it
            stats["migrations"] += 1
            transcript = tmp_path / "sessions" / f"legacy-{round_no}.jsonl"
            shutil.copyfile(SAMPLES / "v1-legacy.jsonl", transcript)
            acked_entries = []
            acks.unlink(missing_ok=True)
        if round_no % 7 == 3 and transcript.exists():  # a writer died mid-line (power loss, NFS, ...)
            with transcript.open("ab") as fh:
                fh.write(TORN)
            torn = load_transcript(transcript).diagnostics.torn_tail
            assert torn is not None  # loads, with the fragment reported and skipped
            stats["torn"] += 1
        child = ctx.Process(target=_child, args=(transcript, store, acks, seed * 1000 + round_no))
        child.start()
        if round_no % 3 == 0:  # anywhere, start-up and a pending v1 migration included
            time.sleep(rng.uniform(0.0, 0.08))
        else:  # inside the write loop: after the first acknowledgement, however loaded the machine is
            _wait_for_ack(acks, child)
            time.sleep(rng.uniform(0.0, 0.05))
        os.kill(child.pid or 0, signal.SIGKILL)
        child.join()
        stats["kills"] += 1

        # 1. every file still loads
        if not transcript.exists():
            continue
        index = load_transcript(transcript)
        stats["compacted_contexts"] += _check_context(index)
        if store.exists():
            stored = json.loads(store.read_bytes())
            assert isinstance(stored, dict)

        # 2. no acknowledged write is missing
        lines = _complete_lines(acks)
        new_acks = [line.split()[1] for line in lines if line.startswith("T ")]
        stats["compactions"] += sum(line.startswith("K ") for line in lines)
        stats["compaction_attempts"] += sum(line.startswith("A ") for line in lines)
        acked_entries += new_acks
        stats["acked"] += len(new_acks)
        ids = _file_ids(transcript)
        present = set(ids)
        missing = [entry_id for entry_id in acked_entries if entry_id not in present]
        assert not missing, f"round {round_no}: acknowledged entries lost: {missing[:5]}"
        assert len(ids) == len(present), f"round {round_no}: duplicated entries"
        for entry_id in acked_entries:
            assert index.by_id.get(entry_id) is not None
        stores = [line.split() for line in lines if line.startswith("S ")]
        if stores:
            _, last_seed, last_counter = stores[-1]
            stored = json.loads(store.read_bytes())
            assert stored["seed"] == int(last_seed)
            assert stored["counter"] >= int(last_counter)
        acks.unlink(missing_ok=True)

        # 3. the next append and compaction succeed (through the lock; a dead child's lock is reclaimed)
        lock = transcript.with_name(transcript.name + ".lock")
        if lock.exists():
            stats["stale_locks"] += 1
            # a lock appears complete or not at all: a kill never leaves an empty, owner-less one
            stats["empty_locks"] += lock.stat().st_size == 0
        started = time.monotonic()
        new_id, compaction_id = anyio.run(_parent_append_and_compact, transcript, f"after kill {round_no}")
        elapsed_ms = round((time.monotonic() - started) * 1000)
        stats["max_after_kill_ms"] = max(stats["max_after_kill_ms"], elapsed_ms)
        acked_entries += [new_id] if compaction_id is None else [new_id, compaction_id]
        assert set(acked_entries) <= set(_file_ids(transcript))
        _check_context(load_transcript(transcript))
        assert not transcript.with_name(transcript.name + ".lock").exists()
        assert TORN not in transcript.read_bytes()  # a torn fragment never survives the next append
    return stats


def test_sigkill_during_appends_and_store_writes_loses_nothing(tmp_path: Path) -> None:
    stats = _run_kills(tmp_path, rounds=30, seed=7)
    assert stats["kills"] == 30
    assert stats["empty_locks"] == 0
    assert stats["acked"] >= 20  # two rounds in three kill only after the first acknowledgement
    assert stats["torn"] == 4  # each injected fragment loaded as a torn tail, then was cut by the next append
    assert stats["compaction_attempts"] > 0  # the child compacted between kills (some were cut by the kill)
    assert stats["compacted_contexts"] > 0  # a kill found a compacted transcript and rebuilt its context


@pytest.mark.slow
def test_sigkill_long_run(tmp_path: Path) -> None:
    stats = _run_kills(tmp_path, rounds=300, seed=int(os.environ.get("FAULT_SEED", "11")))
    print(f"sigkill long run figures: {stats}")  # quoted in reports (shown with -rP)
    assert stats["kills"] == 300
    assert stats["empty_locks"] == 0
    assert stats["torn"] > 0
    assert stats["compaction_attempts"] > 0
