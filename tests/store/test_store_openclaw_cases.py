"""
SessionEntry merge and load-time normalisation against OpenClaw 2026.7.35's own code.

The expected values in ``data/openclaw_store_cases.json`` were produced by OpenClaw's
``mergeSessionEntry`` / ``mergeSessionEntryPreserveActivity`` and ``loadSessionStore`` (regenerate with
``node tests/store/data/regen_openclaw_store_cases.mjs`` and the openclaw oracle; DESIGN "CI").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sessionkeeper.store import (
    JsonFileStoreBackend,
    merge_session_entry,
    normalize_persisted_entry,
    session_entry_from_dict,
    session_entry_to_dict,
)


CASES = json.loads((Path(__file__).parent / "data" / "openclaw_store_cases.json").read_text())


@pytest.mark.parametrize("case", CASES["merges"], ids=lambda c: f"{c['name']} [{c['policy']}]")
def test_merge_equals_openclaw(case: dict[str, Any]) -> None:
    existing = session_entry_from_dict(case["existing"]) if case["existing"] is not None else None
    merged = merge_session_entry(
        existing,
        case["patch"],
        now_ms=case["nowMs"],
        preserve_activity=case["policy"] == "preserve-activity",
        new_session_id=lambda: "unused",
    )
    assert session_entry_to_dict(merged) == case["result"]


def test_load_normalisation_equals_openclaw() -> None:
    rows = CASES["load"]["rows"]
    expected = CASES["load"]["result"]
    ours = {
        key: shaped for key, row in rows.items() if (shaped := normalize_persisted_entry(row)) is not None
    }
    assert list(ours) == list(expected)
    assert ours == expected


@pytest.mark.anyio
async def test_json_backend_loads_what_openclaw_loads(tmp_path: Path) -> None:
    path = tmp_path / "sessions.json"
    path.write_text(json.dumps(CASES["load"]["rows"], indent=2))
    backend = JsonFileStoreBackend(path)
    loaded = {key: session_entry_to_dict(entry) for key, entry in (await backend.load_all()).items()}
    assert loaded == CASES["load"]["result"]
    assert set(backend.last_load.dropped_keys) == set(CASES["load"]["rows"]) - set(CASES["load"]["result"])
    await backend.aclose()
