"""
The version of the installed sessionkeeper: ``sessionkeeper.__version__`` and ``sessionkeeper --version``.

The build computes the version from git tags (hatch-vcs: ``vX.Y.Z`` tags, see ``docs/release.md``) and
writes the same string it puts in the distribution's metadata into ``_build_version.py`` beside this
module (not in git; every wheel, sdist and editable install has it). Reading that constant costs no
``importlib.metadata`` lookup, which takes tens of milliseconds at import (``import sessionkeeper`` and
``sessionkeeper --version`` stay cheap; issue 11). It is imported by name at run time, not statically, so
a checkout whose install predates the file still imports and type-checks.

Without that file (an editable install made before the version came from git), the version is the
installed distribution's metadata; with no installed distribution at all (``src/`` put on ``sys.path`` by
hand), it is :data:`UNKNOWN_VERSION`.
"""

from __future__ import annotations

import importlib


__all__ = ("UNKNOWN_VERSION", "__version__")

UNKNOWN_VERSION = "0.0+unknown"
"""The version of a source tree neither built nor installed (PEP 440 valid, below every release)."""


def _read_version() -> str:
    """The build's constant, else the installed metadata, else :data:`UNKNOWN_VERSION`."""
    try:
        built = importlib.import_module("sessionkeeper._build_version")
    except ModuleNotFoundError as err:
        if err.name != "sessionkeeper._build_version":  # pragma: no cover - a broken interpreter
            raise
    else:
        return str(built.version)
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415 - the slow path only

    try:
        return version("sessionkeeper")
    except PackageNotFoundError:
        return UNKNOWN_VERSION


__version__: str = _read_version()
