"""
The ``FILE``/``PATH`` argument of the commands that read transcripts in place (``tree``, ``context``,
``compact``, ``prune``, ``doctor``): a :class:`click.Path` that refuses a store URL.

Those commands read files; given ``postgresql://...`` click took it for a relative path and the command said
``no such file or directory: postgresql:/127...`` (review of session 5). A URL is now a usage error (exit 2)
that names what to run instead: ``export`` the store to a directory first.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click


__all__ = ("TranscriptPath", "url_scheme")

# ``scheme://``, a scheme as RFC 3986 section 3.1 spells it; a local path never starts so (``C:\\``).
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def url_scheme(value: str) -> str | None:
    """The scheme of ``value`` if it looks like a URL (``postgresql://h`` -> ``"postgresql"``), else None."""
    found = _URL.match(value)
    return found.group(1) if found else None


class TranscriptPath(click.Path):
    """
    A :class:`click.Path` (``path_type=Path``; ``dir_okay`` as given) for a command that reads files.

    A value that looks like a URL (``postgresql://``, ``redis://``, ``sqlite://``, ...) fails with
    :class:`click.BadParameter` (exit 2 through the root group): only the scheme is repeated, never the
    URL, which may hold a password.
    """

    def __init__(self, *, dir_okay: bool = False) -> None:
        super().__init__(path_type=Path, dir_okay=dir_okay)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and (scheme := url_scheme(value)) is not None:
            command = ctx.info_name if ctx is not None else "this command"
            target = "DIR" if self.dir_okay else "a file in DIR"
            what = "files and directories" if self.dir_okay else "transcript files"
            self.fail(
                f"'{command}' reads {what}, not a store URL ({scheme}://...): run "
                f"'sessionkeeper export --store URL --out DIR' first and give '{command}' {target}",
                param,
                ctx,
            )
        return super().convert(value, param, ctx)
