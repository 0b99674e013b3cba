"""
What one compaction may spend on the LLM summariser (DESIGN D10, "What a summary costs"): overflow
refusals and calls are bounded, a cut-off reply is retried once, and a summary that left out every
message is a failure that falls back to the extractive summary with a WARNING (DESIGN D3).
"""

from __future__ import annotations

import logging
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.compaction._build import assistant, manager, user

from sessionkeeper import ModelRequest, ModelResponse
from sessionkeeper.compaction import CompactionSettings, Compactor
from sessionkeeper.compaction._chunking import omitted_note
from sessionkeeper.compaction._llm import CALLS_BASE, CALLS_PER_CHUNK, MAX_OVERFLOW_REFUSALS, LlmSummarizer
from sessionkeeper.compaction._memo import message_tokens
from sessionkeeper.exceptions import CompactionError
from sessionkeeper.testing import (
    FakeClock,
    ScriptedModelClient,
    ScriptedProviderError,
    context_overflow_error,
)
from sessionkeeper.transcript import TextContent


pytestmark = pytest.mark.anyio

LOGGER = "sessionkeeper.compaction"


async def _session() -> object:
    """The tester's transcript: 12 short user questions naming files and 12 answers."""
    messages: list[object] = []
    for index in range(12):
        messages.append(user(f"question {index} about /src/mod{index}.py " * 40))
        messages.append(assistant(f"answer {index} " * 100))
    messages.append(user("and now the last ask"))
    transcript, _ = await manager(*messages)
    return transcript


def _always_too_long(request: ModelRequest) -> ModelResponse:
    raise context_overflow_error(99_999, 16_000)


def _llm_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == LOGGER and r.levelno == logging.WARNING and getattr(r, "provider", None) == "llm"
    ]


