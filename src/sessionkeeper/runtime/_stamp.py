"""Dating the messages a host hands to the runtime (pi stamps every message when it is made)."""

from __future__ import annotations

import msgspec

from sessionkeeper.transcript import AgentMessage, AssistantMessage


__all__ = ("stamped",)


def stamped(message: AgentMessage, now_ms: int) -> AgentMessage:
    """
    The message as the runtime records it at ``now_ms`` (the runtime clock's time, ms since epoch).

    - An :class:`AssistantMessage` is dated ``now_ms``, whatever date it carries: pi's staleness rule
      (:func:`estimate_context_usage`, pi-format spec §15.1) compares a reply's ``timestamp`` with the
      date of the latest compaction, which the runtime writes by its own clock. A reply dated by another
      clock (an SDK client on the wall clock while the runtime runs on a ``FakeClock``, or a skewed host)
      made the usage of replies kept across a compaction count as fresh, or a fresh reply's usage count as
      stale. pi dates both by one clock (``Date.now()``); so does the runtime.
    - Any other message is dated ``now_ms`` only when the host left its ``timestamp`` at the records'
      default 0 (pi stamps every message when it is made; dated 1970, pi's session list would date the
      session by its header). A date the host set is kept.
    """
    if not isinstance(message, msgspec.Struct) or "timestamp" not in message.__struct_fields__:
        return message
    stamp = getattr(message, "timestamp", None)
    if isinstance(message, AssistantMessage):
        return message if stamp == now_ms else msgspec.structs.replace(message, timestamp=now_ms)
    if type(stamp) is not int or stamp != 0:
        return message
    return msgspec.structs.replace(message, timestamp=now_ms)
