"""
The extractive summariser: a summary taken from the transcript itself, with no model (DESIGN D3).

It is the offline default and the last link of the summariser chain, so compaction always works. It
keeps what agents lose most in free-text summaries (field report B08): the goal, constraints,
decisions, open asks, and every exact identifier (paths, URLs, ids, hashes, long numbers, host:port,
error lines), verbatim. Its output has safeguard mode's required headings (OpenClaw spec §5.6), so it
passes the same structure audit as an LLM summary.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from sessionkeeper.compaction._cut import message_role
from sessionkeeper.records import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
)


__all__ = ("extract_identifiers", "extractive_summary", "message_text")

_MAX_GOAL_CHARS = 600
_MAX_LINE_CHARS = 300
_MAX_ITEMS = 12
_MAX_IDENTIFIERS = 200
_MAX_PREVIOUS_CHARS = 6000
_MAX_FILES_CHARS = 800

_IDENTIFIER = re.compile(
    r"(?P<uuid>\b[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}\b)"
    r"|(?P<url>https?://[^\s<>\"'`)\]]+)"
    r"|(?P<winpath>\b[A-Za-z]:\\[\w\\.-]+)"
    r"|(?P<hostport>\b[A-Za-z0-9._-]+\.[A-Za-z0-9._-]+:\d{1,5}\b)"
    r"|(?P<path>(?:~|\.{1,2})?/?(?:[\w.@+-]+/)+[\w.@+-]+)"
    r"|(?P<file>\b[\w@+-]+(?:\.[\w-]+)*\.(?:py|ts|tsx|js|mjs|cjs|jsx|json|jsonl|md|txt|toml|yaml|yml|ini|cfg|"
    r"rs|go|java|kt|c|h|cc|cpp|hpp|cs|rb|php|sh|sql|html|css|lock|log|csv|xml|env)\b)"
    r"|(?P<hex>\b[0-9A-Fa-f]{8,64}\b)"
    r"|(?P<number>\b\d{6,20}\b)"
)
_TRAILING = ".,;:!?)]}>\"'`"
_TOKEN_SPLIT = re.compile(r"[\s\"'`<>()\[\]{},;|]+")
_MAX_TOKEN_CHARS = 2000
# Lines that report an error (not every line that mentions the word): "ValueError: ...",
# "error: ...", "fatal: ...", "FAIL ...", "Traceback ...", "npm ERR! ...", "panic: ...".
_ERROR_LINE = re.compile(
    r"^\s*(?:[\w.]*(?:Error|Exception)\b|(?:error|fatal|panic)\s*[:\[]|(?:ERROR|FATAL)\b|FAIL(?:ED)?\b"
    r"|Traceback\b|npm ERR!)"
)
_CONSTRAINT = re.compile(
    r"\b(must|never|always|do not|don't|dont|should not|shouldn't|only|avoid|prefer|without|keep)\b",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(decided|decide|chose|choose|going to|will use|we'll|i'll|let's|switched|instead|because|fixed|"
    r"changed|renamed|added|removed|updated|created)\b",
    re.IGNORECASE,
)
_TODO = re.compile(r"\b(todo|next|remaining|still need|not yet|pending|follow[- ]up|later)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def message_text(message: AgentMessage) -> str:
    """The plain text of a message: text blocks (and string content), summaries, bash I/O."""
    if isinstance(message, UserMessage | CustomMessage):
        return _content_text(message.content)
    if isinstance(message, AssistantMessage):
        return "\n".join(block.text for block in message.content if isinstance(block, TextContent)).strip()
    if isinstance(message, ToolResultMessage):
        return _content_text(message.content)
    if isinstance(message, BashExecutionMessage):
        return f"$ {message.command}\n{message.output}".strip()
    if isinstance(message, BranchSummaryMessage | CompactionSummaryMessage):
        return message.summary.strip()
    if isinstance(message, UnknownMessage):
        return _content_text(message.raw.get("content"))
    return ""


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content.strip()
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "\n".join(part.strip() for part in parts if part.strip())


def _tool_call_texts(message: AgentMessage) -> Iterable[str]:
    if isinstance(message, AssistantMessage):
        for block in message.content:
            if isinstance(block, ToolCall):
                for value in block.arguments.values():
                    if isinstance(value, str):
                        yield value


def extract_identifiers(text: str) -> list[str]:
    """
    Exact identifiers in ``text``, in order of first appearance, deduplicated.

    UUIDs, URLs, Windows and POSIX paths (absolute or relative with a ``/``), file names with a
    known extension, ``host:port``, hex strings of 8-64 chars (hashes, short ids) and numbers of
    6-20 digits. Values shorter than 4 chars are dropped. The text is cut into whitespace/quote-separated
    tokens first and tokens longer than 2000 chars are skipped, so the scan stays linear.
    """
    seen: dict[str, None] = {}
    for token in _TOKEN_SPLIT.split(text):
        if len(token) < 4 or len(token) > _MAX_TOKEN_CHARS:
            continue
        for match in _IDENTIFIER.finditer(token):
            value = match.group(0).rstrip(_TRAILING).lstrip("([{<\"'`")
            if len(value) >= 4 and value not in seen:
                seen[value] = None
    return list(seen)


def _clip(text: str, limit: int = _MAX_LINE_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3].rstrip() + "..."


def _sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE.split(text) if part and part.strip()]


def _unique(items: Iterable[str], limit: int) -> list[str]:
    out: dict[str, None] = {}
    for item in items:
        if item and item not in out:
            out[item] = None
    values = list(out)
    return values[-limit:]


def _bounded_join(items: Sequence[str], limit: int) -> str:
    out: list[str] = []
    used = 0
    for index, item in enumerate(items):
        if used + len(item) + 2 > limit:
            out.append(f"...and {len(items) - index} more")
            break
        out.append(item)
        used += len(item) + 2
    return ", ".join(out)


def _bullets(items: Sequence[str], empty: str = "None.") -> str:
    return "\n".join(f"- {item}" for item in items) if items else empty


def extractive_summary(
    messages: Sequence[AgentMessage],
    *,
    previous_summary: str | None = None,
    read_files: Sequence[str] = (),
    modified_files: Sequence[str] = (),
    max_chars: int = 12_000,
) -> str:
    """
    Summarise ``messages`` without a model.

    Sections: ``## Goal`` (the first and the latest user request), ``## Decisions`` (assistant
    sentences that state a choice or a change), ``## Open TODOs``, ``## Constraints/Rules`` (user
    sentences with must/never/always/only/prefer...), ``## Pending user asks`` (the last user
    request when no assistant text answered it), ``## Exact identifiers`` (every identifier of
    :func:`extract_identifiers` in the messages, the tool-call arguments and the previous summary,
    plus error lines from failed tool results), ``## Files`` (read and modified), and the previous
    summary under ``## Earlier summary`` (quoted, at most 6000 chars). To stay within ``max_chars``
    the earlier summary is shortened first, then the lists; identifiers are dropped last (oldest
    first).

    Args:
        messages: The messages to summarise, in order.
        previous_summary: The previous compaction's summary, carried forward.
        read_files: Files read (not modified) in the summarised span.
        modified_files: Files written or edited.
        max_chars: Upper bound of the result in characters (default 12000, leaving room for
            safeguard's suffix under its 16000-char cap).

    Returns:
        The summary text (never empty).
    """
    user_texts: list[str] = []
    decisions: list[str] = []
    todos: list[str] = []
    constraints: list[str] = []
    errors: list[str] = []
    identifier_sources: list[str] = []
    last_user_index = -1
    last_answer_index = -1
    for index, message in enumerate(messages):
        text = message_text(message)
        role = message_role(message)
        identifier_sources.append(text)
        identifier_sources.extend(_tool_call_texts(message))
        if role in ("user", "custom", "bashExecution") and text:
            if role == "user":
                user_texts.append(text)
                last_user_index = index
            constraints.extend(_clip(s) for s in _sentences(text) if _CONSTRAINT.search(s))
        elif role == "assistant" and text:
            last_answer_index = index
            for sentence in _sentences(text):
                if _DECISION.search(sentence):
                    decisions.append(_clip(sentence))
                if _TODO.search(sentence):
                    todos.append(_clip(sentence))
        elif role == "toolResult" and isinstance(message, ToolResultMessage) and message.is_error:
            first = next((line for line in text.splitlines() if line.strip()), "failed")
            errors.append(_clip(f"{message.tool_name}: {first}"))
        elif role == "toolResult":
            errors.extend(_clip(line) for line in text.splitlines()[:200] if _ERROR_LINE.search(line))
    if previous_summary:
        identifier_sources.append(previous_summary)
    identifiers = extract_identifiers("\n".join(identifier_sources))[:_MAX_IDENTIFIERS]

    goal_lines: list[str] = []
    if user_texts:
        goal_lines.append(_clip(user_texts[0], _MAX_GOAL_CHARS))
        if len(user_texts) > 1:
            goal_lines.append("Latest request: " + _clip(user_texts[-1], _MAX_GOAL_CHARS))
    pending: list[str] = []
    if last_user_index > last_answer_index and user_texts:
        pending.append(_clip(user_texts[-1], _MAX_GOAL_CHARS))

    def render(items: int, earlier_chars: int, id_list: list[str]) -> str:
        sections = [
            "## Goal",
            "\n".join(goal_lines) if goal_lines else "(none stated in the summarised span)",
            "",
            "## Decisions",
            _bullets(_unique(decisions, items)),
            "",
            "## Open TODOs",
            _bullets(_unique(todos, items)),
            "",
            "## Constraints/Rules",
            _bullets(_unique(constraints, items)),
            "",
            "## Pending user asks",
            _bullets(pending),
            "",
            "## Exact identifiers",
            ", ".join(id_list) if id_list else "None captured.",
        ]
        error_items = _unique(errors, items)
        if error_items:
            sections += ["", "## Errors seen", _bullets(error_items)]
        if read_files or modified_files:
            # Bounded: the complete lists travel in the entry's details and the file tags (pi §13.4).
            sections += ["", "## Files"]
            if read_files:
                sections.append("Read: " + _bounded_join(read_files, _MAX_FILES_CHARS))
            if modified_files:
                sections.append("Modified: " + _bounded_join(modified_files, _MAX_FILES_CHARS))
        earlier = (previous_summary or "").strip()
        if earlier and earlier_chars > 0:
            if len(earlier) > earlier_chars:
                earlier = earlier[:earlier_chars].rstrip() + "\n[earlier summary truncated]"
            quoted = "\n".join(f"> {line}" if line else ">" for line in earlier.splitlines())
            sections += ["", "## Earlier summary", quoted]
        sections += ["", f"(Extractive summary of {len(messages)} messages; no model was used.)"]
        return "\n".join(sections)

    # Fit ``max_chars``: shorten the quoted earlier summary first, then the item lists; identifiers go
    # last (the most recent ones are kept), because they are what free-text summaries lose (B08).
    for items in (_MAX_ITEMS, 6, 3):
        for earlier_chars in (_MAX_PREVIOUS_CHARS, 3000, 1000, 0):
            text = render(items, earlier_chars, identifiers)
            if len(text) <= max_chars:
                return text
    kept = list(identifiers)
    text = render(3, 0, kept)
    while kept and len(text) > max_chars:
        kept = kept[max(1, len(kept) // 10) :]
        text = render(3, 0, kept)
    return text[:max_chars] if max_chars > 0 else text
