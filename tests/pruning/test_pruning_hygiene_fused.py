"""
The fused hygiene pipeline equals the plain composition of the public passes (issue 16).

:func:`sanitize_replay_history` skips steps with nothing to do and merges walks on plain contexts
(:mod:`sessionkeeper.pruning._fused`); ``_reference_steps`` is the straightforward composition of
the public passes it replaced. Hypothesis draws contexts rich in the shapes each pass rewrites and
any replay policy; both must give the same messages (encoded bytes), synthetic results and
``changed`` flag.
"""

from __future__ import annotations

from typing import Any

import attrs
import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.pruning._single_checks import dangling_calls_possible, role_runs

from sessionkeeper.pruning import (
    ReplayPolicy,
    repair_tool_call_inputs,
    repair_tool_use_result_pairing,
    resolve_replay_policy,
    sanitize_replay_history,
    sanitize_tool_call_ids,
)
from sessionkeeper.pruning._fused import (
    has_item_ids,
    has_reasoning_items,
    normalize_responses_ids,
    pairing_intact,
    repair_call_inputs,
    rewrite_tool_call_ids,
    survey,
    tail_checks,
)
from sessionkeeper.pruning._hygiene import _reference_steps, _StepArgs
from sessionkeeper.pruning._responses import (
    _resolved,
    downgrade_function_call_reasoning_pairs,
    downgrade_openai_reasoning,
    normalize_openai_responses_ids,
)
from sessionkeeper.pruning._turn_order import _strip_dangling_tool_calls
from sessionkeeper.records._codec import encode_message
from sessionkeeper.records._messages import (
    AgentMessage,
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    Usage,
    UserMessage,
)


NOW = 1_800_000_000_000
IDS = st.sampled_from(["a", "toolu_01Ab", "toolu01Ab", "call_1|fc_1", "fc_2", "x:1", " c ", "", "abcdefghi"])
NAMES = st.sampled_from(["read", "exec", " read ", "bad name", ""])
TEXTS = st.sampled_from(
    ["ok", "", "  ", "NO_REPLY", "a_b", "[assistant turn failed before producing content]"]
)
STAMPS = st.integers(1, 4)
REASONING = '{"id": "rs_1", "type": "reasoning"}'


@st.composite
def _assistant(draw: st.DrawFn) -> AssistantMessage:
    blocks: list[Any] = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["text", "thinking", "call", "call"]))
        if kind == "text":
            blocks.append(TextContent(text=draw(TEXTS)))
        elif kind == "thinking":
            signature = draw(st.sampled_from([None, "", "sig", "c2ln", "sig", REASONING]))
            blocks.append(
                ThinkingContent(thinking="t")
                if signature is None
                else ThinkingContent(thinking="t", thinking_signature=signature)
            )
        else:
            thought = draw(st.sampled_from([None, "msg_1", "c2ln"]))
            block = ToolCall(id=draw(IDS), name=draw(NAMES), arguments={"p": 1})
            if thought is not None:
                block = msgspec.structs.replace(block, thought_signature=thought)
            blocks.append(block)
    total = draw(st.sampled_from([None, 0, 5]))
    usage = Usage(input=draw(st.sampled_from([0, 3]))) if total is None else Usage(total_tokens=total)
    return AssistantMessage(
        content=blocks,
        api="anthropic-messages",
        provider=draw(st.sampled_from(["anthropic", "openclaw"])),
        model=draw(st.sampled_from(["claude-sonnet-4-5", "delivery-mirror"])),
        stop_reason=draw(st.sampled_from(["stop", "toolUse", "toolUse", "error", "aborted", "length"])),
        usage=usage,
        timestamp=draw(STAMPS),
    )


