"""Archived session entries refuse new work: resolving or opening one raises and writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sessionkeeper.exceptions import SessionArchivedError, StoreError
from sessionkeeper.runtime import ModelInfo, SessionRuntime
from sessionkeeper.store import (
    SessionStore,
    resolve_session,
)
from sessionkeeper.testing import FakeClock


NOW = 1_789_992_000_000


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
