"""Dating the messages a host hands to the runtime (pi stamps every message when it is made)."""

from __future__ import annotations

import msgspec

from sessionkeeper.transcript import AgentMessage


__all__ = ("stamped",)


def stamped(message: AgentMessage, now_ms: int) -> AgentMessage:
    """
    The message, dated now when the host left its ``timestamp`` at the records' default 0 (pi stamps every
    message when it is made). A reply dated 1970 reads as older than any compaction, so its provider usage
    would never count again (pi's staleness rule, :func:`estimate_context_usage`), and pi's session list
    would date the session by its header.
    """
    if not isinstance(message, msgspec.Struct) or "timestamp" not in message.__struct_fields__:
        return message
    stamp = getattr(message, "timestamp", None)
    if type(stamp) is not int or stamp != 0:
        return message
    return msgspec.structs.replace(message, timestamp=now_ms)
