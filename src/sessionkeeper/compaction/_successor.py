"""
Successor transcripts (OpenClaw spec §5.8) and compaction checkpoint metadata (§5.9).

With ``truncateAfterCompaction: true`` the compacted session moves to a new, smaller file: the
summarised messages are dropped, the rest is re-linked, and the old file stays on disk untouched.
:func:`build_successor_entries` is the pure rule; :func:`rotate_after_compaction` writes the file
atomically (0600) next to the old one as ``<ISO stamp with ':' and '.' as '-'>_<uuid>.jsonl`` with a
header whose ``parentSession`` is the old file. :class:`CompactionCheckpoint` records both sides.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import anyio
import attrs
from msgspec import UNSET

from sessionkeeper._clock import SYSTEM_CLOCK, Clock
from sessionkeeper._fs import atomic_write_bytes
from sessionkeeper.compaction._cut import entry_kind, message_of
from sessionkeeper.compaction._landing import locked_and_current
from sessionkeeper.records import encode_header, iso_from_ms, uuid7
from sessionkeeper.transcript import (
    AssistantMessage,
    CompactionEntry,
    LabelEntry,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    TranscriptEntry,
    TranscriptManager,
    TranscriptStorage,
    UserMessage,
    encode_entry,
    entry_from_json,
    entry_to_builtins,
    relink_kept_entries,
)


__all__ = (
    "CheckpointSide",
    "CompactionCheckpoint",
    "SuccessorTranscript",
    "build_successor_entries",
    "rotate_after_compaction",
)

_DEDUPED_STATE = frozenset({"model_change", "thinking_level_change", "session_info"})
_MIN_DUPLICATE_CHARS = 24
_DUPLICATE_WINDOW_MS = 60_000


def _user_signature(entry: TranscriptEntry) -> tuple[str, float] | None:
    message = message_of(entry)
    if not isinstance(message, UserMessage) or not isinstance(message.timestamp, int | float):
        return None
    content = message.content
    if isinstance(content, str):
        text = content
    else:
        if any(type(block).__name__ == "ImageContent" for block in content):
            return None
        text = "\n".join(getattr(block, "text", "") for block in content)
    normalized = re.sub(r"\s+", " ", text).strip()
    if len(normalized) < _MIN_DUPLICATE_CHARS:
        return None
    return unicodedata.normalize("NFC", normalized).lower(), float(message.timestamp)


def _duplicate_user_turns(entries: Sequence[TranscriptEntry]) -> set[str]:
    """Later copies of a long user turn (>= 24 chars) repeated within 60 s (OpenClaw §5.8)."""
    last_seen: dict[str, float] = {}
    duplicates: set[str] = set()
    for entry in entries:
        signature = _user_signature(entry)
        if signature is None:
            continue
        key, at = signature
        previous = last_seen.get(key)
        last_seen[key] = at
        if previous is not None and at - previous <= _DUPLICATE_WINDOW_MS:
            duplicates.add(entry.id)
    return duplicates


def _strip_thinking_signatures(entry: TranscriptEntry) -> TranscriptEntry:
    message = message_of(entry)
    if not isinstance(message, AssistantMessage):
        return entry
    if not any(isinstance(b, ThinkingContent) and b.thinking_signature is not UNSET for b in message.content):
        return entry
    raw = entry_to_builtins(entry)
    blocks = raw["message"]["content"]
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "thinking":
            block.pop("thinkingSignature", None)
    return entry_from_json(raw)


def _with(entry: TranscriptEntry, **changes: Any) -> TranscriptEntry:
    raw = entry_to_builtins(entry)
    raw.update(changes)
    return entry_from_json(raw)


def build_successor_entries(
    all_entries: Sequence[TranscriptEntry], branch: Sequence[TranscriptEntry]
) -> list[TranscriptEntry]:
    """
    The entries of the successor transcript (OpenClaw spec §5.8), in write order.

    Dropped: the branch messages the latest compaction summarised (except the last summarised
    assistant message and its tool results, kept unless the boundary is hardened, i.e. the
    compaction's ``firstKeptEntryId`` is its own id), context markers between that assistant and the
    first kept entry, all but the latest ``model_change`` / ``thinking_level_change`` /
    ``session_info`` before the compaction, later copies of a long user turn repeated within 60 s,
    and labels of dropped entries. Parents and ``firstKeptEntryId`` are re-linked past dropped entries
    by the copy rule every copy shares (:func:`~sessionkeeper.transcript._copy.relink_kept_entries`),
    thinking signatures are stripped from kept pre-compaction messages, the compaction's
    ``firstKeptEntryId`` points at the preserved assistant when there is one, and entries are written
    depth-first with the active branch last (so the leaf on reload is the active leaf).

    Args:
        all_entries: Every entry of the transcript, in file order.
        branch: The active branch, root first; it must contain a compaction.

    Returns:
        The entries to write (empty when the branch has no compaction).
    """
    compaction_index = next(
        (i for i in range(len(branch) - 1, -1, -1) if entry_kind(branch[i]) == "compaction"), -1
    )
    if compaction_index < 0:
        return []
    compaction = branch[compaction_index]
    assert isinstance(compaction, CompactionEntry)
    first_kept_id = compaction.first_kept_entry_id
    before = branch[:compaction_index]
    first_kept_index = next((i for i, e in enumerate(before) if e.id == first_kept_id), -1)
    summarized = {e.id for i, e in enumerate(before) if first_kept_index < 0 or i < first_kept_index}
    kept_before = {e.id for e in before} - summarized
    hardened = first_kept_id == compaction.id

    preserved_index = -1
    if not hardened:
        preserved_index = next(
            (
                i
                for i in range(compaction_index - 1, -1, -1)
                if branch[i].id in summarized and isinstance(message_of(branch[i]), AssistantMessage)
            ),
            -1,
        )
    preserved: set[str] = set()
    if preserved_index >= 0:
        assistant = message_of(branch[preserved_index])
        assert isinstance(assistant, AssistantMessage)
        call_ids = {b.id for b in assistant.content if isinstance(b, ToolCall)}
        preserved.add(branch[preserved_index].id)
        for index in range(preserved_index + 1, first_kept_index if first_kept_index >= 0 else 0):
            result = message_of(branch[index])
            if isinstance(result, ToolResultMessage) and result.tool_call_id in call_ids:
                preserved.add(branch[index].id)

    latest_state: dict[str, str] = {}
    for entry in before:
        if entry_kind(entry) in _DEDUPED_STATE:
            latest_state[entry_kind(entry)] = entry.id
    stale = {e.id for e in before if entry_kind(e) in _DEDUPED_STATE and e.id not in latest_state.values()}
    after = branch[compaction_index + 1 :]
    duplicates = _duplicate_user_turns([e for e in before if e.id not in summarized]) | _duplicate_user_turns(
        after
    )

    branch_index = {e.id: i for i, e in enumerate(branch)}
    removed: set[str] = set()
    for entry in all_entries:
        position = branch_index.get(entry.id, -1)
        kind = entry_kind(entry)
        marker = preserved_index < position < first_kept_index and kind in (
            "custom_message",
            "branch_summary",
        )
        if (
            (entry.id in summarized and ((kind == "message" and entry.id not in preserved) or marker))
            or entry.id in stale
            or entry.id in duplicates
        ):
            removed.add(entry.id)
    kept_before |= preserved
    for entry in all_entries:
        if isinstance(entry, LabelEntry) and entry.target_id in removed:
            removed.add(entry.id)

    by_id = {entry.id: entry for entry in all_entries}
    kept: list[TranscriptEntry] = []
    for item in relink_kept_entries(all_entries, removed, by_id):  # the one copy rule (transcript._copy)
        if item.id in kept_before:
            item = _strip_thinking_signatures(item)
        if item.id == compaction.id and preserved_index >= 0 and not hardened:
            item = _with(item, firstKeptEntryId=branch[preserved_index].id)
        kept.append(item)
    return _order(
        kept, active={e.id for e in branch}, file_order={e.id: i for i, e in enumerate(all_entries)}
    )


def _order(
    entries: list[TranscriptEntry], *, active: set[str], file_order: dict[str, int]
) -> list[TranscriptEntry]:
    """Depth-first from the roots; among siblings, inactive first, then file order (active last)."""
    ids = {e.id for e in entries}
    children: dict[str | None, list[TranscriptEntry]] = {}
    for entry in entries:
        parent = entry.parent_id if entry.parent_id in ids else None
        if parent != entry.parent_id:
            entry = _with(entry, parentId=None)
        children.setdefault(parent, []).append(entry)

    def sort_key(entry: TranscriptEntry) -> tuple[bool, int]:
        return entry.id in active, file_order.get(entry.id, 0)

    ordered: list[TranscriptEntry] = []
    emitted: set[str] = set()
    stack = sorted(children.get(None, []), key=sort_key, reverse=True)
    while stack:
        entry = stack.pop()
        if entry.id in emitted:
            continue
        emitted.add(entry.id)
        ordered.append(entry)
        stack.extend(sorted(children.get(entry.id, []), key=sort_key, reverse=True))
    return ordered


@attrs.frozen(kw_only=True)
class SuccessorTranscript:
    """
    A successor transcript written by :func:`rotate_after_compaction`.

    Attributes:
        path: The new file; ``None`` for a transcript held in a storage (memory, a database), whose
            successor is the transcript ``session_id`` in the same storage (issue 13).
        session_id: Its session id (a UUID v7).
        compaction_entry_id: The compaction it starts from.
        leaf_id: The leaf on reload (the last entry written).
        entries_written: Number of entries (header excluded).
        location: Where it lives: the file's path as text, or the storage's location of ``session_id``
            (``TranscriptStorage.location``). Default: ``str(path)``.
    """

    path: Path | None
    session_id: str
    compaction_entry_id: str
    leaf_id: str | None
    entries_written: int
    location: str = attrs.field(
        default=attrs.Factory(lambda self: str(self.path) if self.path is not None else "", takes_self=True)
    )


async def rotate_after_compaction(
    transcript: TranscriptManager, *, clock: Clock = SYSTEM_CLOCK, session_id: str | None = None
) -> SuccessorTranscript | None:
    """
    Write the successor of a compacted transcript (OpenClaw spec §5.8); the old one is kept.

    A file transcript's successor is a new file next to it, written atomically under the transcript's
    write lock (taken unless the manager already holds it, as inside a compaction's landing). A
    transcript held in a storage (:meth:`TranscriptManager.open_in`: memory, a database; issue 13) gets
    the storage equivalent: a new transcript ``<new session id>`` created in the same storage under the
    old one's writer claim, its header's ``parentSession`` the old one's location. Either way other
    writers' lines are picked up first (issue #7): the successor holds every entry the old transcript
    holds at that moment.

    Args:
        transcript: A file or storage transcript whose branch ends at (or after) a compaction.
        clock: Time of the new header and file name.
        session_id: The new session id; default a UUID v7.

    Returns:
        The :class:`SuccessorTranscript`, or ``None`` for a transcript only in memory
        (:meth:`TranscriptManager.in_memory`), a branch without a compaction, or nothing to write.

    Raises:
        SessionBusyError: The write lock (or the storage's writer claim) was not acquired in time.
        TranscriptChangedError: The old transcript shrank or was replaced since the manager read it.
        OSError: The file could not be written (nothing is left behind: the write is atomic).
        FileExistsError: A storage already holds a transcript under the new session id (nothing written).
    """
    if transcript.path is None:
        storage = transcript.storage
        if storage is None:
            return None
        claim = await storage.claim(transcript.session_id)
        try:
            await transcript.refresh()
            return await _rotate(transcript, clock=clock, session_id=session_id, storage=storage)
        finally:
            with anyio.CancelScope(shield=True):
                await claim.release()
    async with locked_and_current(transcript):
        return await _rotate(transcript, clock=clock, session_id=session_id, storage=None)


async def _rotate(
    transcript: TranscriptManager, *, clock: Clock, session_id: str | None, storage: TranscriptStorage | None
) -> SuccessorTranscript | None:
    branch = transcript.get_branch()
    entries = build_successor_entries(transcript.entries(), branch)
    if not entries:
        return None
    now = clock.now_ms()
    timestamp = iso_from_ms(now)
    new_id = session_id or uuid7(now)
    target: Path | None = None
    if storage is None:
        assert transcript.path is not None
        # absolute paths, as OpenClaw writes them: the store's sessionFile and the header's parentSession
        # name this file from anywhere (a relative one would be read from the sessions dir, or another cwd)
        parent = str(transcript.path.absolute())
        target = transcript.path.absolute().parent / f"{re.sub(r'[:.]', '-', timestamp)}_{new_id}.jsonl"
    else:
        parent = storage.location(transcript.session_id)
    header = {
        "type": "session",
        "version": 3,
        "id": new_id,
        "timestamp": timestamp,
        "cwd": transcript.cwd,
        "parentSession": parent,
    }
    lines = [encode_header(header), *(encode_entry(e) for e in entries)]
    if storage is not None:
        await storage.create(new_id, lines)
        location = storage.location(new_id)
    else:
        assert target is not None
        written = target
        payload = b"".join(line + b"\n" for line in lines)
        await anyio.to_thread.run_sync(lambda: atomic_write_bytes(written, payload))
        location = str(target)
    compaction_id = next(e.id for e in reversed(branch) if entry_kind(e) == "compaction")
    return SuccessorTranscript(
        path=target,
        session_id=new_id,
        compaction_entry_id=compaction_id,
        leaf_id=entries[-1].id,
        entries_written=len(entries),
        location=location,
    )


@attrs.frozen(kw_only=True)
class CheckpointSide:
    """
    One side of a compaction checkpoint (OpenClaw spec §5.9).

    Attributes:
        session_id: The session id on that side.
        session_file: Its transcript file, when known.
        leaf_id: The leaf at that moment.
        entry_id: The compaction entry id (post side) or ``None``.
    """

    session_id: str
    session_file: str | None = None
    leaf_id: str | None = None
    entry_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        """camelCase, absent values omitted."""
        optional = {"sessionFile": self.session_file, "leafId": self.leaf_id, "entryId": self.entry_id}
        return {"sessionId": self.session_id, **{k: v for k, v in optional.items() if v is not None}}


@attrs.frozen(kw_only=True)
class CompactionCheckpoint:
    """
    OpenClaw's ``SessionCompactionCheckpoint`` (spec §5.9): identity of both sides of a compaction.

    Attributes:
        checkpoint_id: A random UUID.
        session_key: The store's session key.
        session_id: The session id after compaction.
        created_at: ms since the epoch.
        reason: ``manual | auto-threshold | overflow-retry | timeout-retry``.
        tokens_before: Context tokens before, when known.
        tokens_after: Context tokens after, when known.
        summary: The summary, when recorded.
        first_kept_entry_id: The compaction's first kept entry.
        pre_compaction: The transcript before.
        post_compaction: The transcript after (the successor when rotated).
    """

    checkpoint_id: str = attrs.field(factory=lambda: str(uuid.uuid4()))
    session_key: str
    session_id: str
    created_at: int
    reason: Literal["manual", "auto-threshold", "overflow-retry", "timeout-retry"]
    tokens_before: int | None = None
    tokens_after: int | None = None
    summary: str | None = None
    first_kept_entry_id: str | None = None
    pre_compaction: CheckpointSide
    post_compaction: CheckpointSide

    def to_json(self) -> dict[str, Any]:
        """The checkpoint in OpenClaw's camelCase shape (absent optional values omitted)."""
        out: dict[str, Any] = {
            "checkpointId": self.checkpoint_id,
            "sessionKey": self.session_key,
            "sessionId": self.session_id,
            "createdAt": self.created_at,
            "reason": self.reason,
        }
        optional = {
            "tokensBefore": self.tokens_before,
            "tokensAfter": self.tokens_after,
            "summary": self.summary,
            "firstKeptEntryId": self.first_kept_entry_id,
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        out["preCompaction"] = self.pre_compaction.to_json()
        out["postCompaction"] = self.post_compaction.to_json()
        return out
