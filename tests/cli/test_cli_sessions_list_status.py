"""The `sessions list` and `status` commands (DESIGN "CLI"; JSON fields documented in docs/store.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
import pytest
from tests._helpers import TickingClock, cli_output

from sessionkeeper.store import SessionStore


@pytest.fixture
def small_store(openclaw_samples: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "sessions"
    shutil.copytree(openclaw_samples / "small", dest)
    return dest


def test_sessions_list_json_is_sorted_and_stable(small_store: Path) -> None:
    code, out = cli_output("sessions", "list", "--store", str(small_store), "--json")
    assert code == 0
    payload = json.loads(out)
    expected_count = (
        len(json.loads((small_store / "sessions.json").read_text())) - 1
    )  # one unsafe row dropped
    assert payload["count"] == expected_count
    assert payload["backend"] == "json"
    assert payload["droppedKeys"] == ["agent:main:signal:direct:485165954"]
    rows = payload["sessions"]
    assert set(rows[0]) == {
        "key", "sessionId", "updatedAt", "sessionStartedAt", "label", "displayName", "chatType", "channel",
        "modelProvider", "model", "totalTokens", "contextTokens", "compactionCount", "archivedAt", "pinnedAt",
        "archived", "pinned",
    }  # fmt: skip
    stamps = [row["updatedAt"] if row["updatedAt"] is not None else -1 for row in rows]
    assert stamps == sorted(stamps, reverse=True)
    assert rows[0]["key"] == "agent:main:main"


def test_sessions_list_archived_and_pinned(tmp_path: Path) -> None:
    async def seed() -> None:
        # a clock that ticks on every reading: distinct updatedAt values, so the order does not rest on ties
        async with SessionStore.open(
            tmp_path, backend="sqlite", clock=TickingClock(1_790_000_000_000)
        ) as store:
            await store.patch("a", label="A")
            await store.patch("b", label="B")
            await store.patch("c", label="C")
            await store.archive("b")
            await store.pin("a")

    anyio.run(seed)
    code, out = cli_output("sessions", "list", "--store", str(tmp_path), "--json")
    assert code == 0
    payload = json.loads(out)
    assert payload["backend"] == "sqlite"
    assert [r["key"] for r in payload["sessions"]] == ["a", "c"]
    assert payload["sessions"][0]["pinned"] is True
    code, out = cli_output("sessions", "list", "--store", str(tmp_path), "--archived", "--json")
    assert [r["key"] for r in json.loads(out)["sessions"]] == ["b"]
    code, out = cli_output("sessions", "list", "--store", str(tmp_path), "--all", "--limit", "2", "--json")
    assert [r["key"] for r in json.loads(out)["sessions"]] == ["a", "c"]
    code, out = cli_output("sessions", "list", "--store", str(tmp_path))
    assert code == 0
    assert "2 sessions" in out


def test_sessions_list_table(small_store: Path) -> None:
    code, out = cli_output("sessions", "list", "--store", str(small_store / "sessions.json"))
    assert code == 0
    assert "sessions in" in out
    assert "invalid entries ignored" in out


def test_status_json(small_store: Path) -> None:
    code, out = cli_output("status", "--store", str(small_store), "agent:main:main", "--json")
    assert code == 0
    payload = json.loads(out)
    raw = json.loads((small_store / "sessions.json").read_text())["agent:main:main"]
    assert payload["found"] is True
    assert payload["entry"] == raw
    assert payload["transcript"]["path"].endswith(f"{raw['sessionId']}.jsonl")
    assert payload["transcript"]["exists"] == (small_store / f"{raw['sessionId']}.jsonl").exists()
    assert (payload["archived"], payload["pinned"]) == (False, False)


def test_status_table_and_missing_key(small_store: Path) -> None:
    code, out = cli_output("status", "--store", str(small_store), "agent:main:main")
    assert code == 0
    assert "sessionId" in out
    code, out = cli_output("status", "--store", str(small_store), "agent:main:nope", "--json")
    assert code == 1
    assert json.loads(out) == {"key": "agent:main:nope", "found": False, "backend": "json"}


def test_corrupt_store_exits_1_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "sessions.json").write_text("{not json")
    code, out = cli_output("sessions", "list", "--store", str(tmp_path))
    assert code == 1
    assert "sessionkeeper: error:" in out
    assert "backup" in out
    assert (tmp_path / "sessions.json").read_text() == "{not json"


def test_both_store_files_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "sessions.json").write_text("{}")
    (tmp_path / "sessions.sqlite").write_bytes(b"")
    code, out = cli_output("sessions", "list", "--store", str(tmp_path))
    assert code == 2
    assert "both" in out
    code, out = cli_output("sessions", "list", "--store", str(tmp_path), "--backend", "json", "--json")
    assert code == 0
