"""Transcript hygiene (OpenClaw spec §9): replay policies, each pipeline step, B06b, doctor findings."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.pruning._builders import assistant, call, result, thinking, user

from sessionkeeper.pruning import (
    SYNTHETIC_MISSING_TOOL_RESULT_TEXT,
    ReplayPolicy,
    check_tool_pairing,
    normalize_replay_content,
    repair_tool_call_inputs,
    repair_tool_use_result_pairing,
    resolve_replay_policy,
    sanitize_google_turn_ordering,
    sanitize_replay_history,
    sanitize_tool_call_id,
    sanitize_tool_call_ids,
    strip_invalid_thinking_signatures,
    strip_stale_thinking_signatures,
    validate_anthropic_turns,
    validate_gemini_turns,
)
from sessionkeeper.pruning._tool_repair import is_allowed_tool_call_name, is_synthetic_missing_tool_result
from sessionkeeper.records._messages import (
    AssistantMessage,
    CompactionSummaryMessage,
    TextContent,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from sessionkeeper.transcript import message_from_json


NOW = 1_800_000_000_000
PI = Path(__file__).resolve().parents[1] / "data" / "pi"


# --- replay policies ----------------------------------------------------------------------------


def test_default_policy_is_openclaws() -> None:
    p = resolve_replay_policy(api="some-custom-api")
    assert p == ReplayPolicy()
    assert p.sanitize_mode == "images-only" and p.repair_tool_use_result_pairing
    assert not (p.sanitize_tool_call_ids or p.drop_thinking_blocks or p.validate_anthropic_turns)


def test_google_policy() -> None:
    p = resolve_replay_policy(api="google-generative-ai", model_id="gemini-2.5-pro")
    assert (p.sanitize_mode, p.tool_call_id_mode) == ("full", "strict")
    assert p.apply_google_turn_ordering and p.validate_gemini_turns and p.allow_synthetic_tool_results
    assert not p.validate_anthropic_turns and not p.preserve_signatures


@pytest.mark.parametrize(
    ("model", "drops"),
    [
        ("claude-sonnet-4-5", False),
        ("claude-opus-4-1", False),
        ("claude-3-7-sonnet-20250219", True),
        ("claude-3-5-haiku", True),
        ("claude-5", False),
        ("MiniMax-M2", False),
    ],
)
def test_anthropic_policy_drops_thinking_for_old_claude(model: str, drops: bool) -> None:
    p = resolve_replay_policy(api="anthropic-messages", model_id=model)
    assert p.drop_thinking_blocks is drops
    assert p.preserve_signatures and p.validate_anthropic_turns and p.sanitize_mode == "full"
    assert resolve_replay_policy(
        api="bedrock-converse-stream", model_id=model, supports_reasoning_effort=False
    ).drop_thinking_blocks


def test_openai_completions_policy() -> None:
    p = resolve_replay_policy(api="openai-completions", model_id="gpt-4o")
    assert p.drop_reasoning_from_history and p.apply_google_turn_ordering
    assert p.validate_gemini_turns and p.validate_anthropic_turns and not p.allow_synthetic_tool_results
    assert not resolve_replay_policy(
        api="openai-completions", model_id="moonshot/kimi-k2.5"
    ).drop_reasoning_from_history
    assert not resolve_replay_policy(
        api="openai-completions", model_reasoning=True
    ).drop_reasoning_from_history


def test_openai_responses_policy() -> None:
    p = resolve_replay_policy(api="openai-responses", model_id="gpt-5")
    assert (
        p.tool_call_id_mode == "strict" and p.allow_synthetic_tool_results and not p.validate_anthropic_turns
    )
    assert resolve_replay_policy(
        api="azure-openai-responses", model_id="anthropic/claude-x"
    ).validate_anthropic_turns
    assert resolve_replay_policy(api="x", tool_call_id_mode="strict9").tool_call_id_mode == "strict9"


# --- tool call inputs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("read", True),
        (" read ", True),
        ("mcp:server.tool-1", True),
        ("a" * 64, True),
        ("a" * 65, False),
        ("bad name", False),
        ("", False),
        ("weird/name", False),
        ("émoji", False),
    ],
)
def test_tool_name_rule(name: str, ok: bool) -> None:
    assert is_allowed_tool_call_name(name) is ok


def test_repair_tool_call_inputs_drops_trims_and_removes_empty_turns() -> None:
    messages = [
        user(),
        assistant("keep", call("", "read"), call("a", " read "), call("b", "bad name"), stop="toolUse"),
        assistant(call("c", "nope"), stop="toolUse"),
        assistant(call("d", "Read"), stop="toolUse"),
    ]
    out = repair_tool_call_inputs(messages, allowed_tool_names=["READ", " "])
    assert len(out) == 3
    assert [b.name if hasattr(b, "name") else b.text for b in out[1].content] == ["keep", "read"]
    assert out[2] is messages[3]
    assert repair_tool_call_inputs(messages[:1]) == messages[:1]


# --- pairing ------------------------------------------------------------------------------------


def test_b06b_dangling_call_gets_a_marked_synthetic_result_after_it() -> None:
    """Field report B06b: crash after a tool call, then the user speaks again."""
    messages = [
        user("x" * 60000),
        user("Archive the old reports."),
        assistant(call("call_z", "archive", dir="reports/2025"), stop="toolUse"),
        user("Are you done?"),
    ]
    r = repair_tool_use_result_pairing(messages, timestamp_ms=NOW)
    assert r.added == ("call_z",)
    synthetic = r.messages[3]
    assert isinstance(synthetic, ToolResultMessage)
    assert (synthetic.tool_call_id, synthetic.tool_name, synthetic.is_error) == ("call_z", "archive", True)
    assert synthetic.content == [TextContent(text=SYNTHETIC_MISSING_TOOL_RESULT_TEXT)]
    assert "missing tool result" in SYNTHETIC_MISSING_TOOL_RESULT_TEXT and is_synthetic_missing_tool_result(
        synthetic
    )
    assert r.messages[4] is messages[3]
    assert check_tool_pairing(r.messages) == ()
    assert [f.kind for f in check_tool_pairing(messages)] == ["missing-tool-result"]


def test_results_move_after_their_call_in_call_order() -> None:
    messages = [
        user(),
        assistant(call("a"), call("b"), stop="toolUse"),
        user("interjection"),
        result("b", "B"),
        result("a", "A"),
    ]
    r = repair_tool_use_result_pairing(messages, timestamp_ms=NOW)
    assert [getattr(m, "tool_call_id", getattr(m, "content", None)) for m in r.messages[2:]] == [
        "a",
        "b",
        "interjection",
    ]
    assert r.moved and check_tool_pairing(r.messages) == ()
    assert [f.kind for f in check_tool_pairing(messages)] == [
        "displaced-tool-result",
        "displaced-tool-result",
    ]


def test_duplicates_dropped_real_result_replaces_synthetic() -> None:
    synthetic = repair_tool_use_result_pairing(
        [user(), assistant(call("a"), stop="toolUse")], timestamp_ms=NOW
    )
    messages = [*synthetic.messages, result("a", "real"), result("a", "again")]
    r = repair_tool_use_result_pairing(messages, timestamp_ms=NOW)
    assert r.messages[2].content == [TextContent(text="real")]
    assert r.dropped_duplicates == 2 and len(r.messages) == 3


def test_later_results_are_pulled_forward_and_orphans_dropped() -> None:
    messages = [
        result("zz", "orphan at start"),
        user(),
        assistant(call("a"), stop="toolUse"),
        assistant(call("b"), stop="toolUse"),
        result("b", "B"),
        result("a", "A late"),
        result("nobody", "orphan"),
    ]
    r = repair_tool_use_result_pairing(messages, timestamp_ms=NOW)
    ids = [m.tool_call_id for m in r.messages if isinstance(m, ToolResultMessage)]
    assert ids == ["a", "b"]
    assert r.messages[1].content[0] == call("a") and r.messages[2].tool_call_id == "a"
    assert r.dropped_orphans == 2 and r.added == ()
    assert {f.kind for f in check_tool_pairing(messages)} == {"orphan-tool-result", "missing-tool-result"}


def test_legacy_result_without_id_matches_a_lone_call_of_the_same_name() -> None:
    messages = [user(), assistant(call("a", "grep"), stop="toolUse"), result("", "found", name="grep")]
    r = repair_tool_use_result_pairing(messages, timestamp_ms=NOW)
    assert r.messages[2].tool_call_id == "a" and r.messages[2].is_error


def test_errored_assistant_gets_no_synthetic_results_and_drop_policy_removes_it() -> None:
    messages = [user(), assistant(call("a"), call("b"), stop="error"), result("a", "A"), user("next")]
    kept = repair_tool_use_result_pairing(messages, timestamp_ms=NOW)
    assert kept.added == () and [type(m).__name__ for m in kept.messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "UserMessage",
    ]
    dropped = repair_tool_use_result_pairing(messages, timestamp_ms=NOW, errored_assistant_policy="drop")
    assert [type(m).__name__ for m in dropped.messages] == ["UserMessage", "UserMessage"]


def test_well_paired_context_is_returned_as_is() -> None:
    messages = [user(), assistant(call("a"), stop="toolUse"), result("a", "A"), assistant("done")]
    r = repair_tool_use_result_pairing(messages, timestamp_ms=NOW)
    assert not r.moved and r.messages == tuple(messages)


# --- tool call ids ------------------------------------------------------------------------------


def test_strict_and_strict9_ids() -> None:
    assert sanitize_tool_call_id("call_abc-123|fc_9") == "callabc123fc9"
    assert sanitize_tool_call_id("___") == "sanitizedtoolid"
    assert sanitize_tool_call_id("") == "defaulttoolid"
    assert sanitize_tool_call_id("functions.read:0") == "functions.read:0"  # Kimi ids are kept
    assert sanitize_tool_call_id("toolu_0123456789", "strict9") == "toolu0123"
    assert len(sanitize_tool_call_id("ab", "strict9")) == 9
    assert sanitize_tool_call_id("", "strict9") == "defaultid"


def test_id_sanitisation_keeps_calls_and_results_paired_and_unique() -> None:
    messages = [
        user(),
        assistant(call("a-1"), call("a_1"), stop="toolUse"),
        result("a_1", "second"),
        result("a-1", "first"),
        assistant(call("a-1"), stop="toolUse"),  # the same raw id again: a new id
        result("a-1", "third"),
        result("ghost", "orphan"),
    ]
    out = sanitize_tool_call_ids(messages, mode="strict")
    first, second = out[1].content[0].id, out[1].content[1].id
    assert first == "a1" and second != first and second.isalnum()
    assert out[2].tool_call_id == second and out[3].tool_call_id == first
    third = out[4].content[0].id
    assert third not in (first, second) and out[5].tool_call_id == third
    assert out[6].tool_call_id not in (first, second, third)
    assert check_tool_pairing(out[:6]) == ()
    nine = sanitize_tool_call_ids(messages, mode="strict9")
    ids = [b.id for m in nine if isinstance(m, AssistantMessage) for b in m.content]
    assert all(len(i) == 9 and i.isalnum() for i in ids) and len(set(ids)) == 3


# --- turns --------------------------------------------------------------------------------------


def test_normalize_replay_content_rules() -> None:
    mirror = AssistantMessage(
        content=[TextContent(text="hi")], api="x", provider="openclaw", model="delivery-mirror"
    )
    empty_error = assistant(stop="error")
    zero_stop = AssistantMessage(
        content=[], api="x", provider="p", model="m", usage=Usage(total_tokens=0), stop_reason="stop"
    )
    messages = [
        user("   "),
        user([TextContent(text=" "), TextContent(text="real")]),
        mirror,
        assistant("NO_REPLY"),
        assistant("visible", "NO_REPLY"),
        assistant(thinking("hmm"), " ", stop="length"),
        assistant("NO_REPLY lookalike: not silent"),
        empty_error,
        user("more"),
        zero_stop,
        assistant(stop="error"),
    ]
    out = normalize_replay_content(messages)
    assert out[0] == user([TextContent(text="real")])
    assert out[1].content == [TextContent(text="visible")]
    assert out[2] is messages[6]
    assert out[3].content == [TextContent(text="[assistant turn failed before producing content]")]
    assert out[4] is messages[8]
    assert len(out) == 5  # the trailing failed/empty turns are popped
    clean = [user("a"), assistant("b")]
    assert normalize_replay_content(clean) is clean


def test_thinking_signatures() -> None:
    summary = CompactionSummaryMessage(summary="s", tokens_before=1, timestamp=100)
    old = assistant(thinking("old", "sig"), "a", ts=50)
    new = assistant(thinking("new", "sig2"), "b", ts=150)
    stale = strip_stale_thinking_signatures([old, summary, new])
    assert stale[0].content[0] == thinking("old") and stale[2] is new
    unsigned = [assistant(thinking("x")), assistant(thinking("y", " ")), assistant(thinking("z"))]
    out = strip_invalid_thinking_signatures(unsigned)
    assert out[0].content == [TextContent(text="[assistant reasoning omitted]")]
    assert out[1].content == [TextContent(text="[assistant reasoning omitted]")]
    assert out[2] is unsigned[2]  # the latest assistant keeps its own
    assert strip_invalid_thinking_signatures(unsigned, preserve_latest_assistant=False)[2] is not unsigned[2]


def test_google_first_turn_fix() -> None:
    messages = [assistant("hello"), user("hi")]
    out = sanitize_google_turn_ordering(messages, timestamp_ms=NOW)
    assert out[0] == UserMessage(content="(session bootstrap)", timestamp=NOW) and out[1] is messages[0]
    starts_with_user = [user("hi"), assistant("hello")]
    assert sanitize_google_turn_ordering(starts_with_user, timestamp_ms=NOW) is starts_with_user


def test_gemini_merges_consecutive_assistants_later_fields_win() -> None:
    first = assistant("a", stop="toolUse", ts=1)
    second = msgspec.structs.replace(assistant("b", stop="stop", ts=2), usage=Usage(input=5))
    out = validate_gemini_turns([user(), first, second])
    assert len(out) == 2 and out[1].content == [TextContent(text="a"), TextContent(text="b")]
    assert out[1].stop_reason == "stop" and out[1].usage.input == 5 and out[1].timestamp == 1


def test_anthropic_validation_strips_dangling_calls_and_merges_users() -> None:
    messages = [
        user("one", ts=1),
        user([TextContent(text="two")], ts=2),
        assistant("text", call("a"), call("b"), stop="toolUse"),
        result("a", "A"),
        assistant(thinking("t", "s"), call("c"), stop="toolUse"),
        user("x"),
        assistant(call("d"), stop="aborted"),
        user("y"),
    ]
    out = validate_anthropic_turns(messages)
    assert out[0] == UserMessage(content=[TextContent(text="one"), TextContent(text="two")], timestamp=2)
    assert [getattr(b, "id", None) for b in out[1].content] == [None, "a"]
    assert out[3].content == [TextContent(text="[tool calls omitted]")]
    assert out[5].content == []


# --- the pipeline -------------------------------------------------------------------------------


def test_pipeline_b06b_replay_view_on_anthropic() -> None:
    messages = [
        user("Archive the old reports."),
        assistant(call("call_z", "archive", dir="reports/2025"), stop="toolUse"),
        user("Are you done?"),
    ]
    policy = resolve_replay_policy(api="anthropic-messages", model_id="claude-sonnet-4-5")
    r = sanitize_replay_history(
        messages, policy=policy, timestamp_ms=NOW, api="anthropic-messages", provider="anthropic"
    )
    assert r.synthetic_results == ("callz",) and r.changed  # ids are made strict first
    assert (
        isinstance(r.messages[2], ToolResultMessage) and r.messages[2].tool_call_id == "callz"
    )  # strict ids
    assert r.messages[2].is_error and "missing tool result" in r.messages[2].content[0].text
    assert r.messages[1].content[0].id == "callz"
    assert [f.kind for f in r.findings] == ["missing-tool-result"]
    assert check_tool_pairing(r.messages) == ()
    assert messages[1].content[0].id == "call_z"  # the input is untouched


def test_pipeline_openai_responses_uses_aborted_text() -> None:
    messages = [user("go"), assistant(call("call_1|fc_1", "read"), stop="toolUse"), user("?")]
    policy = resolve_replay_policy(api="openai-responses", model_id="gpt-5")
    r = sanitize_replay_history(
        messages, policy=policy, timestamp_ms=NOW, api="openai-responses", provider="openai"
    )
    assert r.messages[2].content == [TextContent(text="aborted")]
    assert r.messages[2].details is msgspec.UNSET  # details are stripped for replay


def test_pipeline_google_and_completions_paths() -> None:
    messages = [
        assistant(thinking("t"), "hello"),
        assistant("again"),
        user("hi"),
        assistant(thinking("r"), "x"),
    ]
    google = resolve_replay_policy(api="google-generative-ai", model_id="gemini-2.5-pro")
    out = sanitize_replay_history(
        messages, policy=google, timestamp_ms=NOW, api="google-generative-ai"
    ).messages
    assert out[0].content == "(session bootstrap)" and len(out[1].content) == 3  # merged assistants
    completions = resolve_replay_policy(api="openai-completions", model_id="gpt-4o")
    out = sanitize_replay_history(
        messages, policy=completions, timestamp_ms=NOW, api="openai-completions"
    ).messages
    assert all(
        not any(type(b).__name__ == "ThinkingContent" for b in m.content)
        for m in out
        if isinstance(m, AssistantMessage)
    )


@pytest.mark.parametrize("name", ["basic", "full", "branchy", "large-2000", "v1-legacy"])
@pytest.mark.parametrize(
    "api", ["anthropic-messages", "openai-responses", "google-generative-ai", "openai-completions"]
)
def test_samples_keep_the_pairing_invariant(name: str, api: str) -> None:
    raw = json.loads((PI / f"{name}.context.json").read_text(encoding="utf-8"))["messages"]
    messages = [message_from_json(m) for m in raw]
    policy = resolve_replay_policy(api=api, model_id="claude-sonnet-4-5" if "anthropic" in api else "m")
    r = sanitize_replay_history(messages, policy=policy, timestamp_ms=NOW, api=api, provider="p")
    assert check_tool_pairing(r.messages) == ()
    if api != "openai-responses":
        # Idempotent on its own output, except on Responses with strict ids: OpenClaw normalises the
        # ids to call_* first and then strips them to [A-Za-z0-9], so a second pass renames again.
        again = sanitize_replay_history(r.messages, policy=policy, timestamp_ms=NOW, api=api, provider="p")
        assert again.messages == r.messages


# --- property: the pairing invariant ------------------------------------------------------------

IDS = st.sampled_from(["a", "b", "c", "d"])


@st.composite
def tool_contexts(draw: st.DrawFn) -> list:
    out: list = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["user", "text", "calls", "result", "error"]))
        if kind == "user":
            out.append(user(draw(st.sampled_from(["hi", " ", "NO_REPLY"]))))
        elif kind == "text":
            out.append(assistant(draw(st.sampled_from(["ok", "NO_REPLY"]))))
        elif kind in ("calls", "error"):
            ids = draw(st.lists(IDS, min_size=1, max_size=3, unique=True))
            stop = "error" if kind == "error" else "toolUse"
            out.append(
                assistant(*[call(i, draw(st.sampled_from(["read", "bad name"]))) for i in ids], stop=stop)
            )
        else:
            out.append(result(draw(IDS), "r"))
    return out


@given(
    tool_contexts(), st.sampled_from(["anthropic-messages", "openai-responses", "google-generative-ai", "x"])
)
def test_hygiene_output_satisfies_the_pairing_invariant(messages: list, api: str) -> None:
    policy = resolve_replay_policy(api=api, model_id="claude-sonnet-4-5")
    r = sanitize_replay_history(messages, policy=policy, timestamp_ms=NOW, api=api)
    assert check_tool_pairing(r.messages) == ()
    unique = sanitize_tool_call_ids(messages, mode="dedupe")
    repaired = repair_tool_use_result_pairing(unique, timestamp_ms=NOW, errored_assistant_policy="drop")
    assert [f for f in check_tool_pairing(repaired.messages) if f.kind != "invalid-tool-call"] == []


def test_deviation_h1_repeated_ids_are_made_unique_without_id_sanitisation() -> None:
    messages = [
        user(),
        assistant(call("a"), stop="toolUse"),
        result("a", "1"),
        assistant(call("a"), stop="toolUse"),
    ]
    out = sanitize_replay_history(messages, policy=ReplayPolicy(), timestamp_ms=NOW).messages
    assert [m.tool_call_id for m in out if isinstance(m, ToolResultMessage)] == ["a", "a_2"]
    assert out[3].content[0].id == "a_2" and check_tool_pairing(out) == ()
    plain = [user(), assistant(call("a"), stop="toolUse"), result("a", "1")]
    assert sanitize_tool_call_ids(plain, mode="dedupe") is plain


def test_results_with_extra_fields_still_take_part_in_pairing() -> None:
    raw = msgspec.to_builtins(result("a", "A"))
    odd = message_from_json({**raw, "toolCallId": "a", "extraField": 1})
    assert type(odd).__name__ == "UnknownMessage"
    messages = [user(), assistant(call("a"), stop="toolUse"), odd]
    r = sanitize_replay_history(messages, policy=ReplayPolicy(), timestamp_ms=NOW)
    assert r.synthetic_results == () and len(r.messages) == 3
    assert isinstance(r.messages[2], ToolResultMessage) and r.messages[2].content == [TextContent(text="A")]


def test_pipeline_marks_inter_session_user_turns() -> None:
    routed = message_from_json(
        {"role": "user", "content": "Do X.", "timestamp": 1, "provenance": {"kind": "inter_session"}}
    )
    r = sanitize_replay_history([routed, assistant("ok")], policy=ReplayPolicy(), timestamp_ms=NOW)
    first = r.messages[0]
    assert isinstance(first, UserMessage)
    assert first.content.startswith("[Inter-session message] isUser=false\n") and first.content.endswith(
        "\nDo X."
    )


def test_openai_responses_id_shapes_and_reasoning() -> None:
    from sessionkeeper.pruning._responses import (
        downgrade_function_call_reasoning_pairs,
        downgrade_openai_reasoning,
        normalize_openai_responses_ids,
    )

    messages = [
        user(),
        assistant(call("toolu_01ab")),
        result("toolu_01ab", "r"),
        assistant(call("call_ok|fc_ok")),
    ]
    out = normalize_openai_responses_ids(messages)
    new_id = out[1].content[0].id
    assert new_id.startswith("call_toolu_01ab_") and len(new_id) <= 64 and out[2].tool_call_id == new_id
    assert out[3] is messages[3]  # already in shape
    reasoning = thinking("r", '{"id":"rs_1","type":"reasoning"}')
    orphan = [assistant("a", reasoning), assistant(reasoning, "b")]
    kept = downgrade_openai_reasoning(orphan)
    assert kept[0].content == [TextContent(text="a")] and kept[1] is orphan[1]
    assert downgrade_openai_reasoning(orphan, drop_replayable=True)[1].content == [TextContent(text="b")]
    pairs = [
        assistant(call("call_1|fc_1")),
        result("call_1|fc_1", "r"),
        assistant(reasoning, call("call_2|fc_2")),
    ]
    down = downgrade_function_call_reasoning_pairs(pairs)
    assert down[0].content[0].id == "call_1" and down[1].tool_call_id == "call_1" and down[2] is pairs[2]


def test_usage_before_the_latest_compaction_is_zeroed_and_totals_filled() -> None:
    from sessionkeeper.pruning import ensure_usage_totals, strip_stale_usage

    summary = CompactionSummaryMessage(summary="s", tokens_before=1, timestamp=100)
    old = msgspec.structs.replace(assistant("a", ts=100), usage=Usage(input=5, total_tokens=5))
    new = msgspec.structs.replace(assistant("b", ts=101), usage=Usage(input=5, output=2))
    out = strip_stale_usage([old, summary, new])
    assert out[0].usage == Usage(total_tokens=0) and out[2] is new
    assert ensure_usage_totals(out)[2].usage.total_tokens == 7
    assert strip_stale_usage([new]) == [new]
