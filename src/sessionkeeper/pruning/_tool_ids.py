"""
Tool-call ids for providers with strict id rules (OpenClaw spec §9 step 8,
``sanitizeToolCallIdsForCloudCodeAssist``).

* :func:`sanitize_tool_call_id` (``sanitizeToolCallId``): one id made ``strict`` or ``strict9``.
* :func:`sanitize_tool_call_ids`: every id of a context rewritten collision-free, calls and results
  kept consistent occurrence by occurrence; replay-safe thinking turns and native Anthropic ids can
  keep theirs.

Pure functions: they return a new list (or the input itself when nothing changed).
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Sequence
from typing import Literal

import msgspec

from sessionkeeper.pruning._tool_repair import _has_thinking, _replay_safe_thinking_calls
from sessionkeeper.records import (
    AgentMessage,
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
)


__all__ = ("sanitize_tool_call_id", "sanitize_tool_call_ids")

_NATIVE_ANTHROPIC_ID = re.compile(r"^toolu_[A-Za-z0-9_]+$")
_KIMI_ID = re.compile(r"^functions\.[A-Za-z0-9_-]+:\d+$")
_NON_ALNUM = re.compile(r"[^a-zA-Z0-9]")
_STRICT9 = 9
_STRICT_MAX = 40  # the length cap of strict ids in _Resolver._unique


def _short_hash(text: str, length: int = 8) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def sanitize_tool_call_id(tool_call_id: str, mode: Literal["strict", "strict9"] = "strict") -> str:
    """
    Sanitise one tool-call id (OpenClaw ``sanitizeToolCallId``).

    ``strict``: keep ``[A-Za-z0-9]`` (Kimi's ``functions.<name>:<n>`` ids are kept as they are); an
    empty result becomes ``sanitizedtoolid``. ``strict9``: exactly 9 alphanumerics (truncated, or a
    sha256 prefix of a shorter id); ``defaultid`` for an empty input.
    """
    if not tool_call_id:
        return "defaultid" if mode == "strict9" else "defaulttoolid"
    alnum = _NON_ALNUM.sub("", tool_call_id)
    if mode == "strict9":
        if len(alnum) >= _STRICT9:
            return alnum[:_STRICT9]
        return _short_hash(alnum or "sanitized", _STRICT9)
    if _KIMI_ID.match(tool_call_id):
        return tool_call_id
    return alnum or "sanitizedtoolid"


_sanitized_id = functools.lru_cache(maxsize=1 << 16)(sanitize_tool_call_id)
"""Cached :func:`sanitize_tool_call_id` (pure; the same ids come back on every model call)."""


class _Resolver:
    """OpenClaw ``createOccurrenceAwareResolver``: unique ids, calls and results paired by occurrence."""

    def __init__(self, mode: Literal["strict", "strict9", "dedupe"], *, keep_native: bool = False) -> None:
        self.mode = mode
        self.keep_native = keep_native
        self.used: set[str] = set()
        self.call_occurrences: dict[str, int] = {}
        self.orphan_occurrences: dict[str, int] = {}
        self.pending: dict[str, list[str]] = {}

    def _unique(self, seed: str) -> str:
        if self.mode == "dedupe":
            base = seed.split(":", 1)[0]
            if seed == base and base not in self.used:
                return base
            for i in range(2, 10_000):
                candidate = f"{base}_{i}"
                if candidate not in self.used:
                    return candidate
            raise RuntimeError("could not allocate a unique tool call id")  # pragma: no cover
        if self.mode == "strict9":
            base = _sanitized_id(seed, "strict9")
            if len(base) >= _STRICT9 and base[:_STRICT9] not in self.used:
                return base[:_STRICT9]
            for i in range(1000):
                hashed = _short_hash(f"{seed}:{i}", _STRICT9)
                if hashed not in self.used:
                    return hashed
            raise RuntimeError("could not allocate a unique strict9 tool call id")  # pragma: no cover
        base = _sanitized_id(seed, "strict")[:40]
        if base not in self.used:
            return base
        digest = _short_hash(seed)
        candidate = f"{base[: 40 - len(digest)]}{digest}"
        if candidate not in self.used:
            return candidate
        for i in range(2, 1000):
            suffix = f"x{i}"
            nxt = f"{candidate[: 40 - len(suffix)]}{suffix}"
            if nxt not in self.used:
                return nxt
        raise RuntimeError("could not allocate a unique tool call id")  # pragma: no cover

    def _allocate(self, seed: str) -> str:
        value = self._unique(seed)
        self.used.add(value)
        return value

    def _native(self, raw: str, occurrence: int) -> bool:
        if self.keep_native and occurrence == 1 and _NATIVE_ANTHROPIC_ID.match(raw) and raw not in self.used:
            self.used.add(raw)
            return True
        return False

    def call(self, raw: str) -> str:
        occurrence = self.call_occurrences.get(raw, 0) + 1
        self.call_occurrences[raw] = occurrence
        if self._native(raw, occurrence):
            value = raw
        else:
            value = self._allocate(raw if occurrence == 1 else f"{raw}:{occurrence}")
        self.pending.setdefault(raw, []).append(value)
        return value

    def preserve(self, raw: str) -> None:
        """Keep a call's id as it is (a replay-safe signed-thinking turn)."""
        self.used.add(raw)
        self.pending.setdefault(raw, []).append(raw)

    def result(self, raw: str) -> str:
        queue = self.pending.get(raw)
        if queue:
            value = queue.pop(0)
            if not queue:
                del self.pending[raw]
            return value
        occurrence = self.orphan_occurrences.get(raw, 0) + 1
        self.orphan_occurrences[raw] = occurrence
        if self._native(raw, occurrence):
            return raw
        return self._allocate(f"{raw}:tool_result:{occurrence}")


def _keeps_id(raw: str, mode: Literal["strict", "strict9", "dedupe"]) -> bool:
    """Whether a first-use id that no other id took is allocated as itself by :class:`_Resolver`."""
    if mode == "dedupe":
        return ":" not in raw
    if mode == "strict9":
        return len(raw) == _STRICT9 and raw.isascii() and raw.isalnum()
    if len(raw) > _STRICT_MAX:
        return False
    return (raw.isascii() and raw.isalnum()) or bool(_KIMI_ID.match(raw))


def _ids_unchanged(
    messages: Sequence[AgentMessage],
    mode: Literal["strict", "strict9", "dedupe"],
    kept_turns: set[int],
    reserved: set[str],
    keep_native: bool,
) -> bool:
    """
    Whether :func:`sanitize_tool_call_ids` would keep every id (a dry run of :class:`_Resolver`).

    True when every call id is used once, not reserved, and already valid for ``mode``, and every
    result answers a pending call (in ``dedupe`` mode an orphan keeps its id too).
    """
    used = set(reserved)
    pending: dict[str, int] = {}
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage):
            kept = index in kept_turns
            for block in message.content:
                if not isinstance(block, ToolCall) or not block.id:
                    continue
                raw = block.id
                if not kept:
                    if raw in used or not (
                        _keeps_id(raw, mode) or (keep_native and _NATIVE_ANTHROPIC_ID.match(raw))
                    ):
                        return False
                    used.add(raw)
                pending[raw] = pending.get(raw, 0) + 1
        elif isinstance(message, ToolResultMessage) and message.tool_call_id:
            raw = message.tool_call_id
            count = pending.get(raw, 0)
            if count:
                pending[raw] = count - 1
            elif mode != "dedupe":
                return False
    return True


