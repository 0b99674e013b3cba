"""
One worker process of the several-writers-on-one-key tests (``test_runtime_open_race.py``).

``python _open_race_worker.py STORE TRANSCRIPTS_DIR NAME``: opens ``STORE`` (a sessions directory, or a
``postgresql://`` URL whose transcripts live in ``TRANSCRIPTS_DIR``; ``-`` for none), prints ``ready``,
waits for ``go`` on stdin, then opens ``agent:main:main`` and runs one turn (prompt ``hello from NAME``),
and prints the session id it used.
"""

from __future__ import annotations

import sys

import anyio

from sessionkeeper.runtime import ModelInfo, SessionRuntime
from sessionkeeper.store import SessionStore
from sessionkeeper.transcript import AssistantMessage, TextContent


async def main(location: str, transcripts: str, name: str) -> None:
    extra = {"transcripts_dir": transcripts} if transcripts != "-" else {}
    async with SessionStore.open(location, **extra) as store:
        await store.list()  # connected (and migrated) before the start signal
        runtime = SessionRuntime(store, model=ModelInfo(), cwd="/w")
        print("ready", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)
        session = await runtime.open("agent:main:main", body="hi")
        await runtime.before_model_call(session, prompt=f"hello from {name}")
        reply = AssistantMessage(
            content=[TextContent(text=f"reply to {name}")], api="anthropic-messages", provider="p", model="m"
        )
        await runtime.after_turn(session, messages=[reply])
        print(session.session_id, flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])
