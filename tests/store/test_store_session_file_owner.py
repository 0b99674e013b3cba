"""
Issue 15 items 1 and 4: an entry's ``sessionFile`` must be a file the store can attribute to that entry
(deviation F1), and a value that is not valid Unicode is refused with the store's own error.

Before the fix a ``sessionFile`` naming ``sessions.json`` or another session's transcript passed the
inside-the-directory check, and ``reset``, ``delete`` and ``sessions cleanup --enforce`` renamed that file
away; a lone surrogate raised ``UnicodeEncodeError``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests._helpers import run_cli

from sessionkeeper.exceptions import UnsafePathError
from sessionkeeper.store import SessionStore, resolve_session_file
from sessionkeeper.store._paths import check_session_file_owner, is_store_file_name, session_ids_owning
from sessionkeeper.store.maintenance._run import run_maintenance
from sessionkeeper.store.maintenance._settings import MaintenanceSettings
from sessionkeeper.testing import FakeClock


NOW = 1_767_571_200_000  # 2026-01-05T00:00:00Z
DAY = 86_400_000
pytestmark = pytest.mark.anyio


def _header(session_id: str) -> str:
    header = {"type": "session", "version": 3, "id": session_id, "timestamp": "2026-01-01T00:00:00Z"}
    return json.dumps(header)


def _directory(tmp_path: Path, entries: dict[str, dict[str, Any]]) -> Path:
    directory = tmp_path / "agents" / "main" / "sessions"
    directory.mkdir(parents=True)
    (directory / "sessions.json").write_text(json.dumps(entries, indent=2))
    for entry in entries.values():
        (directory / f"{entry['sessionId']}.jsonl").write_text(_header(entry["sessionId"]) + "\n")
    return directory


def _snapshot(directory: Path) -> dict[str, bytes]:
    # the store's own lock file (sessions.json.lock) is left behind by every write and is not compared
    files = (p for p in directory.iterdir() if p.is_file() and p.name != "sessions.json.lock")
    return {p.name: p.read_bytes() for p in files}


MAIN = "agent:main:main"
OTHER = "agent:main:direct:bob"


@pytest.mark.parametrize("bad", ["sessions.json", "main-id.jsonl", "./sessions.json", "sessions.json.lock"])
async def test_delete_never_archives_a_file_the_entry_does_not_own(tmp_path: Path, bad: str) -> None:
    directory = _directory(
        tmp_path,
        {
            MAIN: {"sessionId": "main-id", "updatedAt": NOW},
            OTHER: {"sessionId": "bob-id", "updatedAt": NOW, "sessionFile": bad},
        },
    )
    main_before = (directory / "main-id.jsonl").read_bytes()
    async with SessionStore.open(directory, clock=FakeClock(now_ms=NOW)) as store:
        assert await store.delete(OTHER)
        assert await store.get(MAIN) is not None
    assert (directory / "main-id.jsonl").read_bytes() == main_before
    assert json.loads((directory / "sessions.json").read_text()).keys() == {MAIN}
    # the refused file is not acted on, and the entry's own canonical transcript is not touched either
    assert not [p.name for p in directory.iterdir() if ".deleted." in p.name]


async def test_reset_leaves_a_session_file_of_another_session_untouched(tmp_path: Path) -> None:
    # a refused value is reported, never acted on: the reset starts fresh (test_store_reset_refused.py)
    directory = _directory(
        tmp_path,
        {
            MAIN: {"sessionId": "main-id", "updatedAt": NOW},
            OTHER: {"sessionId": "bob-id", "updatedAt": NOW, "sessionFile": str(Path("main-id.jsonl"))},
        },
    )
    main_before = (directory / "main-id.jsonl").read_bytes()
    async with SessionStore.open(directory, clock=FakeClock(now_ms=NOW)) as store:
        fresh = await store.reset(OTHER)
        assert store.transcript_file(fresh) == directory / f"{fresh.session_id}.jsonl"
    assert (directory / "main-id.jsonl").read_bytes() == main_before
    assert not [p.name for p in directory.iterdir() if ".reset." in p.name]


async def test_reset_does_not_archive_a_file_a_live_entry_still_references(tmp_path: Path) -> None:
    # two keys share one session id and file: resetting one must leave the other's transcript in place
    directory = _directory(
        tmp_path,
        {
            MAIN: {"sessionId": "shared", "updatedAt": NOW},
            OTHER: {"sessionId": "shared", "updatedAt": NOW},
        },
    )
    async with SessionStore.open(directory, clock=FakeClock(now_ms=NOW)) as store:
        fresh = await store.reset(OTHER)
        assert fresh.session_id != "shared"
    assert (directory / "shared.jsonl").read_text() == _header("shared") + "\n"
    assert not [p.name for p in directory.iterdir() if ".reset." in p.name]


async def test_reset_still_archives_the_entrys_own_transcript(tmp_path: Path) -> None:
    directory = _directory(tmp_path, {OTHER: {"sessionId": "bob-id", "updatedAt": NOW}})
    async with SessionStore.open(directory, clock=FakeClock(now_ms=NOW)) as store:
        await store.reset(OTHER)
    assert [p.name for p in directory.iterdir() if p.name.startswith("bob-id.jsonl.reset.")]


def _enforce(directory: Path) -> dict[str, Any]:
    result = run_cli(
        "sessions", "cleanup", "--store", str(directory), "--enforce", "--json", "--now", str(NOW)
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("bad", ["sessions.json", "main-id.jsonl"])
def test_cleanup_enforce_does_not_archive_a_foreign_session_file(tmp_path: Path, bad: str) -> None:
    directory = _directory(
        tmp_path,
        {
            MAIN: {"sessionId": "main-id", "updatedAt": NOW},
            OTHER: {"sessionId": "old-id", "updatedAt": NOW - 60 * DAY, "sessionFile": bad},
        },
    )
    main_before = (directory / "main-id.jsonl").read_bytes()
    report = _enforce(directory)
    assert json.loads((directory / "sessions.json").read_text()).keys() == {MAIN}
    assert (directory / "main-id.jsonl").read_bytes() == main_before
    # the stale entry's own canonical transcript is archived as before; the refused one is reported
    archived = sorted(p.name for p in directory.iterdir() if ".deleted." in p.name)
    assert archived and all(name.startswith("old-id.jsonl.deleted.") for name in archived)
    assert any("refused" in w and "old-id" in w for w in report["warnings"]), report["warnings"]


async def test_disk_budget_eviction_spares_files_a_remaining_entry_uses(tmp_path: Path) -> None:
    directory = _directory(
        tmp_path,
        {
            MAIN: {"sessionId": "main-id", "updatedAt": NOW},
            OTHER: {"sessionId": "old-id", "updatedAt": NOW - DAY, "sessionFile": "main-id.jsonl"},
        },
    )
    (directory / "main-id.jsonl").write_text(_header("main-id") + "\n" + "x" * 50_000 + "\n")
    settings = MaintenanceSettings(max_disk_bytes=10_000, high_water_bytes=9_000)
    report = await run_maintenance(directory, settings=settings, mode="enforce", now_ms=NOW)
    assert "main-id.jsonl" in {p.name for p in directory.iterdir()}
    assert all(action.name != "main-id.jsonl" for action in report.file_actions)


# --------------------------------------------------------------------------- the attribution rule


@pytest.mark.parametrize(
    "name",
    ["s1.jsonl", "s1-topic-42.jsonl", "s1-topic-12%2F3.jsonl", "2026-09-20T14-13-48-902Z_s1.jsonl"],
)
def test_attributable_names(name: str) -> None:
    assert check_session_file_owner(name, "s1") is None


@pytest.mark.parametrize(
    "name",
    [
        "sessions.json",
        "sessions.json.lock",
        "sessions.json.bak.2026-01-01T00-00-00-000Z",
        "sessions.sqlite",
        "sessions.sqlite-wal",
        "SESSIONS.JSON",
        "s2.jsonl",
        "s10.jsonl",
        "s1.jsonl.lock",
        "s1.trajectory.jsonl",
        "s1-topic-1.trajectory.jsonl",
        "2026-09-20T14-13-48-902Z_s2.jsonl",
        "s1.jsonl.reset.2026-01-01T00-00-00.000Z",
        "notes.txt",
    ],
)
def test_refused_names(name: str) -> None:
    assert check_session_file_owner(name, "s1") is not None


def test_no_session_id_attributes_nothing() -> None:
    assert check_session_file_owner("s1.jsonl", None) is not None


@given(name=st.text(min_size=1, max_size=40))
def test_store_files_are_never_attributable(name: str) -> None:
    for base in ("sessions.json", "sessions.sqlite"):
        candidate = f"{base}.{name}"
        assert is_store_file_name(candidate)
        assert check_session_file_owner(candidate, "sessions") is not None


@given(a=st.from_regex(r"[a-z0-9]{1,12}", fullmatch=True), b=st.from_regex(r"[a-z0-9]{1,12}", fullmatch=True))
def test_a_canonical_name_belongs_to_one_session_only(a: str, b: str) -> None:
    # the canonical transcript of one session is never attributable to another id
    assert (check_session_file_owner(f"{a}.jsonl", b) is None) == (a == b)


_IDS = st.from_regex(r"[a-z0-9][a-z0-9.-]{0,10}", fullmatch=True)
_NAMES = st.one_of(
    st.builds(lambda i: f"{i}.jsonl", _IDS),
    st.builds(lambda i, t: f"{i}-topic-{t}.jsonl", _IDS, _IDS),
    st.builds(lambda i: f"2026-09-20T14-13-48-902Z_{i}.jsonl", _IDS),
    st.text(max_size=30),
)


@given(name=_NAMES, session_id=_IDS)
def test_the_owner_set_agrees_with_the_owner_check(name: str, session_id: str) -> None:
    # the store's scan over live entries uses the set; transcript_file uses the check: they must agree
    assert (check_session_file_owner(name, session_id) is None) == (session_id in session_ids_owning(name))


async def test_delete_keeps_a_topic_file_another_live_entry_owns(tmp_path: Path) -> None:
    # "a-topic-1.jsonl" is attributable to both "a" (its topic form) and "a-topic-1" (its own name)
    directory = _directory(
        tmp_path,
        {
            MAIN: {"sessionId": "a", "updatedAt": NOW, "sessionFile": "a-topic-1.jsonl"},
            OTHER: {"sessionId": "a-topic-1", "updatedAt": NOW},
        },
    )
    (directory / "a-topic-1.jsonl").write_text(_header("a") + "\n")
    async with SessionStore.open(directory, clock=FakeClock(now_ms=NOW)) as store:
        assert await store.delete(OTHER)
    assert (directory / "a-topic-1.jsonl").read_text() == _header("a") + "\n"


# --------------------------------------------------------------------------- item 4: lone surrogate


def test_lone_surrogate_in_session_file_is_an_unsafe_path(tmp_path: Path) -> None:
    with pytest.raises(UnsafePathError, match="not valid Unicode"):
        resolve_session_file(tmp_path, "\ud800.jsonl")


def test_status_json_reports_a_lone_surrogate_as_bad_input(tmp_path: Path) -> None:
    directory = tmp_path / "sessions"
    directory.mkdir()
    # json.dumps escapes the surrogate as \ud83d, which is how another tool would write it
    (directory / "sessions.json").write_text(
        json.dumps({OTHER: {"sessionId": "bob-id", "updatedAt": NOW, "sessionFile": "\ud83d.jsonl"}})
    )
    result = run_cli("status", "--store", str(directory), "--json", OTHER)
    assert result.exit_code == 2, result.output
    assert "not valid Unicode" in result.output
    assert not isinstance(result.exception, UnicodeEncodeError)
    assert sorted(os.listdir(directory)) == ["sessions.json"]


# --------------------------------------------------------------------------- doctor reports refused paths


def test_doctor_reports_refused_session_files_and_changes_nothing(tmp_path: Path) -> None:
    directory = _directory(
        tmp_path,
        {
            MAIN: {"sessionId": "main-id", "updatedAt": NOW},
            OTHER: {"sessionId": "bob-id", "updatedAt": NOW, "sessionFile": "main-id.jsonl"},
            "agent:main:direct:eve": {"sessionId": "eve-id", "updatedAt": NOW, "sessionFile": "\ud800.jsonl"},
        },
    )
    before = _snapshot(directory)
    result = run_cli("doctor", str(directory), "--json")
    assert result.exit_code == 1, result.output
    findings = json.loads(result.stdout)["directoryFindings"]
    assert [(f["check"], f["ids"]) for f in findings] == [
        ("session-file", [OTHER]),
        ("session-file", ["agent:main:direct:eve"]),
    ]
    assert "not a transcript name of session 'bob-id'" in findings[0]["message"]
    assert "not valid Unicode" in findings[1]["message"]
    assert _snapshot(directory) == before


def test_doctor_reports_refused_session_files_of_a_sqlite_store(tmp_path: Path) -> None:
    # the check read sessions.json only: a sessions.sqlite store's refused values went unreported
    from sessionkeeper.store import session_entry_from_dict

    directory = tmp_path / "agents" / "main" / "sessions"
    directory.mkdir(parents=True)
    entries = {
        MAIN: {"sessionId": "main-id", "updatedAt": NOW},
        OTHER: {"sessionId": "bob-id", "updatedAt": NOW, "sessionFile": "main-id.jsonl"},
        "agent:main:direct:eve": {"sessionId": "eve-id", "updatedAt": NOW, "sessionFile": "sessions.sqlite"},
    }

    async def seed() -> None:
        async with SessionStore.open(directory, backend="sqlite") as store:
            for key, fields in entries.items():
                await store.backend.put(key, session_entry_from_dict(fields))

    anyio.run(seed)
    for fields in entries.values():
        (directory / f"{fields['sessionId']}.jsonl").write_text(_header(fields["sessionId"]) + "\n")

    def files() -> dict[str, bytes]:  # a read may add SQLite's -wal / -shm (docs/store.md)
        return {p.name: p.read_bytes() for p in directory.iterdir() if not p.name.endswith(("-wal", "-shm"))}

    before = files()
    result = run_cli("doctor", str(directory), "--json")
    assert result.exit_code == 1, result.output
    findings = [f for f in json.loads(result.stdout)["directoryFindings"] if f["check"] == "session-file"]
    assert [f["ids"] for f in findings] == [[OTHER], ["agent:main:direct:eve"]]
    assert "not a transcript name of session 'bob-id'" in findings[0]["message"]
    assert "is a file of the store itself" in findings[1]["message"]
    assert files() == before


# --------------------------------------------------------------------------- the runtime refuses too


@pytest.mark.parametrize("bad", ["\ud800.jsonl", "sessions.json", "main-id.jsonl"])
async def test_runtime_open_refuses_an_unsafe_session_file_and_writes_nothing_through_it(
    tmp_path: Path, bad: str
) -> None:
    from sessionkeeper.runtime import SessionRuntime
    from sessionkeeper.testing import FakeClock as Clock

    directory = _directory(
        tmp_path,
        {
            MAIN: {"sessionId": "main-id", "updatedAt": NOW},
            OTHER: {"sessionId": "bob-id", "updatedAt": NOW, "sessionFile": bad},
        },
    )
    main_before = (directory / "main-id.jsonl").read_bytes()
    store_before = (directory / "sessions.json").read_bytes()
    clock = Clock(now_ms=NOW + 1000)
    async with SessionStore.open(directory, clock=clock) as store:
        runtime = SessionRuntime(store, clock=clock, host_supports_flush=False)
        with pytest.raises(UnsafePathError):
            await runtime.open(OTHER, body="hi")
        # refused before anything is written: the store entry is not touched either
        assert (directory / "sessions.json").read_bytes() == store_before
        # a reset (/new) is the way out: a fresh transcript, the refused file left alone
        session = await runtime.open(OTHER, body="/new")
        assert session.entry.session_id != "bob-id"
        assert session.transcript.path == directory / f"{session.entry.session_id}.jsonl"
    assert (directory / "main-id.jsonl").read_bytes() == main_before
    assert json.loads((directory / "sessions.json").read_text()).keys() == {MAIN, OTHER}
