"""
Every command's ``--help`` reads like the docs (issue 17): its epilog starts ``Examples:`` and lists
command lines that parse -- checked with click's own parser (``make_context``), nothing runs -- and the
same examples stand in docs/cli.md.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
from tests._helpers import run_cli

from sessionkeeper.cli._main import cli


CLI_PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
_EXAMPLE = re.compile(r"^  (sessionkeeper .+)$", flags=re.MULTILINE)
_FILE_SUFFIXES = {".json", ".jsonl", ".sqlite"}


def _commands(
    group: click.Group = cli, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], click.Command]]:
    """Every command with its path under ``sessionkeeper``: the root, the groups and the leaves."""
    found: list[tuple[tuple[str, ...], click.Command]] = [(path, group)]
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # the root group loads its commands lazily
        command = group.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            found += _commands(command, (*path, name))
        else:
            found.append(((*path, name), command))
    return found


COMMANDS = _commands()


def _ids(value: object) -> str:
    return " ".join(("sessionkeeper", *value)) if isinstance(value, tuple) else ""


def examples(command: click.Command) -> list[str]:
    """The example command lines of a command's epilog (lines indented by two, ``sessionkeeper ...``)."""
    return _EXAMPLE.findall(command.epilog or "")


def _as_the_shell_passes_it(example: str, home: Path) -> list[str]:
    """
    The example's arguments as a POSIX shell gives them (``~/`` expanded to ``home``), after making each
    relative or home path it names: an empty file for a ``.json``/``.jsonl``/``.sqlite`` name, else a
    directory, so options that want an existing path parse. Absolute paths and URLs are left alone.
    """
    argv = []
    for token in shlex.split(example)[1:]:
        if token.startswith("~/"):
            token = str(home / token[2:])
        path = Path(token)
        local = "://" not in token and (not path.is_absolute() or path.is_relative_to(home))
        if local and ("/" in token or path.suffix in _FILE_SUFFIXES) and not path.exists():
            if path.suffix in _FILE_SUFFIXES:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
            else:
                path.mkdir(parents=True)
        argv.append(token)
    return argv


def _parse(argv: list[str]) -> click.Context:
    """Resolve the subcommands and parse the leaf's arguments and options as a run would; run nothing."""
    ctx = click.Context(cli, info_name="sessionkeeper")
    command: click.Command = cli
    while isinstance(command, click.Group):
        name, sub, argv = command.resolve_command(ctx, argv)
        assert name is not None and sub is not None
        if not isinstance(sub, click.Group):
            return sub.make_context(name, argv, parent=ctx)
        ctx, command = click.Context(sub, info_name=name, parent=ctx), sub
    raise AssertionError("unreachable")  # pragma: no cover


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=_ids)
def test_every_command_has_examples_in_its_epilog(path: tuple[str, ...], command: click.Command) -> None:
    epilog = command.epilog or ""
    assert epilog.startswith("\b\nExamples:\n"), f"sessionkeeper {' '.join(path)}: no 'Examples:' epilog"
    assert examples(command), f"sessionkeeper {' '.join(path)}: the epilog has no example"


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=_ids)
def test_every_example_parses(
    path: tuple[str, ...], command: click.Command, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    for example in examples(command):
        assert "--help" not in example and "|" not in example, example
        try:
            ctx = _parse(_as_the_shell_passes_it(example, home))
        except click.UsageError as err:
            pytest.fail(f"{example!r} does not parse: {err.format_message()}")
        ran = ctx.command_path.split()[1:]
        # a leaf's examples run that command; a group's run one of its commands
        assert ran[: len(path)] == list(path), f"{example!r} runs {ctx.command_path}, not a {path} example"


def test_a_wrong_example_would_not_parse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for wrong in (
        "sessionkeeper prune sessions/a.jsonl",  # --context-window is required
        "sessionkeeper tree sessions/a.jsonl --width wide",
        "sessionkeeper sessions list --store sessions --bogus",
        "sessionkeeper context a.jsonl b.jsonl",
    ):
        with pytest.raises(click.UsageError):
            _parse(_as_the_shell_passes_it(wrong, tmp_path))
    with pytest.raises(click.UsageError, match="No such command"):
        _parse(["sesions", "list"])


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=_ids)
def test_help_shows_each_example_on_its_own_line(path: tuple[str, ...], command: click.Command) -> None:
    result = run_cli(*path, "--help", env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = [line.strip() for line in result.stdout.splitlines()]
    assert "Examples:" in lines
    for example in examples(command):
        assert example in lines, f"{example!r} is wrapped or missing in the help"


def test_the_cli_page_shows_the_same_examples() -> None:
    text = CLI_PAGE.read_text(encoding="utf-8")
    section = text.split("\n## Examples\n", 1)
    assert len(section) == 2, "docs/cli.md has no '## Examples' section"
    body = section[1].split("\n## ", 1)[0]
    shown = {
        line.strip()
        for block in re.findall(r"```sh\n(.*?)```", body, flags=re.DOTALL)
        for line in block.splitlines()
        if line.strip()
    }
    in_help = {example for _, command in COMMANDS for example in examples(command)}
    assert sorted(in_help - shown) == [], "in --help but not in docs/cli.md's Examples"
    assert sorted(shown - in_help) == [], "in docs/cli.md's Examples but in no --help"
