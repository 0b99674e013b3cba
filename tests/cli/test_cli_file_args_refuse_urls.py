"""Commands that read transcript files refuse a store URL: one usage line naming ``export``, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests._helpers import run_cli

from sessionkeeper.cli._file_args import url_scheme


@pytest.mark.parametrize(
    ("args", "url"),
    [
        (["tree"], "postgresql://agents:secret@127.0.0.1:5432/test"),
        (["context"], "redis://127.0.0.1:6379/0"),
        (["compact"], "sqlite:///var/lib/sessions.sqlite"),
        (["prune", "--context-window", "1000"], "postgres://127.0.0.1/test"),
        (["doctor"], "postgresql://agents:secret@127.0.0.1:5432/test"),
    ],
)
def test_a_url_is_a_usage_error_naming_export(args: list[str], url: str) -> None:
    run = run_cli(*args, url)
    assert run.exit_code == 2
    assert run.stdout == ""
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sessionkeeper: error: "), run.stderr
    assert f"'{args[0]}' reads" in lines[0]
    assert "sessionkeeper export --store URL --out DIR" in lines[0]
    assert f"{url_scheme(url)}://..." in lines[0]
    assert "secret" not in lines[0] and "127.0.0.1" not in lines[0]  # the URL itself is never echoed


def test_doctor_is_told_to_use_the_exported_directory() -> None:
    run = run_cli("doctor", "redis://127.0.0.1:6379/0")
    assert "files and directories" in run.stderr and "give 'doctor' DIR" in run.stderr


def test_local_paths_still_pass(tmp_path: Path) -> None:
    odd = tmp_path / "postgresql:"  # a directory whose name ends in a colon is a path, not a URL
    odd.mkdir()
    transcript = odd / "t.jsonl"
    transcript.write_text("")
    run = run_cli("context", str(transcript))
    assert "store URL" not in run.output
    assert url_scheme(str(transcript)) is None


@pytest.mark.parametrize(
    ("value", "scheme"),
    [
        ("postgresql://h/db", "postgresql"),
        ("postgresql+psycopg://h/db", "postgresql+psycopg"),
        ("redis://h", "redis"),
        ("sqlite:///x.sqlite", "sqlite"),
        ("sessions/t.jsonl", None),
        ("C:\\sessions\\t.jsonl", None),
        ("./postgresql://x", None),
        ("1abc://x", None),
    ],
)
def test_url_scheme(value: str, scheme: str | None) -> None:
    assert url_scheme(value) == scheme
