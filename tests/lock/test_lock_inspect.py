"""Lock payload format, staleness rules and remove-if-unchanged (OpenClaw spec §3; DESIGN D8)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionkeeper._lockfile import (
    LockOwner,
    format_lock_payload,
    inspect_lock_owner,
    is_pid_alive,
    iso_ms,
    lock_path_for,
    parse_lock_payload,
    process_start_time,
    read_lock_snapshot,
    reclaim_decision,
    remove_if_unchanged,
)


NOW = 1_780_000_000_000
ME = 4242
LOCK = Path("/x/s.jsonl.lock")


def inspect(
    owner: LockOwner,
    *,
    alive: bool = True,
    start: int | None = 77,
    held: bool = False,
    stale_ms: int = 1_800_000,
):
    return inspect_lock_owner(
        owner,
        lock_path=LOCK,
        now_ms=NOW,
        stale_ms=stale_ms,
        held_by_this_process=held,
        self_pid=ME,
        pid_alive=lambda _pid: alive,
        start_time=lambda _pid: start,
    )


# -- payload ------------------------------------------------------------------------------------


def test_payload_is_byte_for_byte_openclaw_format() -> None:
    raw = format_lock_payload(pid=1234, created_at_ms=1_778_148_672_345, max_hold_ms=300_000, starttime=98765)
    assert raw == (
        b'{\n  "pid": 1234,\n  "createdAt": "2026-05-07T10:11:12.345Z",\n'
        b'  "maxHoldMs": 300000,\n  "starttime": 98765\n}\n'
    )


def test_payload_without_starttime_omits_the_key() -> None:
    raw = format_lock_payload(pid=1, created_at_ms=0, max_hold_ms=5, starttime=None)
    assert json.loads(raw) == {"pid": 1, "createdAt": "1970-01-01T00:00:00.000Z", "maxHoldMs": 5}


def test_both_created_at_formats_are_read() -> None:
    iso = parse_lock_payload('{"pid": 9, "createdAt": "2026-05-07T10:11:12.345Z"}')
    numeric = parse_lock_payload('{"pid":9,"createdAt":1778148672345,"starttime":123,"maxHoldMs":300000}')
    assert iso.created_at_ms == numeric.created_at_ms == 1_778_148_672_345
    assert numeric.starttime == 123
    assert numeric.max_hold_ms == 300_000
    assert numeric.created_at == "1778148672345"


@pytest.mark.parametrize(
    "raw",
    ["", "not json", "[1,2]", '{"pid": -3}', '{"pid": true}', '{"pid": "12"}', '{"pid": 0}', "\udcff"],
)
def test_bad_payloads_give_no_pid(raw: str) -> None:
    assert parse_lock_payload(raw).pid is None


def test_invalid_fields_are_dropped() -> None:
    owner = parse_lock_payload('{"pid": 5, "createdAt": "yesterday", "starttime": -1, "maxHoldMs": 0}')
    assert owner == LockOwner(pid=5, created_at="yesterday")


@given(
    pid=st.integers(1, 2**31),
    created=st.integers(0, 4_102_444_800_000),
    hold=st.integers(1, 2**40),
    start=st.none() | st.integers(0, 2**50),
)
def test_format_parse_round_trip(pid: int, created: int, hold: int, start: int | None) -> None:
    owner = parse_lock_payload(
        format_lock_payload(pid=pid, created_at_ms=created, max_hold_ms=hold, starttime=start)
    )
    assert (owner.pid, owner.created_at_ms, owner.max_hold_ms, owner.starttime) == (pid, created, hold, start)
    assert owner.created_at == iso_ms(created)


def test_lock_path_is_transcript_plus_lock() -> None:
    assert lock_path_for("/a/b/s.jsonl") == Path("/a/b/s.jsonl.lock")


# -- stale reasons ------------------------------------------------------------------------------


def owner(**kw: object) -> LockOwner:
    base: dict[str, object] = {
        "pid": 99,
        "created_at_ms": NOW - 1000,
        "starttime": 77,
        "max_hold_ms": 300_000,
    }
    base.update(kw)
    return LockOwner(**base)  # type: ignore[arg-type]


def test_fresh_live_owner_is_not_stale() -> None:
    result = inspect(owner())
    assert result.stale_reasons == ()
    assert result.age_ms == 1000
    assert result.describe() == "pid=99 alive=true ageMs=1000"


def test_missing_pid() -> None:
    assert inspect(owner(pid=None)).stale_reasons == ("missing-pid",)


def test_dead_pid() -> None:
    result = inspect(owner(), alive=False)
    assert result.stale_reasons == ("dead-pid",)
    assert result.describe() == "pid=99 alive=false ageMs=1000"


def test_recycled_pid_when_start_time_differs() -> None:
    assert inspect(owner(starttime=76), start=77).stale_reasons == ("recycled-pid",)


def test_no_recycle_verdict_without_start_times() -> None:
    assert inspect(owner(starttime=None), start=77).stale_reasons == ()
    assert inspect(owner(starttime=76), start=None).stale_reasons == ()


def test_invalid_created_at() -> None:
    assert inspect(owner(created_at_ms=None)).stale_reasons == ("invalid-createdAt",)


def test_too_old_after_stale_ms() -> None:
    assert inspect(owner(created_at_ms=NOW - 1_800_000, max_hold_ms=None)).stale_reasons == ()
    assert inspect(owner(created_at_ms=NOW - 1_800_001, max_hold_ms=None)).stale_reasons == ("too-old",)


def test_hold_exceeded_only_when_not_held_here() -> None:
    old = owner(created_at_ms=NOW - 300_001)
    assert inspect(old).stale_reasons == ("hold-exceeded",)
    assert inspect(old, held=True).stale_reasons == ()


def test_orphan_self_pid() -> None:
    assert inspect(owner(pid=ME, starttime=77), start=77).stale_reasons == ("orphan-self-pid",)
    assert inspect(owner(pid=ME, starttime=None)).stale_reasons == ("orphan-self-pid",)
    assert inspect(owner(pid=ME, starttime=77), start=77, held=True).stale_reasons == ()


def test_future_created_at_has_age_zero() -> None:
    assert inspect(owner(created_at_ms=NOW + 60_000)).age_ms == 0


# -- reclaim policy -----------------------------------------------------------------------------


def decide(
    reasons_owner: LockOwner,
    *,
    alive: bool = True,
    mtime_age_ms: float | None = 0,
    stale_ms: int = 1_800_000,
    grace: int = 30_000,
) -> str:
    result = inspect(reasons_owner, alive=alive, stale_ms=stale_ms)
    mtime = None if mtime_age_ms is None else NOW - mtime_age_ms
    return reclaim_decision(result, lock_mtime_ms=mtime, now_ms=NOW, stale_ms=stale_ms, orphan_grace_ms=grace)


def test_live_fresh_owner_waits() -> None:
    assert decide(owner()) == "wait"


def test_live_owner_too_old_or_over_hold_is_reported_never_removed() -> None:
    assert decide(owner(created_at_ms=NOW - 2_000_000, max_hold_ms=None)) == "report"
    assert decide(owner(created_at_ms=NOW - 400_000)) == "report"
    assert decide(owner(created_at_ms=NOW - 2_000_000)) == "report"


def test_dead_or_recycled_owner_is_removed_even_when_young() -> None:
    assert decide(owner(), alive=False) == "remove"
    assert decide(owner(starttime=1)) == "remove"
    assert decide(owner(created_at_ms=NOW - 2_000_000), alive=False) == "remove"


def test_payloadless_lock_waits_for_grace_then_goes() -> None:
    empty = LockOwner()
    assert decide(empty, mtime_age_ms=29_000) == "wait"
    assert decide(empty, mtime_age_ms=30_001) == "remove"
    assert decide(empty, mtime_age_ms=5_001, grace=5_000) == "remove"
    assert decide(empty, mtime_age_ms=4_000, grace=5_000) == "wait"
    assert decide(empty, mtime_age_ms=2_000, stale_ms=1_000) == "remove"  # min(staleMs, grace)
    assert decide(owner(created_at_ms=None), mtime_age_ms=10) == "wait"
    assert decide(owner(created_at_ms=None), alive=False, mtime_age_ms=30_001) == "remove"


def test_live_owner_with_unreadable_created_at_is_never_removed() -> None:
    # D8 deviation: OpenClaw removes it once the file is older than the grace; a live owner stays.
    assert decide(owner(created_at_ms=None), mtime_age_ms=10**9) == "wait"


# -- processes ----------------------------------------------------------------------------------


def test_process_start_time_of_self_and_child() -> None:
    mine = process_start_time(os.getpid())
    if not os.path.exists("/proc/self/stat"):
        assert mine is None
        return
    assert isinstance(mine, int)
    assert process_start_time(os.getpid()) == mine
    assert process_start_time(0) is None


def test_liveness(sleeper: subprocess.Popen[bytes], reaped_pid: int) -> None:
    assert is_pid_alive(os.getpid())
    assert is_pid_alive(sleeper.pid)
    assert not is_pid_alive(reaped_pid)
    assert not is_pid_alive(0)
    assert not is_pid_alive(2**40)


def test_zombie_counts_as_dead() -> None:
    proc = subprocess.Popen(["/bin/sh", "-c", "exit 0"])
    try:
        for _ in range(500):
            with open(f"/proc/{proc.pid}/status") as fh:
                if "State:\tZ" in fh.read():
                    break
            os.sched_yield()
        assert not is_pid_alive(proc.pid)
    finally:
        proc.wait()


# -- remove-if-unchanged ------------------------------------------------------------------------


def test_remove_if_unchanged_removes_the_observed_file(tmp_path: Path) -> None:
    lock = tmp_path / "s.jsonl.lock"
    lock.write_bytes(b'{"pid": 1}\n')
    snap = read_lock_snapshot(lock)
    assert snap is not None
    assert remove_if_unchanged(lock, snap)
    assert not lock.exists()
    assert not remove_if_unchanged(lock, snap)


def test_rewritten_lock_is_not_removed(tmp_path: Path) -> None:
    lock = tmp_path / "s.jsonl.lock"
    lock.write_bytes(b'{"pid": 1}\n')
    snap = read_lock_snapshot(lock)
    assert snap is not None
    lock.write_bytes(b'{"pid": 2}\n')  # same inode, new content
    assert not remove_if_unchanged(lock, snap)
    assert lock.read_bytes() == b'{"pid": 2}\n'


def test_replaced_lock_with_same_content_is_not_removed(tmp_path: Path) -> None:
    lock = tmp_path / "s.jsonl.lock"
    lock.write_bytes(b'{"pid": 1}\n')
    snap = read_lock_snapshot(lock)
    assert snap is not None
    lock.unlink()
    other = tmp_path / "other"
    other.write_bytes(b'{"pid": 1}\n')  # same bytes, another inode (kept alive so it is not reused)
    os.link(other, tmp_path / "keep")
    other.rename(lock)
    assert not remove_if_unchanged(lock, snap)
    assert lock.exists()


def test_symlink_lock_is_read_as_unreadable_and_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "victim"
    target.write_text('{"pid": 1}')
    lock = tmp_path / "s.jsonl.lock"
    lock.symlink_to(target)
    snap = read_lock_snapshot(lock)
    assert snap is not None
    assert snap.raw == b""
    assert remove_if_unchanged(lock, snap)
    assert not lock.is_symlink()
    assert target.read_text() == '{"pid": 1}'


# -- properties ---------------------------------------------------------------------------------

ages = st.one_of(st.none(), st.integers(-(10**9), 10**10))


@given(
    age=ages,
    max_hold=st.one_of(st.none(), st.integers(1, 10**10)),
    stale_ms=st.integers(1, 10**10),
    start=st.one_of(st.none(), st.just(77)),
    held=st.booleans(),
    mtime_age=st.one_of(st.none(), st.floats(0, 1e10)),
)
def test_a_live_owner_is_never_removed(  # noqa: PLR0917
    age: int | None,
    max_hold: int | None,
    stale_ms: int,
    start: int | None,
    held: bool,
    mtime_age: float | None,
) -> None:
    """D8: whatever its age, hold or the file's mtime, a live, non-recycled, foreign owner stays."""
    live = LockOwner(
        pid=99,
        created_at_ms=None if age is None else NOW - age,
        created_at=None if age is None else "x",
        starttime=start,
        max_hold_ms=max_hold,
    )
    result = inspect(live, alive=True, start=77, held=held, stale_ms=stale_ms)
    assert set(result.stale_reasons) <= {"too-old", "hold-exceeded", "invalid-createdAt"}
    mtime = None if mtime_age is None else NOW - mtime_age
    decision = reclaim_decision(result, lock_mtime_ms=mtime, now_ms=NOW, stale_ms=stale_ms)
    assert decision in {"wait", "report"}


@given(original=st.binary(min_size=1, max_size=300), edited=st.binary(min_size=1, max_size=300))
def test_remove_if_unchanged_only_removes_identical_content(
    tmp_path_factory: pytest.TempPathFactory, original: bytes, edited: bytes
) -> None:
    lock = tmp_path_factory.mktemp("prop") / "s.jsonl.lock"
    lock.write_bytes(original)
    snap = read_lock_snapshot(lock)
    assert snap is not None
    with lock.open("r+b") as fh:  # rewrite in place: same inode
        fh.truncate(0)
        fh.write(edited)
    os.utime(lock, ns=(snap.mtime_ns, snap.mtime_ns))  # even with the mtime put back
    removed = remove_if_unchanged(lock, snap)
    assert removed == (edited == original)
    assert lock.exists() == (edited != original)
