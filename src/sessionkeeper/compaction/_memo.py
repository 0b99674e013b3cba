"""
A memo of pi's per-message token estimate, keyed by message identity.

Planning runs before every model call on the same (immutable, cached) message objects of a loaded
transcript, and each plan looks at many messages several times (cut walk, kept tail, chunk plans).
:func:`message_tokens` returns :func:`~sessionkeeper.transcript.estimate_tokens` (pi spec §12, exact)
and remembers it for that very object: a hit requires the same object (``is``), so a recycled ``id``
can never return a stale count. At most :data:`MEMO_SIZE` messages are remembered; the oldest half is
dropped when it is full. :func:`clear_token_memo` empties it.
"""

from __future__ import annotations

from sessionkeeper.transcript import AgentMessage, estimate_tokens


__all__ = ("MEMO_SIZE", "clear_token_memo", "message_tokens")

MEMO_SIZE = 131_072
"""Messages remembered at most."""

_memo: dict[int, tuple[AgentMessage, int]] = {}


def message_tokens(message: AgentMessage) -> int:
    """pi's ``estimateTokens(message)`` (chars/4), memoised per message object."""
    key = id(message)
    hit = _memo.get(key)
    if hit is not None and hit[0] is message:
        return hit[1]
    count = estimate_tokens(message)
    if len(_memo) >= MEMO_SIZE:
        for old in list(_memo)[: MEMO_SIZE // 2]:
            del _memo[old]
    _memo[key] = (message, count)
    return count


def clear_token_memo() -> None:
    """Forget every remembered estimate (and release the messages it holds)."""
    _memo.clear()
