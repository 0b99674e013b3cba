"""The one config loader (DESIGN decision 4; OpenClaw spec §2.1 parsers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionkeeper._config import (
    Config,
    load_config,
    parse_byte_size,
    parse_duration_ms,
    parse_ratio,
    setting,
    structure_settings,
)
from sessionkeeper.exceptions import ConfigError


ORACLE = json.loads(
    (Path(__file__).resolve().parent.parent / "data" / "oracle" / "config_parsers.json").read_text(
        encoding="utf-8"
    )
)


@pytest.mark.parametrize(
    "case", ORACLE["cases"], ids=lambda c: f"{c['kind']}:{c['raw']!r}:{c['defaultUnit']}"
)
def test_parsers_match_openclaw(case: dict[str, Any]) -> None:
    parse = parse_duration_ms if case["kind"] == "duration" else parse_byte_size
    kwargs = {"default_unit": case["defaultUnit"]} if case["defaultUnit"] else {}
    if case["result"] is None:
        with pytest.raises(ConfigError):
            parse(case["raw"], **kwargs)
    else:
        assert parse(case["raw"], **kwargs) == case["result"]


def test_duration_rules() -> None:
    assert parse_duration_ms("1h30m") == 5_400_000
    assert parse_duration_ms("1.5h") == 5_400_000
    assert parse_duration_ms("30", default_unit="d") == 30 * 86_400_000
    assert parse_duration_ms("5", default_unit="m") == 300_000
    assert parse_duration_ms("250") == 250  # default unit: ms
    assert parse_duration_ms(" 2H ") == 7_200_000
    assert parse_duration_ms("0.0005s") == 1  # rounded half up, as Math.round
    assert parse_duration_ms("0.0004s") == 0


def test_duration_numbers_use_the_default_unit() -> None:
    assert parse_duration_ms(30, default_unit="d") == 2_592_000_000
    assert parse_duration_ms(1.5, default_unit="h") == 5_400_000
    assert parse_duration_ms(0) == 0


@pytest.mark.parametrize("bad", ["1w", "10x", "1h 30m", "1h30", "", "-1", ".5h", "\u0663\u0660d", "1e3"])
def test_duration_rejects_bad_strings(bad: str) -> None:
    with pytest.raises(ConfigError, match="duration"):
        parse_duration_ms(bad, key="session.maintenance.pruneAfter")


@pytest.mark.parametrize("bad", [True, False, None, [], {}, -1, float("nan"), float("inf")])
def test_duration_rejects_bools_and_non_numbers(bad: object) -> None:
    with pytest.raises(ConfigError) as info:
        parse_duration_ms(bad, key="agents.defaults.contextPruning.ttl")
    assert info.value.key == "agents.defaults.contextPruning.ttl"
    assert str(info.value).startswith("agents.defaults.contextPruning.ttl: ")


def test_duration_too_large_is_an_error() -> None:
    with pytest.raises(ConfigError, match="too large"):
        parse_duration_ms("999999999999999d")


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["ms", "s", "m", "h", "d"]))
def test_duration_unit_property(n: int, unit: str) -> None:
    factor = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}[unit]
    assert parse_duration_ms(f"{n}{unit}") == n * factor
    assert parse_duration_ms(str(n), default_unit=unit) == n * factor


@given(st.integers(0, 99), st.integers(0, 59), st.integers(0, 59))
def test_duration_concatenation_property(h: int, m: int, s: int) -> None:
    assert parse_duration_ms(f"{h}h{m}m{s}s") == ((h * 60 + m) * 60 + s) * 1000


def test_byte_rules() -> None:
    assert parse_byte_size("10mb") == 10 * 1024**2
    assert parse_byte_size("512k") == 524_288
    assert parse_byte_size("1.5kb") == 1536
    assert parse_byte_size("10MB") == 10 * 1024**2
    assert parse_byte_size("2tb") == 2 * 1024**4
    assert parse_byte_size("100") == 100
    assert parse_byte_size("2", default_unit="kb") == 2048
    assert parse_byte_size(1024) == 1024
    assert parse_byte_size(1.5, default_unit="k") == 1536


@pytest.mark.parametrize("bad", ["10xb", "1pb", "10 mb", "kb", "-1", "1e3"])
def test_byte_rejects_bad_units_and_shapes(bad: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_byte_size(bad, key="session.maintenance.maxDiskBytes")
    assert info.value.key == "session.maintenance.maxDiskBytes"


@pytest.mark.parametrize("bad", [True, None, [1], -5, float("inf")])
def test_byte_rejects_bools_and_non_numbers(bad: object) -> None:
    with pytest.raises(ConfigError, match="byte size"):
        parse_byte_size(bad)


def test_unknown_byte_unit_names_the_unit() -> None:
    with pytest.raises(ConfigError, match="unknown byte unit 'pb'"):
        parse_byte_size("1pb")


def test_ratio_rules() -> None:
    assert parse_ratio("80%") == pytest.approx(0.8)
    assert parse_ratio(0.3) == 0.3
    assert parse_ratio("0.5") == 0.5
    assert parse_ratio(1) == 1.0
    for bad in ("120%", -0.1, 1.5, "abc", True, None):
        with pytest.raises(ConfigError):
            parse_ratio(bad, key="agents.defaults.contextPruning.softTrimRatio")


# ---------------------------------------------------------------- settings classes


def _days(raw: object, key: str) -> int:
    return parse_duration_ms(raw, default_unit="d", key=key)


@attrs.frozen(kw_only=True)
class _Maintenance:
    mode: str = setting(default="enforce")
    prune_after_ms: int = setting(
        default=30 * 86_400_000, key="pruneAfter", parse=_days, deprecated=("pruneDays",)
    )
    max_entries: int = setting(default=500, validator=attrs.validators.ge(0))
    reserve_tokens: int = setting(default=16384, aliases=("reserve_tokens",))
    tags: tuple[str, ...] = setting(factory=tuple)


def test_structure_settings_defaults_and_camel_keys() -> None:
    assert structure_settings(_Maintenance, None, prefix="session.maintenance") == _Maintenance()
    built = structure_settings(
        _Maintenance,
        {"pruneAfter": "7d", "maxEntries": 50, "mode": "warn", "unrelated": 1, "tags": ["a"]},
        prefix="session.maintenance",
    )
    assert built == _Maintenance(mode="warn", prune_after_ms=7 * 86_400_000, max_entries=50, tags=("a",))


def test_structure_settings_aliases() -> None:
    built = structure_settings(_Maintenance, {"reserve_tokens": 100}, prefix="agents.defaults.compaction")
    assert built.reserve_tokens == 100
    # The canonical key wins when both are present.
    both = structure_settings(_Maintenance, {"reserveTokens": 1, "reserve_tokens": 2}, prefix="x")
    assert both.reserve_tokens == 1


def test_deprecated_key_warns_and_still_applies() -> None:
    with pytest.warns(DeprecationWarning, match=r"session\.maintenance\.pruneDays.*pruneAfter"):
        built = structure_settings(_Maintenance, {"pruneDays": 3}, prefix="session.maintenance")
    assert built.prune_after_ms == 3 * 86_400_000


def test_errors_name_the_dotted_key() -> None:
    with pytest.raises(ConfigError) as info:
        structure_settings(_Maintenance, {"pruneAfter": "soon"}, prefix="session.maintenance")
    assert info.value.key == "session.maintenance.pruneAfter"
    with pytest.raises(ConfigError) as info:
        structure_settings(_Maintenance, {"maxEntries": "many"}, prefix="session.maintenance")
    assert info.value.key == "session.maintenance.maxEntries"
    with pytest.raises(ConfigError) as info:
        structure_settings(_Maintenance, {"maxEntries": -1}, prefix="session.maintenance")
    assert info.value.key == "session.maintenance"
    with pytest.raises(ConfigError) as info:
        structure_settings(_Maintenance, ["not", "a", "mapping"], prefix="session.maintenance")  # type: ignore[arg-type]
    assert info.value.key == "session.maintenance"


# ---------------------------------------------------------------- Config and load_config


def test_config_sections() -> None:
    config = load_config({"session": {"maintenance": {"maxEntries": 10}, "dmScope": "main"}})
    assert config.section("session.maintenance") == {"maxEntries": 10}
    assert config.section("session.writeLock") == {}
    assert config.section("cron") == {}
    assert config.get("session.dmScope") == "main"
    assert config.get("session.missing", 5) == 5
    with pytest.raises(ConfigError) as info:
        config.section("session.dmScope")
    assert info.value.key == "session.dmScope"
    with pytest.raises(ConfigError) as info:
        config.section("session.dmScope.deeper")
    assert info.value.key == "session.dmScope"
    assert load_config().tree == {}
    assert load_config(None) == Config()


def test_pi_settings_block_maps_to_agents_defaults_compaction(tmp_path: Path) -> None:
    pi = {"compaction": {"enabled": True, "reserveTokens": 16384, "keepRecentTokens": 20000}, "theme": "dark"}
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(pi), encoding="utf-8")
    config = load_config(path)
    assert config.source == path
    assert config.section("agents.defaults.compaction") == pi["compaction"]
    assert config.get("theme") == "dark"
    assert "compaction" not in config.tree
    # An OpenClaw tree is left alone even if it has a top-level "compaction" key.
    openclaw = load_config({"agents": {"defaults": {}}, "compaction": {"x": 1}})
    assert openclaw.section("agents.defaults.compaction") == {}


def test_load_config_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"session": ', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.json:1:13: not valid JSON5"):
        load_config(bad)
    array = tmp_path / "array.json"
    array.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ConfigError, match="must be a JSON object"):
        load_config(array)
    assert bad.read_text(encoding="utf-8") == '{"session": '  # never modified


def test_config_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="pruneAfter"):
        parse_duration_ms("x", key="session.maintenance.pruneAfter")
