"""A bundled client as the runtime's ``model_client``: a compaction summary made through the real SDK."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from tests.adapters._fixture_server import check_request, load_fixture, running_server

from sessionkeeper import ModelInfo, SessionRuntime, SessionStore
from sessionkeeper.adapters.openai import OpenAIChatModelClient
from sessionkeeper.records._messages import AssistantMessage, TextContent


pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_manual_compaction_summary_comes_from_the_client(tmp_path: Path) -> None:
    summary = load_fixture("openai_chat_summary")["response"]["json"]["choices"][0]["message"]["content"]
    with running_server() as server:
        server.script(load_fixture("openai_chat_summary"))
        sdk = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="sk-test", max_retries=0)
        client = OpenAIChatModelClient("gpt-4o", client=sdk, stream=False)
        async with SessionStore.open(tmp_path / "sessions") as store:
            runtime = SessionRuntime(
                store,
                model=ModelInfo(
                    provider="openai", model_id="gpt-4o", api="openai-completions", context_window=128_000
                ),
                model_client=client,
            )
            session = await runtime.open("agent:main:main", body="start")
            for prompt, answer in (
                ("What does src/math.ts export?", "It exports add, sub and clamp."),
                ("Add tests for clamp next.", "Noted: tests for clamp come next."),
            ):
                await runtime.before_model_call(session, prompt=prompt)
                reply = AssistantMessage(
                    content=[TextContent(text=answer)],
                    api="openai-completions",
                    provider="openai",
                    model="gpt-4o",
                )
                await runtime.after_turn(session, messages=[reply])
            outcome = await runtime.compact(session)
            assert len(server.requests) == 1  # the summary passed the quality guard: no second request
            check_request(server, "openai_chat_summary")
        assert outcome.status == "compacted"
        assert outcome.result is not None
        assert outcome.result.provider == "llm"
        assert outcome.result.summary is not None and summary in outcome.result.summary
        context = session.transcript.build_session_context()
        assert summary in context.messages[0].summary  # type: ignore[union-attr]
