"""
Store maintenance (OpenClaw spec §2, DESIGN D6): settings, the pure planner, its run, and cron retention.

- ``_settings``: :class:`MaintenanceSettings` from ``session.maintenance`` (spec §2.1).
- ``_plan``: :func:`plan_maintenance`, the pure planner, as named passes in OpenClaw's applied order.
- ``_state``, ``_report``, ``_artifacts``: the planner's working state, its result values, and the
  names of the files in a sessions directory (archives, temp files, trajectories, prompt blobs).
- ``_run``: :func:`run_maintenance`, the I/O around a plan (list, lock check, commit, archive, delete).
- ``_postgres``: the PostgreSQL backend's entry passes as set-based SQL.
- ``_cron``: cron sessions (resolution, run-session retention, run-log trimming).

The public names are re-exported by :mod:`sessionkeeper.store`; the modules inside are private.
"""

from __future__ import annotations

from sessionkeeper.store.maintenance._cron import (
    CronSessionResolution,
    CronSettings,
    CronSweepReport,
    plan_cron_run_retention,
    resolve_cron_session,
    sanitize_fresh_cron_entry,
    sweep_cron_run_sessions,
    trim_cron_run_log,
)
from sessionkeeper.store.maintenance._plan import find_unreferenced_transcripts, plan_maintenance
from sessionkeeper.store.maintenance._report import (
    DiskBudgetReport,
    EntryRemoval,
    FileAction,
    MaintenancePlan,
    MaintenanceReport,
    StoreFile,
    UnreferencedArtifactsReport,
)
from sessionkeeper.store.maintenance._run import run_maintenance
from sessionkeeper.store.maintenance._settings import MaintenanceMode, MaintenanceSettings, entry_high_water


__all__ = (
    "CronSessionResolution",
    "CronSettings",
    "CronSweepReport",
    "DiskBudgetReport",
    "EntryRemoval",
    "FileAction",
    "MaintenanceMode",
    "MaintenancePlan",
    "MaintenanceReport",
    "MaintenanceSettings",
    "StoreFile",
    "UnreferencedArtifactsReport",
    "entry_high_water",
    "find_unreferenced_transcripts",
    "plan_cron_run_retention",
    "plan_maintenance",
    "resolve_cron_session",
    "run_maintenance",
    "sanitize_fresh_cron_entry",
    "sweep_cron_run_sessions",
    "trim_cron_run_log",
)


from sessionkeeper._public import set_public_module


set_public_module(globals())
