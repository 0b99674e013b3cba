"""
Write an agent database as a legacy sessions directory (``sessions.json`` + ``<sessionId>.jsonl``), the
files OpenClaw 2026.9.6's legacy bridge writes (``export-legacy.mjs`` in the 9 oracle):

- ``sessions.json``: ``JSON.stringify(store, null, 2)``, every entry with ``sessionFile`` set to
  ``<sessionId>.jsonl`` (replacing OpenClaw's ``sqlite:<agentId>:<sessionId>:<storePath>`` marker);
- ``<sessionId>.jsonl``: ``events.map(JSON.stringify).join("\\n") + "\\n"``, each stored row parsed and
  written again with JavaScript's rules; an empty file when the generation has no rows.

Deviation: over 16 MiB OpenClaw writes a 16 MiB + 1 byte sparse placeholder instead of the transcript;
this writes the transcript.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import attrs

from sessionkeeper._fs import atomic_write_bytes, refuse_symlink
from sessionkeeper.exceptions import OpenClawDatabaseError, SymlinkRefusedError, UnsafePathError
from sessionkeeper.openclaw._reader import AgentDatabase, read_agent_database
from sessionkeeper.records import js_json_stringify
from sessionkeeper.store import is_valid_transcript_session_id, serialize_store


__all__ = ("ImportReport", "import_openclaw_database", "write_sessions_dir")

_JS_SAFE_INTEGER = 2**53


@attrs.frozen(kw_only=True)
class ImportReport:
    """
    What :func:`import_openclaw_database` wrote.

    Attributes:
        database: The database file read.
        out_dir: The sessions directory written.
        schema_version: The database's agent schema version.
        agent_id: ``schema_meta.agent_id``, or ``None``.
        sessions: Entries written to ``sessions.json``.
        transcripts: ``.jsonl`` files written (sessions sharing an id share one file).
        events: Transcript lines written.
        compressed_rows: How many of those were stored as zstd.
    """

    database: Path
    out_dir: Path
    schema_version: int
    agent_id: str | None
    sessions: int
    transcripts: int
    events: int
    compressed_rows: int


def _js_int(text: str) -> int | float:
    """``JSON.parse``'s number for an integer literal: a double once it leaves the safe range."""
    value = int(text)
    return value if -_JS_SAFE_INTEGER < value < _JS_SAFE_INTEGER else float(value)


def js_restringify(text: str) -> str:
    """``JSON.stringify(JSON.parse(text))`` for one stored transcript row."""
    return js_json_stringify(json.loads(text, parse_int=_js_int))


def _file_name(database: AgentDatabase, session_id: str, key: str) -> str:
    if not is_valid_transcript_session_id(session_id) or session_id != session_id.strip():
        raise UnsafePathError(
            f"{database.path}: session {key!r} has id {session_id!r}, which cannot name a transcript file",
            value=session_id,
        )
    return f"{session_id}.jsonl"


def _files(database: AgentDatabase) -> tuple[dict[str, Any], dict[str, bytes], int]:
    store: dict[str, Any] = {}
    files: dict[str, bytes] = {}
    events = 0
    for session in database.sessions:
        name = _file_name(database, session.session_id, session.key)
        entry = dict(session.entry)
        entry["sessionFile"] = name
        store[session.key] = entry
        if name not in files:
            lines = [js_restringify(line) for line in session.lines]
            files[name] = ("\n".join(lines) + "\n").encode() if lines else b""
            events += len(lines)
    return store, files, events


def _is_database(database: AgentDatabase, target: Path) -> bool:
    """Whether ``target`` is the database file itself (same resolved path, or the same inode)."""
    if target.resolve() == database.path.resolve():
        return True
    try:
        return target.exists() and database.path.exists() and target.samefile(database.path)
    except OSError:
        return False


