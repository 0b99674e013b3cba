"""Listing: a transcript's ``modified`` is its newest message time, as pi computes it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from tests import _pi_oracle
from tests._helpers import json_line
from tests._pi_oracle import PiOracle

from sessionkeeper.transcript.file._listing import list_transcripts, read_transcript_info


pi_oracle = _pi_oracle.pi_oracle
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
HEADER_MS = 1767225600000  # 2026-01-01T00:00:00.000Z


def _session(path: Path, stamps: list[tuple[str, int]]) -> None:
    ts = "2026-01-01T00:00:00.000Z"
    lines = [
        json_line({"type": "session", "version": 3, "id": path.stem, "timestamp": ts, "cwd": "/w"}, end=b"\n")
    ]
    parent = None
    for n, (role, stamp) in enumerate(stamps):
        message = {"role": role, "content": [{"type": "text", "text": "t"}], "timestamp": stamp}
        lines.append(
            json_line(
                {"type": "message", "id": f"e{n}", "parentId": parent, "timestamp": ts, "message": message},
                end=b"\n",
            )
        )
        parent = f"e{n}"
    path.write_bytes(b"".join(lines))


def test_modified_is_the_newest_message_not_the_last(tmp_path: Path) -> None:
    # The README quickstart appends an AssistantMessage without a timestamp (0) after a user prompt
    # stamped now: pi's `modified` is the newest message (the prompt), ours fell back to the header.
    path = tmp_path / "quick.jsonl"
    _session(path, [("user", 1796043604614), ("assistant", 0)])
    info = read_transcript_info(path)
    assert info is not None
    assert info.modified_ms == 1796043604614
    _session(path, [("user", 9_000), ("assistant", 5_000), ("user", 7_000)])
    info = read_transcript_info(path)
    assert info is not None and info.modified_ms == 9_000
    _session(path, [("user", 0), ("assistant", -5)])
    info = read_transcript_info(path)
    assert info is not None and info.modified_ms == HEADER_MS


@pytest.mark.oracle
def test_modified_and_order_equal_pis_with_out_of_order_timestamps(
    pi_oracle: PiOracle, tmp_path: Path
) -> None:
    _session(tmp_path / "a.jsonl", [("user", 1796043604614), ("assistant", 0)])
    _session(tmp_path / "b.jsonl", [("user", 1796043000000), ("assistant", 1796043000001)])
    _session(tmp_path / "c.jsonl", [("assistant", 3_000), ("user", 2_000), ("assistant", 1_000)])
    out = subprocess.run(
        [pi_oracle.node, str(BENCHMARKS / "pi_list.mjs"), str(pi_oracle.root), str(tmp_path)],
        capture_output=True,
        check=True,
        timeout=120,
    )
    theirs = [(s["path"], s["modified"]) for s in json.loads(out.stdout)["sessions"]]
    assert [(str(i.path), i.modified_ms) for i in list_transcripts(tmp_path)] == theirs
