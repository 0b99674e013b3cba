"""The landing check of a compaction planned on a snapshot (compaction/_landing.py, issue #7)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sessionkeeper.compaction._landing import check_landing
from sessionkeeper.transcript import CompactionEntry, MessageEntry, TranscriptEntry, UserMessage


def _msg(entry_id: str, parent: str | None) -> MessageEntry:
    return MessageEntry(
        id=entry_id, parent_id=parent, timestamp="t", message=UserMessage(content=entry_id, timestamp=1)
    )


def _compaction(entry_id: str, parent: str | None, first_kept: str) -> CompactionEntry:
    return CompactionEntry(
        id=entry_id,
        parent_id=parent,
        timestamp="t",
        summary="s",
        first_kept_entry_id=first_kept,
        tokens_before=9,
    )


def _chain(*ids: str) -> list[TranscriptEntry]:
    out: list[TranscriptEntry] = []
    for entry_id in ids:
        out.append(_msg(entry_id, out[-1].id if out else None))
    return out


def test_nothing_written_meanwhile_lands_on_the_planned_leaf() -> None:
    planned = _chain("a", "b", "c")
    check = check_landing(planned, planned)
    assert check.verdict == "land"
    assert not check.superseded
    assert check.arrived == ()
    assert check.parent_id == "c"
    assert check.reason is None


def test_messages_written_meanwhile_land_before_the_entry_and_are_reported() -> None:
    planned = _chain("a", "b", "c")
    path = [*planned, _msg("d", "c"), _msg("e", "d")]
    check = check_landing(planned, path)
    assert check.verdict == "land"
    assert check.arrived == ("d", "e")
    assert check.parent_id == "e"


def test_another_compaction_on_the_path_supersedes() -> None:
    planned = _chain("a", "b", "c")
    path = [*planned, _msg("d", "c"), _compaction("k", "d", "b"), _msg("e", "k")]
    check = check_landing(planned, path)
    assert check.superseded
    assert check.reason is not None
    assert "k" in check.reason


def test_an_earlier_compaction_of_the_planned_branch_does_not_supersede() -> None:
    planned = [*_chain("a", "b"), _compaction("k", "b", "b"), _msg("c", "k")]
    check = check_landing(planned, [*planned, _msg("d", "c")])
    assert check.verdict == "land"


def test_branching_away_from_the_planned_branch_supersedes() -> None:
    planned = _chain("a", "b", "c")
    path = [planned[0], planned[1], _msg("x", "b")]  # the leaf moved to a sibling of c
    check = check_landing(planned, path)
    assert check.superseded
    assert check.reason is not None
    assert "c" in check.reason


def test_a_strict_checkpoint_keeps_what_arrived() -> None:
    planned = _chain("a", "b")
    landed = check_landing(planned, [*planned, _msg("c", "b"), _msg("d", "c")])
    assert landed.first_kept_entry_id(None) == "c"
    assert landed.first_kept_entry_id("a") == "a"
    quiet = check_landing(planned, planned)
    assert quiet.first_kept_entry_id(None) is None


@given(
    planned_len=st.integers(1, 6),
    arrived_len=st.integers(0, 4),
    compaction_at=st.one_of(st.none(), st.integers(0, 3)),
)
def test_lands_exactly_when_the_plan_is_a_prefix_and_no_new_compaction(
    planned_len: int, arrived_len: int, compaction_at: int | None
) -> None:
    planned = _chain(*(f"p{i}" for i in range(planned_len)))
    path = list(planned)
    for i in range(arrived_len):
        parent = path[-1].id
        if compaction_at == i:
            path.append(_compaction(f"k{i}", parent, planned[0].id))
        else:
            path.append(_msg(f"n{i}", parent))
    check = check_landing(planned, path)
    foreign_compaction = compaction_at is not None and compaction_at < arrived_len
    assert check.superseded == foreign_compaction
    if not check.superseded:
        assert check.arrived == tuple(e.id for e in path[planned_len:])
        assert check.parent_id == path[-1].id
