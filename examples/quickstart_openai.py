"""
The README quickstart with a real model behind it: one turn of an agent loop over an OpenAI-compatible
server, through sessionkeeper's runtime (context, pruning, compaction, overflow recovery, transcript).

Run it against OpenAI, or any OpenAI-compatible server (vLLM, llama.cpp, Ollama, LiteLLM)::

    pip install 'sessionkeeper[openai]'
    OPENAI_API_KEY=... [OPENAI_BASE_URL=http://127.0.0.1:8000/v1] python examples/quickstart_openai.py [SESSIONS_DIR]

``SESSIONKEEPER_EXAMPLE_MODEL`` picks the model (default ``gpt-4o``). The test suite runs this file against
a local server that replays a recorded reply (``tests/adapters/test_adapters_examples.py``).
"""

from __future__ import annotations

import os
import sys

import anyio

from sessionkeeper import ModelInfo, ModelRequest, SessionRuntime, SessionStore
from sessionkeeper.adapters.openai import OpenAIChatModelClient
from sessionkeeper.exceptions import ModelProviderError


MODEL = os.environ.get("SESSIONKEEPER_EXAMPLE_MODEL", "gpt-4o")
SYSTEM_PROMPT = "You are a coding assistant. Answer briefly."
PROMPT = "What does src/math.ts export?"


async def main(sessions_dir: str) -> None:
    # base URL and key come from OPENAI_BASE_URL / OPENAI_API_KEY; streamed text is printed as it arrives
    # (a NO_REPLY reply prints nothing: the stream goes through SilentReplyStreamFilter)
    client = OpenAIChatModelClient(MODEL, on_text=lambda text: print(text, end="", flush=True))
    async with SessionStore.open(sessions_dir) as store:
        runtime = SessionRuntime(
            store,
            model=ModelInfo(provider="openai", model_id=MODEL, api="openai-completions", context_window=128_000),
            model_client=client,  # also used for compaction summaries
        )
        session = await runtime.open("agent:main:main", body=PROMPT)
        plan = await runtime.before_model_call(session, prompt=PROMPT)
        while True:
            try:
                reply = await client.create_message(
                    ModelRequest(system_prompt=SYSTEM_PROMPT, messages=plan.messages, max_tokens=1024)
                )
                break
            except ModelProviderError as err:
                await runtime.on_model_error(session, err)  # compacts on overflow, re-raises anything else
                plan = await runtime.before_model_call(session)  # retry with the smaller context
        outcome = await runtime.after_turn(session, messages=[reply])
        print()
        print(f"delivered: {outcome.delivered_text!r}")
        print(f"context tokens: {outcome.context_tokens}")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else "sessions")
