"""Parent fork policy (OpenClaw spec §4.3 "Parent fork"): token count, cap, fork/skip, operator refusals."""

from __future__ import annotations

import json
import math
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec import UNSET

from sessionkeeper.exceptions import (
    ParentTooLargeError,
    SessionBusyError,
    SessionNotFoundError,
    TranscriptNotFoundError,
)
from sessionkeeper.store import (
    PARENT_FORK_MAX_TOKENS,
    SessionEntry,
    SessionStore,
    TranscriptUsage,
    apply_parent_fork,
    decide_parent_fork,
    fork_transcript_lines,
    parent_fork_tokens,
    read_transcript_usage,
    usage_of_record,
)
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import (
    AssistantMessage,
    MessageEntry,
    TextContent,
    TranscriptManager,
    UserMessage,
    load_transcript_bytes,
)


pytestmark = pytest.mark.anyio

T0 = 1_790_000_000_000
PARENT = "agent:main:discord:channel:c1"
CHILD = "agent:main:discord:channel:c1:thread:t1"
PARENT_ID = "11111111-1111-4111-8111-111111111111"
CHILD_ID = "22222222-2222-4222-8222-222222222222"
FORK_ID = "33333333-3333-4333-8333-333333333333"


def _entry(**fields: Any) -> SessionEntry:
    return SessionEntry(session_id=PARENT_ID, updated_at=T0, **fields)


# ------------------------------------------------------------------------------------- token count


def test_fresh_persisted_total_wins_over_everything() -> None:
    usage = TranscriptUsage(context_state="available", context_total_tokens=900_000)
    assert parent_fork_tokens(_entry(total_tokens=1234), usage=usage, transcript_bytes=10**9) == 1234
    # totalTokensFresh absent counts as fresh (legacy rows); a fresh 0 is a real count
    assert (
        parent_fork_tokens(
            _entry(total_tokens=0, total_tokens_fresh=True), usage=usage, transcript_bytes=10**9
        )
        == 0
    )


def test_stale_total_uses_context_usage_plus_trailing_bytes() -> None:
    usage = TranscriptUsage(context_state="available", context_total_tokens=5000, trailing_bytes=401)
    parent = _entry(total_tokens=90_000, total_tokens_fresh=False)
    # the context count wins outright (no max with the cached total or the file size)
    assert parent_fork_tokens(parent, usage=usage, transcript_bytes=4_000_000) == 5000 + 101


def test_prompt_plus_output_is_maxed_with_cached_total_and_file_bytes() -> None:
    usage = TranscriptUsage(input_tokens=100, cache_read=50, cache_write=25, output_tokens=10)
    stale = _entry(total_tokens=20, total_tokens_fresh=False)
    assert parent_fork_tokens(stale, usage=usage, transcript_bytes=40) == 185
    assert parent_fork_tokens(stale, usage=usage, transcript_bytes=4001) == 1001  # ceil(4001 / 4)
    big_cached = _entry(total_tokens=7000, total_tokens_fresh=False)
    assert parent_fork_tokens(big_cached, usage=usage, transcript_bytes=40) == 7000


def test_unavailable_context_or_no_usage_falls_back_to_cached_and_bytes() -> None:
    stale = _entry(total_tokens=300, total_tokens_fresh=False)
    unavailable = TranscriptUsage(context_state="unavailable", input_tokens=10**6)
    assert parent_fork_tokens(stale, usage=unavailable, transcript_bytes=400) == 300
    assert parent_fork_tokens(stale, usage=None, transcript_bytes=4000) == 1000
    zero = TranscriptUsage(input_tokens=0, output_tokens=0)  # a reply with zero usage gives no prompt count
    assert parent_fork_tokens(stale, usage=zero, transcript_bytes=None) == 300
    assert parent_fork_tokens(SessionEntry(session_id=PARENT_ID), usage=None, transcript_bytes=None) is None


