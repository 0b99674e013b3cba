"""
Our PostgreSQL backend side by side with the peers' PostgreSQL sessions on the same server (issue 13).

Run: ``python -m benchmarks postgres_peers [--turns T] [--workers 1,8,64] [--history 2000,20000]
[--repeat R] [--json]``.

The peers are pinned (``PEER_REQUIREMENTS``) and installed on first use into their own venv,
``benchmarks/.data/pg-peers-venv`` (git-ignored; rebuilt when a pin changes); their side runs in a
subprocess of that venv, ours in this process, one after the other (with ``--repeat``, R runs of each,
alternating, in a rotated order) on the same PostgreSQL (``$SESSIONKEEPER_TEST_POSTGRES_DSN``, default
``postgresql://127.0.0.1:5432/test``), each in a schema of its own, dropped afterwards. Every side gets
a pool of 16 connections.

- **Turns.** W concurrent workers (asyncio tasks, one session each), T turns each. A turn is what a
  host does per model call, durably: ours, the real ``SessionRuntime`` turn (``open`` the key: store
  entry resolved and transcript read; ``before_model_call`` with the prompt: context rebuilt, prompt
  appended; ``after_turn`` with the reply: reply appended, store entry updated), with the store and the
  transcripts in PostgreSQL (``PostgresStoreBackend`` + ``PostgresTranscriptStorage``); openai-agents
  ``SQLAlchemySession`` (asyncpg): ``get_items()`` then ``add_items([user, assistant])``; LangGraph
  ``AsyncPostgresSaver`` (psycopg): ``aget_tuple`` then one ``aput`` of the next checkpoint with the two
  messages added to its ``messages`` channel (a graph writes one per super-step, at least two per turn:
  this counts one). Appends/s counts two per turn (prompt and reply). p50/p99: per-turn latency.
- **Context rebuild** at H entries with a compaction near the end (kept: the last ~40 entries): ours,
  ``PostgresTranscriptStorage.read_live`` + load + ``build_session_context`` (reads from the latest
  compaction's kept entry on); theirs, the whole history they hold (``get_items()``; ``aget_tuple`` of a
  checkpoint whose ``messages`` hold H messages): neither peer has a compaction to start from.

Ratios: throughput ours / theirs (above 1 is faster); latency and rebuild ours / theirs (under 1 is faster).
Target (issue 13): at least 2x their turn throughput at 8 workers; rebuild flat in history.

Two runs on the shared 2-core box (``--turns 10 --repeat 3``: each side three times per worker count,
alternating, medians shown; 2026-12-02 12:18-12:20 and 12:20-12:23 UTC, load average 3-5 from other
jobs; ratios move by about a third between runs, absolute numbers more: the same 8-worker turn loop did
109-128 turns/s in these runs and 243 turns/s a minute later at load 2)::

    PostgreSQL postgresql://127.0.0.1:5432/test; 10 turns per worker; pool 16; medians of 3 run(s)
    openai-agents==0.24.0, SQLAlchemy==2.1.9, langgraph-checkpoint-postgres==3.2.0
    row                       |      ours | SQLAlchemy | LangGraph | vs SQLA |  vs LG
    ---------------------------------------------------------------------------------
    turns/s, 1 workers        |      92.9 |      131.8 |      96.0 |   0.70x |  0.97x
    appends/s, 1 workers      |     185.7 |      263.5 |     191.9 |   0.70x |  0.97x
    p50 turn ms, 1 w          |      11.3 |        6.9 |       9.2 |   1.65x |  1.24x
    p99 turn ms, 1 w          |      20.0 |       20.4 |      15.4 |   0.98x |  1.30x
    turns/s, 8 workers        |     109.1 |      117.1 |     132.5 |   0.93x |  0.82x
    appends/s, 8 workers      |     218.2 |      234.2 |     264.9 |   0.93x |  0.82x
    p50 turn ms, 8 w          |      66.7 |       54.9 |      45.3 |   1.21x |  1.47x
    p99 turn ms, 8 w          |     295.1 |      323.9 |     134.2 |   0.91x |  2.20x
    turns/s, 64 workers       |     234.1 |      195.0 |     324.7 |   1.20x |  0.72x
    appends/s, 64 workers     |     468.1 |      390.0 |     649.3 |   1.20x |  0.72x
    p50 turn ms, 64 w         |     259.0 |       87.5 |     121.3 |   2.96x |  2.14x
    p99 turn ms, 64 w         |     382.4 |     2723.0 |     412.1 |   0.14x |  0.93x
    rebuild ms, 2000 entries  |       2.5 |       11.6 |       7.9 |   0.22x |  0.32x
    rebuild ms, 20000 entries |       2.0 |      230.4 |      65.7 |   0.01x |  0.03x

    second run, 12:20-12:23 UTC:
    turns/s, 1 workers        |      58.2 |       57.0 |     113.0 |   1.02x |  0.52x
    appends/s, 1 workers      |     116.4 |      114.0 |     226.1 |   1.02x |  0.52x
    p50 turn ms, 1 w          |      14.4 |       13.1 |       7.4 |   1.10x |  1.95x
    p99 turn ms, 1 w          |      38.5 |       44.2 |      20.7 |   0.87x |  1.85x
    turns/s, 8 workers        |     128.3 |      168.6 |     150.4 |   0.76x |  0.85x
    appends/s, 8 workers      |     256.6 |      337.2 |     300.8 |   0.76x |  0.85x
    p50 turn ms, 8 w          |      53.3 |       23.3 |      53.7 |   2.29x |  0.99x
    p99 turn ms, 8 w          |     133.5 |      289.3 |      71.1 |   0.46x |  1.88x
    turns/s, 64 workers       |     275.9 |      218.1 |     203.9 |   1.26x |  1.35x
    appends/s, 64 workers     |     551.7 |      436.3 |     407.9 |   1.26x |  1.35x
    p50 turn ms, 64 w         |     216.9 |       69.6 |     320.1 |   3.12x |  0.68x
    p99 turn ms, 64 w         |     377.1 |     2401.0 |     370.0 |   0.16x |  1.02x
    rebuild ms, 2000 entries  |       2.5 |       17.6 |      14.7 |   0.14x |  0.17x
    rebuild ms, 20000 entries |       3.1 |      456.9 |     136.2 |   0.01x |  0.02x

**The throughput target is still missed**: ours is 0.76-0.93x SQLAlchemySession and 0.82-0.85x
AsyncPostgresSaver at 8 workers (0.70-1.02x and 0.52-0.97x at 1, 1.20-1.26x and 0.72-1.35x at 64), not
2x. The run before the changes below measured 0.82x and 0.88x at 8 workers, 0.44-0.46x at 1 and
0.72-0.74x at 64 (11:40 UTC, load 5-8): ours went from 30 to 58-93 turns/s at 1 worker, 93 to 109-128
at 8 and 75 to 234-276 at 64, while the peers' own numbers moved with the box's load.

What changed (statements counted on psycopg, ``tests/_pg_statements.py``; pinned by
``tests/runtime/test_runtime_postgres_round_trips.py``): a turn waited for 4 durable commits (a commit
is a WAL flush, 6.4 ms on this box against 0.03 ms for a read round trip): the store entry's
``resolve``, the prompt's append, the reply's append and the usage update. It now waits for 2: the
prompt's append, and the reply's append carrying the usage update in the same transaction (an
``EntryRider`` landed by ``PostgresTranscriptStorage.append_carrying``: ``BEGIN``, the append and the
entry's ``SELECT ... FOR UPDATE`` in one pipeline sync, the entry's compare-and-swap with ``COMMIT``).
The ``resolve`` that reuses the entry still writes its activity stamp (``updatedAt``,
``lastInteractionAt``, as OpenClaw's ``initSessionState`` does), but commits it with
``synchronous_commit`` off (visible at once, durable with the prompt's append right after it;
``docs/postgres.md`` "Commits per turn"). Still 7 statements and 4 transactions per turn.

Where the 8-worker time goes now: this process's CPU. With 8 workers it is busy about two thirds of the
wall time (2.9 ms of CPU per turn at 8 workers, 5.2 ms at 1, measured with ``getrusage`` around 160
turns at load 2, 12:23 UTC), on a box whose two cores it shares with the server and other jobs; the
peers' turn is one read and one write statement with little Python around it. The next levers: less
Python per turn (psycopg's pipeline machinery and the runtime's steps), and in-process group commit
(concurrent sessions' appends in one transaction, not built). ``open`` still reads every line of the
transcript (one statement; the benchmark's transcripts are 20-60 lines): reading only the live part
(``read_live``) into the runtime's ``TranscriptManager`` is not exact yet: new entry ids are drawn
unique against the loaded entries (an id used before the kept entry could be drawn again), the
cache-TTL pruning reads the newest ``openclaw.cache-ttl`` marker and prune records of the whole
transcript (right after a compaction they can precede the kept entry), and hosts get
``session.transcript`` with the whole history.

**Context rebuild** is 0.14-0.22x SQLAlchemySession and 0.17-0.32x AsyncPostgresSaver at 2k entries,
0.01-0.03x at 20k, and flat in history (2.0-3.1 ms at both sizes, the same 40 live lines). Right after a
fast fill it stays flat too: with the lines table's statistics taken on a 100-entry transcript and its
autovacuum off, ``read_live`` took 5.1 ms at 2k and 5.8 ms at 20k (11:34 UTC); the plans are index
probes (``tests/store/test_store_postgres_transcript_reads.py`` checks none of its statements plans a
sequential scan on statistics older than a burst).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from sessionkeeper.runtime import ModelInfo, SessionRuntime
from sessionkeeper.store import PostgresStoreBackend, PostgresTranscriptStorage, SessionStore
from sessionkeeper.transcript import (
    AssistantMessage,
    TextContent,
    TranscriptManager,
    UserMessage,
    load_transcript_bytes,
)


REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "benchmarks" / ".data"
PEER_VENV = DATA / "pg-peers-venv"
PEER_REQUIREMENTS = (
    "openai-agents==0.24.0",
    "SQLAlchemy==2.1.9",
    "greenlet==3.5.6",
    "asyncpg==0.32.0",
    "langgraph-checkpoint==4.3.2",
    "langgraph-checkpoint-postgres==3.2.0",
    "psycopg[binary]==3.3.9",
    "psycopg-pool==3.3.3",
)
DSN = os.environ.get("SESSIONKEEPER_TEST_POSTGRES_DSN", "postgresql://127.0.0.1:5432/test")
POOL = 16
PROMPT = "What changed in the deployment since yesterday? " * 8
REPLY = "The rollout moved the API to the new cluster and the cache TTL went to 10 minutes. " * 6

_PEER_SCRIPT = r"""
import asyncio, json, statistics, sys, time, uuid
from urllib.parse import urlsplit

