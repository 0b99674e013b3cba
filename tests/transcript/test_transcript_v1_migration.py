"""Opening a v1 transcript rewrites it as v3 on the first append, never losing lines others appended."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from sessionkeeper.exceptions import TranscriptError
from sessionkeeper.transcript import TranscriptManager, UserMessage, load_transcript


_V1 = [
    '{"type":"session","id":"legacy","timestamp":"2025-06-01T10:00:00.000Z","cwd":"/p"}',
    '{"type":"message","timestamp":"2025-06-01T10:00:01.000Z","message":{"role":"user","content":"one","timestamp":1}}',
    '{"type":"message","timestamp":"2025-06-01T10:00:02.000Z","message":{"role":"user","content":"two","timestamp":2}}',
]


def test_migration_rewrite_never_drops_lines_another_writer_appended(tmp_path: Path) -> None:
    file = tmp_path / "v1.jsonl"
    file.write_text("\n".join(_V1) + "\n")

    async def main() -> None:
        first = await TranscriptManager.open(file)
        second = await TranscriptManager.open(file)
        await second.append_message(UserMessage(content="from second", timestamp=3))
        before = file.read_bytes()
        with pytest.raises(TranscriptError, match="changed on disk"):
            await first.append_message(UserMessage(content="from first", timestamp=4))
        assert file.read_bytes() == before  # nothing written, nothing lost
        reopened = await TranscriptManager.open(file)
        await reopened.append_message(UserMessage(content="from first", timestamp=4))

    anyio.run(main)
    texts = [m.content for m in load_transcript(file).build_context().messages]  # type: ignore[union-attr]
    assert texts == ["one", "two", "from second", "from first"]


def test_migration_rewrite_of_an_unchanged_file_still_works(tmp_path: Path) -> None:
    file = tmp_path / "v1.jsonl"
    file.write_text("\n".join(_V1) + "\n")

    async def main() -> None:
        manager = await TranscriptManager.open(file)
        await manager.append_message(UserMessage(content="three", timestamp=3))
        await manager.append_message(UserMessage(content="four", timestamp=4))

    anyio.run(main)
    index = load_transcript(file)
    assert index.header.version == 3
    assert [m.content for m in index.build_context().messages] == ["one", "two", "three", "four"]  # type: ignore[union-attr]
