"""Session keys and transcript names (OpenClaw spec §1.1, §4.1)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionkeeper.exceptions import UnsafePathError
from sessionkeeper.store._entry_shape import is_safe_store_session_id as is_safe_session_id
from sessionkeeper.store._keys import (
    GLOBAL_SESSION_KEY,
    build_cron_run_session_key,
    build_cron_session_key,
    build_direct_session_key,
    build_group_session_key,
    build_heartbeat_session_key,
    build_hook_session_key,
    build_main_session_key,
    build_model_run_session_key,
    build_subagent_session_key,
    build_thread_session_key,
    build_topic_session_key,
    is_cron_run_session_key,
    is_cron_session_key,
    is_main_session_key,
    is_model_run_session_key,
    is_protected_session_entry,
    is_synthetic_session_key,
    is_telegram_topic_session_key,
    normalize_session_key,
    parse_agent_session_key,
    parse_cron_run_job_id,
    parse_thread_suffix,
    transcript_file_name,
    validate_session_id,
)
from sessionkeeper.store._paths import normalize_agent_id


def test_main_key_defaults_and_normalisation():
    assert build_main_session_key() == "agent:main:main"
    assert build_main_session_key("Ops Team", main_key="Work") == "agent:ops-team:work"
    assert build_main_session_key("", main_key="") == "agent:main:main"
    assert GLOBAL_SESSION_KEY == "global"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("main", "main"),
        ("Research", "research"),
        ("  ", "main"),
        ("--weird id!!--", "weird-id"),
        ("é", "main"),
        ("a" * 80, "a" * 64),
        ("x" * 70 + "!", "x" * 64),
    ],
)
def test_normalize_agent_id(raw, expected):
    assert normalize_agent_id(raw) == expected


def test_direct_keys_per_dm_scope():
    common = {"peer_id": "Bob42", "channel": "Telegram", "account_id": "Acct"}
    assert build_direct_session_key("main", dm_scope="main", **common) == "agent:main:main"
    assert build_direct_session_key("main", dm_scope="per-peer", **common) == "agent:main:direct:bob42"
    assert build_direct_session_key("main", dm_scope="per-channel-peer", **common) == (
        "agent:main:telegram:direct:bob42"
    )
    assert build_direct_session_key("main", dm_scope="per-account-channel-peer", **common) == (
        "agent:main:telegram:acct:direct:bob42"
    )
    # an empty peer falls back to the main key
    assert build_direct_session_key("main", peer_id=" ", dm_scope="per-peer") == "agent:main:main"


def test_identity_links_map_peers_except_under_main_scope():
    links = {"alice": ["telegram:111", "222"]}
    assert build_direct_session_key(
        peer_id="111", channel="telegram", dm_scope="per-peer", identity_links=links
    ) == ("agent:main:direct:alice")
    assert build_direct_session_key(
        peer_id="222", channel="discord", dm_scope="per-peer", identity_links=links
    ) == ("agent:main:direct:alice")
    assert build_direct_session_key(peer_id="333", dm_scope="per-peer", identity_links=links) == (
        "agent:main:direct:333"
    )
    assert (
        build_direct_session_key(peer_id="111", channel="telegram", identity_links=links) == "agent:main:main"
    )


def test_group_channel_room_thread_topic_keys():
    assert (
        build_group_session_key(channel="Telegram", group_id="-100ABC") == "agent:main:telegram:group:-100abc"
    )
    assert build_group_session_key(channel="discord", group_id="123", kind="channel") == (
        "agent:main:discord:channel:123"
    )
    assert (
        build_group_session_key(channel="matrix", group_id="!RoomX", kind="room")
        == "agent:main:matrix:room:!roomx"
    )
    # case-preserving peer ids: Signal groups, Matrix channel/group
    assert build_group_session_key(channel="signal", group_id="AbC=") == "agent:main:signal:group:AbC="
    assert build_group_session_key(channel="matrix", group_id="!RoomX", kind="group") == (
        "agent:main:matrix:group:!RoomX"
    )
    with pytest.raises(ValueError):
        build_group_session_key(channel="x", group_id="1", kind="direct")  # type: ignore[arg-type]
    base = "agent:main:slack:channel:c1"
    assert build_thread_session_key(base, "TS.171") == f"{base}:thread:ts.171"
    assert build_thread_session_key(base, "  ") == base
    assert (
        build_topic_session_key("agent:main:telegram:group:-100", 42)
        == "agent:main:telegram:group:-100:topic:42"
    )


def test_synthetic_keys():
    run = uuid.UUID("12345678-1234-4234-9234-123456789abc")
    assert build_cron_session_key("nightly") == "cron:nightly"
    assert build_cron_session_key("nightly", agent_id="Main") == "agent:main:cron:nightly"
    assert (
        build_cron_run_session_key("main", job_id="nightly", run_id="r1") == "agent:main:cron:nightly:run:r1"
    )
    assert build_hook_session_key("abc") == "hook:abc"
    assert build_hook_session_key().startswith("hook:")
    assert build_subagent_session_key("main", subagent_id="s1") == "agent:main:subagent:s1"
    assert build_heartbeat_session_key("agent:main:main") == "agent:main:main:heartbeat"
    assert build_model_run_session_key("main", run_id=run) == f"agent:main:explicit:model-run-{run}"
    for bad in ("", "a:b"):
        with pytest.raises(ValueError):
            build_cron_session_key(bad)
    with pytest.raises(ValueError):
        build_model_run_session_key(run_id="not-a-uuid")


def test_parse_agent_session_key():
    parsed = parse_agent_session_key("Agent:Main:Telegram:Group:X")
    assert parsed is not None
    assert (parsed.agent_id, parsed.rest) == ("main", "telegram:group:x")
    for not_agent in ("cron:nightly", "global", "agent:main", "agent::x", "hook:1"):
        assert parse_agent_session_key(not_agent) is None


def test_normalize_session_key_preserves_opaque_peer_ids():
    assert normalize_session_key(" Agent:Main:Slack:Direct:U1 ") == "agent:main:slack:direct:u1"
    assert normalize_session_key("agent:main:signal:group:AbC") == "agent:main:signal:group:AbC"
    assert normalize_session_key("agent:main:matrix:channel:!Room:Srv:thread:T1") == (
        "agent:main:matrix:channel:!Room:Srv:thread:T1"
    )
    assert normalize_session_key("Matrix:Group:!X") == "matrix:group:!X"


def test_cron_and_model_run_predicates():
    assert is_cron_session_key("agent:main:cron:nightly")
    assert not is_cron_session_key("cron:nightly")  # needs the agent scope, as OpenClaw's parser does
    assert is_cron_run_session_key("agent:main:cron:nightly:run:abc")
    assert parse_cron_run_job_id("agent:main:cron:nightly:run:abc") == "nightly"
    assert parse_cron_run_job_id("agent:main:cron:nightly") is None
    assert is_model_run_session_key("agent:main:explicit:model-run-12345678-1234-1234-1234-123456789abc")
    assert is_model_run_session_key("AGENT:Main:explicit:model-run-12345678-1234-1234-1234-123456789ABC")
    assert not is_model_run_session_key("agent:main:explicit:model-run-123")
    assert not is_model_run_session_key("agent:main:explicit:other-12345678-1234-1234-1234-123456789abc")


@pytest.mark.parametrize(
    ("key", "synthetic"),
    [
        ("agent:main:subagent:x", True),
        ("subagent:x", True),
        ("agent:main:acp:x", True),
        ("agent:main:cron:job", True),
        ("agent:main:acp-bridge:x", True),
        ("agent:main:hook:1", True),
        ("hook:1", True),
        ("agent:main:node:mac", True),
        ("heartbeat", True),
        ("agent:main:main:heartbeat", True),
        ("agent:main:x:heartbeat:y", True),
        ("agent:main:main", False),
        ("cron:nightly", False),
        ("agent:main:telegram:group:1", False),
    ],
)
def test_synthetic_classification(key, synthetic):
    assert is_synthetic_session_key(key) is synthetic


@pytest.mark.parametrize(
    ("key", "entry", "protected"),
    [
        ("agent:main:slack:channel:c1:thread:171", {}, True),
        ("agent:main:main:thread:abc", {}, True),
        ("agent:main:telegram:group:-100:topic:7", {}, True),
        ("agent:main:telegram:group:-100", {}, True),
        ("agent:main:discord:channel:123", {}, True),
        ("agent:main:imessage:direct:1", {"chatType": "group"}, True),
        ("agent:main:imessage:direct:1", {"origin": {"chatType": "Channel"}}, True),
        ("agent:main:imessage:direct:1", {"chatType": "direct"}, False),
        ("agent:main:hook:1", {"chatType": "group"}, False),  # synthetic keys are never protected
        ("agent:main:subagent:a:thread:1", {}, False),
    ],
)
def test_protected_entries(key, entry, protected):
    assert is_protected_session_entry(key, entry) is protected


def test_thread_suffix_and_topic_detection():
    assert parse_thread_suffix("agent:main:x:THREAD:42") == ("agent:main:x", "42")
    assert parse_thread_suffix("agent:main:x") == ("agent:main:x", None)
    assert is_telegram_topic_session_key("agent:main:telegram:dm:1:topic:9")
    assert not is_telegram_topic_session_key("agent:main:slack:group:1:topic:9")


def test_main_key_detection():
    assert is_main_session_key("agent:main:main")
    assert is_main_session_key("agent:ops:main")
    assert not is_main_session_key("agent:main:main:thread:1")
    assert is_main_session_key("agent:main:work", main_key="work")


def test_session_id_checks():
    assert validate_session_id(" Abc-1.2_3 ") == "Abc-1.2_3"
    for bad in (
        "../escape",
        "a/b",
        "",
        ".hidden",
        "a" * 129,
        "x.checkpoint.12345678-1234-4234-9234-123456789abc",
    ):
        with pytest.raises(UnsafePathError):
            validate_session_id(bad)
    assert is_safe_session_id("a:b@c")
    for bad in ("../escape", "a\\b", ".", "..", "", "-x", 5, "a" * 256):
        assert not is_safe_session_id(bad)


def test_transcript_names_and_topic_encoding():
    assert transcript_file_name("s1") == "s1.jsonl"
    assert transcript_file_name("s1", topic_id=42) == "s1-topic-42.jsonl"
    assert transcript_file_name("s1", topic_id="a/b c") == "s1-topic-a%2Fb%20c.jsonl"
    assert transcript_file_name("s1", topic_id="..") == "s1-topic-...jsonl"
    for bad in ("\ud800", ""):
        with pytest.raises(UnsafePathError):
            transcript_file_name("s1", topic_id=bad)
    with pytest.raises(UnsafePathError):
        transcript_file_name("../x")


@given(st.text(min_size=1, max_size=40))
def test_no_topic_id_escapes_the_directory(topic):
    try:
        name = transcript_file_name("s1", topic_id=topic)
    except UnsafePathError:
        return
    assert "/" not in name
    assert "\\" not in name
    assert "\0" not in name
    assert name.startswith("s1-topic-")
    assert name.endswith(".jsonl")


@given(st.text(max_size=40))
def test_validated_session_ids_are_single_path_components(value):
    try:
        safe = validate_session_id(value)
    except UnsafePathError:
        return
    assert "/" not in safe
    assert safe not in {".", ".."}
    assert Path(safe).name == safe


@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30))
def test_normalization_is_idempotent(key):
    once = normalize_session_key(key)
    assert normalize_session_key(once) == once
