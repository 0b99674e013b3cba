"""
OpenTelemetry spans (extra ``otel``): compaction, memory flush, pruning, maintenance and lock waits, recorded
by the real opentelemetry-sdk into its ``InMemorySpanExporter``; and the plain call without opentelemetry.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from sessionkeeper import ModelInfo, SessionRuntime, SessionStore
from sessionkeeper.exceptions import SessionBusyError
from sessionkeeper.pruning import Pruner, PruningSettings
from sessionkeeper.store import run_maintenance
from sessionkeeper.testing import ScriptedModelClient
from sessionkeeper.transcript import (
    AssistantMessage,
    SessionWriteLock,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)


pytestmark = pytest.mark.anyio

KEY = "agent:main:main"
SUMMARY = "## Goal\nKeep notes.\n## Decisions\n- tabs over spaces\n## Next steps\n- write tests"


@pytest.fixture(scope="module")
def provider() -> Iterator[InMemorySpanExporter]:
    """The SDK as a host configures it: a global tracer provider exporting to memory (set once)."""
    exporter = InMemorySpanExporter()
    sdk = TracerProvider()
    sdk.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(sdk)
    yield exporter
    sdk.shutdown()  # later test modules' spans are dropped, not kept in memory


@pytest.fixture
def spans(provider: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    provider.clear()
    yield provider
    provider.clear()


def _named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _reply(text: str, *, input_tokens: int) -> AssistantMessage:
    return AssistantMessage(
        content=[TextContent(text=text)],
        api="openai-completions",
        provider="openai",
        model="m",
        usage=Usage(input=input_tokens, output=10),
    )


def _handler(request: Any) -> str:
    return "- user prefers tabs" if request.metadata.get("purpose") == "memory-flush" else SUMMARY


async def test_memory_flush_and_compaction_spans(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    client = ScriptedModelClient(handler=_handler)
    async with SessionStore.open(tmp_path / "sessions") as store:
        runtime = SessionRuntime(
            store,
            model=ModelInfo(provider="openai", model_id="m", context_window=16_000),
            model_client=client,
            workspace_dir=tmp_path / "ws",
        )
        session = await runtime.open(KEY)
        for turn in range(3):
            await runtime.before_model_call(session, prompt=f"turn {turn}: " + "words " * 200)
            await runtime.after_turn(session, messages=[_reply("ok " * 100, input_tokens=1500 * (turn + 1))])
        plan = await runtime.before_model_call(session, prompt="more")  # over the flush threshold
        await runtime.after_turn(session, messages=[_reply("fine", input_tokens=4600)])
        assert plan.memory_flush is not None and plan.memory_flush.ok
        outcome = await runtime.compact(session, keep_recent_tokens=100)
    assert outcome.status == "compacted"
    [flush] = _named(spans, "sessionkeeper.memory_flush")
    attrs = _attrs(flush)
    assert attrs["sessionkeeper.session_key"] == KEY
    assert attrs["sessionkeeper.outcome"] == "ok"
    assert attrs["sessionkeeper.trigger"] == "pre_turn"
    assert attrs["sessionkeeper.tokens_before"] == plan.memory_flush.context_tokens
    assert attrs["sessionkeeper.duration_ms"] >= 0
    [compaction] = _named(spans, "sessionkeeper.compaction")
    attrs = _attrs(compaction)
    summaries = [r for r in client.requests if r.metadata.get("purpose") != "memory-flush"]
    assert summaries
    assert attrs["sessionkeeper.summarizer_calls"] == len(summaries)
    assert attrs["sessionkeeper.session_key"] == KEY
    assert attrs["sessionkeeper.reason"] == "manual"
    assert attrs["sessionkeeper.outcome"] == "compacted"
    assert attrs["sessionkeeper.provider"] == "llm"
    assert 0 < attrs["sessionkeeper.tokens_after"] < attrs["sessionkeeper.tokens_before"]
    assert compaction.status.status_code == StatusCode.UNSET
    assert compaction.instrumentation_scope is not None
    assert compaction.instrumentation_scope.name == "sessionkeeper"


def _pruning_context() -> list[Any]:
    messages: list[Any] = [UserMessage(content="read them", timestamp=1)]
    for i in range(5):
        messages.append(
            AssistantMessage(
                content=[ToolCall(id=f"c{i}", name="read", arguments={})],
                api="anthropic-messages",
                provider="anthropic",
                model="claude-sonnet-4-5",
                stop_reason="toolUse",
            )
        )
        messages.append(
            ToolResultMessage(tool_call_id=f"c{i}", tool_name="read", content=[TextContent(text="x" * 6000)])
        )
    return messages


def test_pruning_spans(spans: InMemorySpanExporter) -> None:
    context = _pruning_context()
    Pruner(settings=PruningSettings(mode="cache-ttl")).prune(
        context, context_window_tokens=8000, last_cache_touch_at=None, model_id="claude-sonnet-4-5"
    )
    Pruner().prune(context, context_window_tokens=8000, last_cache_touch_at=None)
    pruned, off = (_attrs(s) for s in _named(spans, "sessionkeeper.pruning"))
    assert pruned["sessionkeeper.outcome"] == "pruned"
    assert pruned["sessionkeeper.soft_trimmed"] == 2
    assert pruned["sessionkeeper.chars_before"] > pruned["sessionkeeper.chars_after"]
    assert pruned["sessionkeeper.tokens_before"] > pruned["sessionkeeper.tokens_after"]
    assert (pruned["sessionkeeper.provider"], pruned["sessionkeeper.model_id"]) == (
        "anthropic",
        "claude-sonnet-4-5",
    )
    assert off["sessionkeeper.outcome"] == "mode-off"


async def test_maintenance_span(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    async with SessionStore.open(tmp_path / "sessions") as store:
        for key in ("agent:main:a", "agent:main:b"):
            await store.patch(key, {"sessionId": key.rsplit(":", 1)[1]})
    report = await run_maintenance(tmp_path / "sessions", dry_run=True)
    [span] = _named(spans, "sessionkeeper.maintenance")
    attrs = _attrs(span)
    assert attrs["sessionkeeper.outcome"] == "not_applied"
    assert attrs["sessionkeeper.dry_run"] is True
    assert attrs["sessionkeeper.entries_before"] == report.before_count == 2
    assert attrs["sessionkeeper.bytes_before"] == report.bytes_before


async def test_lock_wait_spans_say_acquired_busy_or_cancelled(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    path = tmp_path / "s.jsonl"
    async with SessionWriteLock.acquire(path, reentrant=False):
        with pytest.raises(SessionBusyError):
            await SessionWriteLock.acquire(path, timeout_ms=50, reentrant=False)
        with anyio.move_on_after(0.05):
            await SessionWriteLock.acquire(path, timeout_ms=60_000, reentrant=False)
    held, busy, cancelled = sorted(_named(spans, "sessionkeeper.lock_wait"), key=lambda s: s.start_time or 0)
    assert _attrs(held)["sessionkeeper.outcome"] == "acquired"
    assert str(_attrs(held)["sessionkeeper.lock_path"]).endswith("s.jsonl.lock")
    assert _attrs(busy)["sessionkeeper.outcome"] == "error"
    assert _attrs(busy)["error.type"] == "SessionBusyError"
    assert _attrs(busy)["sessionkeeper.timeout_ms"] == 50
    assert busy.status.status_code == StatusCode.ERROR
    assert _attrs(busy)["sessionkeeper.duration_ms"] >= 40  # the wait itself
    assert _attrs(cancelled)["sessionkeeper.outcome"] == "cancelled"


_PROBE = """
import json, sys
sys.modules["opentelemetry"] = None  # as if the "otel" extra were not installed
from sessionkeeper import _tracing
from sessionkeeper.pruning import Pruner
def plain():
    return 1
result = Pruner().prune([], context_window_tokens=1000, last_cache_touch_at=None)
print(json.dumps([_tracing.traced("pruning")(plain) is plain, hasattr(Pruner.prune, "__wrapped__"),
                  result.skipped]))
"""


def test_without_opentelemetry_a_traced_call_is_the_plain_call() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=False, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [True, False, "mode-off"]


def test_the_tracing_page_example_runs_and_names_every_span() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "tracing.md").read_text(encoding="utf-8")
    [example] = re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL)
    # its own interpreter: the example sets the process's tracer provider, which can be set only once
    proc = subprocess.run(
        [sys.executable, "-c", example], capture_output=True, text=True, check=False, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    for name in ("compaction", "memory_flush", "pruning", "maintenance", "lock_wait"):
        assert f"`sessionkeeper.{name}`" in page
    index = (Path(__file__).resolve().parents[2] / "docs" / "index.md").read_text(encoding="utf-8")
    assert "\ntracing\n" in index
