"""
What the LLM summariser asks the model for (DESIGN D9/D10, issue #11 "Summaries must not waste model
calls", issue #15 item 9 "a summary cut off at the output limit is committed as complete").
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from tests.compaction._build import assistant, manager, result, user

from sessionkeeper import ModelRequest, ModelResponse
from sessionkeeper.compaction import CompactionSettings, Compactor
from sessionkeeper.testing import FakeClock, ScriptedModelClient
from sessionkeeper.transcript import TextContent, Usage


pytestmark = pytest.mark.anyio

SECTIONS = (
    "## Decisions\n- d\n## Open TODOs\n- t\n## Constraints/Rules\n- c\n## Pending user asks\n- {ask}\n"
    "## Exact identifiers\n- none"
)


def _text(request: ModelRequest) -> str:
    message = request.messages[0]
    content = message.content  # type: ignore[union-attr]
    return (
        content
        if isinstance(content, str)
        else "".join(b.text for b in content if isinstance(b, TextContent))
    )


def _request_tokens(request: ModelRequest) -> int:
    return math.ceil((len(request.system_prompt) + len(_text(request))) / 4)


def _summary(request: ModelRequest) -> str:
    """A summary with safeguard's headings that reflects the latest user ask, as a good model writes."""
    asks = [line for line in _text(request).splitlines() if line.startswith("[User]: ")]
    return SECTIONS.format(ask=asks[-1][8:200] if asks else "none")


def _provider(limit: int, factor: float = 1.0) -> Callable[[ModelRequest], ModelResponse]:
    """
    A model with a window of ``limit`` tokens whose tokenizer counts ``factor`` x pi's chars/4 estimate:
    larger requests fail with Anthropic's overflow error.
    """

    def handler(request: ModelRequest) -> ModelResponse:
        tokens = math.ceil(_request_tokens(request) * factor)
        if tokens + request.max_tokens > limit:
            raise RuntimeError(f"prompt is too long: {tokens + request.max_tokens} tokens > {limit} maximum")
        return ModelResponse(text=_summary(request))

    return handler


async def _tool_session(turns: int) -> object:
    """``turns`` turns, each a user ask, a tool call and a 2-20 KB tool result, then a reply."""
    messages: list[object] = []
    for index in range(turns):
        messages.append(user(f"step {index}: read the next file"))
        messages.append(assistant("", (f"c{index}", "read", {"path": f"notes/{index}.txt"})))
        messages.append(result(f"c{index}", "line of text\n" * (160 + 130 * (index % 12))))
        messages.append(assistant(f"Read file {index}."))
    messages.append(user("keep going with step seven"))
    transcript, _ = await manager(*messages)
    return transcript


@pytest.mark.parametrize("mode", ["safeguard", "default"])
async def test_a_16k_window_summarises_in_a_few_calls_that_fit_the_window(mode: str) -> None:
    """Issue #11: chunks fell to 1 token (one call per message) and max_tokens was 13107 in a 16k window."""
    transcript = await _tool_session(12)
    client = ScriptedModelClient(handler=_summary)
    compactor = Compactor(
        settings=CompactionSettings(mode=mode),  # type: ignore[arg-type]
        model_client=client,
        context_window=16_000,
    )
    outcome = await compactor.compact(transcript, reason="threshold", keep_recent_tokens=1500)  # type: ignore[arg-type]
    assert outcome.status == "compacted" and outcome.provider == "llm", outcome.fallbacks
    assert 1 <= len(client.requests) <= 3
    for request in client.requests:
        assert request.max_tokens <= 2000  # 0.25 x (16000 - 8000)
        assert _request_tokens(request) + request.max_tokens <= 16_000


@pytest.mark.parametrize("mode", ["safeguard", "default"])
async def test_an_overflowed_request_is_split_never_resent_unchanged(mode: str) -> None:
    """D10: the provider's tokenizer counts 2.5x pi's estimate, so a request sized to fit still overflows."""
    transcript = await _tool_session(12)
    client = ScriptedModelClient(handler=_provider(16_000, factor=2.5))
    compactor = Compactor(
        settings=CompactionSettings(mode=mode),  # type: ignore[arg-type]
        model_client=client,
        context_window=16_000,
    )
    outcome = await compactor.compact(transcript, reason="overflow", keep_recent_tokens=50)  # type: ignore[arg-type]
    assert outcome.status == "compacted" and outcome.provider == "llm", outcome.fallbacks
    sent = [(_text(r), r.max_tokens) for r in client.requests]
    refused = [
        key
        for key, r in zip(sent, client.requests, strict=True)
        if math.ceil(_request_tokens(r) * 2.5) + r.max_tokens > 16_000
    ]
    assert refused  # the first request did overflow
    for key in refused:
        assert sent.count(key) == 1  # never sent again unchanged
    assert len(client.requests) <= 12


