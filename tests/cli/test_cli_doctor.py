"""``sessionkeeper doctor``: every problem kind, --fix (0600 backup, no complete line lost), exit codes."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests._helpers import run_cli

from sessionkeeper.cli._doctor import (
    DoctorRegistry,
    Finding,
    default_registry,
    diagnose_bytes,
    repair_transcript_bytes,
    run_doctor,
)
from sessionkeeper.transcript import load_transcript
from sessionkeeper.transcript.lock._lock import SessionWriteLock


HEADER = '{"type":"session","version":3,"id":"s-doc","timestamp":"2026-01-05T10:00:00.000Z","cwd":"/w"}'


def _msg(entry_id: str, parent: str | None, role: str = "user", text: str = "hi", **extra: Any) -> str:
    if role == "user":
        message: dict[str, Any] = {"role": "user", "content": text, "timestamp": 1}
    elif role == "assistant":
        message = {
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "api": "a",
            "provider": "p",
            "model": "m",
            "stopReason": "stop",
        }
    else:
        message = {"role": "toolResult", "toolCallId": extra["call"], "toolName": "read", "content": []}
    entry = {"type": "message", "id": entry_id, "parentId": parent, "timestamp": "2026-01-05T10:00:01.000Z"}
    return json.dumps({**entry, "message": message}, separators=(",", ":"))


GOOD = [HEADER, _msg("e1", None), _msg("e2", "e1", "assistant", "hello")]


def _write(tmp_path: Path, lines: list[str] | bytes, name: str = "s.jsonl", *, newline: bool = True) -> Path:
    path = tmp_path / name
    data = lines if isinstance(lines, bytes) else ("\n".join(lines) + ("\n" if newline else "")).encode()
    path.write_bytes(data)
    return path


def _json(*args: str) -> tuple[int, dict[str, Any]]:
    result = run_cli("doctor", *args, "--json", catch_exceptions=False)
    return result.exit_code, json.loads(result.stdout)


def _checks(report: dict[str, Any], key: str = "findings") -> set[str]:
    return {f["check"] for f in report["files"][0][key]}


def _backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".bak.*"))


def test_healthy_transcript_exits_0(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    code, report = _json(str(path))
    assert code == 0
    assert report["files"][0]["status"] == "healthy"
    assert report["summary"] == {"files": 1, "healthy": 1, "fixed": 0, "problems": 0}
    assert report["exitCode"] == 0
    result = run_cli("doctor", str(path), catch_exceptions=False)
    assert result.exit_code == 0
    assert "1 healthy" in result.stdout


@pytest.mark.parametrize(
    ("name", "data", "check"),
    [
        ("torn", ("\n".join(GOOD) + '\n{"type":"message","id":"e3","par').encode(), "torn-tail"),
        ("invalid", "\n".join([*GOOD[:2], "{not json", GOOD[2]]).encode() + b"\n", "invalid-lines"),
        ("nonobject", "\n".join([*GOOD[:2], "[1,2]", GOOD[2]]).encode() + b"\n", "non-object-lines"),
        ("badutf8", ("\n".join(GOOD) + "\n").encode().replace(b"hello", b"hel\xfflo"), "bad-utf8"),
        ("lone", ("\n".join(GOOD) + "\n").encode().replace(b"hello", b"hel\\ud83dlo"), "lone-surrogates"),
        ("newline", "\n".join(GOOD).encode(), "missing-final-newline"),
    ],
)
def test_fixable_problems_are_reported_then_fixed(tmp_path: Path, name: str, data: bytes, check: str) -> None:
    path = _write(tmp_path, data, f"{name}.jsonl")
    code, report = _json(str(path))
    assert code == 1
    assert check in _checks(report)
    assert path.read_bytes() == data  # checking never writes
    assert _backups(path) == []

    code, report = _json(str(path), "--fix")
    assert code == 0, report
    assert report["files"][0]["status"] == "fixed"
    assert check in _checks(report, "fixed")
    (backup,) = _backups(path)
    assert backup.read_bytes() == data
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert report["files"][0]["backupPath"] == str(backup)
    repaired = path.read_bytes()
    assert repaired.endswith(b"\n")
    index = load_transcript(path)
    assert index.diagnostics.clean
    assert [e.id for e in index.entries()] == ["e1", "e2"]
    assert _json(str(path))[0] == 0


def test_fix_keeps_lines_after_an_invalid_one(tmp_path: Path) -> None:
    lines = [HEADER, _msg("e1", None), "{oops", _msg("e2", "e1", "assistant"), "", _msg("e3", "e2")]
    path = _write(tmp_path, lines)
    assert _json(str(path), "--fix")[0] == 0
    assert path.read_text().splitlines() == [HEADER, lines[1], lines[3], lines[5]]


def test_bad_utf8_is_rewritten_with_replacement_character(tmp_path: Path) -> None:
    data = ("\n".join(GOOD) + "\n").encode().replace(b"hello", b"hel\xfflo")
    path = _write(tmp_path, data)
    _json(str(path), "--fix")
    assert "hel\ufffdlo" in path.read_text(encoding="utf-8")


def test_legacy_version_is_migrated_with_the_same_context(tmp_path: Path, pi_samples: Path) -> None:
    path = tmp_path / "legacy.jsonl"
    path.write_bytes((pi_samples / "v1-legacy.jsonl").read_bytes())
    before = load_transcript(path).build_context()
    code, report = _json(str(path))
    assert code == 1
    assert "legacy-version" in _checks(report)
    code, report = _json(str(path), "--fix")
    assert code == 0
    after = load_transcript(path)
    assert after.header.version == 3
    assert not after.diagnostics.legacy_version
    assert after.build_context().messages == before.messages
    assert len(_backups(path)) == 1


@pytest.mark.parametrize(
    ("lines", "check"),
    [
        ([*GOOD, _msg("e2", "e1", "user", "again")], "duplicate-ids"),
        ([HEADER, _msg("e1", "zzzz"), _msg("e2", "e1")], "missing-parents"),
        ([HEADER, _msg("e1", "e2"), _msg("e2", "e1")], "cycles"),
        ([*GOOD, _msg("e3", "e2", "toolResult", call="call_9")], "orphan-tool-results"),
    ],
)
def test_structural_problems_are_reported_and_never_deleted(
    tmp_path: Path, lines: list[str], check: str
) -> None:
    path = _write(tmp_path, lines)
    original = path.read_bytes()
    code, report = _json(str(path))
    assert code == 1
    assert check in _checks(report)
    code, report = _json(str(path), "--fix")
    assert code == 1  # not fixable: reported, data kept
    assert report["files"][0]["status"] == "problems"
    assert path.read_bytes() == original
    assert _backups(path) == []


def test_repeated_header_is_info_only(tmp_path: Path) -> None:
    path = _write(tmp_path, [*GOOD, HEADER])
    code, report = _json(str(path))
    assert code == 0
    finding = report["files"][0]["findings"][0]
    assert (finding["check"], finding["severity"]) == ("repeated-headers", "info")


def test_bad_input_exits_2(tmp_path: Path) -> None:
    assert run_cli("doctor", str(tmp_path / "missing.jsonl"), catch_exceptions=False).exit_code == 2
    notes = tmp_path / "notes.jsonl"
    notes.write_text("hello\n")
    result = run_cli("doctor", str(notes), catch_exceptions=False)
    assert result.exit_code == 2
    assert "not a pi session transcript" in result.stderr
    assert run_cli("doctor", str(notes), "--fix", catch_exceptions=False).exit_code == 2
    assert notes.read_text() == "hello\n"


def test_directory_scan(tmp_path: Path) -> None:
    _write(tmp_path, GOOD, "a.jsonl")
    _write(tmp_path, "\n".join(GOOD).encode(), "b.jsonl")
    _write(tmp_path, b"not a transcript\n", "c.jsonl")
    _write(tmp_path, b"{}\n", "a.trajectory.jsonl")  # OpenClaw sidecar: skipped
    (tmp_path / "sessions.json").write_text("{}")
    code, report = _json(str(tmp_path))
    assert code == 1
    statuses = {Path(f["path"]).name: f["status"] for f in report["files"]}
    assert statuses == {"a.jsonl": "healthy", "b.jsonl": "problems", "c.jsonl": "not-a-transcript"}
    code, report = _json(str(tmp_path), "--fix")
    statuses = {Path(f["path"]).name: f["status"] for f in report["files"]}
    assert statuses == {"a.jsonl": "healthy", "b.jsonl": "fixed", "c.jsonl": "not-a-transcript"}
    assert code == 1  # c.jsonl still is not a transcript
    assert (tmp_path / "c.jsonl").read_bytes() == b"not a transcript\n"
    result = run_cli("doctor", str(tmp_path), catch_exceptions=False)
    assert "not-a-transcript" in result.stdout
    assert "c.jsonl" in result.stdout


def test_rich_output_escapes_markup(tmp_path: Path) -> None:
    path = _write(tmp_path, [*GOOD, "[bold]x"], "[red]odd.jsonl")
    result = run_cli("doctor", str(path), catch_exceptions=False)
    assert result.exit_code == 1
    assert "[red]odd.jsonl" in result.stdout
    assert "problems" in result.stdout


@pytest.mark.anyio
async def test_fix_waits_for_the_write_lock_and_reports_busy(tmp_path: Path) -> None:
    path = _write(tmp_path, "\n".join(GOOD).encode())
    before = path.read_bytes()
    async with SessionWriteLock.acquire(path):
        run = await run_doctor(path, fix=True, lock_timeout_ms=50)
    assert run.files[0].status == "busy"
    assert run.exit_code == 1
    assert path.read_bytes() == before
    run = await run_doctor(path, fix=True)
    assert run.files[0].status == "fixed"


class _StoreFileCheck:
    id = "store-file"
    description = "sessions.json must exist"

    def check_directory(self, directory: Path) -> list[Finding]:
        if (directory / "sessions.json").exists():
            return []
        return [Finding(check=self.id, severity="error", message="no sessions.json")]


@pytest.mark.anyio
async def test_registry_accepts_directory_checks(tmp_path: Path) -> None:
    registry = default_registry()
    registry.add(_StoreFileCheck())
    _write(tmp_path, GOOD, "a.jsonl")
    run = await run_doctor(tmp_path, registry=registry)
    assert [f.check for f in run.directory_findings] == ["store-file"]
    assert run.exit_code == 1
    assert run.to_json()["directoryFindings"][0]["message"] == "no sessions.json"
    (tmp_path / "sessions.json").write_text("{}")
    assert (await run_doctor(tmp_path, registry=registry)).exit_code == 0
    single = await run_doctor(tmp_path / "a.jsonl", registry=registry)
    assert single.directory_findings == ()


def test_registry_rejects_duplicates_and_non_checks() -> None:
    registry = default_registry()
    ids = [c.id for c in registry.transcript_checks]
    assert len(ids) == len(set(ids))
    assert {"torn-tail", "invalid-lines", "bad-utf8", "legacy-version", "duplicate-ids", "cycles"} <= set(ids)
    with pytest.raises(ValueError, match="torn-tail"):
        registry.add(registry.transcript_checks[0])
    with pytest.raises(TypeError):
        registry.add(object())  # type: ignore[arg-type]
    assert DoctorRegistry().transcript_checks == []


def test_repair_refuses_non_transcripts(tmp_path: Path) -> None:
    target = diagnose_bytes(tmp_path / "x.jsonl", b"nope\n")
    assert target.index is None
    with pytest.raises(ValueError, match="not a transcript"):
        repair_transcript_bytes(target)


_LINE = st.sampled_from(
    [
        _msg("e1", None),
        _msg("e2", "e1", "assistant", "ok"),
        _msg("e3", "e2", "user", "h\u00e9llo"),
        "{broken",
        "[1]",
        "",
        "   ",
        "42",
        '"str"',
    ]
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.lists(_LINE, max_size=8), tail=st.sampled_from(["", '{"type":"mess', _msg("e9", "e1")]))
def test_repair_never_loses_a_complete_object_line(body: list[str], tail: str) -> None:
    data = ("\n".join([HEADER, *body]) + "\n" + tail).encode()
    target = diagnose_bytes(Path("p.jsonl"), data)
    repaired = repair_transcript_bytes(target)
    complete = data.split(b"\n")
    if not data.endswith(b"\n"):
        last = complete.pop()
        try:
            if isinstance(json.loads(last), dict):
                complete.append(last)  # a parseable last line without newline is kept too
        except ValueError:
            pass
    kept = repaired.split(b"\n")
    for line in complete:
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            assert line in kept
    after = diagnose_bytes(Path("p.jsonl"), repaired)
    assert after.diagnostics is not None
    fixable = {
        f.check for check in default_registry().transcript_checks for f in check.check(after) if f.fixable
    }
    assert fixable == set()


def test_doctor_async_api_runs_under_trio_too(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    run = anyio.run(lambda: run_doctor(path), backend="trio")
    assert run.exit_code == 0


def _lock_file(path: Path, *, pid: int, starttime: int | None, created_ms: int) -> Path:
    from sessionkeeper._lockfile import format_lock_payload, lock_path_for

    lock = lock_path_for(path)
    lock.write_bytes(
        format_lock_payload(pid=pid, created_at_ms=created_ms, max_hold_ms=300_000, starttime=starttime)
    )
    return lock


def test_stale_lock_of_a_dead_process_is_reported_and_reclaimed_by_fix(tmp_path: Path) -> None:
    import time

    path = _write(tmp_path, GOOD)
    lock = _lock_file(path, pid=999_999_9, starttime=123, created_ms=int(time.time() * 1000) - 120_000)
    code, report = _json(str(path))
    assert code == 1
    (finding,) = report["files"][0]["findings"]
    assert (finding["check"], finding["severity"], finding["fixable"]) == ("lock", "warning", True)
    assert "stale lock" in finding["message"]
    code, report = _json(str(path), "--fix")
    assert code == 0, report
    assert report["files"][0]["status"] == "fixed"
    assert _checks(report, "fixed") == {"lock"}
    assert not lock.exists()
    assert _backups(path) == []  # the content needed no repair


def test_lock_of_a_live_process_is_in_use_and_never_evicted(tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    from sessionkeeper._lockfile import process_start_time

    path = _write(tmp_path, GOOD)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        lock = _lock_file(
            path, pid=child.pid, starttime=process_start_time(child.pid), created_ms=int(time.time() * 1000)
        )
        code, report = _json(str(path))
        assert code == 0
        (finding,) = report["files"][0]["findings"]
        assert (finding["check"], finding["severity"]) == ("lock", "info")
        assert f"pid={child.pid}" in finding["message"]
        run = anyio.run(lambda: run_doctor(path, fix=True, lock_timeout_ms=50))
        assert run.files[0].status == "busy"
        assert lock.exists()
    finally:
        child.kill()
        child.wait()
