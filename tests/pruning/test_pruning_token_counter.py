"""A ``token_counter`` given to :class:`Pruner` weighs the context (issue #12)."""

from __future__ import annotations

from tests._helpers import assistant, tool_call, tool_result, user

from sessionkeeper import EstimateTokenCounter
from sessionkeeper.pruning import Pruner, PruningSettings, prune_context_messages
from sessionkeeper.records import AgentMessage
from sessionkeeper.testing import FakeTokenCounter


def _context() -> list[AgentMessage]:
    return [
        user("look at the file"),
        assistant(tool_call("c1")),
        tool_result("c1", "x" * 5000),
        assistant("done"),
    ]


SETTINGS = PruningSettings(mode="cache-ttl", keep_last_assistants=1)


def test_estimate_counter_keeps_openclaw_numbers() -> None:
    messages = _context()
    default = prune_context_messages(messages, settings=SETTINGS, context_window_tokens=10_000)
    explicit = prune_context_messages(
        messages, settings=SETTINGS, context_window_tokens=10_000, token_counter=EstimateTokenCounter()
    )
    assert default == explicit
    # 5000 + small chars against a 40000-char window: below the 0.3 soft-trim ratio
    assert default.skipped == "below-soft-trim-ratio"
    assert isinstance(Pruner().token_counter, EstimateTokenCounter)


def test_custom_counter_triggers_soft_trim() -> None:
    messages = _context()
    # one token a char: the result weighs 4 x 5000 = 20000 char-equivalents, ratio >= 0.3
    result = prune_context_messages(
        messages, settings=SETTINGS, context_window_tokens=10_000, token_counter=FakeTokenCounter()
    )
    assert result.skipped is None
    assert result.soft_trimmed == ("c1",)
    assert result.chars_before == 4 * sum(FakeTokenCounter().count_message(m) for m in messages)
    assert result.chars_after < result.chars_before


def test_pruner_passes_its_counter() -> None:
    messages = _context()
    plain = Pruner(settings=SETTINGS).prune(
        messages, context_window_tokens=10_000, last_cache_touch_at=None, now_ms=1
    )
    counted = Pruner(settings=SETTINGS, token_counter=FakeTokenCounter()).prune(
        messages, context_window_tokens=10_000, last_cache_touch_at=None, now_ms=1
    )
    assert not plain.changed and plain.skipped == "below-soft-trim-ratio"
    assert counted.changed and counted.soft_trimmed == ("c1",)
    assert counted.last_cache_touch_at == 1
