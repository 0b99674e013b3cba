"""
Several worker processes on one PostgreSQL database, some SIGKILLed mid-append or mid-compaction (issue
13's proof): N processes (each its own connection pool) x T turns of the real ``SessionRuntime`` loop on K
shared session keys, with threshold compactions (scripted summaries) and store maintenance. Then:

- every acknowledged entry is in its transcript exactly once, and every parent link points to an
  entry written before it;
- no two compactions landed from one snapshot: the path from each acknowledged compaction back to the
  tip it was planned from holds no other compaction, and no two share a tip;
- no store update was lost: each worker's counter field on each key equals its acknowledged count
  (one more at most for a killed worker, whose last update may have committed unacknowledged);
- pi loads every exported transcript with the context we compute (the pi oracle).

Two configurations: the store and the transcripts in PostgreSQL (``SessionStore.open(url)``), and the
store in PostgreSQL with pi JSONL transcripts in a shared directory (``transcripts_dir``). The default run
is CI-sized (4 workers x 25 turns x 5 keys, 2 kills); ``--run-slow`` runs 8 x 200 x 20 with 4 kills.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests._pi_oracle import PiOracle, pi_oracle
from tests._servers import pg_schema

from sessionkeeper.store import PostgresTranscriptStorage
from sessionkeeper.transcript import TranscriptManager


__all__ = ("pg_schema", "pi_oracle")
WORKER = Path(__file__).with_name("_multiworker_worker.py")
REPO = Path(__file__).resolve().parents[2]


def _sizes(request: pytest.FixtureRequest) -> dict[str, int]:
    if request.config.getoption("--run-slow"):
        return {"workers": 8, "turns": 200, "keys": 20, "kills": 4}
    return {"workers": 4, "turns": 25, "keys": 5, "kills": 2}


def _killer(proc: subprocess.Popen[str], acks: Path, *, mode: str, after: int, rng: random.Random) -> None:
    """Kill ``proc`` mid-compaction (at its ``after``-th summary call) or mid-append (``after`` acks in)."""
    assert proc.stdout is not None
    if mode == "compaction":
        seen = 0
        for line in proc.stdout:
            if line.strip() == "compacting":
                seen += 1
                if seen >= after:
                    time.sleep(rng.uniform(0.0, 0.04))  # inside the summary, or just after it
                    break
        else:
            return  # finished first
    else:
        deadline = time.monotonic() + 3000
        while time.monotonic() < deadline and proc.poll() is None:
            if acks.exists() and acks.read_bytes().count(b"\nT ") >= after:
                break
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, 0.02))
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)


def _run_workers(tmp_path: Path, url: str, transcripts_dir: str | None, sizes: dict[str, int]) -> set[int]:
    rng = random.Random(13)
    procs: list[subprocess.Popen[str]] = []
    for worker in range(sizes["workers"]):
        config = {
            "worker": worker,
            "seed": 1000 + worker,
            "acks": str(tmp_path / f"acks-{worker}.txt"),
            "url": url,
            "transcripts_dir": transcripts_dir,
            "turns": sizes["turns"],
            "keys": sizes["keys"],
            "summary_s": 0.05,
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, str(WORKER), json.dumps(config)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=REPO,
            )
        )
    victims = rng.sample(range(1, sizes["workers"]), sizes["kills"])  # worker 0 runs the maintenance
    threads = []
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        for number, worker in enumerate(victims):
            mode = "compaction" if number % 2 == 0 else "append"
            after = 1 if mode == "compaction" else rng.randint(5, sizes["turns"])
            thread = threading.Thread(
                target=_killer,
                args=(procs[worker], tmp_path / f"acks-{worker}.txt"),
                kwargs={"mode": mode, "after": after, "rng": random.Random(worker)},
            )
            thread.start()
            threads.append(thread)
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for thread in threads:
            thread.join(3000)
        killed: set[int] = set()
        for worker, proc in enumerate(procs):
            out, _ = proc.communicate(timeout=3000)
            if proc.returncode == -signal.SIGKILL:
                killed.add(worker)
            else:
                assert proc.returncode == 0, f"worker {worker} failed"
                assert worker in victims or out.strip().endswith("done")  # a killer read a victim's output
        return killed
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=60)


def _acks(tmp_path: Path, workers: int) -> list[list[list[str]]]:
    """Each worker's complete ack lines, split (a line torn by the kill is left out)."""
    out = []
    for worker in range(workers):
        path = tmp_path / f"acks-{worker}.txt"
        data = path.read_text() if path.exists() else ""
        out.append([line.split() for line in data.split("\n")[:-1]])
    return out


