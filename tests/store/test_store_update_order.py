"""Issue 11 regressions in the store: maintenance case folding, archived entries, JSON update order."""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests._helpers import run_cli

from sessionkeeper.exceptions import SessionArchivedError, StoreCorruptError, StoreError
from sessionkeeper.runtime import ModelInfo, SessionRuntime
from sessionkeeper.store import (
    InMemoryStoreBackend,
    JsonFileStoreBackend,
    SessionEntry,
    SessionStore,
    SqliteStoreBackend,
    StoreBackend,
    resolve_session,
    run_maintenance,
    session_entry_from_dict,
    session_entry_to_dict,
)
from sessionkeeper.store.maintenance._plan import (
    MaintenancePlan,
    StoreFile,
    plan_maintenance,
    serialize_store,
)
from sessionkeeper.store.maintenance._settings import MaintenanceSettings
from sessionkeeper.testing import FakeClock


NOW = 1_789_992_000_000
DAY = 86_400_000
RUN = "12345678-1234-4234-9234-123456789abc"


def attrs_evolve_label(entry: SessionEntry | None, label: str) -> SessionEntry:
    raw = session_entry_to_dict(entry) if entry is not None else {"sessionId": "s"}
    return session_entry_from_dict({**raw, "label": label})


def _plan(entries: dict[str, Any], **kw: Any) -> MaintenancePlan:
    listing = [StoreFile(name="sessions.json", size=len(serialize_store(entries)), mtime_ms=NOW)]
    return plan_maintenance(entries, files=listing, now_ms=NOW, **kw)


# ------------------------------------------------------------ maintenance: active keys fold case


@pytest.mark.parametrize(
    "active", ["AGENT:MAIN:DIRECT:OLD", "Agent:Main:Direct:Old", " agent:main:direct:OLD "]
)
def test_stale_pass_keeps_an_active_key_given_in_another_case(active: str) -> None:
    entries = {"agent:main:direct:old": {"sessionId": "a", "updatedAt": NOW - 90 * DAY}}
    plan = _plan(entries, settings=MaintenanceSettings(), active_keys=[active])
    assert plan.report.actions == {"agent:main:direct:old": "keep"}
    assert "agent:main:direct:old" in plan.entries_after


def test_stale_pass_keeps_an_upper_case_stored_key_named_in_lower_case() -> None:
    entries = {"AGENT:MAIN:DIRECT:OLD": {"sessionId": "a", "updatedAt": NOW - 90 * DAY}}
    plan = _plan(entries, settings=MaintenanceSettings(), active_keys=["agent:main:direct:old"])
    assert plan.report.actions == {"AGENT:MAIN:DIRECT:OLD": "keep"}


def test_model_run_pass_keeps_an_active_probe_given_in_another_case() -> None:
    probe = f"agent:main:explicit:model-run-{RUN}"
    entries = {
        probe: {"sessionId": "p", "updatedAt": NOW - 2 * DAY},
        "agent:main:direct:a": {"sessionId": "a"},
    }
    plan = _plan(entries, settings=MaintenanceSettings(max_entries=1), active_keys=[probe.upper()])
    assert plan.report.actions[probe] == "keep"


def test_cap_pass_keeps_an_active_key_given_in_another_case() -> None:
    entries = {
        f"agent:main:direct:u{i}": {"sessionId": f"s{i}", "updatedAt": NOW - i * 1000} for i in range(4)
    }
    oldest = "agent:main:direct:u3"
    plan = _plan(entries, settings=MaintenanceSettings(max_entries=2), active_keys=[oldest.upper()])
    actions = plan.report.actions
    assert actions[oldest] == "keep"
    # the active key counts against the cap: one other entry is kept, the newest
    assert actions["agent:main:direct:u0"] == "keep"
    assert actions["agent:main:direct:u1"] == actions["agent:main:direct:u2"] == "cap-overflow"


def test_fix_missing_pass_keeps_an_active_key_given_in_another_case() -> None:
    entries = {"agent:main:direct:gone": {"sessionId": "g", "updatedAt": NOW}}
    plan = _plan(
        entries,
        settings=MaintenanceSettings(),
        active_keys=["AGENT:MAIN:DIRECT:GONE"],
        message_transcripts=set(),
    )
    assert plan.report.actions == {"agent:main:direct:gone": "keep"}


