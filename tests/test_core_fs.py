"""The file-system primitives: atomic writes, backups, safe names, modes."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from sessionkeeper._fs import atomic_write_bytes, backup_file, check_safe_name, iso_stamp
from sessionkeeper.exceptions import SessionKeeperError, UnsafePathError


def test_iso_stamp_replaces_colons_and_dots() -> None:
    assert iso_stamp(1_778_148_672_345) == "2026-05-07T10-11-12-345Z"


@pytest.mark.parametrize("bad", ["", ".", "..", "../x", "a/b", "a\\b", "a\0b"])
def test_unsafe_names_are_refused(bad: str) -> None:
    with pytest.raises(UnsafePathError) as info:
        check_safe_name(bad, what="session id")
    assert isinstance(info.value, SessionKeeperError)
    assert isinstance(info.value, ValueError)
    assert info.value.value == bad


@pytest.mark.parametrize("good", ["abc", "01a22b5d-28b9-73d6-80df-18694d1efde8", "x..y", "topic-12"])
def test_safe_names_pass(good: str) -> None:
    assert check_safe_name(good) == good


def test_atomic_write_creates_0600_and_replaces(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "f.json"
    atomic_write_bytes(target, b"one")
    assert target.read_bytes() == b"one"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
    atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"two"
    assert [p.name for p in target.parent.iterdir()] == ["f.json"]


def test_backup_is_0600_and_never_overwrites(tmp_path: Path) -> None:
    target = tmp_path / "s.jsonl"
    target.write_bytes(b"data")
    first = backup_file(target, now_ms=0)
    second = backup_file(target, now_ms=0)
    assert first != second
    assert first.name == "s.jsonl.bak.1970-01-01T00-00-00-000Z"
    for path in (first, second):
        assert path.read_bytes() == b"data"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_ensure_dir_makes_every_missing_parent_0700(tmp_path: Path) -> None:
    from sessionkeeper._fs import ensure_dir

    target = tmp_path / "a" / "b" / "c"
    ensure_dir(target)
    for folder in (tmp_path / "a", tmp_path / "a" / "b", target):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    ensure_dir(target)  # idempotent
