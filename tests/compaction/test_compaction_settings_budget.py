"""Settings (OpenClaw §5.2, pi §13.1), reserve arithmetic (OpenClaw §5.3, D4, B09), prompts, serialisation."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from tests import _pi_oracle
from tests._pi_oracle import PiOracle
from tests.compaction._build import assistant, result, user

from sessionkeeper._config import load_config
from sessionkeeper.compaction import (
    CompactionSettings,
    compaction_threshold,
    effective_reserve_tokens,
    serialize_conversation,
    should_compact,
)
from sessionkeeper.compaction import _prompts as prompts
from sessionkeeper.compaction._quality import audit_summary, extract_opaque_identifiers
from sessionkeeper.compaction._serialize import truncate_utf16
from sessionkeeper.exceptions import ConfigError


def test_defaults_are_the_references() -> None:
    s = CompactionSettings()
    assert (s.enabled, s.mode, s.reserve_tokens, s.reserve_tokens_floor) == (True, "safeguard", 16384, 20000)
    assert s.keep_recent_tokens is None and s.resolved_keep_recent_tokens == 20000
    assert (s.recent_turns_preserve, s.max_history_share, s.identifier_policy) == (3, 0.5, "strict")
    assert (s.quality_guard.max_retries, s.quality_guard_enabled, s.timeout_seconds) == (1, True, 180.0)
    assert s.truncate_after_compaction is False and s.active_transcript_byte_limit is None
    assert CompactionSettings(mode="default").quality_guard_enabled is False
    assert CompactionSettings(mode="default", provider="x").effective_mode == "safeguard"


def test_from_openclaw_config() -> None:
    config = load_config(
        {
            "agents": {
                "defaults": {
                    "compaction": {
                        "enabled": False,
                        "mode": "default",
                        "reserveTokens": 30000,
                        "reserveTokensFloor": 0,
                        "keepRecentTokens": 5000,
                        "recentTurnsPreserve": 40,
                        "qualityGuard": {"enabled": True, "maxRetries": 3},
                        "maxActiveTranscriptBytes": "20mb",
                        "truncateAfterCompaction": True,
                        "identifierPolicy": "custom",
                        "identifierInstructions": "keep ticket ids",
                        "postCompactionSections": ["Session Startup", "Red Lines"],
                    }
                }
            }
        }
    )
    s = CompactionSettings.from_config(config)
    assert (s.enabled, s.mode, s.reserve_tokens, s.reserve_tokens_floor, s.keep_recent_tokens) == (
        False,
        "default",
        30000,
        0,
        5000,
    )
    assert s.recent_turns_preserve == 12  # clamped to OpenClaw's maximum
    assert s.quality_guard.max_retries == 3 and s.quality_guard_enabled
    assert s.active_transcript_byte_limit == 20 * 1024 * 1024
    assert s.post_compaction_sections == ("Session Startup", "Red Lines")


def test_from_pi_settings_json(tmp_path: Path) -> None:
    file = tmp_path / "settings.json"
    file.write_text('{"compaction": {"enabled": true, "reserveTokens": 8192, "keepRecentTokens": 10000}}')
    s = CompactionSettings.from_config(load_config(file))
    assert (s.reserve_tokens, s.keep_recent_tokens) == (8192, 10000)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("mode", "turbo"),
        ("reserveTokens", -1),
        ("enabled", "yes"),
        ("maxHistoryShare", 0.95),
        ("qualityGuard", {"maxRetries": 4}),
        ("identifierPolicy", "loose"),
    ],
)
def test_bad_values_name_the_key(key: str, value: object) -> None:
    config = load_config({"agents": {"defaults": {"compaction": {key: value}}}})
    with pytest.raises(ConfigError, match=re.escape(f"agents.defaults.compaction.{key}")):
        CompactionSettings.from_config(config)


@pytest.mark.parametrize(
    ("window", "reserve", "floor", "expected"),
    [
        (200_000, 16384, 20000, 20000),  # floor raises the reserve
        (16_000, 16384, 20000, 8000),  # OpenClaw's example: minPrompt 8000 caps the reserve
        (200_000, 62500, 20000, 62500),  # higher reserve is kept (B13)
        (200_000, 16384, 0, 16384),  # floor 0 disables it
        (10, 16384, 20000, 5),  # tiny window: minPrompt = floor(C/2)
    ],
)
def test_effective_reserve(window: int, reserve: int, floor: int, expected: int) -> None:
    s = CompactionSettings(reserve_tokens=reserve, reserve_tokens_floor=floor)
    assert effective_reserve_tokens(s, context_window=window) == expected


def test_should_compact_threshold_is_strict_and_honours_enabled() -> None:
    s = CompactionSettings()
    assert compaction_threshold(s, context_window=200_000) == 180_000
    assert not should_compact(180_000, context_window=200_000, settings=s)
    assert should_compact(180_001, context_window=200_000, settings=s)
    assert not should_compact(10**9, context_window=200_000, settings=CompactionSettings(enabled=False))
    assert compaction_threshold(s, context_window=None) == 180_000  # unknown window: 200000 (D5)


def test_b09_max_output_tokens_raises_the_reserve() -> None:
    s = CompactionSettings(reserve_tokens=16384, reserve_tokens_floor=20000)
    assert not should_compact(75_000, context_window=100_000, settings=s)  # threshold 80000
    assert should_compact(75_000, context_window=100_000, settings=s, max_output_tokens=32_000)  # 68000
    assert effective_reserve_tokens(s, context_window=100_000, max_output_tokens=32_000) == 32_000


PI_COMPACTION_JS = Path("node_modules/@mariozechner/pi-coding-agent/dist/core/compaction/compaction.js")
pi_oracle = _pi_oracle.pi_oracle  # the shared fixture: installs the oracle (or skips with the reason)


def _js_constant(source: str, name: str) -> str:
    match = re.search(rf"const {name} = `(.*?)`;", source, flags=re.DOTALL)
    assert match, name
    return match.group(1)


@pytest.mark.oracle
def test_default_prompts_are_pi_verbatim(pi_oracle: PiOracle) -> None:
    compaction_js = pi_oracle.root / PI_COMPACTION_JS
    source = compaction_js.read_text(encoding="utf-8")
    assert _js_constant(source, "SUMMARIZATION_PROMPT") == prompts.SUMMARIZATION_PROMPT
    assert _js_constant(source, "UPDATE_SUMMARIZATION_PROMPT") == prompts.UPDATE_SUMMARIZATION_PROMPT
    assert (
        _js_constant(source, "TURN_PREFIX_SUMMARIZATION_PROMPT") == prompts.TURN_PREFIX_SUMMARIZATION_PROMPT
    )
    branch = (compaction_js.parent / "branch-summarization.js").read_text(encoding="utf-8")
    assert _js_constant(branch, "BRANCH_SUMMARY_PROMPT") == prompts.BRANCH_SUMMARY_PROMPT
    assert _js_constant(branch, "BRANCH_SUMMARY_PREAMBLE") == prompts.BRANCH_SUMMARY_PREAMBLE
    utils = (compaction_js.parent / "utils.js").read_text(encoding="utf-8")
    assert _js_constant(utils, "SUMMARIZATION_SYSTEM_PROMPT") == prompts.SUMMARIZATION_SYSTEM_PROMPT


def test_history_prompt_shape() -> None:
    text = prompts.build_history_prompt("[User]: hi", previous_summary="old", custom_instructions="tests")
    assert text.startswith(
        "<conversation>\n[User]: hi\n</conversation>\n\n<previous-summary>\nold\n</previous-summary>\n\n"
    )
    assert prompts.UPDATE_SUMMARIZATION_PROMPT in text and text.endswith("\n\nAdditional focus: tests")
    first = prompts.build_history_prompt("c", previous_summary=None, custom_instructions=None)
    assert first.endswith(prompts.SUMMARIZATION_PROMPT) and "<previous-summary>" not in first


def test_structured_instructions_and_identifier_policies() -> None:
    strict = prompts.build_structured_instructions("  focus  ", policy="strict")
    assert all(heading in strict for heading in prompts.REQUIRED_SUMMARY_SECTIONS)
    assert "preserve literal values exactly" in strict and "Additional context from /compact" in strict
    assert "only when needed" in prompts.build_structured_instructions(None, policy="off")
    assert prompts.summarization_instructions(None, policy="off") is None
    assert prompts.summarization_instructions("x", policy="strict") == (
        prompts.IDENTIFIER_PRESERVATION_INSTRUCTIONS + "\n\nAdditional focus:\nx"
    )
    assert prompts.identifier_instructions("custom", "keep ids") == "keep ids"
    assert prompts.cap_custom_instructions("é" * 900) == "é" * 800


def test_structured_fallback_carries_previous_summary() -> None:
    skeleton = prompts.structured_fallback_summary("earlier notes")
    assert skeleton.startswith("## Decisions\nearlier notes\n") and prompts.has_required_sections(skeleton)
    assert prompts.structured_fallback_summary(skeleton) == skeleton
    assert "No prior history." in prompts.structured_fallback_summary(None)


def test_serialize_conversation_pi_format() -> None:
    text = serialize_conversation(
        [
            user("Fix it"),
            assistant("On it", ("c1", "read", {"path": "a.py", "limit": 5})),
            result("c1", "x" * 2100),
            user(""),
        ]
    )
    parts = text.split("\n\n")
    assert parts[0] == "[User]: Fix it"
    assert parts[1] == "[Assistant]: On it"
    assert parts[2] == '[Assistant tool calls]: read(path="a.py", limit=5)'
    assert parts[3] == "[Tool result]: " + "x" * 2000
    assert parts[4] == "[... 100 more characters truncated]"
    assert len(parts) == 5  # the empty user message is skipped


def test_truncation_never_splits_a_surrogate_pair() -> None:
    kept, cut = truncate_utf16("a" + "😀" * 3, 2)
    assert kept == "a" and cut == 6  # the emoji (2 units) did not fit whole
    assert truncate_utf16("abc", 5) == ("abc", 0)


def test_quality_audit() -> None:
    ids = extract_opaque_identifiers("see /srv/app/main.py and 3F2A9C1E77 at db.local:5432, id 1234567")
    assert ids == ["/srv/app/main.py", "3F2A9C1E77", "db.local:5432", "1234567"]
    body = "\n".join(prompts.REQUIRED_SUMMARY_SECTIONS)
    missing = audit_summary(body, identifiers=ids, latest_ask="count the words in notes")
    assert not missing.ok and any(r.startswith("missing_identifiers:") for r in missing.reasons)
    assert "latest_user_ask_not_reflected" in missing.reasons
    good = body + "\n/srv/app/main.py 3f2a9c1e77 db.local:5432 1234567 count words notes"
    assert audit_summary(good, identifiers=ids, latest_ask="count the words in notes").ok
    assert (
        audit_summary("## Decisions", identifiers=[], latest_ask=None).reasons[0]
        == "missing_section:## Open TODOs"
    )


def test_a_lowered_configured_keep_budget_warns_after_a_default_logged_it_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """
    D9: ``keepRecentTokens`` 20000 configured in a small window is a WARNING, even when a default-settings
    compactor on the same window logged the same number (its own default) at DEBUG first.
    """
    from sessionkeeper.compaction import Compactor

    window = 16_000 + 23  # a window no other test uses
    configured = CompactionSettings.from_config(
        load_config({"agents": {"defaults": {"compaction": {"keepRecentTokens": 20_000}}}})
    )
    with caplog.at_level(logging.DEBUG, logger="sessionkeeper.compaction"):
        Compactor(settings=CompactionSettings(), context_window=window).budget(reason="threshold")
        Compactor(settings=configured, context_window=window).budget(reason="threshold")
        Compactor(settings=configured, context_window=window).budget(reason="threshold")
    keep = [
        (r.levelno, getattr(r, "configured", None))
        for r in caplog.records
        if r.name == "sessionkeeper.compaction" and getattr(r, "setting", None) == "keep_recent_tokens"
    ]
    assert keep == [(logging.DEBUG, 20_000), (logging.WARNING, 20_000)]  # each once