# ------------------------------------------------------------ archived entries refuse new work


@pytest.mark.parametrize(
    ("event", "body"),
    [("message", "hello"), ("message", "/new"), ("message", "/reset soft go"), ("heartbeat", None)],
)
def test_resolve_session_refuses_an_archived_entry(event: Any, body: str | None) -> None:
    entry = {
        "sessionId": "s1",
        "updatedAt": NOW - 1000,
        "sessionStartedAt": NOW - 1000,
        "archivedAt": NOW - 10,
    }
    with pytest.raises(SessionArchivedError) as info:
        resolve_session(entry, session_key="agent:main:main", now_ms=NOW, event=event, body=body)
    assert str(info.value) == 'Session "agent:main:main" is archived. Restore it before starting new work.'
    assert info.value.session_key == "agent:main:main"
    assert info.value.archived_at == NOW - 10
    assert isinstance(info.value, StoreError)


def test_resolve_session_accepts_a_null_archived_at_as_not_archived() -> None:
    entry = {"sessionId": "s1", "updatedAt": NOW, "sessionStartedAt": NOW, "archivedAt": None}
    result = resolve_session(entry, session_key="agent:main:main", now_ms=NOW, body="hi")
    assert result.reason == "fresh"


@pytest.mark.anyio
async def test_runtime_open_refuses_an_archived_session_and_writes_nothing(tmp_path: Path) -> None:
    clock = FakeClock()
    store = SessionStore.open(tmp_path / "sessions", clock=clock, durable=False)
    runtime = SessionRuntime(store, model=ModelInfo(context_window=200_000), clock=clock, cwd="/work")
    session = await runtime.open("agent:main:main", body="hello")
    await store.archive("agent:main:main")
    before = {p.name: p.read_bytes() for p in (tmp_path / "sessions").iterdir()}
    clock.advance(60)
    with pytest.raises(SessionArchivedError):
        await runtime.open("agent:main:main", body="new work")
    with pytest.raises(SessionArchivedError):
        await runtime.open("agent:main:main", body="/new")
    after = {p.name: p.read_bytes() for p in (tmp_path / "sessions").iterdir()}
    assert after == before
    await store.unarchive("agent:main:main")
    reopened = await runtime.open("agent:main:main", body="back")
    assert reopened.session_id == session.session_id


# ------------------------------------------------------------ concurrent updates apply in call order


def _backend(kind: str, where: Path) -> StoreBackend:
    if kind == "memory":
        return InMemoryStoreBackend()
    if kind == "json":
        return JsonFileStoreBackend(where / "sessions.json", durable=False)
    return SqliteStoreBackend(where / "sessions.sqlite", synchronous="NORMAL")


async def _in_call_order(calls: list[Callable[[], Awaitable[object]]]) -> None:
    """
    Run ``calls`` concurrently, each started after the previous one began (trio starts tasks in random
    order): task i lets task i+1 go, then calls; task i+1 runs only once task i is suspended in its call.
    """
    gates = [anyio.Event() for _ in range(len(calls) + 1)]

    async def run(i: int) -> None:
        await gates[i].wait()
        gates[i + 1].set()
        await calls[i]()

    async with anyio.create_task_group() as tg:
        for i in range(len(calls)):
            tg.start_soon(run, i)
        gates[0].set()


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["memory", "json", "sqlite"])
async def test_concurrent_updates_apply_in_call_order(kind: str, tmp_path: Path) -> None:
    backend = _backend(kind, tmp_path)
    await backend.put("agent:main:main", session_entry_from_dict({"sessionId": "s", "label": ""}))
    applied: list[int] = []

    def step(i: int) -> Any:
        def fn(current: SessionEntry | None) -> SessionEntry:
            assert current is not None
            applied.append(i)
            return attrs_evolve_label(current, f"{current.label}{i},")

        return fn

    n = 120
    await _in_call_order([functools.partial(backend.update, "agent:main:main", step(i)) for i in range(n)])
    assert applied == list(range(n))
    final = await backend.get("agent:main:main")
    assert final is not None and final.label == "".join(f"{i}," for i in range(n))
    await backend.aclose()


