"""The root click group, the error-to-exit-code mapping and the command registry."""

from __future__ import annotations

import importlib
import io
import sys
from typing import Any, NoReturn

import click

from sessionkeeper._version import __version__
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

# Each command is imported when it runs (or when help lists it): ``--version`` and ``context --json`` do
# not pay for rich, the store, compaction or the runtime (issue 11, "speed an operator feels").
# name -> (module under sessionkeeper.cli, attribute). ``sessions`` comes from ``_cleanup``, which attaches
# its ``cleanup`` subcommand to the group defined in ``_sessions``.
_LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "compact": ("_compact", "compact_command"),
    "context": ("_context", "context_command"),
    "demo": ("_demo", "demo_command"),
    "doctor": ("_doctor", "doctor_command"),
    "export": ("_transfer", "export_command"),
    "import": ("_transfer", "import_command"),
    "import-openclaw": ("_import_openclaw", "import_openclaw_command"),
    "prune": ("_prune", "prune_command"),
    "sessions": ("_cleanup", "sessions_group"),
    "status": ("_sessions", "status_command"),
    "tree": ("_tree", "tree_command"),
}

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
    """
    The root group: loads each subcommand's module on first use (:data:`_LAZY_COMMANDS`), and maps
    sessionkeeper errors (and click usage errors) to one stderr line and a documented exit code.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every subcommand name, loaded or not, sorted (what ``--help`` lists)."""
        return sorted({*_LAZY_COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The subcommand ``cmd_name``, its module imported on first use; ``None`` for an unknown name."""
        found = self.commands.get(cmd_name)
        if found is None and cmd_name in _LAZY_COMMANDS:
            module, attribute = _LAZY_COMMANDS[cmd_name]
            command = getattr(importlib.import_module(f"sessionkeeper.cli.{module}"), attribute)
            if not isinstance(command, click.Command):  # pragma: no cover - a wrong table entry
                raise TypeError(f"sessionkeeper.cli.{module}.{attribute} is not a click command")
            self.add_command(command, cmd_name)
            found = command
        return found

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        """click's context; a usage error of the group's own options exits 2 with one stderr line."""
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as err:  # the group's own options
            _usage_error(err)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the subcommand: logging set up once, output escaping lone surrogates, errors as exit codes."""
        if isinstance(ctx.obj, _Entry):  # the ``sessionkeeper`` script (not a test's CliRunner): once per run
            _configure_logging()
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
            if isinstance(err, TranscriptFormatError) and err.path is not None:
                from sessionkeeper.cli._hints import store_file_hint  # noqa: PLC0415 - error path only

                hint = store_file_hint(err.path, ctx.invoked_subcommand)
                if hint is not None:
                    fail(hint, code=EXIT_BAD_INPUT)
            fail(str(err), code=EXIT_BAD_INPUT)
        except SessionKeeperError as err:
            fail(str(err), code=EXIT_ERROR)
        except OSError as err:
            fail(f"{err.strerror or err} ({err.filename})" if err.filename else str(err))


_EPILOG = """\b
Examples:
  sessionkeeper demo
  sessionkeeper sessions list --store ~/.openclaw/agents/main/sessions
  sessionkeeper context sessions/2f1c7b9e.jsonl
  sessionkeeper doctor ~/.openclaw/agents/main/sessions

\b
OpenClaw keeps an agent's sessions in ~/.openclaw/agents/<agentId>/sessions.
Each command's --help shows its own examples; docs/cli.md is the guide.
"""


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]}, epilog=_EPILOG)
@click.version_option(version=__version__, prog_name="sessionkeeper")
def cli() -> None:
    """sessionkeeper: inspect, compact and maintain agent session transcripts and stores."""


class _Entry:
    """``ctx.obj`` of a run started by :func:`main`: configure logging when a command runs."""


def _configure_logging() -> None:
    """
    Library warnings as one stderr line each (``sessionkeeper: warning: ...``), no traceback.

    Error records are not printed: every error the library logs is also raised, and :func:`fail` reports
    it as the command's one error line. Done when a command runs, not for ``--version``/``--help``
    (``logging`` is not imported for them).
    """
    import logging  # noqa: PLC0415 - not needed by --version (issue 11: start-up time)
    import warnings  # noqa: PLC0415

    class WarningLine(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.ERROR:
                return
            try:
                text = " ".join(record.getMessage().split("\n")).strip()
            except Exception:  # a malformed log call must not break the command
                return
            click.echo(f"sessionkeeper: warning: {text}", err=True)

    # psycopg_pool logs each failed connection attempt ("error connecting in ...", two lines each); the
    # command reports the failure once, as its error line.
    logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)
    logger = logging.getLogger("sessionkeeper")
    if not any(type(h).__name__ == "WarningLine" for h in logger.handlers):
        logger.addHandler(WarningLine(logging.WARNING))
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
    cli.main(args=argv, prog_name="sessionkeeper", obj=_Entry())
