"""
Non-finite numbers in the compaction settings are config errors naming the key (issue 16).

JSON5 configs can spell ``NaN`` and ``Infinity``. ``timeoutSeconds`` was checked with ``raw <= 0``, which
NaN passes (a NaN deadline for every compaction); the integer settings crashed with a bare
``ValueError``/``OverflowError`` from ``int()`` instead of a ``ConfigError``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from sessionkeeper import load_config
from sessionkeeper.compaction import CompactionSettings
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.runtime import MemoryFlushSettings


@pytest.mark.parametrize("literal", ["NaN", "Infinity"])
@pytest.mark.parametrize("key", ["timeoutSeconds", "reserveTokens", "reserveTokensFloor", "keepRecentTokens"])
def test_non_finite_compaction_numbers_raise_config_error(tmp_path: Path, key: str, literal: str) -> None:
    file = tmp_path / "openclaw.json5"
    file.write_text(f"{{agents: {{defaults: {{compaction: {{{key}: {literal}}}}}}}}}")
    config = load_config(file)
    with pytest.raises(ConfigError, match=re.escape(f"agents.defaults.compaction.{key}")) as raised:
        CompactionSettings.from_config(config)
    assert "expected a" in str(raised.value)  # the rule, not a conversion crash wrapped by the loader


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_non_finite_soft_threshold_raises_config_error(value: float) -> None:
    config = load_config(
        {"agents": {"defaults": {"compaction": {"memoryFlush": {"softThresholdTokens": value}}}}}
    )
    key = "agents.defaults.compaction.memoryFlush.softThresholdTokens"
    with pytest.raises(ConfigError, match=re.escape(key)) as raised:
        MemoryFlushSettings.from_config(config)
    assert "expected a non-negative number" in str(raised.value)


def test_finite_timeout_still_accepted(tmp_path: Path) -> None:
    file = tmp_path / "openclaw.json5"
    file.write_text("{agents: {defaults: {compaction: {timeoutSeconds: 2.5, reserveTokens: 1e4}}}}")
    settings = CompactionSettings.from_config(load_config(file))
    assert (settings.timeout_seconds, settings.reserve_tokens) == (2.5, 10000)