def test_cap_is_strictly_greater_than_100000() -> None:
    assert PARENT_FORK_MAX_TOKENS == 100_000
    at_cap = decide_parent_fork(_entry(total_tokens=100_000), usage=None, transcript_bytes=None)
    over = decide_parent_fork(_entry(total_tokens=100_001), usage=None, transcript_bytes=None)
    unknown = decide_parent_fork(SessionEntry(session_id=PARENT_ID), usage=None, transcript_bytes=None)
    assert (at_cap.action, over.action, unknown.action) == ("fork", "skip", "fork")
    assert over.parent_tokens == 100_001
    assert over.message == (
        "Parent context is too large to fork (100001/100000 tokens); starting with isolated context instead."
    )
    assert at_cap.message == ""


@given(
    total=st.one_of(st.none(), st.integers(min_value=-5, max_value=10**7)),
    fresh=st.sampled_from([None, True, False]),
    size=st.one_of(st.none(), st.integers(min_value=0, max_value=10**9)),
    prompt=st.integers(min_value=0, max_value=10**6),
    output=st.integers(min_value=0, max_value=10**6),
)
def test_token_count_properties(
    total: int | None, fresh: bool | None, size: int | None, prompt: int, output: int
) -> None:
    fields: dict[str, Any] = {}
    if total is not None:
        fields["total_tokens"] = total
    if fresh is not None:
        fields["total_tokens_fresh"] = fresh
    parent = SessionEntry(session_id=PARENT_ID, **fields)
    usage = TranscriptUsage(input_tokens=prompt, output_tokens=output)
    tokens = parent_fork_tokens(parent, usage=usage, transcript_bytes=size)
    decision = decide_parent_fork(parent, usage=usage, transcript_bytes=size)
    assert decision.parent_tokens == tokens
    assert (decision.action == "skip") == (tokens is not None and tokens > PARENT_FORK_MAX_TOKENS)
    if total is not None and total >= 0 and fresh is not False:
        assert tokens == total
    else:
        # never below any positive source
        for source in (total, math.ceil(size / 4) if size else None, prompt + output if prompt else None):
            if source is not None and source > 0:
                assert tokens is not None and tokens >= source


# ------------------------------------------------------------------------------------- usage records


def test_usage_of_record_reads_assistant_usage_and_provider_aliases() -> None:
    pi = {
        "type": "message",
        "message": {"role": "assistant", "usage": {"input": 5, "output": 2, "cacheRead": 1}},
    }
    assert usage_of_record(pi) == TranscriptUsage(input_tokens=5, output_tokens=2, cache_read=1)
    user = {"type": "message", "message": {"role": "user", "usage": {"input": 5}}}
    assert usage_of_record(user) is None
    top_level = {"type": "message", "message": {"role": "assistant"}, "usage": {"input_tokens": 7}}
    assert usage_of_record(top_level) == TranscriptUsage(input_tokens=7)
    openai = {"message": {"role": "assistant", "usage": {"prompt_tokens": 100, "cached_tokens": 40}}}
    assert usage_of_record(openai) == TranscriptUsage(input_tokens=60, cache_read=40)
    context = {
        "message": {
            "role": "assistant",
            "usage": {"contextUsage": {"state": "available", "promptTokens": 9, "totalTokens": 12}},
        }
    }
    assert usage_of_record(context) == TranscriptUsage(context_state="available", context_total_tokens=12)
    bad_context = {
        "message": {
            "role": "assistant",
            "usage": {"contextUsage": {"state": "available", "promptTokens": 9, "totalTokens": 3}},
        }
    }
    assert usage_of_record(bad_context) is None
    model_only = {"message": {"role": "assistant", "model": "m"}}
    assert usage_of_record(model_only) is None
    assert usage_of_record([1]) is None


# ------------------------------------------------------------------------------------- transcripts


def _line(**record: Any) -> str:
    return json.dumps(record, separators=(",", ":"))


def _header(session_id: str = PARENT_ID, cwd: str = "/work") -> str:
    return _line(type="session", version=3, id=session_id, timestamp="2026-09-01T00:00:00.000Z", cwd=cwd)


