"""
What each file of a sessions directory is (OpenClaw spec §2.4, ``artifacts.ts``).

Archives (``<file>.deleted|reset|bak.<stamp>``, legacy ``sessions.json.bak.<n>``), compaction checkpoint
transcripts, trajectory sidecars, store temp files and primary transcripts, plus the archive time stamp
format. Pure name logic: nothing here touches the disk.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Final

from sessionkeeper.store._paths import ArchiveReason, archive_stamp


__all__ = (
    "PROMPT_BLOB_DIR",
    "STORE_TEMP_STALE_MS",
    "archive_file_name",
    "archive_timestamp_ms",
    "is_archive_name",
    "is_checkpoint_transcript_name",
    "is_primary_transcript_name",
    "is_prompt_blob_temp_name",
    "is_store_temp_name",
    "is_trajectory_name",
    "is_transcript_backup_name",
    "is_write_temp_name",
    "prompt_blob_hash",
    "prompt_blob_name",
    "trajectory_names",
    "transcript_backup_stamp_ms",
)

STORE_TEMP_STALE_MS: Final = 5 * 60 * 1000
"""Store temp files older than this (5 min) are removable (spec §1.5, §2.4)."""

# OpenClaw's stamp replaces ':' only (2026-09-21T12-00-00.000Z); our own _fs.iso_stamp also replaces '.',
# so both forms are recognised.
_STAMP = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2})-(\d{2})-(\d{2})(?:[.-](\d{3}))?Z$")
_LEGACY_STORE_BACKUP = re.compile(r"^sessions\.json\.bak\.\d+$")
_CHECKPOINT = re.compile(
    r"^(.+)\.checkpoint\.([0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12})\.jsonl$",
    re.IGNORECASE,
)
_TEMP_ID = r"(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32})"


def archive_file_name(file_name: str, reason: ArchiveReason, now_ms: int) -> str:
    """``<file>.<reason>.<stamp>`` (spec §2.4), the stamp being OpenClaw's (:func:`archive_stamp`)."""
    return f"{file_name}.{reason}.{archive_stamp(now_ms)}"


def archive_timestamp_ms(file_name: str, reason: ArchiveReason) -> int | None:
    """
    The time stamp of an archive of the given reason, in ms since the epoch, or ``None``.

    Reads the text after the last ``.<reason>.`` marker (``parseSessionArchiveTimestamp``).
    """
    marker = f".{reason}."
    index = file_name.rfind(marker)
    if index < 0:
        return None
    match = _STAMP.match(file_name[index + len(marker) :])
    if not match:
        return None
    year, month, day, hour, minute, second, millis = match.groups()
    try:
        when = _dt.datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=_dt.UTC
        )
    except ValueError:
        return None
    return int(when.timestamp()) * 1000 + int(millis or 0)


def is_archive_name(file_name: str) -> bool:
    """True for ``*.deleted|reset|bak.<stamp>`` archives and legacy ``sessions.json.bak.<n>``."""
    if _LEGACY_STORE_BACKUP.match(file_name):
        return True
    return any(archive_timestamp_ms(file_name, reason) is not None for reason in ("deleted", "reset", "bak"))


def transcript_backup_stamp_ms(file_name: str) -> int | None:
    """
    The time stamp (ms since the epoch) of a transcript backup, or ``None`` for any other name.

    Transcript backups: ``<name>.jsonl.bak.<stamp>`` (migration, ``doctor --fix``) and
    ``<name>.jsonl.<label>.bak.<stamp>`` (a torn-tail repair's removed bytes, ``torn-<offset>``), each
    possibly with the ``.<n>`` suffix a backup gets when its name was taken. Store backups
    (``sessions.json.bak.*``) are not transcript backups.
    """
    base = re.sub(r"\.\d+$", "", file_name)
    index = base.rfind(".bak.")
    if index < 0:
        return None
    head = base[:index]
    if not (head.endswith(".jsonl") or re.search(r"\.jsonl\.torn-\d+$", head)):
        return None
    return archive_timestamp_ms(base, "bak")