def _check_targets(database: AgentDatabase, out: Path, names: list[str]) -> None:
    """Refuse, before anything is written, every target that cannot be replaced safely."""
    for name in names:
        target = out / name
        refuse_symlink(target)
        if _is_database(database, target):
            raise UnsafePathError(
                f"{target} is the input database; writing there would replace it (choose another --out)",
                value=str(target),
            )
        if target.is_dir():
            raise IsADirectoryError(21, "a directory is in the way of an output file", str(target))


def write_sessions_dir(
    database: AgentDatabase, out_dir: Path | str, *, overwrite: bool = False
) -> ImportReport:
    """
    Write ``database``'s sessions as ``out_dir/sessions.json`` and ``out_dir/<sessionId>.jsonl``.

    Everything is rendered in memory first; a new directory is filled in a sibling temp directory and
    renamed into place, so a failure leaves no partial output. With ``overwrite`` the files are replaced
    one by one in an existing directory (other files there are kept), after every target path has been
    checked (no link, no directory, not the database itself). An ``out_dir`` that is a symbolic link to a
    directory is followed (directory components may be links); a dangling one is refused.

    Args:
        database: What :func:`~sessionkeeper.openclaw.read_agent_database` returned.
        out_dir: The sessions directory to create.
        overwrite: Write into a non-empty ``out_dir``; default ``False``.

    Raises:
        FileExistsError: ``out_dir`` is a non-empty directory (or a file) and ``overwrite`` is false.
        UnsafePathError: A session id cannot name a transcript file, or an output file would be the
            database itself (nothing written).
        SymlinkRefusedError: An output file, or a dangling ``out_dir``, is a symbolic link (nothing written).
        IsADirectoryError: A directory is in the way of an output file (nothing written).
        OSError: The file system refused a write.
    """
    out = Path(out_dir)
    store, files, events = _files(database)
    payload = {**files, "sessions.json": serialize_store(store)}
    if out.is_symlink():
        if not out.exists():
            raise SymlinkRefusedError(out, what="output directory (dangling)")
        real = out.resolve()
    else:
        real = out
    if real.exists() and (not real.is_dir() or any(real.iterdir())):
        if not overwrite or not real.is_dir():
            raise FileExistsError(17, "output exists and is not an empty directory", str(out))
        _check_targets(database, real, list(payload))
        for name, data in payload.items():
            atomic_write_bytes(real / name, data)
    else:
        real.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{real.name}.", dir=real.parent))
        try:
            for name, data in payload.items():
                (staging / name).write_bytes(data)
            if real.exists():
                real.rmdir()
            staging.rename(real)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return ImportReport(
        database=database.path,
        out_dir=out,
        schema_version=database.schema_version,
        agent_id=database.agent_id,
        sessions=len(store),
        transcripts=len(files),
        events=events,
        compressed_rows=database.compressed_rows,
    )


def import_openclaw_database(
    database: Path | str, out_dir: Path | str, *, overwrite: bool = False
) -> ImportReport:
    """
    Read an OpenClaw agent database and write it as a legacy sessions directory (see the module doc).

    The database is never written (:func:`~sessionkeeper.openclaw.read_agent_database`). To go back,
    OpenClaw's own ``openclaw doctor --fix`` imports a sessions directory into the database.

    Raises:
        UnsupportedSchemaVersionError: Unknown schema version (named in the error).
        OpenClawDatabaseError: The database or one of its rows cannot be read (nothing written).
        FileExistsError: ``out_dir`` is not empty and ``overwrite`` is false.
        UnsafePathError: A session id cannot name a transcript file, an output file would be the database
            itself, or an output path is a symbolic link (nothing written).
        IsADirectoryError: A directory is in the way of an output file (nothing written).
    """
    try:
        read = read_agent_database(database)
    except RecursionError as err:  # a hostile row nested beyond the parser's depth
        raise OpenClawDatabaseError("a stored value is nested too deeply", path=Path(database)) from err
    return write_sessions_dir(read, out_dir, overwrite=overwrite)
