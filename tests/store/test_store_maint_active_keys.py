"""Maintenance passes keep an active session key given in another case (OpenClaw folds keys to lower case)."""

from __future__ import annotations

from typing import Any

import pytest

from sessionkeeper.store.maintenance._plan import (
    MaintenancePlan,
    StoreFile,
    plan_maintenance,
    serialize_store,
)
from sessionkeeper.store.maintenance._settings import MaintenanceSettings


NOW = 1_789_992_000_000
DAY = 86_400_000
RUN = "12345678-1234-4234-9234-123456789abc"


def _plan(entries: dict[str, Any], **kw: Any) -> MaintenancePlan:
    listing = [StoreFile(name="sessions.json", size=len(serialize_store(entries)), mtime_ms=NOW)]
    return plan_maintenance(entries, files=listing, now_ms=NOW, **kw)


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
