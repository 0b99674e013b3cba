"""
``copy_sessions`` run again after a kill (issue 13: "an interrupted import is simply run again"): a
target transcript no entry names that holds the first lines of the source's is completed, not refused;
a different one still is; the temp files a killed write left are removed; copies running at once end
with every session in place.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import anyio
import pytest
from tests._servers import pg_schema
from tests.store._transfer_source import PLAIN, files_of, make_source, outcomes, pg_store

from sessionkeeper.exceptions import SessionExistsError
from sessionkeeper.store import SessionStore, copy_sessions


pytestmark = pytest.mark.anyio
__all__ = ("pg_schema",)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the database stores are asyncio-only (docs/decisions.md PG-ASYNCIO)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


async def test_a_partial_transcript_is_completed_and_killed_temps_removed(tmp_path: Path) -> None:
    source = await make_source(tmp_path / "a")
    target_dir = tmp_path / "b"
    target_dir.mkdir()
    whole = (source / f"{PLAIN}.jsonl").read_bytes()
    lines = whole.splitlines(keepends=True)
    (target_dir / f"{PLAIN}.jsonl").write_bytes(b"".join(lines[:2]))  # killed after two lines
    dead = target_dir / f"{PLAIN}.jsonl.{_dead_pid()}.{uuid.uuid4()}.tmp"
    dead.write_bytes(lines[0])
    ours = target_dir / f"{PLAIN}.jsonl.{os.getpid()}.{uuid.uuid4()}.tmp"
    ours.write_bytes(b"a write of this process\n")
    other = target_dir / f"other.jsonl.{_dead_pid()}.{uuid.uuid4()}.tmp"
    other.write_bytes(b"not this transcript's\n")
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        report = await copy_sessions(src, dst)
        assert (await dst.require("agent:main:main")).label == "Main"
    assert report.ok
    assert outcomes(report)["agent:main:main"] == "copied"
    main = next(s for s in report.sessions if s.session_key == "agent:main:main")
    assert (main.lines, main.size) == (len(lines), len(whole))
    assert (target_dir / f"{PLAIN}.jsonl").read_bytes() == whole
    assert not dead.exists()
    assert ours.exists() and other.exists()  # a live process's, another transcript's: kept


async def test_a_complete_unnamed_transcript_counts_as_unchanged(tmp_path: Path) -> None:
    source = await make_source(tmp_path / "a")
    target_dir = tmp_path / "b"
    target_dir.mkdir()
    whole = (source / f"{PLAIN}.jsonl").read_bytes()
    (target_dir / f"{PLAIN}.jsonl").write_bytes(whole)
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        report = await copy_sessions(src, dst)
    assert report.ok
    assert outcomes(report)["agent:main:main"] == "copied"  # the entry was new
    assert (target_dir / f"{PLAIN}.jsonl").read_bytes() == whole


async def test_a_transcript_that_is_no_prefix_or_is_named_is_still_refused(tmp_path: Path) -> None:
    source = await make_source(tmp_path / "a")
    target_dir = tmp_path / "b"
    target_dir.mkdir()
    lines = (source / f"{PLAIN}.jsonl").read_bytes().splitlines(keepends=True)
    theirs = lines[0] + b'{"type":"custom","id":"mine"}\n'
    (target_dir / f"{PLAIN}.jsonl").write_bytes(theirs)
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        report = await copy_sessions(src, dst, keys=["agent:main:main"])
    (failed,) = report.failed
    assert isinstance(failed.error, SessionExistsError)
    assert (target_dir / f"{PLAIN}.jsonl").read_bytes() == theirs
    # a prefix an entry of the target names is that session's transcript: never appended to
    named = tmp_path / "c"
    named.mkdir()
    (named / f"{PLAIN}.jsonl").write_bytes(lines[0])
    async with SessionStore.open(named) as dst:
        await dst.patch("agent:other:x", session_id=PLAIN)
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(named) as dst:
        report = await copy_sessions(src, dst, keys=["agent:main:main"])
    (failed,) = report.failed
    assert isinstance(failed.error, SessionExistsError)
    assert (named / f"{PLAIN}.jsonl").read_bytes() == lines[0]


async def test_a_partial_transcript_in_postgres_is_completed(
    tmp_path: Path, pg_schema: tuple[str, str]
) -> None:
    dsn, schema = pg_schema
    source = await make_source(tmp_path / "a")
    lines = (source / f"{PLAIN}.jsonl").read_bytes().splitlines()
    async with pg_store(dsn, schema) as dst:
        await dst.transcript_storage().create(PLAIN, lines[:1])
        async with SessionStore.open(source, read_only=True) as src:
            report = await copy_sessions(src, dst)
            dry = await copy_sessions(src, dst, dry_run=True)
        stored, _ = await dst.transcript_storage().read(PLAIN)
    assert report.ok
    assert set(outcomes(dry).values()) == {"unchanged"}
    assert stored == lines


async def test_copies_running_at_once_all_succeed(tmp_path: Path) -> None:
    source = await make_source(tmp_path / "a")
    target_dir = tmp_path / "b"
    reports = []

    async def one() -> None:
        async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
            reports.append(await copy_sessions(src, dst, batch_bytes=64))

    async with anyio.create_task_group() as tasks:
        for _ in range(3):
            tasks.start_soon(one)
    assert [report.ok for report in reports] == [True, True, True]
    assert {name: data for name, data in files_of(target_dir).items() if name.endswith(".jsonl")} == {
        name: data
        for name, data in files_of(source).items()
        if name.endswith(".jsonl") and "ffff" not in name
    }


async def test_a_partial_transcript_ending_in_a_torn_line_is_completed(tmp_path: Path) -> None:
    source = await make_source(tmp_path / "a")
    target_dir = tmp_path / "b"
    target_dir.mkdir()
    whole = (source / f"{PLAIN}.jsonl").read_bytes()
    lines = whole.splitlines(keepends=True)
    (target_dir / f"{PLAIN}.jsonl").write_bytes(lines[0] + lines[1][:7])  # killed mid-line
    async with SessionStore.open(source, read_only=True) as src, SessionStore.open(target_dir) as dst:
        report = await copy_sessions(src, dst, keys=["agent:main:main"])
    assert [repr(s.error) for s in report.failed] == []
    assert outcomes(report) == {"agent:main:main": "copied"}
    assert (target_dir / f"{PLAIN}.jsonl").read_bytes() == whole
