"""
Where one session's transcript is, for ``sessionkeeper status`` and ``sessions delete`` (breakit M3): a file
in the sessions directory (or a store URL's ``--transcripts-dir``), rows in a database store, or nowhere the
store can see: a Redis store keeps no transcripts, and a PostgreSQL store imported with ``--transcripts-dir``
keeps them as files. Without ``--transcripts-dir`` such a store's transcript is not found, and the commands
say so (:func:`outside_note`) instead of showing nothing or leaving the file behind without a word.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from sessionkeeper.exceptions import TranscriptNotFoundError, UnsafePathError
from sessionkeeper.store import PostgresTranscriptStorage, SessionEntry, SessionStore, is_store_url
from sessionkeeper.transcript import MemoryTranscriptStorage


__all__ = (
    "TRANSCRIPTS_DIR_HELP",
    "check_transcripts_dir",
    "delete_outcome",
    "outside_note",
    "transcript_state",
)

TRANSCRIPTS_DIR_HELP = (
    "With a store URL whose transcripts are files (Redis, or a database imported with "
    "--transcripts-dir): their directory."
)


def check_transcripts_dir(store: Path | str, transcripts_dir: Path | None) -> None:
    """
    Refuse ``--transcripts-dir`` beside a sessions directory (it holds its transcripts).

    Raises:
        click.UsageError: ``transcripts_dir`` given with a ``store`` that is not a store URL.
    """
    if transcripts_dir is not None and not is_store_url(store):
        raise click.UsageError(
            "--transcripts-dir is for store URLs; a sessions directory holds its transcripts"
        )


async def transcript_state(store: SessionStore, entry: SessionEntry) -> dict[str, Any] | None:
    """
    ``status``'s ``transcript`` of ``entry``: ``{path, exists, bytes}`` for a file (in the sessions
    directory or the ``--transcripts-dir``), plus ``lines`` for one held in the store's storage (a database:
    from the head row, no line read; issue 13). ``None``: no session id, or a store that keeps no
    transcripts (Redis without ``--transcripts-dir``: memory only, a new process has none).
    """
    path = store.transcript_file(entry)
    if path is not None:
        exists = path.is_file()
        return {"path": str(path), "exists": exists, "bytes": path.stat().st_size if exists else None}
    if store.sessions_dir is not None or not isinstance(entry.session_id, str):
        return None
    storage = store.transcript_storage()
    if isinstance(storage, MemoryTranscriptStorage):
        return None
    location = storage.location(entry.session_id)
    try:
        if isinstance(storage, PostgresTranscriptStorage):
            _, _, mark = await storage.read_tail(entry.session_id, lines=0)
        else:
            _, mark = await storage.read(entry.session_id)
    except (TranscriptNotFoundError, UnsafePathError):
        return {"path": location, "exists": False, "bytes": None, "lines": None}
    return {"path": location, "exists": True, "bytes": mark.size, "lines": mark.lines}


def outside_note(
    store: SessionStore,
    entry: SessionEntry,
    state: dict[str, Any] | None,
    *,
    given: Path | str,
    transcripts_dir: Path | None,
) -> str | None:
    """
    What to tell when a store URL (``given``) opened without ``--transcripts-dir`` does not hold
    ``entry``'s transcript (``state``: its :func:`transcript_state`): its file may be in a directory the
    command was not given. ``None`` when there is nothing to tell (a sessions directory,
    ``--transcripts-dir`` given, no session id, or the store holds it).
    """
    if not is_store_url(given) or transcripts_dir is not None or not isinstance(entry.session_id, str):
        return None
    if state is not None and state["exists"]:
        return None
    if isinstance(store.transcript_storage(), MemoryTranscriptStorage):
        where = "this store keeps no transcripts"
    else:
        where = "the transcript is not in the database"
    return f"{where}; if its transcripts are files, give their directory with --transcripts-dir"


def delete_outcome(
    before: dict[str, Any] | None, after: dict[str, Any] | None, *, session_id: object, note: str | None
) -> dict[str, Any] | None:
    """
    What ``sessions delete`` did to the transcript, from its :func:`transcript_state` ``before`` and
    ``after`` the entry was deleted: ``{"outcome", "path"}`` with ``archived`` (``path``: the
    ``<file>.deleted.<stamp>`` archive), ``removed`` (from the database), ``kept`` (``--keep-transcript``,
    or another entry uses it), ``missing`` (there was none), or ``notFound`` (``note``: the store does
    not hold it and no ``--transcripts-dir`` was given, so it was left wherever it is; ``sessionId``
    names it). ``None``: the entry had no session id.
    """
    if note is not None:
        return {"outcome": "notFound", "path": None, "sessionId": session_id, "note": note}
    if before is None:
        return None
    if not before["exists"]:
        return {"outcome": "missing", "path": before["path"]}
    if after is not None and after["exists"]:
        return {"outcome": "kept", "path": before["path"]}
    if "lines" in before:  # held in the store's storage (a database)
        return {"outcome": "removed", "path": before["path"]}
    path = Path(before["path"])
    archives = sorted(path.parent.glob(_glob_escape(path.name) + ".deleted.*"), key=lambda p: p.name)
    return {"outcome": "archived", "path": str(archives[-1]) if archives else None}


def _glob_escape(name: str) -> str:
    """``name`` as a glob pattern matching only itself."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)
