"""
One worker process of the multi-worker kill test (``test_faults_multiworker.py``).

``python _multiworker_worker.py CONFIG_JSON``: opens the store (``SessionStore.open(url)``: its own
connection pool; transcripts in the same PostgreSQL database, or in ``transcripts_dir``), runs
``turns`` turns of the real :class:`SessionRuntime` loop on ``keys`` shared session keys (a scripted model
whose summaries make compactions land every few turns), and records each durable step in its ack file
(``O_APPEND``, one line each, after the step returned):

- ``T <sessionId> <entryId>``: an entry the runtime appended (the prompt, the reply);
- ``C <sessionId> <compactionId> <snapshotTip>``: a compaction it landed, and the last entry of the
  branch it was planned from (``session_before_compact``);
- ``S <sessionKey> <n>``: its counter field ``w<worker>`` on the key's store entry reached ``n``
  (``update_entry``: a read-modify-write under the store's row lock).

Worker 0 also runs the store maintenance (``run_maintenance``, enforce mode) every 5 turns. The worker
prints ``compacting`` (flushed) when its summariser is called, so the parent can kill it mid-compaction.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from typing import Any

import anyio

from sessionkeeper import ModelResponse
from sessionkeeper.exceptions import SessionBusyError
from sessionkeeper.hooks import HookRegistry, SessionBeforeCompactEvent, SessionCompactEvent
from sessionkeeper.runtime import ModelInfo, SessionRuntime
from sessionkeeper.store import SessionEntry, SessionStore, run_maintenance, session_entry_to_dict
from sessionkeeper.testing import ScriptedModelClient
from sessionkeeper.transcript import AssistantMessage, TextContent


def main(config: dict[str, Any]) -> None:
    worker: int = config["worker"]
    rng = random.Random(config["seed"])
    ack_fd = os.open(config["acks"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def ack(line: str) -> None:
        os.write(ack_fd, (line + "\n").encode())

    current = {"session": "", "tip": ""}

    def summarise(_request: object) -> ModelResponse:
        print("compacting", flush=True)
        time.sleep(config["summary_s"])  # a model call takes a while: the window a kill can hit
        return ModelResponse(text="## Decisions\n- summary of the turns so far " * 10)

    hooks = HookRegistry()

    def before(event: SessionBeforeCompactEvent) -> None:
        current["tip"] = event.branch_entries[-1].id if event.branch_entries else ""

    def landed(event: SessionCompactEvent) -> None:
        ack(f"C {current['session']} {event.compaction_entry.id} {current['tip']}")

    hooks.on(SessionBeforeCompactEvent, before)
    hooks.on(SessionCompactEvent, landed)
    field = f"w{worker}"

    def count(entry: SessionEntry) -> dict[str, Any]:
        raw = session_entry_to_dict(entry).get(field, 0)
        return {field: (raw if isinstance(raw, int) else 0) + 1}

    async def run() -> None:
        kwargs = {"transcripts_dir": config["transcripts_dir"]} if config["transcripts_dir"] else {}
        async with SessionStore.open(config["url"], **kwargs) as store:
            runtime = SessionRuntime(
                store,
                model=ModelInfo(context_window=16_000),
                model_client=ScriptedModelClient(handler=summarise),
                hooks=hooks,
                cwd="/w",
            )
            print("ready", flush=True)
            await anyio.to_thread.run_sync(sys.stdin.readline)
            turn = 0
            while turn < config["turns"]:
                key = f"agent:main:k{rng.randrange(config['keys'])}"
                try:
                    session = await runtime.open(key, body="hi")
                    current["session"] = session.transcript.session_id
                    plan = await runtime.before_model_call(
                        session, prompt=f"question {turn} from worker {worker} " + "pad " * 300
                    )
                except SessionBusyError:  # another worker's turn held the file lock past the timeout
                    continue
                if plan.prompt_entry is not None:
                    ack(f"T {current['session']} {plan.prompt_entry.id}")
                reply = AssistantMessage(
                    content=[TextContent(text=f"reply {turn} of worker {worker} " + "words " * 300)],
                    api="anthropic-messages",
                    provider="p",
                    model="m",
                )
                outcome = await runtime.after_turn(session, messages=[reply])
                for entry in outcome.entries:
                    ack(f"T {current['session']} {entry.id}")
                updated = await store.update_entry(key, count)
                if updated is not None:
                    ack(f"S {key} {session_entry_to_dict(updated)[field]}")
                if worker == 0 and turn % 5 == 4:
                    await run_maintenance(store, mode="enforce")
                turn += 1
        print("done", flush=True)

    anyio.run(run)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
