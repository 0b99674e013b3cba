"""SessionRuntime's ``token_counter``: the runtime, its Compactor and its Pruner count with it."""

from __future__ import annotations

import pytest
from tests.runtime._runtime_helpers import make_runtime, reply

from sessionkeeper import EstimateTokenCounter
from sessionkeeper.testing import FakeTokenCounter


pytestmark = pytest.mark.anyio


async def test_the_default_counter_is_pis_estimate() -> None:
    runtime, _, _ = make_runtime()
    assert isinstance(runtime.token_counter, EstimateTokenCounter)
    session = await runtime.open("agent:main:main")
    plan = await runtime.before_model_call(session, prompt="hello there")  # 11 chars: ceil(11 / 4)
    assert plan.context_tokens == 3


async def test_a_given_counter_sizes_the_prompt_and_the_compaction_report() -> None:
    counter = FakeTokenCounter(per_message=100)  # one token per character, plus 100 per message
    runtime, _, _ = make_runtime(token_counter=counter)
    assert runtime.token_counter is counter
    assert runtime.pruner.token_counter is counter
    session = await runtime.open("agent:main:main")
    plan = await runtime.before_model_call(session, prompt="hello there")
    assert plan.context_tokens == 111
    await runtime.after_turn(session, messages=[reply("hi", input_tokens=50, output_tokens=5)])
    calls = counter.calls
    outcome = await runtime.compact(session)
    # the report counts the prompt and the reply of the context before compaction (2 calls); the
    # Compactor the runtime builds weighs its cut walk with the same counter (more calls)
    assert counter.calls > calls + 2
    assert outcome.tokens_before_estimate == (100 + 11) + (100 + 2)
