"""Behaviour tests: one per rule and default of OpenClaw spec §7 (context pruning, mode cache-ttl)."""

from __future__ import annotations

import logging

import msgspec
import pytest
from tests.pruning._builders import assistant, bash, call, image, result, thinking, turn, user

from sessionkeeper._config import load_config
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.pruning import (
    PRUNED_IMAGE_MARKER,
    Pruner,
    PruningSettings,
    estimate_context_chars,
    estimate_message_chars,
    estimate_string_chars,
    prune_context_messages,
    resolve_context_window_tokens,
)
from sessionkeeper.pruning._settings import SoftTrimSettings, ToolMatchSettings
from sessionkeeper.records import slice_utf16_safe, utf16_len
from sessionkeeper.records._messages import CustomMessage, TextContent, UnknownMessage
from sessionkeeper.testing import FakeClock


def _cfg(**section: object) -> PruningSettings:
    return PruningSettings.from_config(load_config({"agents": {"defaults": {"contextPruning": section}}}))


# --- settings -----------------------------------------------------------------------------------


def test_defaults_are_openclaws() -> None:
    s = PruningSettings()
    assert (s.mode, s.ttl_ms, s.keep_last_assistants) == ("off", 300_000, 3)
    assert (s.soft_trim_ratio, s.hard_clear_ratio, s.min_prunable_tool_chars) == (0.3, 0.5, 50_000)
    assert (s.soft_trim.max_chars, s.soft_trim.head_chars, s.soft_trim.tail_chars) == (4000, 1500, 1500)
    assert s.hard_clear.enabled and s.hard_clear.placeholder == "[Old tool result content cleared]"
    assert s.tools.allow == () and s.tools.deny == ()


def test_config_default_mode_is_off_and_other_modes_disable() -> None:
    assert PruningSettings.from_config(load_config()).mode == "off"
    # one default, whichever way the settings are built (issue 11)
    assert PruningSettings() == PruningSettings.from_config(load_config())
    assert PruningSettings() == _cfg()
    assert PruningSettings(mode="cache-ttl") == _cfg(mode="cache-ttl")
    assert _cfg(mode="cache-ttl").mode == "cache-ttl"
    assert _cfg(mode="aggressive").mode == "off"


def test_ttl_bare_number_is_minutes_and_strings_parse() -> None:
    assert _cfg(ttl=7).ttl_ms == 7 * 60_000
    assert _cfg(ttl="7").ttl_ms == 7 * 60_000
    assert _cfg(ttl="1h").ttl_ms == 3_600_000
    assert _cfg(ttl="90s").ttl_ms == 90_000


def test_ratios_are_clamped_and_ints_floored() -> None:
    s = _cfg(softTrimRatio=-1, hardClearRatio=7, keepLastAssistants=2.9, minPrunableToolChars=-5)
    assert (s.soft_trim_ratio, s.hard_clear_ratio) == (0.0, 1.0)
    assert (s.keep_last_assistants, s.min_prunable_tool_chars) == (2, 0)
    assert _cfg(softTrim={"maxChars": 10.9, "headChars": -3}).soft_trim == SoftTrimSettings(
        max_chars=10, head_chars=0, tail_chars=1500
    )


