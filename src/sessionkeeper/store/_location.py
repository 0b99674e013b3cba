"""
Where a store is on disk (DESIGN "Files"): a sessions directory, or its ``sessions.json`` or
``sessions.sqlite``, resolved to the store file and its backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from sessionkeeper.exceptions import ConfigError
from sessionkeeper.store._json import STORE_FILE_NAME
from sessionkeeper.store._sqlite import SQLITE_FILE_NAME


__all__ = ("BackendName", "resolve_store_location")

BackendName = Literal["json", "sqlite"]
"""The file backends a sessions directory can hold."""


def resolve_store_location(path: Path | str, backend: BackendName | None = None) -> tuple[Path, BackendName]:
    """
    Resolve ``--store`` (a sessions directory, or its ``sessions.json``/``sessions.sqlite``) to the store
    file and backend (DESIGN "Files").

    Without ``backend``: the one whose file exists, else ``"json"``.

    Returns:
        ``(store file, backend name)``.

    Raises:
        ConfigError: Both files exist and no backend was named, the file name contradicts ``backend``, or
            ``path`` is another file.
    """
    target = Path(path).expanduser()  # "~/.openclaw/agents/main/sessions", never a "./~" directory
    if target.name in (STORE_FILE_NAME, SQLITE_FILE_NAME) and not target.is_dir():
        found: BackendName = "json" if target.name == STORE_FILE_NAME else "sqlite"
        if backend is not None and backend != found:
            raise ConfigError(f"{target} is a {found} store, not {backend}", key="backend")
        return target, found
    if target.exists() and not target.is_dir():
        raise ConfigError(
            f"{target} is not a sessions directory, nor its {STORE_FILE_NAME} or {SQLITE_FILE_NAME}"
        )
    if backend == "json":
        return target / STORE_FILE_NAME, "json"
    if backend == "sqlite":
        return target / SQLITE_FILE_NAME, "sqlite"
    if backend is not None:
        raise ConfigError(f"unknown backend {backend!r} (json or sqlite)", key="backend")
    has_json = (target / STORE_FILE_NAME).exists()
    has_sqlite = (target / SQLITE_FILE_NAME).exists()
    if has_json and has_sqlite:
        raise ConfigError(
            f"{target} holds both {STORE_FILE_NAME} and {SQLITE_FILE_NAME}; choose one with backend=",
            key="backend",
        )
    if has_sqlite:
        return target / SQLITE_FILE_NAME, "sqlite"
    return target / STORE_FILE_NAME, "json"
