"""JsonFileStoreBackend: OpenClaw's sessions.json format, corrupt files, caching, concurrency, crashes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessionkeeper.exceptions import SessionBusyError, StoreCorruptError
from sessionkeeper.store import JsonFileStoreBackend, SessionEntry, session_entry_to_dict


pytestmark = pytest.mark.anyio

SAMPLES = ("small", "medium")


def _copy_store(openclaw_samples: Path, name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    dest.mkdir()
    shutil.copy(openclaw_samples / name / "sessions.json", dest / "sessions.json")
    return dest / "sessions.json"


@pytest.mark.parametrize("name", SAMPLES)
async def test_golden_sample_round_trips(openclaw_samples: Path, tmp_path: Path, name: str) -> None:
    path = _copy_store(openclaw_samples, name, tmp_path)
    original = json.loads(path.read_bytes())
    backend = JsonFileStoreBackend(path)
    entries = await backend.load_all()
    # OpenClaw drops rows whose sessionId is unsafe ("../escape" in both samples)
    dropped = {k for k, v in original.items() if v.get("sessionId") == "../escape"}
    assert dropped
    assert set(backend.last_load.dropped_keys) == dropped
    expected = {k: v for k, v in original.items() if k not in dropped}
    assert list(entries) == list(expected)
    assert {k: session_entry_to_dict(e) for k, e in entries.items()} == expected
    # a write of one entry keeps every other one exactly, in OpenClaw's JSON.stringify(store, null, 2) form
    key = next(iter(expected))
    await backend.update(key, lambda e: msgspec.structs.replace(e, label="changed") if e else None)
    rewritten = json.loads(path.read_bytes())
    expected[key]["label"] = "changed"
    assert rewritten == expected
    assert path.read_bytes() == json.dumps(expected, indent=2, ensure_ascii=False).encode()
    await backend.aclose()


@pytest.mark.parametrize("name", SAMPLES)
async def test_untouched_store_is_rewritten_byte_for_byte(
    openclaw_samples: Path, tmp_path: Path, name: str
) -> None:
    path = _copy_store(openclaw_samples, name, tmp_path)
    original = json.loads(path.read_bytes())
    backend = JsonFileStoreBackend(path)
    # transaction that re-adds the dropped rows' absence only: the file becomes OpenClaw's normalised store
    await backend.transaction(
        lambda entries: entries.update({"agent:main:x": SessionEntry(session_id="x", updated_at=1)})
    )
    expected = {k: v for k, v in original.items() if v.get("sessionId") != "../escape"}
    expected["agent:main:x"] = {"sessionId": "x", "updatedAt": 1}
    assert path.read_bytes() == json.dumps(expected, indent=2, ensure_ascii=False).encode()
    await backend.aclose()


async def test_files_are_private_and_no_temp_files_remain(tmp_path: Path) -> None:
    backend = JsonFileStoreBackend(tmp_path / "agents" / "main" / "sessions")
    await backend.put("k", SessionEntry(session_id="s", updated_at=1))
    assert backend.path == tmp_path / "agents" / "main" / "sessions" / "sessions.json"
    assert stat.S_IMODE(backend.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(backend.path.parent.stat().st_mode) == 0o700
    assert sorted(p.name for p in backend.path.parent.iterdir()) == ["sessions.json", "sessions.json.lock"]
    assert stat.S_IMODE((backend.path.parent / "sessions.json.lock").stat().st_mode) == 0o600
    await backend.aclose()


async def test_empty_store_serialises_like_openclaw(tmp_path: Path) -> None:
    backend = JsonFileStoreBackend(tmp_path / "sessions.json")
    await backend.put("k", SessionEntry(session_id="s", updated_at=1))
    await backend.delete("k")
    assert (tmp_path / "sessions.json").read_bytes() == b"{}"
    await backend.aclose()


@pytest.mark.parametrize("content", [b'{"a": {', b"[1, 2]", b'"text"', b"\xff\xfe garbage"])
async def test_corrupt_file_is_backed_up_and_never_replaced(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "sessions.json"
    path.write_bytes(content)
    backend = JsonFileStoreBackend(path)
    with pytest.raises(StoreCorruptError) as info:
        await backend.load_all()
    backup = info.value.backup_path
    assert backup is not None
    assert backup.name.startswith("sessions.json.bak.")
    assert backup.read_bytes() == content
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    # writes refuse too, and the file is untouched
    with pytest.raises(StoreCorruptError) as again:
        await backend.put("k", SessionEntry(session_id="s", updated_at=1))
    assert again.value.backup_path is None  # one backup per distinct corrupt content
    assert path.read_bytes() == content
    assert len([p for p in os.listdir(tmp_path) if p.startswith("sessions.json.bak.")]) == 1
    await backend.aclose()


async def test_missing_file_is_an_empty_store(tmp_path: Path) -> None:
    path = tmp_path / "sessions.json"
    backend = JsonFileStoreBackend(path)
    assert await backend.load_all() == {}
    await backend.put("k", SessionEntry(session_id="s", updated_at=1))
    assert json.loads(path.read_bytes()) == {"k": {"sessionId": "s", "updatedAt": 1}}
    await backend.aclose()


@pytest.mark.parametrize("content", [b"", b"  \n"])
async def test_empty_existing_file_is_corrupt_never_overwritten(tmp_path: Path, content: bytes) -> None:
    """B21(b): a 0-byte sessions.json is a torn write, not an empty store; nothing may overwrite it."""
    path = tmp_path / "sessions.json"
    path.write_bytes(content)
    for name in ("s1", "s2", "s3"):
        (tmp_path / f"{name}.jsonl").write_text("{}\n")
    backend = JsonFileStoreBackend(path)
    with pytest.raises(StoreCorruptError) as info:
        await backend.load_all()
    assert info.value.backup_path is not None
    assert info.value.backup_path.read_bytes() == content
    assert stat.S_IMODE(info.value.backup_path.stat().st_mode) == 0o600
    with pytest.raises(StoreCorruptError):
        await backend.update("agent:main:main", lambda entry: SessionEntry(session_id="x", updated_at=1))
    assert path.read_bytes() == content
    await backend.aclose()


async def test_read_cache_follows_external_changes(tmp_path: Path) -> None:
    path = tmp_path / "sessions.json"
    a = JsonFileStoreBackend(path)
    await a.put("k", SessionEntry(session_id="s", updated_at=1))
    assert (await a.get("k")) == SessionEntry(session_id="s", updated_at=1)
    # another writer (OpenClaw, say) replaces the file
    path.write_text(json.dumps({"k": {"sessionId": "s", "updatedAt": 2}, "j": {"sessionId": "t"}}, indent=2))
    assert await a.keys() == ["k", "j"]
    assert (await a.get("k")) == SessionEntry(session_id="s", updated_at=2)
    # and our next write keeps the other writer's rows
    await a.put("m", SessionEntry(session_id="u", updated_at=3))
    assert list(json.loads(path.read_bytes())) == ["k", "j", "m"]
    await a.aclose()


async def test_unchanged_update_skips_the_write(tmp_path: Path) -> None:
    path = tmp_path / "sessions.json"
    backend = JsonFileStoreBackend(path)
    entry = SessionEntry(session_id="s", updated_at=1)
    await backend.put("k", entry)
    before = path.stat()
    await backend.put("k", SessionEntry(session_id="s", updated_at=1))
    after = path.stat()
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)
    await backend.aclose()


async def test_dropped_rows_are_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "sessions.json"
    path.write_text(json.dumps({"bad": {"sessionId": "../x"}, "ok": {"sessionId": "a", "provider": "tg"}}))
    backend = JsonFileStoreBackend(path)
    assert list(await backend.load_all()) == ["ok"]
    assert backend.last_load.dropped_keys == ("bad",)
    assert backend.last_load.normalized_keys == ("ok",)
    assert "dropped 1 entries" in caplog.text
    await backend.aclose()


async def test_lock_timeout_raises_session_busy(tmp_path: Path) -> None:
    import fcntl

    path = tmp_path / "sessions.json"
    backend = JsonFileStoreBackend(path, lock_timeout_s=0.05)
    fd = os.open(tmp_path / "sessions.json.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(SessionBusyError) as info:
            await backend.put("k", SessionEntry(session_id="s", updated_at=1))
        assert info.value.waited_ms >= 50
        assert not path.exists()
    finally:
        os.close(fd)
    await backend.put("k", SessionEntry(session_id="s", updated_at=1))
    await backend.aclose()


def _read_store(path: Path) -> dict[str, dict]:
    if path.suffix == ".json":
        return json.loads(path.read_bytes())
    from sessionkeeper.store import SqliteStoreBackend, session_entry_to_dict

    async def read() -> dict[str, dict]:
        backend = SqliteStoreBackend(path)
        try:
            return {k: session_entry_to_dict(e) for k, e in (await backend.load_all()).items()}
        finally:
            await backend.aclose()

    return anyio.run(read)


def _bump(entry: SessionEntry | None) -> SessionEntry:
    count = entry.compaction_count if entry is not None and isinstance(entry.compaction_count, int) else 0
    return SessionEntry(session_id="s", updated_at=count + 1, compaction_count=count + 1)


@pytest.mark.parametrize("mode", ["json-own", "json-shared", "sqlite-own", "sqlite-shared"])
def test_threads_lose_no_update(tmp_path: Path, mode: str) -> None:
    from sessionkeeper.store import SqliteStoreBackend

    kind, sharing = mode.split("-")
    path = tmp_path / ("sessions.json" if kind == "json" else "sessions.sqlite")
    per_thread, threads = 15, 6

    def make() -> JsonFileStoreBackend | SqliteStoreBackend:
        if kind == "json":
            return JsonFileStoreBackend(path, durable=False)
        return SqliteStoreBackend(path, synchronous="NORMAL")

    shared = make()

    def worker(index: int) -> None:
        async def run() -> None:
            backend = shared if sharing == "shared" else make()
            for i in range(per_thread):
                await backend.update("counter", _bump)
                await backend.put(f"t{index}:{i}", SessionEntry(session_id=f"t{index}", updated_at=i))
            if backend is not shared:
                await backend.aclose()

        anyio.run(run)

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()

    async def read() -> dict[str, SessionEntry]:
        try:
            return await shared.load_all()
        finally:
            await shared.aclose()

    entries = anyio.run(read)
    assert entries["counter"].compaction_count == per_thread * threads
    assert len(entries) == 1 + per_thread * threads


_WORKER = r"""
import sys, anyio
from sessionkeeper.store import JsonFileStoreBackend, SqliteStoreBackend, SessionEntry

