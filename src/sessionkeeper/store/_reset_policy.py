"""
The reset policy (OpenClaw spec §4.2, §4.3): the daily boundary (``atHour`` in a time zone), the idle
limit, per-type and per-channel overrides and the reset triggers, from ``session.*`` config. How a
session is judged with it (freshness, resolution) is in ``_reset``.
"""

from __future__ import annotations

import datetime as _dt
import logging
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import attrs

from sessionkeeper._config import Config
from sessionkeeper._user_zone import user_timezone_name
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.store._legacy_config import warn_legacy_key


_log = logging.getLogger("sessionkeeper.store")

__all__ = (
    "DEFAULT_RESET_AT_HOUR",
    "DEFAULT_RESET_TRIGGERS",
    "EffectiveResetPolicy",
    "ResetMode",
    "ResetPolicy",
    "ResetRule",
    "ResetType",
    "normalize_at_hour",
    "number_or_none",
)

DEFAULT_RESET_AT_HOUR: Final = 4
"""Daily reset hour (local time) when none is configured (spec §4.2)."""

DEFAULT_RESET_TRIGGERS: Final = ("/new", "/reset")
"""``session.resetTriggers`` default (spec §4.3)."""

ResetMode = Literal["daily", "idle"]
ResetType = Literal["direct", "group", "thread"]


