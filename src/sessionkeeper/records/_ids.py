"""
Identifiers pi writes: session ids are time-ordered UUID v7 strings (pi 0.73.1, spec §3).
"""

from __future__ import annotations

import os
import uuid


__all__ = ("uuid7",)


def uuid7(now_ms: int) -> str:
    """A time-ordered UUID v7 string for ``now_ms`` (pi 0.73.1's session ids, spec §3)."""
    rand = int.from_bytes(os.urandom(10), "big")
    value = (now_ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= ((rand >> 62) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    return str(uuid.UUID(int=value))
