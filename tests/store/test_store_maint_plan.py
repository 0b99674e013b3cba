"""The pure maintenance planner: every rule of OpenClaw spec §2.2-§2.5 and DESIGN D6."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sessionkeeper.store.maintenance._artifacts import (
    archive_file_name,
    is_prompt_blob_temp_name,
    prompt_blob_hash,
)
from sessionkeeper.store.maintenance._plan import (
    MaintenancePlan,
    StoreFile,
    find_unreferenced_transcripts,
    plan_maintenance,
    serialize_store,
)
from sessionkeeper.store.maintenance._settings import MaintenanceSettings


NOW = 1_789_992_000_000
DAY = 86_400_000
MIN = 60_000
RUN = "12345678-1234-4234-9234-123456789abc"


def _file(name: str, *, size: int = 100, age_ms: int = 0) -> StoreFile:
    return StoreFile(name=name, size=size, mtime_ms=NOW - age_ms)


def _plan(entries: dict[str, Any], files: list[StoreFile] | None = None, **kw: Any) -> MaintenancePlan:
    settings = kw.pop("settings", MaintenanceSettings())
    listing = files if files is not None else []
    store = serialize_store(entries)
    if not any(f.name == "sessions.json" for f in listing):
        listing = [*listing, StoreFile(name="sessions.json", size=len(store), mtime_ms=NOW)]
    return plan_maintenance(entries, files=listing, settings=settings, now_ms=NOW, **kw)


def _entry(sid: str, age_ms: int | None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"sessionId": sid}
    if age_ms is not None:
        out["updatedAt"] = NOW - age_ms
    out.update(extra)
    return out


def _actions(plan: MaintenancePlan) -> dict[str, str]:
    return dict(plan.report.actions)


# ----------------------------------------------------------------------------------- stale pruning


def test_stale_entries_are_pruned_strictly_before_the_cutoff():
    entries = {
        "agent:main:direct:old": _entry("a", 30 * DAY + 1),
        "agent:main:direct:edge": _entry("b", 30 * DAY),
        "agent:main:direct:new": _entry("c", DAY),
    }
    plan = _plan(entries)
    assert _actions(plan) == {
        "agent:main:direct:old": "prune-stale",
        "agent:main:direct:edge": "keep",
        "agent:main:direct:new": "keep",
    }
    assert plan.report.count("prune-stale") == 1


def test_entries_without_updated_at_are_kept_and_invalid_ones_count_as_zero():
    entries = {
        "agent:main:direct:none": _entry("a", None),
        "agent:main:direct:bad": {"sessionId": "b", "updatedAt": "yesterday"},
    }
    assert _actions(_plan(entries)) == {
        "agent:main:direct:none": "keep",
        "agent:main:direct:bad": "prune-stale",
    }


def test_protected_entries_survive_age_pruning_but_synthetic_ones_do_not():
    old = 90 * DAY
    entries = {
        "agent:main:telegram:group:-1": _entry("g", old),
        "agent:main:slack:channel:c:thread:1": _entry("t", old),
        "agent:main:imessage:direct:1": _entry("i", old, chatType="group"),
        "agent:main:hook:1": _entry("h", old, chatType="group"),
        "agent:main:subagent:x": _entry("s", old),
    }
    assert _actions(_plan(entries)) == {
        "agent:main:telegram:group:-1": "keep",
        "agent:main:slack:channel:c:thread:1": "keep",
        "agent:main:imessage:direct:1": "keep",
        "agent:main:hook:1": "prune-stale",
        "agent:main:subagent:x": "prune-stale",
    }


def test_main_active_and_locked_entries_are_never_pruned_d6():
    old = 90 * DAY
    entries = {
        "agent:main:main": _entry("m", old),
        "agent:ops:main": _entry("o", old),
        "agent:main:direct:active": _entry("a", old),
        "agent:main:direct:locked": _entry("l", old),
        "agent:main:direct:other": _entry("x", old),
    }
    plan = _plan(entries, active_keys=["agent:main:direct:active"], locked_files={"l.jsonl"})
    assert plan.report.removed_keys == ("agent:main:direct:other",)


def test_disabled_prune_after_prunes_nothing_and_warns():
    entries = {"agent:main:direct:a": _entry("a", 400 * DAY)}
    plan = _plan(entries, settings=MaintenanceSettings(prune_after_ms=None))
    assert plan.report.removals == ()
    assert any("disabled" in w for w in plan.report.warnings)


# ----------------------------------------------------------------------------------- model-run probes


def test_model_run_probes_pruned_after_24h_only_above_max_entries_when_forced():
    probe_old = f"agent:main:explicit:model-run-{RUN}"
    probe_new = f"agent:main:explicit:model-run-{RUN[:-1]}d"
    entries = {
        probe_old: _entry("p1", DAY + 1),
        probe_new: _entry("p2", DAY - 1),
        "agent:main:direct:a": _entry("a", MIN),
    }
    settings = MaintenanceSettings(max_entries=2)
    plan = _plan(entries, settings=settings)
    assert _actions(plan)[probe_old] == "prune-model-run"
    assert _actions(plan)[probe_new] == "keep"
    # at or below maxEntries the forced run does not prune probes (they may still be capped)
    plan = _plan(entries, settings=MaintenanceSettings(max_entries=3))
    assert _actions(plan)[probe_old] == "keep"


def test_model_run_probes_honour_the_active_set():
    probe = f"agent:main:explicit:model-run-{RUN}"
    entries = {probe: _entry("p", 2 * DAY), "agent:main:direct:a": _entry("a", MIN)}
    plan = _plan(entries, settings=MaintenanceSettings(max_entries=1), active_keys=[probe])
    assert _actions(plan)[probe] == "keep"


# ----------------------------------------------------------------------------------- cap


def test_cap_keeps_the_newest_and_removes_missing_timestamps_first():
    entries = {
        "agent:main:direct:none": _entry("n", None),
        "agent:main:direct:d3": _entry("d3", 3 * DAY),
        "agent:main:direct:d1": _entry("d1", DAY),
        "agent:main:direct:d2": _entry("d2", 2 * DAY),
    }
    plan = _plan(entries, settings=MaintenanceSettings(max_entries=2))
    assert _actions(plan) == {
        "agent:main:direct:none": "cap-overflow",
        "agent:main:direct:d3": "cap-overflow",
        "agent:main:direct:d1": "keep",
        "agent:main:direct:d2": "keep",
    }


def test_cap_counts_protected_entries_against_the_limit():
    entries = {
        "agent:main:telegram:group:1": _entry("g", 9 * DAY),
        "agent:main:direct:d1": _entry("d1", DAY),
        "agent:main:direct:d2": _entry("d2", 2 * DAY),
    }
    plan = _plan(entries, settings=MaintenanceSettings(max_entries=2))
    assert plan.report.removed_keys == ("agent:main:direct:d2",)


def test_protected_entries_above_the_cap_stay_and_warn():
    entries = {f"agent:main:telegram:group:{i}": _entry(f"g{i}", DAY) for i in range(3)}
    entries["agent:main:direct:x"] = _entry("x", MIN)
    plan = _plan(entries, settings=MaintenanceSettings(max_entries=2))
    assert plan.report.removed_keys == ("agent:main:direct:x",)  # 7.35: every removable entry goes
    assert plan.report.after_count == 3
    assert any("exceed maxEntries" in w for w in plan.report.warnings)


def test_on_save_applies_the_cap_only_at_the_high_water_mark():
    settings = MaintenanceSettings(max_entries=50)  # high water 75
    entries = {f"agent:main:direct:{i}": _entry(f"s{i}", i * MIN) for i in range(74)}
    assert _plan(entries, settings=settings, on_save=True).report.removals == ()
    assert _plan(entries, settings=settings).report.count("cap-overflow") == 24  # forced
    entries["agent:main:direct:74"] = _entry("s74", 74 * MIN)
    assert _plan(entries, settings=settings, on_save=True).report.count("cap-overflow") == 25


def test_on_save_prunes_model_runs_only_at_the_high_water_mark():
    settings = MaintenanceSettings(max_entries=3)  # high water 4
    probe = f"agent:main:explicit:model-run-{RUN}"
    entries = {probe: _entry("p", 2 * DAY), "agent:main:direct:a": _entry("a", MIN)}
    assert _plan(entries, settings=settings, on_save=True).report.removals == ()
    entries.update({"agent:main:direct:b": _entry("b", MIN), "agent:main:direct:c": _entry("c", MIN)})
    assert _actions(_plan(entries, settings=settings, on_save=True))[probe] == "prune-model-run"


# ----------------------------------------------------------------------------------- transcripts


def test_removed_transcripts_are_archived_and_trajectories_deleted():
    entries = {"agent:main:direct:old": _entry("s1", 60 * DAY), "agent:main:direct:new": _entry("s2", MIN)}
    files = [
        _file("s1.jsonl", age_ms=60 * DAY),
        _file("s1.trajectory.jsonl", age_ms=60 * DAY),
        _file("s1.trajectory-path.json", age_ms=60 * DAY),
        _file("s2.jsonl"),
    ]
    plan = _plan(entries, files)
    actions = [(a.name, a.action, a.reason) for a in plan.report.file_actions]
    assert actions == [
        ("s1.jsonl", "archive", "archive-removed-transcript"),
        ("s1.trajectory-path.json", "delete", "removed-trajectory"),
        ("s1.trajectory.jsonl", "delete", "removed-trajectory"),
    ]
    assert plan.report.file_actions[0].archive_name == archive_file_name("s1.jsonl", "deleted", NOW)
    assert archive_file_name("s1.jsonl", "deleted", NOW) == "s1.jsonl.deleted.2026-09-21T12-00-00.000Z"


def test_a_transcript_shared_with_a_kept_entry_is_not_archived():
    entries = {"agent:main:direct:old": _entry("s1", 60 * DAY), "agent:main:direct:alias": _entry("s1", MIN)}
    plan = _plan(entries, [_file("s1.jsonl")])
    assert plan.report.removed_keys == ("agent:main:direct:old",)
    assert plan.report.file_actions == ()


def test_explicit_session_file_and_canonical_name_are_both_archived():
    entries = {"agent:main:telegram:direct:1": _entry("s1", 60 * DAY, sessionFile="s1-topic-7.jsonl")}
    plan = _plan(entries, [_file("s1-topic-7.jsonl"), _file("s1.jsonl")])
    assert sorted(a.name for a in plan.report.file_actions if a.action == "archive") == [
        "s1-topic-7.jsonl",
        "s1.jsonl",
    ]


def test_session_files_outside_the_directory_are_never_touched():
    entries = {"agent:main:direct:old": _entry("s1", 60 * DAY, sessionFile="../../elsewhere/s1.jsonl")}
    plan = _plan(entries, [_file("s1.jsonl")])
    assert [a.name for a in plan.report.file_actions] == ["s1.jsonl"]


def test_locked_transcripts_are_never_moved():
    entries = {"agent:main:direct:a": _entry("s1", 60 * DAY), "agent:main:direct:b": _entry("s1", 60 * DAY)}
    plan = _plan(entries, [_file("s1.jsonl")], locked_files={"s1.jsonl"})
    assert plan.report.removals == ()  # both entries point at the locked transcript
    assert plan.report.file_actions == ()


# ----------------------------------------------------------------------------------- archive retention


def test_archive_retention_uses_prune_after_and_reset_retention():
    files = [
        _file("a.jsonl.deleted.2026-08-01T00-00-00.000Z"),  # 51 days
        _file("b.jsonl.deleted.2026-09-01T00-00-00.000Z"),  # 20 days
        _file("c.jsonl.reset.2026-09-10T00-00-00.000Z"),  # 11 days
        _file("d.jsonl.reset.2026-08-01T00-00-00Z"),  # 51 days, no millis
        # transcript backups follow pruneAfter (issue 15, deviation F2); store backups are not managed
        _file("e.jsonl.bak.2020-01-01T00-00-00.000Z"),
        _file("sessions.json.bak.2020-01-01T00-00-00.000Z"),
    ]
    plan = _plan({}, files, settings=MaintenanceSettings.from_mapping({"resetArchiveRetention": "10d"}))
    assert sorted((a.name, a.reason) for a in plan.report.file_actions) == [
        ("a.jsonl.deleted.2026-08-01T00-00-00.000Z", "archive-retention"),
        ("c.jsonl.reset.2026-09-10T00-00-00.000Z", "archive-retention"),
        ("d.jsonl.reset.2026-08-01T00-00-00Z", "archive-retention"),
        ("e.jsonl.bak.2020-01-01T00-00-00.000Z", "backup-retention"),
    ]


def test_reset_retention_false_keeps_reset_archives_and_skips_retention_without_new_archives():
    files = [
        _file("a.jsonl.deleted.2026-01-01T00-00-00.000Z"),
        _file("c.jsonl.reset.2026-01-01T00-00-00.000Z"),
    ]
    plan = _plan({}, files, settings=MaintenanceSettings.from_mapping({"resetArchiveRetention": False}))
    assert plan.report.file_actions == ()
    entries = {"agent:main:direct:old": _entry("s1", 60 * DAY)}
    plan = _plan(entries, [*files, _file("s1.jsonl")], settings=MaintenanceSettings.from_mapping(
        {"resetArchiveRetention": False}
    ))  # fmt: skip
    names = [a.name for a in plan.report.file_actions]
    assert "a.jsonl.deleted.2026-01-01T00-00-00.000Z" in names  # retention runs once something was archived
    assert "c.jsonl.reset.2026-01-01T00-00-00.000Z" not in names


# ----------------------------------------------------------------------------------- disk budget


def test_disk_budget_removes_artifacts_oldest_first_then_oldest_entries():
    entries = {
        "agent:main:main": _entry("m", 5 * DAY),
        "agent:main:direct:old": _entry("o", 4 * DAY),
        "agent:main:direct:mid": _entry("d", 3 * DAY),
        "agent:main:direct:new": _entry("n", DAY),
    }
    files = [
        _file("m.jsonl", size=1000, age_ms=5 * DAY),
        _file("o.jsonl", size=1000, age_ms=4 * DAY),
        _file("d.jsonl", size=1000, age_ms=3 * DAY),
        _file("n.jsonl", size=1000, age_ms=DAY),
        _file("orphan.jsonl", size=500, age_ms=DAY),
        _file("x.jsonl.reset.2026-09-20T00-00-00.000Z", size=500, age_ms=2 * DAY),
        _file("sessions.json.1.12345678-1234-1234-1234-123456789abc.tmp", size=500, age_ms=10 * MIN),
        _file("sessions.json.2.12345678-1234-1234-1234-123456789abd.tmp", size=500, age_ms=MIN),  # fresh
    ]
    settings = MaintenanceSettings(max_disk_bytes=5000, high_water_bytes=3000)
    plan = _plan(entries, files, settings=settings)
    steps = [(a.name, a.reason) for a in plan.report.file_actions]
    assert steps == [
        ("x.jsonl.reset.2026-09-20T00-00-00.000Z", "budget-artifact"),
        ("orphan.jsonl", "budget-artifact"),
        ("sessions.json.1.12345678-1234-1234-1234-123456789abc.tmp", "budget-artifact"),
        ("o.jsonl", "budget-entry-file"),
        ("d.jsonl", "budget-entry-file"),
    ]
    assert plan.report.removed_keys == ("agent:main:direct:old", "agent:main:direct:mid")
    budget = plan.report.disk_budget
    assert budget is not None
    assert budget.over_budget
    assert budget.removed_entries == 2
    assert budget.removed_files == 5
    assert budget.total_bytes_after <= 3000
    assert budget.total_bytes_before - budget.total_bytes_after >= budget.freed_bytes


def test_disk_budget_under_the_limit_does_nothing_and_reports():
    settings = MaintenanceSettings(max_disk_bytes=10**6)
    plan = _plan({"agent:main:direct:a": _entry("a", MIN)}, [_file("a.jsonl")], settings=settings)
    budget = plan.report.disk_budget
    assert budget is not None
    assert not budget.over_budget
    assert budget.high_water_bytes == 800_000
    assert plan.report.file_actions == ()


def test_disk_budget_never_evicts_protected_active_or_main_entries():
    entries = {
        "agent:main:main": _entry("m", 9 * DAY),
        "agent:main:direct:active": _entry("a", 8 * DAY),
        "agent:main:telegram:group:1": _entry("g", 7 * DAY),
    }
    files = [_file(f"{s}.jsonl", size=5000) for s in "mag"]
    plan = _plan(
        entries,
        files,
        settings=MaintenanceSettings(max_disk_bytes=100),
        active_keys=["AGENT:main:direct:active"],
    )
    assert plan.report.removals == ()
    assert any("still above" in w for w in plan.report.warnings)


def test_no_budget_configured_means_no_budget_pass():
    assert _plan({}, []).report.disk_budget is None


# ----------------------------------------------------------------------------------- unreferenced artifacts


def test_unreferenced_artifacts_respect_age_references_and_temp_staleness():
    cp = "s1.checkpoint.12345678-1234-4234-9234-123456789abc.jsonl"
    entries = {
        "agent:main:main": _entry(
            "s1", MIN, compactionCheckpoints=[{"preCompaction": {"sessionFile": cp}, "postCompaction": {}}]
        )
    }
    files = [
        _file("s1.jsonl", age_ms=90 * DAY),
        _file(cp, age_ms=90 * DAY),
        _file("orphan-old.jsonl", age_ms=31 * DAY),
        _file("orphan-new.jsonl", age_ms=29 * DAY),
        _file("x.trajectory.jsonl", age_ms=40 * DAY),
        _file("x.trajectory-path.json", age_ms=40 * DAY),
        _file("notes.txt", age_ms=400 * DAY),
        _file("sessions.json.9.12345678-1234-1234-1234-123456789abc.tmp", age_ms=6 * MIN),
        _file(f"sessions.json.9.{'a' * 32}.tmp", age_ms=6 * MIN),  # our own temp-name form
        _file("sessions.json.9.12345678-1234-1234-1234-123456789abd.tmp", age_ms=4 * MIN),
    ]
    plan = _plan(entries, files)
    removed = sorted((a.name, a.reason) for a in plan.report.file_actions)
    assert removed == [
        ("orphan-old.jsonl", "unreferenced-artifact"),
        ("sessions.json.9.12345678-1234-1234-1234-123456789abc.tmp", "stale-temp"),
        (f"sessions.json.9.{'a' * 32}.tmp", "stale-temp"),
        ("x.trajectory-path.json", "unreferenced-artifact"),
        ("x.trajectory.jsonl", "unreferenced-artifact"),
    ]
    report = plan.report.unreferenced_artifacts
    assert report is not None
    assert report.removed_files == 5
    assert report.scanned_files == len(files) + 1  # + sessions.json
    assert _plan(entries, files, on_save=True).report.unreferenced_artifacts is None


def test_disabled_prune_after_keeps_orphans_but_removes_stale_temp_files():
    files = [
        _file("orphan.jsonl", age_ms=900 * DAY),
        _file("sessions.json.9.12345678-1234-1234-1234-123456789abc.tmp", age_ms=6 * MIN),
    ]
    plan = _plan({}, files, settings=MaintenanceSettings(prune_after_ms=None))
    assert [a.reason for a in plan.report.file_actions] == ["stale-temp"]


def test_zero_byte_artifacts_are_removed_but_not_counted():
    plan = _plan({}, [_file("empty.jsonl", size=0, age_ms=40 * DAY)])
    assert [a.name for a in plan.report.file_actions] == ["empty.jsonl"]
    assert plan.report.unreferenced_artifacts is not None
    assert plan.report.unreferenced_artifacts.removed_files == 0


# ----------------------------------------------------------------------------------- load shape, report


def test_unsafe_session_ids_are_dropped_as_openclaw_loads_them():
    entries: dict[str, Any] = {
        "agent:main:direct:bad": {"sessionId": "../escape", "updatedAt": NOW},
        "agent:main:direct:junk": "not an object",
        "agent:main:direct:ok": _entry("ok", MIN),
    }
    plan = _plan(entries)
    assert plan.report.actions["agent:main:direct:bad"] == "drop-unsafe"
    assert plan.report.actions["agent:main:direct:junk"] == "drop-unsafe"
    assert plan.report.before_count == 1
    assert plan.store_changed  # the enforce run rewrites the file without the dropped rows
    assert list(plan.entries_after) == ["agent:main:direct:ok"]


def test_report_json_has_openclaw_fields_and_actions():
    entries = {"agent:main:direct:old": _entry("s1", 60 * DAY)}
    data = _plan(entries, [_file("s1.jsonl")]).report.to_json()
    for key in (
        "mode", "dryRun", "beforeCount", "afterCount", "missing", "modelRunPruned", "pruned", "capped",
        "unreferencedArtifacts", "diskBudget", "wouldMutate", "actions",
    ):  # fmt: skip
        assert key in data
    assert data["actions"] == {"agent:main:direct:old": "prune-stale"}
    assert data["pruned"] == 1
    assert data["wouldMutate"] is True
    assert data["files"][0]["archiveName"].startswith("s1.jsonl.deleted.")


def test_serialize_store_matches_json_stringify_layout():
    assert serialize_store({}) == b"{}"
    assert serialize_store({"k": {"a": 1, "b": [], "c": {}, "d": "é"}}) == (
        b'{\n  "k": {\n    "a": 1,\n    "b": [],\n    "c": {},\n    "d": "\xc3\xa9"\n  }\n}'
    )


def test_find_unreferenced_transcripts_lists_orphans_for_recovery():
    files = [
        _file("s3.jsonl", age_ms=1),
        _file("s1.jsonl", age_ms=3),
        _file("s2.jsonl", age_ms=2),
        _file("x.txt"),
    ]
    assert find_unreferenced_transcripts({}, files=files) == ["s1.jsonl", "s2.jsonl", "s3.jsonl"]
    assert find_unreferenced_transcripts({"k": {"sessionId": "s2"}}, files=files) == ["s1.jsonl", "s3.jsonl"]


# ----------------------------------------------------------------------------------- properties

_keys = st.sampled_from(
    [
        "agent:main:main",
        "agent:main:direct:a",
        "agent:main:direct:b",
        "agent:main:telegram:group:1",
        "agent:main:hook:1",
        "agent:main:subagent:x",
        f"agent:main:explicit:model-run-{RUN}",
        "agent:main:slack:channel:c:thread:1",
        "cron:nightly",
        "agent:main:direct:c",
    ]
)


@st.composite
def _stores(
    draw: st.DrawFn,
) -> tuple[dict[str, Any], list[StoreFile], MaintenanceSettings, set[str], set[str]]:
    keys = draw(st.lists(_keys, unique=True, max_size=10))
    entries = {
        k: _entry(
            draw(st.sampled_from(["s1", "s2", "s3", "s4", "s5"])), draw(st.none() | st.integers(0, 90 * DAY))
        )
        for k in keys
    }
    names = draw(
        st.lists(
            st.sampled_from(
                ["s1.jsonl", "s2.jsonl", "s3.jsonl", "o.jsonl", "s1.trajectory.jsonl",
                 "a.jsonl.deleted.2026-07-01T00-00-00.000Z", "b.jsonl.reset.2026-09-20T00-00-00.000Z"]
            ),
            unique=True,
        )
    )  # fmt: skip
    files = [_file(n, size=draw(st.integers(0, 5000)), age_ms=draw(st.integers(0, 90 * DAY))) for n in names]
    settings = MaintenanceSettings(
        max_entries=draw(st.integers(0, 6)),
        prune_after_ms=draw(st.none() | st.integers(1, 60).map(lambda d: d * DAY)),
        max_disk_bytes=draw(st.none() | st.integers(0, 20000)),
    )
    active = set(draw(st.lists(_keys, max_size=2)))
    locked = set(draw(st.lists(st.sampled_from(["s1.jsonl", "s2.jsonl"]), max_size=1)))
    return entries, files, settings, active, locked


@given(_stores(), st.booleans())
def test_plan_invariants(store, on_save):
    entries, files, settings, active, locked = store
    plan = _plan(entries, files, settings=settings, active_keys=active, locked_files=locked, on_save=on_save)
    removed = set(plan.report.removed_keys)
    # preserved keys are never removed (D6)
    assert not removed & active
    assert "agent:main:main" not in removed
    for key in removed:
        sid = entries[key]["sessionId"]
        assert f"{sid}.jsonl" not in locked
    # entries after = entries before minus removals, order kept
    assert list(plan.entries_after) == [k for k in entries if k not in removed]
    assert plan.report.after_count == len(entries) - len(removed)
    # every file action names a file of the listing (or an archive created by the plan) and no locked file
    known = {f.name for f in files} | {a.archive_name for a in plan.report.file_actions if a.archive_name}
    for action in plan.report.file_actions:
        assert action.name in known
        assert action.name not in locked
        assert action.name != "sessions.json"
    deleted = [a.name for a in plan.report.file_actions if a.action == "delete"]
    assert len(deleted) == len(set(deleted))
    if on_save:
        assert plan.report.unreferenced_artifacts is None


def test_fix_missing_removes_entries_without_a_transcript_with_messages():
    entries: dict[str, Any] = {
        "agent:main:main": _entry("m", MIN),  # preserved (D6) even without a transcript
        "agent:main:direct:ok": _entry("ok", MIN),
        "agent:main:direct:header-only": _entry("h", MIN),
        "agent:main:telegram:group:1": _entry("g", MIN),  # protected keys are not spared by this pass
        "agent:main:direct:no-id": {"updatedAt": NOW},  # agent keys without a session id stay
        "legacy-key": {"updatedAt": NOW},  # other keys without a session id go
        "agent:main:direct:active": _entry("a", MIN),
    }
    files = [_file("ok.jsonl"), _file("h.jsonl")]
    plan = _plan(entries, files, message_transcripts={"ok.jsonl"}, active_keys=["agent:main:direct:active"])
    missing = [r.key for r in plan.report.removals if r.reason == "prune-missing"]
    assert missing == ["agent:main:direct:header-only", "agent:main:telegram:group:1", "legacy-key"]
    assert plan.report.before_count == len(entries) - 3
    assert plan.report.to_json()["missing"] == 3
    assert plan.report.file_actions == ()  # their files are not archived; orphans age out instead
    assert _plan(entries, files).report.removals == ()  # off by default


def test_prompt_blobs_unreferenced_old_and_temp_files_go_referenced_stay():
    digest = "ab" + "0" * 62
    other = "cd" + "1" * 62
    blob = f"skills-prompts/sha256/ab/{digest}.txt"
    orphan = f"skills-prompts/sha256/cd/{other}.txt"
    temp = f"skills-prompts/sha256/cd/{other}.txt.7.12345678-1234-1234-1234-123456789abc.tmp"
    assert prompt_blob_hash(blob) == digest
    assert prompt_blob_hash(temp) is None
    assert is_prompt_blob_temp_name(temp)
    ref = {"version": 1, "algorithm": "sha256", "hash": digest, "bytes": 100}
    entries = {"agent:main:main": _entry("m", MIN, skillsSnapshot={"promptRef": ref})}
    files = [_file(blob, age_ms=90 * DAY), _file(orphan, age_ms=31 * DAY), _file(temp, age_ms=6 * MIN)]
    plan = _plan(entries, files)
    assert sorted((a.name, a.reason) for a in plan.report.file_actions) == [
        (orphan, "unreferenced-artifact"),
        (temp, "stale-temp"),
    ]
    young = _plan(entries, [_file(orphan, age_ms=29 * DAY)])
    assert young.report.file_actions == ()
