"""
The single-purpose walks that :func:`sessionkeeper.pruning._fused.tail_checks` fuses into one (issue 16):
the references its differential test compares it with. Production code runs only the fused walk.
"""

from __future__ import annotations

from collections.abc import Sequence

from sessionkeeper.pruning._fused import _unanswered
from sessionkeeper.records import AgentMessage, AssistantMessage, ToolCall, ToolResultMessage, UserMessage


def role_runs(messages: Sequence[AgentMessage]) -> tuple[bool, bool]:
    """
    Whether two assistant turns, and whether two user turns, follow each other (plain contexts).

    Every record has a role (its tag), so this is ``_has_consecutive`` for both roles in one walk.
    The reference for :func:`~sessionkeeper.pruning._fused.tail_checks`, which fuses it with the others.
    """
    assistants = users = False
    last: type | None = None
    for message in messages:
        cls = type(message)
        if cls is last:
            if cls is AssistantMessage:
                assistants = True
            elif cls is UserMessage:
                users = True
        last = cls
    return assistants, users


def dangling_calls_possible(messages: Sequence[AgentMessage]) -> bool:
    """
    Whether ``_strip_dangling_tool_calls`` would change a turn (plain contexts, one walk).

    A tool-calling turn stays as it is when every tool call is answered by a result (trimmed id)
    before the next assistant turn; with thinking, each answered call also needs a non-blank name
    matching one of its results' non-blank names, if any.
    """
    open_turn: AssistantMessage | None = None
    answered: dict[str, set[str]] = {}
    for message in messages:
        if type(message) is AssistantMessage:
            if open_turn is not None and _unanswered(open_turn, answered):
                return True
            open_turn = None
            for block in message.content:
                if type(block) is ToolCall and block.id:
                    open_turn = message
                    answered = {}
                    break
        elif type(message) is ToolResultMessage and open_turn is not None:
            rid = message.tool_call_id.strip()
            if rid:
                names = answered.get(rid)
                if names is None:
                    names = answered[rid] = set()
                names.add(message.tool_name.strip())
    return open_turn is not None and _unanswered(open_turn, answered)
