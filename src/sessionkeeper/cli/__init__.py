"""
The ``sessionkeeper`` command line (click + rich). Thin: it calls the public API only.

Exit codes: 0 success, 1 error (an operation failed, or the ``cli`` extra is not installed), 2 bad input or
usage.

This module imports neither click nor rich: the ``sessionkeeper`` script of a base install (no ``[cli]``
extra) reaches :func:`main`, which says what to install instead of dying on ``ModuleNotFoundError``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any


if TYPE_CHECKING:
    from sessionkeeper.cli._main import cli


__all__ = ("cli", "main")

_CLI_EXTRA_HINT = "sessionkeeper's command line needs the cli extra: pip install 'sessionkeeper[cli]'"
"""The stderr line of :func:`main` when click or rich is not installed (then the exit code is 1)."""


def _missing_cli_module() -> str | None:
    """The first of click and rich that cannot be imported, else ``None`` (rich is found, not loaded)."""
    try:
        import click  # noqa: F401, PLC0415 - the check itself; _main imports it right after
    except ImportError:
        return "click"
    import importlib.util  # noqa: PLC0415 - only here: the commands import rich when they run

    try:
        found = importlib.util.find_spec("rich")
    except (ImportError, ValueError):
        found = None
    return "rich" if found is None else None


def main(argv: list[str] | None = None) -> None:
    """
    Entry point of the ``sessionkeeper`` script and ``python -m sessionkeeper``: run the command in
    ``argv`` (default ``sys.argv[1:]``); exits with the command's code (see the module docstring).

    Without the ``cli`` extra (click or rich missing) it prints one stderr line, ``sessionkeeper's command
    line needs the cli extra: pip install 'sessionkeeper[cli]' (no module named 'click')``, and exits 1.
    """
    missing = _missing_cli_module()
    if missing is not None:
        sys.stderr.write(f"{_CLI_EXTRA_HINT} (no module named '{missing}')\n")
        sys.exit(1)
    from sessionkeeper.cli._main import main as run  # noqa: PLC0415 - after the check above

    run(argv)


def __getattr__(name: str) -> Any:
    """``sessionkeeper.cli.cli``, the root click group, imported on first use (it needs click)."""
    if name == "cli":
        from sessionkeeper.cli._main import cli as group  # noqa: PLC0415 - lazy on purpose

        return group
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
