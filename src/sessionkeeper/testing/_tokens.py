"""A deterministic token counter for tests (no tiktoken, easy arithmetic)."""

from __future__ import annotations

import math

from sessionkeeper._tokens import _message_parts
from sessionkeeper.records import AgentMessage


__all__ = ("FakeTokenCounter",)


class FakeTokenCounter:
    """
    A :class:`~sessionkeeper.TokenCounter` with trivially predictable counts.

    ``count_text(text) = ceil(len(text) / chars_per_token)`` (code points); ``count_message`` sums
    ``count_text`` over the strings pi's estimate measures (text, thinking, tool-call name and JSON
    arguments, bash command and output, summaries), plus ``image_tokens`` per image where pi counts
    images, plus ``per_message`` overhead. Messages of unknown shape count ``per_message``.

    Args:
        chars_per_token: Characters per token (default 1: one token per character).
        per_message: Tokens added per message (default 0).
        image_tokens: Tokens per image block in tool results and custom messages (default 0).

    Attributes:
        calls: How many times :meth:`count_message` or :meth:`count_entry` counted a message.
        entry_ids: The entry ids passed to :meth:`count_entry`, in order.

    .. versionadded:: 0.1
    """

    def __init__(self, *, chars_per_token: int = 1, per_message: int = 0, image_tokens: int = 0) -> None:
        if chars_per_token <= 0:
            raise ValueError(f"chars_per_token must be > 0, got {chars_per_token}")
        self.chars_per_token = chars_per_token
        self.per_message = per_message
        self.image_tokens = image_tokens
        self.calls: int = 0
        self.entry_ids: list[str] = []

    def count_text(self, text: str) -> int:
        """``ceil(len(text) / chars_per_token)``."""
        return math.ceil(len(text) / self.chars_per_token)

    def count_message(self, message: AgentMessage) -> int:
        """Sum of :meth:`count_text` over the message's counted strings, plus images and overhead."""
        self.calls += 1
        parts = _message_parts(message)
        if parts is None:
            return self.per_message
        texts, image_chars = parts
        images = image_chars // 4800
        return sum(self.count_text(t) for t in texts) + images * self.image_tokens + self.per_message

    def count_entry(self, entry_id: str, message: AgentMessage) -> int:
        """Record ``entry_id`` and count the message (no cache, so every call is visible)."""
        self.entry_ids.append(entry_id)
        return self.count_message(message)
