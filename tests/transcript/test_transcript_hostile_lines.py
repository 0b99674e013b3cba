"""Hostile lines (deep nesting, non-JSON constants, unencodable values) are reported or refused."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from tests._helpers import run_cli

from sessionkeeper.exceptions import TranscriptFormatError
from sessionkeeper.transcript import TranscriptManager, UserMessage, load_transcript


_HEADER = '{"type":"session","version":3,"id":"s1","timestamp":"2026-01-05T10:00:00.000Z","cwd":"/p"}'


def _msg(entry_id: str, parent: str | None, text: str) -> str:
    return json.dumps(
        {
            "type": "message",
            "id": entry_id,
            "parentId": parent,
            "timestamp": "2026-01-05T10:00:01.000Z",
            "message": {"role": "user", "content": text, "timestamp": 1},
        }
    )


def _deep_file(tmp_path: Path, depth: int) -> Path:
    nested = "[" * depth + "]" * depth
    custom = (
        '{"type":"custom","customType":"x","data":' + nested + ',"id":"e2","parentId":"e1","timestamp":"t"}'
    )
    file = tmp_path / "deep.jsonl"
    file.write_text("\n".join([_HEADER, _msg("e1", None, "a"), custom, _msg("e3", "e2", "c")]) + "\n")
    return file


@pytest.mark.parametrize("depth", [1000, 100_000])
def test_deeply_nested_line_is_reported_not_a_crash(tmp_path: Path, depth: int) -> None:
    file = _deep_file(tmp_path, depth)
    index = load_transcript(file)
    assert index.diagnostics.invalid_lines == (3,)
    assert [m.content for m in index.build_context().messages] == ["c"]  # type: ignore[union-attr]
    for args in (["context", "--json"], ["tree"], ["doctor"], ["compact", "--dry-run"]):
        run = run_cli(args[0], str(file), *args[1:])
        assert run.exception is None or isinstance(run.exception, SystemExit), args
        assert "Traceback" not in run.output


def test_append_after_deeply_nested_unterminated_tail(tmp_path: Path) -> None:
    file = tmp_path / "t.jsonl"
    file.write_text(_HEADER + "\n" + _msg("e1", None, "a") + "\n" + "[" * 5000)

    async def main() -> None:
        manager = await TranscriptManager.open(file)
        await manager.append_message(UserMessage(content="b", timestamp=2))

    anyio.run(main)
    assert file.read_text().splitlines()[-1].startswith('{"type":"message"')
    assert len(load_transcript(file)) == 2


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_json_constants_make_the_line_invalid_as_in_pi(tmp_path: Path, constant: str) -> None:
    bad = _msg("e2", "e1", "b").replace('"timestamp": 1}', f'"timestamp": {constant}}}')
    assert constant in bad
    file = tmp_path / "t.jsonl"
    file.write_text("\n".join([_HEADER, _msg("e1", None, "a"), bad]) + "\n")
    index = load_transcript(file)
    assert index.diagnostics.invalid_lines == (3,)
    assert [m.content for m in index.build_context().messages] == ["a"]  # type: ignore[union-attr]


def test_append_of_a_value_json_cannot_hold_is_a_typed_error(tmp_path: Path) -> None:
    file = tmp_path / "t.jsonl"

    async def main() -> None:
        manager = await TranscriptManager.create(file, cwd="/p")
        await manager.append_message(UserMessage(content="a", timestamp=1))
        before = file.read_bytes()
        with pytest.raises(TranscriptFormatError, match="nothing was written"):
            await manager.append_custom("state", data={"handle": object()})
        assert file.read_bytes() == before
        await manager.append_message(UserMessage(content="b", timestamp=2))

    anyio.run(main)
    assert [m.content for m in load_transcript(file).build_context().messages] == ["a", "b"]  # type: ignore[union-attr]
