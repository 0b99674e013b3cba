"""
Oversized tool-result truncation: the second resort of overflow recovery (OpenClaw spec §5.7).

When compaction cannot make the prompt fit (it failed, or the retry after it overflowed again), OpenClaw
truncates tool results that are too large for the window and retries once. The cap per result is a share
of the window in characters (``contextWindow x 4 x 0.3``), never above 400000 characters and never below
2000. The head of the text is kept, followed by a note saying how much was cut.

Pure and in memory: the transcript is never rewritten (DESIGN: loading never writes; we keep what the file
holds). :class:`~sessionkeeper.runtime.SessionRuntime` applies it to every context it sends for the rest
of the session's life, until a compaction succeeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import attrs
import msgspec

from sessionkeeper.transcript import AgentMessage, TextContent, ToolResultMessage, utf16_len


__all__ = (
    "TOOL_RESULT_CONTEXT_SHARE",
    "TOOL_RESULT_HARD_MAX_CHARS",
    "TOOL_RESULT_MIN_KEEP_CHARS",
    "ToolResultTruncation",
    "has_oversized_tool_results",
    "max_tool_result_chars",
    "truncate_oversized_tool_results",
)

TOOL_RESULT_CONTEXT_SHARE: Final = 0.3
"""Largest share of the window (in chars, ``tokens x 4``) one tool result may take."""
TOOL_RESULT_HARD_MAX_CHARS: Final = 400_000
"""Absolute cap of one tool result, in characters."""
TOOL_RESULT_MIN_KEEP_CHARS: Final = 2_000
"""A truncated result always keeps at least this many characters."""


def max_tool_result_chars(context_window_tokens: int) -> int:
    """
    The largest tool result, in UTF-16 characters, for a window of ``context_window_tokens`` tokens:
    ``clamp(floor(window x 4 x 0.3), 2000, 400000)``.
    """
    share = int(max(0, context_window_tokens) * 4 * TOOL_RESULT_CONTEXT_SHARE)
    return max(TOOL_RESULT_MIN_KEEP_CHARS, min(TOOL_RESULT_HARD_MAX_CHARS, share))


def _text_of(message: ToolResultMessage) -> str:
    return "\n".join(block.text for block in message.content if isinstance(block, TextContent))


@attrs.frozen(kw_only=True)
class ToolResultTruncation:
    """
    The result of :func:`truncate_oversized_tool_results`.

    Attributes:
        messages: The context with oversized tool results cut (other messages are the input's objects).
        truncated: Tool call ids of the results that were cut, oldest first.
        max_chars: The cap that was applied, in characters.
    """

    messages: tuple[AgentMessage, ...]
    truncated: tuple[str, ...]
    max_chars: int


def has_oversized_tool_results(messages: Sequence[AgentMessage], *, context_window_tokens: int) -> bool:
    """Whether any tool result's text is longer than :func:`max_tool_result_chars`."""
    cap = max_tool_result_chars(context_window_tokens)
    return any(isinstance(m, ToolResultMessage) and utf16_len(_text_of(m)) > cap for m in messages)


def truncate_oversized_tool_results(
    messages: Sequence[AgentMessage], *, context_window_tokens: int
) -> ToolResultTruncation:
    """
    Cut every tool result whose text exceeds :func:`max_tool_result_chars` to its head plus a note
    ``[... N more characters truncated to fit the context window]`` (OpenClaw spec §5.7, second resort).

    Images and other blocks are dropped from a cut result (its text is what was too large); results under
    the cap are returned unchanged (same objects).

    Args:
        messages: The context, oldest first.
        context_window_tokens: The model's window, in tokens.
    """
    cap = max_tool_result_chars(context_window_tokens)
    out: list[AgentMessage] = []
    cut: list[str] = []
    for message in messages:
        if isinstance(message, ToolResultMessage):
            text = _text_of(message)
            if utf16_len(text) > cap:
                head = text[:cap]
                while utf16_len(head) > cap:  # astral characters count 2 UTF-16 units
                    head = head[:-1]
                dropped = utf16_len(text) - utf16_len(head)
                note = f"\n\n[... {dropped} more characters truncated to fit the context window]"
                message = msgspec.structs.replace(message, content=[TextContent(text=head + note)])
                cut.append(message.tool_call_id)
        out.append(message)
    return ToolResultTruncation(messages=tuple(out), truncated=tuple(cut), max_chars=cap)