def _file_transcripts(transcripts_dir: str) -> dict[str, list[bytes]]:
    return {
        path.stem: path.read_bytes().split(b"\n")[:-1]
        for path in sorted(Path(transcripts_dir).glob("*.jsonl"))
    }


async def _pg_transcripts(url: str, schema: str) -> dict[str, list[bytes]]:
    dsn = url.split("?", 1)[0]
    async with PostgresTranscriptStorage(dsn, schema=schema, store_id="multi", max_size=2) as storage:
        return {sid: (await storage.read(sid))[0] for sid in await storage.list_sessions()}


async def _store_entries(url: str) -> dict[str, dict[str, Any]]:
    from sessionkeeper.store import SessionStore, session_entry_to_dict

    async with SessionStore.open(url) as store:
        return {key: session_entry_to_dict(entry) for key, entry in (await store.backend.load_all()).items()}


def _check(
    tmp_path: Path, url: str, *, transcripts_dir: str | None, schema: str, workers: int, killed: set[int]
) -> dict[str, Path]:
    acks = _acks(tmp_path, workers)
    transcripts = (
        _file_transcripts(transcripts_dir)
        if transcripts_dir is not None
        else anyio.run(_pg_transcripts, url, schema, backend="asyncio")
    )
    parents: dict[str, dict[str, str | None]] = {}
    for session_id, lines in transcripts.items():
        seen: dict[str, str | None] = {}
        for line in lines[1:]:
            record = json.loads(line)
            assert record["id"] not in seen, f"{session_id}: entry {record['id']} written twice"
            parent = record.get("parentId")
            assert parent is None or parent in seen, (
                f"{session_id}: {record['id']} hangs from unknown {parent}"
            )
            seen[record["id"]] = parent
            if record["type"] == "compaction":
                seen[record["id"] + ":compaction"] = None
        parents[session_id] = seen

    acked_entries = [(a[1], a[2]) for lines in acks for a in lines if a[0] == "T"]
    assert acked_entries, "no turn was acknowledged"
    for session_id, entry_id in acked_entries:
        assert entry_id in parents.get(session_id, {}), f"acknowledged {session_id}/{entry_id} is missing"
    assert len(set(acked_entries)) == len(acked_entries)

    compactions = [(a[1], a[2], a[3]) for lines in acks for a in lines if a[0] == "C"]
    assert compactions, "no compaction landed"
    tips = [(session_id, tip) for session_id, _, tip in compactions]
    assert len(set(tips)) == len(tips), "two compactions landed from one snapshot"
    for session_id, compaction_id, tip in compactions:
        tree = parents[session_id]
        node = tree[compaction_id]  # walk back from the compaction's parent to the planned tip
        while node is not None and node != tip:
            assert node + ":compaction" not in tree, f"{compaction_id} landed over compaction {node}"
            node = tree[node]
        assert node == tip, f"{compaction_id} does not descend from its snapshot {tip}"

    entries = anyio.run(_store_entries, url, backend="asyncio")
    for worker, lines in enumerate(acks):
        counted: dict[str, int] = defaultdict(int)
        for a in lines:
            if a[0] == "S":
                counted[a[1]] = max(counted[a[1]], int(a[2]))
        for key, value in counted.items():
            stored = entries[key].get(f"w{worker}", 0)
            if worker in killed:
                assert value <= stored <= value + 1, (worker, key, value, stored)
            else:
                assert stored == value, (worker, key, value, stored)

    exported = {}
    for session_id, lines in transcripts.items():
        path = tmp_path / "export" / f"{session_id}.jsonl"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"".join(line + b"\n" for line in lines))
        exported[session_id] = path
    return exported


def _pi_agrees(pi_oracle: PiOracle, exported: dict[str, Path]) -> None:
    for session_id, path in exported.items():
        manager = anyio.run(TranscriptManager.open, path)
        ours = manager.build_session_context().to_json()
        assert pi_oracle.context(path) == ours, session_id


@pytest.mark.oracle
@pytest.mark.timeout(3600)  # the --run-slow size takes minutes on a loaded box; the default one under 1
@pytest.mark.parametrize("transcripts", ["postgres", "files"])
def test_workers_killed_mid_append_and_mid_compaction_lose_nothing(
    transcripts: str,
    pg_schema: tuple[str, str],
    pi_oracle: PiOracle,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    dsn, schema = pg_schema
    sizes = _sizes(request)
    url = f"{dsn}?schema={schema}&store=multi"
    transcripts_dir = str(tmp_path / "sessions") if transcripts == "files" else None
    killed = _run_workers(tmp_path, url, transcripts_dir, sizes)
    assert killed, "no worker was killed"
    exported = _check(
        tmp_path, url, transcripts_dir=transcripts_dir, schema=schema, workers=sizes["workers"], killed=killed
    )
    _pi_agrees(pi_oracle, exported)