kind, path, index, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def bump(entry):
    n = entry.compaction_count if entry is not None and isinstance(entry.compaction_count, int) else 0
    return SessionEntry(session_id="s", updated_at=n + 1, compaction_count=n + 1)

async def main():
    if kind == "json":
        backend = JsonFileStoreBackend(path, durable=False)
    else:
        backend = SqliteStoreBackend(path, synchronous="NORMAL")
    for i in range(count):
        await backend.update("counter", bump)
        await backend.put(f"p{index}:{i}", SessionEntry(session_id=f"p{index}", updated_at=i))
    await backend.aclose()

anyio.run(main)
"""


@pytest.mark.parametrize("kind", ["json", "sqlite"])
def test_processes_lose_no_update(tmp_path: Path, kind: str) -> None:
    path = tmp_path / ("sessions.json" if kind == "json" else "sessions.sqlite")
    procs, count = 4, 15
    children = [
        subprocess.Popen([sys.executable, "-c", _WORKER, kind, str(path), str(i), str(count)])
        for i in range(procs)
    ]
    for child in children:
        assert child.wait(timeout=120) == 0

    async def read() -> dict[str, SessionEntry]:
        backend = JsonFileStoreBackend(path) if kind == "json" else None
        if backend is None:
            from sessionkeeper.store import SqliteStoreBackend

            sqlite = SqliteStoreBackend(path)
            try:
                return await sqlite.load_all()
            finally:
                await sqlite.aclose()
        try:
            return await backend.load_all()
        finally:
            await backend.aclose()

    entries = anyio.run(read)
    assert entries["counter"].compaction_count == procs * count
    assert len(entries) == 1 + procs * count


_CRASH_WRITER = r"""
import sys, anyio
from sessionkeeper.store import JsonFileStoreBackend, SqliteStoreBackend, SessionEntry

