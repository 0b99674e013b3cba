"""
Legacy config keys the references dropped, and the rewrite ``doctor --fix`` applies (OpenClaw spec §1.5,
§4.2, §4.3; OpenClaw ``legacy-config-migrations.runtime.session.ts``; seeds).

- ``session.maintenance.rotateBytes``: ignored (``sessions.json`` is no longer rotated); removed.
- ``session.parentForkMaxTokens``: ignored (the parent fork cap is a fixed 100 000 tokens); removed.
- ``session.idleMinutes`` (top level): still honoured as OpenClaw does (§4.2), deprecated in favour of
  ``session.reset.idleMinutes``; moved there by :func:`migrate_legacy_config` without changing the
  effective policy.

The settings classes that read these blocks warn through :func:`warn_legacy_key`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any, Final

import attrs


__all__ = (
    "LEGACY_CONFIG_KEYS",
    "LegacyConfigKey",
    "find_legacy_keys",
    "migrate_legacy_config",
    "warn_legacy_key",
)


@attrs.frozen(kw_only=True)
class LegacyConfigKey:
    """
    One legacy key of the config tree.

    Attributes:
        key: Its dotted path (``"session.maintenance.rotateBytes"``).
        replacement: The dotted path that replaces it, or ``None`` when it has no replacement.
        message: What a :class:`DeprecationWarning` and ``doctor`` say about it.
    """

    key: str
    replacement: str | None
    message: str


LEGACY_CONFIG_KEYS: Final = (
    LegacyConfigKey(
        key="session.maintenance.rotateBytes",
        replacement=None,
        message=(
            "config key 'session.maintenance.rotateBytes' is deprecated and ignored: sessions.json is no "
            "longer rotated (no replacement; `sessionkeeper doctor CONFIG --fix` removes it)"
        ),
    ),
    LegacyConfigKey(
        key="session.parentForkMaxTokens",
        replacement=None,
        message=(
            "config key 'session.parentForkMaxTokens' was removed and is ignored: parent fork sizing is "
            "automatic, with a fixed 100000-token cap (no replacement; `sessionkeeper doctor CONFIG --fix` "
            "removes it)"
        ),
    ),
    LegacyConfigKey(
        key="session.idleMinutes",
        replacement="session.reset.idleMinutes",
        message=(
            "config key 'session.idleMinutes' is deprecated; use session.reset.idleMinutes "
            "(`sessionkeeper doctor CONFIG --fix` moves it)"
        ),
    ),
)
"""Every legacy key this library knows, in the order ``doctor`` reports them."""

_BY_KEY: Final = {legacy.key: legacy for legacy in LEGACY_CONFIG_KEYS}


def warn_legacy_key(key: str, *, stacklevel: int = 3) -> None:
    """
    Issue the :class:`DeprecationWarning` of a legacy key (its message names the key and its replacement).

    Raises:
        KeyError: ``key`` is not in :data:`LEGACY_CONFIG_KEYS`.
    """
    warnings.warn(_BY_KEY[key].message, DeprecationWarning, stacklevel=stacklevel)


def _node(tree: Mapping[str, Any], dotted: str) -> Mapping[str, Any] | None:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node if isinstance(node, Mapping) else None


def find_legacy_keys(tree: Mapping[str, Any]) -> list[LegacyConfigKey]:
    """The legacy keys present in a config tree (OpenClaw's ``openclaw.json`` layout), in report order."""
    found: list[LegacyConfigKey] = []
    for legacy in LEGACY_CONFIG_KEYS:
        parent, _, leaf = legacy.key.rpartition(".")
        block = _node(tree, parent)
        if block is not None and leaf in block:
            found.append(legacy)
    return found


def _minutes(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def _migrate_session(session: Mapping[str, Any], changes: list[str]) -> dict[str, Any]:
    reset = session.get("reset")
    by_type = session.get("resetByType")
    idle = session.get("idleMinutes", None)
    movable = (
        "idleMinutes" in session
        and (idle is None or _minutes(idle))
        and (reset is None or isinstance(reset, Mapping))
    )
    new_reset: dict[str, Any] | None = None
    if movable and idle is not None:
        if reset is None and by_type is None:
            # legacy alone means idle mode (§4.2): keep that meaning explicitly
            new_reset = {"mode": "idle", "idleMinutes": idle}
            changes.append(f"Moved session.idleMinutes into session.reset (mode idle, idleMinutes {idle}).")
        elif reset is None:
            new_reset = {"idleMinutes": idle}  # resetByType decides the mode, as before
            changes.append("Moved session.idleMinutes to session.reset.idleMinutes.")
        elif reset.get("idleMinutes") is None:
            new_reset = {**reset, "idleMinutes": idle}
            changes.append("Moved session.idleMinutes to session.reset.idleMinutes.")
        else:
            changes.append("Removed session.idleMinutes (session.reset.idleMinutes already decides).")
    elif movable:
        changes.append("Removed session.idleMinutes (null).")
    out: dict[str, Any] = {}
    for key, value in session.items():
        if key == "parentForkMaxTokens":
            changes.append("Removed session.parentForkMaxTokens; parent fork sizing is automatic.")
            continue
        if key == "idleMinutes" and movable:
            if new_reset is not None and reset is None and "reset" not in session:
                out["reset"] = new_reset  # where the legacy key stood
            continue
        if key == "reset" and new_reset is not None:
            out[key] = new_reset
            continue
        if key == "maintenance" and isinstance(value, Mapping) and "rotateBytes" in value:
            out[key] = {k: v for k, v in value.items() if k != "rotateBytes"}
            changes.append("Removed deprecated session.maintenance.rotateBytes.")
            continue
        out[key] = value
    return out


def migrate_legacy_config(tree: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """
    Rewrite a config tree without its legacy keys, keeping every other key and its order.

    ``rotateBytes`` and ``parentForkMaxTokens`` are removed. ``session.idleMinutes`` moves so that the
    effective reset policy (§4.2: mode = type's ?? base's ?? ``idle`` when only the legacy key is set, else
    ``daily``; idle minutes = first of type, base, legacy) stays the same for every session type and
    channel:

    - no ``reset`` and no ``resetByType`` block: ``session.reset = {mode: "idle", idleMinutes: N}``, put
      where the legacy key stood;
    - ``resetByType`` but no ``reset``: ``session.reset = {idleMinutes: N}`` (the types keep deciding the
      mode);
    - a ``reset`` block without ``idleMinutes``: ``idleMinutes: N`` is added to it;
    - a ``reset`` block with ``idleMinutes``: the legacy key never applied and is dropped.

    A legacy ``idleMinutes`` that is not a number (or a ``reset`` that is not an object) is left in place:
    the value is invalid and is reported as such.

    Args:
        tree: The parsed config (not modified).

    Returns:
        ``(new tree, changes)``: the changes as one sentence each, empty when nothing was legacy.
    """
    changes: list[str] = []
    session = tree.get("session")
    if not isinstance(session, Mapping):
        return dict(tree), ()
    new_session = _migrate_session(session, changes)
    return {k: (new_session if k == "session" else v) for k, v in tree.items()}, tuple(changes)
