"""SessionRuntime and cache-TTL pruning: one default (issue 11), stable across turns and reopens (D11)."""

from __future__ import annotations

import pytest
from tests.runtime._runtime_helpers import make_runtime, reply, tool_call, tool_result

from sessionkeeper._config import load_config
from sessionkeeper.runtime import ModelInfo, RuntimeSettings


pytestmark = pytest.mark.anyio

KEY = "agent:main:main"
MODEL = ModelInfo(
    provider="anthropic", model_id="claude-sonnet-4-5", api="anthropic-messages", context_window=4000
)


# ------------------------------------------------------------------------------ one default (issue 11)


def test_runtime_settings_have_one_pruning_default_whichever_way_they_are_built() -> None:
    assert RuntimeSettings().pruning == RuntimeSettings.from_config(load_config()).pruning
    assert RuntimeSettings().pruning.mode == "off"  # OpenClaw's default ("Default (disabled)")


@pytest.mark.parametrize("build", ["direct", "config"])
async def test_default_runtime_does_not_prune_by_either_construction(build: str) -> None:
    settings = RuntimeSettings() if build == "direct" else RuntimeSettings.from_config(load_config())
    runtime, _, clock = make_runtime(model=MODEL, settings=settings)
    session = await runtime.open(KEY)
    await runtime.before_model_call(session, prompt="read the log")
    await runtime.after_turn(
        session, messages=[tool_call("c1"), tool_result("c1", "L" * 12000), reply("long", input_tokens=10)]
    )
    for n in range(3):
        await runtime.before_model_call(session, prompt=f"turn {n}")
        await runtime.after_turn(session, messages=[reply("ok", input_tokens=10)])
    clock.advance(3600)
    plan = await runtime.before_model_call(session, prompt="summarise it")
    assert plan.pruning is not None and plan.pruning.skipped == "mode-off" and not plan.pruning.changed