dsn, schema, kind, workers, turns, history = sys.argv[1:7]
workers, turns, history = int(workers), int(turns), [int(h) for h in history.split(",") if h]
PROMPT, REPLY = sys.argv[7], sys.argv[8]
POOL = 16

def user(i): return {"role": "user", "content": f"{PROMPT} {i}"}
def reply(i): return {"role": "assistant", "content": f"{REPLY} {i}"}

def pct(samples, q):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

async def timed_workers(turn, workers, turns):
    lat = []
    async def worker(w):
        for t in range(turns):
            start = time.perf_counter()
            await turn(w, t)
            lat.append((time.perf_counter() - start) * 1000)
    start = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(workers)))
    elapsed = time.perf_counter() - start
    return {"turns_s": workers * turns / elapsed, "p50": statistics.median(lat), "p99": pct(lat, 0.99)}

async def sqlalchemy():
    from sqlalchemy.ext.asyncio import create_async_engine
    from agents.extensions.memory import SQLAlchemySession
    parts = urlsplit(dsn)
    url = f"postgresql+asyncpg://{parts.netloc}{parts.path}"
    engine = create_async_engine(url, pool_size=POOL, max_overflow=0,
                                 connect_args={"server_settings": {"search_path": schema}})
    out = {}
    run = uuid.uuid4().hex[:8]
    sessions = {}
    def session(name):
        if name not in sessions:
            sessions[name] = SQLAlchemySession(name, engine=engine, create_tables=True)
        return sessions[name]
    await session("warm").add_items([user(0)])
    async def turn(w, t):
        s = session(f"{run}-{w}")
        await s.get_items()
        await s.add_items([user(t), reply(t)])
    out["turns"] = await timed_workers(turn, workers, turns)
    rebuild = {}
    for h in history:
        s = session(f"{run}-history-{h}")
        items = [user(i) if i % 2 == 0 else reply(i) for i in range(h)]
        for i in range(0, h, 1000):
            await s.add_items(items[i:i + 1000])
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            got = await s.get_items()
            samples.append((time.perf_counter() - start) * 1000)
        assert len(got) == h
        rebuild[h] = statistics.median(samples)
    out["rebuild"] = rebuild
    await engine.dispose()
    return out

