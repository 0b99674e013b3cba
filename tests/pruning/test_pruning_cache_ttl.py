"""The openclaw.cache-ttl TTL clock and provider eligibility (OpenClaw spec §7 "TTL clock", "Activation")."""

from __future__ import annotations

import json

import pytest

from sessionkeeper.pruning import (
    CACHE_TTL_CUSTOM_TYPE,
    build_cache_ttl_entry,
    cache_ttl_marker_data,
    is_cache_ttl_eligible_provider,
    is_cache_ttl_expired,
    read_last_cache_touch,
)
from sessionkeeper.records._entries import CustomEntry, LabelEntry, UnknownEntry
from sessionkeeper.transcript import entry_from_json, entry_to_builtins


def _marker(
    ts: object, provider: str | None = "anthropic", model: str | None = "claude-sonnet-4-5", n: int = 0
):
    data: dict[str, object] = {"timestamp": ts}
    if provider is not None:
        data["provider"] = provider
    if model is not None:
        data["modelId"] = model
    return CustomEntry(
        custom_type=CACHE_TTL_CUSTOM_TYPE,
        data=data,
        id=f"{n:08x}",
        parent_id=None,
        timestamp="2026-01-01T00:00:00.000Z",
    )


def test_newest_matching_marker_wins() -> None:
    entries = [_marker(100, n=1), _marker(300, provider="openai", n=2), _marker(200, n=3)]
    assert read_last_cache_touch(entries, provider="anthropic", model_id="claude-sonnet-4-5") == 200
    assert read_last_cache_touch(entries, provider="OpenAI") == 300
    assert read_last_cache_touch(entries) == 200
    assert read_last_cache_touch(entries, provider="anthropic", model_id="other") is None
    assert read_last_cache_touch(iter(entries), provider="ANTHROPIC", model_id="Claude-Sonnet-4-5") == 200


@pytest.mark.parametrize("bad", [0, None, "123", True, float("inf"), float("nan")])
def test_markers_without_a_usable_timestamp_are_skipped(bad: object) -> None:
    assert read_last_cache_touch([_marker(50, n=1), _marker(bad, n=2)]) == 50


def test_other_custom_types_and_entries_do_not_count() -> None:
    other = CustomEntry(
        custom_type="x", data={"timestamp": 999}, id="aaaaaaaa", parent_id=None, timestamp="t"
    )
    label = LabelEntry(id="bbbbbbbb", parent_id=None, timestamp="t", target_id="aaaaaaaa", label="x")
    assert read_last_cache_touch([_marker(10, n=1), other, label]) == 10
    assert read_last_cache_touch([]) is None


def test_marker_kept_as_unknown_entry_still_counts() -> None:
    raw = {"type": "custom", "customType": CACHE_TTL_CUSTOM_TYPE, "data": {"timestamp": 77}, "extra": 1}
    assert read_last_cache_touch([UnknownEntry(raw)]) == 77


def test_expiry_gate() -> None:
    assert not is_cache_ttl_expired(None, ttl_ms=1, now_ms=10)
    assert not is_cache_ttl_expired(0, ttl_ms=1, now_ms=10)
    assert not is_cache_ttl_expired(5, ttl_ms=0, now_ms=10)
    assert not is_cache_ttl_expired(5, ttl_ms=6, now_ms=10)
    assert is_cache_ttl_expired(5, ttl_ms=5, now_ms=10)


def test_built_entry_has_openclaws_shape_and_reads_back() -> None:
    entry = build_cache_ttl_entry(
        entry_id="0a1b2c3d",
        parent_id="ffffffff",
        timestamp_ms=1_767_225_600_123,
        provider="anthropic",
        model_id="m",
    )
    raw = entry_to_builtins(entry)
    assert raw == {
        "type": "custom",
        "customType": "openclaw.cache-ttl",
        "data": {"timestamp": 1_767_225_600_123, "provider": "anthropic", "modelId": "m"},
        "id": "0a1b2c3d",
        "parentId": "ffffffff",
        "timestamp": "2026-01-01T00:00:00.123Z",
    }
    again = entry_from_json(json.loads(json.dumps(raw)))
    assert read_last_cache_touch([again], provider="anthropic", model_id="m") == 1_767_225_600_123
    assert cache_ttl_marker_data(timestamp_ms=1, provider=None, model_id=None) == {"timestamp": 1}


@pytest.mark.parametrize(
    ("provider", "model", "api", "eligible"),
    [
        ("anthropic", "claude-sonnet-4-5", "anthropic-messages", True),
        ("Anthropic-Vertex", "x", None, True),
        ("amazon-bedrock", "us.anthropic.claude-3-7-sonnet", "bedrock-converse-stream", True),
        ("amazon-bedrock", "meta.llama3", "anthropic-messages", False),
        (
            "amazon-bedrock",
            "arn:aws:bedrock:us-east-1:1:application-inference-profile/claude-x",
            "bedrock-converse-stream",
            True,
        ),
        ("minimax", "MiniMax-M2", "anthropic-messages", True),
        ("kilocode", "anthropic/claude-opus-4", "openai-completions", True),
        ("kilocode", "openai/gpt-5", "openai-completions", False),
        ("google", "gemini-2.5-pro", "google-generative-ai", True),
        ("google", "gemini-3-flash", "google-generative-ai", True),
        ("google", "gemini-2.0-flash", "google-generative-ai", False),
        ("google", "gemini-2.5-pro", "google-gemini-cli", False),
        ("openai", "gpt-5", "openai-responses", False),
        (None, None, None, False),
    ],
)
def test_cache_ttl_eligibility(
    provider: str | None, model: str | None, api: str | None, eligible: bool
) -> None:
    assert is_cache_ttl_eligible_provider(provider, model, api) is eligible
