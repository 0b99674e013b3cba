"""
What follows a summary body: file lists, and safeguard mode's preserved sections.

pi appends ``<read-files>`` / ``<modified-files>`` lists to every summary (pi spec §13.4). Safeguard
mode (OpenClaw spec §5.6 step 2) adds a suffix that survives truncation: the split turn's context, the
last user turns verbatim, tool failures and bounded file lists; the whole summary is capped at 16000
chars with the body truncated first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sessionkeeper.compaction._cut import message_role
from sessionkeeper.compaction._extractive import message_text
from sessionkeeper.compaction._prepare import CompactionPreparation
from sessionkeeper.compaction._serialize import truncate_utf16
from sessionkeeper.compaction._settings import CompactionSettings
from sessionkeeper.records import AgentMessage, AssistantMessage, ToolCall, ToolResultMessage, utf16_len


__all__ = (
    "MAX_COMPACTION_SUMMARY_CHARS",
    "cap_preserving_suffix",
    "extract_sections",
    "format_file_operations",
    "safeguard_suffix",
    "workspace_rules",
)

MAX_COMPACTION_SUMMARY_CHARS = 16_000
"""Upper bound of a safeguard summary, in UTF-16 units (OpenClaw spec §5.6 step 7)."""
_TRUNCATED_MARKER = "\n\n[Compaction summary truncated to fit budget]"
_MAX_TOOL_FAILURES = 8
_MAX_TOOL_FAILURE_CHARS = 240
_MAX_FILE_LIST_CHARS = 900
_MAX_FILE_SECTION_CHARS = 2000
_MAX_TURN_TEXT_CHARS = 600
_SPLIT_TURN_HEADER = "**Turn Context (split turn):**\n\n"


def format_file_operations(read_files: Sequence[str], modified_files: Sequence[str]) -> str:
    """
    pi's file lists (``formatFileOperations``, pi spec §13.4): ``""`` when both are empty, else
    ``"\\n\\n"`` + the non-empty ``<read-files>`` / ``<modified-files>`` sections joined by blank lines.
    """
    sections = []
    if read_files:
        sections.append("<read-files>\n" + "\n".join(read_files) + "\n</read-files>")
    if modified_files:
        sections.append("<modified-files>\n" + "\n".join(modified_files) + "\n</modified-files>")
    return "\n\n" + "\n\n".join(sections) if sections else ""


def _cap(text: str, limit: int) -> str:
    if limit <= 0 or utf16_len(text) <= limit:
        return text
    budget = max(0, limit - 46)
    if budget <= 0:
        return truncate_utf16(text, limit)[0]
    return truncate_utf16(text, budget)[0] + _TRUNCATED_MARKER


def cap_preserving_suffix(body: str, suffix: str, *, max_chars: int = MAX_COMPACTION_SUMMARY_CHARS) -> str:
    """
    ``body + suffix`` within ``max_chars``: the body is truncated (with a marker) so the suffix survives
    (OpenClaw's ``capCompactionSummaryPreservingSuffix``).
    """
    if not suffix:
        return _cap(body, max_chars)
    if suffix and suffix[0] not in "\n ":
        suffix = "\n\n" + suffix
    suffix_len = utf16_len(suffix)
    if suffix_len >= max_chars:
        return suffix[-max_chars:]
    return _cap(body, max_chars - suffix_len) + suffix


def _bounded_list(tag: str, files: Sequence[str], limit: int) -> str:
    open_tag, close_tag = f"<{tag}>\n", f"\n</{tag}>"
    used = len(open_tag) + len(close_tag)
    lines: list[str] = []
    for index, path in enumerate(files):
        line = f"{path}\n"
        remaining = len(files) - index - 1
        overflow = f"...and {remaining} more\n" if remaining else ""
        if used + len(line) + len(overflow) > limit:
            rest = f"...and {len(files) - index} more\n"
            if used + len(rest) <= limit:
                lines.append(rest)
            break
        lines.append(line)
        used += len(line)
    # OpenClaw ends every line with a newline and then adds "\n</tag>", leaving a blank line before the
    # closing tag; we drop it so the lists have pi's shape (pi spec §13.4).
    return f"{open_tag}{''.join(lines).removesuffix(chr(10))}{close_tag}" if lines else ""


def _bounded_file_operations(read_files: Sequence[str], modified_files: Sequence[str]) -> str:
    sections = [
        section
        for section in (
            _bounded_list("read-files", read_files, _MAX_FILE_LIST_CHARS),
            _bounded_list("modified-files", modified_files, _MAX_FILE_LIST_CHARS),
        )
        if section
    ]
    return _cap("\n\n" + "\n\n".join(sections), _MAX_FILE_SECTION_CHARS) if sections else ""


def _non_text_note(message: AgentMessage) -> str | None:
    content: Any = getattr(message, "content", None)
    if not isinstance(content, list):
        return None
    counts: dict[str, int] = {}
    for block in content:
        kind = getattr(block, "type", None) or type(block).__name__
        name = {"ImageContent": "image", "ToolCall": "toolCall", "ThinkingContent": "thinking"}.get(
            kind, kind
        )
        if name not in ("text", "TextContent"):
            counts[name] = counts.get(name, 0) + 1
    if not counts:
        return None
    return "[non-text content: " + ", ".join(f"{k} x{v}" if v > 1 else k for k, v in counts.items()) + "]"


def _format_lines(messages: Sequence[AgentMessage]) -> list[str]:
    lines = []
    for message in messages:
        role = message_role(message)
        if role == "assistant":
            label = "Assistant"
        elif role == "user":
            label = "User"
        elif role == "toolResult" and isinstance(message, ToolResultMessage):
            label = f"Tool result ({message.tool_name or 'tool'})"
        else:
            continue
        text = message_text(message)
        note = _non_text_note(message)
        rendered = f"{text}\n{note}" if text and note else text or note
        if not rendered:
            continue
        if utf16_len(rendered) > _MAX_TURN_TEXT_CHARS:
            rendered = truncate_utf16(rendered, _MAX_TURN_TEXT_CHARS)[0] + "..."
        lines.append(f"- {label}: {rendered}")
    return lines


def preserved_recent_turns(messages: Sequence[AgentMessage], *, turns: int) -> list[AgentMessage]:
    """
    The last ``turns`` user turns with their assistant messages and matching tool results
    (OpenClaw's ``splitPreservedRecentTurns``); with fewer user turns, all of them plus recent
    messages up to ``2 * turns``.
    """
    turns = min(12, max(0, turns))
    if turns <= 0:
        return []
    conversation = [i for i, m in enumerate(messages) if message_role(m) in ("user", "assistant")]
    users = [i for i in conversation if message_role(messages[i]) == "user"]
    if not conversation:
        return []
    keep: set[int] = set()
    if len(users) >= turns:
        start = users[-turns]
        keep.update(i for i in conversation if i >= start)
    else:
        keep.update(users)
        for index in reversed(conversation):
            keep.add(index)
            if len(keep) >= turns * 2:
                break
    call_ids = {
        block.id
        for i in keep
        if isinstance(messages[i], AssistantMessage)
        for block in messages[i].content  # type: ignore[union-attr]
        if isinstance(block, ToolCall)
    }
    if call_ids:
        first = min(keep)
        keep.update(
            i
            for i in range(first, len(messages))
            if isinstance(messages[i], ToolResultMessage) and messages[i].tool_call_id in call_ids  # type: ignore[union-attr]
        )
    return [messages[i] for i in sorted(keep)]


def _tool_failures(messages: Sequence[AgentMessage]) -> str:
    failures: list[str] = []
    seen: set[str] = set()
    for message in messages:
        if not isinstance(message, ToolResultMessage) or not message.is_error:
            continue
        if not message.tool_call_id or message.tool_call_id in seen:
            continue
        seen.add(message.tool_call_id)
        meta = []
        details = message.details if isinstance(message.details, dict) else {}
        if isinstance(details.get("status"), str):
            meta.append(f"status={details['status']}")
        if isinstance(details.get("exitCode"), int | float) and not isinstance(details.get("exitCode"), bool):
            meta.append(f"exitCode={details['exitCode']}")
        text = re.sub(r"\s+", " ", message_text(message)).strip() or (
            "failed" if meta else "failed (no output)"
        )
        if utf16_len(text) > _MAX_TOOL_FAILURE_CHARS:
            text = truncate_utf16(text, _MAX_TOOL_FAILURE_CHARS - 3)[0] + "..."
        suffix = f" ({' '.join(meta)})" if meta else ""
        failures.append(f"- {message.tool_name or 'tool'}{suffix}: {text}")
    if not failures:
        return ""
    lines = failures[:_MAX_TOOL_FAILURES]
    if len(failures) > _MAX_TOOL_FAILURES:
        lines.append(f"- ...and {len(failures) - _MAX_TOOL_FAILURES} more")
    return "\n\n## Tool Failures\n" + "\n".join(lines)


def safeguard_suffix(
    plan: CompactionPreparation,
    settings: CompactionSettings,
    *,
    split_turn_summary: str = "",
    agents_md: str | None = None,
) -> str:
    """
    Safeguard's suffix (OpenClaw spec §5.6 step 2), kept whole when the summary is capped.

    The split turn (its summary, or its messages as ``- Role: text`` lines), ``## Recent turns
    preserved verbatim``, ``## Tool Failures`` (at most 8), the bounded file lists, and the
    ``postCompactionSections`` of ``agents_md`` (the workspace's AGENTS.md text) when configured.
    """
    parts: list[str] = []
    if plan.is_split_turn and plan.turn_prefix_messages:
        if split_turn_summary.strip():
            parts.append("\n\n---\n\n" + _SPLIT_TURN_HEADER + split_turn_summary)
        else:
            lines = _format_lines(plan.turn_prefix_messages)
            if lines:
                parts.append("\n\n" + _SPLIT_TURN_HEADER + "\n".join(lines))
    preserved = _format_lines(
        preserved_recent_turns(plan.messages_to_summarize, turns=settings.recent_turns_preserve)
    )
    if preserved:
        parts.append("\n\n## Recent turns preserved verbatim\n" + "\n".join(preserved))
    parts.append(_tool_failures([*plan.messages_to_summarize, *plan.turn_prefix_messages]))
    parts.append(_bounded_file_operations(plan.file_ops.read_files, plan.file_ops.modified_files))
    parts.append(workspace_rules(agents_md, settings.post_compaction_sections))
    return "".join(parts)


_HEADING = re.compile(r"^(#{2,3})\s+(.+?)\s*$")
_MAX_WORKSPACE_CHARS = 2000


def extract_sections(content: str, names: Sequence[str]) -> list[str]:
    """
    The H2/H3 sections of a Markdown document with these names (case-insensitive), each up to the
    next heading of the same or a higher level; fenced code is never read as a heading
    (OpenClaw spec §5.11).
    """
    lines = content.split("\n")
    found: list[str] = []
    for name in names:
        wanted = name.strip().lower()
        section: list[str] = []
        in_section = False
        level = 0
        in_code = False
        for line in lines:
            if line.lstrip().startswith("```"):
                in_code = not in_code
                if in_section:
                    section.append(line)
                continue
            heading = None if in_code else _HEADING.match(line)
            if heading is not None:
                depth = len(heading.group(1))
                if not in_section and heading.group(2).strip().lower() == wanted:
                    in_section, level, section = True, depth, [line]
                    continue
                if in_section and depth <= level:
                    break
            if in_section:
                section.append(line)
        if section:
            found.append("\n".join(section).strip())
    return found


def workspace_rules(agents_md: str | None, names: Sequence[str] | None) -> str:
    """
    ``<workspace-critical-rules>`` with the named AGENTS.md sections, at most 2000 chars; the default
    pair "Session Startup"/"Red Lines" falls back to the legacy "Every Session"/"Safety" (OpenClaw
    spec §5.6 step 2, §5.11). ``""`` when there is nothing to add.
    """
    if not agents_md or not names:
        return ""
    sections = extract_sections(agents_md, names)
    wanted = {name.strip().lower() for name in names}
    if not sections and wanted == {"session startup", "red lines"}:
        sections = extract_sections(agents_md, ("Every Session", "Safety"))
    if not sections:
        return ""
    combined = "\n\n".join(sections)
    if utf16_len(combined) > _MAX_WORKSPACE_CHARS:
        combined = truncate_utf16(combined, _MAX_WORKSPACE_CHARS)[0] + "\n...[truncated]..."
    return f"\n\n<workspace-critical-rules>\n{combined}\n</workspace-critical-rules>"