def number_or_none(value: object) -> float | None:
    """A finite number (bool excluded) as a float, else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def normalize_at_hour(value: object) -> int:
    """``atHour`` floored and clamped to 0-23; not a finite number: :data:`DEFAULT_RESET_AT_HOUR`."""
    number = number_or_none(value)
    if number is None:
        return DEFAULT_RESET_AT_HOUR
    return min(23, max(0, math.floor(number)))


@attrs.frozen(kw_only=True)
class ResetRule:
    """
    One reset block (``session.reset``, ``session.resetByType.<type>``, ``session.resetByChannel.<ch>``).

    Attributes:
        mode: ``"daily"`` or ``"idle"``; ``None`` inherits.
        at_hour: Local hour of the daily reset (floored, clamped to 0-23; invalid means 4); ``None`` inherits.
        idle_minutes: Minutes without interaction before an idle reset (floored, >= 0; 0 never expires);
            ``None`` inherits.
    """

    mode: ResetMode | None = None
    at_hour: object = None
    idle_minutes: float | None = None

    @classmethod
    def from_mapping(cls, raw: object, *, key: str) -> Self:
        """Parse a reset block (camelCase keys ``mode``, ``atHour``, ``idleMinutes``)."""
        if not isinstance(raw, Mapping):
            raise ConfigError(f"expected an object, got {type(raw).__name__}", key=key)
        mode = raw.get("mode")
        if mode is not None and mode not in ("daily", "idle"):
            raise ConfigError(f"expected 'daily' or 'idle', got {mode!r}", key=f"{key}.mode")
        idle = raw.get("idleMinutes")
        if idle is not None and number_or_none(idle) is None:
            raise ConfigError(f"expected a number of minutes, got {idle!r}", key=f"{key}.idleMinutes")
        at_hour: object = raw.get("atHour")
        return cls(mode=mode, at_hour=at_hour, idle_minutes=number_or_none(idle))


@attrs.frozen(kw_only=True)
class EffectiveResetPolicy:
    """
    The policy that applies to one session (``resolveSessionResetPolicy``, spec §4.2).

    Attributes:
        mode: ``daily`` or ``idle``.
        at_hour: Daily reset hour, 0-23 (local time of the policy's zone).
        idle_minutes: Idle expiry in minutes, or ``None`` (no idle expiry). 0 never expires.
        configured: Some reset block or the legacy ``session.idleMinutes`` exists.
    """

    mode: ResetMode
    at_hour: int
    idle_minutes: int | None
    configured: bool


def _local_zone() -> _dt.tzinfo:
    name = os.environ.get("TZ", "").lstrip(":")
    try:
        if name:
            return ZoneInfo(name)
        with open("/etc/localtime", "rb") as fh:  # noqa: PTH123 - ZoneInfo.from_file wants a binary file
            return ZoneInfo.from_file(fh)
    except (OSError, ValueError, ZoneInfoNotFoundError):
        return _dt.UTC


def _parse_zone(value: object, key: str) -> _dt.tzinfo | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"expected an IANA time zone name, got {value!r}", key=key)
    try:
        return ZoneInfo(value.strip())
    except (ZoneInfoNotFoundError, ValueError) as err:
        raise ConfigError(f"unknown time zone {value!r}", key=key) from err


def _user_zone(value: object) -> _dt.tzinfo | None:
    """``agents.defaults.userTimezone`` as a zone; ``None`` (host zone) when absent or unknown (D12)."""
    name = user_timezone_name(value, log=_log, purpose="the reset policy")
    return ZoneInfo(name) if name else None


@attrs.frozen(kw_only=True)
class ResetPolicy:
    """
    Reset settings: the ``session`` block's reset keys (OpenClaw spec §4.2).

    Attributes:
        reset: ``session.reset`` (default: none, which means daily at 04:00).
        reset_by_type: ``session.resetByType``: ``direct`` (alias ``dm``), ``group``, ``thread``; ``None``
            when absent (an empty block still counts as an explicit reset config, as in OpenClaw).
        reset_by_channel: ``session.resetByChannel.<channel>``; replaces ``reset`` and ``reset_by_type``
            wholesale for that channel.
        idle_minutes: Legacy top-level ``session.idleMinutes``.
        time_zone: IANA zone of the daily boundary (``session.timeZone``, our addition, else
            ``agents.defaults.userTimezone``, D12); ``None`` uses the host's zone (``$TZ`` or
            ``/etc/localtime``), as OpenClaw 2026.7.35 does.
        reset_triggers: ``session.resetTriggers``, default ``("/new", "/reset")``.
    """

    reset: ResetRule | None = None
    reset_by_type: Mapping[str, ResetRule] | None = None
    reset_by_channel: Mapping[str, ResetRule] = attrs.field(factory=dict)
    idle_minutes: float | None = None
    time_zone: _dt.tzinfo | None = None
    reset_triggers: tuple[str, ...] = DEFAULT_RESET_TRIGGERS

    @classmethod
    def from_config(cls, config: Config) -> Self:
        """
        Read the policy from the ``session`` section; the zone falls back to
        ``agents.defaults.userTimezone`` (D12). Raises :class:`ConfigError` naming the key.
        """
        user_timezone = config.section("agents.defaults").get("userTimezone")
        return cls.from_mapping(config.section("session"), user_timezone=user_timezone)

    @classmethod
    def from_mapping(cls, session: Mapping[str, Any], *, user_timezone: object = None) -> Self:
        """
        Build the policy from a ``session`` block (camelCase keys).

        The daily boundary's zone is ``session.timeZone``, else ``user_timezone`` (OpenClaw's
        ``agents.defaults.userTimezone``; deviation D12: OpenClaw 2026.7.35 always uses the host's zone,
        later versions use this one), else the host's zone. A ``userTimezone`` that is not a known IANA
        zone is ignored with a warning (OpenClaw falls back the same way); a bad ``session.timeZone``
        raises.

        The legacy top-level ``idleMinutes`` is honoured as OpenClaw does, with a :class:`DeprecationWarning`
        (use ``session.reset.idleMinutes``); the removed ``parentForkMaxTokens`` is ignored with one.

        Raises:
            ConfigError: A value cannot be parsed (the dotted key is named).
        """
        by_type: dict[str, ResetRule] | None = None
        raw_types = session.get("resetByType")
        if raw_types is not None:
            if not isinstance(raw_types, Mapping):
                raise ConfigError("expected an object", key="session.resetByType")
            by_type = {}
            for name, block in raw_types.items():
                if block is not None:
                    by_type[str(name)] = ResetRule.from_mapping(block, key=f"session.resetByType.{name}")
        by_channel: dict[str, ResetRule] = {}
        raw_channels = session.get("resetByChannel")
        if raw_channels is not None:
            if not isinstance(raw_channels, Mapping):
                raise ConfigError("expected an object", key="session.resetByChannel")
            for name, block in raw_channels.items():
                if block is not None:
                    rule = ResetRule.from_mapping(block, key=f"session.resetByChannel.{name}")
                    by_channel[str(name).strip().lower()] = rule
        legacy = session.get("idleMinutes")
        if legacy is not None and number_or_none(legacy) is None:
            raise ConfigError(f"expected a number of minutes, got {legacy!r}", key="session.idleMinutes")
        if legacy is not None:
            warn_legacy_key("session.idleMinutes")
        if "parentForkMaxTokens" in session:
            warn_legacy_key("session.parentForkMaxTokens")
        triggers = session.get("resetTriggers", DEFAULT_RESET_TRIGGERS)
        if not isinstance(triggers, Sequence) or isinstance(triggers, str):
            raise ConfigError("expected a list of strings", key="session.resetTriggers")
        reset_raw = session.get("reset")
        return cls(
            reset=ResetRule.from_mapping(reset_raw, key="session.reset") if reset_raw is not None else None,
            reset_by_type=by_type,
            reset_by_channel=by_channel,
            idle_minutes=number_or_none(legacy),
            time_zone=_parse_zone(session.get("timeZone"), "session.timeZone") or _user_zone(user_timezone),
            reset_triggers=tuple(str(t) for t in triggers if str(t).strip()),
        )

    @property
    def zone(self) -> _dt.tzinfo:
        """The zone of the daily boundary: :attr:`time_zone`, else the host's."""
        return self.time_zone if self.time_zone is not None else _local_zone()

    def resolve(self, reset_type: ResetType, *, channel: str | None = None) -> EffectiveResetPolicy:
        """
        The effective policy for a session type and channel (``resolveSessionResetPolicy``, §4.2).

        ``mode`` = type's ?? base's ?? (``idle`` when only the legacy ``idleMinutes`` is set, else
        ``daily``); ``idle_minutes`` = first defined of type, base, legacy (floored, >= 0; 0 for ``idle``
        mode without any); ``at_hour`` floored and clamped, default 4.
        """
        override = self.reset_by_channel.get(channel.strip().lower()) if channel and channel.strip() else None
        base = override if override is not None else self.reset
        typed: ResetRule | None = None
        if override is None:
            by_type = self.reset_by_type or {}
            typed = by_type.get(reset_type)
            if typed is None and reset_type == "direct":
                typed = by_type.get("dm")
        has_explicit = base is not None or self.reset_by_type is not None  # JS: a {} block is truthy
        legacy = None if override is not None else self.idle_minutes
        configured = base is not None or typed is not None or legacy is not None
        mode: ResetMode = (
            (typed.mode if typed else None)
            or (base.mode if base else None)
            or ("idle" if not has_explicit and legacy is not None else "daily")
        )
        at_hour_raw: object = DEFAULT_RESET_AT_HOUR
        if typed is not None and typed.at_hour is not None:
            at_hour_raw = typed.at_hour
        elif base is not None and base.at_hour is not None:
            at_hour_raw = base.at_hour
        at_hour = normalize_at_hour(at_hour_raw)
        candidates = (typed.idle_minutes if typed else None, base.idle_minutes if base else None, legacy)
        idle_raw = next((v for v in candidates if v is not None), None)
        idle: int | None = 0 if mode == "idle" else None
        if idle_raw is not None:
            idle = max(0, math.floor(idle_raw))
        return EffectiveResetPolicy(mode=mode, at_hour=at_hour, idle_minutes=idle, configured=configured)
