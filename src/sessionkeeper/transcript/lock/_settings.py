"""
Settings of the session write lock (OpenClaw spec §3, ``session.writeLock.*``).

Precedence, as OpenClaw resolves it: the environment variable, then the config value, then the
default. Environment values must be all digits and positive (``Infinity`` is also allowed for the
acquire timeout); config values must be positive safe integers. Anything else is ignored and the next
source is used (OpenClaw's behaviour: a bad value never fails the run); a warning names the key.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Mapping
from typing import Any, Final, Self

import attrs

from sessionkeeper._config import Config, setting, structure_settings
from sessionkeeper.exceptions import ConfigError


__all__ = ("WriteLockSettings",)

_log = logging.getLogger("sessionkeeper.lock")

DEFAULT_ACQUIRE_TIMEOUT_MS: Final = 60_000
DEFAULT_STALE_MS: Final = 1_800_000
DEFAULT_MAX_HOLD_MS: Final = 300_000
DEFAULT_POLL_INTERVAL_MS: Final = 50
DEFAULT_WATCHDOG_INTERVAL_MS: Final = 60_000
DEFAULT_RUN_TIMEOUT_GRACE_MS: Final = 120_000
MAX_TIMER_TIMEOUT_MS: Final = 2_147_000_000
"""OpenClaw's cap on timers (``MAX_TIMER_TIMEOUT_MS``), used for infinite run timeouts."""

_MAX_SAFE_INTEGER: Final = 2**53 - 1
_DIGITS = re.compile(r"^\d+$")

ENV_ACQUIRE_TIMEOUT_MS: Final = "OPENCLAW_SESSION_WRITE_LOCK_ACQUIRE_TIMEOUT_MS"
ENV_STALE_MS: Final = "OPENCLAW_SESSION_WRITE_LOCK_STALE_MS"
ENV_MAX_HOLD_MS: Final = "OPENCLAW_SESSION_WRITE_LOCK_MAX_HOLD_MS"


def _positive_ms(value: object, *, allow_infinity: bool) -> float | None:
    """OpenClaw's ``parsePositiveMs``: a positive safe integer (or +inf when allowed), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if math.isnan(value) or value <= 0:
        return None
    if value == math.inf:
        return math.inf if allow_infinity else None
    if isinstance(value, float) and not value.is_integer():
        return None
    if value > _MAX_SAFE_INTEGER:
        return None
    return int(value)


def _env_ms(env: Mapping[str, str], name: str, *, allow_infinity: bool) -> float | None:
    """OpenClaw's ``readPositiveMsEnv``: trimmed, ``Infinity`` or all digits and positive."""
    raw = env.get(name)
    if raw is None or not raw.strip():
        return None
    text = raw.strip()
    if text == "Infinity":
        if allow_infinity:
            return math.inf
    elif _DIGITS.match(text):
        parsed = _positive_ms(int(text), allow_infinity=allow_infinity)
        if parsed is not None:
            return parsed
    _log.warning("ignoring %s=%r: expected a positive integer of milliseconds", name, raw)
    return None


def _config_parser(default: float, *, allow_infinity: bool = False) -> Any:
    def parse(raw: object, key: str) -> float:
        parsed = _positive_ms(raw, allow_infinity=allow_infinity)
        if parsed is None:
            _log.warning("ignoring %s=%r: expected a positive integer of milliseconds", key, raw)
            return default
        return parsed

    return parse


def _check_positive(_inst: object, attribute: attrs.Attribute[Any], value: float) -> None:
    number: object = value
    if isinstance(number, bool) or not isinstance(number, int | float) or math.isnan(number) or number <= 0:
        raise ConfigError(f"must be a positive number of ms, got {value!r}", key=attribute.name)


def _check_finite_positive(inst: object, attribute: attrs.Attribute[Any], value: float) -> None:
    _check_positive(inst, attribute, value)
    if value == math.inf:
        raise ConfigError("must be finite", key=attribute.name)