@pytest.mark.parametrize("mode", ["safeguard", "default"])
async def test_one_oversized_message_is_cut_not_the_whole_llm_summary_thrown_away(mode: str) -> None:
    """D10: a single 40k-token message in a model that takes 30k: cut in half, the summary stays the LLM's."""
    transcript, _ = await manager(
        user("step 1: plan the work"),
        assistant("Planned."),
        user("step 2: here is the whole log " + "log line\n" * 18_000),  # ~40k tokens
        assistant("Read the log."),
        user("keep going with step seven"),
    )
    client = ScriptedModelClient(handler=_provider(30_000))
    compactor = Compactor(settings=CompactionSettings(mode=mode), model_client=client)  # type: ignore[arg-type]
    outcome = await compactor.compact(transcript, reason="overflow", keep_recent_tokens=5)  # type: ignore[arg-type]
    assert outcome.status == "compacted" and outcome.provider == "llm", outcome.fallbacks
    texts = [_text(r) for r in client.requests]
    assert len(texts) == len(set(texts))
    assert any("cut to fit the summarizer's context window" in text for text in texts)


async def test_other_errors_keep_the_retry_policy() -> None:
    """Safeguard retries an ordinary failure with the same request (3 attempts, OpenClaw)."""
    transcript = await _tool_session(2)
    replies: list[object] = [RuntimeError("503 upstream connect error"), RuntimeError("503 again")]
    client = ScriptedModelClient(
        handler=lambda request: _raise_or(replies.pop(0)) if replies else _summary(request)
    )
    clock = FakeClock()
    compactor = Compactor(model_client=client, clock=clock)
    outcome = await compactor.compact(transcript, reason="threshold", keep_recent_tokens=5)  # type: ignore[arg-type]
    assert outcome.provider == "llm" and len(client.requests) == 3
    assert clock.sleeps == [0.5, 1.0]
    assert len({_text(r) for r in client.requests}) == 1


def _raise_or(value: object) -> str:
    if isinstance(value, BaseException):
        raise value
    return str(value)


@pytest.mark.parametrize("mode", ["safeguard", "default"])
@pytest.mark.parametrize("stop", ["length", "toolUse"])
async def test_a_cut_off_or_tool_calling_reply_is_never_written(mode: str, stop: str) -> None:
    """Issue #15 item 9: a reply that hit the output limit (or called a tool) is a failed summary."""
    transcript = await _tool_session(3)
    cut = SECTIONS.format(ask="keep going")[:40]
    client = ScriptedModelClient(
        handler=lambda request: ModelResponse(text=cut, stop_reason=stop, usage=Usage(input=100, output=50))
    )
    compactor = Compactor(
        settings=CompactionSettings(mode=mode),  # type: ignore[arg-type]
        model_client=client,
        clock=FakeClock(),
    )
    outcome = await compactor.compact(transcript, reason="threshold", keep_recent_tokens=5)  # type: ignore[arg-type]
    assert outcome.provider == "extractive"
    assert outcome.fallbacks and "llm summarizer failed" in outcome.fallbacks[-1]
    assert outcome.summary is not None and cut not in outcome.summary
    assert len(client.requests) <= 12  # a bounded retry budget, not an endless loop


async def test_a_cut_off_reply_is_retried_once_with_a_larger_output_cap() -> None:
    transcript = await _tool_session(3)

    def handler(request: ModelRequest) -> ModelResponse:
        if request.max_tokens < 20_000:
            return ModelResponse(text="## Decisions\n- half a sum", stop_reason="length")
        return ModelResponse(text=_summary(request))

    client = ScriptedModelClient(handler=handler)
    compactor = Compactor(settings=CompactionSettings(mode="default"), model_client=client)
    outcome = await compactor.compact(transcript, reason="threshold", keep_recent_tokens=5)  # type: ignore[arg-type]
    assert outcome.provider == "llm" and outcome.summary is not None and "half a sum" not in outcome.summary
    first, second = client.requests
    assert second.max_tokens == 2 * first.max_tokens and _text(second) == _text(first)


async def test_compaction_report_gives_each_number_its_source() -> None:
    """
    Issue #11: tokensBefore (anchored on provider usage) next to an after-estimate (chars/4) looked
    like growth (19273 -> 20023). The report names both sources and gives chars/4 of the context
    before, which compares like with like.
    """
    history = [user("step 1: read the big file " + "x" * 40_000), assistant("Read it. " + "y" * 30_000)]
    reply = assistant("Done with step 1.")
    reply = attrs_evolve_usage(reply, input_tokens=12_000)  # the provider counts fewer tokens than chars/4
    transcript, _ = await manager(*history, reply, user("step 2: " + "z" * 4_000))
    outcome = await Compactor().compact(transcript, reason="threshold", keep_recent_tokens=800)  # type: ignore[arg-type]
    assert outcome.compacted
    data = outcome.to_json()
    assert data["tokensBeforeSource"] == "usage" and data["tokensAfterSource"] == "estimate"
    assert data["tokensBefore"] == outcome.tokens_before == 12_100 + 1_002  # usage + chars/4 of step 2
    assert data["tokensBeforeEstimate"] > 17_000  # chars/4 of the same context
    assert data["tokensAfter"] == outcome.tokens_after < data["tokensBeforeEstimate"]


def attrs_evolve_usage(message: object, *, input_tokens: int) -> object:
    import msgspec

    return msgspec.structs.replace(message, usage=Usage(input=input_tokens, output=100))  # type: ignore[type-var]
