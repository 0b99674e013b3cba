"""TranscriptManager: appends, branching, fork/clone, writes and repairs (spec §4-11, DESIGN D7, B01/B02)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from tests._helpers import assistant, user

from sessionkeeper.exceptions import EntryNotFoundError, TranscriptFormatError, UnsafePathError
from sessionkeeper.testing import FakeClock
from sessionkeeper.transcript import (
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomEntry,
    CustomMessage,
    CustomMessageEntry,
    ImageContent,
    LabelEntry,
    MessageEntry,
    TextContent,
    ToolResultMessage,
    TranscriptManager,
    UserMessage,
    load_transcript,
    message_to_builtins,
)


pytestmark = pytest.mark.anyio


def _glob(path: Path, pattern: str) -> list[Path]:
    return list(path.glob(pattern))


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().decode("utf-8").splitlines()]


def _texts(ctx) -> list[str]:
    out = []
    for m in ctx.messages:
        raw = message_to_builtins(m)
        content = raw.get("content", raw.get("summary"))
        out.append(content if isinstance(content, str) else content[0]["text"])
    return out


async def test_create_writes_header_at_once_with_modes(tmp_path: Path) -> None:
    path = tmp_path / "new" / "deep" / "s.jsonl"
    clock = FakeClock()
    m = await TranscriptManager.create(path, cwd="/home/dev", session_id="sid-1", clock=clock)
    assert _lines(path) == [
        {
            "type": "session",
            "version": 3,
            "id": "sid-1",
            "timestamp": "2026-01-01T00:00:00.000Z",
            "cwd": "/home/dev",
        }
    ]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700
    assert m.session_id == "sid-1"
    assert m.leaf_id is None
    assert _glob(tmp_path, "new/deep/*.tmp") == []


async def test_create_default_session_id_is_uuid7(tmp_path: Path) -> None:
    m = await TranscriptManager.create(tmp_path / "s.jsonl", cwd="/")
    assert m.session_id[14] == "7"
    assert len(m.session_id) == 36


async def test_create_refuses_existing_file_and_unsafe_ids(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("keep me")
    with pytest.raises(FileExistsError):
        await TranscriptManager.create(path, cwd="/")
    assert path.read_text() == "keep me"
    for bad in ("../evil", "a/b", "..", "", "x\0y", "a\\b"):
        with pytest.raises(UnsafePathError):
            await TranscriptManager.create(tmp_path / "ok.jsonl", cwd="/", session_id=bad)
    assert not (tmp_path / "ok.jsonl").exists()


async def test_every_append_is_written_at_once(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    m = await TranscriptManager.create(path, cwd="/", clock=FakeClock(), durability="none")
    u = await m.append_message(user("hi", blocks=True))
    assert len(_lines(path)) == 2  # no deferred write before the first assistant message (D7)
    assert _lines(path)[1]["id"] == u.id
    assert _lines(path)[1]["parentId"] is None
    assert path.read_bytes().endswith(b"\n")


async def test_ids_are_8_hex_and_unique(tmp_path: Path) -> None:
    m = TranscriptManager.in_memory()
    ids = [(await m.append_custom("x")).id for _ in range(200)]
    assert len(set(ids)) == 200
    assert all(len(i) == 8 and all(c in "0123456789abcdef" for c in i) for i in ids)


async def test_every_entry_type_round_trips_and_chains(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    clock = FakeClock()
    m = await TranscriptManager.create(path, cwd="/", clock=clock)
    e1 = await m.append_model_change("anthropic", model_id="claude")
    e2 = await m.append_thinking_level_change("high")
    e3 = await m.append_message(user("question 😀", blocks=True))
    e4 = await m.append_message(assistant("answer", ts=2, model="m"))
    e5 = await m.append_custom("ext", data={"k": [1, 2]})
    e6 = await m.append_custom_message("ext", content="hidden note", display=False, details={"d": 1})
    e7 = await m.append_compaction(summary="S", first_kept_entry_id=e3.id, tokens_before=42, from_hook=False)
    e8 = await m.append_label(e3.id, "q")
    e9 = await m.append_session_info("  My session ")
    e10 = await m.append_branch_summary("summary here", details={"readFiles": [], "modifiedFiles": []})
    chain = [e1, e2, e3, e4, e5, e6, e7, e8, e9, e10]
    assert [e.parent_id for e in chain] == [None, *[e.id for e in chain[:-1]]]
    lines = _lines(path)
    assert [line["type"] for line in lines[1:]] == [
        "model_change", "thinking_level_change", "message", "message", "custom", "custom_message",
        "compaction", "label", "session_info", "branch_summary",
    ]  # fmt: skip
    assert list(lines[5]) == ["type", "customType", "data", "id", "parentId", "timestamp"]
    assert lines[7]["fromHook"] is False
    assert "details" not in lines[7]
    assert lines[9]["name"] == "My session"
    assert lines[10]["fromId"] == e9.id
    reopened = await TranscriptManager.open(path)
    assert reopened.entries() == m.entries()
    assert reopened.build_session_context() == m.build_session_context()
    assert reopened.session_name == "My session"
    assert reopened.labels == {e3.id: "q"}
    ctx = reopened.build_session_context()
    assert ctx.thinking_level == "high"
    assert isinstance(ctx.messages[0], CompactionSummaryMessage)
    assert _texts(ctx)[1:] == ["question 😀", "answer", "hidden note", "summary here"]


async def test_append_message_refuses_summary_and_custom_roles() -> None:
    m = TranscriptManager.in_memory()
    for bad in (
        CompactionSummaryMessage(summary="s", tokens_before=1, timestamp=1),
        BranchSummaryMessage(summary="s", from_id="root", timestamp=1),
        CustomMessage(custom_type="x", content="c", display=True, timestamp=1),
    ):
        with pytest.raises(TypeError):
            await m.append_message(bad)
    assert m.entries() == []


async def test_append_messages_chains_in_one_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    m = await TranscriptManager.create(path, cwd="/", clock=FakeClock())
    first = await m.append_message(user("q", blocks=True))
    writes: list[int] = []
    real = TranscriptManager._write_lines

    async def counting(self: TranscriptManager, lines: list[bytes]) -> None:
        writes.append(len(lines))
        await real(self, lines)

    monkeypatch.setattr(TranscriptManager, "_write_lines", counting)
    entries = await m.append_messages(
        [assistant("a", ts=2, model="m"), user("b", blocks=True), assistant("c", ts=2, model="m")]
    )
    assert writes == [3]
    assert [e.parent_id for e in entries] == [first.id, entries[0].id, entries[1].id]
    assert len({e.id for e in entries} | {first.id}) == 4
    assert m.leaf_id == entries[-1].id
    assert [line["id"] for line in _lines(path)[1:]] == [first.id, *(e.id for e in entries)]
    reopened = await TranscriptManager.open(path)
    assert reopened.entries() == m.entries()
    assert _texts(reopened.build_session_context()) == ["q", "a", "b", "c"]
    assert await m.append_messages([]) == []
    with pytest.raises(TypeError):
        await m.append_messages(
            [user("x", blocks=True), CustomMessage(custom_type="x", content="c", display=True, timestamp=1)]
        )
    assert writes == [3]
    assert len(m.entries()) == 4
    bad_result = ToolResultMessage(
        tool_call_id="c1",
        tool_name="read",
        content=[TextContent(text="r")],
        details={"h": object()},
        timestamp=3,
    )
    with pytest.raises(TranscriptFormatError, match="nothing was written"):
        await m.append_messages([user("x", blocks=True), bad_result])
    assert writes == [3]
    assert len(m.entries()) == 4
    assert m.leaf_id == entries[-1].id


async def test_append_chain_writes_entries_of_any_types_in_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    m = await TranscriptManager.create(path, cwd="/", clock=FakeClock())
    first = await m.append_message(user("q", blocks=True))
    writes: list[int] = []
    real = TranscriptManager._write_lines

    async def counting(self: TranscriptManager, lines: list[bytes]) -> None:
        writes.append(len(lines))
        await real(self, lines)

    monkeypatch.setattr(TranscriptManager, "_write_lines", counting)
    written = await m.append_chain(
        [
            lambda i, p, t: MessageEntry(
                id=i, parent_id=p, timestamp=t, message=assistant("a", ts=2, model="m")
            ),
            lambda i, p, t: CustomEntry(custom_type="x.mark", data={"n": 1}, id=i, parent_id=p, timestamp=t),
        ]
    )
    assert written is not None and writes == [2]
    assert [type(e) for e in written] == [MessageEntry, CustomEntry]
    assert [e.parent_id for e in written] == [first.id, written[0].id]
    assert m.leaf_id == written[-1].id
    assert [line["type"] for line in _lines(path)[1:]] == ["message", "message", "custom"]
    assert (await TranscriptManager.open(path)).entries() == m.entries()
    assert await m.append_chain([]) == [] and writes == [2]


async def test_label_target_must_exist_and_clear() -> None:
    m = TranscriptManager.in_memory()
    with pytest.raises(EntryNotFoundError):
        await m.append_label("nope", "x")
    u = await m.append_message(user("a", blocks=True))
    await m.append_label(u.id, "mark")
    assert m.get_label(u.id) == "mark"
    cleared = await m.append_label(u.id, None)
    assert isinstance(cleared, LabelEntry)
    assert m.get_label(u.id) is None
    assert "label" not in message_to_builtins(cleared)


async def test_branch_reset_leaf_and_branch_with_summary() -> None:
    m = TranscriptManager.in_memory()
    u = await m.append_message(user("q", blocks=True))
    a1 = await m.append_message(assistant("one", ts=2, model="m"))
    with pytest.raises(EntryNotFoundError):
        m.branch("missing")
    m.branch(u.id)
    a2 = await m.append_message(assistant("two", ts=2, model="m"))
    assert a2.parent_id == u.id
    assert {e.id for e in m.get_children(u.id)} == {a1.id, a2.id}
    assert [e.id for e in m.get_branch(a1.id)] == [u.id, a1.id]
    m.reset_leaf()
    assert m.build_session_context().messages == ()
    root2 = await m.append_message(user("fresh", blocks=True))
    assert root2.parent_id is None
    summary = await m.branch_with_summary(None, "from root")
    assert summary.parent_id is None
    assert summary.from_id == "root"
    s2 = await m.branch_with_summary(a1.id, "back")
    assert (s2.parent_id, s2.from_id, m.leaf_id) == (a1.id, a1.id, s2.id)
    with pytest.raises(EntryNotFoundError):
        await m.branch_with_summary("zzz", "x")


async def test_leaf_after_reopen_is_last_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    m = await TranscriptManager.create(path, cwd="/", durability="none")
    u = await m.append_message(user("q", blocks=True))
    last = await m.append_message(assistant("a", ts=2, model="m"))
    m.branch(u.id)  # navigation without an append is not persisted (spec §4)
    reopened = await TranscriptManager.open(path)
    assert reopened.leaf_id == last.id


async def test_tree_sorted_by_timestamp_with_labels() -> None:
    clock = FakeClock()
    m = TranscriptManager.in_memory(clock=clock)
    root = await m.append_message(user("root", blocks=True))
    clock.advance(5)
    late = await m.append_message(assistant("late", ts=2, model="m"))
    m.branch(root.id)
    clock.set_now_ms(clock.now_ms() - 3000)
    early = await m.append_message(assistant("early", ts=2, model="m"))
    await m.append_label(root.id, "R")
    (node,) = m.tree()
    assert node.entry.id == root.id
    assert node.label == "R"
    assert [c.entry.id for c in node.children] == [early.id, late.id]


async def test_torn_tail_is_backed_up_and_cut_before_append_b01(tmp_path: Path) -> None:
    path = tmp_path / "s-b01.jsonl"
    header = {
        "type": "session",
        "version": 3,
        "id": "s-b01",
        "timestamp": "2026-01-05T10:00:00.000Z",
        "cwd": "/p",
    }
    e1 = {
        "type": "message",
        "id": "e1",
        "parentId": None,
        "timestamp": "2026-01-05T10:00:01.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": "List the files."}], "timestamp": 1},
    }
    e2 = {**e1, "id": "e2", "parentId": "e1"}
    good = b"".join(json.dumps(o, separators=(",", ":")).encode() + b"\n" for o in (header, e1, e2))
    torn = (
        b'{"type":"message","id":"e3","parentId":"e2","timestamp":"2026-01-05T10:00:09.000Z","message":{"ro'
    )
    path.write_bytes(good + torn)
    m = await TranscriptManager.open(path)
    assert m.leaf_id == "e2"
    assert m.diagnostics.torn_tail is not None
    assert path.read_bytes() == good + torn  # loading never writes
    entry = await m.append_message(user("Please try again.", blocks=True))
    assert entry.parent_id == "e2"
    data = path.read_bytes()
    assert data.startswith(good)
    assert torn not in data
    assert len(_lines(path)) == 4
    assert m.last_repair is not None
    assert m.last_repair.kind == "torn"
    backup = m.last_backup
    assert backup is not None
    assert backup.read_bytes() == torn  # what the repair removed, not the whole file (issue 15)
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert backup.name.startswith(f"s-b01.jsonl.torn-{len(good)}.bak.")


async def test_valid_last_line_without_newline_gets_one(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    m = await TranscriptManager.create(path, cwd="/", durability="none")
    await m.append_message(user("a", blocks=True))
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    m2 = await TranscriptManager.open(path)
    await m2.append_message(user("b", blocks=True))
    assert len(_lines(path)) == 3
    assert m2.last_repair is not None
    assert m2.last_repair.kind == "newline"
    assert _glob(tmp_path, "*.bak.*") == []  # nothing removed, no backup needed


async def test_tail_torn_by_another_writer_after_open_is_repaired(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    m = await TranscriptManager.create(path, cwd="/", durability="none")
    await m.append_message(user("a", blocks=True))
    with path.open("ab") as fh:
        fh.write(b'{"type":"mess')
    await m.append_message(user("b", blocks=True))
    assert [line["type"] for line in _lines(path)] == ["session", "message", "message"]


async def test_legacy_file_is_migrated_on_first_write_after_backup(tmp_path: Path, pi_samples: Path) -> None:
    path = tmp_path / "legacy.jsonl"
    original = (pi_samples / "v1-legacy.jsonl").read_bytes()
    path.write_bytes(original)
    m = await TranscriptManager.open(path)
    assert path.read_bytes() == original
    before = m.build_session_context()
    await m.append_message(user("after migration", blocks=True))
    assert m.last_backup is not None
    assert m.last_backup.read_bytes() == original
    lines = _lines(path)
    assert lines[0]["version"] == 3
    assert all("id" in line for line in lines[1:])
    reopened = await TranscriptManager.open(path)
    assert not reopened.diagnostics.legacy_version
    assert reopened.entries()[:-1] == m.entries()[:-1]
    after = reopened.build_session_context()
    assert after.messages[:-1] == before.messages
    await reopened.append_message(user("again", blocks=True))
    assert len(_glob(tmp_path, "legacy.jsonl.bak.*")) == 1  # rewritten only once


async def test_lone_surrogate_in_append_is_written_as_replacement_b02(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    m = await TranscriptManager.create(path, cwd="/", durability="none")
    result = ToolResultMessage(
        tool_call_id="call_1", tool_name="read", content=[TextContent(text="done \ud83d")], timestamp=1
    )
    entry = await m.append_message(result)
    pair = await m.append_message(user("\ud83d\ude00 ok", blocks=True))
    raw = path.read_bytes()
    raw.decode("utf-8")  # valid UTF-8
    assert b"\\ud83d" not in raw
    assert _lines(path)[1]["message"]["content"][0]["text"] == "done \ufffd"
    assert _lines(path)[2]["message"]["content"][0]["text"] == "\U0001f600 ok"
    assert isinstance(entry, MessageEntry)
    assert entry.message.content[0].text == "done \ufffd"  # type: ignore[union-attr]
    assert pair.id in {e.id for e in (await TranscriptManager.open(path)).entries()}


async def test_open_rejects_non_transcript_without_touching_it(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_bytes(b'{"hello":"world"}\n')
    with pytest.raises(TranscriptFormatError):
        await TranscriptManager.open(path)
    assert path.read_bytes() == b'{"hello":"world"}\n'


async def test_clone_and_create_branched_session_spec_11(tmp_path: Path) -> None:
    clock = FakeClock()
    src = tmp_path / "src.jsonl"
    m = await TranscriptManager.create(src, cwd="/w", clock=clock)
    u = await m.append_message(user("q", blocks=True))
    clock.advance(1)
    lab = await m.append_label(u.id, "first")
    a = await m.append_message(assistant("a", ts=2, model="m"))
    m.branch(u.id)
    other = await m.append_message(assistant("other branch", ts=2, model="m"))
    await m.append_label(other.id, "off-path")
    clock.advance(10)
    dest = tmp_path / "clone.jsonl"
    clone = await m.clone(a.id, path=dest)
    lines = _lines(dest)
    assert lines[0]["parentSession"] == str(src)
    assert lines[0]["cwd"] == "/w"
    assert lines[0]["id"] != m.session_id
    assert [line["id"] for line in lines[1:3]] == [u.id, a.id]  # path without the label entry
    assert lines[1] == _lines(src)[1]  # copied verbatim
    assert lines[3]["type"] == "label"
    assert lines[3]["targetId"] == u.id
    assert lines[3]["parentId"] == a.id
    assert lines[3]["timestamp"] == lab.timestamp  # original label timestamp kept (0.73.1)
    assert len(lines) == 4  # the off-path label is not copied
    assert clone.labels == {u.id: "first"}
    assert clone.path == dest
    assert stat.S_IMODE(dest.stat().st_mode) == 0o600
    with pytest.raises(EntryNotFoundError):
        await m.create_branched_session("nope", path=tmp_path / "x.jsonl")


async def test_fork_before_user_message(tmp_path: Path) -> None:
    m = await TranscriptManager.create(tmp_path / "src.jsonl", cwd="/", durability="none")
    u1 = await m.append_message(user("one", blocks=True))
    a1 = await m.append_message(assistant("r1", ts=2, model="m"))
    u2 = await m.append_message(user("two", blocks=True))
    forked = await m.fork(u2.id, path=tmp_path / "f.jsonl")
    assert [e.id for e in forked.entries()] == [u1.id, a1.id]
    empty = await m.fork(u1.id, path=tmp_path / "e.jsonl")
    assert _lines(tmp_path / "e.jsonl")[0]["parentSession"] == str(tmp_path / "src.jsonl")
    assert empty.entries() == []
    with pytest.raises(ValueError, match="not a user message"):
        await m.fork(a1.id, path=tmp_path / "g.jsonl")


async def test_in_memory_has_the_same_semantics() -> None:
    m = TranscriptManager.in_memory(cwd="/x", session_id="mem")
    assert m.path is None
    u = await m.append_message(
        UserMessage(
            content=[TextContent(text="a"), ImageContent(data="AA==", mime_type="image/png")], timestamp=1
        )
    )
    await m.append_custom_message("e", content=[TextContent(text="c")])
    assert isinstance(m.entries()[1], CustomMessageEntry)
    assert m.get_entry(u.id) == u
    copy = await m.clone(u.id, path=None)
    assert copy.path is None
    assert copy.header.parent_session is None or copy.header.parent_session.__class__.__name__ == "UnsetType"


async def test_session_name_empty_clears() -> None:
    m = TranscriptManager.in_memory()
    await m.append_session_info("Name")
    assert m.session_name == "Name"
    await m.append_session_info("   ")
    assert m.session_name is None


async def test_reopened_file_loads_in_index(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    m = await TranscriptManager.create(path, cwd="/", durability="none")
    for i in range(5):
        await m.append_message(user(f"m{i}", blocks=True))
    assert load_transcript(path).diagnostics.clean


async def test_strict_checkpoint_compaction_keeps_nothing_before_it(tmp_path: Path) -> None:
    manager = await TranscriptManager.create(tmp_path / "s.jsonl", cwd="/w", clock=FakeClock())
    await manager.append_message(user("old question", blocks=True))
    await manager.append_message(assistant("old answer", ts=2, model="m"))
    entry = await manager.append_compaction(summary="S", first_kept_entry_id=None, tokens_before=10)
    assert entry.first_kept_entry_id == entry.id
    await manager.append_message(user("new question", blocks=True))
    context = manager.build_session_context()
    assert isinstance(context.messages[0], CompactionSummaryMessage)
    assert _texts(context) == ["S", "new question"]
    reopened = await TranscriptManager.open(tmp_path / "s.jsonl")
    assert _texts(reopened.build_session_context()) == ["S", "new question"]
