"""
Compaction settings: OpenClaw's ``agents.defaults.compaction`` block and pi's ``compaction`` block.

Defaults are the references' (OpenClaw spec §5.2, pi spec §13.1), except the mode: DESIGN D4 makes
``safeguard`` the default (OpenClaw materialises ``mode: "safeguard"`` at config load too).
"""

from __future__ import annotations

from typing import Literal, Self, TypeAlias

import attrs

from sessionkeeper._config import (
    Config,
    parse_bool,
    parse_byte_size,
    parse_choice,
    parse_non_negative_int,
    parse_optional_bool,
    parse_optional_str,
    parse_positive_number,
    setting,
    structure_settings,
)
from sessionkeeper.exceptions import ConfigError


__all__ = (
    "DEFAULT_KEEP_RECENT_TOKENS",
    "DEFAULT_RESERVE_TOKENS",
    "DEFAULT_RESERVE_TOKENS_FLOOR",
    "CompactionMode",
    "CompactionSettings",
    "IdentifierPolicy",
    "QualityGuardSettings",
)

CompactionMode: TypeAlias = Literal["default", "safeguard"]
IdentifierPolicy: TypeAlias = Literal["strict", "off", "custom"]

DEFAULT_RESERVE_TOKENS = 16384
"""pi's ``DEFAULT_COMPACTION_SETTINGS.reserveTokens`` (pi spec §13.1)."""
DEFAULT_KEEP_RECENT_TOKENS = 20000
"""pi's ``DEFAULT_COMPACTION_SETTINGS.keepRecentTokens`` (pi spec §13.1)."""
DEFAULT_RESERVE_TOKENS_FLOOR = 20000
"""OpenClaw's ``reserveTokensFloor`` default (OpenClaw spec §5.2)."""

_SECTION = "agents.defaults.compaction"


def _optional_bytes(raw: object, key: str) -> int | None:
    if raw is None or raw is False:
        return None
    size = parse_byte_size(raw, key=key)
    return size or None