async def langgraph():
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool
    from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    pool = AsyncConnectionPool(dsn, max_size=POOL, open=False, kwargs={
        "autocommit": True, "prepare_threshold": 0, "row_factory": dict_row,
        "options": f"-c search_path={schema}"})
    await pool.open()
    saver = AsyncPostgresSaver(pool)
    await saver.setup()
    run = uuid.uuid4().hex[:8]

    async def put(thread, messages, step):
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        found = await saver.aget_tuple(config)
        base = found.checkpoint if found is not None else empty_checkpoint()
        version = int(base["channel_versions"].get("messages", 0)) + 1
        checkpoint = create_checkpoint(base, None, step)
        checkpoint["channel_values"] = {"messages": messages(found)}
        checkpoint["channel_versions"] = {"messages": version}
        parent = found.config if found is not None else config
        await saver.aput(parent, checkpoint, {"source": "loop", "step": step}, {"messages": version})

    def appended(t):
        def messages(found):
            before = found.checkpoint["channel_values"].get("messages", []) if found is not None else []
            return [*before, user(t), reply(t)]
        return messages

    async def turn(w, t):
        await put(f"{run}-{w}", appended(t), t)

    out = {"turns": await timed_workers(turn, workers, turns)}
    rebuild = {}
    for h in history:
        thread = f"{run}-history-{h}"
        items = [user(i) if i % 2 == 0 else reply(i) for i in range(h)]
        await put(thread, lambda found: items, 1)
        config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            got = await saver.aget_tuple(config)
            samples.append((time.perf_counter() - start) * 1000)
        assert len(got.checkpoint["channel_values"]["messages"]) == h
        rebuild[h] = statistics.median(samples)
    out["rebuild"] = rebuild
    await pool.close()
    return out

