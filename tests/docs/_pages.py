"""
Runs a docs page the way a reader does: its code blocks in order, in one session (issue #17).

A page's ``python`` blocks share one namespace and one event loop, like ``python -m asyncio`` or Jupyter:
a block with a top-level ``await`` runs on the loop (kept between blocks, so a client or a server made in
one block is used in the next), any other block is executed as plain code (so ``anyio.run`` inside it
works). Line numbers in tracebacks are the page's.

A block written as ``{code-block} LANG`` with a ``:caption: PATH`` option (a relative path) is a file the
reader writes: it is written to ``PATH`` under the current directory, in page order, before the blocks
after it run.

A ``console`` block is a shell session: each line ``$ sessionkeeper ARGS`` runs the CLI in-process
(``ARGS`` split as a POSIX shell does, ``$NAME`` replaced by the environment variable, ``*`` globbed in
the current directory), and the lines after it, up to
the next ``$``, are the output the reader is shown: each of them must appear in the real output (runs of
spaces and tabs compare equal, so the plain-text tables may be aligned for reading; ``<id>`` stands for an
entry id, 8 hex digits, and ``<...>`` for any text, such as a time stamp of the run), and a line ``...``
stands for lines left out. A command whose last shown line is ``[exit N]`` must exit with N, every other
command with 0.
"""

from __future__ import annotations

import ast
import asyncio
import glob
import inspect
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from sessionkeeper.cli._main import cli


DOCS = Path(__file__).resolve().parents[2] / "docs"

_FENCE = re.compile(r"^```(\w+|\{code-block\} \w+)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_CAPTION = re.compile(r"\A:caption: (\S+)\n")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: its language, its text and the page line its text starts on."""

    language: str
    text: str
    line: int
    file: str | None = None


def blocks(page: Path, *languages: str) -> list[Block]:
    """The fenced blocks of ``page`` in the given languages (all when none is given), in page order."""
    source = page.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(source):
        language, text, line = match.group(1), match.group(2), source.count("\n", 0, match.start(2)) + 1
        file = None
        if language.startswith("{code-block}"):
            language = language.split()[1]
            caption = _CAPTION.match(text)
            if caption:
                file, text, line = caption.group(1), text[caption.end() :], line + 1
        if not languages or language in languages:
            found.append(Block(language, text, line, file))
    return found


@dataclass(frozen=True)
class Command:
    """A ``$ sessionkeeper ...`` line of a console block and the output shown after it."""

    argv: list[str]
    shown: list[str]
    exit_code: int
    line: int


def commands(block: Block) -> list[Command]:
    """The commands of a console block, each with the output lines the page shows for it."""
    found: list[Command] = []
    argv: list[str] | None = None
    shown: list[str] = []
    start = 0

    def close() -> None:
        if argv is not None:
            code = 0
            if shown and (m := re.fullmatch(r"\[exit (\d+)\]", shown[-1].strip())):
                code = int(m.group(1))
                shown.pop()
            found.append(Command(argv, list(shown), code, start))

    for offset, line in enumerate(block.text.splitlines()):
        if line.startswith("$ "):
            close()
            argv, shown, start = shlex.split(line[2:], comments=True), [], block.line + offset
            assert argv[0] == "sessionkeeper", f"line {start}: only sessionkeeper commands run here: {line}"
        elif argv is not None and line.strip():
            shown.append(line)
    close()
    return found


def _squeeze(text: str) -> str:
    return re.sub(r"[ \t]+", " ", text).strip()


def _pattern(shown: str) -> re.Pattern[str]:
    parts = re.split(r"(<id>|<\.\.\.>)", _squeeze(shown))
    holes = {"<id>": "[0-9a-f]{8}", "<...>": ".*?"}
    return re.compile("".join(holes.get(part, re.escape(part)) for part in parts))


def run_command(command: Command) -> str:
    """Run one console command in the current directory; check its exit code and the shown output."""
    args: list[str] = []
    for raw in command.argv[1:]:
        arg = os.path.expandvars(raw)
        matches = sorted(glob.glob(arg)) if "*" in arg else []
        args += matches or [arg]
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    where = f"docs line {command.line}: sessionkeeper {' '.join(command.argv[1:])}"
    assert result.exit_code == command.exit_code, f"{where} exited {result.exit_code}:\n{result.output}"
    actual = [_squeeze(line) for line in result.output.splitlines()]
    position = 0
    for line in command.shown:
        if line.strip() == "...":
            continue
        wanted = _pattern(line)
        hits = [i for i in range(position, len(actual)) if wanted.search(actual[i])]
        assert hits, f"{where}: the page shows {line!r}, the command printed:\n{result.output}"
        position = hits[0] + 1
    return result.output


def run_page(page: Path) -> dict[str, Any]:
    """Run every python and console block of ``page`` in order; return the python namespace."""
    namespace: dict[str, Any] = {"__name__": f"docs_{page.stem}"}
    with asyncio.Runner() as runner:
        for block in blocks(page):
            if block.file is not None:  # a file the page asks the reader to write
                Path(block.file).parent.mkdir(parents=True, exist_ok=True)
                Path(block.file).write_text(block.text, encoding="utf-8")
                continue
            if block.language not in ("python", "console"):
                continue
            if block.language == "console":
                for command in commands(block):
                    run_command(command)
                continue
            source = "\n" * (block.line - 1) + block.text
            code = compile(source, str(page), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            if code.co_flags & inspect.CO_COROUTINE:
                runner.run(eval(code, namespace))
            else:
                exec(code, namespace)
    return namespace