@st.composite
def _message(draw: st.DrawFn) -> AgentMessage:
    kind = draw(st.sampled_from(["user", "assistant", "assistant", "result", "result", "other"]))
    if kind == "user":
        if draw(st.booleans()):
            return UserMessage(content=draw(TEXTS), timestamp=draw(STAMPS))
        return UserMessage(content=[TextContent(text=draw(TEXTS))], timestamp=draw(STAMPS))
    if kind == "assistant":
        return draw(_assistant())
    if kind == "result":
        details = draw(st.sampled_from([msgspec.UNSET, {"k": 1}]))
        return ToolResultMessage(
            tool_call_id=draw(IDS),
            tool_name=draw(NAMES),
            content=[TextContent(text=draw(TEXTS))],
            details=details,
            is_error=draw(st.booleans()),
            timestamp=draw(STAMPS),
        )
    return draw(
        st.sampled_from(
            [
                CompactionSummaryMessage(summary="s", tokens_before=10, timestamp=2),
                CompactionSummaryMessage(summary="s", tokens_before=10, timestamp=3),
                CompactionSummaryMessage(summary="s", tokens_before=10, timestamp=3),
                BranchSummaryMessage(summary="b", from_id="x", timestamp=2),
            ]
        )
    )


POLICIES = st.one_of(
    st.sampled_from(
        [
            resolve_replay_policy(api=api, model_id=model)
            for api, model in (
                ("anthropic-messages", "claude-sonnet-4-5"),
                ("anthropic-messages", "claude-3-7-sonnet"),
                ("openai-responses", "gpt-5"),
                ("openai-completions", "gpt-4o"),
                ("google-generative-ai", "gemini-2.5-pro"),
                ("x", "y"),
            )
        ]
    ),
    st.builds(
        ReplayPolicy,
        sanitize_tool_call_ids=st.booleans(),
        tool_call_id_mode=st.sampled_from([None, "strict", "strict9"]),
        repair_tool_use_result_pairing=st.booleans(),
        preserve_signatures=st.booleans(),
        preserve_native_anthropic_tool_use_ids=st.booleans(),
        sanitize_thought_signatures=st.booleans(),
        drop_thinking_blocks=st.booleans(),
        drop_reasoning_from_history=st.booleans(),
        apply_google_turn_ordering=st.booleans(),
        validate_gemini_turns=st.booleans(),
        validate_anthropic_turns=st.booleans(),
    ),
)
APIS = st.sampled_from(
    ["anthropic-messages", "openai-responses", "google-generative-ai", "openai-completions", None]
)


def _encoded(messages: Any) -> list[bytes]:
    return [encode_message(m) for m in messages]


_UNKNOWN = UnknownMessage({"role": "user", "content": "hi", "extra": 1, "timestamp": 1})


@settings(max_examples=500)
@given(
    st.lists(_message(), min_size=2, max_size=16),
    st.integers(-1, 40),
    st.fixed_dictionaries(
        {
            "policy": POLICIES,
            "timestamp_ms": st.just(NOW),
            "api": APIS,
            "provider": st.sampled_from(["p", "anthropic", None]),
            "allowed_tool_names": st.sampled_from([None, ("read",), ()]),
            "model_changed": st.booleans(),
        }
    ),
)
def test_fused_pipeline_equals_the_reference_composition(
    messages: list[AgentMessage], unknown_at: int, kwargs: dict[str, Any]
) -> None:
    if 0 <= unknown_at <= len(messages):  # now and then a context that is not plain
        messages = [*messages[:unknown_at], _UNKNOWN, *messages[unknown_at:]]
    reference, synthetic = _reference_steps(messages, _StepArgs(**kwargs))
    got = sanitize_replay_history(messages, **kwargs)
    assert _encoded(got.messages) == _encoded(reference)
    assert got.synthetic_results == tuple(synthetic)
    expected_changed = len(reference) != len(messages) or any(
        a is not b for a, b in zip(reference, messages, strict=False)
    )
    assert got.changed == expected_changed


def test_survey_sees_unknown_messages_and_record_subclasses() -> None:
    class Subclassed(AssistantMessage, frozen=True, kw_only=True):
        pass

    plain = [UserMessage(content="hi", timestamp=1)]
    assert survey(plain, thought_signatures=False).plain
    unknown = [*plain, UnknownMessage({"role": "x"})]
    assert not survey(unknown, thought_signatures=False).plain
    sub = Subclassed(content=[], api="a", provider="p", model="m", stop_reason="stop", timestamp=1)
    assert not survey([*plain, sub], thought_signatures=False).plain