@attrs.frozen(kw_only=True)
class WriteLockSettings:
    """
    How the session write lock waits, judges staleness and limits holding (OpenClaw spec §3).

    Attributes:
        acquire_timeout_ms: How long :meth:`SessionWriteLock.acquire` waits before raising
            :class:`~sessionkeeper.exceptions.SessionBusyError`, in ms (default 60000; ``math.inf``
            waits forever). Key ``session.writeLock.acquireTimeoutMs``, env
            ``OPENCLAW_SESSION_WRITE_LOCK_ACQUIRE_TIMEOUT_MS`` (``Infinity`` allowed).
        stale_ms: Age in ms after which a lock is ``too-old`` (default 1800000 = 30 min). A live
            owner is never evicted for age alone: a too-old lock is reported, not taken (DESIGN D8).
            Key ``session.writeLock.staleMs``, env ``OPENCLAW_SESSION_WRITE_LOCK_STALE_MS``.
        max_hold_ms: How long this process may hold a lock before its watchdog releases it, in ms
            (default 300000 = 5 min); written into the lock file as ``maxHoldMs``. Key
            ``session.writeLock.maxHoldMs``, env ``OPENCLAW_SESSION_WRITE_LOCK_MAX_HOLD_MS``.
        poll_interval_ms: Delay between two attempts on a lock held by another process, in ms
            (OpenClaw: 50, constant). In-process waiters are woken at once on release.
        watchdog_interval_ms: Period of the background watchdog, in ms (OpenClaw: 60000). ``0``
            starts no watchdog thread (call :meth:`SessionWriteLock.run_watchdog` yourself).
        allow_reentrant: When this process already holds the lock, a new acquire increments the
            held count instead of waiting (OpenClaw's ``allowReentrant``; default ``False``).

    Raises:
        ConfigError: A value given directly is not a positive number of ms.
    """

    acquire_timeout_ms: float = setting(
        default=DEFAULT_ACQUIRE_TIMEOUT_MS,
        parse=_config_parser(DEFAULT_ACQUIRE_TIMEOUT_MS, allow_infinity=True),
        validator=_check_positive,
    )
    stale_ms: int = setting(
        default=DEFAULT_STALE_MS, parse=_config_parser(DEFAULT_STALE_MS), validator=_check_finite_positive
    )
    max_hold_ms: int = setting(
        default=DEFAULT_MAX_HOLD_MS,
        parse=_config_parser(DEFAULT_MAX_HOLD_MS),
        validator=_check_finite_positive,
    )
    poll_interval_ms: int = attrs.field(default=DEFAULT_POLL_INTERVAL_MS, validator=_check_finite_positive)
    watchdog_interval_ms: int = attrs.field(default=DEFAULT_WATCHDOG_INTERVAL_MS)
    allow_reentrant: bool = attrs.field(default=False)

    @classmethod
    def from_config(cls, config: Config | None = None, *, env: Mapping[str, str] | None = None) -> Self:
        """
        Resolve the settings from ``session.writeLock`` and the environment (OpenClaw spec §3).

        Args:
            config: The loaded config (``None``: defaults only).
            env: The environment to read overrides from (default :data:`os.environ`).

        Returns:
            The settings: env wins over config, config over the defaults; invalid values are ignored.

        Raises:
            ConfigError: ``session.writeLock`` is present but not an object.
        """
        section = (config or Config()).section("session.writeLock")
        base = structure_settings(cls, section, prefix="session.writeLock")
        environ = os.environ if env is None else env
        overrides: dict[str, Any] = {}
        for name, variable, infinite in (
            ("acquire_timeout_ms", ENV_ACQUIRE_TIMEOUT_MS, True),
            ("stale_ms", ENV_STALE_MS, False),
            ("max_hold_ms", ENV_MAX_HOLD_MS, False),
        ):
            value = _env_ms(environ, variable, allow_infinity=infinite)
            if value is not None:
                overrides[name] = value
        return attrs.evolve(base, **overrides) if overrides else base

    @staticmethod
    def max_hold_for_run(
        run_timeout_ms: float,
        *,
        min_ms: int = DEFAULT_MAX_HOLD_MS,
        grace_ms: int = DEFAULT_RUN_TIMEOUT_GRACE_MS,
    ) -> int:
        """
        The max hold for a run with a timeout (OpenClaw ``resolveSessionLockMaxHoldFromTimeout``).

        Returns ``min(MAX_TIMER, max(min_ms, run_timeout_ms + grace_ms))`` in ms; an infinite run
        timeout gives ``MAX_TIMER`` (2147000000). Non-positive inputs fall back to the defaults
        (min 300000, grace 120000; a bad run timeout counts as ``min_ms``).
        """
        minimum = _positive_ms(min_ms, allow_infinity=False) or DEFAULT_MAX_HOLD_MS
        timeout = _positive_ms(run_timeout_ms, allow_infinity=True) or minimum
        if timeout == math.inf:
            return MAX_TIMER_TIMEOUT_MS
        grace = _positive_ms(grace_ms, allow_infinity=False) or DEFAULT_RUN_TIMEOUT_GRACE_MS
        return int(min(MAX_TIMER_TIMEOUT_MS, max(minimum, timeout + grace)))
