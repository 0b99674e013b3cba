"""Compactor hooks (pi spec §15.6) and the provider registry and chain (OpenClaw §5.10, DESIGN D3)."""

from __future__ import annotations

import anyio
import pytest
from tests.compaction._build import assistant, manager, result, user

from sessionkeeper.compaction import (
    CompactionProviderRegistry,
    CompactionSettings,
    Compactor,
    SummaryRequest,
)
from sessionkeeper.exceptions import (
    CompactionCancelled,
    DuplicateProviderError,
    ProviderError,
    UnknownProviderError,
)
from sessionkeeper.hooks import (
    CompactHookResult,
    CompactionHookOverride,
    HookRegistry,
    SessionBeforeCompactEvent,
    SessionCompactEvent,
)
from sessionkeeper.testing import FakeClock, ScriptedModelClient, capture_events
from sessionkeeper.transcript import CompactionEntry


pytestmark = pytest.mark.anyio

GOOD = (
    "## Decisions\n- use the ledger fix\n## Open TODOs\n- none\n## Constraints/Rules\n- none\n"
    "## Pending user asks\n- count the words\n## Exact identifiers\n- notes.txt"
)


async def _session() -> tuple[object, list[str]]:
    return await manager(
        user("Read notes.txt please."),
        assistant("", ("c1", "read", {"path": "notes.txt"})),
        result("c1", "word " * 1500),
        assistant("Done reading notes.txt."),
        user("Now count the words."),
    )


