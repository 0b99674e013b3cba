"""
Context-pruning settings: ``agents.defaults.contextPruning.*`` (OpenClaw spec §7, ``settings.ts``).

Keys, units and defaults are OpenClaw 2026.7.35's (``DEFAULT_CONTEXT_PRUNING_SETTINGS``): ``mode``
(config default ``"off"``), ``ttl`` (a duration, bare numbers in **minutes**, default 5m),
``keepLastAssistants`` 3, ``softTrimRatio`` 0.3, ``hardClearRatio`` 0.5 (both clamped to 0..1),
``minPrunableToolChars`` 50000, ``softTrim {maxChars 4000, headChars 1500, tailChars 1500}``,
``hardClear {enabled true, placeholder "[Old tool result content cleared]"}`` and
``tools {allow, deny}`` globs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal, Self

import attrs

from sessionkeeper._config import (
    Config,
    parse_bool,
    parse_duration_ms,
    parse_finite_number,
    parse_ratio_text,
    setting,
    structure_settings,
)
from sessionkeeper.exceptions import ConfigError


__all__ = (
    "DEFAULT_HARD_CLEAR_PLACEHOLDER",
    "CacheRetention",
    "HardClearSettings",
    "PruningMode",
    "PruningSettings",
    "SoftTrimSettings",
    "ToolMatchSettings",
    "default_ttl_ms_for_cache_retention",
    "make_tool_predicate",
)

PruningMode = Literal["off", "cache-ttl"]
CacheRetention = Literal["none", "short", "long"]

DEFAULT_HARD_CLEAR_PLACEHOLDER: Final = "[Old tool result content cleared]"
_SECTION: Final = "agents.defaults.contextPruning"
_SHORT_TTL_MS: Final = 5 * 60_000
_LONG_TTL_MS: Final = 60 * 60_000


def default_ttl_ms_for_cache_retention(retention: CacheRetention | None) -> int:
    """
    The pruning TTL that matches a provider's prompt-cache retention, in ms.

    ``"long"`` (Anthropic's 1-hour cache) gives 1h; ``"short"``, ``"none"`` and ``None`` give the
    5-minute default (OpenClaw spec §7; the Anthropic plugin writes ``ttl: "1h"`` for its auth).
    """
    return _LONG_TTL_MS if retention == "long" else _SHORT_TTL_MS


def _clamped_int(value: object, key: str) -> int:
    """``Math.max(0, Math.floor(v))`` as OpenClaw's ``computeEffectiveSettings``."""
    return max(0, math.floor(parse_finite_number(value, key)))


def _clamped_ratio(value: object, key: str) -> float:
    """``Math.min(1, Math.max(0, v))``; a ``"30%"`` string is accepted too."""
    if isinstance(value, str):
        value = parse_ratio_text(value, key=key, example=0.3)
    return min(1.0, max(0.0, parse_finite_number(value, key)))


def _ttl(value: object, key: str) -> int:
    return parse_duration_ms(value, default_unit="m", key=key)


def _mode(value: object, key: str) -> PruningMode:
    if not isinstance(value, str):
        raise ConfigError(f"expected 'off' or 'cache-ttl', got {value!r}", key=key)
    # OpenClaw: any mode other than "cache-ttl" disables pruning.
    return "cache-ttl" if value == "cache-ttl" else "off"


def _globs(value: object, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ConfigError(f"expected a list of tool-name globs, got {value!r}", key=key)
    for item in value:
        if not isinstance(item, str):
            raise ConfigError(f"expected tool-name globs (strings), got {item!r}", key=key)
    return tuple(value)


def _placeholder(value: object, key: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"expected a string, got {value!r}", key=key)
    # OpenClaw keeps the default when the configured placeholder is blank, and trims it.
    return value.strip() or DEFAULT_HARD_CLEAR_PLACEHOLDER


@attrs.frozen(kw_only=True)
class SoftTrimSettings:
    """
    Soft trim of an old tool result (``contextPruning.softTrim``).

    Attributes:
        max_chars: Results whose joined text is at most this many UTF-16 units stay whole (4000).
        head_chars: UTF-16 units kept from the start (1500).
        tail_chars: UTF-16 units kept from the end (1500).
    """

    max_chars: int = setting(default=4000, parse=_clamped_int)
    head_chars: int = setting(default=1500, parse=_clamped_int)
    tail_chars: int = setting(default=1500, parse=_clamped_int)


@attrs.frozen(kw_only=True)
class HardClearSettings:
    """
    Hard clear of old tool results (``contextPruning.hardClear``).

    Attributes:
        enabled: Whether hard clearing runs at all (default ``True``).
        placeholder: The text that replaces a cleared result's content.
    """

    enabled: bool = setting(default=True, parse=parse_bool)
    placeholder: str = setting(default=DEFAULT_HARD_CLEAR_PLACEHOLDER, parse=_placeholder)


@attrs.frozen(kw_only=True)
class ToolMatchSettings:
    """
    Which tools' results may be pruned (``contextPruning.tools``).

    Globs are matched case-insensitively, ``*`` is the only wildcard. A deny match excludes the tool;
    an empty ``allow`` allows every other tool; otherwise the tool must match ``allow``.

    Attributes:
        allow: Tool-name globs whose results may be pruned (empty: all).
        deny: Tool-name globs whose results are never pruned.
    """

    allow: tuple[str, ...] = setting(default=(), parse=_globs)
    deny: tuple[str, ...] = setting(default=(), parse=_globs)


def _sub(cls: type[Any], key: str) -> Any:
    def parse(value: object, dotted: str) -> Any:
        if not isinstance(value, Mapping):
            raise ConfigError(f"expected an object, got {type(value).__name__}", key=dotted)
        return structure_settings(cls, value, prefix=dotted)

    return setting(factory=cls, key=key, parse=parse)


@attrs.frozen(kw_only=True)
class PruningSettings:
    """
    Settings of the cache-TTL context pruner (``agents.defaults.contextPruning``, OpenClaw spec §7).

    One default, whichever way the settings are built: pruning is **off** (OpenClaw 2026.7.35's
    config default, ``docs/concepts/session-pruning.md``: "Default (disabled)"). ``PruningSettings()``
    and :meth:`from_config` on a config without ``mode`` both give ``mode="off"``; every other field
    is OpenClaw's effective default once pruning is enabled, so ``PruningSettings(mode="cache-ttl")``
    equals ``from_config`` of ``{"mode": "cache-ttl"}``.

    Attributes:
        mode: ``"cache-ttl"`` prunes; ``"off"`` (the default, or any other configured value) never
            prunes.
        ttl_ms: Prune only when the prompt cache was last touched at least this long ago, in ms
            (config key ``ttl``; bare numbers are minutes; default 5 minutes; ``0`` never prunes).
        keep_last_assistants: Everything from the N-th last assistant message on is protected (3).
        soft_trim_ratio: Soft trim starts when context chars / (window tokens x 4) reaches this (0.3).
        hard_clear_ratio: Hard clear runs while the ratio is at least this (0.5).
        min_prunable_tool_chars: Hard clear only when the prunable tool results weigh at least this
            many chars (50000).
        soft_trim: Head/tail sizes of a soft trim.
        hard_clear: Whether and with what placeholder results are cleared.
        tools: Which tools' results may be pruned.
    """

    mode: PruningMode = setting(default="off", parse=_mode)  # noqa: RUF009 - field specifier
    ttl_ms: int = setting(default=_SHORT_TTL_MS, key="ttl", parse=_ttl)
    keep_last_assistants: int = setting(default=3, parse=_clamped_int)
    soft_trim_ratio: float = setting(default=0.3, parse=_clamped_ratio)
    hard_clear_ratio: float = setting(default=0.5, parse=_clamped_ratio)
    min_prunable_tool_chars: int = setting(default=50_000, parse=_clamped_int)
    soft_trim: SoftTrimSettings = _sub(SoftTrimSettings, "softTrim")  # noqa: RUF009 - field specifier
    hard_clear: HardClearSettings = _sub(HardClearSettings, "hardClear")  # noqa: RUF009 - field specifier
    tools: ToolMatchSettings = _sub(ToolMatchSettings, "tools")  # noqa: RUF009 - field specifier

    @classmethod
    def from_config(
        cls,
        config: Config,
        *,
        anthropic_auth: bool = False,
        cache_retention: CacheRetention | None = None,
    ) -> Self:
        """
        Build the settings from ``agents.defaults.contextPruning`` of a loaded config.

        Args:
            config: The loaded configuration (:func:`sessionkeeper._config.load_config`).
            anthropic_auth: The host runs with Anthropic credentials: when ``mode`` is not configured,
                pruning is switched on (``cache-ttl``) with a default ``ttl`` of 1h, as OpenClaw's
                Anthropic plugin does (``applyAnthropicConfigDefaults``).
            cache_retention: The provider's prompt-cache retention; when ``ttl`` is not configured it
                picks the default TTL (``"long"`` = 1h, otherwise 5m). Takes precedence over the
                ``anthropic_auth`` default.

        Returns:
            The settings; ``mode`` is ``"off"`` when the section does not enable pruning.

        Raises:
            ConfigError: A value could not be parsed; ``key`` names it.
        """
        section = dict(config.section(_SECTION))
        if "mode" not in section:
            section["mode"] = "cache-ttl" if anthropic_auth else "off"
            if anthropic_auth and "ttl" not in section and cache_retention is None:
                section["ttl"] = "1h"
        if "ttl" not in section and cache_retention is not None:
            section["ttl"] = default_ttl_ms_for_cache_retention(cache_retention) / 60_000
        return structure_settings(cls, section, prefix=_SECTION)

    def is_tool_prunable(self, tool_name: str) -> bool:
        """Whether results of ``tool_name`` may be pruned under :attr:`tools` (deny first)."""
        return make_tool_predicate(self.tools)(tool_name)


def _compile(globs: tuple[str, ...]) -> tuple[re.Pattern[str] | str | None, ...]:
    compiled: list[re.Pattern[str] | str | None] = []
    for raw in globs:
        glob = raw.strip().lower()
        if not glob:
            continue  # OpenClaw drops empty exact patterns
        if glob == "*":
            compiled.append(None)  # matches everything
        elif "*" not in glob:
            compiled.append(glob)
        else:
            compiled.append(re.compile("^" + ".*".join(re.escape(p) for p in glob.split("*")) + "$"))
    return tuple(compiled)


def _matches(name: str, patterns: tuple[re.Pattern[str] | str | None, ...]) -> bool:
    for pattern in patterns:
        if pattern is None:
            return True
        if isinstance(pattern, str):
            if name == pattern:
                return True
        elif pattern.match(name):
            return True
    return False


def make_tool_predicate(tools: ToolMatchSettings) -> Callable[[str], bool]:
    """
    Compile OpenClaw's ``makeToolPrunablePredicate`` for ``tools``.

    Names and globs are trimmed and lowercased; a deny match wins; an empty allow list allows all.
    """
    deny = _compile(tools.deny)
    allow = _compile(tools.allow)

    def predicate(tool_name: str) -> bool:
        name = tool_name.strip().lower()
        if _matches(name, deny):
            return False
        return not allow or _matches(name, allow)

    return predicate
