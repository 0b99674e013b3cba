"""Context rebuild (pi-format spec §9) and conversion for the LLM (§10): one test per rule."""

from __future__ import annotations

from typing import Any

from sessionkeeper.transcript import (
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ModelRef,
    SessionContext,
    TextContent,
    UnknownEntry,
    UserMessage,
    build_session_context,
    convert_to_llm,
    entry_from_json,
    message_to_builtins,
)


T = "2026-01-05T10:00:0{}.000Z"
T0_MS = 1767607200000


def _e(kind: str, eid: str, parent: str | None, second: int = 0, **fields: Any):
    raw = {"type": kind, "id": eid, "parentId": parent, "timestamp": T.format(second), **fields}
    return entry_from_json(raw)


def _user(eid, parent, text, second=0):
    return _e("message", eid, parent, second, message={"role": "user", "content": text, "timestamp": second})


def _assistant(eid, parent, text, *, provider="anthropic", model="m1", second=0):
    msg = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": "anthropic-messages",
        "provider": provider,
        "model": model,
        "usage": {
            "input": 1,
            "output": 1,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 2,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        },
        "stopReason": "stop",
        "timestamp": second,
    }
    return _e("message", eid, parent, second, message=msg)


def _texts(ctx: SessionContext) -> list[Any]:
    out = []
    for m in ctx.messages:
        raw = message_to_builtins(m)
        out.append(raw.get("content") if raw["role"] in ("user", "assistant") else raw["role"])
    return out


def test_leaf_none_gives_empty_context():
    entries = [_user("a", None, "hi")]
    ctx = build_session_context(entries, leaf_id=None)
    assert ctx == SessionContext(messages=(), thinking_level="off", model=None)
    assert ctx.to_json() == {"messages": [], "thinkingLevel": "off", "model": None}


def test_no_entries_gives_empty_context():
    assert build_session_context([]).to_json() == {"messages": [], "thinkingLevel": "off", "model": None}


def test_unset_or_unknown_leaf_uses_last_entry_in_file_order():
    entries = [_user("a", None, "one"), _user("b", None, "two")]
    assert _texts(build_session_context(entries)) == ["two"]
    assert _texts(build_session_context(entries, leaf_id="zzz")) == ["two"]
    assert _texts(build_session_context(entries, leaf_id="")) == ["two"]
    assert _texts(build_session_context(entries, leaf_id="a")) == ["one"]


def test_path_follows_parents_only():
    entries = [_user("a", None, "q"), _assistant("b", "a", "r1"), _assistant("c", "a", "r2")]
    assert _texts(build_session_context(entries, leaf_id="c"))[0] == "q"
    assert len(build_session_context(entries, leaf_id="c").messages) == 2


def test_thinking_level_and_model_scan_whole_path_last_wins():
    entries = [
        _e("thinking_level_change", "t1", None, thinkingLevel="high"),
        _e("model_change", "m1", "t1", provider="openai", modelId="gpt"),
        _assistant("a1", "m1", "x", provider="anthropic", model="claude"),
        _e("thinking_level_change", "t2", "a1", thinkingLevel="low"),
    ]
    ctx = build_session_context(entries)
    assert ctx.thinking_level == "low"
    assert ctx.model == ModelRef(provider="anthropic", model_id="claude")
    ctx2 = build_session_context(entries, leaf_id="m1")
    assert ctx2.model == ModelRef(provider="openai", model_id="gpt")
    assert ctx2.to_json()["model"] == {"provider": "openai", "modelId": "gpt"}


def test_custom_message_becomes_custom_role_with_parsed_timestamp():
    entries = [
        _e("custom_message", "c1", None, customType="ext", content="note", display=False, details={"k": 1})
    ]
    (msg,) = build_session_context(entries).messages
    assert msg == CustomMessage(
        custom_type="ext", content="note", display=False, details={"k": 1}, timestamp=T0_MS
    )


def test_branch_summary_only_when_non_empty():
    entries = [
        _e("branch_summary", "b1", None, fromId="root", summary=""),
        _e("branch_summary", "b2", "b1", 1, fromId="b1", summary="went elsewhere"),
    ]
    msgs = build_session_context(entries).messages
    assert msgs == (BranchSummaryMessage(summary="went elsewhere", from_id="b1", timestamp=T0_MS + 1000),)


def test_settings_labels_custom_session_info_add_no_message():
    entries = [
        _user("u", None, "hi"),
        _e("label", "l", "u", targetId="u", label="x"),
        _e("custom", "c", "l", customType="ext", data={}),
        _e("session_info", "s", "c", name="n"),
        _e("mystery", "z", "s", foo=1),
    ]
    assert isinstance(entries[-1], UnknownEntry)
    assert _texts(build_session_context(entries)) == ["hi"]


