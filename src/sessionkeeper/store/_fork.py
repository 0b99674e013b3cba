"""
Parent fork policy: a new thread or subagent session starts from its parent's active branch, unless the
parent is too large (OpenClaw spec §4.3 "Parent fork"; ``session-fork.ts``, ``session-fork.runtime.ts``,
``session-parent-fork-prepare.ts``, ``session-fork-transcript.runtime.ts``).

The decision is pure (:func:`parent_fork_tokens`, :func:`decide_parent_fork`); the transcript tail is read
by :func:`read_transcript_usage`, and :func:`apply_parent_fork` puts it together over a
:class:`~sessionkeeper.store.SessionStore`.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

import anyio.to_thread
import attrs
import msgspec
from msgspec import UNSET

from sessionkeeper._fs import FILE_MODE, check_safe_name, fsync_dir, iso_stamp
from sessionkeeper.exceptions import (
    ParentTooLargeError,
    SessionBusyError,
    SessionNotFoundError,
    TranscriptNotFoundError,
    UnsafePathError,
)
from sessionkeeper.store._entry import SessionEntry
from sessionkeeper.store._store import SessionStore
from sessionkeeper.transcript import CURRENT_SESSION_VERSION, TranscriptManager, is_locked, read_lock_owner


__all__ = (
    "PARENT_FORK_MAX_TOKENS",
    "ParentForkDecision",
    "ParentForkResult",
    "TranscriptUsage",
    "apply_parent_fork",
    "decide_parent_fork",
    "fork_transcript_lines",
    "parent_fork_tokens",
    "read_transcript_usage",
    "usage_of_record",
)

PARENT_FORK_MAX_TOKENS: Final = 100_000
"""The fixed fork cap, in tokens (OpenClaw ``DEFAULT_PARENT_FORK_MAX_TOKENS``; not configurable since the
legacy ``session.parentForkMaxTokens`` was removed)."""

_BYTES_PER_TOKEN: Final = 4
_TAIL_MAX_BYTES: Final = 1024 * 1024
_TAIL_MAX_LINES: Final = 1000
_MAX_USAGE_LINE_BYTES: Final = 256 * 1024  # OpenClaw skips larger lines (MAX_TRANSCRIPT_PARSE_LINE_BYTES)


@attrs.frozen(kw_only=True)
class TranscriptUsage:
    """
    The latest usage on a transcript's active branch (OpenClaw ``readLatestRecentSessionUsage...``).

    Attributes:
        context_state: ``"available"`` / ``"unavailable"`` from the reply's ``usage.contextUsage``, or
            ``None`` when the reply has none (pi transcripts).
        context_total_tokens: ``contextUsage.totalTokens`` when available, in tokens.
        input_tokens: ``usage.input`` (or a provider alias), in tokens; ``None`` when absent.
        output_tokens: ``usage.output``, in tokens.
        cache_read: ``usage.cacheRead``, in tokens.
        cache_write: ``usage.cacheWrite``, in tokens.
        trailing_bytes: UTF-8 bytes of the branch entries after that reply, one newline each included.
    """

    context_state: Literal["available", "unavailable"] | None = None
    context_total_tokens: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read: int | None = None
    cache_write: int | None = None
    trailing_bytes: int = 0


@attrs.frozen(kw_only=True)
class ParentForkDecision:
    """
    Whether a child may fork its parent (OpenClaw ``resolveParentForkDecision``).

    Attributes:
        action: ``"fork"``, or ``"skip"`` when ``parent_tokens > max_tokens``.
        parent_tokens: The parent's token count (see :func:`parent_fork_tokens`), ``None`` when unknown
            (an unknown size forks).
        max_tokens: The cap, in tokens.
    """

    action: Literal["fork", "skip"]
    parent_tokens: int | None
    max_tokens: int = PARENT_FORK_MAX_TOKENS

    @property
    def message(self) -> str:
        """OpenClaw's notice for a skipped fork (empty for a fork)."""
        if self.action == "fork":
            return ""
        return (
            f"Parent context is too large to fork ({self.parent_tokens}/{self.max_tokens} tokens); "
            "starting with isolated context instead."
        )