def _msg(entry_id: str, parent: str | None, role: str, text: str, usage: dict[str, Any] | None = None) -> str:
    message: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": 1}
    if role == "assistant":
        message.update(api="anthropic-messages", provider="anthropic", model="claude", stopReason="stop")
        message["usage"] = usage or {
            "input": 0,
            "output": 0,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 0,
        }
    return _line(
        type="message", id=entry_id, parentId=parent, timestamp="2026-09-01T00:00:01.000Z", message=message
    )


def _usage(inp: int, out: int) -> dict[str, Any]:
    return {"input": inp, "output": out, "cacheRead": 0, "cacheWrite": 0, "totalTokens": inp + out}


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def _branchy(path: Path) -> Path:
    """u1 -> a1 (usage) -> u2 -> a2 (off branch) ; u2 -> u3 (leaf, last in file)."""
    return _write(
        path,
        [
            _header(),
            _msg("u1", None, "user", "hello"),
            _msg("a1", "u1", "assistant", "hi", _usage(1000, 200)),
            _msg("u2", "a1", "user", "next"),
            _msg("b1", "u2", "assistant", "off-branch", _usage(99_000, 99_000)),
            _msg("u3", "u2", "user", "leaf"),
        ],
    )


async def test_read_transcript_usage_uses_active_branch_and_counts_trailing_bytes(tmp_path: Path) -> None:
    path = _branchy(tmp_path / f"{PARENT_ID}.jsonl")
    transcript = await TranscriptManager.open(path)
    usage = read_transcript_usage(transcript)
    lines = path.read_bytes().splitlines()
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens) == (1000, 200)
    assert usage.trailing_bytes == len(lines[3]) + 1 + len(lines[5]) + 1  # u2 and u3, not b1


async def test_read_transcript_usage_none_without_reply(tmp_path: Path) -> None:
    path = _write(tmp_path / "p.jsonl", [_header(), _msg("u1", None, "user", "x")])
    assert read_transcript_usage(await TranscriptManager.open(path)) is None


# ------------------------------------------------------------------------------------- apply


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(now_ms=T0)


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> SessionStore:
    return SessionStore.open(tmp_path, backend="json", clock=clock)


async def _setup(store: SessionStore, tmp_path: Path, *, parent: dict[str, Any] | None = None) -> Path:
    await store.patch(PARENT, {"sessionId": PARENT_ID, **(parent or {})})
    await store.patch(CHILD, {"sessionId": CHILD_ID, "parentSessionKey": PARENT, "totalTokens": 0})
    return _branchy(tmp_path / f"{PARENT_ID}.jsonl")


async def test_fork_copies_the_active_branch_into_a_new_transcript(
    store: SessionStore, tmp_path: Path
) -> None:
    parent_file = await _setup(store, tmp_path)
    result = await apply_parent_fork(store, CHILD, session_id=FORK_ID)
    assert result.status == "forked"
    assert (
        result.decision is not None and result.decision.parent_tokens == 1200
    )  # stale-free totalTokens absent
    target = result.transcript_path
    assert target is not None and target.parent == tmp_path
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z_" + FORK_ID + r"\.jsonl", target.name)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    lines = target.read_bytes().splitlines()
    header = json.loads(lines[0])
    assert (
        header["id"] == FORK_ID and header["parentSession"] == str(parent_file) and header["cwd"] == "/work"
    )
    parent_lines = parent_file.read_bytes().splitlines()
    assert lines[1:] == [parent_lines[1], parent_lines[2], parent_lines[3], parent_lines[5]]  # byte for byte
    child = await store.require(CHILD)
    assert child.session_id == FORK_ID
    assert child.session_file == str(target)
    assert child.forked_from_parent is True
    assert child.total_tokens is UNSET
    assert child.total_tokens_fresh is False
    assert result.entry == child
    forked = await TranscriptManager.open(target)
    parent_context = (await TranscriptManager.open(parent_file)).build_session_context()
    assert forked.build_session_context().messages == parent_context.messages


