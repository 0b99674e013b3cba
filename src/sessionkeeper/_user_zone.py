"""
``agents.defaults.userTimezone``: one rule for every reader (DESIGN D12).

An absent or blank value means the host's zone; a value that is not a known IANA zone name is ignored
with a WARNING (the host's zone is used) rather than refusing the whole configuration, for the reset
policy and the memory flush alike.
"""

from __future__ import annotations

import logging
import zoneinfo


__all__ = ("USER_TIMEZONE_KEY", "user_timezone_name")

USER_TIMEZONE_KEY = "agents.defaults.userTimezone"


def user_timezone_name(value: object, *, log: logging.Logger, purpose: str) -> str | None:
    """
    The IANA zone name of ``agents.defaults.userTimezone``, or ``None`` for the host's zone (D12).

    Args:
        value: The raw config value (any JSON value).
        log: Where the WARNING for an ignored value goes (the reader's logger).
        purpose: What ignores it, for the message (``"the reset policy"``, ``"the memory flush"``).

    Returns:
        The stripped name when ``zoneinfo`` knows it; ``None`` when absent, blank, not a string or
        unknown. The last two are logged at WARNING with ``extra={"key", "value"}``; nothing raises.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    reason = "not a string"
    if isinstance(value, str):
        name = value.strip()
        try:
            zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            reason = "unknown time zone"
        else:
            return name
    log.warning(
        "ignoring %s %r for %s (%s); using the host's zone",
        USER_TIMEZONE_KEY,
        value,
        purpose,
        reason,
        extra={"key": USER_TIMEZONE_KEY, "value": repr(value)},
    )
    return None
