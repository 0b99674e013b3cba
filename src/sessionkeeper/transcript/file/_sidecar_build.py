"""
Building and extending the ancestry index of a transcript (see :mod:`._sidecar` for what it holds and
how it is stored and validated): one forward scan of the entry lines, read with the loader's rules
(pi-format spec §2), at C speed for well-formed lines.

Parents are resolved as the loader resolves them (spec §9 item 2, the last occurrence of an id wins):
an entry whose ``parentId`` is the id of the entry just before it (what pi writes) needs no lookup; any
other parent is found through the crc table and verified by reading its line. A duplicated id or a
parent written after its child makes the prefix "not simple": the result is then an ``unsupported``
index, so readers walk that file instead.
"""

from __future__ import annotations

import bisect
import operator
import os
import zlib
from array import array
from collections.abc import Sequence
from itertools import accumulate, chain, compress, repeat
from typing import Final, cast

from sessionkeeper.transcript._context import entry_thinking_level
from sessionkeeper.transcript._lines import TailRecord, entry_heads_at, parse_entry_line
from sessionkeeper.transcript.file._sidecar import (
    AncestryIndex,
    CorruptIndexError,
    candidates,
    end_hash_before,
    id_crc,
    line_at,
)


__all__ = ("build_index",)

_READ_CHUNK: Final = 1 << 20
_TLC: Final = "thinking_level_change"
_ENCODE: Final = operator.methodcaller("encode", "utf-8", "surrogatepass")
_POS_MASK: Final = 0xFFFFFFFF
_MAX_ENTRIES: Final = 1 << 31


class _NotSimpleError(Exception):
    """The prefix has a duplicated id or a forward reference."""


class _Builder:
    """Scans entry lines forward and grows the arrays (see :func:`build_index`)."""

    def __init__(self, fd: int, base: AncestryIndex | None) -> None:
        self.fd = fd
        self.offsets = array("Q", base.offsets if base is not None else ())
        self.old_n = len(self.offsets)
        self.prev: object = base.last_id if base is not None and base.last_id is not None else _START
        self.buckets: list[array[int]] = [array("Q") for _ in range(256)]  # new keys by top byte
        self.events: dict[int, str | None] = {}  # non-linear entries: position -> parent id, None = root
        self.selves: set[int] = set()  # positions of usable thinking_level_change entries

    def add_lines(self, lines: list[bytes], base_offset: int) -> None:
        """Index complete lines (without their newlines), the first one starting at ``base_offset``."""
        starts = list(accumulate(map(operator.add, map(len, lines), repeat(1)), initial=base_offset))
        kinds, ids, parents, datas, offsets = entry_heads_at(lines, starts[:-1])
        keep = [entry_id is not None for entry_id in ids]
        if not all(keep):
            kinds, ids, parents = (
                list(compress(kinds, keep)),
                list(compress(ids, keep)),
                list(compress(parents, keep)),
            )
            datas, offsets = list(compress(datas, keep)), list(compress(offsets, keep))
        count = len(ids)
        if not count:
            return
        first = len(self.offsets)
        if first + count >= _MAX_ENTRIES:
            raise _NotSimpleError
        self.offsets.extend(offsets)
        parents = [parent or None for parent in parents]
        previous: list[object] = [self.prev, *ids[:-1]]
        self.prev = ids[-1]
        linear = list(map(operator.eq, parents, previous))
        for k in compress(range(count), map(operator.not_, linear)):
            self.events[first + k] = parents[k]
        at = -1
        while (at := _index_of(kinds, _TLC, at + 1)) >= 0:
            record = parse_entry_line(datas[at])
            if record is not None and entry_thinking_level(record.entry) is not None:
                self.selves.add(first + at)
        crcs = map(zlib.crc32, map(_ENCODE, cast("list[str]", ids)))
        buckets = self.buckets
        for key in map(operator.or_, map(operator.lshift, crcs, repeat(32)), range(first, first + count)):
            buckets[key >> 56].append(key)

    def record(self, pos: int, covered: int) -> TailRecord:
        record = parse_entry_line(line_at(self.fd, self.offsets[pos], covered))
        if record is None or record.entry_id is None:
            raise CorruptIndexError
        return record

    def merge_keys(self, old: Sequence[int], covered: int) -> array[int]:
        """All keys sorted; raises :class:`_NotSimpleError` when a new id repeats another id."""
        keys = array("Q")
        lo = 0
        for top, new in enumerate(self.buckets):
            hi = bisect.bisect_left(old, (top + 1) << 56, lo)
            if not new:
                keys.extend(old[lo:hi])
                lo = hi
                continue
            merged = sorted(chain(old[lo:hi], new))
            lo = hi
            crcs = list(map(operator.rshift, merged, repeat(32)))
            if len(set(crcs)) != len(crcs):
                self._check_collisions(merged, crcs, covered)
            keys.extend(merged)
        self.buckets = []
        return keys

    def _check_collisions(self, merged: list[int], crcs: list[int], covered: int) -> None:
        start = 0
        while start < len(merged):
            end = start + 1
            while end < len(merged) and crcs[end] == crcs[start]:
                end += 1
            group = [key & _POS_MASK for key in merged[start:end]]
            if end - start > 1 and max(group) >= self.old_n:
                seen = [self.record(pos, covered).entry_id for pos in group]
                if len(set(seen)) != len(seen):
                    raise _NotSimpleError
            start = end


