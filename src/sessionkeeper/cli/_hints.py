"""
What to run instead, when a command is given a session store where it takes a transcript (issue 11:
``doctor sessions.json`` / ``compact sessions.json`` only said "not a pi session transcript").

Light on purpose (pathlib and re only): it runs on the error path of every transcript command.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path


__all__ = ("looks_like_store", "store_file_hint")

# A store is one JSON object of entries: its first member's value is an object (a transcript's first
# line is a header object whose first member's value is a string).
_JSON_STORE_START = re.compile(rb'^\s*\{\s*"(?:[^"\\]|\\.)*"\s*:\s*\{')
_HEAD_BYTES = 64 * 1024


def looks_like_store(path: Path) -> str | None:
    """
    ``"json"`` or ``"sqlite"`` when ``path`` is (or looks like) a session store file, else ``None``.

    By name (``sessions.json``, ``sessions.sqlite``), else by content: a JSON object whose first member is
    an object and which names a ``sessionId`` in its first 64 KiB (any SQLite file is not taken for one).
    """
    if path.name == "sessions.json":
        return "json"
    if path.name == "sessions.sqlite":
        return "sqlite"
    try:
        if not path.is_file():  # a FIFO or device: opening it could block for ever
            return None
        with path.open("rb") as handle:
            head = handle.read(_HEAD_BYTES)
    except OSError:
        return None
    if _JSON_STORE_START.match(head.removeprefix(b"\xef\xbb\xbf")) and b'"sessionId"' in head:
        return "json"
    return None


def store_file_hint(path: Path, command: str | None) -> str | None:
    """
    The error line for ``command`` run on the session store file ``path`` (``None`` when ``path`` is not
    one): that it is a store, and the commands that take a store or find a session's transcript.
    """
    kind = looks_like_store(path)
    if kind is None:
        return None
    directory = shlex.quote(str(path.parent))
    what = f"{path} is a session store ({'sessions.json' if kind == 'json' else 'SQLite'}), not a transcript"
    if command == "doctor":
        return (
            f"{what}: run 'sessionkeeper doctor {directory}' to check the store and the transcripts of its "
            "sessions directory"
        )
    return (
        f"{what}: '{command or 'this command'}' takes a transcript file; "
        f"'sessionkeeper sessions list --store {directory}' lists the sessions and "
        f"'sessionkeeper status --store {directory} KEY' shows a session's transcript"
    )