def _sections(raw: object, key: str) -> tuple[str, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise ConfigError("expected a list of section names", key=key)
    return tuple(raw) or None


def _clamped_turns(raw: object, key: str) -> int:
    value = parse_non_negative_int(raw, key)
    return min(value, 12)


def _history_share(raw: object, key: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0.1 <= raw <= 0.9:
        raise ConfigError(f"expected a number in [0.1, 0.9], got {raw!r}", key=key)
    return float(raw)


def _retries(raw: object, key: str) -> int:
    value = parse_non_negative_int(raw, key)
    if value > 3:
        raise ConfigError(f"at most 3 retries, got {value}", key=key)
    return value


_PARSE_MODE = parse_choice("default", "safeguard")
_PARSE_POLICY = parse_choice("strict", "off", "custom")
_PARSE_SYNC = parse_choice("off", "async", "await")


@attrs.frozen(kw_only=True)
class QualityGuardSettings:
    """
    The summary quality audit of safeguard mode (OpenClaw spec §5.6 step 6).

    Attributes:
        enabled: ``None`` (default) = on in safeguard mode, off in default mode.
        max_retries: Retries with audit feedback after a failed audit; default 1, at most 3.
    """

    enabled: bool | None = setting(default=None, parse=parse_optional_bool)
    max_retries: int = setting(default=1, parse=_retries)


def _quality_guard(raw: object, key: str) -> QualityGuardSettings:
    if isinstance(raw, bool):
        return QualityGuardSettings(enabled=raw)
    if not isinstance(raw, dict):
        raise ConfigError("expected an object", key=key)
    return structure_settings(QualityGuardSettings, raw, prefix=key)


@attrs.frozen(kw_only=True)
class CompactionSettings:
    """
    How and when transcripts are compacted.

    Built from ``agents.defaults.compaction`` (OpenClaw spec §5.2) or pi's ``settings.json``
    ``compaction`` block (pi spec §13.1; :func:`~sessionkeeper._config.load_config` maps it) with
    :meth:`from_config`. All token amounts are tokens of the chars/4 estimate (pi spec §12).

    Attributes:
        enabled: ``False`` stops threshold compaction only; overflow recovery and manual compaction
            still run (OpenClaw spec §5.2). Default ``True``.
        mode: ``"safeguard"`` (default, DESIGN D4) or ``"default"``. Both trigger alike; they differ
            only in how the summary is made. Setting :attr:`provider` forces safeguard.
        reserve_tokens: Room kept free for the prompt and the next reply; default 16384. The
            effective reserve applies :attr:`reserve_tokens_floor` and OpenClaw's caps
            (:func:`~sessionkeeper.compaction.effective_reserve_tokens`).
        reserve_tokens_floor: Minimum reserve; default 20000; ``0`` disables the floor.
        keep_recent_tokens: Budget of the recent tail kept verbatim (pi ``findCutPoint``). ``None``
            (not configured) means 20000 for threshold/overflow compaction and a strict checkpoint
            (nothing kept) for manual compaction, as OpenClaw's ``/compact`` does.
        recent_turns_preserve: Safeguard: user turns quoted verbatim after the summary; default 3,
            at most 12 (larger values are clamped).
        max_history_share: Safeguard: largest share of the window the summarised history may
            take; default 0.5, range 0.1-0.9.
        identifier_policy: ``"strict"`` (default: keep every opaque identifier verbatim), ``"off"``
            or ``"custom"`` (uses :attr:`identifier_instructions`).
        identifier_instructions: Operator text for the ``custom`` policy.
        quality_guard: The summary audit (:class:`QualityGuardSettings`).
        timeout_seconds: Upper bound of one compaction, in seconds; default 180. From config it must be
            positive and finite (NaN or Infinity raise ``ConfigError`` naming the key).
        truncate_after_compaction: Rotate to a successor transcript after compaction; default off.
        max_active_transcript_bytes: Transcript size (bytes) that forces a compaction before a turn;
            honoured only with :attr:`truncate_after_compaction`; ``None`` (default, or 0) = off.
        post_compaction_sections: AGENTS.md section names re-injected after compaction; ``None``
            = off.
        post_index_sync: ``"off" | "async" | "await"``; default ``"async"`` (host concern).
        notify_user: Tell the user a compaction happened; default ``False`` (host concern).
        model: Model id for the summariser (passed to the ``ModelClient``); ``None`` = its default.
        provider: Id of a registered :class:`~sessionkeeper.compaction.CompactionProvider`.
        custom_instructions: Extra focus for every summary (capped at 800 code points).
        thinking_level: Thinking level of summary requests; ``None`` = the client's default.
    """

    enabled: bool = setting(default=True, parse=parse_bool)
    mode: CompactionMode = setting(default="safeguard", parse=_PARSE_MODE)  # noqa: RUF009 - attrs field
    reserve_tokens: int = setting(default=DEFAULT_RESERVE_TOKENS, parse=parse_non_negative_int)
    reserve_tokens_floor: int = setting(default=DEFAULT_RESERVE_TOKENS_FLOOR, parse=parse_non_negative_int)
    keep_recent_tokens: int | None = setting(default=None, parse=parse_non_negative_int)
    recent_turns_preserve: int = setting(default=3, parse=_clamped_turns)
    max_history_share: float = setting(default=0.5, parse=_history_share)
    identifier_policy: IdentifierPolicy = setting(default="strict", parse=_PARSE_POLICY)  # noqa: RUF009 - attrs field
    identifier_instructions: str | None = setting(default=None, parse=parse_optional_str)
    quality_guard: QualityGuardSettings = setting(factory=QualityGuardSettings, parse=_quality_guard)  # noqa: RUF009 - attrs field
    timeout_seconds: float = setting(default=180.0, parse=parse_positive_number)
    truncate_after_compaction: bool = setting(default=False, parse=parse_bool)
    max_active_transcript_bytes: int | None = setting(default=None, parse=_optional_bytes)
    post_compaction_sections: tuple[str, ...] | None = setting(default=None, parse=_sections)
    post_index_sync: Literal["off", "async", "await"] = setting(default="async", parse=_PARSE_SYNC)
    notify_user: bool = setting(default=False, parse=parse_bool)
    model: str | None = setting(default=None, parse=parse_optional_str)
    provider: str | None = setting(default=None, parse=parse_optional_str)
    custom_instructions: str | None = setting(default=None, parse=parse_optional_str)
    thinking_level: str | None = setting(default=None, parse=parse_optional_str)

    @classmethod
    def from_config(cls, config: Config) -> Self:
        """
        Read ``agents.defaults.compaction`` (or a pi ``compaction`` block mapped there).

        Raises:
            ConfigError: A value is invalid; the error names the dotted key.
        """
        return structure_settings(cls, config.section(_SECTION), prefix=_SECTION)

    @property
    def effective_mode(self) -> CompactionMode:
        """The mode in force: a configured :attr:`provider` forces ``"safeguard"``."""
        return "safeguard" if self.provider else self.mode

    @property
    def resolved_keep_recent_tokens(self) -> int:
        """:attr:`keep_recent_tokens`, or pi's default 20000 when not configured."""
        return DEFAULT_KEEP_RECENT_TOKENS if self.keep_recent_tokens is None else self.keep_recent_tokens

    @property
    def quality_guard_enabled(self) -> bool:
        """Whether the audit runs: configured value, else on in safeguard mode only."""
        enabled = self.quality_guard.enabled
        return self.effective_mode == "safeguard" if enabled is None else enabled

    @property
    def active_transcript_byte_limit(self) -> int | None:
        """:attr:`max_active_transcript_bytes` when it is honoured (needs truncate_after_compaction)."""
        return self.max_active_transcript_bytes if self.truncate_after_compaction else None
