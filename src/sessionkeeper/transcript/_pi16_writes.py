"""
The pi 1.6 appends of :class:`~sessionkeeper.transcript.TranscriptManager` (issue 18), as a mixin.

``append_usage``, ``append_system_message`` and ``append_context_edit`` write the entries pi 1.6.0's
``SessionManager.appendUsage`` / ``appendMessage({role: "system"})`` / ``appendContextEdit`` write, with
the same checks; :attr:`pi_generation` says which pi generation's conventions the manager writes for
(branch summary ``fromId``, a compaction's ``systemMessage``), by default what the file contains.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from sessionkeeper._clock import Clock
from sessionkeeper.exceptions import EntryNotFoundError, InvalidEntryError
from sessionkeeper.records import (
    ContentBlock,
    ContextEditEntry,
    ContextEditReplacement,
    CustomMessageEntry,
    ImageContent,
    MessageEntry,
    SystemMessage,
    SystemSections,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolDeclaration,
    ToolReference,
    TranscriptEntry,
    Usage,
    UsageEntry,
    parse_iso_ms,
)
from sessionkeeper.transcript._context import EDITABLE_ROLES, TEXT_BLOCK_ROLES
from sessionkeeper.transcript._load import TranscriptIndex
from sessionkeeper.transcript._system import PiGeneration, current_system_message, detect_pi_generation


__all__ = ("Pi16Appends",)

_S = TypeVar("_S", bound=msgspec.Struct)
_BLOCK_TYPES = (TextContent, ThinkingContent, ImageContent, ToolCall)
_SAFE_INT = 2**53 - 1  # Number.MAX_SAFE_INTEGER: a larger int does not read back equal in pi (a JS number)


def _round_trips(value: object, what: str) -> None:
    """
    :class:`InvalidEntryError` when ``value`` holds something JSON (and pi, a JavaScript reader) does
    not read back as written: a NaN or infinite float (written as ``null``), an int beyond
    ``Number.MAX_SAFE_INTEGER`` (read back rounded), a string with a lone surrogate (written as
    U+FFFD), a set (written as a list). Walks structs, mappings, lists and tuples.
    """
    if isinstance(value, msgspec.Struct):
        for name in value.__struct_fields__:
            _round_trips(getattr(value, name), f"{what}.{name}")
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _round_trips(key, f"{what} key")
            _round_trips(item, f"{what}[{key!r}]")
    elif isinstance(value, list | tuple):
        for n, item in enumerate(value):
            _round_trips(item, f"{what}[{n}]")
    elif isinstance(value, bool) or value is None or isinstance(value, UnsetType):
        return
    elif isinstance(value, int):
        if abs(value) > _SAFE_INT:
            raise InvalidEntryError(f"{what} is {value}, beyond 2**53 - 1: pi would read it back rounded")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidEntryError(f"{what} is {value!r}: JSON writes it as null")
    elif isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            raise InvalidEntryError(f"{what} holds a lone surrogate, which is not text") from err
    elif isinstance(value, set | frozenset):
        raise InvalidEntryError(f"{what} is a set: JSON writes it as a list")


def _checked(value: object, kind: type[_S], what: str) -> _S:
    """
    ``value`` when it is a ``kind`` whose fields hold values of their declared types (what a reader
    decodes back as that record), else :class:`InvalidEntryError`: msgspec structs do not check their
    fields when made, and a wrong value would be written as is.
    """
    if not isinstance(value, kind):
        raise InvalidEntryError(f"{what} must be a {kind.__name__}, not {type(value).__name__}")
    try:
        msgspec.convert(msgspec.to_builtins(value), type=kind)
    except (msgspec.ValidationError, TypeError, ValueError) as err:
        raise InvalidEntryError(f"{what} holds a value of the wrong type: {err}") from err
    _round_trips(value, what)
    return value


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidEntryError(f"{what} must be a string, not {type(value).__name__}")
    _round_trips(value, what)
    return value


def _items(value: object, kind: type[_S], what: str) -> list[_S]:
    """A list of checked ``kind`` records from a sequence (not a string, bytes or mapping)."""
    if isinstance(value, str | bytes | bytearray | Mapping) or not isinstance(value, Sequence):
        raise InvalidEntryError(f"{what} must be a sequence of {kind.__name__}, not {type(value).__name__}")
    return [_checked(item, kind, f"{what}[{n}]") for n, item in enumerate(value)]


def _role(entry: TranscriptEntry) -> str | None:
    if isinstance(entry, CustomMessageEntry):
        return "custom"
    if isinstance(entry, MessageEntry):
        message = entry.message
        return message.role
    return None


def _sections(value: object) -> SystemSections:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in value.items()
    ):
        raise InvalidEntryError("sections must map section names to strings (or None to remove)")
    _round_trips(value, "sections")
    return dict(value)


def _timestamp_ms(value: object) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidEntryError(f"timestamp must be a finite number of ms, not {value!r}")
    return value


class Pi16Appends:
    """Mixin: the pi 1.6 entries and conventions of a transcript manager (see the module docstring)."""

    # provided by TranscriptManager
    _index: TranscriptIndex
    _leaf_id: str | None
    _clock: Clock
    _append: Callable[..., Awaitable[Any]]
    refresh: Callable[[], Awaitable[int]]
    get_branch: Callable[..., list[TranscriptEntry]]

    _pi_generation_set: PiGeneration | None = None
    _pi_generation_seen: tuple[int, PiGeneration] | None = None

    # -- the generation ----------------------------------------------------------------------------

    @property
    def pi_generation(self) -> PiGeneration:
        """
        Which pi generation's conventions appends follow: ``"1.6"`` writes a branch summary's ``fromId``
        as the abandoned leaf and gives each compaction the current ``systemMessage``; ``"0.73"`` writes
        ``fromId`` = the navigation target and no ``systemMessage`` (pi 0.73.1, OpenClaw 2026.7).

        Default: what the file contains (:func:`~sessionkeeper.transcript.detect_pi_generation`:
        ``"1.6"`` once it holds a pi 1.6 entry, ``"0.73"`` for a new or 0.73.1 file), re-read as the
        file grows. Setting it overrides the detection for this manager.
        """
        if self._pi_generation_set is not None:
            return self._pi_generation_set
        size = len(self._index)
        seen = self._pi_generation_seen
        if seen is None or seen[0] != size:
            if seen is not None and seen[1] == "1.6":  # append-only: a pi 1.6 entry stays in the file
                seen = (size, "1.6")
            else:
                seen = (size, detect_pi_generation(self._index.kinds, self._index.entry_at))
            self._pi_generation_seen = seen
        return seen[1]

    @pi_generation.setter
    def pi_generation(self, value: PiGeneration) -> None:
        if value not in ("0.73", "1.6"):
            raise ValueError(f"pi_generation must be '0.73' or '1.6', not {value!r}")
        self._pi_generation_set = value

    def _summary_from_id(self, target: str | None) -> str:
        """A branch summary's ``fromId``: pi 1.6 the abandoned leaf, pi 0.73.1 the target (``"root"``
        for ``None``)."""
        if self.pi_generation == "1.6":
            return self._leaf_id if self._leaf_id is not None else "root"
        return target if target is not None else "root"

    def compaction_system_message(self, leaf_id: str | None, timestamp: str) -> SystemMessage | None:
        """
        The ``systemMessage`` pi 1.6.0's ``appendCompaction`` stores on a compaction appended at
        ``leaf_id`` with ``timestamp``: the current system message of the leaf's context
        (:func:`~sessionkeeper.transcript.current_system_message`) dated with the entry's timestamp,
        so the instructions survive the compaction. ``None`` on a ``"0.73"`` transcript, or when the
        context has no system message and no tool.
        """
        if self.pi_generation != "1.6" or leaf_id is None:
            return None
        current = current_system_message(self._index.build_context(leaf_id).messages)
        if current is None:
            return None
        return msgspec.structs.replace(current, timestamp=parse_iso_ms(timestamp))

    def _boundary_system_message(
        self, system_message: SystemMessage | UnsetType | None, leaf_id: str | None, timestamp: str
    ) -> SystemMessage | UnsetType:
        """A compaction's ``systemMessage`` field: the given one, none for ``None``, else (``UNSET``)
        :meth:`compaction_system_message`."""
        if system_message is None:
            return UNSET
        if not isinstance(system_message, UnsetType):
            return system_message
        found = self.compaction_system_message(leaf_id, timestamp)
        return found if found is not None else UNSET

    # -- appends -----------------------------------------------------------------------------------

    async def append_usage(
        self, kind: str, *, provider: str, model: str, usage: Usage, note: str | None = None
    ) -> UsageEntry:
        """
        Append a ``usage`` entry (pi 1.6 ``appendUsage``): usage billed outside a reply, e.g. a cache
        keep-alive (``kind="cache_warm"``). It adds nothing to the context. An empty ``note`` is
        omitted, as pi does.

        Raises:
            InvalidEntryError: ``kind``, ``provider``, ``model`` or ``note`` is not a string, or
                ``usage`` is not a :class:`Usage` of numbers (pi's ``appendUsage`` types), or a value
                would not read back as written: a NaN or infinite number, an int beyond 2**53 - 1,
                a lone surrogate in a string; nothing was written.
        """
        _text(kind, "kind")
        _text(provider, "provider")
        _text(model, "model")
        _checked(usage, Usage, "usage")
        if note is not None:
            _text(note, "note")
        value: str | UnsetType = note if note else UNSET
        result: UsageEntry = await self._append(
            lambda i, p, t: UsageEntry(
                id=i,
                parent_id=p,
                timestamp=t,
                kind=kind,
                provider=provider,
                model=model,
                usage=usage,
                note=value,
            )
        )
        return result

    async def append_system_message(
        self,
        content: str | list[TextContent] = "",
        *,
        sections: SystemSections | UnsetType = UNSET,
        tools_added: Sequence[ToolDeclaration] | UnsetType = UNSET,
        tools_removed: Sequence[ToolReference] | UnsetType = UNSET,
        timestamp: int | None = None,
    ) -> MessageEntry:
        """
        Append a ``role: "system"`` message entry (pi 1.6): the system prompt and tool loadout, or a
        patch of them. The first one on a branch declares the ``sections``; a later one replaces
        sections by name (``None`` removes one) and adds or removes tools.

        Args:
            content: Instruction text (pi writes ``""`` and puts the prompt in ``sections``).
            sections: Named prompt sections, in order.
            tools_added: Tools that become available here.
            tools_removed: Tools that stop being available here.
            timestamp: Unix ms; default now.

        Raises:
            InvalidEntryError: A value of another type than these (pi 1.6's ``SystemMessage``): content
                neither a string nor text blocks, sections not strings (or ``None``) by name, tools
                not :class:`ToolDeclaration` / :class:`ToolReference` records, a timestamp that is
                not a finite number; nothing was written.
        """
        if not isinstance(content, str):
            content = _items(content, TextContent, "content")
        else:
            _text(content, "content")
        message = SystemMessage(
            content=content,
            sections=_sections(sections) if not isinstance(sections, UnsetType) else UNSET,
            timestamp=_timestamp_ms(timestamp) if timestamp is not None else self._clock.now_ms(),
            tools_added=(
                _items(tools_added, ToolDeclaration, "tools_added")
                if not isinstance(tools_added, UnsetType)
                else UNSET
            ),
            tools_removed=(
                _items(tools_removed, ToolReference, "tools_removed")
                if not isinstance(tools_removed, UnsetType)
                else UNSET
            ),
        )
        result: MessageEntry = await self._append(
            lambda i, p, t: MessageEntry(id=i, parent_id=p, timestamp=t, message=message)
        )
        return result

    async def append_context_edit(
        self, target_id: str, replacement: str | Sequence[ContentBlock] | None
    ) -> ContextEditEntry:
        """
        Append a ``context_edit`` (pi 1.6 ``appendContextEdit``): from here on this branch, ``target_id``
        is omitted from the context (``replacement=None``) or shown with ``replacement`` as its content
        (every other field as stored). The latest edit of a target wins. A string replacement of an
        assistant or tool-result message is written as one text block, as pi does.

        Raises:
            EntryNotFoundError: ``target_id`` is not in the transcript.
            InvalidEntryError: The replacement is not ``None``, a string or content blocks (pi:
                "must be null or contain string/array content"), or the target is not on the active
                branch, or is not a user, assistant, tool-result or custom message (pi's refusals);
                nothing was written. Also a ``target_id`` that is not a string.
        """
        _text(target_id, "target_id")
        blocks: list[ContentBlock] | None = None
        if replacement is not None and not isinstance(replacement, str):
            if isinstance(replacement, str | bytes | bytearray | Mapping) or not isinstance(
                replacement, Sequence
            ):
                raise InvalidEntryError(
                    "a context edit replacement must be None, a string or content blocks, not "
                    f"{type(replacement).__name__}"
                )
            blocks = []
            for n, block in enumerate(replacement):
                if not isinstance(block, _BLOCK_TYPES):
                    raise InvalidEntryError(
                        f"replacement[{n}] must be a content block, not {type(block).__name__}"
                    )
                blocks.append(_checked(block, type(block), f"replacement[{n}]"))
        if target_id not in self._index.by_id:
            await self.refresh()
            if target_id not in self._index.by_id:
                raise EntryNotFoundError(target_id)
        target = self._index.entry_at(self._index.by_id[target_id])
        if all(entry.id != target_id for entry in self.get_branch()):
            raise InvalidEntryError(f"Entry {target_id} is not on the active branch")
        role = _role(target)
        if role not in EDITABLE_ROLES:
            raise InvalidEntryError(f"Entry {target_id} does not contribute editable model content")
        value: ContextEditReplacement | None
        if replacement is None:
            value = None
        elif isinstance(replacement, str):
            content: str | list[ContentBlock] = (
                [TextContent(text=replacement)] if role in TEXT_BLOCK_ROLES else replacement
            )
            value = ContextEditReplacement(content=content)
        else:
            value = ContextEditReplacement(content=blocks if blocks is not None else [])
        result: ContextEditEntry = await self._append(
            lambda i, p, t: ContextEditEntry(
                id=i, parent_id=p, timestamp=t, target_id=target_id, replacement=value
            )
        )
        return result