def is_transcript_backup_name(file_name: str) -> bool:
    """True for a transcript backup (see :func:`transcript_backup_stamp_ms`)."""
    return transcript_backup_stamp_ms(file_name) is not None


def is_checkpoint_transcript_name(file_name: str) -> bool:
    """True for ``<sessionId>.checkpoint.<uuid v1-5>.jsonl``."""
    return _CHECKPOINT.match(file_name) is not None


def is_trajectory_name(file_name: str) -> bool:
    """True for ``*.trajectory.jsonl`` and ``*.trajectory-path.json`` sidecars."""
    return file_name.endswith((".trajectory.jsonl", ".trajectory-path.json"))


def is_primary_transcript_name(file_name: str) -> bool:
    """True for a live transcript: ends ``.jsonl`` and is not a trajectory, checkpoint or archive."""
    if file_name == "sessions.json" or not file_name.endswith(".jsonl"):
        return False
    if file_name.endswith(".trajectory.jsonl") or is_checkpoint_transcript_name(file_name):
        return False
    return not is_archive_name(file_name)


def is_store_temp_name(file_name: str, store_name: str = "sessions.json") -> bool:
    """True for ``<store>.[<pid>.]<uuid>.tmp`` (OpenClaw's dashed UUID, or our 32-hex form)."""
    pattern = rf"^{re.escape(store_name)}\.(?:\d+\.)?{_TEMP_ID}\.tmp$"
    return re.match(pattern, file_name, re.IGNORECASE) is not None


_WRITE_TEMP = re.compile(
    r"^.+\.\d+\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.tmp$", re.IGNORECASE
)


def is_write_temp_name(file_name: str, store_name: str = "sessions.json") -> bool:
    """
    True for a temp file of this library's writes, ``<name>.<pid>.<uuid>.tmp`` (``_fs.temp_name``):
    transcript rewrites (migration, ``doctor --fix``) and the named-temp fallback of lock files, which a
    killed process leaves behind (issue 15). The store's own temp (:func:`is_store_temp_name`) and prompt
    blob temps (``skills-prompts/...``) are not: they keep OpenClaw's rules (``sessions cleanup``, the disk
    budget).
    """
    if "/" in file_name:  # only files directly in the sessions directory (prompt blob temps keep theirs)
        return False
    return _WRITE_TEMP.match(file_name) is not None and not is_store_temp_name(file_name, store_name)


def trajectory_names(transcript_name: str) -> tuple[str, str]:
    """
    The trajectory sidecars of a transcript: ``<base>.trajectory-path.json``, ``<base>.trajectory.jsonl``.
    """
    base = transcript_name[:-6] if transcript_name.endswith(".jsonl") else transcript_name
    return f"{base}.trajectory-path.json", f"{base}.trajectory.jsonl"


PROMPT_BLOB_DIR: Final = "skills-prompts/sha256"
"""Where OpenClaw keeps skills prompt blobs, relative to the sessions directory (spec §1.2)."""

_PROMPT_BLOB = re.compile(r"^skills-prompts/sha256/([a-f0-9]{2})/([a-f0-9]{64})\.txt$")
_PROMPT_BLOB_TEMP = re.compile(
    r"^skills-prompts/sha256/[a-f0-9]{2}/[a-f0-9]{64}\.txt\.(?:\d+\.)?"
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.tmp$"
)


def prompt_blob_name(digest: str) -> str:
    """``skills-prompts/sha256/<2 hex>/<64 hex>.txt``: a prompt blob's path relative to the sessions dir."""
    return f"{PROMPT_BLOB_DIR}/{digest[:2]}/{digest}.txt"


def prompt_blob_hash(name: str) -> str | None:
    """The sha256 of a prompt blob path (relative to the sessions dir), or ``None`` for other names."""
    match = _PROMPT_BLOB.match(name)
    return match.group(2) if match else None


def is_prompt_blob_temp_name(name: str) -> bool:
    """True for a prompt blob's temp file ``<hash>.txt.[<pid>.]<uuid>.tmp``."""
    return _PROMPT_BLOB_TEMP.match(name) is not None
