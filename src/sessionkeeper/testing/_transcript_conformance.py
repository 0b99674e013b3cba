"""
The transcript-storage conformance suite: every contract of :class:`~sessionkeeper.abc.TranscriptStorage`
as checks runnable against any storage (issue 12: one suite for the file, memory and database storages).
Exported by :mod:`sessionkeeper.testing.conformance`; see its docstring for use.
"""

from __future__ import annotations

import json
from typing import ClassVar, Final

import anyio
import attrs

from sessionkeeper.exceptions import (
    LockError,
    LockNotHeldError,
    SessionBusyError,
    SessionKeeperError,
    StaleTranscriptError,
    TranscriptChangedError,
    TranscriptFormatError,
    TranscriptNotFoundError,
    UnsafePathError,
)
from sessionkeeper.testing._checks import ContractCheck, Expect, Factory, run_checks
from sessionkeeper.transcript import ArchivingTranscriptStorage, StorageMark, TranscriptStorage


__all__ = (
    "TRANSCRIPT_STORAGE_CHECKS",
    "StorageFactory",
    "TranscriptStorageCheck",
    "TranscriptStorageConformanceError",
    "run_transcript_storage_conformance",
)

StorageFactory = Factory[TranscriptStorage]
"""Returns a new, empty transcript storage (sync or async)."""


class TranscriptStorageConformanceError(SessionKeeperError, AssertionError):
    """A storage broke a :class:`~sessionkeeper.abc.TranscriptStorage` contract (names the check)."""


_expect = Expect(TranscriptStorageConformanceError)


def _line(kind: str, n: int, **extra: object) -> bytes:
    record: dict[str, object] = {"type": kind, "id": f"{n:08x}", "parentId": None}
    record["timestamp"] = "2026-01-01T00:00:00.000Z"
    record.update(extra)
    record["n"] = n  # last, so lines differ in their last bytes too (a file compares those)
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()


_HEADER: Final = (
    b'{"type":"session","version":3,"id":"s-1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}'
)
_ODD: Final = (
    _line("custom", 1, data='ünïcode ✓ \u2028 \\u0000 "quoted"'),
    _line("custom", 2, data="x" * 70_000),  # longer than a read chunk
    b"",  # a blank line is a line
    _line("custom", 3, data=[1.5, None]),
)


async def _empty(factory: StorageFactory, reopen: StorageFactory | None) -> None:
    s = await _expect.made(factory)
    _expect.that(await s.list_sessions() == [], "a new storage lists no session")
    _expect.that(not await s.delete("nope"), "deleting a missing transcript returns False")
    await _expect.raises(TranscriptNotFoundError, "read of a missing transcript", lambda: s.read("nope"))
    _expect.that(isinstance(s.location("nope"), str) and s.location("nope") != "", "location() is a text")


async def _create_read(factory: StorageFactory, reopen: StorageFactory | None) -> None:
    s = await _expect.made(factory)
    lines = [_HEADER, *_ODD]
    mark = await s.create("s-1", lines)
    _expect.that(mark.lines == len(lines), "create() returns the mark after every line")
    _expect.that(
        mark.size == sum(len(x) + 1 for x in lines), "a mark's size counts each line and its newline"
    )
    got, read_mark = await s.read("s-1")
    _expect.that(got == lines, "lines are stored and read byte for byte, in order")
    _expect.that(read_mark == mark, "read() returns the same mark as create()")
    await _expect.raises(
        FileExistsError, "create() of an existing transcript", lambda: s.create("s-1", [_HEADER])
    )
    _expect.that((await s.read("s-1"))[0] == lines, "a refused create() changes nothing")


