"""``demo --workdir`` never overwrites files in a used directory; an empty one is fine."""

from __future__ import annotations

from pathlib import Path

from tests._helpers import run_cli


def test_demo_never_overwrites_files_in_a_used_workdir(tmp_path: Path) -> None:
    # `demo --workdir DIR` used to copy the samples over DIR/sessions/basic.jsonl and friends.
    workdir = tmp_path / "work"
    (workdir / "sessions").mkdir(parents=True)
    mine = workdir / "sessions" / "basic.jsonl"
    mine.write_bytes(b"precious\n")
    result = run_cli("demo", "--json", "--workdir", str(workdir))
    assert result.exit_code == 2
    assert "not empty" in result.stderr
    assert result.stderr.count("\n") == 1
    assert mine.read_bytes() == b"precious\n"
    assert sorted(p.name for p in workdir.rglob("*")) == ["basic.jsonl", "sessions"]


def test_demo_accepts_an_existing_empty_workdir(tmp_path: Path) -> None:
    result = run_cli("demo", "--json", "--workdir", str(tmp_path), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "sessions" / "basic.jsonl").is_file()
