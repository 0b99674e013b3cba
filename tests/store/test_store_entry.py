"""SessionEntry: typed fields, unknown fields kept, OpenClaw merge (§1.3), load-time shape check (§1.4)."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec import UNSET

from sessionkeeper.exceptions import InvalidSessionEntryError, StoreError
from sessionkeeper.store import (
    SessionEntry,
    encode_session_entry,
    is_safe_store_session_id,
    is_valid_transcript_session_id,
    merge_session_entry,
    normalize_persisted_entry,
    rewrite_session_file_for_new_session_id,
    session_entry_from_dict,
    session_entry_to_dict,
)


NOW = 1_790_000_000_000


def test_fields_are_camel_case_on_disk_and_absent_when_unset() -> None:
    entry = SessionEntry(session_id="abc", updated_at=5, total_tokens_fresh=False, estimated_cost_usd=0.5)
    assert json.loads(encode_session_entry(entry)) == {
        "sessionId": "abc",
        "updatedAt": 5,
        "totalTokensFresh": False,
        "estimatedCostUsd": 0.5,
    }


def test_unknown_and_mistyped_fields_survive_a_round_trip() -> None:
    raw = {
        "sessionId": "abc",
        "updatedAt": 1,
        "compactionCount": "three",
        "heartbeatIsolated": True,
        "future": {"a": [1, None]},
    }
    entry = session_entry_from_dict(raw)
    assert entry.compaction_count is UNSET
    assert entry.extra == {"compactionCount": "three", "heartbeatIsolated": True, "future": {"a": [1, None]}}
    assert session_entry_to_dict(entry) == raw
    assert entry.get("heartbeatIsolated") is True
    assert entry.get("sessionId") == "abc"
    assert entry.get("nope", 7) == 7


def test_integral_floats_in_integer_fields_are_ints() -> None:
    entry = session_entry_from_dict({"sessionId": "a", "updatedAt": 1700000000000.0})
    assert entry.updated_at == 1700000000000
    assert isinstance(entry.updated_at, int)


def test_non_object_is_a_typed_error() -> None:
    with pytest.raises(InvalidSessionEntryError) as info:
        session_entry_from_dict([1, 2])  # type: ignore[arg-type]
    assert isinstance(info.value, StoreError)
    assert isinstance(info.value, ValueError)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=10,
)
field_names = st.sampled_from(
    ["sessionId", "updatedAt", "label", "compactionCount", "origin", "chatType", "model", "lastThreadId"]
) | st.text(min_size=1, max_size=10)


@given(st.dictionaries(field_names, json_values, max_size=8))
def test_any_json_object_round_trips_unchanged(raw: dict) -> None:
    entry = session_entry_from_dict(raw)
    assert session_entry_to_dict(entry) == raw
    assert msgspec.json.decode(encode_session_entry(entry)) == raw


# ------------------------------------------------------------------------------------------- merge


def test_merge_new_entry_gets_id_updated_at_and_started_at() -> None:
    entry = merge_session_entry(None, {"label": "x"}, now_ms=NOW, new_session_id=lambda: "fresh")
    assert (entry.session_id, entry.updated_at, entry.session_started_at) == ("fresh", NOW, NOW)
    assert entry.label == "x"


def test_merge_new_entry_keeps_patch_started_at() -> None:
    entry = merge_session_entry(None, {"session_started_at": 5}, now_ms=NOW)
    assert entry.session_started_at == 5


def test_merge_session_id_prefers_patch_then_existing() -> None:
    existing = SessionEntry(session_id="old", updated_at=1, session_started_at=1)
    assert merge_session_entry(existing, {"label": "l"}, now_ms=NOW).session_id == "old"
    assert merge_session_entry(existing, {"sessionId": "new"}, now_ms=NOW).session_id == "new"


def test_merge_updated_at_is_clamped_to_now() -> None:
    existing = SessionEntry(session_id="s", updated_at=NOW + 10_000)
    assert merge_session_entry(existing, {"updated_at": NOW + 99}, now_ms=NOW).updated_at == NOW
    assert merge_session_entry(existing, {"updated_at": -5}, now_ms=NOW).updated_at == NOW


def test_merge_preserve_activity_keeps_existing_updated_at() -> None:
    existing = SessionEntry(session_id="s", updated_at=100)
    merged = merge_session_entry(existing, {"label": "x"}, now_ms=NOW, preserve_activity=True)
    assert merged.updated_at == 100
    future = SessionEntry(session_id="s", updated_at=NOW + 5)
    assert merge_session_entry(future, {}, now_ms=NOW, preserve_activity=True).updated_at == NOW
    no_ts = SessionEntry(session_id="s")
    assert merge_session_entry(no_ts, {"updated_at": 42}, now_ms=NOW, preserve_activity=True).updated_at == 42
    assert merge_session_entry(no_ts, {}, now_ms=NOW, preserve_activity=True).updated_at == NOW
    # a new entry is activity even with preserve_activity
    assert merge_session_entry(None, {}, now_ms=NOW, preserve_activity=True).updated_at == NOW


def test_merge_started_at_kept_for_same_id_and_reset_for_new_id() -> None:
    existing = SessionEntry(session_id="s", updated_at=1, session_started_at=7)
    assert merge_session_entry(existing, {"label": "x"}, now_ms=NOW).session_started_at == 7
    assert merge_session_entry(existing, {"session_id": "t"}, now_ms=NOW).session_started_at == NOW
    assert (
        merge_session_entry(
            existing, {"session_id": "t", "session_started_at": 9}, now_ms=NOW
        ).session_started_at
        == 9
    )
    without = SessionEntry(session_id="s", updated_at=1)
    assert merge_session_entry(without, {}, now_ms=NOW).session_started_at is UNSET


@pytest.mark.parametrize(
    ("session_file", "expected"),
    [
        ("/x/sessions/old.jsonl", "/x/sessions/new.jsonl"),
        ("old.jsonl", "new.jsonl"),
        ("/x/old-topic-42%2F1.jsonl", "/x/new-topic-42%2F1.jsonl"),
        ("/x/2026-09-20T14-13-48-902Z_old.jsonl", "/x/2026-09-20T14-13-48-902Z_new.jsonl"),
        ("/x/other.jsonl", "/x/other.jsonl"),
        ("/x/old.txt", "/x/old.txt"),
    ],
)
def test_merge_rewrites_session_file_when_id_changes(session_file: str, expected: str) -> None:
    existing = SessionEntry(session_id="old", updated_at=1, session_file=session_file)
    assert merge_session_entry(existing, {"session_id": "new"}, now_ms=NOW).session_file == expected
    # unchanged id: never rewritten
    assert merge_session_entry(existing, {"label": "x"}, now_ms=NOW).session_file == session_file


def test_merge_rewrites_patch_session_file_too() -> None:
    existing = SessionEntry(session_id="old", updated_at=1, session_file="/a/old.jsonl")
    merged = merge_session_entry(existing, {"session_id": "new", "session_file": "/b/old.jsonl"}, now_ms=NOW)
    assert merged.session_file == "/b/new.jsonl"


def test_rewrite_helper_normalises_like_node_path_join() -> None:
    assert (
        rewrite_session_file_for_new_session_id(
            " ./a//old.jsonl ", previous_session_id="old", next_session_id="n"
        )
        == "a/n.jsonl"
    )
    assert rewrite_session_file_for_new_session_id(5, previous_session_id="old", next_session_id="n") is None


def test_merge_model_change_without_provider_drops_provider() -> None:
    existing = SessionEntry(session_id="s", updated_at=1, model="a", model_provider="p")
    assert merge_session_entry(existing, {"model": "b"}, now_ms=NOW).model_provider is UNSET
    assert merge_session_entry(existing, {"model": "a"}, now_ms=NOW).model_provider == "p"
    both = merge_session_entry(existing, {"model": "b", "model_provider": "q"}, now_ms=NOW)
    assert (both.model, both.model_provider) == ("b", "q")


def test_merge_normalises_blank_model_fields() -> None:
    existing = SessionEntry(session_id="s", updated_at=1, model="a", model_provider="p")
    blank = merge_session_entry(existing, {"model": "  "}, now_ms=NOW)
    assert blank.model is UNSET
    assert blank.model_provider is UNSET
    trimmed = merge_session_entry(existing, {"model": " b ", "model_provider": " q "}, now_ms=NOW)
    assert (trimmed.model, trimmed.model_provider) == ("b", "q")
    blank_provider = merge_session_entry(existing, {"model_provider": ""}, now_ms=NOW)
    assert (blank_provider.model, blank_provider.model_provider) == ("a", UNSET)


def test_merge_unset_removes_a_field_and_unknown_keys_pass_through() -> None:
    existing = session_entry_from_dict({"sessionId": "s", "updatedAt": 1, "label": "x", "future": 1})
    merged = merge_session_entry(existing, {"label": UNSET, "otherFuture": [1]}, now_ms=NOW)
    assert merged.label is UNSET
    assert merged.extra == {"future": 1, "otherFuture": [1]}
    replaced = merge_session_entry(existing, {"future": UNSET}, now_ms=NOW)
    assert "future" not in replaced.extra


def test_merge_typed_value_replaces_a_mistyped_stored_one() -> None:
    existing = session_entry_from_dict({"sessionId": "s", "updatedAt": 1, "compactionCount": "bad"})
    merged = merge_session_entry(existing, {"compaction_count": 2}, now_ms=NOW)
    assert merged.compaction_count == 2
    assert session_entry_to_dict(merged)["compactionCount"] == 2


def test_merge_rejects_a_non_string_key() -> None:
    with pytest.raises(InvalidSessionEntryError):
        merge_session_entry(None, {1: "x"}, now_ms=NOW)  # type: ignore[dict-item]


@given(st.integers(0, 2 * NOW), st.one_of(st.none(), st.integers(-5, 2 * NOW)), st.integers(0, 2 * NOW))
def test_merge_updated_at_never_exceeds_now(existing_ts: int, patch_ts: int | None, now: int) -> None:
    existing = SessionEntry(session_id="s", updated_at=existing_ts)
    patch = {} if patch_ts is None else {"updated_at": patch_ts}
    merged = merge_session_entry(existing, patch, now_ms=now)
    assert merged.updated_at == now
    kept = merge_session_entry(existing, patch, now_ms=now, preserve_activity=True)
    assert kept.updated_at == min(existing_ts, now)


# ------------------------------------------------------------------------------- load shape check


@pytest.mark.parametrize(
    ("session_id", "safe"),
    [
        ("83d0060e-33c7-40bc-9587-56bcb0b97954", True),
        ("a:b@c.d", True),
        ("../escape", False),
        ("a/b", False),
        ("a\\b", False),
        ("..", False),
        ("", False),
        ("-lead", False),
        ("x" * 256, False),
        (" padded ", True),
        (5, False),
    ],
)
def test_store_session_id_safety(session_id: object, safe: bool) -> None:
    assert is_safe_store_session_id(session_id) is safe


def test_transcript_session_id_validation() -> None:
    assert is_valid_transcript_session_id("83d0060e-33c7-40bc-9587-56bcb0b97954")
    assert not is_valid_transcript_session_id("a:b")
    assert not is_valid_transcript_session_id("x" * 129)
    assert not is_valid_transcript_session_id("s.checkpoint.12345678-1234-4234-8234-123456789012")


def test_shape_check_drops_unsafe_ids_and_non_objects() -> None:
    assert normalize_persisted_entry({"sessionId": "../escape", "updatedAt": 1}) is None
    assert normalize_persisted_entry({"sessionId": None}) is None
    assert normalize_persisted_entry([1]) is None


def test_shape_check_removes_non_transcript_id_without_session_file() -> None:
    assert normalize_persisted_entry({"sessionId": "a:b", "updatedAt": 1}) == {"updatedAt": 1}
    kept = {"sessionId": "a:b", "sessionFile": "x.jsonl", "updatedAt": 1}
    assert normalize_persisted_entry(kept) == kept
    assert normalize_persisted_entry({"sessionId": " ab "}) == {"sessionId": "ab"}


def test_shape_check_fixes_updated_at_and_session_file() -> None:
    assert normalize_persisted_entry({"sessionId": "a", "updatedAt": "x"}) == {
        "sessionId": "a",
        "updatedAt": 0,
    }
    assert normalize_persisted_entry({"sessionId": "a", "updatedAt": -1}) == {
        "sessionId": "a",
        "updatedAt": 0,
    }
    assert normalize_persisted_entry({"sessionId": "a"}) == {"sessionId": "a"}
    assert normalize_persisted_entry({"sessionId": "a", "sessionFile": 3}) == {"sessionId": "a"}


def test_shape_check_migrates_legacy_fields() -> None:
    raw = {"sessionId": "a", "provider": "telegram", "lastProvider": "slack", "room": "#r"}
    assert normalize_persisted_entry(raw) == {
        "sessionId": "a",
        "channel": "telegram",
        "lastChannel": "slack",
        "groupChannel": "#r",
    }
    both = {"sessionId": "a", "groupChannel": "#g", "room": "#r", "channel": "c", "provider": "p"}
    assert normalize_persisted_entry(both) == {
        "sessionId": "a",
        "groupChannel": "#g",
        "channel": "c",
        "provider": "p",
    }


def test_shape_check_model_fields_and_skills_cache() -> None:
    assert normalize_persisted_entry({"sessionId": "a", "modelProvider": "p"}) == {"sessionId": "a"}
    assert normalize_persisted_entry({"sessionId": "a", "model": " m ", "modelProvider": " "}) == {
        "sessionId": "a",
        "model": "m",
    }
    raw = {"sessionId": "a", "skillsSnapshot": {"prompt": "p", "resolvedSkills": [1]}}
    assert normalize_persisted_entry(raw) == {"sessionId": "a", "skillsSnapshot": {"prompt": "p"}}
    untouched = {"sessionId": "a", "updatedAt": 3}
    assert normalize_persisted_entry(untouched) is untouched
