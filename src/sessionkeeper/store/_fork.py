"""
Parent fork policy: a new thread or subagent session starts from its parent's active branch, unless the
parent is too large (OpenClaw spec §4.3 "Parent fork"; ``session-parent-fork-prepare.ts``,
``session-fork-transcript.runtime.ts``, ``session-create-service.ts``).

The size decision lives in :mod:`._fork_size`; :func:`fork_transcript_lines` builds the new transcript and
:func:`apply_parent_fork` puts it together over a :class:`~sessionkeeper.store.SessionStore`.
"""

from __future__ import annotations

import os
import uuid
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
from sessionkeeper.store._fork_size import (
    PARENT_FORK_MAX_TOKENS,
    ParentForkDecision,
    decide_parent_fork,
    read_transcript_usage,
)
from sessionkeeper.store._store import SessionStore
from sessionkeeper.transcript import (
    LabelEntry,
    TranscriptManager,
    copy_path,
    create_transcript_lines,
    is_locked,
    read_lock_owner,
)


__all__ = ("ParentForkResult", "apply_parent_fork", "fork_transcript_lines")


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
    positions = index.path_positions(transcript.leaf_id)
    if not any(_is_reply(index.line_bytes(pos)) for pos in positions if index.kinds[pos] == "message"):
        return create_transcript_lines(session_id, now_ms=now_ms, cwd=cwd, parent_session=parent_session)
    branch = copy_path(index, positions)[1]  # the one copy rule; labels stay, so nothing is re-linked
    path_ids = {entry_id for entry_id in (index.ids[pos] for pos in positions) if entry_id is not None}
    taken = set(path_ids)
    parent = index.ids[positions[-1]]
    on_path = set(positions)
    labels: list[LabelEntry] = []
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
        labels.append(
            LabelEntry(id=label_id, parent_id=parent, timestamp=stamp, target_id=target, label=label)
        )
        parent = label_id
    return create_transcript_lines(
        session_id, now_ms=now_ms, cwd=cwd, parent_session=parent_session, entries=[*branch, *labels]
    )


def _write_new(path: Path, lines: list[bytes]) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as out:  # a buffered write: no short write on a large branch
            out.writelines(line + b"\n" for line in lines)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        path.unlink(missing_ok=True)  # never leave a half-written fork behind (no entry points at it yet)
        raise
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
    check_safe_name(new_id, what="session id")
    directory = store.sessions_dir if store.sessions_dir is not None else parent_path.parent
    name = f"{iso_stamp(store.clock.now_ms())}_{new_id}.jsonl"
    # absolute paths, as OpenClaw writes them: a relative sessionFile would be read from the sessions dir
    target, source = await anyio.to_thread.run_sync(
        lambda: ((directory / name).absolute(), parent_path.absolute())
    )
    lines = fork_transcript_lines(
        transcript, session_id=new_id, now_ms=store.clock.now_ms(), parent_session=str(source)
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
