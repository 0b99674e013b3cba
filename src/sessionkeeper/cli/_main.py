"""The root click group, the error-to-exit-code mapping and the command registry."""

from __future__ import annotations

import importlib
import io
import logging
import sys
import warnings
from typing import Any, NoReturn

import click

from sessionkeeper.exceptions import (
    ConfigError,
    SessionKeeperError,
    TranscriptFormatError,
    TranscriptNotFoundError,
    UnsafePathError,
)


__all__ = ("EXIT_BAD_INPUT", "EXIT_ERROR", "EXIT_OK", "cli", "fail", "main")

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_BAD_INPUT = 2

# One module per command (or command group); each exposes ``COMMANDS: tuple[click.Command, ...]``.
_COMMAND_MODULES: tuple[str, ...] = (
    "sessions",
    "cleanup",
    "prune",
    "context",
    "tree",
    "doctor",
    "demo",
    "compact",
)

_BAD_INPUT_ERRORS = (ConfigError, TranscriptFormatError, TranscriptNotFoundError, UnsafePathError)


def fail(message: str, *, code: int = EXIT_ERROR) -> NoReturn:
    """Print ``sessionkeeper: error: <message>`` on stderr (one line) and exit with ``code``."""
    first_line = " ".join(message.split("\n")).strip()
    click.echo(f"sessionkeeper: error: {first_line}", err=True)
    sys.exit(code)


def _usage_error(err: click.UsageError) -> NoReturn:
    """A usage error as one stderr line (click prints usage, a hint and the error on four lines)."""
    if type(err).__name__ == "NoArgsIsHelpError":  # bare command: click shows the help, keep that
        raise err
    hint = f" (see '{err.ctx.command_path} --help')" if err.ctx is not None else ""
    fail(err.format_message() + hint, code=EXIT_BAD_INPUT)


class _Group(click.Group):
    """Maps sessionkeeper errors (and click usage errors) to one stderr line and a documented exit code."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as err:  # the group's own options
            _usage_error(err)

    def invoke(self, ctx: click.Context) -> Any:
        # Session keys and stored strings may hold lone surrogates (JavaScript writes them): print them as
        # ``\\udXXX`` escapes instead of dying on UnicodeEncodeError with a traceback.
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, io.TextIOWrapper):
                stream.reconfigure(errors="backslashreplace")
        try:
            return super().invoke(ctx)
        except click.UsageError as err:  # a subcommand's arguments or options
            _usage_error(err)
        except _BAD_INPUT_ERRORS as err:
            fail(str(err), code=EXIT_BAD_INPUT)
        except SessionKeeperError as err:
            fail(str(err), code=EXIT_ERROR)
        except OSError as err:
            fail(f"{err.strerror or err} ({err.filename})" if err.filename else str(err))


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sessionkeeper")
def cli() -> None:
    """sessionkeeper: inspect, compact and maintain agent session transcripts and stores."""


def _register() -> None:
    for name in _COMMAND_MODULES:
        module = importlib.import_module(f"sessionkeeper.cli._{name}")
        for command in module.COMMANDS:
            cli.add_command(command)


_register()


class _WarningLine(logging.Handler):
    """
    Library warnings as one stderr line each (``sessionkeeper: warning: ...``), no traceback.

    Error records are not printed: every error the library logs is also raised, and :func:`fail` reports
    it as the command's one error line.
    """

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            return
        try:
            text = " ".join(record.getMessage().split("\n")).strip()
        except Exception:  # a malformed log call must not break the command
            return
        click.echo(f"sessionkeeper: warning: {text}", err=True)


def _configure_logging() -> None:
    logger = logging.getLogger("sessionkeeper")
    if not any(isinstance(h, _WarningLine) for h in logger.handlers):
        logger.addHandler(_WarningLine(logging.WARNING))
        logger.propagate = False
    # Python hides DeprecationWarning outside __main__; an operator must see that a config key is legacy.
    warnings.showwarning = _show_warning
    warnings.filterwarnings("default", category=DeprecationWarning, module=r"sessionkeeper(\.|$)")


def _show_warning(  # noqa: PLR0917 - the signature of warnings.showwarning
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    text = " ".join(str(message).split("\n")).strip()
    click.echo(f"sessionkeeper: warning: {text}", err=True)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``sessionkeeper`` script and ``python -m sessionkeeper``."""
    _configure_logging()
    cli.main(args=argv, prog_name="sessionkeeper")