print(json.dumps(asyncio.run(sqlalchemy() if kind == "sqlalchemy" else langgraph())))
"""


def ensure_peer_venv() -> Path:
    """The peers venv's python, built (``venv`` + ``pip install`` the pins) when missing or stale."""
    python = PEER_VENV / "bin" / "python"
    stamp = PEER_VENV / "requirements.txt"
    wanted = "\n".join(PEER_REQUIREMENTS)
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    if PEER_VENV.exists():
        shutil.rmtree(PEER_VENV)
    DATA.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *PEER_REQUIREMENTS], check=True)
    stamp.write_text(wanted)
    return python


def _schema(name: str, *, drop: bool) -> None:
    with psycopg.connect(DSN, autocommit=True) as conn:
        if drop:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
        else:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _our_turns(schema: str, workers: int, turns: int) -> dict[str, float]:
    backend = PostgresStoreBackend(DSN, schema=schema, store_id="bench", max_size=POOL)
    async with SessionStore(backend) as store:
        runtime = SessionRuntime(store, model=ModelInfo(context_window=200_000), cwd="/w")
        run = uuid.uuid4().hex[:8]
        warm = await runtime.open(f"agent:main:warm-{run}", body="hi")
        await runtime.before_model_call(warm, prompt="warm up")
        latencies: list[float] = []

        async def worker(w: int) -> None:
            key = f"agent:main:{run}-{w}"
            for t in range(turns):
                start = time.perf_counter()
                session = await runtime.open(key, body="hi")
                await runtime.before_model_call(session, prompt=f"{PROMPT} {t}")
                reply = AssistantMessage(
                    content=[TextContent(text=f"{REPLY} {t}")],
                    api="anthropic-messages",
                    provider="p",
                    model="m",
                )
                await runtime.after_turn(session, messages=[reply])
                latencies.append((time.perf_counter() - start) * 1000)

        start = time.perf_counter()
        await asyncio.gather(*(worker(w) for w in range(workers)))
        elapsed = time.perf_counter() - start
    return {
        "turns_s": workers * turns / elapsed,
        "p50": statistics.median(latencies),
        "p99": _pct(latencies, 0.99),
    }


async def _our_rebuild(schema: str, history: int) -> float:
    async with PostgresTranscriptStorage(
        DSN, schema=schema, store_id=f"rebuild-{history}", max_size=4
    ) as storage:
        manager = await TranscriptManager.create_in(storage, cwd="/w")
        kept_at = history - 40
        kept_id = ""
        batch: list[Any] = []
        for i in range(history - 11):
            if i % 2 == 0:
                batch.append(UserMessage(content=f"{PROMPT} {i}", timestamp=1))
            else:
                batch.append(
                    AssistantMessage(
                        content=[TextContent(text=f"{REPLY} {i}")],
                        api="anthropic-messages",
                        provider="p",
                        model="m",
                    )
                )
            if len(batch) == 500 or i == kept_at or i == history - 12:
                written = await manager.append_messages(batch)
                batch = []
                if i == kept_at:
                    kept_id = written[-1].id
        await manager.append_compaction(
            summary="## Decisions\n- earlier work", first_kept_entry_id=kept_id, tokens_before=1
        )
        for i in range(10):
            await manager.append_message(UserMessage(content=f"after the compaction {i}", timestamp=1))
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            live = await storage.read_live(manager.session_id)
            context = load_transcript_bytes(live.jsonl()).build_context()
            samples.append((time.perf_counter() - start) * 1000)
        assert len(context.messages) == 1 + (history - 11 - kept_at) + 10  # summary, kept, after it
    return statistics.median(samples)


