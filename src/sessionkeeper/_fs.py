"""
File-system primitives shared by every layer (DESIGN "Files", "Reliability and security targets").

- :func:`atomic_write_bytes`: temp file ``<name>.<pid>.<uuid>.tmp`` in the same directory, fsync,
  rename over the target, fsync of the directory. A crash leaves the old file or the new one.
- :func:`backup_file`: copy to ``<name>.bak.<ISO stamp with ':' and '.' as '-'>`` with mode 0600
  before any repair or migration rewrite; :func:`backup_bytes` keeps only the bytes a repair removes.
- :func:`check_safe_name`: refuse ids and names that could escape their directory.
- :func:`refuse_symlink`: a path the library writes is never a symbolic link (issue 15 item 7): files
  are created with ``O_EXCL`` (and ``O_NOFOLLOW``), and nothing is renamed over a link.
- Files are created 0600 and directories 0700.

These are synchronous: callers in async code run them through ``anyio.to_thread``.
"""

from __future__ import annotations

import contextlib
import filecmp
import os
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from glob import escape as glob_escape
from pathlib import Path

from sessionkeeper.exceptions import SymlinkRefusedError, UnsafePathError
from sessionkeeper.records import iso_from_ms


__all__ = (
    "DIR_MODE",
    "FILE_MODE",
    "atomic_write_bytes",
    "backup_bytes",
    "backup_file",
    "backup_name",
    "check_safe_name",
    "ensure_dir",
    "fsync_dir",
    "iso_stamp",
    "refuse_symlink",
    "temp_name",
)

FILE_MODE = 0o600
"""Mode of every file sessionkeeper creates."""

