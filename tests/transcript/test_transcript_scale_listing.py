"""Session listing from headers and tails (pi-format spec §1 listing, §8 item 5), checked against pi."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests import _pi_oracle
from tests._helpers import header_obj, json_line
from tests._pi_oracle import PiOracle

from sessionkeeper.transcript import load_transcript
from sessionkeeper.transcript.file._listing import alist_transcripts, list_transcripts, read_transcript_info


pi_oracle = _pi_oracle.pi_oracle  # the session-scoped fixture, made visible to this module
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
TS = "2026-01-01T00:00:00.000Z"


def _message(eid: str, role: str, stamp: Any, *, text: str = "t", entry_ts: str = TS) -> bytes:
    message: dict[str, Any] = {"role": role, "content": text}
    if stamp is not None:
        message["timestamp"] = stamp
    return json_line(
        {"type": "message", "id": eid, "parentId": None, "timestamp": entry_ts, "message": message}, end=b"\n"
    )


def _info(eid: str, name: Any) -> bytes:
    return json_line(
        {"type": "session_info", "id": eid, "parentId": None, "timestamp": TS, "name": name}, end=b"\n"
    )


def test_header_fields_name_count_and_modified(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(
        json_line(header_obj(sid="s1", parentSession="/x/p.jsonl"), end=b"\n")
        + _info("i1", "  First  ")
        + _message("m1", "user", 1_000)
        + _message("m2", "assistant", 5_000)
        + _message("m3", "toolResult", 9_000)  # not user/assistant: no activity
        + _info("i2", " Second ")
    )
    info = read_transcript_info(path)
    assert info is not None
    assert (info.id, info.cwd, info.created, info.parent_session) == ("s1", "/w", TS, "/x/p.jsonl")
    assert info.name == "Second"
    assert info.message_count == 3
    assert info.modified_ms == 5_000
    assert info.size == path.stat().st_size
    assert info.to_json()["parentSessionPath"] == "/x/p.jsonl"


def test_cleared_name_entry_timestamp_and_header_fallbacks(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(
        json_line(header_obj(sid="s1"), end=b"\n")
        + _info("i1", "N")
        + _info("i2", "   ")
        + _message("m", "user", None, entry_ts="2026-01-02T00:00:00.000Z")
    )
    info = read_transcript_info(path)
    assert info is not None
    assert info.name is None  # the latest session_info clears the name
    assert info.modified_ms == 1767312000000  # the entry's ISO timestamp
    path.write_bytes(json_line(header_obj(sid="s1"), end=b"\n"))
    info = read_transcript_info(path)
    assert info is not None
    assert info.modified_ms == 1767225600000  # header timestamp
    assert info.message_count == 0
    path.write_bytes(
        json_line({"type": "session", "version": 3, "id": "s", "timestamp": "bad", "cwd": 3}, end=b"\n")
    )
    os.utime(path, ns=(0, 123_000_000))
    info = read_transcript_info(path)
    assert info is not None
    assert info.modified_ms == 123.0
    assert info.cwd == ""


def test_big_file_reads_the_tail_and_finds_an_early_name(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    filler = b"".join(_message(f"f{i}", "user", i, text="x" * 1000) for i in range(3000))
    decoy = json_line(
        {"type": "custom", "id": "c", "parentId": None, "timestamp": TS, "customType": "session_info"},
        end=b"\n",
    )
    path.write_bytes(
        json_line(header_obj(sid="s1"), end=b"\n") + _info("i1", "Early") + filler + decoy + filler
    )
    info = read_transcript_info(path)
    assert info is not None
    assert info.name == "Early"
    assert info.message_count is None  # counting would read the whole file
    assert info.modified_ms == 2999


def test_listing_skips_non_transcripts_and_sorts_newest_first(tmp_path: Path) -> None:
    (tmp_path / "old.jsonl").write_bytes(json_line(header_obj("old"), end=b"\n") + _message("m", "user", 10))
    (tmp_path / "new.jsonl").write_bytes(json_line(header_obj("new"), end=b"\n") + _message("m", "user", 20))
    (tmp_path / "not-a-transcript.jsonl").write_bytes(json_line({"type": "message", "id": "x"}, end=b"\n"))
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "other.txt").write_bytes(json_line(header_obj("txt"), end=b"\n"))
    (tmp_path / "dir.jsonl").mkdir()
    assert [i.id for i in list_transcripts(tmp_path)] == ["new", "old"]
    assert list_transcripts(tmp_path / "missing") == []


@pytest.mark.anyio
async def test_async_listing(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_bytes(json_line(header_obj("a"), end=b"\n"))
    assert [i.id for i in await alist_transcripts(tmp_path)] == ["a"]


def _pi_list(oracle: PiOracle, folder: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        [oracle.node, str(BENCHMARKS / "pi_list.mjs"), str(oracle.root), str(folder)],
        capture_output=True,
        check=True,
        timeout=120,
    )
    return json.loads(out.stdout)["sessions"]  # type: ignore[no-any-return]


def _ours(folder: Path) -> list[dict[str, Any]]:
    return [
        {
            "path": str(i.path),
            "id": i.id,
            "cwd": i.cwd,
            "name": i.name,
            "parentSessionPath": i.parent_session,
            "modified": i.modified_ms,
            "messageCount": i.message_count,
        }
        for i in list_transcripts(folder)
    ]


@pytest.mark.oracle
def test_listing_matches_pi_on_the_samples(
    pi_oracle: PiOracle, tmp_path: Path, pi_samples: Path, openclaw_samples: Path
) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    for source in [
        *pi_samples.glob("*.jsonl"),
        *(openclaw_samples / "small").glob("*.jsonl"),
        *(openclaw_samples / "medium").glob("*.jsonl"),
    ]:
        if source.name.endswith(".trajectory.jsonl"):
            continue  # not transcripts: both sides skip them (checked below on one)
        shutil.copy(source, folder / source.name)
    theirs = {s["path"]: s for s in _pi_list(pi_oracle, folder)}
    ours = _ours(folder)
    assert len(ours) == len(theirs) > 100
    for mine in ours:
        pi = theirs[mine["path"]]
        for key in ("id", "cwd", "name", "parentSessionPath", "modified"):
            assert mine[key] == pi[key], (mine["path"], key)
        if mine["messageCount"] is not None:
            assert mine["messageCount"] == pi["messageCount"], mine["path"]
    # pi's order: modified descending (ties may differ)
    assert [m["modified"] for m in ours] == sorted((s["modified"] for s in theirs.values()), reverse=True)


def _reference(path: Path) -> tuple[str | None, int, float | None]:
    """Name, message count and last activity from the full loader (spec §8 item 5)."""
    index = load_transcript(path)
    activity = None
    for pos in range(len(index)):
        if index.kinds[pos] != "message":
            continue
        raw = json.loads(index.line_bytes(pos))
        message = raw.get("message")
        if (
            isinstance(message, dict)
            and message.get("role") in ("user", "assistant")
            and "content" in message
        ):
            stamp = message.get("timestamp")
            activity = float(stamp) if isinstance(stamp, int) else activity
    return index.session_name, index.kinds.count("message"), activity


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan=st.lists(
        st.tuples(
            st.sampled_from(["user", "assistant", "tool", "name", "decoy", "junk"]), st.integers(0, 40_000)
        ),
        max_size=25,
    )
)
def test_listing_equals_a_full_read_on_random_files(plan: list[tuple[str, int]]) -> None:
    parts = [json_line(header_obj(sid="s1"), end=b"\n")]
    for n, (kind, size) in enumerate(plan):
        if kind in ("user", "assistant"):
            parts.append(_message(f"e{n}", kind, n + 1, text="p" * size))
        elif kind == "tool":
            parts.append(_message(f"e{n}", "toolResult", n + 1, text="q" * size))
        elif kind == "name":
            parts.append(_info(f"e{n}", f" name {n} " if size % 3 else ""))
        elif kind == "decoy":
            parts.append(
                json_line(
                    {
                        "type": "custom",
                        "id": f"e{n}",
                        "parentId": None,
                        "timestamp": TS,
                        "customType": "session_info",
                        "data": "r" * size,
                    },
                    end=b"\n",
                )
            )
        else:
            parts.append(b"{junk " + b"z" * size + b"\n")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.jsonl"
        path.write_bytes(b"".join(parts))
        info = read_transcript_info(path)
        assert info is not None
        name, count, activity = _reference(path)
        assert info.name == name
        assert info.message_count in (None, count)
        if path.stat().st_size < 32 << 10:
            assert info.message_count == count
        assert info.modified_ms == (activity if activity else 1767225600000)