class Provider:
    def __init__(self, reply: str | BaseException, provider_id: str = "mine") -> None:
        self.id = provider_id
        self.label = "Test provider"
        self.reply = reply
        self.requests: list[SummaryRequest] = []

    async def summarize(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        if isinstance(self.reply, BaseException):
            raise self.reply
        return self.reply


async def test_hook_cancel_raises_and_writes_nothing() -> None:
    transcript, _ = await _session()
    hooks = HookRegistry()
    hooks.on(SessionBeforeCompactEvent, lambda event: CompactHookResult(cancel=True, reason="busy"))
    with capture_events(hooks) as events, pytest.raises(CompactionCancelled, match="busy"):
        await Compactor(hooks=hooks).compact(transcript, keep_recent_tokens=1)  # type: ignore[arg-type]
    assert len(transcript.entries()) == 5  # type: ignore[attr-defined]
    assert events.names == ["compaction_start", "session_before_compact", "compaction_end"]
    assert events[-1].aborted  # type: ignore[attr-defined]


async def test_hook_supplied_summary_is_written_verbatim_from_hook() -> None:
    transcript, ids = await _session()
    hooks = HookRegistry()

    def supply(event: SessionBeforeCompactEvent) -> CompactHookResult:
        plan = event.preparation
        return CompactHookResult(
            compaction=CompactionHookOverride(
                summary="hook summary",
                first_kept_entry_id=plan.first_kept_entry_id,  # type: ignore[attr-defined]
                tokens_before=123,
                details={"custom": True},
            )
        )

    hooks.on(SessionBeforeCompactEvent, supply)
    with capture_events(hooks) as events:
        outcome = await Compactor(hooks=hooks).compact(transcript, keep_recent_tokens=1)  # type: ignore[arg-type]
    assert outcome.provider == "hook" and outcome.entry is not None
    entry = outcome.entry
    assert (entry.summary, entry.tokens_before, entry.details, entry.from_hook) == (
        "hook summary",
        123,
        {"custom": True},
        True,
    )
    assert entry.first_kept_entry_id == ids[4]
    assert events.names == ["compaction_start", "session_before_compact", "session_compact", "compaction_end"]
    assert events.of_type(SessionCompactEvent)[0].from_hook


async def test_session_compact_event_carries_written_entry() -> None:
    transcript, _ = await _session()
    hooks = HookRegistry()
    seen: list[CompactionEntry] = []
    hooks.on(SessionCompactEvent, lambda event: seen.append(event.compaction_entry))
    outcome = await Compactor(hooks=hooks).compact(transcript, keep_recent_tokens=1)  # type: ignore[arg-type]
    assert seen == [outcome.entry] and not seen[0].from_hook


async def test_provider_result_is_used_with_safeguard_suffix() -> None:
    transcript, _ = await _session()
    registry = CompactionProviderRegistry()
    provider = Provider(GOOD)
    registry.register(provider)
    settings = CompactionSettings(provider="mine")
    outcome = await Compactor(settings=settings, providers=registry).compact(
        transcript,  # type: ignore[arg-type]
        keep_recent_tokens=1,
        custom_instructions="focus on words",
    )
    assert outcome.provider == "mine" and outcome.summary is not None
    assert outcome.summary.startswith(GOOD)
    assert "<read-files>\nnotes.txt\n</read-files>" in outcome.summary
    request = provider.requests[0]
    assert request.identifier_policy == "strict"
    assert request.custom_instructions is not None and "## Exact identifiers" in request.custom_instructions
    assert "focus on words" in request.custom_instructions
    assert len(request.messages) == 4


@pytest.mark.parametrize("reply", [RuntimeError("provider down"), "", "   "])
async def test_provider_error_or_empty_falls_back_to_llm(reply: str | BaseException) -> None:
    transcript, _ = await _session()
    registry = CompactionProviderRegistry()
    registry.register(Provider(reply))
    client = ScriptedModelClient(handler=lambda request: GOOD)
    compactor = Compactor(
        settings=CompactionSettings(provider="mine"), providers=registry, model_client=client
    )
    outcome = await compactor.compact(transcript, keep_recent_tokens=1)  # type: ignore[arg-type]
    assert outcome.status == "compacted" and outcome.provider == "llm"
    assert outcome.fallbacks and outcome.fallbacks[0].startswith("provider 'mine'")
    assert client.requests


async def test_llm_failure_falls_back_to_extractive_and_never_writes_failed_summary() -> None:
    transcript, _ = await _session()
    client = ScriptedModelClient(
        handler=lambda request: (_ for _ in ()).throw(RuntimeError("529 overloaded"))
    )
    compactor = Compactor(model_client=client, clock=FakeClock())  # retry waits on the fake clock
    outcome = await compactor.compact(transcript, keep_recent_tokens=1)  # type: ignore[arg-type]
    assert outcome.status == "compacted" and outcome.provider == "extractive"
    assert len(client.requests) == 3  # one request, retried twice (OpenClaw's 3 attempts)
    assert outcome.summary is not None and "overloaded" not in outcome.summary
    assert "## Exact identifiers" in outcome.summary
    assert any("llm summarizer failed" in note for note in outcome.fallbacks)


async def test_default_mode_empty_llm_reply_falls_back() -> None:
    transcript, _ = await _session()
    client = ScriptedModelClient(responses=[""])
    settings = CompactionSettings(mode="default")
    outcome = await Compactor(settings=settings, model_client=client).compact(
        transcript, keep_recent_tokens=1
    )  # type: ignore[arg-type]
    assert outcome.provider == "extractive" and outcome.summary and outcome.summary.strip()


async def test_provider_unregistered_after_construction_falls_back() -> None:
    transcript, _ = await _session()
    registry = CompactionProviderRegistry()
    registry.register(Provider(GOOD, "ghost"))
    compactor = Compactor(settings=CompactionSettings(provider="ghost"), providers=registry)
    registry.unregister("ghost")  # a plugin went away after the compactor was built
    outcome = await compactor.compact(transcript, keep_recent_tokens=1)  # type: ignore[arg-type]
    assert outcome.provider == "extractive"
    assert outcome.fallbacks[0] == "provider 'ghost' is not registered"


async def test_abort_propagates_and_never_falls_back() -> None:
    transcript, _ = await _session()
    abort = anyio.Event()
    registry = CompactionProviderRegistry()

    class Aborting(Provider):
        async def summarize(self, request: SummaryRequest) -> str:
            assert request.abort is abort
            abort.set()
            raise RuntimeError("aborted by caller")

    registry.register(Aborting(""))
    compactor = Compactor(settings=CompactionSettings(provider="mine"), providers=registry)
    with pytest.raises(RuntimeError, match="aborted by caller"):
        await compactor.compact(transcript, keep_recent_tokens=1, abort=abort)  # type: ignore[arg-type]
    assert len(transcript.entries()) == 5  # type: ignore[attr-defined]


async def test_provider_timeout_propagates() -> None:
    transcript, _ = await _session()
    registry = CompactionProviderRegistry()
    registry.register(Provider(TimeoutError("slow")))
    compactor = Compactor(settings=CompactionSettings(provider="mine"), providers=registry)
    with pytest.raises(TimeoutError):
        await compactor.compact(transcript, keep_recent_tokens=1)  # type: ignore[arg-type]
    assert len(transcript.entries()) == 5  # type: ignore[attr-defined]


async def test_aborted_model_reply_cancels() -> None:
    transcript, _ = await _session()
    abort = anyio.Event()
    abort.set()
    client = ScriptedModelClient(responses=[GOOD])
    with pytest.raises(CompactionCancelled):
        await Compactor(model_client=client).compact(transcript, keep_recent_tokens=1, abort=abort)  # type: ignore[arg-type]
    assert len(transcript.entries()) == 5  # type: ignore[attr-defined]


def test_registry_first_registration_wins() -> None:
    registry = CompactionProviderRegistry()
    first, second = Provider("a"), Provider("b")
    unregister = registry.register(first, owner="plugin-a")
    with pytest.raises(DuplicateProviderError, match="already registered: mine \\(owner: plugin-a\\)"):
        registry.register(second, owner="plugin-b")
    assert registry.get("mine") is first and registry.ids() == ("mine",)
    unregister()
    assert "mine" not in registry and len(registry) == 0
    registry.register(second)
    assert registry.require("mine") is second
    with pytest.raises(UnknownProviderError):
        registry.require("other")
    assert registry.unregister("mine") and not registry.unregister("mine")


def test_registry_refuses_missing_id_or_summarize() -> None:
    registry = CompactionProviderRegistry()
    with pytest.raises(ProviderError, match="missing id"):
        registry.register(Provider("x", provider_id=" "))

    class NoSummarize:
        id = "nosum"
        label = "broken"

    with pytest.raises(ProviderError, match="missing summarize"):
        registry.register(NoSummarize())  # type: ignore[arg-type]


async def test_quality_guard_retries_once_with_feedback() -> None:
    transcript, _ = await _session()
    replies = ["just prose without headings", GOOD]
    client = ScriptedModelClient(responses=replies)
    outcome = await Compactor(model_client=client).compact(transcript, keep_recent_tokens=1)  # type: ignore[arg-type]
    assert outcome.provider == "llm" and outcome.summary is not None and outcome.summary.startswith(GOOD)
    assert len(client.requests) == 2
    retry_text = str(client.requests[1].messages[0].content)  # type: ignore[union-attr]
    assert "failed quality checks" in retry_text and "missing_section:## Decisions" in retry_text


async def test_quality_guard_off_in_default_mode_single_request() -> None:
    transcript, _ = await _session()
    client = ScriptedModelClient(responses=["plain summary of the session"])
    settings = CompactionSettings(mode="default")
    outcome = await Compactor(settings=settings, model_client=client).compact(
        transcript, keep_recent_tokens=1
    )  # type: ignore[arg-type]
    assert outcome.summary == "plain summary of the session\n\n<read-files>\nnotes.txt\n</read-files>"
    assert len(client.requests) == 1
    assert client.requests[0].max_tokens == int(0.8 * 16384)
