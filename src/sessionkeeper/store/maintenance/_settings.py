"""
``session.maintenance`` settings (OpenClaw spec §2.1) with the loader of ``_config``.

Keys and defaults: ``mode`` ``"enforce"``, ``pruneAfter`` 30 days (bare numbers are days; legacy
``pruneDays``), ``maxEntries`` 500, ``resetArchiveRetention`` = ``pruneAfter`` (``false`` disables it),
``maxDiskBytes`` unset (bare numbers are bytes), ``highWaterBytes`` 80 % of ``maxDiskBytes``. The
model-run probe retention is a fixed 24 h. ``rotateBytes`` is ignored (OpenClaw stopped rotating
``sessions.json``), with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

import math
from typing import Any, Final, Literal, Self

import attrs

from sessionkeeper._config import Config, parse_byte_size, parse_duration_ms, setting, structure_settings
from sessionkeeper.exceptions import ConfigError
from sessionkeeper.store._legacy_config import warn_legacy_key


__all__ = (
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_PRUNE_AFTER_MS",
    "MODEL_RUN_PRUNE_AFTER_MS",
    "MaintenanceMode",
    "MaintenanceSettings",
    "entry_high_water",
)

MaintenanceMode = Literal["enforce", "warn"]

DEFAULT_PRUNE_AFTER_MS: Final = 30 * 86_400_000
"""``pruneAfter`` default: 30 days (spec §2.1)."""

DEFAULT_MAX_ENTRIES: Final = 500
"""``maxEntries`` default (spec §2.1)."""

MODEL_RUN_PRUNE_AFTER_MS: Final = 24 * 3_600_000
"""Retention of ``agent:<id>:explicit:model-run-<uuid>`` probes: 24 h, not configurable (spec §2.1)."""


def _parse_mode(value: object, key: str) -> MaintenanceMode:
    if value == "enforce":
        return "enforce"
    if value == "warn":
        return "warn"
    raise ConfigError(f"expected 'enforce' or 'warn', got {value!r}", key=key)


def _disabled(value: object) -> bool:
    if value is False:
        return True
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value <= 0
    return isinstance(value, str) and value.strip().startswith("-")


def _parse_prune_after(value: object, key: str) -> int | None:
    # DESIGN D6 / field report B18: 0, a negative value or false disables age pruning (OpenClaw 7.35
    # would prune every entry at once).
    if value is None or _disabled(value):
        return None
    ms = parse_duration_ms(value, default_unit="d", key=key)
    return ms if ms > 0 else None


def _parse_retention(value: object, key: str) -> int | None:
    if value is None or _disabled(value):
        return None
    return parse_duration_ms(value, default_unit="d", key=key)


def _parse_bytes(value: object, key: str) -> int | None:
    if value is None or value is False:
        return None
    return parse_byte_size(value, default_unit="b", key=key)


def _parse_max_entries(value: object, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"expected a whole number of entries, got {value!r}", key=key)
    if value < 0 or int(value) != value:
        raise ConfigError(f"expected a non-negative whole number, got {value!r}", key=key)
    return int(value)


def entry_high_water(max_entries: int) -> int:
    """
    The batched high-water mark of entry maintenance (``resolveSessionEntryMaintenanceHighWater``, §2.2).

    ``maxEntries <= 0``: 1; ``<= 49``: ``maxEntries + 1``; otherwise ``maxEntries + max(25,
    ceil(10 % of maxEntries))`` (550 for the default 500). A store write prunes by count only when the
    store holds at least this many entries.
    """
    if max_entries <= 0:
        return 1
    if max_entries <= 49:
        return max_entries + 1
    return max_entries + max(25, math.ceil(max_entries * 0.1))


@attrs.frozen(kw_only=True)
class MaintenanceSettings:
    """
    Store maintenance settings: ``session.maintenance`` (OpenClaw spec §2.1).

    Attributes:
        mode: ``"enforce"`` (default) applies removals; ``"warn"`` only reports them.
        prune_after_ms: Entries whose ``updatedAt`` is older than this are removed (ms; default 30 days;
            ``pruneAfter``, bare numbers in days; legacy ``pruneDays``). ``None`` (config ``0``, negative
            or ``false``) disables age pruning (DESIGN D6, field report B18).
        max_entries: Entry cap (default 500). A store write applies it only at the high-water mark
            (:func:`entry_high_water`); ``sessions cleanup`` always applies it.
        reset_archive_retention_ms: ``*.reset.<stamp>`` archives older than this are deleted (ms;
            default: ``prune_after_ms``; ``None`` keeps them forever).
        max_disk_bytes: Budget of the sessions directory in bytes, or ``None`` (default) for no budget.
        high_water_bytes: Target after budget cleanup in bytes; ``None`` means 80 % of
            ``max_disk_bytes`` (see :attr:`resolved_high_water_bytes`).
        model_run_prune_after_ms: Retention of model-run probe entries: 24 h (not read from config).
    """

    mode: MaintenanceMode = setting(default="enforce", parse=_parse_mode)  # noqa: RUF009 - field specifier
    prune_after_ms: int | None = setting(
        default=DEFAULT_PRUNE_AFTER_MS, key="pruneAfter", parse=_parse_prune_after, deprecated=("pruneDays",)
    )
    max_entries: int = setting(default=DEFAULT_MAX_ENTRIES, key="maxEntries", parse=_parse_max_entries)
    reset_archive_retention_ms: int | None = setting(
        default=attrs.Factory(lambda self: self.prune_after_ms, takes_self=True),
        key="resetArchiveRetention",
        parse=_parse_retention,
    )
    max_disk_bytes: int | None = setting(default=None, key="maxDiskBytes", parse=_parse_bytes)
    high_water_bytes: int | None = setting(default=None, key="highWaterBytes", parse=_parse_bytes)
    model_run_prune_after_ms: int = attrs.field(default=MODEL_RUN_PRUNE_AFTER_MS, kw_only=True)

    @property
    def resolved_high_water_bytes(self) -> int | None:
        """
        The effective high-water target (``resolveHighWaterBytes``, spec §2.1), in bytes.

        ``None`` without ``max_disk_bytes``; 0 when the budget is 0; an explicit value capped at the
        budget; otherwise ``floor(0.8 x max_disk_bytes)`` clamped to ``[1, max_disk_bytes]``.
        """
        if self.max_disk_bytes is None:
            return None
        if self.high_water_bytes is not None:
            return min(self.high_water_bytes, self.max_disk_bytes)
        if self.max_disk_bytes <= 0:
            return 0
        return max(1, min(self.max_disk_bytes, math.floor(self.max_disk_bytes * 0.8)))

    @classmethod
    def from_config(cls, config: Config) -> Self:
        """
        Read ``session.maintenance`` from the config tree.

        Raises:
            ConfigError: A value cannot be parsed (the key is named). (OpenClaw silently falls back to the
                default; a typed error is clearer.)
        """
        section = config.section("session.maintenance")
        return cls.from_mapping(section)

    @classmethod
    def from_mapping(cls, section: Any) -> Self:
        """Build settings from the ``session.maintenance`` block itself (camelCase keys)."""
        if isinstance(section, dict) and "rotateBytes" in section:
            warn_legacy_key("session.maintenance.rotateBytes", stacklevel=4)
        if isinstance(section, dict) and None in section.values():
            # OpenClaw reads every key with ``??`` / normalizeStringifiedOptionalString: a null is unset (the
            # default, or ``pruneDays`` for ``pruneAfter``), never "disabled" (a null pruneAfter must not
            # silently turn age pruning off).
            section = {k: v for k, v in section.items() if v is not None}
        if isinstance(section, dict) and "pruneAfter" in section and "pruneDays" in section:
            section = {k: v for k, v in section.items() if k != "pruneDays"}
        return structure_settings(cls, section, prefix="session.maintenance")

    def to_json(self) -> dict[str, Any]:
        """OpenClaw's resolved form (``resolveMaintenanceConfigFromInput``), ms and bytes."""
        return {
            "mode": self.mode,
            "pruneAfterMs": self.prune_after_ms,
            "maxEntries": self.max_entries,
            "modelRunPruneAfterMs": self.model_run_prune_after_ms,
            "resetArchiveRetentionMs": self.reset_archive_retention_ms,
            "maxDiskBytes": self.max_disk_bytes,
            "highWaterBytes": self.resolved_high_water_bytes,
        }
