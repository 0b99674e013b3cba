"""
An openai-agents ``Session`` kept in a sessionkeeper transcript (extra ``openai-agents``).

Importing this module imports ``agents``; ``import sessionkeeper`` never does. :class:`TranscriptSession`
implements the SDK's session protocol (``get_items``, ``add_items``, ``pop_item``, ``clear_session``,
``session_settings``) over a :class:`~sessionkeeper.transcript.TranscriptManager`, so an openai-agents app
gets pi-compatible tree transcripts, compaction (a compaction summary is replayed as the first item), and
the ``sessionkeeper`` CLI by swapping one object.
"""

from __future__ import annotations

import time
from typing import Any, cast

import msgspec
from agents.memory import SessionABC, SessionSettings

from sessionkeeper.adapters._common import ToolCallIdMap
from sessionkeeper.adapters._responses import (
    _assistant_items,
    messages_from_responses_items,
    to_responses_request,
)
from sessionkeeper.records import (
    AssistantMessage,
    MessageEntry,
    ToolResultMessage,
    UserMessage,
)
from sessionkeeper.transcript import (
    TranscriptManager,
)


_KNOWN = (UserMessage, AssistantMessage, ToolResultMessage)


__all__ = ("POP_MARKER_CUSTOM_TYPE", "TranscriptSession")

POP_MARKER_CUSTOM_TYPE = "sessionkeeper.openai-agents.pop"
"""``customType`` of the ``custom`` entry that persists a leaf moved by ``pop_item`` / ``clear_session``
(a ``custom`` entry is never part of the model context; pi spec §5.6)."""


class TranscriptSession(SessionABC):
    """
    openai-agents session memory in a transcript.

    ``add_items`` converts the SDK's Responses input items to transcript messages
    (:func:`~sessionkeeper.adapters.messages_from_responses_items`) and appends them in one durable write;
    ``get_items`` rebuilds the context (pi's ``buildSessionContext``: compaction summary first) and
    converts it back (:func:`~sessionkeeper.adapters.to_responses_request`). ``pop_item`` and
    ``clear_session`` never delete: they move the leaf (to the parent of the last item, or before the root)
    and record the move with a ``custom`` entry, so the earlier branch stays in the file (``sessionkeeper
    tree`` shows it) and the move survives a reopen.

    Args:
        transcript: The transcript to keep the items in (e.g. ``(await runtime.open(key)).transcript``
            or ``await TranscriptManager.open(path)``).
        session_id: The id openai-agents sees; default: the transcript's session id.
        session_settings: The SDK's ``SessionSettings`` (``limit`` caps ``get_items`` without a limit).
        model: Recorded as the ``model`` of assistant messages made from items.

    Raises:
        ValueError: From ``add_items``, for an item type a transcript cannot keep without loss.
    """

    def __init__(
        self,
        transcript: TranscriptManager,
        *,
        session_id: str | None = None,
        session_settings: SessionSettings | None = None,
        model: str = "",
    ) -> None:
        self.transcript = transcript
        self.session_id: str = session_id or transcript.session_id
        self.session_settings = session_settings
        self.model = model

    def _items(self) -> list[dict[str, Any]]:
        messages = self.transcript.build_session_context().messages
        return cast(list[dict[str, Any]], to_responses_request(messages, model=self.model)["input"])

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The session's items, oldest first; the last ``limit`` (or ``session_settings.limit``) when set."""
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        items = self._items()
        return items[-limit:] if limit else items if limit is None else []

    async def add_items(self, items: list[Any]) -> None:
        """Append ``items`` (Responses input items) to the transcript as messages, in one write."""
        messages = messages_from_responses_items(
            [dict(item) for item in items], model=self.model, timestamp=int(time.time() * 1000)
        )
        if messages:
            await self.transcript.append_messages(messages)

    async def pop_item(self) -> Any | None:
        """
        Remove the most recent item and return it (``None`` when the session is empty).

        The last message entry of the branch is left behind by moving the leaf to its parent; when it is
        an assistant reply of several items (reasoning, text, calls), the reply without its last block is
        appended again.
        """
        entries = [
            e
            for e in self.transcript.get_branch()
            if isinstance(e, MessageEntry) and isinstance(e.message, _KNOWN)
        ]
        if not entries:
            return None
        entry = entries[-1]
        message = entry.message
        rest: AssistantMessage | None = None
        if isinstance(message, AssistantMessage):
            items = _assistant_items(message, ToolCallIdMap())
            if len(items) > 1 and len(items) == len(message.content):
                rest = msgspec.structs.replace(message, content=message.content[:-1])
        else:
            items = to_responses_request([message], model=self.model)["input"]
        if entry.parent_id is None:
            self.transcript.reset_leaf()
        else:
            self.transcript.branch(entry.parent_id)
        await self.transcript.append_custom(POP_MARKER_CUSTOM_TYPE, data={"popped": entry.id})
        if rest is not None:
            await self.transcript.append_message(rest)
        return items[-1] if items else None

    async def clear_session(self) -> None:
        """Start over: the next items start a new root; the old ones stay in the file."""
        self.transcript.reset_leaf()
        await self.transcript.append_custom(POP_MARKER_CUSTOM_TYPE, data={"cleared": True})