async def _conditional_append(factory: StorageFactory, reopen: StorageFactory | None) -> None:
    s = await _expect.made(factory)
    start = await s.create("s-1", [_HEADER])
    a = await s.append("s-1", [_line("custom", 1)], mark=start)
    _expect.that(
        a.lines == 2 and a.size == start.size + len(_line("custom", 1)) + 1, "append() returns the new mark"
    )
    await _expect.raises(
        StaleTranscriptError,
        "an append with a mark others appended after",
        lambda: s.append("s-1", [_line("custom", 2)], mark=start),
    )
    _expect.that(len((await s.read("s-1"))[0]) == 2, "a stale append writes nothing")
    foreign, after = await s.read_since("s-1", start)
    _expect.that(foreign == [_line("custom", 1)] and after == a, "read_since() gives what others appended")
    b = await s.append("s-1", [_line("custom", 2), _line("custom", 3)], mark=after)
    _expect.that(b.lines == 4, "an append after reading lands")
    _expect.that(await s.append("s-1", [], mark=b) == b, "an empty append changes nothing")
    _expect.that(
        await s.append("s-1", [], mark=start) == start,
        "an empty append returns its mark as given, even stale",
    )
    nothing, same = await s.read_since("s-1", b)
    _expect.that(nothing == [] and same == b, "read_since() at the end gives nothing")
    lines, _ = await s.read("s-1")
    _expect.that(
        lines == [_HEADER, _line("custom", 1), _line("custom", 2), _line("custom", 3)], "appends keep order"
    )


async def _read_backwards(factory: StorageFactory, reopen: StorageFactory | None) -> None:
    s = await _expect.made(factory)
    mark = await s.create("s-1", [_HEADER])
    mark = await s.append("s-1", list(_ODD), mark=mark)
    backwards = [line async for line in s.read_backwards("s-1")]
    _expect.that(backwards == [*reversed(_ODD), _HEADER], "read_backwards() gives every line, last first")
    await _expect.raises(
        TranscriptNotFoundError, "read_backwards() of a missing transcript", lambda: _drain(s, "nope")
    )


async def _drain(s: TranscriptStorage, session_id: str) -> list[bytes]:
    return [line async for line in s.read_backwards(session_id)]


async def _claims(factory: StorageFactory, reopen: StorageFactory | None) -> None:
    s = await _expect.made(factory)
    mark = await s.create("s-1", [_HEADER])
    claim = await s.claim("s-1", timeout_ms=1000)
    try:
        _expect.that(claim.held, "a claim is held once taken")
        claim.ensure_held()
        await _expect.raises(
            SessionBusyError, "a second claim while one is held", lambda: s.claim("s-1", timeout_ms=50)
        )
        mark = await s.append("s-1", [_line("custom", 1)], mark=mark, claim=claim)
        mark_2 = await s.create("s-2", [_HEADER])
        other = await s.claim("s-2", timeout_ms=50)  # claims are per transcript
        try:
            await _expect.raises(
                LockNotHeldError,
                "an append with a claim taken on another transcript",
                lambda: s.append("s-2", [_line("custom", 2)], mark=mark_2, claim=claim),
            )
        finally:
            await other.release()
        await _expect.raises(
            LockNotHeldError,
            "an append with another transcript's claim while this one is free",
            lambda: s.append("s-2", [_line("custom", 2)], mark=mark_2, claim=claim),
        )
        _expect.that(
            len((await s.read("s-2"))[0]) == 1, "an append with another transcript's claim writes nothing"
        )
    finally:
        await claim.release()
    _expect.that(not claim.held, "a released claim is not held")
    await claim.release()  # a second release does nothing
    await _expect.raises(
        LockNotHeldError,
        "an append with a released claim",
        lambda: s.append("s-1", [_line("custom", 2)], mark=mark, claim=claim),
    )
    _expect.that(len((await s.read("s-1"))[0]) == 2, "an append with a released claim writes nothing")
    again = await s.claim("s-1", timeout_ms=1000)
    await again.release()


async def _claim_excludes_appends(factory: StorageFactory, reopen: StorageFactory | None) -> None:
    s = await _expect.made(factory)
    mark = await s.create("s-1", [_HEADER])
    claim = await s.claim("s-1", timeout_ms=1000)
    landed: list[StorageMark] = []

    async def other_writer() -> None:
        landed.append(await s.append("s-1", [_line("custom", 9)], mark=mark))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(other_writer)
            await anyio.sleep(0.05)
            _expect.that(not landed, "an append without the claim waits while another writer holds it")
            await claim.release()
    finally:
        await claim.release()
    _expect.that(
        len(landed) == 1 and landed[0].lines == 2, "the waiting append lands once the claim is released"
    )


