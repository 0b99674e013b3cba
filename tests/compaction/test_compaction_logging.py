"""
Compaction never falls back silently (issue #11 "no silent surprises"): an unknown provider id is refused
at construction; a provider that is gone, raises or answers nothing, and a failing LLM summariser, leave a
WARNING on ``sessionkeeper.compaction`` with structured ``extra``; a written compaction one INFO record.
"""

from __future__ import annotations

import logging

import pytest
from tests.compaction._build import assistant, manager, result, user

from sessionkeeper.compaction import CompactionProviderRegistry, CompactionSettings, Compactor, SummaryRequest
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.testing import FakeClock, ScriptedModelClient


pytestmark = pytest.mark.anyio

LOGGER = "sessionkeeper.compaction"


async def _session() -> object:
    transcript, _ = await manager(
        user("Read notes.txt please."),
        assistant("", ("c1", "read", {"path": "notes.txt"})),
        result("c1", "word " * 1500),
        assistant("Done reading notes.txt."),
        user("Now count the words."),
    )
    return transcript


class Raising:
    id = "flaky"
    label = "Flaky provider"

    async def summarize(self, request: SummaryRequest) -> str:
        raise RuntimeError("provider down")


def _records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.levelno == level]


def test_compactor_refuses_a_provider_id_no_registry_knows() -> None:
    with pytest.raises(ConfigError, match="'ghost' is not registered") as caught:
        Compactor(settings=CompactionSettings(provider="ghost"))
    assert caught.value.key == "agents.defaults.compaction.provider"
    registry = CompactionProviderRegistry()
    registry.register(Raising())
    with pytest.raises(ConfigError, match=r"registered: flaky"):
        Compactor(settings=CompactionSettings(provider="ghost"), providers=registry)
    Compactor(settings=CompactionSettings(provider="flaky"), providers=registry)  # known: accepted


async def test_a_raising_provider_logs_a_warning_with_extra(caplog: pytest.LogCaptureFixture) -> None:
    transcript = await _session()
    registry = CompactionProviderRegistry()
    registry.register(Raising())
    compactor = Compactor(settings=CompactionSettings(provider="flaky"), providers=registry)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        outcome = await compactor.compact(transcript, keep_recent_tokens=1)  # type: ignore[arg-type]
    assert outcome.provider == "extractive"
    warnings = _records(caplog, logging.WARNING)
    assert len(warnings) == 1
    record = warnings[0]
    assert record.provider == "flaky"  # type: ignore[attr-defined]
    assert record.fallback == "failed"  # type: ignore[attr-defined]
    assert record.error == "RuntimeError: provider down"  # type: ignore[attr-defined]
    assert "falling back" in record.getMessage()


async def test_a_provider_gone_after_construction_logs_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    transcript = await _session()
    registry = CompactionProviderRegistry()
    registry.register(Raising())
    compactor = Compactor(settings=CompactionSettings(provider="flaky"), providers=registry)
    registry.unregister("flaky")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        outcome = await compactor.compact(transcript, keep_recent_tokens=1)  # type: ignore[arg-type]
    assert outcome.compacted and outcome.provider == "extractive"
    (record,) = _records(caplog, logging.WARNING)
    assert (record.provider, record.fallback) == ("flaky", "unregistered")  # type: ignore[attr-defined]


async def test_a_failing_llm_summariser_logs_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    transcript = await _session()
    client = ScriptedModelClient(
        handler=lambda request: (_ for _ in ()).throw(RuntimeError("529 overloaded"))
    )
    compactor = Compactor(model_client=client, clock=FakeClock())
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        outcome = await compactor.compact(transcript, keep_recent_tokens=1)  # type: ignore[arg-type]
    assert outcome.provider == "extractive"
    (record,) = _records(caplog, logging.WARNING)
    assert record.provider == "llm" and "overloaded" in record.error  # type: ignore[attr-defined]


async def test_a_written_compaction_is_one_info_record(caplog: pytest.LogCaptureFixture) -> None:
    transcript = await _session()
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        outcome = await Compactor().compact(transcript, session_key="agent:main:main", keep_recent_tokens=1)  # type: ignore[arg-type]
        again = await Compactor().compact(transcript, keep_recent_tokens=1)  # type: ignore[arg-type]
    assert outcome.entry is not None and again.status == "already_compacted"
    (info,) = _records(caplog, logging.INFO)
    assert info.entry_id == outcome.entry.id  # type: ignore[attr-defined]
    assert info.session_key == "agent:main:main"  # type: ignore[attr-defined]
    assert info.provider == "extractive" and info.reason == "manual"  # type: ignore[attr-defined]
    assert info.tokens_before == outcome.tokens_before  # type: ignore[attr-defined]
    assert not _records(caplog, logging.WARNING)  # no model client is a choice, not a surprise
    (debug,) = _records(caplog, logging.DEBUG)
    assert debug.status == "already_compacted"  # type: ignore[attr-defined]