def test_placeholder_is_trimmed_and_blank_keeps_default() -> None:
    assert _cfg(hardClear={"placeholder": "  [x]  "}).hard_clear.placeholder == "[x]"
    assert (
        _cfg(hardClear={"placeholder": "   "}).hard_clear.placeholder == "[Old tool result content cleared]"
    )
    assert _cfg(hardClear={"enabled": False}).hard_clear.enabled is False


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"ttl": "soon"}, "agents.defaults.contextPruning.ttl"),
        ({"keepLastAssistants": "three"}, "agents.defaults.contextPruning.keepLastAssistants"),
        ({"softTrim": {"maxChars": True}}, "agents.defaults.contextPruning.softTrim.maxChars"),
        ({"tools": {"allow": "read"}}, "agents.defaults.contextPruning.tools.allow"),
        ({"hardClear": []}, "agents.defaults.contextPruning.hardClear"),
    ],
)
def test_bad_values_raise_config_error_naming_the_key(section: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        _cfg(**section)
    assert err.value.key == key


def test_anthropic_auth_enables_cache_ttl_with_one_hour_and_cache_retention_picks_ttl() -> None:
    empty = load_config()
    s = PruningSettings.from_config(empty, anthropic_auth=True)
    assert (s.mode, s.ttl_ms) == ("cache-ttl", 3_600_000)
    assert PruningSettings.from_config(empty, anthropic_auth=True, cache_retention="short").ttl_ms == 300_000
    assert PruningSettings.from_config(empty, cache_retention="long").ttl_ms == 3_600_000
    explicit = load_config({"agents": {"defaults": {"contextPruning": {"mode": "off", "ttl": "2m"}}}})
    s = PruningSettings.from_config(explicit, anthropic_auth=True, cache_retention="long")
    assert (s.mode, s.ttl_ms) == ("off", 120_000)


def test_tool_globs_deny_first_case_insensitive_and_empty_allow_means_all() -> None:
    s = PruningSettings(
        tools=ToolMatchSettings(
            allow=(
                "Read*",
                "web_?",
            ),
            deny=("read_secret",),
        )
    )
    assert s.is_tool_prunable("READ") and s.is_tool_prunable("read_file")
    assert not s.is_tool_prunable("read_secret")
    assert not s.is_tool_prunable("web_x")  # only * is a wildcard; '?' is literal
    assert not s.is_tool_prunable("bash")
    everything = PruningSettings(tools=ToolMatchSettings(deny=("ba*",)))
    assert everything.is_tool_prunable("anything") and not everything.is_tool_prunable("Bash")
    assert PruningSettings(tools=ToolMatchSettings(allow=("*",))).is_tool_prunable("x")


# --- estimate -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "chars"),
    [
        ("hello", 5),
        ("Привет", 6),  # Cyrillic 1
        ("漢字", 8),  # CJK ideographs 4
        ("ひらがなカタカナ", 32),  # kana 4
        ("한국", 8),  # Hangul 4
        ("ꀀ", 4),  # Yi 4
        ("ＡＢ", 8),  # fullwidth 4
        ("ｱｲ", 2),  # halfwidth katakana 1
        ("😀", 2),  # astral emoji: UTF-16 length
        ("𠀀", 4),  # CJK Extension B: 4, not 5
        ("مرحبا", 5),  # Arabic 1
        ("", 0),
    ],
)
def test_cjk_weighted_char_estimate(text: str, chars: int) -> None:
    assert estimate_string_chars(text) == chars


def test_message_estimates_by_role() -> None:
    assert estimate_message_chars(user("abc")) == 3
    assert estimate_message_chars(user([TextContent(text="ab"), image(10)])) == 8002
    assert estimate_message_chars(result("c", "abcd", image(99999))) == 8004
    args = {"path": "é", "n": [1, 2]}
    expected_args = len(msgspec.json.encode(args).decode())
    msg = assistant("hi", thinking("think", "sig"), call("c1", **args))
    assert estimate_message_chars(msg) == 2 + 5 + 3 + expected_args
    assert estimate_message_chars(bash("x" * 100_000)) == 256
    assert estimate_message_chars(CustomMessage(custom_type="x", content="y" * 9999, display=True)) == 256
    assert estimate_message_chars(
        UnknownMessage({"role": "toolResult", "content": [{"type": "text", "text": 5}]})
    ) == len('{"type":"text","text":5}')
    assert estimate_message_chars(UnknownMessage({"role": "weird"})) == 256


def test_utf16_slicing_never_splits_a_pair() -> None:
    text = "a😀b"
    assert utf16_len(text) == 4
    assert slice_utf16_safe(text, 0, 2) == "a"  # end inside the pair: drop it
    assert slice_utf16_safe(text, 2) == "b"  # start inside the pair: skip it
    assert slice_utf16_safe(text, -3) == "😀b"
    assert slice_utf16_safe(text, 0, 3) == "a😀"


# --- the algorithm ------------------------------------------------------------------------------

BIG = "x" * 10_000


def _ctx(*results: str, extra_assistants: int = 3) -> list:
    messages: list = [user("start")]
    for n, text in enumerate(results):
        messages += turn(f"c{n}", text)
    messages += [assistant(f"tail {k}") for k in range(extra_assistants)]
    return messages


def test_no_window_prunes_nothing() -> None:
    r = prune_context_messages(_ctx(BIG), settings=PruningSettings(), context_window_tokens=None)
    assert not r.changed and r.skipped == "no-context-window"