@pytest.mark.anyio
async def test_concurrent_store_update_entry_calls_apply_in_call_order(tmp_path: Path) -> None:
    store = SessionStore.open(tmp_path, durable=False)
    await store.patch("agent:main:main", {"sessionId": "s", "label": ""})
    n = 100
    await _in_call_order(
        [
            functools.partial(
                store.update_entry, "agent:main:main", lambda e, i=i: {"label": f"{e.label}{i},"}
            )
            for i in range(n)
        ]
    )
    final = await store.require("agent:main:main")
    assert final.label == "".join(f"{i}," for i in range(n))
    await store.aclose()


@pytest.mark.anyio
async def test_a_read_issued_after_an_update_sees_it(tmp_path: Path) -> None:
    backend = JsonFileStoreBackend(tmp_path / "sessions.json", durable=False)
    await backend.put("k", session_entry_from_dict({"sessionId": "s"}))
    seen: dict[int, str | None] = {}

    async def read(i: int) -> None:
        entry = await backend.get("k")
        seen[i] = entry.label if entry is not None and isinstance(entry.label, str) else None

    calls: list[Callable[[], Awaitable[object]]] = []
    for i in range(30):
        calls.append(functools.partial(backend.update, "k", lambda e, i=i: attrs_evolve_label(e, str(i))))
        calls.append(functools.partial(read, i))
    await _in_call_order(calls)
    assert seen == {i: str(i) for i in range(30)}
    await backend.aclose()


@pytest.mark.anyio
@pytest.mark.timeout(60)  # without the fix the next call waits for the cancelled ticket forever
@pytest.mark.parametrize("kind", ["json", "sqlite"])
async def test_a_cancelled_call_does_not_block_the_calls_after_it(kind: str, tmp_path: Path) -> None:
    backend = _backend(kind, tmp_path)
    await backend.put("k", session_entry_from_dict({"sessionId": "s"}))
    with anyio.CancelScope() as scope:
        scope.cancel()
        await backend.update("k", lambda e: attrs_evolve_label(e, "cancelled"))
    with anyio.fail_after(10):
        await backend.update("k", lambda e: attrs_evolve_label(e, "after"))
        entry = await backend.get("k")
    assert entry is not None and entry.label == "after"
    await backend.aclose()


# ------------------------------------------------------------ issue 15 item 5: read-only runs write nothing


@pytest.mark.parametrize("content", [b"", b"   \n\t  \n", b"{not json", b"[]"])
def test_cleanup_dry_run_on_an_empty_or_corrupt_store_writes_nothing(tmp_path: Path, content: bytes) -> None:
    store = tmp_path / "sessions"
    store.mkdir()
    (store / "sessions.json").write_bytes(content)
    (store / "s1.jsonl").write_text('{"type":"session","version":3,"id":"s1"}\n')
    before = sorted(os.listdir(store))
    for extra in (["--dry-run"], ["--dry-run", "--enforce"], ["--dry-run", "--json"]):
        result = run_cli("sessions", "cleanup", "--store", str(store), *extra)
        assert result.exit_code != 0
        assert sorted(os.listdir(store)) == before, extra
    assert (store / "sessions.json").read_bytes() == content


@pytest.mark.anyio
@pytest.mark.parametrize("content", [b"  \n", b"{not json"])
async def test_run_maintenance_dry_run_and_warn_on_a_path_write_no_backup(
    tmp_path: Path, content: bytes
) -> None:
    store = tmp_path / "sessions"
    store.mkdir()
    (store / "sessions.json").write_bytes(content)
    for kwargs in ({"dry_run": True}, {"mode": "warn"}):
        with pytest.raises(StoreCorruptError) as info:
            await run_maintenance(store, now_ms=NOW, **kwargs)
        assert info.value.backup_path is None
        assert os.listdir(store) == ["sessions.json"]
    # the enforce run still backs the file up (0600) before refusing
    with pytest.raises(StoreCorruptError) as info:
        await run_maintenance(store, now_ms=NOW)
    assert info.value.backup_path is not None
    assert info.value.backup_path.stat().st_mode & 0o777 == 0o600
