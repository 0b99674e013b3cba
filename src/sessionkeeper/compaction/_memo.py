"""
The default token memo, as compaction has always exposed it.

:func:`message_tokens` is pi's ``estimateTokens(message)`` (pi spec §12, exact) remembered per
message object in the process-wide memo of the default counter
(:func:`sessionkeeper._tokens.default_token_memo`); :func:`clear_token_memo` empties it. Planners
given a ``token_counter`` count with that counter's memo (:func:`sessionkeeper._tokens.token_memo`).
"""

from __future__ import annotations

from sessionkeeper._tokens import MEMO_SIZE, default_token_memo
from sessionkeeper.records import AgentMessage


__all__ = ("MEMO_SIZE", "clear_token_memo", "message_tokens")


def message_tokens(message: AgentMessage) -> int:
    """pi's ``estimateTokens(message)`` (chars/4), memoised per message object."""
    return default_token_memo().count_message(message)


def clear_token_memo() -> None:
    """Forget every remembered estimate of the default counter (and release the messages it holds)."""
    default_token_memo().clear()