async def _idempotency(factory: StorageFactory, reopen: StorageFactory | None) -> None:
    s = await _expect.made(factory)
    start = await s.create("s-1", [_HEADER])
    first = await s.append("s-1", [_line("custom", 1)], mark=start, idempotency_key="turn-1")
    retry = await s.append("s-1", [_line("custom", 1)], mark=start, idempotency_key="turn-1")
    _expect.that(retry == first, "a retry with a used idempotency key returns the first append's mark")
    _expect.that(len((await s.read("s-1"))[0]) == 2, "a retry with a used idempotency key writes nothing")
    claim = await s.claim("s-1", timeout_ms=1000)
    claimed = await s.append("s-1", [_line("custom", 5)], mark=first, claim=claim, idempotency_key="turn-c")
    await claim.release()
    again = await s.append("s-1", [_line("custom", 5)], mark=first, claim=claim, idempotency_key="turn-c")
    _expect.that(
        again == claimed, "a retry with a used key returns the first mark even once its claim is released"
    )
    first = claimed
    second = await s.append("s-1", [_line("custom", 2)], mark=first, idempotency_key="turn-2")
    _expect.that(second.lines == 4, "another key appends")


async def _refused_session_id(s: TranscriptStorage, bad: str, mark: StorageMark) -> None:
    what = f"session id {bad[:12]!r}"
    await _expect.raises(UnsafePathError, f"create() with {what}", lambda: s.create(bad, [_HEADER]))
    await _expect.raises(UnsafePathError, f"read() with {what}", lambda: s.read(bad))
    await _expect.raises(
        UnsafePathError, f"append() with {what}", lambda: s.append(bad, [_line("custom", 1)], mark=mark)
    )
    await _expect.raises(UnsafePathError, f"read_backwards() with {what}", lambda: _drain(s, bad))
    await _expect.raises(UnsafePathError, f"claim() with {what}", lambda: s.claim(bad, timeout_ms=50))
    await _expect.raises(UnsafePathError, f"delete() with {what}", lambda: s.delete(bad))


async def _bad_arguments(factory: StorageFactory, reopen: StorageFactory | None) -> None:
    s = await _expect.made(factory)
    mark = await s.create("s-1", [_HEADER])
    await _expect.raises(
        TranscriptFormatError,
        "an append of a line holding a newline",
        lambda: s.append("s-1", [_line("custom", 1), b'{"a":1}\n{"b":2}'], mark=mark),
    )
    _expect.that(len((await s.read("s-1"))[0]) == 1, "an append of a line holding a newline writes nothing")
    await _expect.raises(
        TranscriptFormatError,
        "a create with a line holding a newline",
        lambda: s.create("s-2", [_HEADER + b"\n"]),
    )
    _expect.that(await s.list_sessions() == ["s-1"], "a create with a line holding a newline creates nothing")
    for bad in ("", ".", "..", "a/b", "a\\b", "a\0b", "x" * 300):
        await _refused_session_id(s, bad, mark)
    _expect.that(await s.list_sessions() == ["s-1"], "refused session ids create nothing")
    await _expect.raises(LockError, "claim(timeout_ms=0)", lambda: s.claim("s-1", timeout_ms=0))
    await _expect.raises(LockError, "claim(timeout_ms=-1)", lambda: s.claim("s-1", timeout_ms=-1))
    claim = await s.claim("s-1", timeout_ms=1000)  # a refused claim() left nothing held
    await claim.release()


async def _list_delete(factory: StorageFactory, reopen: StorageFactory | None) -> None:
    s = await _expect.made(factory)
    for sid in ("b", "a", "c"):
        await s.create(sid, [_HEADER])
    _expect.that(await s.list_sessions() == ["a", "b", "c"], "list_sessions() gives every id, sorted")
    _expect.that(await s.delete("b"), "delete() of a present transcript returns True")
    _expect.that(await s.list_sessions() == ["a", "c"], "a deleted transcript is not listed")
    await _expect.raises(TranscriptNotFoundError, "read of a deleted transcript", lambda: s.read("b"))
    mark = await s.create("b", [_HEADER])
    _expect.that(mark.lines == 1, "a deleted id can be created again")


