"""Damage other writers leave is reported, not loaded as clean (issue 15 items 8 and 10)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests._helpers import run_cli, user_entry

from sessionkeeper.transcript import (
    list_transcripts,
    load_transcript,
    load_transcript_bytes,
    read_transcript_info,
)


TS = "2026-01-01T00:00:00.000Z"
HEADER = {"type": "session", "version": 3, "id": "s1", "timestamp": TS, "cwd": "/w"}


def _label(entry_id: str, parent: str | None, target: str) -> dict[str, Any]:
    return {
        "type": "label",
        "id": entry_id,
        "parentId": parent,
        "timestamp": TS,
        "targetId": target,
        "label": "L",
    }


def _compaction(entry_id: str, parent: str | None, first_kept: Any) -> dict[str, Any]:
    entry = {"type": "compaction", "id": entry_id, "parentId": parent, "timestamp": TS, "summary": "S"}
    if first_kept is not None:
        entry["firstKeptEntryId"] = first_kept
    entry["tokensBefore"] = 10
    return entry


def _file(*entries: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in [HEADER, *entries])


def test_metadata_last_line_off_an_old_branch_is_a_stale_leaf() -> None:
    # a1 <- a2 <- a3 (newest messages); another program's stale handle still at a1 appends a label
    data = _file(
        user_entry("a1", None), user_entry("a2", "a1"), user_entry("a3", "a2"), _label("l1", "a1", "a1")
    )
    index = load_transcript_bytes(data)
    assert len(index.build_context().messages) == 1  # pi's context at the last entry: a1 only
    assert index.diagnostics.stale_leaf == ("l1", "a3")
    assert not index.diagnostics.clean
    assert index.diagnostics.to_json()["staleLeaf"] == {"leafId": "l1", "newestEntryId": "a3"}


def test_metadata_at_the_tip_or_a_message_on_a_branch_is_not_stale() -> None:
    tip = _file(user_entry("a1", None), user_entry("a2", "a1"), _label("l1", "a2", "a1"))
    assert load_transcript_bytes(tip).diagnostics.clean
    under_tip = _file(
        user_entry("a1", None), user_entry("a2", "a1"), _label("l1", "a2", "a1"), _label("l2", "l1", "a2")
    )
    assert load_transcript_bytes(under_tip).diagnostics.stale_leaf is None
    branched = _file(
        user_entry("a1", None), user_entry("a2", "a1"), user_entry("b2", "a1")
    )  # a real branch (navigation)
    assert load_transcript_bytes(branched).diagnostics.clean


def test_compaction_keeping_nothing_by_accident_is_reported() -> None:
    entries = [user_entry("a1", None), _label("l1", "a1", "a1"), user_entry("a2", "l1")]
    broken = _file(*entries, _compaction("c1", "a2", "gone"))
    diag = load_transcript_bytes(broken).diagnostics
    assert diag.unreachable_first_kept == ("c1",)
    off_path = _file(*entries, user_entry("b1", None), _compaction("c1", "a2", "b1"))
    assert load_transcript_bytes(off_path).diagnostics.unreachable_first_kept == ("c1",)
    absent = _file(
        *entries, {"type": "compaction", "id": "c1", "parentId": "a2", "timestamp": TS, "summary": "S"}
    )
    assert load_transcript_bytes(absent).diagnostics.unreachable_first_kept == ("c1",)
    fine = _file(*entries, _compaction("c1", "a2", "l1"))
    assert load_transcript_bytes(fine).diagnostics.clean
    hardened = _file(
        *entries, _compaction("c1", "a2", "c1")
    )  # a successor's boundary: keeps nothing on purpose
    assert load_transcript_bytes(hardened).diagnostics.clean


def test_doctor_reports_stale_leaf_and_unreachable_first_kept(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(
        _file(
            user_entry("a1", None),
            user_entry("a2", "a1"),
            _compaction("c1", "a2", "x"),
            _label("l1", "a1", "a1"),
        )
    )
    before = path.read_bytes()
    result = run_cli("doctor", str(path), "--json")
    assert path.read_bytes() == before
    assert "stale-leaf" in result.output
    assert "unreachable-first-kept" in result.output
    diag = load_transcript(path).diagnostics
    assert diag.stale_leaf == ("l1", "c1") and diag.unreachable_first_kept == ("c1",)


# --------------------------------------------------------------------------- the listing (issue 15 item 10)


def _write(path: Path, *entries: dict[str, Any]) -> None:
    path.write_bytes(_file(*entries))


def test_listing_reports_missing_parents_and_a_stale_leaf(tmp_path: Path) -> None:
    _write(tmp_path / "clean.jsonl", user_entry("a1", None), user_entry("a2", "a1"), _label("l1", "a2", "a1"))
    _write(tmp_path / "orphan.jsonl", user_entry("a1", None), user_entry("a2", "gone"))
    _write(tmp_path / "stale.jsonl", user_entry("a1", None), user_entry("a2", "a1"), _label("l1", "a1", "a1"))
    damage = {info.path.name: info.damage for info in list_transcripts(tmp_path)}
    assert damage == {"clean.jsonl": (), "orphan.jsonl": ("missing-parents",), "stale.jsonl": ("stale-leaf",)}
    info = read_transcript_info(tmp_path / "orphan.jsonl")
    assert info is not None and info.to_json()["damage"] == ["missing-parents"]


def test_listing_looks_up_parents_before_the_tail_window(tmp_path: Path) -> None:
    # 2,000 entries (> the 32 KiB tail window): the window's first parent is found earlier in the file
    entries = [user_entry("e0", None)] + [user_entry(f"e{n}", f"e{n - 1}", "x" * 40) for n in range(1, 2000)]
    _write(tmp_path / "long.jsonl", *entries)
    info = read_transcript_info(tmp_path / "long.jsonl")
    assert info is not None and info.message_count is None  # the window did not cover the file
    assert info.damage == ()
    entries[1990] = user_entry("e1990", "nowhere", "x" * 40)
    _write(tmp_path / "long.jsonl", *entries)
    info = read_transcript_info(tmp_path / "long.jsonl")
    assert info is not None and info.damage == ("missing-parents",)
    assert load_transcript(tmp_path / "long.jsonl").diagnostics.missing_parents == ("e1990",)
    # a stale handle's label at the end of a long file
    entries[1990] = user_entry("e1990", "e1989", "x" * 40)
    _write(tmp_path / "long.jsonl", *entries, _label("l1", "e5", "e5"))
    info = read_transcript_info(tmp_path / "long.jsonl")
    assert info is not None and info.damage == ("stale-leaf",)
