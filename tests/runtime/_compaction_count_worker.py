"""
One worker process of the compaction-count test (``test_runtime_open_race.py``).

``python _compaction_count_worker.py SESSIONS_DIR TURNS``: prints ``ready``, waits for ``go``, then runs
``TURNS`` turns on ``agent:main:main`` with prompts large enough for a 16000-token window to compact
every few turns (threshold compactions, summaries from a scripted model), and prints ``done``.
"""

from __future__ import annotations

import os
import sys

import anyio

from sessionkeeper import ModelResponse
from sessionkeeper.runtime import ModelInfo, SessionRuntime
from sessionkeeper.store import SessionStore
from sessionkeeper.testing import ScriptedModelClient
from sessionkeeper.transcript import AssistantMessage, TextContent


def summarise(_request: object) -> ModelResponse:
    return ModelResponse(text="## Decisions\n- summary " * 20)


async def main(directory: str, turns: int) -> None:
    async with SessionStore.open(directory) as store:
        runtime = SessionRuntime(
            store,
            model=ModelInfo(context_window=16_000),
            model_client=ScriptedModelClient(handler=summarise),
            cwd="/w",
        )
        print("ready", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)
        for turn in range(turns):
            session = await runtime.open("agent:main:main", body="hi")
            await runtime.before_model_call(session, prompt=f"question {turn} from {os.getpid()} " * 100)
            reply = AssistantMessage(
                content=[TextContent(text=f"reply {os.getpid()} " * 100)],
                api="anthropic-messages",
                provider="p",
                model="m",
            )
            await runtime.after_turn(session, messages=[reply])
        print("done", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], int(sys.argv[2]))