def test_compaction_summary_first_then_kept_then_after():
    entries = [
        _user("u1", None, "old"),
        _assistant("a1", "u1", "old reply"),
        _user("u2", "a1", "kept"),
        _assistant("a2", "u2", "kept reply"),
        _e("compaction", "c1", "a2", 5, summary="S", firstKeptEntryId="u2", tokensBefore=123),
        _user("u3", "c1", "after"),
    ]
    ctx = build_session_context(entries)
    first = ctx.messages[0]
    assert first == CompactionSummaryMessage(summary="S", tokens_before=123, timestamp=T0_MS + 5000)
    assert _texts(ctx)[1:] == ["kept", [{"type": "text", "text": "kept reply"}], "after"]


def test_last_compaction_on_path_wins_and_older_summaries_dropped():
    entries = [
        _user("u1", None, "one"),
        _e("compaction", "c1", "u1", summary="S1", firstKeptEntryId="u1", tokensBefore=1),
        _user("u2", "c1", "two"),
        _e("compaction", "c2", "u2", summary="S2", firstKeptEntryId="u1", tokensBefore=2),
    ]
    msgs = build_session_context(entries).messages
    assert [m.summary for m in msgs if isinstance(m, CompactionSummaryMessage)] == ["S2"]
    assert _texts(build_session_context(entries))[1:] == ["one", "two"]


def test_first_kept_not_on_path_keeps_nothing_before_compaction():
    entries = [
        _user("u1", None, "one"),
        _e("compaction", "c1", "u1", summary="S", firstKeptEntryId="nope", tokensBefore=1),
        _user("u2", "c1", "two"),
    ]
    assert _texts(build_session_context(entries)) == ["compactionSummary", "two"]


def test_missing_parent_makes_a_root_and_cycle_does_not_hang():
    entries = [_user("a", "ghost", "orphan"), _user("b", "a", "child")]
    assert _texts(build_session_context(entries)) == ["orphan", "child"]
    cyc = [_user("x", "y", "x"), _user("y", "x", "y")]
    assert _texts(build_session_context(cyc)) == ["x", "y"]
    self_loop = [_user("s", "s", "self")]
    assert _texts(build_session_context(self_loop)) == ["self"]


def test_duplicate_ids_later_wins_in_index():
    entries = [_user("a", None, "first"), _user("a", None, "second"), _user("b", "a", "child")]
    assert _texts(build_session_context(entries)) == ["second", "child"]


def test_invalid_entry_timestamp_gives_null_timestamp():
    entries = [_e("branch_summary", "b", None, fromId="root", summary="s")]
    entries = [entry_from_json({**message_to_builtins(entries[0]), "timestamp": "garbage"})]
    (msg,) = build_session_context(entries).to_json()["messages"]
    assert msg["timestamp"] != msg["timestamp"] or msg["timestamp"] is None


def test_convert_to_llm_texts_exact():
    msgs = [
        {
            "role": "bashExecution",
            "command": "ls",
            "output": "a",
            "exitCode": 2,
            "cancelled": False,
            "truncated": True,
            "fullOutputPath": "/tmp/o",
            "timestamp": 5,
        },
        {
            "role": "bashExecution",
            "command": "x",
            "output": "",
            "exitCode": 0,
            "cancelled": True,
            "truncated": False,
            "timestamp": 6,
        },
        {
            "role": "bashExecution",
            "command": "h",
            "output": "o",
            "cancelled": False,
            "truncated": False,
            "excludeFromContext": True,
            "timestamp": 7,
        },
        {"role": "custom", "customType": "e", "content": "hidden", "display": False, "timestamp": 8},
        {"role": "branchSummary", "summary": "B", "fromId": "root", "timestamp": 9},
        {"role": "compactionSummary", "summary": "C", "tokensBefore": 1, "timestamp": 10},
        {"role": "mystery", "timestamp": 11},
        {"role": "user", "content": "plain", "timestamp": 12},
    ]
    from sessionkeeper.transcript import message_from_json

    out = [message_to_builtins(m) for m in convert_to_llm([message_from_json(m) for m in msgs])]
    texts = [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"] for m in out]
    assert texts == [
        "Ran `ls`\n```\na\n```\n\nCommand exited with code 2\n\n[Output truncated. Full output: /tmp/o]",
        "Ran `x`\n(no output)\n\n(command cancelled)",
        "hidden",
        "The following is a summary of a branch that this conversation came back from:\n\n"
        "<summary>\nB</summary>",
        "The conversation history before this point was compacted into the following summary:\n\n"
        "<summary>\nC\n</summary>",
        "plain",
    ]
    assert [m["role"] for m in out] == ["user"] * 6
    assert [m["timestamp"] for m in out] == [5, 6, 8, 9, 10, 12]


def test_convert_keeps_user_message_object():
    msg = UserMessage(content=[TextContent(text="a")], timestamp=1)
    assert convert_to_llm([msg])[0] is msg


def test_unknown_compaction_without_id_or_first_kept() -> None:
    entries = [
        _user("u1", None, "one"),
        entry_from_json({"type": "compaction", "parentId": "u1", "timestamp": T.format(1), "summary": "S"}),
    ]
    assert isinstance(entries[1], UnknownEntry)
    ctx = build_session_context(entries).to_json()
    assert ctx["messages"] == [{"role": "compactionSummary", "summary": "S", "timestamp": T0_MS + 1000}]
