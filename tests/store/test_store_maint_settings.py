"""``session.maintenance`` settings: keys, defaults, units, legacy keys (OpenClaw spec §2.1, §2.2)."""

from __future__ import annotations

import pytest

from sessionkeeper._config import load_config
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.store.maintenance._settings import (
    DEFAULT_MAX_ENTRIES,
    DEFAULT_PRUNE_AFTER_MS,
    MODEL_RUN_PRUNE_AFTER_MS,
    MaintenanceSettings,
    entry_high_water,
)


DAY = 86_400_000


def test_defaults_are_openclaws():
    s = MaintenanceSettings()
    assert s.mode == "enforce"
    assert s.prune_after_ms == DEFAULT_PRUNE_AFTER_MS == 30 * DAY
    assert s.max_entries == DEFAULT_MAX_ENTRIES == 500
    assert s.reset_archive_retention_ms == 30 * DAY
    assert s.max_disk_bytes is None
    assert s.resolved_high_water_bytes is None
    assert s.model_run_prune_after_ms == MODEL_RUN_PRUNE_AFTER_MS == 24 * 3_600_000
    assert MaintenanceSettings.from_config(load_config()) == s


def test_to_json_is_openclaws_resolved_form():
    assert MaintenanceSettings().to_json() == {
        "mode": "enforce",
        "pruneAfterMs": 2_592_000_000,
        "maxEntries": 500,
        "modelRunPruneAfterMs": 86_400_000,
        "resetArchiveRetentionMs": 2_592_000_000,
        "maxDiskBytes": None,
        "highWaterBytes": None,
    }


@pytest.mark.parametrize(
    ("raw", "ms"),
    [
        ("80d", 80 * DAY),
        (7, 7 * DAY),
        ("7", 7 * DAY),
        ("12h", 12 * 3_600_000),
        ("1h30m", 5_400_000),
        ("1.5d", 1.5 * DAY),
    ],
)
def test_prune_after_units_default_to_days(raw, ms):
    assert MaintenanceSettings.from_mapping({"pruneAfter": raw}).prune_after_ms == ms


@pytest.mark.parametrize("raw", [0, "0", "0d", False, -3, "-5d"])
def test_prune_after_zero_negative_or_false_disables_age_pruning(raw):
    settings = MaintenanceSettings.from_mapping({"pruneAfter": raw})
    assert settings.prune_after_ms is None
    assert settings.reset_archive_retention_ms is None  # follows pruneAfter


def test_legacy_prune_days_is_read_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="pruneDays"):
        settings = MaintenanceSettings.from_mapping({"pruneDays": 10})
    assert settings.prune_after_ms == 10 * DAY
    # pruneAfter wins over the legacy key
    assert MaintenanceSettings.from_mapping({"pruneAfter": "2d", "pruneDays": 10}).prune_after_ms == 2 * DAY


def test_rotate_bytes_is_ignored_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="rotateBytes"):
        settings = MaintenanceSettings.from_mapping({"rotateBytes": "10mb"})
    assert settings == MaintenanceSettings()


def test_reset_archive_retention():
    assert MaintenanceSettings.from_mapping({"pruneAfter": "40d"}).reset_archive_retention_ms == 40 * DAY
    assert (
        MaintenanceSettings.from_mapping({"resetArchiveRetention": "3d"}).reset_archive_retention_ms
        == 3 * DAY
    )
    assert (
        MaintenanceSettings.from_mapping({"resetArchiveRetention": False}).reset_archive_retention_ms is None
    )


def test_disk_budget_and_high_water():
    s = MaintenanceSettings.from_mapping({"maxDiskBytes": "10mb"})
    assert s.max_disk_bytes == 10 * 1024**2
    assert s.resolved_high_water_bytes == int(10 * 1024**2 * 0.8)
    assert MaintenanceSettings.from_mapping({"maxDiskBytes": 1000}).max_disk_bytes == 1000  # bytes
    capped = MaintenanceSettings.from_mapping({"maxDiskBytes": "1kb", "highWaterBytes": "5kb"})
    assert capped.resolved_high_water_bytes == 1024
    explicit = MaintenanceSettings.from_mapping({"maxDiskBytes": "1kb", "highWaterBytes": 100})
    assert explicit.resolved_high_water_bytes == 100
    assert MaintenanceSettings(max_disk_bytes=0).resolved_high_water_bytes == 0
    assert MaintenanceSettings(max_disk_bytes=1).resolved_high_water_bytes == 1
    assert MaintenanceSettings.from_mapping({"highWaterBytes": 100}).resolved_high_water_bytes is None


def test_from_config_reads_the_session_maintenance_section():
    config = load_config({"session": {"maintenance": {"mode": "warn", "maxEntries": 40}}})
    settings = MaintenanceSettings.from_config(config)
    assert settings.mode == "warn"
    assert settings.max_entries == 40


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"mode": "delete"}, "session.maintenance.mode"),
        ({"pruneAfter": "soon"}, "session.maintenance.pruneAfter"),
        ({"maxEntries": -1}, "session.maintenance.maxEntries"),
        ({"maxEntries": 2.5}, "session.maintenance.maxEntries"),
        ({"maxEntries": "many"}, "session.maintenance.maxEntries"),
        ({"maxDiskBytes": "10zb"}, "session.maintenance.maxDiskBytes"),
        ({"resetArchiveRetention": "later"}, "session.maintenance.resetArchiveRetention"),
    ],
)
def test_bad_values_raise_config_errors_naming_the_key(section, key):
    with pytest.raises(ConfigError) as info:
        MaintenanceSettings.from_mapping(section)
    assert info.value.key == key


@pytest.mark.parametrize(
    ("max_entries", "high_water"),
    [(0, 1), (-5, 1), (1, 2), (49, 50), (50, 75), (250, 275), (500, 550), (1000, 1100)],
)
def test_batched_high_water_mark(max_entries, high_water):
    assert entry_high_water(max_entries) == high_water