async def test_over_the_cap_the_child_starts_isolated(store: SessionStore, tmp_path: Path) -> None:
    await _setup(store, tmp_path, parent={"totalTokens": 150_000, "totalTokensFresh": True})
    before = set(os.listdir(tmp_path))
    result = await apply_parent_fork(store, CHILD)
    assert result.status == "skipped"
    assert result.decision is not None and result.decision.parent_tokens == 150_000
    child = await store.require(CHILD)
    assert child.forked_from_parent is True
    assert child.session_id == CHILD_ID
    assert set(os.listdir(tmp_path)) == before  # no transcript written
    # marked: a second call does nothing
    assert (await apply_parent_fork(store, CHILD)).status == "not-needed"


async def test_stale_parent_with_a_huge_transcript_is_skipped(store: SessionStore, tmp_path: Path) -> None:
    await store.patch(PARENT, {"sessionId": PARENT_ID, "totalTokens": 10, "totalTokensFresh": False})
    await store.patch(CHILD, {"sessionId": CHILD_ID, "parentSessionKey": PARENT})
    big = "x" * 500_000  # no usage anywhere: ceil(bytes / 4) > 100 000
    _write(tmp_path / f"{PARENT_ID}.jsonl", [_header(), _msg("u1", None, "user", big)])
    result = await apply_parent_fork(store, CHILD)
    assert result.status == "skipped"
    assert result.decision is not None and result.decision.parent_tokens is not None
    assert result.decision.parent_tokens > 125_000


async def test_fork_from_a_store_opened_by_a_relative_path(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    sessions = Path("agents") / "main" / "sessions"
    store = SessionStore.open(sessions, backend="json", clock=clock)
    await store.patch(PARENT, {"sessionId": PARENT_ID})
    await store.patch(CHILD, {"sessionId": CHILD_ID, "parentSessionKey": PARENT})
    _branchy(tmp_path / sessions / f"{PARENT_ID}.jsonl")
    result = await apply_parent_fork(store, CHILD)
    child = await store.require(CHILD)
    assert result.status == "forked" and isinstance(child.session_file, str)
    assert Path(child.session_file).is_absolute()
    assert store.transcript_file(child) == result.transcript_path


async def test_a_failed_fork_write_leaves_no_file_and_no_change(
    store: SessionStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _setup(store, tmp_path)
    before = set(os.listdir(tmp_path))

    def no_space(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(OSError, match="No space"):
        await apply_parent_fork(store, CHILD)
    monkeypatch.undo()
    assert set(os.listdir(tmp_path)) == before
    child = await store.require(CHILD)
    assert child.session_id == CHILD_ID and child.forked_from_parent is not True


async def test_parent_branch_without_a_reply_gives_a_header_only_fork(
    store: SessionStore, tmp_path: Path
) -> None:
    await store.patch(PARENT, {"sessionId": PARENT_ID})
    await store.patch(CHILD, {"sessionId": CHILD_ID, "parentSessionKey": PARENT})
    parent_file = _write(
        tmp_path / f"{PARENT_ID}.jsonl", [_header(), _msg("u1", None, "user", "only a question")]
    )
    result = await apply_parent_fork(store, CHILD)
    assert result.status == "forked" and result.transcript_path is not None
    lines = result.transcript_path.read_text().splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0])["parentSession"] == str(parent_file)


async def test_not_needed_cases(store: SessionStore, tmp_path: Path) -> None:
    await _setup(store, tmp_path)
    await store.patch("agent:main:main", {"sessionId": "44444444-4444-4444-8444-444444444444"})
    assert (await apply_parent_fork(store, "agent:main:main")).status == "not-needed"  # no parent key
    await store.patch(
        "self", {"sessionId": "55555555-5555-4555-8555-555555555555", "parentSessionKey": "self"}
    )
    assert (await apply_parent_fork(store, "self")).status == "not-needed"
    await store.patch(CHILD, {"forkedFromParent": True})
    result = await apply_parent_fork(store, CHILD)
    assert result.status == "not-needed"
    assert (await store.require(CHILD)).session_id == CHILD_ID


async def test_missing_parent(store: SessionStore, tmp_path: Path) -> None:
    await store.patch(CHILD, {"sessionId": CHILD_ID, "parentSessionKey": PARENT})
    result = await apply_parent_fork(store, CHILD)
    assert result.status == "missing-parent"
    assert (await store.require(CHILD)).forked_from_parent is not True
    with pytest.raises(SessionNotFoundError):
        await apply_parent_fork(store, CHILD, operator=True)
    # parent entry without a transcript file: nothing to fork from
    await store.patch(PARENT, {"sessionId": PARENT_ID})
    assert (await apply_parent_fork(store, CHILD)).status == "missing-parent"
    with pytest.raises(TranscriptNotFoundError):
        await apply_parent_fork(store, CHILD, operator=True)


async def test_absent_child_is_created_with_its_parent_key(store: SessionStore, tmp_path: Path) -> None:
    await store.patch(PARENT, {"sessionId": PARENT_ID})
    _branchy(tmp_path / f"{PARENT_ID}.jsonl")
    result = await apply_parent_fork(
        store, "agent:main:subagent:x", parent_session_key=PARENT, session_id=FORK_ID
    )
    assert result.status == "forked"
    child = await store.require("agent:main:subagent:x")
    assert child.parent_session_key == PARENT and child.session_id == FORK_ID


async def test_operator_fork_refused_while_the_parent_is_locked(store: SessionStore, tmp_path: Path) -> None:
    parent_file = await _setup(store, tmp_path)
    parent = await TranscriptManager.open(parent_file)
    async with parent.hold_write_lock():
        with pytest.raises(SessionBusyError, match=r"Parent session .* is still active") as info:
            await apply_parent_fork(store, CHILD, operator=True)
        assert info.value.owner_pid == os.getpid()
        # the automatic fork of a new thread is not refused
        assert (await apply_parent_fork(store, CHILD)).status == "forked"
    assert (await store.require(PARENT)).session_id == PARENT_ID


@pytest.fixture
def dead_pid() -> int:
    """The pid of a process that has exited."""
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True
    )
    return int(done.stdout)