async def _replaced(factory: StorageFactory, reopen: StorageFactory | None) -> None:
    s = await _expect.made(factory)
    old = await s.create("s-1", [_HEADER, _line("custom", 1)])
    await s.delete("s-1")
    await s.create("s-1", [_HEADER, _line("custom", 2), _line("custom", 3)])
    await _expect.raises(
        TranscriptChangedError,
        "read_since() with a mark of a deleted and re-created transcript",
        lambda: s.read_since("s-1", old),
    )
    await _expect.raises(
        TranscriptChangedError,
        "an append with a mark of a deleted and re-created transcript",
        lambda: s.append("s-1", [_line("custom", 4)], mark=old),
    )
    _expect.that(
        len((await s.read("s-1"))[0]) == 3, "an append refused for a replaced transcript writes nothing"
    )


async def _concurrent_writers(factory: StorageFactory, reopen: StorageFactory | None) -> None:
    s = await _expect.made(factory)
    start = await s.create("s-1", [_HEADER])
    writers, turns = 4, 8

    async def writer(w: int) -> None:
        mark = start
        for t in range(turns):
            line = _line("custom", w * 1000 + t)
            while True:
                try:
                    mark = await s.append("s-1", [line], mark=mark)
                    break
                except StaleTranscriptError:
                    _, mark = await s.read_since("s-1", mark)

    async with anyio.create_task_group() as tg:
        for w in range(writers):
            tg.start_soon(writer, w)
    lines, mark = await s.read("s-1")
    expected = {_line("custom", w * 1000 + t) for w in range(writers) for t in range(turns)}
    _expect.that(len(lines) == 1 + writers * turns, "every acknowledged append is present exactly once")
    _expect.that(set(lines[1:]) == expected, "no append is lost or duplicated across writers")
    _expect.that(mark.lines == len(lines), "the final mark counts every line")


async def _persistence(factory: StorageFactory, reopen: StorageFactory | None) -> None:
    s = await _expect.made(factory)
    mark = await s.create("s-1", [_HEADER])
    mark = await s.append("s-1", [_line("custom", 1)], mark=mark)
    other = await _expect.made(reopen)
    lines, other_mark = await other.read("s-1")
    _expect.that(lines == [_HEADER, _line("custom", 1)], "another instance reads what was written")
    _expect.that(await other.list_sessions() == ["s-1"], "another instance lists the transcript")
    other_mark = await other.append("s-1", [_line("custom", 2)], mark=other_mark)
    await _expect.raises(
        StaleTranscriptError,
        "an append with a mark another instance appended after",
        lambda: s.append("s-1", [_line("custom", 3)], mark=mark),
    )
    claim = await other.claim("s-1", timeout_ms=1000)
    try:
        await _expect.raises(
            SessionBusyError, "a claim while another instance holds it", lambda: s.claim("s-1", timeout_ms=50)
        )
    finally:
        await claim.release()
    foreign, mark = await s.read_since("s-1", mark)
    _expect.that(foreign == [_line("custom", 2)], "read_since() sees another instance's append")


_ARCHIVED_AT: Final = 1_790_000_000_123  # ms since epoch


async def _archives(factory: StorageFactory, reopen: StorageFactory | None) -> None:
    s = await _expect.made(factory)
    if not isinstance(s, ArchivingTranscriptStorage):
        return  # an optional capability (ArchivingTranscriptStorage): nothing to check
    lines = [_HEADER, _line("custom", 1)]
    await s.create("s-1", lines)
    await s.create("s-2", [_HEADER])
    first = await s.archive("s-1", reason="reset", now_ms=_ARCHIVED_AT)
    _expect.that(first is not None, "archive() of a present transcript returns the archive")
    assert first is not None
    _expect.that(
        (first.session_id, first.reason, first.archived_at_ms) == ("s-1", "reset", _ARCHIVED_AT),
        "the archive names its session id, reason and time",
    )
    _expect.that(first.size == sum(len(line) + 1 for line in lines), "an archive's size is its bytes")
    await _expect.raises(TranscriptNotFoundError, "read of an archived transcript", lambda: s.read("s-1"))
    _expect.that(await s.list_sessions() == ["s-2"], "an archived transcript is not listed")
    _expect.that(await s.list_archives() == [first], "list_archives() gives the archive")
    mark = await s.create("s-1", [_HEADER])
    _expect.that(mark.lines == 1, "an archived id can be created again")
    await _expect.raises(
        FileExistsError,
        "archive() over an archive of the same id, reason and time",
        lambda: s.archive("s-1", reason="reset", now_ms=_ARCHIVED_AT),
    )
    _expect.that(len((await s.read("s-1"))[0]) == 1, "a refused archive() moves nothing")
    second = await s.archive("s-1", reason="deleted", now_ms=_ARCHIVED_AT + 1000)
    _expect.that(second is not None and second.reason == "deleted", "a second archive of one id")
    _expect.that(await s.list_archives() == [first, second], "list_archives() lists oldest first")
    _expect.that(await s.archive("nope", reason="reset", now_ms=_ARCHIVED_AT) is None, "archive() of none")
    await _expect.raises(
        UnsafePathError, "archive() of an unsafe id", lambda: s.archive("../x", reason="reset", now_ms=0)
    )
    _expect.that(not await s.delete_archive("s-2"), "delete_archive() of a live session's id does nothing")
    _expect.that(await s.list_sessions() == ["s-2"], "delete_archive() never removes a live transcript")
    _expect.that(await s.delete_archive(first.name), "delete_archive() of an archive returns True")
    _expect.that(not await s.delete_archive(first.name), "delete_archive() of a removed archive: False")
    _expect.that(await s.list_archives() == [second], "a deleted archive is not listed")


