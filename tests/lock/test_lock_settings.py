"""WriteLockSettings: defaults, config keys, environment overrides and their precedence (OpenClaw §3)."""

from __future__ import annotations

import math

import pytest

from sessionkeeper._config import load_config
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.transcript.lock._settings import WriteLockSettings


ENV_TIMEOUT = "OPENCLAW_SESSION_WRITE_LOCK_ACQUIRE_TIMEOUT_MS"
ENV_STALE = "OPENCLAW_SESSION_WRITE_LOCK_STALE_MS"
ENV_HOLD = "OPENCLAW_SESSION_WRITE_LOCK_MAX_HOLD_MS"


def test_defaults_are_openclaw_defaults() -> None:
    settings = WriteLockSettings.from_config(None, env={})
    assert settings.acquire_timeout_ms == 60_000
    assert settings.stale_ms == 1_800_000
    assert settings.max_hold_ms == 300_000
    assert settings.poll_interval_ms == 50
    assert settings.watchdog_interval_ms == 60_000
    assert settings.allow_reentrant is False


def test_config_keys_are_read() -> None:
    config = load_config(
        {"session": {"writeLock": {"acquireTimeoutMs": 2000, "staleMs": 9000, "maxHoldMs": 7000}}}
    )
    settings = WriteLockSettings.from_config(config, env={})
    assert (settings.acquire_timeout_ms, settings.stale_ms, settings.max_hold_ms) == (2000, 9000, 7000)


def test_env_wins_over_config() -> None:
    config = load_config(
        {"session": {"writeLock": {"acquireTimeoutMs": 2000, "staleMs": 9000, "maxHoldMs": 7000}}}
    )
    env = {ENV_TIMEOUT: "1500", ENV_STALE: " 4000 ", ENV_HOLD: "3000"}
    settings = WriteLockSettings.from_config(config, env=env)
    assert (settings.acquire_timeout_ms, settings.stale_ms, settings.max_hold_ms) == (1500, 4000, 3000)


def test_env_infinity_only_for_acquire_timeout() -> None:
    settings = WriteLockSettings.from_config(None, env={ENV_TIMEOUT: "Infinity", ENV_STALE: "Infinity"})
    assert settings.acquire_timeout_ms == math.inf
    assert settings.stale_ms == 1_800_000


@pytest.mark.parametrize("raw", ["0", "-5", "1.5", "10s", "abc", "", "  ", "1e3"])
def test_invalid_env_values_fall_back_to_config(raw: str) -> None:
    config = load_config({"session": {"writeLock": {"staleMs": 9000}}})
    settings = WriteLockSettings.from_config(config, env={ENV_STALE: raw})
    assert settings.stale_ms == 9000


@pytest.mark.parametrize("raw", [0, -1, 1.5, "30m", "60000", True, None, 2**53, float("nan")])
def test_invalid_config_values_fall_back_to_default(raw: object) -> None:
    config = load_config(
        {"session": {"writeLock": {"acquireTimeoutMs": raw, "staleMs": raw, "maxHoldMs": raw}}}
    )
    settings = WriteLockSettings.from_config(config, env={})
    assert (settings.acquire_timeout_ms, settings.stale_ms, settings.max_hold_ms) == (
        60_000,
        1_800_000,
        300_000,
    )


def test_environment_is_read_from_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_HOLD, "1234")
    assert WriteLockSettings.from_config().max_hold_ms == 1234


def test_direct_construction_validates() -> None:
    with pytest.raises(ConfigError, match="stale_ms"):
        WriteLockSettings(stale_ms=0)
    with pytest.raises(ConfigError, match="max_hold_ms"):
        WriteLockSettings(max_hold_ms=math.inf)  # type: ignore[arg-type]
    assert WriteLockSettings(acquire_timeout_ms=math.inf).acquire_timeout_ms == math.inf


def test_write_lock_section_must_be_an_object() -> None:
    with pytest.raises(ConfigError, match=r"session\.writeLock"):
        WriteLockSettings.from_config(load_config({"session": {"writeLock": 5}}), env={})


@pytest.mark.parametrize(
    ("run_timeout", "expected"),
    [
        (10_000, 300_000),  # below the minimum
        (600_000, 720_000),  # timeout + 120 s grace
        (math.inf, 2_147_000_000),  # infinite run: the max timer
        (3_000_000_000, 2_147_000_000),  # capped
        (-1, 420_000),  # invalid timeout counts as the minimum, plus grace
    ],
)
def test_max_hold_for_run(run_timeout: float, expected: int) -> None:
    assert WriteLockSettings.max_hold_for_run(run_timeout) == expected
