"""
Conversion of context messages for the LLM: pi's ``convertToLlm`` (pi-format spec §10), exact texts.

Provider-side normalisation (dropping error/aborted replies, synthetic results for orphaned tool calls,
image placeholders) is *not* part of this step, as in pi.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from sessionkeeper.records import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    SystemMessage,
    TextContent,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
    message_from_json,
)


__all__ = (
    "BRANCH_SUMMARY_PREFIX",
    "BRANCH_SUMMARY_SUFFIX",
    "COMPACTION_SUMMARY_PREFIX",
    "COMPACTION_SUMMARY_SUFFIX",
    "bash_execution_to_text",
    "convert_to_llm",
)

COMPACTION_SUMMARY_PREFIX: Final = (
    "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
)
"""Text before a compaction summary in the user message sent to the model (spec §10)."""

COMPACTION_SUMMARY_SUFFIX: Final = "\n</summary>"
"""Text after a compaction summary (spec §10)."""

BRANCH_SUMMARY_PREFIX: Final = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
"""Text before a branch summary (spec §10)."""

BRANCH_SUMMARY_SUFFIX: Final = "</summary>"
"""Text after a branch summary: note there is no newline before the closing tag (spec §10)."""


def bash_execution_to_text(
    *,
    command: str,
    output: str,
    exit_code: Any = None,
    cancelled: bool = False,
    truncated: bool = False,
    full_output_path: str | None = None,
) -> str:
    """
    Render a ``!cmd`` execution as the text pi sends to the model (spec §10, ``bashExecutionToText``).

    ``Ran `<command>``` + newline; the output in a fenced block, or ``(no output)`` when empty; then
    ``(command cancelled)`` or ``Command exited with code <n>`` for a non-zero exit code; then the
    truncation note when ``truncated`` and ``full_output_path`` are both set.
    """
    text = f"Ran `{command}`\n"
    text += f"```\n{output}\n```" if output else "(no output)"
    if cancelled:
        text += "\n\n(command cancelled)"
    elif exit_code is not None and exit_code != 0 and not isinstance(exit_code, bool):
        code = int(exit_code) if isinstance(exit_code, float) and exit_code.is_integer() else exit_code
        text += f"\n\nCommand exited with code {code}"
    if truncated and full_output_path:
        text += f"\n\n[Output truncated. Full output: {full_output_path}]"
    return text


def _user(text: str, timestamp: Any) -> AgentMessage:
    if isinstance(timestamp, int | float) and not isinstance(timestamp, bool):
        return UserMessage(content=[TextContent(text=text)], timestamp=timestamp)
    raw: dict[str, Any] = {"role": "user", "content": [{"type": "text", "text": text}]}
    if timestamp is not None:
        raw["timestamp"] = timestamp
    return UnknownMessage(raw)


def _convert_raw(raw: dict[str, Any]) -> AgentMessage | None:
    role = raw.get("role")
    timestamp = raw.get("timestamp")
    if role in ("user", "assistant", "toolResult"):
        return UnknownMessage(raw)
    if role == "bashExecution":
        if raw.get("excludeFromContext"):
            return None
        text = bash_execution_to_text(
            command=str(raw.get("command", "undefined")),
            output=str(raw["output"]) if isinstance(raw.get("output"), str) else "",
            exit_code=raw.get("exitCode"),
            cancelled=bool(raw.get("cancelled")),
            truncated=bool(raw.get("truncated")),
            full_output_path=raw.get("fullOutputPath")
            if isinstance(raw.get("fullOutputPath"), str)
            else None,
        )
        return _user(text, timestamp)
    if role == "custom":
        content = raw.get("content")
        built: dict[str, Any] = {"role": "user"}
        built["content"] = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if "timestamp" in raw:
            built["timestamp"] = timestamp
        return message_from_json(built)
    if role == "branchSummary":
        return _user(BRANCH_SUMMARY_PREFIX + str(raw.get("summary", "")) + BRANCH_SUMMARY_SUFFIX, timestamp)
    if role == "compactionSummary":
        return _user(
            COMPACTION_SUMMARY_PREFIX + str(raw.get("summary", "")) + COMPACTION_SUMMARY_SUFFIX, timestamp
        )
    return None


def convert_to_llm(messages: Iterable[AgentMessage]) -> list[AgentMessage]:
    """
    Convert context messages to what pi hands to the provider layer (spec §10, ``convertToLlm``).

    Per message, order preserved:

    - user, assistant, toolResult: unchanged (a string user content stays a string);
    - system (pi 1.6 system message entries, typed): unchanged, as pi 1.6's ``convertToLlm``;
    - bashExecution: dropped when ``exclude_from_context``; else a user message with one text block
      (:func:`bash_execution_to_text`);
    - custom: a user message; string content becomes one text block; ``display`` is ignored;
    - branchSummary / compactionSummary: a user message wrapping the summary in
      :data:`BRANCH_SUMMARY_PREFIX`/:data:`BRANCH_SUMMARY_SUFFIX` or
      :data:`COMPACTION_SUMMARY_PREFIX`/:data:`COMPACTION_SUMMARY_SUFFIX`;
    - any other role: dropped.

    Timestamps are kept. Returns a new list; the input messages are not modified.
    """
    out: list[AgentMessage] = []
    for message in messages:
        converted: AgentMessage | None
        if isinstance(message, UserMessage | AssistantMessage | ToolResultMessage | SystemMessage):
            converted = message  # pi 1.6 passes system messages through (0.73.1 files have none)
        elif isinstance(message, BashExecutionMessage):
            if message.exclude_from_context is True:
                continue
            converted = UserMessage(
                content=[
                    TextContent(
                        text=bash_execution_to_text(
                            command=message.command,
                            output=message.output,
                            exit_code=message.exit_code if isinstance(message.exit_code, int) else None,
                            cancelled=message.cancelled,
                            truncated=message.truncated,
                            full_output_path=message.full_output_path
                            if isinstance(message.full_output_path, str)
                            else None,
                        )
                    )
                ],
                timestamp=message.timestamp,
            )
        elif isinstance(message, CustomMessage):
            content = message.content
            converted = UserMessage(
                content=[TextContent(text=content)] if isinstance(content, str) else list(content),
                timestamp=message.timestamp,
            )
        elif isinstance(message, BranchSummaryMessage):
            converted = _user(
                BRANCH_SUMMARY_PREFIX + message.summary + BRANCH_SUMMARY_SUFFIX, message.timestamp
            )
        elif isinstance(message, CompactionSummaryMessage):
            converted = _user(
                COMPACTION_SUMMARY_PREFIX + message.summary + COMPACTION_SUMMARY_SUFFIX, message.timestamp
            )
        else:
            converted = _convert_raw(message.raw)
        if converted is not None:
            out.append(converted)
    return out