@attrs.frozen(kw_only=True)
class ParentForkResult:
    """
    What :func:`apply_parent_fork` did.

    Attributes:
        status: ``"forked"`` (new transcript, child entry points at it); ``"skipped"`` (parent over the
            cap: child marked ``forkedFromParent`` and left isolated); ``"not-needed"`` (no parent key,
            parent is the child itself, or already forked); ``"missing-parent"`` (no parent entry with a
            session id, or no readable parent transcript: child left unchanged).
        entry: The child's entry after the operation (``None`` only when it does not exist).
        decision: The size decision, when one was made.
        transcript_path: The new transcript of a fork.
    """

    status: Literal["forked", "skipped", "not-needed", "missing-parent"]
    entry: SessionEntry | None
    decision: ParentForkDecision | None = None
    transcript_path: Path | None = None


# ------------------------------------------------------------------------------------------ pure rules


def _positive(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value <= 0:
        return None
    return math.floor(value)


def _max_positive(*values: Any) -> int | None:
    found = [v for v in (_positive(x) for x in values) if v is not None]
    return max(found) if found else None


def parent_fork_tokens(
    parent: SessionEntry, *, usage: TranscriptUsage | None, transcript_bytes: int | None
) -> int | None:
    """
    The parent's token count for the fork cap (OpenClaw ``resolveParentForkTokenCountRuntime``, §4.3).

    In order: the persisted ``totalTokens`` when fresh (``totalTokensFresh`` not ``false``; a fresh 0
    counts); else the transcript's last context usage plus ``ceil(trailing bytes / 4)``; else
    ``max(prompt + output, cached totalTokens, ceil(file bytes / 4))`` where prompt = input + cacheRead +
    cacheWrite of the last reply; else ``max(cached totalTokens, ceil(file bytes / 4))``.

    Args:
        parent: The parent's entry.
        usage: The latest usage on the parent's branch (:func:`read_transcript_usage`), if any.
        transcript_bytes: Size of the parent's transcript file in bytes, if it exists.

    Returns:
        Tokens, or ``None`` when nothing is known.
    """
    total = parent.total_tokens
    if isinstance(total, int) and total >= 0 and parent.total_tokens_fresh is not False:
        return total
    cached = _positive(total)
    by_bytes = _positive(math.ceil(transcript_bytes / _BYTES_PER_TOKEN)) if transcript_bytes else None
    if usage is not None:
        transcript_tokens: int | None = None
        if usage.context_state == "available":
            trailing = math.ceil(usage.trailing_bytes / _BYTES_PER_TOKEN)
            transcript_tokens = _positive((usage.context_total_tokens or 0) + trailing)
            if transcript_tokens is not None:
                return transcript_tokens
        elif usage.context_state is None:
            prompt_sum = (usage.input_tokens or 0) + (usage.cache_read or 0) + (usage.cache_write or 0)
            prompt = _positive(prompt_sum)
            if prompt is not None:
                transcript_tokens = prompt + (_positive(usage.output_tokens) or 0)
        if transcript_tokens is not None:
            return _max_positive(transcript_tokens, cached, by_bytes)
    return _max_positive(cached, by_bytes)


def decide_parent_fork(
    parent: SessionEntry,
    *,
    usage: TranscriptUsage | None,
    transcript_bytes: int | None,
    max_tokens: int = PARENT_FORK_MAX_TOKENS,
) -> ParentForkDecision:
    """
    Fork, or skip because the parent is over the cap (``parent_tokens > max_tokens``; OpenClaw §4.3).

    Args:
        parent: The parent's entry.
        usage: See :func:`parent_fork_tokens`.
        transcript_bytes: See :func:`parent_fork_tokens`.
        max_tokens: The cap, in tokens (default :data:`PARENT_FORK_MAX_TOKENS`, OpenClaw's fixed value).
    """
    tokens = parent_fork_tokens(parent, usage=usage, transcript_bytes=transcript_bytes)
    action: Literal["fork", "skip"] = "skip" if tokens is not None and tokens > max_tokens else "fork"
    return ParentForkDecision(action=action, parent_tokens=tokens, max_tokens=max_tokens)


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return 0 if value <= 0 else int(value)


def _first(raw: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        value = raw.get(key)
        if value is not None:
            return value
    return None


def _first_nested(raw: Mapping[str, Any], keys: tuple[str, ...], sub: str) -> Any:
    for key in keys:
        inner = raw.get(key)
        if isinstance(inner, dict) and inner.get(sub) is not None:
            return inner.get(sub)
    return None


def usage_of_record(record: Any) -> TranscriptUsage | None:
    """
    The usage snapshot of one transcript record, or ``None`` when it carries none (OpenClaw
    ``extractUsageSnapshotFromTranscriptLine`` + ``hasTranscriptUsage``, ``normalizeUsage``).

    Only assistant (or role-less) ``message`` records count; ``usage`` is read from the message, else
    from the record. Provider aliases (``input_tokens``, ``prompt_tokens``, ``cache_read_input_tokens``,
    OpenAI's ``cached_tokens`` inside the input, ...) are understood.
    """
    if not isinstance(record, dict):
        return None
    message = record.get("message")
    if not isinstance(message, dict):
        return None
    role = message.get("role")
    if isinstance(role, str) and role != "assistant":
        return None
    raw = message.get("usage") if isinstance(message.get("usage"), dict) else record.get("usage")
    if not isinstance(raw, dict):
        return None
    openai_cached = _first_nested(raw, ("input_tokens_details", "prompt_tokens_details"), "cached_tokens")
    cache_read_raw = _first(raw, "cacheRead", "cache_read", "cache_read_input_tokens", "cached_tokens")
    cache_read = _count(cache_read_raw if cache_read_raw is not None else openai_cached)
    raw_input = _first(raw, "input", "inputTokens", "input_tokens", "promptTokens", "prompt_tokens")
    openai_style = raw.get("cached_tokens") is not None or openai_cached is not None
    if openai_style and cache_read is not None and isinstance(raw_input, int | float):
        raw_input = raw_input - cache_read  # OpenAI counts cached tokens inside the prompt
    context = raw.get("contextUsage")
    state: Literal["available", "unavailable"] | None = None
    context_total: int | None = None
    if isinstance(context, dict) and context.get("state") == "unavailable":
        state = "unavailable"
    elif isinstance(context, dict) and context.get("state") == "available":
        prompt, total = _count(context.get("promptTokens")), _count(context.get("totalTokens"))
        if prompt is not None and total is not None and total >= prompt:
            state, context_total = "available", total
    usage = TranscriptUsage(
        context_state=state,
        context_total_tokens=context_total,
        input_tokens=_count(raw_input),
        output_tokens=_count(
            _first(raw, "output", "outputTokens", "output_tokens", "completionTokens", "completion_tokens")
        ),
        cache_read=cache_read,
        cache_write=_count(_first(raw, "cacheWrite", "cache_write", "cache_creation_input_tokens")),
    )
    cost = _first_nested(raw, ("cost",), "total")
    has_cost = _count(cost) is not None and cost >= 0
    has_usage = (
        has_cost
        or state is not None
        or any(
            v is not None
            for v in (usage.input_tokens, usage.output_tokens, usage.cache_read, usage.cache_write)
        )
    )
    return usage if has_usage else None


# ------------------------------------------------------------------------------------------ transcript


def read_transcript_usage(transcript: TranscriptManager) -> TranscriptUsage | None:
    """
    The latest usage on the active branch (root -> leaf) of a loaded transcript, with the bytes of the
    branch entries after it (OpenClaw ``extractLatestUsageFromTranscriptLines``).

    Like OpenClaw, only the recent part is looked at: the last 1000 branch entries within 1 MiB of lines
    from the leaf; an older usage is not found (the caller then falls back to byte estimates). A line over
    256 KiB is never parsed for usage (it counts as trailing bytes), as in OpenClaw.

    Returns:
        The usage (see :func:`usage_of_record`) with ``trailing_bytes`` set, or ``None``.
    """
    index = transcript.index
    trailing = 0
    positions = index.path_positions(transcript.leaf_id)
    for pos in reversed(positions[-_TAIL_MAX_LINES:]):
        line = index.line_bytes(pos)
        if trailing + len(line) + 1 > _TAIL_MAX_BYTES:
            break
        if index.kinds[pos] == "message" and len(line) <= _MAX_USAGE_LINE_BYTES:
            try:
                usage = usage_of_record(msgspec.json.decode(line))
            except msgspec.DecodeError:
                usage = None
            if usage is not None:
                return attrs.evolve(usage, trailing_bytes=trailing)
        trailing += len(line) + 1
    return None


def _decode(line: bytes) -> Any:
    try:
        return msgspec.json.decode(line)
    except msgspec.DecodeError:
        return None


class _RoleOnly(msgspec.Struct):
    role: Any = None


class _MessageRole(msgspec.Struct):
    message: _RoleOnly | None = None


_ROLE_DECODER: Final = msgspec.json.Decoder(_MessageRole)


def _is_reply(line: bytes) -> bool:
    """Whether a ``message`` line holds an assistant message (decodes only ``message.role``)."""
    try:
        record = _ROLE_DECODER.decode(line)
    except msgspec.DecodeError:
        return False
    return record.message is not None and record.message.role == "assistant"


def _iso(now_ms: int) -> str:
    when = _dt.datetime.fromtimestamp(now_ms / 1000, tz=_dt.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now_ms % 1000:03d}Z"


def fork_transcript_lines(
    transcript: TranscriptManager, *, session_id: str, now_ms: int, parent_session: str
) -> list[bytes]:
    """
    The lines of the transcript a parent fork writes (OpenClaw ``forkSessionFromParentTranscript``,
    ``buildForkedBranchEntries``).

    A header ``{type, version: 3, id, timestamp, cwd, parentSession}`` (``cwd`` from the parent's header,
    else the process's), then, when the active branch (root -> leaf) holds an assistant reply, every branch
    entry byte for byte (``label`` entries on the branch stay where they are, so no entry loses its
    parent), then one new ``label`` entry, chained after the last, for each label entry off the branch
    whose target is on it (file order, its own timestamp). Without an assistant reply: the header alone.

    Unlike pi's ``createBranchedSession`` (:meth:`TranscriptManager.create_branched_session`), which drops
    the branch's label entries and so leaves the entry after a label without its parent, this is what
    OpenClaw writes.

    Args:
        transcript: The loaded parent transcript.
        session_id: The new session id.
        now_ms: The header's time, ms since the epoch.
        parent_session: The header's ``parentSession`` (the parent's file).
    """
    index = transcript.index
    cwd = transcript.header.cwd if isinstance(transcript.header.cwd, str) else str(Path.cwd())
    header = {
        "type": "session",
        "version": CURRENT_SESSION_VERSION,
        "id": session_id,
        "timestamp": _iso(now_ms),
        "cwd": cwd,
        "parentSession": parent_session,
    }
    lines = [msgspec.json.encode(header)]
    positions = index.path_positions(transcript.leaf_id)
    if not any(_is_reply(index.line_bytes(pos)) for pos in positions if index.kinds[pos] == "message"):
        return lines
    lines.extend(index.line_bytes(pos) for pos in positions)
    path_ids = {entry_id for entry_id in (index.ids[pos] for pos in positions) if entry_id is not None}
    taken = set(path_ids)
    parent = index.ids[positions[-1]]
    on_path = set(positions)
    for pos in range(len(index)):
        if index.kinds[pos] != "label" or pos in on_path:
            continue
        record = _decode(index.line_bytes(pos))
        if not isinstance(record, dict) or record.get("id") in path_ids:
            continue
        target, label, stamp = record.get("targetId"), record.get("label"), record.get("timestamp")
        if not (
            isinstance(target, str)
            and target in path_ids
            and isinstance(label, str)
            and isinstance(stamp, str)
        ):
            continue
        label_id = uuid.uuid4().hex[:8]
        while label_id in taken:
            label_id = uuid.uuid4().hex[:8]
        taken.add(label_id)
        entry = {"type": "label", "id": label_id, "parentId": parent, "timestamp": stamp}
        entry.update(targetId=target, label=label)
        lines.append(msgspec.json.encode(entry))
        parent = label_id
    return lines


def _write_new(path: Path, lines: list[bytes]) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        os.write(fd, b"".join(line + b"\n" for line in lines))
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)


async def _open_parent(path: Path | None, store: SessionStore) -> tuple[TranscriptManager | None, int | None]:
    if path is None:
        return None, None
    try:
        size = (await anyio.to_thread.run_sync(path.stat)).st_size
    except OSError:
        return None, None
    try:
        return await TranscriptManager.open(path, clock=store.clock), size
    except (OSError, ValueError):  # TranscriptNotFoundError, TranscriptFormatError: nothing to fork from
        return None, size


async def apply_parent_fork(
    store: SessionStore,
    session_key: str,
    *,
    parent_session_key: str | None = None,
    operator: bool = False,
    session_id: str | None = None,
    max_tokens: int = PARENT_FORK_MAX_TOKENS,
) -> ParentForkResult:
    """
    Apply the parent fork policy to the child session ``session_key`` (OpenClaw spec §4.3).

    For a child whose entry names a parent (``parentSessionKey``, or ``parent_session_key``) and is not
    yet forked (``forkedFromParent`` not ``true``), the parent's size is decided by
    :func:`decide_parent_fork` (fixed cap 100 000 tokens):

    - over the cap: no fork; the child is marked ``forkedFromParent: true`` and keeps its isolated
      context (status ``"skipped"``);
    - otherwise the parent's active branch is copied into ``<sessions dir>/<ISO stamp>_<new id>.jsonl``
      (0600; :func:`fork_transcript_lines`: header ``parentSession`` = the parent's file, branch entries
      byte for byte, off-branch labels re-attached; header only when the branch has no assistant reply,
      as in OpenClaw). The child gets the new ``sessionId``/``sessionFile``,
      ``forkedFromParent: true``, ``totalTokens`` removed and ``totalTokensFresh: false`` (``"forked"``).

    An absent child entry is created (with ``parentSessionKey``) when the fork or skip is recorded.

    Args:
        store: The store holding both entries; its sessions directory holds the transcripts.
        session_key: The child's session key.
        parent_session_key: The parent's key (default: the child's ``parentSessionKey``).
        operator: An operator fork (OpenClaw ``sessions.create {fork:true}``): refused, with an error,
            while the parent's transcript write lock is held by a live process, when the parent is over
            the cap, or when it has no entry or transcript.
        session_id: Id of the forked session (default: a new UUID v4, as OpenClaw's ``randomUUID``).
        max_tokens: The cap, in tokens (default and OpenClaw's fixed value: 100 000).

    Returns:
        What was done; see :class:`ParentForkResult`.

    Raises:
        SessionBusyError: (operator) The parent's transcript is locked by a live process.
        ParentTooLargeError: (operator) The parent is over the cap.
        SessionNotFoundError: (operator) No parent entry with a session id.
        TranscriptNotFoundError: (operator) The parent has no readable transcript.
        UnsafePathError: ``session_id`` is not a safe file name.
    """
    child = await store.get(session_key)
    parent_key = (parent_session_key or "").strip() or (
        child.parent_session_key.strip()
        if child is not None and isinstance(child.parent_session_key, str)
        else ""
    )
    if (
        not parent_key
        or parent_key == session_key
        or (child is not None and child.forked_from_parent is True)
    ):
        return ParentForkResult(status="not-needed", entry=child)
    parent = await store.get(parent_key)
    if parent is None or not isinstance(parent.session_id, str) or not parent.session_id:
        if operator:
            raise SessionNotFoundError(parent_key)
        return ParentForkResult(status="missing-parent", entry=child)
    try:
        parent_path = store.transcript_file(parent)
    except UnsafePathError:
        parent_path = None
    if operator and parent_path is not None and is_locked(parent_path, clock=store.clock):
        owner = read_lock_owner(parent_path)
        raise SessionBusyError(
            f"Parent session {parent_key} is still active; try again in a moment.",
            path=parent_path,
            waited_ms=0,
            owner_pid=owner.pid if owner is not None else None,
        )
    transcript, size = await _open_parent(parent_path, store)
    usage = read_transcript_usage(transcript) if transcript is not None else None
    decision = decide_parent_fork(parent, usage=usage, transcript_bytes=size, max_tokens=max_tokens)
    if decision.action == "skip":
        if operator:
            assert decision.parent_tokens is not None
            raise ParentTooLargeError(parent_key, parent_tokens=decision.parent_tokens, max_tokens=max_tokens)
        entry = await store.patch(session_key, parent_session_key=parent_key, forked_from_parent=True)
        return ParentForkResult(status="skipped", entry=entry, decision=decision)
    if transcript is None or parent_path is None:
        if operator:
            raise TranscriptNotFoundError(f"no readable transcript for parent session {parent_key!r}")
        return ParentForkResult(status="missing-parent", entry=child, decision=decision)
    new_id = session_id if session_id is not None else str(uuid.uuid4())
    directory = store.sessions_dir if store.sessions_dir is not None else parent_path.parent
    target = directory / f"{iso_stamp(store.clock.now_ms())}_{new_id}.jsonl"
    check_safe_name(new_id, what="session id")
    lines = fork_transcript_lines(
        transcript, session_id=new_id, now_ms=store.clock.now_ms(), parent_session=str(parent_path)
    )
    await anyio.to_thread.run_sync(_write_new, target, lines)
    entry = await store.patch(
        session_key,
        {
            "sessionId": new_id,
            "sessionFile": str(target),
            "parentSessionKey": parent_key,
            "forkedFromParent": True,
            "totalTokens": UNSET,
            "totalTokensFresh": False,
        },
    )
    return ParentForkResult(status="forked", entry=entry, decision=decision, transcript_path=target)