_START: Final = object()


def _index_of(values: list[str], value: str, start: int) -> int:
    try:
        return values.index(value, start)
    except ValueError:
        return -1


def build_index(
    fd: int,
    *,
    start: int,
    size: int,
    real_path: str,
    session_id: str,
    st: os.stat_result,
    base: AncestryIndex | None = None,
) -> AncestryIndex | None:
    """
    Build the ancestry index of the open transcript ``fd`` up to its last newline before ``size``:
    from ``start`` (where entries begin) or, with ``base``, by extending that index from its
    ``covered`` offset (the caller checked that ``base`` describes this file).

    Lines are read with the loader's rules (:func:`parse_entry_line`). Returns the index (an
    ``unsupported`` one, without arrays, when the prefix has a duplicated id or a forward reference),
    or ``None`` when the file changed while it was read. Raises ``OSError`` if it cannot be read.
    """
    builder = _Builder(fd, base)
    pos = base.covered if base is not None else start
    carry: list[bytes] = []  # the pieces of a line not ended yet
    carry_len = 0
    while pos < size:
        data = os.pread(fd, min(_READ_CHUNK, size - pos), pos)
        if not data:
            return None
        pos += len(data)
        lines = data.split(b"\n")  # no copy of the whole chunk: the partial ends are joined apart
        if len(lines) == 1:
            carry.append(data)
            carry_len += len(data)
            continue
        first = pos - len(data) - carry_len
        if carry:
            lines[0] = b"".join([*carry, lines[0]])
        last = lines.pop()
        carry, carry_len = ([last], len(last)) if last else ([], 0)
        try:
            builder.add_lines(lines, first)
        except _NotSimpleError:
            return _unsupported(fd, real_path, session_id, st, pos - carry_len)
    covered = pos - carry_len
    try:
        return _finish(builder, fd, base, real_path=real_path, session_id=session_id, st=st, covered=covered)
    except _NotSimpleError:
        return _unsupported(fd, real_path, session_id, st, covered)


def _unsupported(fd: int, real_path: str, session_id: str, st: os.stat_result, covered: int) -> AncestryIndex:
    return AncestryIndex(
        real_path=real_path,
        session_id=session_id,
        dev=st.st_dev,
        ino=st.st_ino,
        covered=covered,
        end_hash=end_hash_before(fd, covered),
        last_id=None,
        unsupported=True,
    )


def _finish(
    builder: _Builder,
    fd: int,
    base: AncestryIndex | None,
    *,
    real_path: str,
    session_id: str,
    st: os.stat_result,
    covered: int,
) -> AncestryIndex:
    old_keys: Sequence[int] = base.keys if base is not None else ()
    keys = builder.merge_keys(old_keys, covered)
    count = len(builder.offsets)
    unresolved: list[int] = []
    if base is not None:  # a parent a prefix entry missed must not have appeared since
        for key in base.unresolved:
            crc, child = key >> 32, key & _POS_MASK
            wanted = builder.record(child, covered).parent_id
            for pos in candidates(keys, crc):
                if pos >= builder.old_n and builder.record(pos, covered).entry_id == wanted:
                    raise _NotSimpleError
            unresolved.append(key)
    thinking = array("i", base.thinking if base is not None else ())
    thinking.extend(repeat(-1, count - len(thinking)))
    value = thinking[builder.old_n - 1] if builder.old_n else -1
    run_start = builder.old_n
    events = builder.events
    for pos in sorted(events.keys() | builder.selves):
        if pos > run_start:
            thinking[run_start:pos] = array("i", (value,)) * (pos - run_start)
        parent_id = events.get(pos)
        parent = (
            -1
            if parent_id is None
            else _resolve(builder, keys, pos, parent_id, covered=covered, unresolved=unresolved)
        )
        if pos in builder.selves:
            value = pos
        elif pos in events:
            value = thinking[parent] if parent >= 0 else -1
        thinking[pos] = value
        run_start = pos + 1
    if count > run_start:
        thinking[run_start:count] = array("i", (value,)) * (count - run_start)
    last_id = builder.prev if isinstance(builder.prev, str) else None
    return AncestryIndex(
        real_path=real_path,
        session_id=session_id,
        dev=st.st_dev,
        ino=st.st_ino,
        covered=covered,
        end_hash=end_hash_before(fd, covered),
        last_id=last_id,
        offsets=builder.offsets,
        thinking=thinking,
        keys=keys,
        unresolved=array("Q", sorted(unresolved)),
    )


def _resolve(
    builder: _Builder, keys: Sequence[int], child: int, parent_id: str, *, covered: int, unresolved: list[int]
) -> int:
    """The position of ``parent_id`` (which must precede ``child``), -1 when it is not in the prefix."""
    crc = id_crc(parent_id)
    for pos in candidates(keys, crc):
        if builder.record(pos, covered).entry_id == parent_id:
            if pos >= child:
                raise _NotSimpleError
            return pos
    unresolved.append(crc << 32 | child)
    return -1