DIR_MODE = 0o700
"""Mode of every directory sessionkeeper creates."""

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def iso_stamp(now_ms: int | None = None) -> str:
    """
    Return an ISO-8601 UTC stamp usable in file names: ``2026-05-07T10-11-12-345Z``.

    Args:
        now_ms: Time in ms since the epoch; ``None`` means the current time.

    Returns:
        ``Date.toISOString()`` of that time with ``:`` and ``.`` replaced by ``-`` (the form pi and
        OpenClaw use in artifact names).
    """
    text = iso_from_ms(now_ms if now_ms is not None else time.time_ns() // 1_000_000)
    return text.replace(":", "-").replace(".", "-")


def check_safe_name(value: str, *, what: str = "name") -> str:
    """
    Check that ``value`` can be used as one path component inside a sessions directory.

    Args:
        value: A session id, thread id, agent id or file name.
        what: How to call it in the error message.

    Returns:
        ``value`` unchanged.

    Raises:
        UnsafePathError: ``value`` is empty, ``.`` or ``..``, or contains ``/``, ``\\`` or NUL.
    """
    if not value or value in {".", ".."} or any(ch in value for ch in ("/", "\\", "\0")):
        raise UnsafePathError(f"unsafe {what}: {value!r} could escape the sessions directory", value=value)
    return value


def refuse_symlink(path: Path, *, what: str = "file") -> None:
    """
    Raise when ``path`` itself is a symbolic link (dangling or not); directory components may be links.

    Raises:
        SymlinkRefusedError: ``path`` is a link (issue 15 item 7).
    """
    if path.is_symlink():
        raise SymlinkRefusedError(path, what=what)


def ensure_dir(path: Path) -> None:
    """
    Create ``path`` and every missing parent with mode 0700; existing directories are left as they are.

    (``Path.mkdir(parents=True, mode=...)`` applies ``mode`` to the last directory only: the parents would
    get the umask's default mode.)
    """
    missing: list[Path] = []
    current = path
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=DIR_MODE)


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename or create in it is durable (no-op where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def temp_name(target: Path) -> Path:
    """Return a unique temp path next to ``target``: ``<name>.<pid>.<uuid>.tmp`` (DESIGN "Files")."""
    return target.with_name(f"{target.name}.{os.getpid()}.{uuid.uuid4()}.tmp")


def atomic_write_bytes(target: Path, data: bytes | Sequence[bytes], *, fsync: bool = True) -> None:
    """
    Replace ``target`` with ``data`` atomically.

    Writes a temp file in the same directory (mode 0600), fsyncs it, renames it over ``target``,
    then fsyncs the directory. On any error the temp file is removed and ``target`` is untouched.
    A ``target`` that is a symbolic link is refused, checked before writing and again right before the
    rename (the rename would replace the link by a regular file).

    Args:
        target: The file to replace or create.
        data: The complete new content, as one ``bytes`` or as pieces written in order with ``writev``
            (no concatenated copy of a large file is made).
        fsync: ``False`` skips both fsyncs (tests, scratch files); the rename stays atomic.

    Raises:
        SymlinkRefusedError: ``target`` is a symbolic link (nothing written).
        OSError: The write or rename failed.
    """
    ensure_dir(target.parent)
    refuse_symlink(target)
    tmp = temp_name(target)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, FILE_MODE)
    try:
        try:
            _write_pieces(fd, [data] if isinstance(data, bytes) else data)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        refuse_symlink(target)
        tmp.replace(target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if fsync:
        fsync_dir(target.parent)


def _write_pieces(fd: int, pieces: Sequence[bytes]) -> None:
    """Write every piece in order with ``writev`` (at most 512 buffers a call), handling short writes."""
    views = [memoryview(piece) for piece in pieces if piece]
    while views:
        written = os.writev(fd, views[:512])
        while written and views:
            if written >= len(views[0]):
                written -= len(views[0])
                views.pop(0)
            else:
                views[0] = views[0][written:]
                written = 0


def backup_name(target: Path, now_ms: int | None = None) -> Path:
    """Return ``<name>.bak.<stamp>`` next to ``target`` (see :func:`iso_stamp`)."""
    return target.with_name(f"{target.name}.bak.{iso_stamp(now_ms)}")


def _identical_backup(target: Path) -> Path | None:
    """An existing ``<name>.bak.*`` file with exactly ``target``'s bytes, if any."""
    try:
        size = target.stat().st_size
        candidates = sorted(target.parent.glob(f"{glob_escape(target.name)}.bak.*"))
    except OSError:
        return None
    for candidate in candidates:
        try:
            if (
                candidate.is_file()
                and candidate.stat().st_size == size
                and filecmp.cmp(target, candidate, False)
            ):
                return candidate
        except OSError:
            continue
    return None


def backup_file(target: Path, *, now_ms: int | None = None, reuse_identical: bool = False) -> Path:
    """
    Copy ``target`` to a new 0600 backup file before it is repaired or rewritten.

    Never overwrites an earlier backup: a numeric suffix is added when the name is taken.

    Args:
        target: The file to back up.
        now_ms: Time for the stamp in ms since the epoch; ``None`` means now.
        reuse_identical: Return an existing backup holding exactly the same bytes instead of writing
            another (for a file reported as corrupt and left unchanged, which every reader backs up).

    Returns:
        The backup path.

    Raises:
        OSError: The copy failed (the caller must then not modify ``target``).
    """
    if reuse_identical:
        existing = _identical_backup(target)
        if existing is not None:
            return existing
    dest = backup_name(target, now_ms)
    counter = 1
    while True:
        try:
            fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, FILE_MODE)
            break
        except FileExistsError:
            dest = backup_name(target, now_ms).with_name(f"{backup_name(target, now_ms).name}.{counter}")
            counter += 1
    try:
        with target.open("rb") as src, os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(src, out)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            dest.unlink()
        raise
    dest.chmod(FILE_MODE)
    return dest


def _new_backup(dest_for: Callable[[int], Path]) -> tuple[int, Path]:
    """Create the first free backup name (``O_EXCL``: never over an earlier backup or a symlink)."""
    counter = 0
    while True:
        dest = dest_for(counter)
        try:
            return os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, FILE_MODE), dest
        except FileExistsError:
            counter += 1


def backup_bytes(target: Path, data: bytes, *, label: str, now_ms: int | None = None) -> Path:
    """
    Save the bytes a repair is about to remove from ``target`` (issue 15: not a copy of the whole file).

    Written to ``<name>.<label>.bak.<stamp>`` (mode 0600, fsynced, ``O_EXCL``; a numeric suffix when the
    name is taken), a name maintenance recognises as a backup (``*.bak.<stamp>``) and sweeps with the other
    artifacts. The torn-tail repair passes ``label="torn-<offset>"``: the file holds exactly the bytes that
    stood at that byte offset.

    Args:
        target: The file being repaired.
        data: The bytes removed from it.
        label: Says what was removed and where (a single path component, no ``/``).
        now_ms: Time for the stamp in ms since the epoch; ``None`` means now.

    Returns:
        The backup path.

    Raises:
        OSError: The backup could not be written (the caller must then not modify ``target``).
    """
    check_safe_name(label, what="backup label")
    base = target.with_name(f"{target.name}.{label}.bak.{iso_stamp(now_ms)}")
    fd, dest = _new_backup(lambda n: base if n == 0 else base.with_name(f"{base.name}.{n}"))
    try:
        try:
            _write_pieces(fd, [data])
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            dest.unlink()
        raise
    return dest