@settings(max_examples=300)
@given(
    st.lists(_message(), min_size=2, max_size=16),
    st.sampled_from(["strict", "strict9", "dedupe"]),
    st.booleans(),
    st.booleans(),
    st.sampled_from([None, ("read",)]),
)
def test_fused_id_rewrite_equals_sanitize_tool_call_ids(
    messages: list[AgentMessage], mode: Any, thinking_ids: bool, native: bool, allowed: Any
) -> None:
    kwargs: dict[str, Any] = {
        "mode": mode,
        "preserve_thinking_turn_ids": thinking_ids,
        "preserve_native_anthropic_ids": native,
        "allowed_tool_names": allowed,
    }
    expected = sanitize_tool_call_ids(messages, **kwargs)
    got = rewrite_tool_call_ids(messages, **kwargs)
    assert _encoded(got) == _encoded(expected)
    assert (got is messages) == (expected is messages)
    # copy-on-write: a message whose ids stay is the input's object, as in the public pass
    assert [g is m for g, m in zip(got, messages, strict=True)] == [
        e is m for e, m in zip(expected, messages, strict=True)
    ]
    if not thinking_ids:  # the Responses id normalising deferred into the rewrite: the composition
        normalized = normalize_openai_responses_ids(messages)
        expected = sanitize_tool_call_ids(normalized, **kwargs)
        got = rewrite_tool_call_ids(messages, normalize=_resolved, **kwargs)
        assert _encoded(got) == _encoded(expected)
        copied = [n is not m or e is not n for m, n, e in zip(messages, normalized, expected, strict=True)]
        assert [g is not m for g, m in zip(got, messages, strict=True)] == copied


@settings(max_examples=300)
@given(st.lists(_message(), min_size=2, max_size=16), st.booleans(), st.sampled_from([None, ("read",)]))
def test_fused_dry_runs_equal_the_public_passes(
    messages: list[AgentMessage], owned: bool, allowed: tuple[str, ...] | None
) -> None:
    expected = repair_tool_call_inputs(
        messages, allowed_tool_names=allowed, provider_owned_thinking_replay=owned
    )
    got = repair_call_inputs(messages, allowed_tool_names=allowed, provider_owned_thinking_replay=owned)
    assert _encoded(got) == _encoded(expected)
    assert (got is messages) == (expected is messages)
    repaired = repair_tool_use_result_pairing(messages, timestamp_ms=NOW, errored_assistant_policy="drop")
    normalized = normalize_openai_responses_ids(messages)
    fused = normalize_responses_ids(messages)
    assert _encoded(fused) == _encoded(normalized)
    assert (fused is messages) == (normalized is messages)
    assert [g is m for g, m in zip(fused, messages, strict=True)] == [
        e is m for e, m in zip(normalized, messages, strict=True)
    ]
    if not has_reasoning_items(messages):  # then the reasoning downgrade is skipped
        assert downgrade_openai_reasoning(messages, drop_replayable=owned) is messages
    if not has_item_ids(messages):  # then the pair downgrade is skipped
        assert downgrade_function_call_reasoning_pairs(messages) is messages
    if pairing_intact(messages):  # then the repair is skipped: it must be the identity
        assert not repaired.moved
        assert all(a is b for a, b in zip(repaired.messages, messages, strict=True))


@settings(max_examples=300)
@given(st.lists(_message(), min_size=2, max_size=16))
def test_tail_checks_equal_the_single_checks(messages: list[AgentMessage]) -> None:
    checks = tail_checks(messages)
    assert checks.pairing_intact == pairing_intact(messages)
    assert (checks.assistant_runs, checks.user_runs) == role_runs(messages)
    assert checks.dangling == dangling_calls_possible(messages)
    light = tail_checks(messages, dangling_check=False)  # the other answers without the dangling check
    assert attrs.evolve(light, dangling=checks.dangling) == checks and not light.dangling
    if not checks.dangling:  # then the strip is skipped: it must be the identity
        assert _strip_dangling_tool_calls(messages) is messages