async def test_operator_fork_ignores_a_dead_owner_lock(
    store: SessionStore, tmp_path: Path, dead_pid: int
) -> None:
    parent_file = await _setup(store, tmp_path)
    lock = parent_file.with_name(parent_file.name + ".lock")
    lock.write_text(json.dumps({"pid": dead_pid, "createdAt": "2026-09-01T00:00:00.000Z"}))
    assert (await apply_parent_fork(store, CHILD, operator=True)).status == "forked"


async def test_operator_fork_over_the_cap_is_an_error(store: SessionStore, tmp_path: Path) -> None:
    await _setup(store, tmp_path, parent={"totalTokens": 100_001})
    with pytest.raises(ParentTooLargeError, match=r"\(100001/100000 tokens\)") as info:
        await apply_parent_fork(store, CHILD, operator=True)
    assert (info.value.parent_tokens, info.value.max_tokens) == (100_001, 100_000)
    child = await store.require(CHILD)
    assert child.forked_from_parent is not True and child.session_id == CHILD_ID


# ------------------------------------------------------------------------------------- oracle

ORACLE = Path(__file__).resolve().parents[1] / "data" / "oracle"
_ORACLE_CASES = json.loads((ORACLE / "fork-cases.json").read_text())
_ORACLE_RESULTS = {r["name"]: r for r in json.loads((ORACLE / "fork-results.json").read_text())}


def _reduce(lines: list[str]) -> list[dict[str, Any]]:
    """The oracle's view of a fork's entries: lines, and labels without their random ids."""
    out: list[dict[str, Any]] = []
    last = None
    for line in lines:
        entry = json.loads(line)
        if entry["type"] == "label":
            out.append(
                {
                    "type": "label",
                    "parentIsLast": entry["parentId"] == last,
                    "targetId": entry["targetId"],
                    "label": entry["label"],
                }
            )
        else:
            out.append({"line": line})
        last = entry["id"]
    return out


