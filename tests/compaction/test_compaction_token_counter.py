"""A ``token_counter`` given to the compaction planners and :class:`Compactor` decides sizes (issue #12)."""

from __future__ import annotations

import pytest
from tests.compaction._build import assistant, chain, manager, user

from sessionkeeper import EstimateTokenCounter
from sessionkeeper.compaction import (
    CompactionSettings,
    Compactor,
    find_cut_point,
    prepare_branch_entries,
    prepare_compaction,
    split_messages_by_token_share,
)
from sessionkeeper.compaction._memo import message_tokens
from sessionkeeper.testing import FakeTokenCounter
from sessionkeeper.transcript import TranscriptEntry


# Six messages of 400 chars: 100 tokens each by pi's estimate, 400 each counting one token a char.
def _branch() -> list[TranscriptEntry]:
    return chain(
        ("e1", user("a" * 400)),
        ("e2", assistant("b" * 400)),
        ("e3", user("c" * 400)),
        ("e4", assistant("d" * 400)),
        ("e5", user("e" * 400)),
        ("e6", assistant("f" * 400)),
    )


def test_estimate_counter_is_the_default() -> None:
    branch = _branch()
    default = find_cut_point(branch, keep_recent_tokens=250)
    explicit = find_cut_point(branch, keep_recent_tokens=250, token_counter=EstimateTokenCounter())
    assert default == explicit
    assert default.first_kept_entry_index == 3  # 100 + 100 + 100 reaches 250 at e4
    assert Compactor().token_counter.count_text("abcd") == 1
    assert isinstance(Compactor().token_counter, EstimateTokenCounter)


def test_custom_counter_moves_the_cut_point() -> None:
    branch = _branch()
    cut = find_cut_point(branch, keep_recent_tokens=250, token_counter=FakeTokenCounter())
    assert cut.first_kept_entry_index == 5  # 400 tokens at e6 already reach 250
    assert cut.budget_index == 5


def test_prepare_compaction_counts_with_the_counter() -> None:
    branch = _branch()
    pi = prepare_compaction(branch, keep_recent_tokens=250)
    counted = prepare_compaction(branch, keep_recent_tokens=250, token_counter=FakeTokenCounter())
    assert pi is not None and counted is not None
    assert (pi.first_kept_entry_id, pi.kept_tokens, pi.tokens_before_estimate) == ("e4", 300, 600)
    assert (counted.first_kept_entry_id, counted.kept_tokens, counted.tokens_before_estimate) == (
        "e6",
        400,
        2400,
    )
    assert counted.tokens_before == pi.tokens_before  # pi's context estimate, whatever the counter
    assert len(counted.messages_to_summarize) + len(counted.turn_prefix_messages) == 5


def test_compactor_plan_uses_its_counter_and_remembers_counts() -> None:
    counter = FakeTokenCounter()
    compactor = Compactor(settings=CompactionSettings(keep_recent_tokens=250), token_counter=counter)
    assert compactor.token_counter is counter
    branch = _branch()
    plan = compactor.plan(branch, reason="threshold")
    assert plan is not None and plan.first_kept_entry_id == "e6"
    counted = counter.calls
    assert counted == 6  # each message once (the per-counter memo serves the second look)
    again = compactor.plan(branch, reason="threshold")
    assert again == plan
    assert counter.calls == counted


def test_branch_entries_budget_uses_the_counter() -> None:
    branch = _branch()
    assert len(prepare_branch_entries(branch, token_budget=450).messages) == 4
    counted = prepare_branch_entries(branch, token_budget=450, token_counter=FakeTokenCounter())
    assert len(counted.messages) == 1


def test_token_share_split_uses_the_counter() -> None:
    messages = [user("a" * 400), assistant("b"), user("c" * 4), assistant("d")]
    # pi's estimate: 100, 1, 1, 1 -> the big first message is a chunk of its own
    assert [len(c) for c in split_messages_by_token_share(messages, parts=2)] == [1, 3]
    # a counter that counts each message 10 -> two equal halves
    flat = FakeTokenCounter(chars_per_token=1000, per_message=9)
    assert [len(c) for c in split_messages_by_token_share(messages, parts=2, token_counter=flat)] == [2, 2]


@pytest.mark.anyio
async def test_compact_writes_the_cut_of_its_counter() -> None:
    messages = [user("a " * 2000), assistant("b " * 2000), user("c " * 2000), assistant("d " * 2000)]
    settings = CompactionSettings(keep_recent_tokens=1500)
    transcript, ids = await manager(*messages)
    result = await Compactor(settings=settings).compact(transcript, reason="threshold")
    assert result.status == "compacted" and result.entry is not None
    assert result.entry.first_kept_entry_id == ids[2]  # 1000 + 1000 reaches 1500 at the third message

    transcript, ids = await manager(*messages)
    counted = await Compactor(settings=settings, token_counter=FakeTokenCounter()).compact(
        transcript, reason="threshold"
    )
    assert counted.status == "compacted" and counted.entry is not None
    assert counted.entry.first_kept_entry_id == ids[3]
    assert counted.preparation is not None and counted.preparation.kept_tokens == 4000


def test_default_memo_matches_pi_estimate() -> None:
    message = user("x" * 10)
    assert message_tokens(message) == EstimateTokenCounter().count_message(message) == 3