def test_ratio_uses_window_tokens_times_four_and_soft_trim_ratio_boundary() -> None:
    messages = _ctx(BIG)
    total = estimate_context_chars(messages)
    settings = PruningSettings(soft_trim_ratio=0.5, hard_clear=PruningSettings().hard_clear)
    at = prune_context_messages(messages, settings=settings, context_window_tokens=total // 2)  # ratio 0.5
    assert at.changed and at.soft_trimmed == ("c0",)
    below = prune_context_messages(messages, settings=settings, context_window_tokens=total // 2 + 1)
    assert not below.changed and below.skipped == "below-soft-trim-ratio"


def test_soft_trim_text_head_tail_and_note() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(5000))
    r = prune_context_messages(_ctx(text), settings=PruningSettings(), context_window_tokens=1000)
    trimmed = r.messages[2]
    assert trimmed.content == [
        TextContent(
            text=text[:1500]
            + "\n...\n"
            + text[-1500:]
            + "\n\n[Tool result trimmed: kept first 1500 chars and last 1500 chars of 5000 chars.]"
        )
    ]
    assert (trimmed.tool_call_id, trimmed.tool_name) == ("c0", "read")


def test_soft_trim_joins_blocks_with_newlines_and_keeps_short_results() -> None:
    s = PruningSettings(soft_trim=SoftTrimSettings(max_chars=10, head_chars=3, tail_chars=3))
    messages = [user("u"), assistant(call("a")), result("a", "ab", "c" * 200, "de"), *[assistant("t")] * 3]
    out = prune_context_messages(messages, settings=s, context_window_tokens=1).messages[2]
    assert out.content == [
        TextContent(
            text="ab\n\n...\n\nde\n\n[Tool result trimmed: kept first 3 chars and last 3 chars of 206 chars.]"
        )
    ]
    short = [user("u"), assistant(call("a")), result("a", "0123456789"), *[assistant("t")] * 3]
    assert not prune_context_messages(short, settings=s, context_window_tokens=1).changed  # len == maxChars
    wide = PruningSettings(soft_trim=SoftTrimSettings(max_chars=5, head_chars=6, tail_chars=6))
    long = [user("u"), assistant(call("a")), result("a", "0123456789ab"), *[assistant("t")] * 3]
    assert not prune_context_messages(
        long, settings=wide, context_window_tokens=1
    ).changed  # head+tail >= len


def test_soft_trim_is_utf16_safe() -> None:
    s = PruningSettings(soft_trim=SoftTrimSettings(max_chars=10, head_chars=3, tail_chars=3))
    messages = [user("u"), assistant(call("a")), result("a", "ab😀" * 60 + "😀"), *[assistant("t")] * 3]
    text = prune_context_messages(messages, settings=s, context_window_tokens=1).messages[2].content[0].text
    head, rest = text.split("\n...\n", 1)
    assert head == "ab"  # the 3rd unit is a high surrogate: the pair is dropped, not split
    assert rest.startswith("😀\n\n")  # tail of 3 units starts inside a pair: skipped
    text.encode("utf-8")  # no lone surrogate anywhere


def test_images_in_prunable_results_become_markers_b16() -> None:
    messages = [user([TextContent(text="see"), image(40000)])]
    for n in range(6):
        messages += [
            assistant(call(f"s{n}", "screenshot", page=n), stop="toolUse"),
            result(f"s{n}", f"Screenshot of page {n}", image(40000), name="screenshot"),
            assistant(f"Page {n} looks fine."),
        ]
    r = prune_context_messages(messages, settings=PruningSettings(), context_window_tokens=15000)
    assert r.messages[0] is messages[0]  # the user image is untouched
    for n in range(6):
        pruned = r.messages[2 + 3 * n]
        if n < 5:  # before the 3rd-from-last assistant ("Page 4 looks fine.")
            assert pruned.content == [TextContent(text=f"Screenshot of page {n}\n{PRUNED_IMAGE_MARKER}")]
            assert (pruned.tool_call_id, pruned.tool_name) == (f"s{n}", "screenshot")
        else:
            assert pruned is messages[2 + 3 * n]
    assert r.soft_trimmed == ("s0", "s1", "s2", "s3", "s4") and r.hard_cleared == ()


def test_protected_before_first_user_and_from_nth_last_assistant() -> None:
    early = [assistant(call("e"), stop="toolUse"), result("e", BIG)]
    messages = [*early, *_ctx(BIG, BIG, extra_assistants=0)]
    # assistants: e-call, c0-call, ok, c1-call, ok -> 3rd from last is the c0 "ok"
    s = PruningSettings(min_prunable_tool_chars=0, hard_clear_ratio=0.0)
    r = prune_context_messages(messages, settings=s, context_window_tokens=100)
    assert r.messages[1] is messages[1]  # before the first user message
    assert r.hard_cleared == ("c0",)  # c1 is after the cutoff
    assert r.messages[7] is messages[7]


def test_too_few_assistants_skips_and_zero_keeps_nothing_protected() -> None:
    messages = [user("u"), *turn("c0", BIG)]  # two assistants
    r = prune_context_messages(messages, settings=PruningSettings(), context_window_tokens=10)
    assert not r.changed and r.skipped == "too-few-assistants"
    r0 = prune_context_messages(
        messages, settings=PruningSettings(keep_last_assistants=0), context_window_tokens=10
    )
    assert r0.soft_trimmed == ("c0",)


def test_no_user_message_means_nothing_prunable() -> None:
    messages = [assistant(call("a"), stop="toolUse"), result("a", BIG), *[assistant("t")] * 3]
    r = prune_context_messages(messages, settings=PruningSettings(), context_window_tokens=10)
    assert not r.changed and r.skipped is None


def test_only_allowed_tools_and_lookalikes_untouched() -> None:
    messages = [
        user("u" * 20_000),
        assistant("a" * 20_000, call("big", "read", blob="z" * 20_000), stop="toolUse"),
        result("big", BIG, name="secret_read"),
        bash(BIG),
        CustomMessage(custom_type="note", content=BIG, display=True),
        user(BIG),
        *turn("c1", BIG, name="Read"),
        *[assistant("t")] * 3,
    ]
    s = PruningSettings(
        tools=ToolMatchSettings(deny=("secret_*",)), min_prunable_tool_chars=0, hard_clear_ratio=0
    )
    r = prune_context_messages(messages, settings=s, context_window_tokens=100)
    changed = [i for i, (a, b) in enumerate(zip(messages, r.messages, strict=True)) if a is not b]
    assert changed == [7] and r.hard_cleared == ("c1",)


def test_hard_clear_oldest_first_until_under_ratio() -> None:
    messages = _ctx(BIG, BIG, BIG, BIG)
    s = PruningSettings(soft_trim=SoftTrimSettings(max_chars=100_000), min_prunable_tool_chars=0)
    total = estimate_context_chars(messages)
    window = total // 4 * 2 // 4 + 1  # ratio just under 2 -> need to drop about 3/4 of the size
    r = prune_context_messages(messages, settings=s, context_window_tokens=window)
    assert r.hard_cleared and list(r.hard_cleared) == [f"c{i}" for i in range(len(r.hard_cleared))]
    assert r.chars_after / (window * 4) < 0.5
    before_last = r.chars_after + 10_000 - len("[Old tool result content cleared]")
    assert before_last / (window * 4) >= 0.5  # it stopped as soon as the ratio went under
    assert r.messages[2].content == [TextContent(text="[Old tool result content cleared]")]


def test_hard_clear_needs_enabled_and_min_prunable_chars() -> None:
    messages = _ctx(BIG, BIG)
    s = PruningSettings(soft_trim=SoftTrimSettings(max_chars=100_000))
    assert not prune_context_messages(messages, settings=s, context_window_tokens=10).changed  # 20k < 50k
    low = PruningSettings(soft_trim=SoftTrimSettings(max_chars=100_000), min_prunable_tool_chars=20_000)
    assert prune_context_messages(messages, settings=low, context_window_tokens=10).hard_cleared == (
        "c0",
        "c1",
    )
    off = PruningSettings(
        soft_trim=SoftTrimSettings(max_chars=100_000),
        min_prunable_tool_chars=0,
        hard_clear=PruningSettings().hard_clear.__class__(enabled=False),
    )
    assert not prune_context_messages(messages, settings=off, context_window_tokens=10).changed


def test_dropped_thinking_is_left_out_of_the_estimate() -> None:
    messages = [user("u"), assistant(thinking("t" * 1000, "s" * 10), "a"), assistant(thinking("t" * 50), "b")]
    with_thinking = prune_context_messages(messages, settings=PruningSettings(), context_window_tokens=10**6)
    without = prune_context_messages(
        messages, settings=PruningSettings(), context_window_tokens=10**6, drop_thinking_for_estimate=True
    )
    assert with_thinking.chars_before - without.chars_before == 1010  # the latest keeps its thinking


def test_result_reports_ids_and_chars() -> None:
    r = prune_context_messages(_ctx(BIG), settings=PruningSettings(), context_window_tokens=1000)
    assert r.soft_trimmed == ("c0",) and r.hard_cleared == ()
    assert r.chars_before == estimate_context_chars(_ctx(BIG))
    assert r.chars_after == estimate_context_chars(r.messages)
    assert r.chars_saved == r.chars_before - r.chars_after > 6000


def test_resolve_context_window_tokens() -> None:
    assert resolve_context_window_tokens() == 200_000
    assert resolve_context_window_tokens(model_context_window=1000) == 1000
    assert resolve_context_window_tokens(model_context_tokens=500, model_context_window=1000) == 500
    assert resolve_context_window_tokens(configured=42, model_context_window=1000) == 42
    assert resolve_context_window_tokens(model_context_window=1000, context_tokens_cap=800) == 800
    assert resolve_context_window_tokens(model_context_window=1000, context_tokens_cap=8000) == 1000
    assert resolve_context_window_tokens(model_context_window=0, default=7) == 7


# --- the Pruner gates ---------------------------------------------------------------------------

NOW = 1_800_000_000_000
ON = PruningSettings(mode="cache-ttl")


def _prune(pruner: Pruner, **kw: object):
    args = {"context_window_tokens": 1000, "last_cache_touch_at": NOW - 600_000, "now_ms": NOW}
    args.update(kw)
    return pruner.prune(_ctx(BIG), **args)  # type: ignore[arg-type]


def test_pruner_runs_when_ttl_expired_and_resets_the_touch() -> None:
    r = _prune(Pruner(settings=ON))
    assert r.changed and r.last_cache_touch_at == NOW


def test_pruner_logs_what_it_pruned_at_debug_only(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="sessionkeeper.pruning"):
        r = _prune(Pruner(settings=ON))
    (record,) = [rec for rec in caplog.records if rec.name == "sessionkeeper.pruning"]
    assert record.levelno == logging.DEBUG  # once per request: never at INFO (docs/logging.md)
    assert record.soft_trimmed == list(r.soft_trimmed) == ["c0"]  # type: ignore[attr-defined]
    assert (record.chars_before, record.chars_after) == (r.chars_before, r.chars_after)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("pruner", "kw", "reason"),
    [
        (Pruner(settings=PruningSettings(mode="off")), {}, "mode-off"),
        (Pruner(settings=ON), {"provider": "openai", "api": "openai-responses"}, "provider-not-eligible"),
        (Pruner(settings=PruningSettings(mode="cache-ttl", ttl_ms=0)), {}, "ttl-disabled"),
        (Pruner(settings=ON), {"last_cache_touch_at": NOW - 299_999}, "ttl-not-expired"),
        (Pruner(settings=ON, is_cache_ttl_eligible=lambda p, m, a: False), {}, "provider-not-eligible"),
    ],
)
def test_pruner_gates(pruner: Pruner, kw: dict[str, object], reason: str) -> None:
    r = _prune(pruner, **kw)
    assert not r.changed and r.skipped == reason
    assert r.last_cache_touch_at == kw.get("last_cache_touch_at", NOW - 600_000)


def test_no_cache_touch_counts_as_an_expired_ttl() -> None:
    """Deviation D11: OpenClaw never prunes without a marker for the model; here the TTL has expired."""
    r = _prune(Pruner(settings=ON), last_cache_touch_at=None)
    assert r.changed and r.skipped is None and r.last_cache_touch_at == NOW


def test_pruner_ttl_boundary_and_unchanged_keeps_touch() -> None:
    assert _prune(Pruner(settings=ON), last_cache_touch_at=NOW - 300_000).changed  # exactly ttl: expired
    quiet = _prune(Pruner(settings=ON), context_window_tokens=10**7)
    assert not quiet.changed and quiet.skipped == "below-soft-trim-ratio"
    assert quiet.last_cache_touch_at == NOW - 600_000


def test_pruner_uses_its_clock_and_host_predicate() -> None:
    pruner = Pruner(
        settings=ON, clock=FakeClock(now_ms=NOW), is_cache_ttl_eligible=lambda p, m, a: p == "mine"
    )
    r = pruner.prune(
        _ctx(BIG), context_window_tokens=1000, last_cache_touch_at=NOW - 300_000, provider="mine"
    )
    assert r.changed and r.last_cache_touch_at == NOW