path = sys.argv[1]

async def main():
    backend = JsonFileStoreBackend(path) if path.endswith(".json") else SqliteStoreBackend(path)
    i = 0
    while True:
        i += 1
        await backend.put(f"k{i % 50}", SessionEntry(session_id=f"s{i}", updated_at=i, label="x" * 2000))
        print(i, flush=True)

anyio.run(main)
"""


@pytest.mark.parametrize("name", ["sessions.json", "sessions.sqlite"])
def test_sigkill_mid_write_leaves_a_whole_store(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    for round_ in range(4):
        child = subprocess.Popen(
            [sys.executable, "-c", _CRASH_WRITER, str(path)], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None
        acknowledged = 0
        deadline = time.monotonic() + 30
        while acknowledged < 20 + round_ * 7 and time.monotonic() < deadline:
            line = child.stdout.readline()
            if line:
                acknowledged = int(line)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
        data = _read_store(path)  # never empty, never partial
        assert isinstance(data, dict)
        assert data
        assert all(set(v) == {"sessionId", "updatedAt", "label"} for v in data.values())
        assert max(v["updatedAt"] for v in data.values()) >= acknowledged  # no acknowledged write lost
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    # a killed writer may leave its temp file (OpenClaw's maintenance removes stale ones); never the store
    assert len(leftovers) <= 4


_ops = st.lists(
    st.tuples(
        st.sampled_from(["put", "delete", "txn", "reload"]),
        st.sampled_from(["a", "b", "c", "d", "e"]),
        st.integers(0, 9),
    ),
    max_size=25,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_ops)
def test_file_is_always_the_canonical_serialisation(tmp_path: Path, ops: list[tuple[str, str, int]]) -> None:
    path = tmp_path / f"s{abs(hash(tuple(ops)))}" / "sessions.json"
    expected: dict[str, dict] = {}

    async def run() -> None:
        backend = JsonFileStoreBackend(path, durable=False)
        for op, key, value in ops:
            entry = SessionEntry(session_id=f"s{value}", updated_at=value)
            if op == "put":
                await backend.put(key, entry)
                expected[key] = {"sessionId": f"s{value}", "updatedAt": value}
            elif op == "delete":
                await backend.delete(key)
                expected.pop(key, None)
            elif op == "txn":

                def edit(
                    entries: dict[str, SessionEntry], key: str = key, entry: SessionEntry = entry
                ) -> None:
                    entries.pop(key, None)
                    entries[key] = entry

                await backend.transaction(edit)
                expected[key] = {"sessionId": f"s{value}", "updatedAt": value}
            else:
                await backend.aclose()
                backend = JsonFileStoreBackend(path, durable=False)
                assert list(await backend.load_all()) == list(expected)
            if path.exists():
                assert path.read_bytes() == json.dumps(expected, indent=2).encode()
        await backend.aclose()

    anyio.run(run)


async def test_lone_surrogates_written_by_javascript_round_trip(tmp_path: Path) -> None:
    # JavaScript strings may hold half of a surrogate pair (a label cut in the middle of an emoji);
    # JSON.stringify writes it as an escape. Such a store is valid and must not be treated as corrupt.
    path = tmp_path / "sessions.json"
    text = '{\n  "k": {\n    "sessionId": "s",\n    "label": "cut \\ud83d"\n  }\n}'
    path.write_text(text)
    backend = JsonFileStoreBackend(path)
    entry = await backend.get("k")
    assert entry is not None
    assert entry.label == "cut \ud83d"
    await backend.put("j", SessionEntry(session_id="t", updated_at=1, label="also \udc00"))
    rewritten = path.read_text()
    assert rewritten.startswith(text[:-2])
    assert '"label": "also \\udc00"' in rewritten
    await backend.aclose()


async def test_lone_surrogates_in_sqlite(tmp_path: Path) -> None:
    from sessionkeeper.store import SqliteStoreBackend

    backend = SqliteStoreBackend(tmp_path)
    await backend.put("k", SessionEntry(session_id="s", updated_at=1, label="cut \ud83d"))
    await backend.aclose()
    again = SqliteStoreBackend(tmp_path)
    entry = await again.get("k")
    assert entry is not None
    assert entry.label == "cut \ud83d"
    await again.aclose()


async def test_a_file_mid_write_by_another_writer_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sessionkeeper.store._json as json_module

    path = tmp_path / "sessions.json"
    path.write_text('{"k": {"sessionId": "s", "upd')  # a non-atomic writer is half-way
    finished = '{"k": {"sessionId": "s", "updatedAt": 5}}'

    def writer_finishes(_seconds: float) -> None:
        path.write_text(finished)

    monkeypatch.setattr(json_module, "_sleep", writer_finishes)
    backend = JsonFileStoreBackend(path)
    assert await backend.get("k") == SessionEntry(session_id="s", updated_at=5)
    assert not [p for p in os.listdir(tmp_path) if ".bak." in p]
    await backend.aclose()
