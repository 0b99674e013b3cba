"""
"Last N messages" reads backwards in chunks sized to what it needs (issue 16).

The first read holds ``n`` messages of the assumed size and each further read is sized to the messages
still missing; it used to start at 64 KiB and double, so 50 messages just over 64 KiB took two reads
and 1,000 messages six.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from sessionkeeper.exceptions import TranscriptNotFoundError
from sessionkeeper.transcript import (
    MessageEntry,
    TextContent,
    TranscriptManager,
    UserMessage,
    load_transcript,
)
from sessionkeeper.transcript.file._tail_messages import (
    DEFAULT_MAX_TAIL_BYTES,
    _last_messages_walk,
    _linear_tail_messages,
    aread_last_messages,
    last_messages_of_index,
    read_last_messages,
)


SAMPLES = Path(__file__).resolve().parent.parent / "data" / "pi"

pytestmark = pytest.mark.anyio


def _walk(path: Path, n: int) -> tuple[int, int]:
    with path.open("rb") as handle:
        found = _last_messages_walk(handle, n, max_tail_bytes=DEFAULT_MAX_TAIL_BYTES, chunk_bytes=None)
    assert found is not None
    messages, reader = found
    assert reader is not None
    assert messages == last_messages_of_index(load_transcript(path), n)
    return reader.reads, reader.bytes_read


async def test_fifty_messages_over_64_kib_take_one_read(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    manager = await TranscriptManager.create(path, cwd="/w", durability="none")
    for i in range(120):  # about 1.6 KB per line: 50 messages take about 80 KB
        await manager.append_message(
            UserMessage(content=[TextContent(text=f"{i} " + "x" * 1500)], timestamp=i)
        )
    reads, read_bytes = _walk(path, 50)
    assert reads == 1
    assert read_bytes < 3 * 50 * 1600  # sized to the need, not the whole file
    expected = tuple(e.message for e in manager.entries()[-50:] if isinstance(e, MessageEntry))
    assert read_last_messages(path, 50) == expected and len(expected) == 50


@pytest.mark.parametrize(("n", "most_reads"), [(10, 1), (50, 1), (200, 1), (1000, 2)])
def test_the_samples_need_at_most_one_read_per_megabyte(tmp_path: Path, n: int, most_reads: int) -> None:
    path = tmp_path / "large-20k.jsonl"
    with gzip.open(SAMPLES / "large-20k.jsonl.gz", "rb") as src, path.open("wb") as out:
        shutil.copyfileobj(src, out)
    for sample in (SAMPLES / "large-2000.jsonl", path):
        reads, _ = _walk(sample, n)
        assert reads <= most_reads, (sample.name, n, reads)


@pytest.mark.parametrize("n", [1, 50, 120, 600])
async def test_async_reads_agree_on_the_loop_and_in_a_thread(n: int) -> None:
    """Walks within 256 KiB run on the event loop's thread, longer ones in a worker: same answer."""
    for sample in (SAMPLES / "large-2000.jsonl", SAMPLES / "full.jsonl", SAMPLES / "branchy.jsonl"):
        assert await aread_last_messages(sample, n) == read_last_messages(sample, n)
        assert await aread_last_messages(sample, n, max_tail_bytes=1) == read_last_messages(sample, n)


async def test_async_read_of_lines_longer_than_the_loop_budget(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    manager = await TranscriptManager.create(path, cwd="/w", durability="none")
    for i in range(6):  # 100 KB per message: three messages pass the 256 KiB the loop thread reads
        await manager.append_message(UserMessage(content=f"{i} " + "x" * 100_000, timestamp=i))
    expected = tuple(e.message for e in manager.entries() if isinstance(e, MessageEntry))
    assert await aread_last_messages(path, 5) == expected[-5:]
    assert await aread_last_messages(path, 2) == expected[-2:]


async def test_async_read_raises_the_loader_errors(tmp_path: Path) -> None:
    with pytest.raises(TranscriptNotFoundError):
        await aread_last_messages(tmp_path / "missing.jsonl", 5)
    assert await aread_last_messages(tmp_path / "missing.jsonl", 0) == ()


def _linear(path: Path, n: int) -> tuple[object, ...] | None:
    with path.open("rb") as handle:
        found = _linear_tail_messages(handle, n, max_tail_bytes=DEFAULT_MAX_TAIL_BYTES, first_chunk=4096)
    return None if found is None else found[0]


async def test_a_linear_tail_is_read_by_the_one_decode_walk_and_a_branched_one_is_not(tmp_path: Path) -> None:
    """The one-decode walk answers only a tail where each line is its successor's parent (the common
    case); a line of another branch, a repeated id or an unknown line leave it to the general walk, and
    the answer is the full loader's either way."""
    path = tmp_path / "s.jsonl"
    manager = await TranscriptManager.create(path, cwd="/w", durability="none")
    for i in range(30):
        await manager.append_message(UserMessage(content=f"{i} " + "x" * 300, timestamp=i))
    entries = manager.entries()
    expected = last_messages_of_index(load_transcript(path), 10)
    assert _linear(path, 10) == expected and len(expected) == 10
    assert _linear(path, 100) == last_messages_of_index(load_transcript(path), 100)  # up to the root
    manager.branch(entries[-5].id)  # the last four lines become an abandoned branch
    await manager.append_message(UserMessage(content="on the branch", timestamp=99))
    await manager.append_custom("ext", data={"x": 1})  # a typed line that is not a message
    expected = last_messages_of_index(load_transcript(path), 10)
    assert expected[-1] == UserMessage(content="on the branch", timestamp=99)
    assert _linear(path, 10) is None
    assert read_last_messages(path, 10) == expected
    with path.open("ab") as out:  # an entry of a type this library does not know becomes the leaf
        out.write(b'{"type":"future","id":"f1","parentId":"' + entries[-1].id.encode() + b'"}\n')
    assert _linear(path, 10) is None
    assert read_last_messages(path, 10) == last_messages_of_index(load_transcript(path), 10)