def _theirs(python: Path, kind: str, workers: int, turns: int, history: list[int]) -> dict[str, Any]:
    schema = f"bench_{kind}_{uuid.uuid4().hex[:8]}"
    _schema(schema, drop=False)
    try:
        proc = subprocess.run(
            [
                str(python),
                "-c",
                _PEER_SCRIPT,
                DSN,
                schema,
                kind,
                str(workers),
                str(turns),
                ",".join(map(str, history)),
                PROMPT,
                REPLY,
            ],
            check=False,
            capture_output=True,
            text=True,
        )
    finally:
        _schema(schema, drop=True)
    if proc.returncode != 0:
        raise RuntimeError(f"the {kind} side failed (exit {proc.returncode}):\n{proc.stderr}")
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def _ours(workers: int, turns: int, history: list[int]) -> dict[str, Any]:
    schema = f"bench_ours_{uuid.uuid4().hex[:8]}"
    try:
        out: dict[str, Any] = {"turns": asyncio.run(_our_turns(schema, workers, turns))}
        out["rebuild"] = {str(h): asyncio.run(_our_rebuild(schema, h)) for h in history}
    finally:
        _schema(schema, drop=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(
        description="PostgreSQL backend vs SQLAlchemySession and AsyncPostgresSaver"
    )
    parser.add_argument("--turns", type=int, default=20, help="turns per worker")
    parser.add_argument("--workers", default="1,8,64", help="concurrent workers, comma-separated")
    parser.add_argument("--history", default="2000,20000", help="entries of the rebuild rows")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs of each side per worker count, alternating, the order rotated (medians are shown)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    python = ensure_peer_venv()
    counts = [int(w) for w in args.workers.split(",")]
    history = [int(h) for h in args.history.split(",")]
    kinds = ["ours", "sqlalchemy", "langgraph"]
    results: dict[str, dict[str, Any]] = {kind: {} for kind in kinds}
    for index, workers in enumerate(counts):
        runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
        for repeat in range(args.repeat):
            rebuild = history if index == 0 and repeat == 0 else []
            for kind in kinds[repeat % 3 :] + kinds[: repeat % 3]:  # drift of the box spread over sides
                if kind == "ours":
                    runs[kind].append(_ours(workers, args.turns, rebuild))
                else:
                    runs[kind].append(_theirs(python, kind, workers, args.turns, rebuild))
        for kind in kinds:
            turns = {
                stat: statistics.median(run["turns"][stat] for run in runs[kind])
                for stat in ("turns_s", "p50", "p99")
            }
            results[kind][str(workers)] = {**runs[kind][0], "turns": turns}
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"PostgreSQL {DSN}; {args.turns} turns per worker; pool {POOL}; medians of {args.repeat} run(s)")
    print(", ".join(PEER_REQUIREMENTS[:2] + PEER_REQUIREMENTS[5:6]))
    header = f"{'row':<26}|{'ours':>10} |{'SQLAlchemy':>11} |{'LangGraph':>10} |{'vs SQLA':>8} |{'vs LG':>7}"
    print(header)
    print("-" * len(header))

    def row(name: str, ours: float, sqla: float, lg: float) -> None:
        print(
            f"{name:<26}|{ours:>10.1f} |{sqla:>11.1f} |{lg:>10.1f} |{ours / sqla:>7.2f}x |{ours / lg:>6.2f}x"
        )

    for workers in counts:
        o, s, g = (results[k][str(workers)]["turns"] for k in ("ours", "sqlalchemy", "langgraph"))
        row(f"turns/s, {workers} workers", o["turns_s"], s["turns_s"], g["turns_s"])
        row(f"appends/s, {workers} workers", 2 * o["turns_s"], 2 * s["turns_s"], 2 * g["turns_s"])
        row(f"p50 turn ms, {workers} w", o["p50"], s["p50"], g["p50"])
        row(f"p99 turn ms, {workers} w", o["p99"], s["p99"], g["p99"])
    first = str(counts[0])
    for h in history:
        o, s, g = (float(results[k][first]["rebuild"][str(h)]) for k in ("ours", "sqlalchemy", "langgraph"))
        row(f"rebuild ms, {h} entries", o, s, g)
    return 0