@attrs.frozen(kw_only=True)
class TranscriptStorageCheck(ContractCheck[TranscriptStorage]):
    """
    One contract check of :class:`~sessionkeeper.abc.TranscriptStorage` (the runner is shared with the
    store-backend kit).

    Attributes:
        name: Short identifier (use as the pytest id).
        doc: The rule checked.
        body: The check: ``await body(factory, reopen)``.
        needs_reopen: The check needs a second instance on the same storage (``reopen``).

    ``await check.run(factory, reopen=None)`` runs it on storages from ``factory`` (and ``reopen``) and
    raises :class:`TranscriptStorageConformanceError` when the contract does not hold, or the storage
    raised an exception the check did not expect (the original is the ``__cause__``); the message starts
    with the check's name. Also when ``reopen`` is missing where needed.
    """

    failure: ClassVar[type[SessionKeeperError]] = TranscriptStorageConformanceError


_Check = TranscriptStorageCheck

TRANSCRIPT_STORAGE_CHECKS: tuple[TranscriptStorageCheck, ...] = (
    _Check(name="empty", doc="a new storage is empty; missing transcripts", body=_empty),
    _Check(name="create_read", doc="lines round-trip byte for byte; no overwrite", body=_create_read),
    _Check(name="conditional_append", doc="appends land only at the writer's mark", body=_conditional_append),
    _Check(name="read_backwards", doc="lines from the end, last first", body=_read_backwards),
    _Check(name="claims", doc="one writer claim per transcript; released claims", body=_claims),
    _Check(
        name="claim_excludes_appends",
        doc="an unclaimed append waits for the claim",
        body=_claim_excludes_appends,
    ),
    _Check(name="idempotency", doc="a retried append lands once", body=_idempotency),
    _Check(
        name="bad_arguments",
        doc="newlines in lines, unsafe session ids, non-positive claim timeouts are refused",
        body=_bad_arguments,
    ),
    _Check(name="list_delete", doc="listing and deleting by session id", body=_list_delete),
    _Check(name="replaced", doc="marks of a re-created transcript are refused", body=_replaced),
    _Check(
        name="archives",
        doc="an archived transcript leaves the live set and keeps its bytes (ArchivingTranscriptStorage)",
        body=_archives,
    ),
    _Check(
        name="concurrent_writers",
        doc="read-and-retry writers lose and duplicate nothing",
        body=_concurrent_writers,
    ),
    _Check(
        name="persistence",
        doc="a second instance sees the lines, the marks and the claims",
        body=_persistence,
        needs_reopen=True,
    ),
)
"""Every transcript-storage check, in a stable order."""


async def run_transcript_storage_conformance(
    factory: StorageFactory, *, reopen: StorageFactory | None = None
) -> None:
    """
    Run every check of :data:`TRANSCRIPT_STORAGE_CHECKS` (``persistence`` only with ``reopen``).

    Raises:
        TranscriptStorageConformanceError: The first contract that does not hold, named.
    """
    await run_checks(TRANSCRIPT_STORAGE_CHECKS, factory, reopen=reopen)
