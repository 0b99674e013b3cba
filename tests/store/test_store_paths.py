"""Store layout helpers: agent ids, transcript names, topic threads, escapes refused (OpenClaw §1.1, §2.4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionkeeper.exceptions import UnsafePathError
from sessionkeeper.store import (
    agent_sessions_dir,
    archive_name,
    archive_stamp,
    encode_thread_id,
    normalize_agent_id,
    resolve_session_file,
    transcript_path,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, "main"),
        ("", "main"),
        ("  ", "main"),
        ("Main", "main"),
        ("ops_bot-2", "ops_bot-2"),
        ("My Agent!", "my-agent"),
        ("--weird--", "weird"),
        ("../../etc", "etc"),
        ("日本", "main"),
        ("a" * 70, "a" * 64),
        ("x y" + "z" * 70, ("x-y" + "z" * 70)[:64]),
    ],
)
def test_normalize_agent_id(raw: str | None, expected: str) -> None:
    assert normalize_agent_id(raw) == expected


@given(st.text(max_size=80))
def test_normalized_agent_ids_are_always_safe(raw: str) -> None:
    agent = normalize_agent_id(raw)
    assert 1 <= len(agent) <= 64
    assert all(c in "abcdefghijklmnopqrstuvwxyz0123456789_-" for c in agent)


def test_agent_sessions_dir() -> None:
    assert agent_sessions_dir("/state", "Ops") == Path("/state/agents/ops/sessions")
    assert agent_sessions_dir("/state") == Path("/state/agents/main/sessions")


def test_transcript_paths(tmp_path: Path) -> None:
    assert transcript_path(tmp_path, "abc-123") == tmp_path / "abc-123.jsonl"
    assert transcript_path(tmp_path, "abc", thread_id=42) == tmp_path / "abc-topic-42.jsonl"
    assert transcript_path(tmp_path, "abc", thread_id="a/b c") == tmp_path / "abc-topic-a%2Fb%20c.jsonl"
    assert transcript_path(tmp_path, "abc", thread_id="..") == tmp_path / "abc-topic-...jsonl"


def test_encode_thread_id_matches_encode_uri_component() -> None:
    # encodeURIComponent leaves A-Z a-z 0-9 - _ . ! ~ * ' ( ) and escapes the rest as UTF-8
    assert encode_thread_id("-_.!~*'()") == "-_.!~*'()"
    assert encode_thread_id("a b/c?d#é") == "a%20b%2Fc%3Fd%23%C3%A9"
    with pytest.raises(UnsafePathError):
        encode_thread_id("\ud800")
    with pytest.raises(UnsafePathError):
        encode_thread_id("")


@pytest.mark.parametrize("session_id", ["../escape", "a/b", "..", "", "a:b", "x" * 129, "a\0b", "-x"])
def test_unsafe_session_ids_are_refused(tmp_path: Path, session_id: str) -> None:
    with pytest.raises(UnsafePathError):
        transcript_path(tmp_path, session_id)


@given(st.text(max_size=20), st.one_of(st.none(), st.text(max_size=20), st.integers()))
def test_transcript_path_never_leaves_the_directory(session_id: str, thread_id: str | int | None) -> None:
    base = Path("/srv/state/agents/main/sessions")
    try:
        path = transcript_path(base, session_id, thread_id=thread_id)
    except UnsafePathError:
        return
    assert path.parent == base
    assert path.name.endswith(".jsonl")


def test_resolve_session_file(tmp_path: Path) -> None:
    sessions = tmp_path / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    assert resolve_session_file(sessions, "x.jsonl") == sessions.resolve() / "x.jsonl"
    assert resolve_session_file(sessions, str(sessions / "y.jsonl")) == sessions.resolve() / "y.jsonl"
    sibling = tmp_path / "agents" / "ops" / "sessions" / "z.jsonl"
    assert resolve_session_file(sessions, str(sibling)) == sibling.resolve()
    for bad in [
        "../../../etc/passwd",
        "/etc/passwd",
        str(tmp_path / "agents" / "ops" / "z.jsonl"),
        "",
        "a\0b",
    ]:
        with pytest.raises(UnsafePathError, match="within sessions directory"):
            resolve_session_file(sessions, bad)


def test_resolve_session_file_follows_symlinks(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    (sessions / "link.jsonl").symlink_to(tmp_path / "outside.jsonl")
    with pytest.raises(UnsafePathError):
        resolve_session_file(sessions, "link.jsonl")


def test_archive_names_match_the_samples() -> None:
    # 2026-09-01T02:36:20.208Z -> the stamp of "250bf19f-....jsonl.reset.2026-09-01T02-36-20.208Z"
    assert archive_stamp(1788230180208) == "2026-09-01T02-36-20.208Z"
    assert archive_name(Path("/d/s.jsonl"), "reset", 1788230180208) == Path(
        "/d/s.jsonl.reset.2026-09-01T02-36-20.208Z"
    )
    assert archive_stamp(0) == "1970-01-01T00-00-00.000Z"