@pytest.mark.parametrize("case", _ORACLE_CASES, ids=[c["name"] for c in _ORACLE_CASES])
async def test_fork_matches_openclaw(case: dict[str, Any], tmp_path: Path, clock: FakeClock) -> None:
    """18 cases run through OpenClaw's own fork sizing and transcript fork (regen_fork_fixtures.py)."""
    expected = _ORACLE_RESULTS[case["name"]]
    sessions = tmp_path / "agents" / "main" / "sessions"
    parent_file = sessions / f"{case['entry']['sessionId']}.jsonl"
    store = SessionStore.open(sessions, backend="json", clock=clock)
    if case["transcript"] is not None:
        sessions.mkdir(parents=True)
        parent_file.write_text(case["transcript"])
    await store.patch(PARENT, case["entry"])
    await store.patch(CHILD, {"sessionId": CHILD_ID, "parentSessionKey": PARENT})
    result = await apply_parent_fork(store, CHILD)
    assert result.decision is not None
    assert result.decision.parent_tokens == expected["tokens"]
    assert result.decision.action == expected["decision"]["status"]
    if expected["decision"]["status"] == "skip":
        assert result.status == "skipped"
        return
    if expected["fork"] is None:
        assert result.status == "missing-parent"
        return
    assert result.status == "forked" and result.transcript_path is not None
    lines = result.transcript_path.read_text().splitlines()
    header = json.loads(lines[0])
    assert list(header) == expected["fork"]["headerKeys"]
    assert header["cwd"] == expected["fork"]["cwd"]
    assert (header["parentSession"] == str(parent_file)) == expected["fork"]["parentSessionIsSource"]
    assert _reduce(lines[1:]) == expected["fork"]["entries"]
    forked = await TranscriptManager.open(result.transcript_path)
    assert forked.diagnostics.missing_parents == ()


# ------------------------------------------------------------------------------------- property

_op = st.one_of(
    st.tuples(st.just("user"), st.integers(0, 3)),
    st.tuples(st.just("assistant"), st.integers(0, 3)),
    st.tuples(st.just("label"), st.integers(0, 50)),
    st.tuples(st.just("branch"), st.integers(0, 50)),
)


@given(ops=st.lists(_op, min_size=1, max_size=30))
def test_a_fork_never_loses_a_parent_and_keeps_the_context(ops: list[tuple[str, int]]) -> None:
    """Random trees with labels anywhere: the fork loads without missing parents, with the same context."""

    async def run() -> None:
        parent = TranscriptManager.in_memory(cwd="/w")
        ids: list[str] = []
        for kind, n in ops:
            if kind == "user":
                entry = await parent.append_message(UserMessage(content=f"u{n}", timestamp=n))
            elif kind == "assistant":
                reply = AssistantMessage(
                    content=[TextContent(text=f"a{n}")], api="x", provider="p", model="m"
                )
                entry = await parent.append_message(reply)
            elif kind == "label" and ids:
                entry = await parent.append_label(ids[n % len(ids)], f"L{n}")
            elif kind == "branch" and ids:
                parent.branch(ids[n % len(ids)])
                continue
            else:
                continue
            ids.append(entry.id)
        lines = fork_transcript_lines(parent, session_id=FORK_ID, now_ms=T0, parent_session="/p.jsonl")
        forked = load_transcript_bytes(b"".join(line + b"\n" for line in lines))
        assert json.loads(lines[0])["parentSession"] == "/p.jsonl"
        branch_has_reply = any(
            isinstance(e, MessageEntry) and isinstance(e.message, AssistantMessage)
            for e in parent.get_branch()
        )
        if not branch_has_reply:
            assert len(lines) == 1
            return
        assert forked.diagnostics.missing_parents == ()
        assert forked.build_context().messages == parent.build_session_context().messages

    anyio.run(run)