def _reserve_thinking_turns(
    messages: Sequence[AgentMessage],
    resolver: _Resolver,
    preserve_thinking_turn_ids: bool,
    allowed_tool_names: Iterable[str] | None,
) -> set[int]:
    """
    Indexes of the replay-safe thinking turns whose call ids stay as they are; their ids are added to
    ``resolver.used`` so no other id takes them (``preserve_thinking_turn_ids``; empty when it is off).
    """
    kept_turns: set[int] = set()
    if not preserve_thinking_turn_ids:
        return kept_turns
    allowed = tuple(allowed_tool_names) if allowed_tool_names is not None else None
    reserved: set[str] = set()
    for index, message in enumerate(messages):
        if not isinstance(message, AssistantMessage) or not _has_thinking(message):
            continue
        calls = _replay_safe_thinking_calls(message, allowed)
        if calls is None or any(c.id in reserved for c in calls):
            continue
        kept_turns.add(index)
        reserved.update(c.id for c in calls)
    resolver.used.update(reserved)
    return kept_turns


def sanitize_tool_call_ids(
    messages: Sequence[AgentMessage],
    *,
    mode: Literal["strict", "strict9", "dedupe"] = "strict",
    preserve_thinking_turn_ids: bool = False,
    preserve_native_anthropic_ids: bool = False,
    allowed_tool_names: Iterable[str] | None = None,
) -> Sequence[AgentMessage]:
    """
    Rewrite tool-call ids for providers with strict id rules (OpenClaw spec §9 step 8).

    Every call id is sanitised (:func:`sanitize_tool_call_id`) and made unique (collisions get a
    sha256 suffix, then ``x<i>``); a repeated raw id gets a new id per occurrence. Each result takes
    the id of the oldest call with its raw id that no result has taken yet, so calls and results stay
    paired; a result with no such call gets a fresh unique id.

    With ``preserve_native_anthropic_ids``, an Anthropic ``toolu_...`` id is kept on its first use
    (Anthropic's own plugin policy). With ``preserve_thinking_turn_ids`` (provider-owned signed
    thinking), the ids of replay-safe thinking turns are kept as they are (reserved, so no other id
    takes them), as their signature covers them.

    ``mode="dedupe"`` changes nothing but repeated ids: the first use of an id keeps it, later uses
    get ``<id>_2``, ``<id>_3``... (used by :func:`~sessionkeeper.pruning.sanitize_replay_history` when
    the policy does not sanitise ids, deviation H1).

    Returns:
        A new list, or ``messages`` itself when no id changed.
    """
    resolver = _Resolver(mode, keep_native=preserve_native_anthropic_ids)
    kept_turns = _reserve_thinking_turns(messages, resolver, preserve_thinking_turn_ids, allowed_tool_names)
    if _ids_unchanged(messages, mode, kept_turns, resolver.used, preserve_native_anthropic_ids):
        return messages
    out: list[AgentMessage] = []
    changed = False
    for index, message in enumerate(messages):
        if index in kept_turns:
            assert isinstance(message, AssistantMessage)
            for block in message.content:
                if isinstance(block, ToolCall) and block.id:
                    resolver.preserve(block.id)
            out.append(message)
            continue
        if isinstance(message, AssistantMessage):
            content: list[TextContent | ThinkingContent | ToolCall] | None = None  # copied on first change
            for position, block in enumerate(message.content):
                if isinstance(block, ToolCall) and block.id:
                    new_id = resolver.call(block.id)
                    if new_id != block.id:
                        if content is None:
                            content = list(message.content)
                        content[position] = msgspec.structs.replace(block, id=new_id)
            if content is not None:
                message = msgspec.structs.replace(message, content=content)
                changed = True
        elif isinstance(message, ToolResultMessage) and message.tool_call_id:
            if mode == "dedupe" and message.tool_call_id not in resolver.pending:
                out.append(message)  # an orphan keeps its id (the pairing repair drops it)
                continue
            new_id = resolver.result(message.tool_call_id)
            if new_id != message.tool_call_id:
                message = msgspec.structs.replace(message, tool_call_id=new_id)
                changed = True
        out.append(message)
    return out if changed else messages