@pytest.mark.parametrize("mode", ["safeguard", "default"])
async def test_a_summariser_that_always_overflows_falls_back_after_a_few_calls(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Tester's item 1: 102 calls and a summary of omitted notes, written as ``llm``, no WARNING."""
    transcript = await _session()
    client = ScriptedModelClient(handler=_always_too_long)
    compactor = Compactor(
        settings=CompactionSettings(mode=mode),  # type: ignore[arg-type]
        model_client=client,
        context_window=16_000,
        clock=FakeClock(),
    )
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        outcome = await compactor.compact(transcript, reason="threshold", keep_recent_tokens=5)  # type: ignore[arg-type]
    assert outcome.status == "compacted" and outcome.provider == "extractive"
    assert len(client.requests) == MAX_OVERFLOW_REFUSALS
    assert outcome.summary is not None and "/src/mod0.py" in outcome.summary
    assert "omitted from summary" not in outcome.summary
    (warning,) = _llm_warnings(caplog)
    assert warning.fallback == "failed" and "too long" in warning.error  # type: ignore[attr-defined]


def _limited(limit: int) -> object:
    """A model whose real window is ``limit`` tokens (pi's chars/4 estimate) behind a 16000 declared one."""

    def handler(request: ModelRequest) -> ModelResponse:
        text = "".join(
            b.text
            for m in request.messages
            for b in m.content  # type: ignore[union-attr]
            if isinstance(b, TextContent)
        )
        tokens = math.ceil((len(request.system_prompt) + len(text)) / 4) + request.max_tokens
        if tokens > limit:
            raise ScriptedProviderError(f"prompt is too long: {tokens} tokens > {limit} maximum", status=400)
        return ModelResponse(text="## Decisions\n- summary mentioning /src/mod1.py")

    return handler


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(limit=st.integers(min_value=2_500, max_value=16_000), mode=st.sampled_from(["safeguard", "default"]))
async def test_summariser_calls_per_compaction_stay_within_the_budget(limit: int, mode: str) -> None:
    """Tester's item 1: a model with a 3000-token window took 51 calls for one compaction."""
    transcript = await _session()
    client = ScriptedModelClient(handler=_limited(limit))  # type: ignore[arg-type]
    compactor = Compactor(
        settings=CompactionSettings(mode=mode),  # type: ignore[arg-type]
        model_client=client,
        context_window=16_000,
        clock=FakeClock(),
    )
    outcome = await compactor.compact(transcript, reason="threshold", keep_recent_tokens=5)  # type: ignore[arg-type]
    assert outcome.status == "compacted" and outcome.provider in ("llm", "extractive")
    # the 24 messages (~6k serialised tokens) fill one chunk of a 16000 window
    assert len(client.requests) <= CALLS_PER_CHUNK * 1 + CALLS_BASE


async def test_the_3000_token_model_of_the_report_is_bounded() -> None:
    transcript = await _session()
    client = ScriptedModelClient(handler=_limited(3_000))  # type: ignore[arg-type]
    compactor = Compactor(model_client=client, context_window=16_000, clock=FakeClock())
    outcome = await compactor.compact(transcript, reason="threshold", keep_recent_tokens=5)  # type: ignore[arg-type]
    assert outcome.status == "compacted"
    assert len(client.requests) <= CALLS_PER_CHUNK + CALLS_BASE  # was 51


def test_an_omitted_note_gives_the_size_of_a_small_message() -> None:
    assert omitted_note("user", 120) == "[Large user (~120 tokens) omitted from summary]"
    assert omitted_note("user", 40_400) == "[Large user (~40K tokens) omitted from summary]"
    assert omitted_note("toolResult", 1_500) == "[Large toolResult (~2K tokens) omitted from summary]"


async def test_a_left_out_message_is_noted_with_its_own_size_not_its_cut() -> None:
    """The note used to size the last cut (~1/64 of the message): ``~0K`` for any message of < 32k."""
    huge = user("log line\n" * 500_000)  # ~1.1M tokens: cut six times, still over the window
    client = ScriptedModelClient(handler=lambda request: ModelResponse(text="## Decisions\n- ok"))
    summarizer = LlmSummarizer(client, settings=CompactionSettings(), context_window=16_000)
    await summarizer.history_summary(
        [huge, user("then fix /src/a.py")], previous_summary=None, custom_instructions=None
    )
    (request,) = client.requests  # the note is the previous summary the second half updates
    text = "".join(b.text for b in request.messages[0].content if isinstance(b, TextContent))  # type: ignore[union-attr]
    assert omitted_note("user", message_tokens(huge)) in text
    assert "(~1125K tokens)" in text


@pytest.mark.parametrize("mode", ["safeguard", "default"])
async def test_a_summary_that_left_out_every_message_is_not_written_as_llm(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    transcript, _ = await manager(user("log line\n" * 500_000), user("now fix /src/a.py"))
    client = ScriptedModelClient(handler=lambda request: ModelResponse(text="## Decisions\n- ok"))
    compactor = Compactor(
        settings=CompactionSettings(mode=mode),  # type: ignore[arg-type]
        model_client=client,
        context_window=16_000,
    )
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        outcome = await compactor.compact(transcript, reason="threshold", keep_recent_tokens=5)  # type: ignore[arg-type]
    assert outcome.status == "compacted" and outcome.provider == "extractive"
    assert outcome.fallbacks and "left out" in outcome.fallbacks[-1]
    assert len(_llm_warnings(caplog)) == 1


async def test_history_summary_raises_when_every_message_was_left_out() -> None:
    client = ScriptedModelClient(handler=lambda request: ModelResponse(text="## Decisions\n- ok"))
    summarizer = LlmSummarizer(client, settings=CompactionSettings(), context_window=16_000)
    with pytest.raises(CompactionError, match="left out"):
        await summarizer.history_summary(
            [user("log line\n" * 500_000)], previous_summary=None, custom_instructions=None
        )
    assert summarizer.calls == 0


@pytest.mark.parametrize("mode", ["safeguard", "default"])
async def test_a_cut_off_summary_costs_exactly_two_calls(mode: str) -> None:
    """Tester's item 2: 14 calls (2000, 4000, then halved input with both caps, 7 times)."""
    transcript = await _session()
    client = ScriptedModelClient(handler=lambda request: ModelResponse(text="partial", stop_reason="length"))
    compactor = Compactor(
        settings=CompactionSettings(mode=mode),  # type: ignore[arg-type]
        model_client=client,
        context_window=16_000,
        clock=FakeClock(),
    )
    outcome = await compactor.compact(transcript, reason="threshold", keep_recent_tokens=5)  # type: ignore[arg-type]
    assert outcome.provider == "extractive"
    assert [r.max_tokens for r in client.requests] == [2000, 4000]
    assert outcome.fallbacks and "cut off" in outcome.fallbacks[-1]


async def test_a_cut_off_summary_is_retried_once_with_the_cap_the_window_has_room_for() -> None:
    """Less room than twice the cap beside the input: one retry with what fits, then the fall-back."""
    client = ScriptedModelClient(handler=lambda request: ModelResponse(text="partial", stop_reason="length"))
    summarizer = LlmSummarizer(client, settings=CompactionSettings(), context_window=16_000)
    with pytest.raises(CompactionError, match="cut off"):
        # ~12.3k tokens of input beside a 2000-token cap: 4000 would not fit the 16000 window
        await summarizer.history_summary(
            [user("x" * 48_000)], previous_summary=None, custom_instructions=None
        )
    first, second = client.requests
    assert first.max_tokens == 2000 and 2000 < second.max_tokens < 4000
    text = "".join(b.text for b in second.messages[0].content if isinstance(b, TextContent))  # type: ignore[union-attr]
    assert math.ceil(len(second.system_prompt) / 4) + math.ceil(len(text) / 4) + second.max_tokens <= 16_000
