"""
The runtime says what it decided (issue #11 "no silent surprises"): an unknown compaction provider id is
refused at construction; a default flush turn without a workspace is never paid for; flush results are
logged on ``sessionkeeper.runtime`` with structured ``extra``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from tests.runtime._runtime_helpers import FlushRecorder, make_runtime, reply

from sessionkeeper.compaction import CompactionProviderRegistry, CompactionSettings, SummaryRequest
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.runtime import ModelInfo, RuntimeSettings
from sessionkeeper.testing import ScriptedModelClient


pytestmark = pytest.mark.anyio

KEY = "agent:main:main"
LOGGER = "sessionkeeper.runtime"
WINDOW_16K = ModelInfo(provider="openai", model_id="m", context_window=16_000)


class Fixed:
    id = "fixed"
    label = "Fixed"

    async def summarize(self, request: SummaryRequest) -> str:
        return "## Decisions\n- none"


def test_runtime_refuses_a_provider_id_no_registry_knows() -> None:
    settings = RuntimeSettings(compaction=CompactionSettings(provider="ghost"))
    with pytest.raises(ConfigError, match="'ghost' is not registered") as caught:
        make_runtime(settings=settings)
    assert caught.value.key == "agents.defaults.compaction.provider"
    registry = CompactionProviderRegistry()
    registry.register(Fixed())
    with pytest.raises(ConfigError, match="registered: fixed"):
        make_runtime(settings=settings, providers=registry)
    make_runtime(
        settings=RuntimeSettings(compaction=CompactionSettings(provider="fixed")), providers=registry
    )


async def _over_flush_threshold(runtime: object) -> object:
    from sessionkeeper.runtime import SessionRuntime

    assert isinstance(runtime, SessionRuntime)
    session = await runtime.open(KEY)
    await runtime.before_model_call(session, prompt="x")
    await runtime.after_turn(session, messages=[reply("y", input_tokens=4500, provider="openai")])
    return await runtime.before_model_call(session, prompt="more")


async def test_a_model_client_without_workspace_never_pays_for_a_flush(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = ScriptedModelClient(responses=["- user prefers tabs"])
    with caplog.at_level(logging.INFO, logger=LOGGER):
        runtime, _, _ = make_runtime(model=WINDOW_16K, model_client=client)
    plan = await _over_flush_threshold(runtime)
    assert plan.memory_flush is None  # type: ignore[attr-defined]
    assert not [r for r in client.requests if r.metadata.get("purpose") == "memory-flush"]
    (record,) = [r for r in caplog.records if r.name == LOGGER]
    assert record.levelno == logging.INFO and record.reason == "no_workspace_dir"  # type: ignore[attr-defined]


async def test_a_model_client_with_workspace_flushes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client = ScriptedModelClient(responses=["- user prefers tabs"])
    runtime, _, _ = make_runtime(model=WINDOW_16K, model_client=client, workspace_dir=tmp_path / "ws")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        plan = await _over_flush_threshold(runtime)
    assert plan.memory_flush is not None and plan.memory_flush.ok  # type: ignore[attr-defined]
    (record,) = [r for r in caplog.records if r.name == LOGGER]
    assert record.levelno == logging.INFO
    assert (record.session_key, record.reason, record.reply_silent) == (KEY, "threshold", False)  # type: ignore[attr-defined]
    assert record.memory_file == plan.memory_flush.memory_file  # type: ignore[attr-defined]


async def test_a_failed_flush_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    runtime, _, _ = make_runtime(model=WINDOW_16K, memory_flush_runner=FlushRecorder(fail=True))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        plan = await _over_flush_threshold(runtime)
    assert plan.memory_flush is not None and not plan.memory_flush.ok  # type: ignore[attr-defined]
    (record,) = [r for r in caplog.records if r.name == LOGGER]
    assert record.levelno == logging.WARNING
    assert record.error == "memory tool crashed"  # type: ignore[attr-defined]
    assert (record.failure_count, record.exhausted) == (1, False)  # type: ignore[attr-defined]
